"""``kfcompile`` command line: argument parsing and printing around the pure core.

Exit status: 0 success, 1 a problem with the spec or its output (one line per problem on
stderr), 2 a usage error. Nothing here imports ``kubernetes``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kfcompile import yamlio
from kfcompile.errors import KfcompileError, Problem, SpecError
from kfcompile.load import load_spec
from kfcompile.spec import JobSpec
from kfcompile.targets import DEFAULT_TARGET, TARGETS, Rendered, base, target


class UsageError(Exception):
    """Bad arguments or unreadable files: exit status 2."""


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _load(path: str) -> JobSpec:
    return load_spec(_read(path))


def _render(args: argparse.Namespace) -> Rendered:
    return target(args.target).render(_load(args.spec))


def _format(objects: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        doc = objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List", "items": objects}
        return json.dumps(doc, indent=2) + "\n"
    return yamlio.dump_all(objects)


def cmd_render(args: argparse.Namespace) -> int:
    text = _format(_render(args).objects, args.output)
    if args.check is None:
        sys.stdout.write(text)
        return 0
    expected = _read(args.check)
    if expected == text:
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=args.check,
            tofile=f"render {args.spec} --target {args.target}",
        )
    )
    print(f"{args.check}: differs from the rendered output", file=sys.stderr)
    return 1


def cmd_validate(args: argparse.Namespace) -> int:
    objects = _render(args).objects
    problems: list[Problem] = []
    for crd_path in args.crd:
        from kfcompile import crd  # jsonschema is loaded only when a CRD is given

        crds = [d for d in yamlio.load_all(_read(crd_path)) if isinstance(d, dict)]
        for obj in objects:
            kind = obj.get("kind")
            matching = [c for c in crds if c.get("spec", {}).get("names", {}).get("kind") == kind]
            for c in matching:
                problems += [Problem(crd_path, e) for e in crd.errors(obj, c)]
    if problems:
        raise KfcompileError(problems)
    checked = f" against {', '.join(args.crd)}" if args.crd else ""
    print(f"{args.spec}: valid for {args.target}{checked}", file=sys.stderr)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    rendered = _render(args)
    if args.output == "json":
        rows = [
            {"source": p.source, "object": _name(rendered.objects[p.doc]), "path": p.path,
             "value": p.value, "merge": p.merge}
            for p in rendered.placements
        ]
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(p.source) for p in rendered.placements), default=0)
    for p in rendered.placements:
        value = json.dumps(p.value, separators=(",", ":"))
        how = " (merged)" if p.merge else ""
        obj = _name(rendered.objects[p.doc])
        print(f"{p.source:<{width}}  {obj} {p.path} = {value}{how}")
    return 0


def _name(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def cmd_targets(args: argparse.Namespace) -> int:
    if args.output == "json":
        print(json.dumps({name: _support(name) for name in TARGETS}, indent=2))
        return 0
    for t in TARGETS.values():
        print(f"{t.name:<15} {t.api_version} {t.kind:<11} {t.releases}")
    slots = sorted({s for t in TARGETS.values() for s in t.table if not s.endswith(".*")})
    print()
    header = "".join(f"{name:>15}" for name in TARGETS)
    print(f"{'slot':<34}{header}")
    for slot in slots:
        marks = "".join(f"{'yes' if _supports(name, slot) else '-':>15}" for name in TARGETS)
        print(f"{slot:<34}{marks}")
    return 0


def _supports(name: str, slot: str) -> bool:
    return base.lookup(TARGETS[name].table, slot)[1] is not None


def _support(name: str) -> dict[str, Any]:
    t = TARGETS[name]
    return {
        "apiVersion": t.api_version,
        "kind": t.kind,
        "releases": t.releases,
        "slots": {slot: list(s.paths) if s else None for slot, s in t.table.items()},
    }


def cmd_schema(args: argparse.Namespace) -> int:
    from kfcompile.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kfcompile",
        description="Compile a training-job spec into Kubeflow custom resources.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_spec(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("spec", help="job spec YAML file ('-' for stdin)")
        p.add_argument(
            "-t", "--target", default=DEFAULT_TARGET, choices=list(TARGETS),
            help=f"output shape (default {DEFAULT_TARGET})",
        )
        return p

    p = with_spec("render", "print the objects to apply, in apply order")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    p.add_argument("--check", metavar="GOLDEN", help="compare with GOLDEN; exit 1 with a diff")
    p.set_defaults(func=cmd_render)

    p = with_spec("validate", "check the spec and that the target can express all of it")
    p.add_argument("--crd", action="append", default=[], metavar="FILE",
                   help="also validate the output against this CRD file (repeatable)")
    p.set_defaults(func=cmd_validate)

    p = with_spec("explain", "show where every spec value lands in the output")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("targets", help="list targets and what each supports")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("schema", help="print the JSON Schema of the job spec")
    p.set_defaults(func=cmd_schema)
    return parser


def _fail(label: str, problems: Sequence[Problem]) -> NoReturn:
    for problem in problems:
        print(f"{label}: {problem}", file=sys.stderr)
    raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"kfcompile: {exc}", file=sys.stderr)
        return 2
    except KfcompileError as exc:
        label = getattr(args, "spec", "kfcompile")
        _fail(label if isinstance(exc, SpecError) else f"{label} ({args.target})", exc.problems)
    except BrokenPipeError:  # `kfcompile render ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

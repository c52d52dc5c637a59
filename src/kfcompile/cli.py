"""``kfcompile`` command line: argument parsing and printing around the pure core.

Exit status: 0 success, 1 a problem with a spec or its output (one line per problem on stderr,
``<file>: <field path>: <message>``) or with the cluster, 2 a usage error. Nothing here imports
``kubernetes``: the cluster commands (``cli_cluster``) load the adapter when they run.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kfcompile import yamlio
from kfcompile.errors import Problem, SpecError, UnsupportedFeature
from kfcompile.load import load_spec
from kfcompile.spec import JobSpec
from kfcompile.targets import DEFAULT_TARGET, TARGETS, Rendered, canonical_name, target


class UsageError(Exception):
    """Bad arguments or unreadable files: exit status 2."""


class Failed(Exception):
    """Problems to print, each prefixed with where they come from: exit status 1."""

    def __init__(self, label: str, problems: Iterable[Problem | str]) -> None:
        super().__init__(label)
        self.label = label
        self.problems = [str(p) for p in problems]


def _read(path: str) -> str:
    """The file's text. A file that cannot be read is a usage error; one that is not UTF-8 text
    (a binary file) is a malformed file."""
    try:
        return _text(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        bad = f"0x{exc.object[exc.start]:02x}"
        raise Failed(path, [f"not UTF-8 text: {exc.reason} {bad} at byte {exc.start}"]) from None


def _text(path: str) -> str:
    if path != "-":
        return Path(path).read_text(encoding="utf-8")
    raw = getattr(sys.stdin, "buffer", None)  # bytes, whatever the locale's encoding
    return sys.stdin.read() if raw is None else raw.read().decode("utf-8")


def _load(path: str) -> JobSpec:
    try:
        return load_spec(_read(path))
    except SpecError as exc:
        raise Failed(path, exc.problems) from None


def _compile(path: str, target_name: str, spec: JobSpec | None = None) -> Rendered:
    spec = spec or _load(path)
    try:
        return target(target_name).render(spec)
    except UnsupportedFeature as exc:
        raise Failed(f"{path} ({target_name})", exc.problems) from None


def _format(objects: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        doc = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        return json.dumps(doc, indent=2) + "\n"
    return yamlio.dump_all(objects)


def outcome(spec: JobSpec, target_name: str, output: str = "yaml") -> tuple[str, str]:
    """(file suffix, text) of rendering ``spec`` for one target: the objects, or why not."""
    try:
        return output, _format(target(target_name).render(spec).objects, output)
    except UnsupportedFeature as exc:
        return "err", str(exc) + "\n"


def file_stem(target_name: str) -> str:
    return target_name.replace("/", "-")


# --- commands -------------------------------------------------------------------------------


def cmd_render(args: argparse.Namespace) -> int:
    targets = list(TARGETS) if args.target == "all" else [args.target]
    if args.with_secrets and (args.out is not None or args.check is not None):
        # Secret values go to stdout only, where the user decides what happens to them; --out
        # and --check trees are files that get kept, diffed and committed.
        flag = "--out" if args.out is not None else "--check"
        raise UsageError(
            f"--with-secrets prints the Secret to stdout only and cannot be used with {flag}"
        )
    if args.out is not None:
        return _render_matrix(args.spec, targets, Path(args.out), args.output)
    if len(targets) > 1:
        raise UsageError("--target all writes one file per target: give --out DIR")
    if args.check is not None:
        if len(args.spec) != 1:
            raise UsageError("--check compares one spec with one golden file")
        return _check(args.spec[0], args.target, args.output, args.check)
    objects = []
    for path in args.spec:
        spec = _load(path)
        rendered = _compile(path, args.target, spec).objects
        if spec.secret_env:
            rendered = _with_secret(path, spec, rendered, args.with_secrets)
        objects += rendered
    sys.stdout.write(_format(objects, args.output))
    return 0


def _with_secret(
    path: str, spec: JobSpec, objects: list[dict[str, Any]], with_secrets: bool
) -> list[dict[str, Any]]:
    """The Secret of ``secret_env`` goes in only when asked: its values are secrets."""
    if not with_secrets:
        print(
            f"{path}: note: secret_env reads Secret {spec.secret_name}, not written here "
            "(`kfcompile submit` creates it; `render --with-secrets` writes it)",
            file=sys.stderr,
        )
        return objects
    import os

    from kfcompile.lifecycle import ClusterError, secret

    try:
        return [*objects[:-1], secret(spec, os.environ, spec.namespace), objects[-1]]
    except ClusterError as exc:
        raise Failed(path, str(exc).splitlines()) from None


def _render_matrix(specs: list[str], targets: list[str], out: Path, output: str) -> int:
    """Write every spec for every target to ``out/<spec>/<target>.<yaml|json|err>``."""
    rows = []
    for path in specs:
        spec = _load(path)
        folder = out / Path(path).stem
        cells = []
        for name in targets:
            suffix, text = outcome(spec, name, output)
            write_file(folder / f"{file_stem(name)}.{suffix}", text)
            cells.append("ok" if suffix != "err" else f"{text.count(chr(10))} unsupported")
        rows.append((Path(path).name, cells))
    width = max(len(name) for name, _ in rows)
    print(f"{'spec':<{width}}  " + "  ".join(f"{t:<15}" for t in targets).rstrip())
    for name, cells in rows:
        print(f"{name:<{width}}  " + "  ".join(f"{c:<15}" for c in cells).rstrip())
    return 0


def write_file(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _check(spec: str, target_name: str, output: str, golden: str) -> int:
    text = _format(_compile(spec, target_name).objects, output)
    expected = _read(golden)
    if expected == text:
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            fromfile=golden,
            tofile=f"render {spec} --target {target_name}",
        )
    )
    print(f"{golden}: differs from the rendered output", file=sys.stderr)
    return 1


def cmd_validate(args: argparse.Namespace) -> int:
    """Check every spec given, report each, and fail if any is invalid."""
    status = 0
    for path in args.spec:
        try:
            objects = _compile(path, args.target).objects
            problems = [p for crd_path in args.crd for p in _crd_problems(objects, crd_path)]
            if problems:
                raise Failed(f"{path} ({args.target})", problems)
        except Failed as exc:
            _print_failure(exc)
            status = 1
            continue
        against = f" against {', '.join(args.crd)}" if args.crd else ""
        print(f"{path}: valid for {args.target}{against}", file=sys.stderr)
    return status


def _crd_problems(objects: list[dict[str, Any]], crd_path: str) -> list[str]:
    from kfcompile import crd  # jsonschema is loaded only when a CRD is given

    try:
        crds = [d for d in yamlio.load_all(_read(crd_path)) if isinstance(d, dict)]
    except SpecError as exc:
        raise Failed(crd_path, exc.problems) from None
    found = []
    for obj in objects:
        if obj["apiVersion"] == "v1":
            continue  # core companions (ConfigMap) have no CRD
        matching = [
            c for c in crds if c.get("spec", {}).get("names", {}).get("kind") == obj["kind"]
        ]
        if not matching:
            raise Failed(crd_path, [f"no CustomResourceDefinition for kind {obj['kind']} here"])
        for c in matching:
            try:
                found += [f"{_name(obj)}: {e} (per {crd_path})" for e in crd.errors(obj, c)]
            except ValueError as exc:  # not a usable CRD
                raise Failed(crd_path, [str(exc)]) from None
    return found


def cmd_explain(args: argparse.Namespace) -> int:
    rendered = _compile(args.spec[0], args.target)
    rows = [
        {
            "source": p.source,
            "object": _name(rendered.objects[p.doc]),
            "path": p.path,
            "value": p.value,
            "merged": p.merge,
        }
        for p in rendered.placements
    ]
    if args.output == "json":
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(r["source"]) for r in rows), default=0)
    for r in rows:
        value = json.dumps(r["value"], separators=(",", ":"))
        how = " (merged)" if r["merged"] else ""
        print(f"{r['source']:<{width}}  {r['object']} {r['path']} = {value}{how}")
    return 0


def _name(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def cmd_targets(args: argparse.Namespace) -> int:
    from kfcompile.reference import override_support, support

    marks = support()
    hatches = override_support()
    if args.output == "json":
        doc = {
            name: {
                "apiVersion": t.api_version,
                "kind": t.kind,
                "releases": t.releases,
                "supports": {field: m[name] for field, m in marks.items()},
                "overrides": {
                    field: {k: m[name] for k, m in keys.items()} for field, keys in hatches.items()
                },
            }
            for name, t in TARGETS.items()
        }
        print(json.dumps(doc, indent=2))
        return 0
    shown: dict[bool | str, str] = {True: "yes", False: "-", "partial": "partial"}
    for t in TARGETS.values():
        print(f"{t.name:<15} {t.kind:<11} {t.api_version:<31} {t.releases}")
    rows: list[tuple[str, Mapping[str, bool | str]]] = list(marks.items())
    rows += [(f"{field}.{k}", m) for field, keys in hatches.items() for k, m in keys.items()]
    width = max(len(field) for field, _ in rows) + 2
    print(f"\n{'spec field':<{width}}" + "".join(f"{name:>15}" for name in TARGETS))
    for field, m in rows:
        print(f"{field:<{width}}" + "".join(f"{shown[m[name]]:>15}" for name in TARGETS))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from kfcompile.schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


# --- wiring ---------------------------------------------------------------------------------


def target_arg(text: str) -> str:
    """The type of every ``--target``: a known name or a patch release of a known line becomes
    its registered name; anything else is left as it is for ``choices`` to refuse with the
    list."""
    try:
        return canonical_name(text)
    except ValueError:
        return text


class _Version(argparse.Action):
    """``--version``: the installed package's version, read only when asked (start-up cost)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib import metadata

        try:
            version = metadata.version("kfcompile")
        except metadata.PackageNotFoundError:  # run from a source tree that is not installed
            version = "(version unknown: not installed)"
        print(f"kfcompile {version}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kfcompile",
        description="Compile a training-job spec into Kubeflow custom resources.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    target_names = [*TARGETS, "all"]

    def with_spec(name: str, help_text: str, many: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("spec", nargs="+" if many else 1, help="job spec YAML file ('-' = stdin)")
        p.add_argument(
            "-t",
            "--target",
            default=DEFAULT_TARGET,
            type=target_arg,
            choices=target_names if name == "render" else list(TARGETS),
            help=f"output shape (default {DEFAULT_TARGET}; a patch release such as "
            f"{DEFAULT_TARGET}.0 names its line)",
        )
        return p

    p = with_spec("render", "print the objects to apply, in apply order")
    p.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    p.add_argument("--check", metavar="GOLDEN", help="compare with GOLDEN; exit 1 with a diff")
    p.add_argument("--out", metavar="DIR", help="write DIR/<spec>/<target>.yaml for each spec")
    p.add_argument(
        "--with-secrets",
        action="store_true",
        help="include the Secret of secret_env, with values from your environment "
        "(stdout only: not with --out or --check)",
    )
    p.set_defaults(func=cmd_render)

    p = with_spec("validate", "check specs and that the target can express all of them")
    p.add_argument(
        "--crd",
        action="append",
        default=[],
        metavar="FILE",
        help="also validate the output against this CRD file (repeatable)",
    )
    p.set_defaults(func=cmd_validate)

    p = with_spec("explain", "show where every spec value lands in the output", many=False)
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("targets", help="list targets and what each supports")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_targets)

    p = sub.add_parser("schema", help="print the JSON Schema of the job spec")
    p.set_defaults(func=cmd_schema)

    from kfcompile import cli_cluster, convert  # parsers; their work loads when they run

    convert.add_commands(sub)
    cli_cluster.add_commands(sub)
    return parser


def _print_failure(exc: Failed) -> None:
    for problem in exc.problems:
        print(f"{exc.label}: {problem}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"kfcompile: {exc}", file=sys.stderr)
        return 2
    except Failed as exc:
        _print_failure(exc)
        return 1
    except BrokenPipeError:  # `kfcompile render ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

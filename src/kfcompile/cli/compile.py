"""The commands of the pure core: render, validate, explain, targets, schema."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kfcompile.cli.common import (
    Failed,
    UsageError,
    compile_for,
    file_stem,
    format_objects,
    load,
    name_of,
    one_writer_each,
    outcome,
    print_failure,
    read,
    write_file,
)
from kfcompile.spec import yamlio
from kfcompile.spec.errors import SpecError
from kfcompile.spec.model import JobSpec
from kfcompile.targets import DEFAULT_TARGET, TARGETS


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
        return _render_matrix(args.spec, targets, Path(args.out), args.output, args.namespace)
    if len(targets) > 1:
        raise UsageError("--target all writes one file per target: give --out DIR")
    if args.check is not None:
        if len(args.spec) != 1:
            raise UsageError("--check compares one spec with one golden file")
        return _check(args.spec[0], args.target, args.output, args.check, args.namespace)
    objects = []
    for path in args.spec:
        spec = load(path, args.namespace)
        rendered = compile_for(path, args.target, spec).objects
        if spec.secret_env:
            rendered = _with_secret(path, spec, rendered, args.with_secrets)
        objects += rendered
    sys.stdout.write(format_objects(objects, args.output))
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

    from kfcompile.lifecycle import ClusterError
    from kfcompile.lifecycle.submitting import secret

    try:
        return [*objects[:-1], secret(spec, os.environ, spec.namespace), objects[-1]]
    except ClusterError as exc:
        raise Failed(path, str(exc).splitlines()) from None


def _render_matrix(
    specs: list[str], targets: list[str], out: Path, output: str, namespace: str | None
) -> int:
    """Write every spec for every target to ``out/<spec>/<target>.<yaml|json|err>``."""
    one_writer_each((path, out / Path(path).stem) for path in specs)
    rows, reasons = [], []
    for path in specs:
        spec = load(path, namespace)
        folder = out / Path(path).stem
        cells = []
        for name in targets:
            suffix, text = outcome(spec, name, output)
            written = folder / f"{file_stem(name)}.{suffix}"
            write_file(written, text)
            cells.append("ok" if suffix != "err" else f"{text.count(chr(10))} unsupported")
            if suffix == "err":
                reasons.append(written)
        rows.append((Path(path).name, cells))
    width = max(len(name) for name, _ in rows)
    print(f"{'spec':<{width}}  " + "  ".join(f"{t:<15}" for t in targets).rstrip())
    for name, cells in rows:
        print(f"{name:<{width}}  " + "  ".join(f"{c:<15}" for c in cells).rstrip())
    if reasons:
        print("\nwhy each is unsupported, a line per spec field the target cannot express:")
        print("".join(f"  {path}\n" for path in reasons), end="")
    return 0


def _check(spec: str, target_name: str, output: str, golden: str, namespace: str | None) -> int:
    text = format_objects(compile_for(spec, target_name, namespace=namespace).objects, output)
    expected = read(golden)
    if expected == text:
        return 0
    import difflib  # only to show how they differ

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
    """Check every spec given (for every target with ``--target all``), report each verdict,
    and fail if any is invalid."""
    if args.target == "all" and (args.cluster or args.crd):
        flag = "--cluster" if args.cluster else "--crd"
        raise UsageError(
            f"--target all checks what each target can express; {flag} checks against one "
            "release's CRD: give that release's --target"
        )
    served = None
    if args.cluster:
        from kfcompile.cli.served import ServedCRDs  # the adapter: only with --cluster

        served = ServedCRDs(args)
    if args.target == "all":
        names = list(TARGETS)
    else:
        names = [served.target(args.target) if served else args.target or DEFAULT_TARGET]
    status = 0
    for path in args.spec:
        try:
            spec = load(path, args.namespace)
            for name in names:
                status = max(status, _validate(args, path, spec, name, served))
        except Failed as exc:
            print_failure(exc)
            status = 1
    return status


def _validate(
    args: argparse.Namespace, path: str, spec: JobSpec, target_name: str, served: Any
) -> int:
    """One spec for one target: its verdict on stdout (0), or its problems on stderr (1)."""
    try:
        objects = compile_for(path, target_name, spec).objects
        problems = [
            p for crd_path in args.crd for p in _crd_problems(objects, crd_path, target_name)
        ]
        if served is not None:
            problems += served.problems(objects)
        if problems:
            raise Failed(f"{path} ({target_name})", problems)
    except Failed as exc:
        print_failure(exc)
        return 1
    against = [*args.crd, *(["the CRDs the cluster serves"] if served else [])]
    shown = f" against {', '.join(against)}" if against else ""
    print(f"{path}: valid for {target_name}{shown}")  # the verdict; problems go to stderr
    return 0


def _crd_problems(objects: list[dict[str, Any]], crd_path: str, target_name: str) -> list[str]:
    from kfcompile.lifecycle.target_evidence import from_crd
    from kfcompile.output import crd  # jsonschema is loaded only when a CRD is given

    try:
        crds = [d for d in yamlio.load_all(read(crd_path)) if isinstance(d, dict)]
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
            release = from_crd(c, "it") if obj["kind"] == "TrainJob" else None
            if release is not None and release.target != target_name:
                raise Failed(
                    crd_path,
                    [
                        f"this CRD is {release.target}'s ({release.evidence}), not "
                        f"{target_name}'s: give --target {release.target}, or {target_name}'s CRD"
                    ],
                )
            try:
                found += [f"{name_of(obj)}: {e} (per {crd_path})" for e in crd.errors(obj, c)]
            except ValueError as exc:  # not a usable CRD
                raise Failed(crd_path, [str(exc)]) from None
    return found


def cmd_explain(args: argparse.Namespace) -> int:
    """A spec file: where each of its values lands. A spec field (a name that is no file):
    what it is and where it lands on each target."""
    what = args.spec[0]
    if not (os.path.exists(what) or what.endswith(SPEC_FILES)) and re.fullmatch(FIELD_PATH, what):
        return _explain_field(what, args.target, args.output)
    rendered = compile_for(what, args.target or DEFAULT_TARGET, namespace=args.namespace)
    rows = [
        {
            "source": p.source,
            "object": name_of(rendered.objects[p.doc]),
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


SPEC_FILES = (".yaml", ".yml", ".json")  # a name like these is a file, there or not
FIELD_PATH = r"[A-Za-z_]\w*(\[[^\]]*\])?(\.[A-Za-z_]\w*(\[[^\]]*\])?)*"


def _explain_field(path: str, target_name: str | None, output: str) -> int:
    import attrs

    from kfcompile.targets.reference import UnknownField, describe

    try:
        doc = describe(path)
    except UnknownField as exc:
        raise UsageError(f"explain {path}: no such file, and {exc}") from None
    lands = {n: p for n, p in doc.lands.items() if target_name in (None, n)}
    if output == "json":
        print(json.dumps({**attrs.asdict(doc), "lands": lands}, indent=2))
        return 0

    def plain(text: str) -> str:  # the reference's markdown, for a terminal
        return text.replace("\\|", "|").replace("`", "")

    shown = {None: "- (not supported: an error naming the field)", (): "(no place of its own)"}
    width = max(len(n) for n in lands)
    out = [f"FIELD:    {doc.path} <{plain(doc.type)}>"]
    out += [f"DEFAULT:  {plain(doc.default) or 'none (optional)'}", "", "DESCRIPTION:"]
    out += [f"    {plain(doc.doc)}", ""]
    if doc.rules:
        out += ["RULES:", *(f"    - {plain(r)}" for r in doc.rules), ""]
    out.append("WHERE IT LANDS:")
    for name, paths in lands.items():
        cells = shown.get(paths) if paths in shown else None
        for i, cell in enumerate([cells] if cells else list(paths or ())):
            out.append(f"    {name if i == 0 else '':<{width}}  {cell}")
    if doc.fields:
        out += ["", "FIELDS:"]
        for name, type_, default, text in doc.fields:
            extra = f"  {plain(default)}" if default else ""
            out.append(f"    {name} <{plain(type_)}>{extra}")
            if text:
                out.append(f"        {plain(text)}")
    print("\n".join(out))
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    from kfcompile.targets.reference import override_support, support

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
    from kfcompile.spec.json_schema import json_schema

    print(json.dumps(json_schema(), indent=2))
    return 0


def cmd_rbac(args: argparse.Namespace) -> int:
    """The Role the cluster commands need in one namespace, and what grants it."""
    from kfcompile.lifecycle import rbac

    kind = TARGETS[args.target].kind if args.target else None
    granted = [rbac.role(args.namespace, kind)]
    if args.cluster_reads:
        trainer = rbac.trainer_role(kind)
        granted += [rbac.cluster_role(kind), *([trainer] if trainer else [])]
    objects = list(granted)
    if args.service_account or args.user:
        who = rbac.subject(args.service_account, args.user, args.namespace)
        objects += [rbac.binding(g, who, args.namespace) for g in granted]
    sys.stdout.write(yamlio.dump_all(objects))
    print(f"kfcompile: {rbac.MULTIKUEUE_NOTE}", file=sys.stderr)
    return 0

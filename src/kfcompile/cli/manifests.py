"""``kfcompile import`` and ``kfcompile convert``: existing manifests to specs or other targets.

Each input is a file (``-`` for stdin)
or a directory (every ``*.yaml``, ``*.yml`` and ``*.json`` below it); a file may hold several
documents and ``kind: List`` (``kubectl get -o yaml``). Every PyTorchJob and TrainJob in it is
imported (its inline-script ConfigMap with it); any other document is reported, not converted.

Output goes to stdout, or with ``--out DIR`` to one file per input (same relative path) and a
summary table (file, detected, target, result) on stdout. The summary counts jobs; a file that
cannot be read or parsed is "unreadable" and a file with no job in it (a ConfigMap, a Service)
is "skipped", each counted apart. Exit status as the rest of the CLI:
0 done; 1 when a manifest cannot be read, imported or converted, or when something would be
lost (a skipped file included): one line per input field path on stderr
(``<file>: <path>: <what happens>``). With ``--allow-lossy`` those loss lines are warnings
(``warning: `` first) and the output is written.
Nothing goes to stdout when any job fails and there is no ``--out``, so a pipe into
``kubectl apply -f -`` never applies half a directory.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Literal

from attrs import frozen

from kfcompile.cli.common import Failed, UsageError, one_writer_each, read, write_file
from kfcompile.importer import convert_manifest, import_manifest_lossy, jobs_in
from kfcompile.spec import yamlio
from kfcompile.spec.errors import KfcompileError, Problem, SpecError
from kfcompile.spec.load import dump_spec

SUFFIXES = (".yaml", ".yml", ".json")


SPEC = "spec"  # the summary's target column for `import`


Status = Literal["ok", "lossy", "refused", "failed", "skipped", "unreadable"]


# How the summary's last line counts each status of a job.
TOTALS: dict[Status, str] = {
    "ok": "ok",
    "lossy": "written with losses",  # --allow-lossy: the losses were warnings
    "refused": "not written (losses)",
    "failed": "failed",
}


# Files that hold no job to count: what the last line adds for them when there are any.
NOT_JOBS: dict[Status, str] = {"unreadable": "unreadable", "skipped": "with no job (skipped)"}


# Losses are warnings with --allow-lossy: documents that are no job included, in a file alone.
WARNINGS: frozenset[Status] = frozenset({"lossy", "skipped"})


@frozen(repr=False, eq=False)
class Outcome:
    """One job of an input file (or a file with none): what was detected, what came out, and
    every line to report."""

    label: str  # the file, with ``[i]`` when it holds several jobs
    detected: str  # the job's kind; for a file with no job, the kinds it holds; "-" if none
    target: str  # the target name, or "spec" for `import`
    status: Status
    text: str = ""  # the output YAML (empty unless ok or lossy)
    lines: tuple[str, ...] = ()  # "<input path>: <what happens>", one per loss or problem

    @property
    def is_job(self) -> bool:
        return self.status in TOTALS

    @property
    def result(self) -> str:
        """The summary's result column."""
        n = len(self.lines)
        return {
            "ok": "ok",
            "lossy": f"written, {n} lost",
            "refused": f"not written, {n} lost",
            "failed": f"failed, {n} problem{'s' * (n != 1)}",
            "skipped": "skipped, not a job",
            "unreadable": f"unreadable, {n} problem{'s' * (n != 1)}",
        }[self.status]


def convert_text(
    text: str, label: str, target_name: str | None, *, allow_lossy: bool = False
) -> list[Outcome]:
    """Every job in one input file, imported (``target_name`` None) or converted. Documents
    that are no job count as losses of the file's first job. Pure: no I/O."""
    target = target_name or SPEC
    try:
        documents = yamlio.load_all(text)
    except SpecError as exc:
        return [Outcome(label, "-", target, "unreadable", lines=_lines(exc.problems))]
    jobs, others = jobs_in(documents)
    if not jobs:
        lines = _lines(others) or ("no PyTorchJob or TrainJob here",)
        return [Outcome(label, _kinds(documents), target, "skipped", lines=lines)]
    outcomes = []
    for i, (job, companions) in enumerate(jobs):
        name = label if len(jobs) == 1 else f"{label}[{i}]"
        try:
            if target_name is None:
                imported = import_manifest_lossy(job, companions)
                losses = [*imported.losses]
                output = dump_spec(imported.spec)
            else:  # the conversion imports it once, for both
                converted = convert_manifest(job, target_name, companions, allow_lossy=True)
                imported = converted.imported
                losses = [*converted.losses]
                output = yamlio.dump_all(converted.objects)
        except KfcompileError as exc:
            outcomes.append(Outcome(name, "-", target, "failed", lines=_lines(exc.problems)))
            continue
        if i == 0:
            losses = [*others, *losses]
        status: Status = "ok" if not losses else "lossy" if allow_lossy else "refused"
        kept = output if status != "refused" else ""
        outcomes.append(Outcome(name, imported.detected, target, status, kept, _lines(losses)))
    return outcomes


def _lines(problems: Iterable[Problem]) -> tuple[str, ...]:
    return tuple(str(p) for p in problems)


def _kinds(documents: Iterable[object]) -> str:
    """The kinds a file holds, for the detected column of a file with no job."""
    kinds = {
        str(doc.get("kind") or "?") if isinstance(doc, Mapping) else type(doc).__name__
        for doc in documents
        if doc is not None
    }
    return ",".join(sorted(kinds)) or "-"


def _inputs(arguments: list[str], out: Path | None) -> Iterator[tuple[str, Path]]:
    """``(label, path relative to the output directory)`` of every input file; a directory's
    files below ``out`` are skipped (earlier output)."""
    for argument in arguments:
        if argument == "-":
            yield "-", Path("stdin.yaml")
            continue
        path = Path(argument)
        if path.is_dir():
            skip = out.resolve() if out is not None else None
            found = sorted(
                p
                for p in path.rglob("*")
                if p.suffix in SUFFIXES
                and p.is_file()
                and (skip is None or not p.resolve().is_relative_to(skip))
            )
            if not found:
                raise UsageError(f"no manifests ({', '.join(SUFFIXES)}) in {argument}")
            for p in found:
                yield str(p), p.relative_to(path)
        elif path.is_file():
            yield argument, Path(path.name)
        else:
            raise UsageError(f"cannot read {argument}: no such file or directory")


def _read(label: str) -> str | Problem:
    """The file's text, or why it cannot be read (a failed row, not the end of the run)."""
    try:
        return read(label)
    except Failed as exc:  # not UTF-8 text
        return Problem("", f"cannot read: {'; '.join(exc.problems)}")
    except UsageError as exc:  # "cannot read <file>: <why>": the row names the file already
        return Problem("", f"cannot read: {str(exc).split(': ', 1)[-1]}")


def _run(args: argparse.Namespace, target_name: str | None) -> int:
    out = Path(args.out) if args.out is not None else None
    inputs = [
        (label, relative.with_suffix(".yaml")) for label, relative in _inputs(args.manifest, out)
    ]
    if out is not None:  # on stdout, every input is a document of one stream
        one_writer_each((label, out / destination) for label, destination in inputs)
    results: list[tuple[Path, list[Outcome]]] = []
    for label, destination in inputs:
        text = _read(label)
        if isinstance(text, Problem):
            outcomes = [Outcome(label, "-", target_name or SPEC, "unreadable", lines=(str(text),))]
        else:
            outcomes = convert_text(text, label, target_name, allow_lossy=args.allow_lossy)
        results.append((destination, outcomes))
    every = [o for _, outcomes in results for o in outcomes]
    for o in every:
        prefix = "warning: " if o.status in WARNINGS and args.allow_lossy else ""
        for line in o.lines:
            print(f"{prefix}{o.label}: {line}", file=sys.stderr)
        if out is None and o.is_job and o.detected != "-":
            print(f"{o.label}: detected {o.detected}", file=sys.stderr)
    bad = any(
        o.status in ("refused", "failed", "unreadable")
        or (o.status == "skipped" and not args.allow_lossy)
        for o in every
    )
    if out is None:
        if not bad:
            sys.stdout.write("---\n".join(o.text for o in every))
        return 1 if bad else 0
    for destination, outcomes in results:
        texts = [o.text for o in outcomes if o.text]
        if texts:
            write_file(out / destination, "---\n".join(texts))
    _summary(every)
    return 1 if bad else 0


def _summary(outcomes: list[Outcome]) -> None:
    rows = [("file", "detected", "target", "result")]
    rows += [(o.label, o.detected, o.target, o.result) for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]))
    jobs = sum(o.is_job for o in outcomes)
    counts = ", ".join(
        f"{sum(o.status == status for o in outcomes)} {text}" for status, text in TOTALS.items()
    )
    files = [
        (n, text)
        for status, text in NOT_JOBS.items()
        if (n := sum(o.status == status for o in outcomes))
    ]
    apart = "".join(f"; {n} file{'s' * (n != 1)} {text}" for n, text in files)
    print(f"{jobs} job{'s' * (jobs != 1)}: {counts}{apart}")


def cmd_import(args: argparse.Namespace) -> int:
    return _run(args, None)


def cmd_convert(args: argparse.Namespace) -> int:
    return _run(args, args.to)

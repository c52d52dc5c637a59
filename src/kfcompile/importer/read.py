"""Importing one manifest: its shape read as the targets' one shape, every slot taken out of
the working copy, the field table read backward, and what is left over reported as lost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kfcompile.importer import fields, launcher, shapes
from kfcompile.importer.identify import describe
from kfcompile.importer.state import (
    NOT_HELD,
    Imported,
    LossyImport,
    NotImportable,
    Reading,
    source_of,
)
from kfcompile.kinds import PYTORCHJOB
from kfcompile.spec.errors import Problem, SpecError, UnsupportedFeature
from kfcompile.spec.load import structure
from kfcompile.spec.model import JobSpec
from kfcompile.targets import TARGETS


def import_manifest(
    obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]] = ()
) -> JobSpec:
    """The spec that renders ``obj`` (a PyTorchJob or TrainJob), or ``LossyImport`` listing every
    input field the spec cannot hold. ``companions`` are objects applied with it (the inline
    script's ConfigMap, as ``render`` returns before the job)."""
    imported = import_manifest_lossy(obj, companions)
    if imported.losses:
        raise LossyImport(imported.losses)
    return imported.spec


def import_manifest_lossy(
    obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]] = ()
) -> Imported:
    """Like ``import_manifest``, but the losses are returned in ``Imported.losses``.

    Raises ``NotImportable`` when no spec can be made (another kind, no image, values the spec
    refuses), with the input field paths.
    """
    imported = run(obj, companions)
    try:  # what the manifest's own target refuses (a name too long for its pods) never ran
        TARGETS[imported.target].render(imported.spec)
    except UnsupportedFeature as exc:
        raise NotImportable(
            [Problem(imported.source_of(p.at), p.message) for p in exc.problems]
        ) from None
    return imported


def run(obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]]) -> Imported:
    r = Reading(obj, companions)
    if r.kind == PYTORCHJOB.name:
        shapes.replicas(r)
    else:
        shapes.trainjob_shape(r)
    for slot in fields.READ:
        r.found[slot] = r.read(slot)
    shapes.escape_hatches(r)
    fields.read_table(r)
    for path in r.doc.leftovers():
        r.lose(path, NOT_HELD)
    for c in r.companions:
        r.lose(describe(c), "not the job's inline script as kfcompile writes it: not converted")
    try:
        spec = structure(r.data)
    except SpecError as exc:
        raise NotImportable(
            [
                Problem(source_of(r.sources, p.at), f"{p.message} (spec field {p.path})")
                for p in exc.problems
            ]
        ) from None
    spec = launcher.torchrun_launcher(r, spec)
    return Imported(
        spec, r.detected, r.target, tuple(r.losses), tuple(r.kept_torchrun), dict(r.sources)
    )

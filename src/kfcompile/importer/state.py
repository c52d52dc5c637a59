"""One manifest being read: the working copy, the spec data built from it, where each spec value
came from, and the losses; and what an import returns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from attrs import field, frozen

from kfcompile.importer.document import Doc, strip_server_fields
from kfcompile.importer.identify import describe, job_kind
from kfcompile.kinds import PYTORCHJOB, TRAINJOB
from kfcompile.spec import object_paths
from kfcompile.spec.errors import KfcompileError, Problem
from kfcompile.spec.fieldpath import FieldPath, field_path
from kfcompile.spec.frozen import thaw
from kfcompile.spec.model import JobSpec
from kfcompile.spec.object_paths import Path, Segment
from kfcompile.targets import Target, pytorchjob_v1, trainjob
from kfcompile.targets.codecs import MISSING

NOT_HELD: Final = "no JobSpec field holds it: dropped"
# Each kind's launcher command (the targets of one kind write the same).
COMMANDS: Final = {PYTORCHJOB.name: pytorchjob_v1.command, TRAINJOB.name: trainjob.command}


class LossyImport(KfcompileError):
    """Something in the manifest would be lost: one problem per input field path."""


class NotImportable(KfcompileError):
    """No spec (or no output for the target) can be made from the manifest."""


def source_of(sources: Mapping[str, str], spec_path: str | FieldPath) -> str:
    """The input field ``spec_path`` came from: that of its closest recorded parent."""
    at = field_path(spec_path)
    for n in range(len(at.parts), 0, -1):
        found = sources.get(object_paths.format(at.parts[:n]))
        if found is not None:
            return found
    return str(at)


@frozen
class Imported:
    """A manifest read back: the spec, what was detected, and what the spec cannot hold."""

    spec: JobSpec
    detected: str  # e.g. "TrainJob for Trainer v2.2 or v2.3 (runtimePatches)"
    target: str  # the kfcompile target whose output has this shape (the newest that fits)
    losses: tuple[Problem, ...] = ()
    # Why a PyTorchJob's torchrun line stays as written, not read as the launcher
    # (``importer.launcher``): nothing is lost on its own kind, but it may not run on another.
    kept_torchrun: tuple[Problem, ...] = ()
    # spec field path (as in Problem paths: ``env.FOO``, ``tolerations``) -> input field path
    sources: Mapping[str, str] = field(factory=dict, eq=False)

    def source_of(self, spec_path: str | FieldPath) -> str:
        """The input field a spec field path came from (its closest recorded parent)."""
        return source_of(self.sources, spec_path)


Found = list[tuple[FieldPath, Any]]  # a slot's values, each where it was found


class Reading:
    """One manifest being read (see ``read.run``)."""

    def __init__(self, obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]]) -> None:
        kind = job_kind(obj)
        if kind is None:
            raise NotImportable(
                [
                    Problem(
                        "kind",
                        f"{describe(obj)} is not a job kfcompile reads "
                        f"({PYTORCHJOB.name} {PYTORCHJOB.api_version}, "
                        f"{TRAINJOB.name} {TRAINJOB.api_version})",
                    )
                ]
            )
        self.kind: str = kind
        self.doc = Doc(obj)
        self.doc.take(("apiVersion",))
        self.doc.take(("kind",))
        strip_server_fields(self.doc.root)
        self.companions: list[dict[str, Any]] = [thaw(c) for c in companions]
        for c in self.companions:
            strip_server_fields(c)
        self.data: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.losses: list[Problem] = []
        self.targets: list[Target] = []  # whose tables the manifest is read through
        # Path segments read as others: PyTorchJob replicas (``*``) as the one whose pod is
        # read, TrainJob overrides and patches (``[0]``, ``[manager=kfcompile...]``) as the
        # item that holds them.
        self.subst: dict[tuple[Segment, Segment], Segment] = {}
        self.found: dict[str, Found] = {}
        self.detected = ""
        self.target = ""
        self.kept_torchrun: list[Problem] = []

    def command(self, spec: JobSpec) -> list[str] | None:
        """The launcher command the manifest's kind writes for ``spec``."""
        return COMMANDS[self.kind](spec)

    # -- bookkeeping

    def lose(self, where: FieldPath | Path | str, what: str) -> None:
        self.losses.append(Problem(_at(where), what))

    def put(self, spec: FieldPath | str, value: Any, where: FieldPath | str) -> None:
        """Set the spec value at ``spec`` (a field, or a part's: ``elastic.min_nodes``)."""
        at = field_path(spec)
        holder = self.data
        for name in at.parts[:-1]:
            holder = holder.setdefault(str(name), {})
        holder[str(at.parts[-1])] = value
        self.note(at, where)

    def note(self, spec: FieldPath, where: FieldPath | str) -> None:
        """Record where the spec value at ``spec`` came from."""
        self.sources[str(spec)] = str(where)

    def resolve(self, text: str) -> Path:
        parsed = object_paths.parse(text)
        return tuple(
            self.subst.get((parsed[i - 1], seg), seg) if i else seg for i, seg in enumerate(parsed)
        )

    def place(self, slot: str) -> FieldPath:
        """Where the first target the manifest is read through writes ``slot`` first."""
        found = self.targets[0].layout.get(slot)
        assert found is not None and found.paths
        return FieldPath(self.resolve(found.paths[0]))

    def one(self, slot: str) -> tuple[FieldPath, Any] | None:
        """A slot's value where it was found (the first place; others that differ are lost)."""
        found = self.found.get(slot, [])
        if not found:
            return None
        for where, value in found[1:]:
            if value != found[0][1]:
                self.lose(where, f"conflicts with {found[0][0]}: dropped")
        return found[0]

    def one_mapping(self, slot: str) -> tuple[FieldPath, dict[str, Any]] | None:
        """``one(slot)`` when it is a mapping; anything else there is lost."""
        found = self.one(slot)
        if found is None:
            return None
        where, value = found
        if not isinstance(value, dict):
            self.lose(where, "must be a mapping: dropped")
            return None
        return where, value

    def union(self, slot: str) -> tuple[FieldPath, dict[str, Any]] | None:
        """A map slot merged from every place it was found. The spec writes the map to all of a
        target's places alike, so a key missing from one of them, or different there, is lost."""
        maps: list[tuple[FieldPath, dict[str, Any]]] = []
        for where, value in self.found.get(slot, []):
            if isinstance(value, dict):
                maps.append((where, value))
            else:
                self.lose(where, "must be a mapping: dropped")
        if not maps:
            return None
        merged: dict[str, Any] = {}
        for _, value in maps:
            for k, v in value.items():
                merged.setdefault(k, v)
        for where, value in maps:
            for k, v in merged.items():
                if k not in value:
                    places = ", ".join(str(w) for w, _ in maps)
                    self.lose(where / k, f"absent here: written to all of {places}")
                elif value[k] != v:
                    self.lose(where / k, f"conflicts with {maps[0][0]}: dropped")
        return maps[0][0], merged

    def read(self, slot: str) -> Found:
        """A slot's values from every place a table puts it, taken out of the working copy.
        Where one target writes a slot to several places (v2.2+ JobSet and Job labels), a place
        without it is a loss."""
        out: Found = []
        taken: dict[Path, bool] = {}
        for t in self.targets:
            s = t.layout.get(slot)
            places = [self.resolve(text) for text in (s.paths if s is not None else ())]
            for path in places:
                if path not in taken:
                    value = self.doc.take(path)
                    taken[path] = value is not MISSING
                    if taken[path]:
                        out.append((FieldPath(path), value))
            found = [str(FieldPath(p)) for p in places if taken[p]]
            for path in places:
                missing = Problem(FieldPath(path), f"absent: written here as at {', '.join(found)}")
                if found and not taken[path] and missing not in self.losses:
                    self.losses.append(missing)
        return out


def _at(where: FieldPath | Path | str) -> FieldPath:
    return FieldPath(where) if isinstance(where, tuple) else field_path(where)

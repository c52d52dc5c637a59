"""The registry of targets: one module per output shape, each with its placement table.

A target's module is imported when the target is first used: a render imports its own (and the
releases it is built on), and the names alone (``--target``'s choices) import none of them, nor
the engine and the spec layer they stand on.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

if TYPE_CHECKING:
    from kfcompile.targets.base import Rendered, Target
    from kfcompile.targets.codecs import Placement
    from kfcompile.targets.trainjob import Release

V = TypeVar("V")


class Registered(Mapping[str, V]):
    """Each registered name's object (``attribute`` of the module named for it), its module
    imported on first use: the names, ``in`` and ``len`` import nothing."""

    def __init__(self, attribute: str, modules: Mapping[str, str]) -> None:
        self.attribute = attribute
        self.entries: dict[str, object] = dict(modules)  # the object, or its module's name

    def __getitem__(self, name: str) -> V:
        entry = self.entries[name]
        if isinstance(entry, str):
            entry = self.entries[name] = getattr(importlib.import_module(entry), self.attribute)
            _engine_knows_every_target()
        return cast("V", entry)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


# The Trainer releases, by target name, and the module defining each (its RELEASE): adding one
# is its module and a line here. Detection and the importer read their marks from here
# (`trainer_releases`).
_RELEASE_MODULES: Final = {
    "trainjob/v2.0": "kfcompile.targets.trainjob_v2_0",
    "trainjob/v2.1": "kfcompile.targets.trainjob_v2_1",
    "trainjob/v2.2": "kfcompile.targets.trainjob_v2_2",
    "trainjob/v2.3": "kfcompile.targets.trainjob_v2_3",
}
RELEASES: Final[Registered[Release]] = Registered("RELEASE", _RELEASE_MODULES)
TARGETS: Final[Registered[Target]] = Registered(
    "TARGET", {"pytorchjob/v1": "kfcompile.targets.pytorchjob_v1", **_RELEASE_MODULES}
)
"""Every target by name (``pytorchjob/v1``, ``trainjob/v2.0`` ... ``trainjob/v2.3``)."""
DEFAULT_TARGET: Final = "trainjob/v2.3"
"""The target ``render`` uses when none is named: the newest Trainer release."""


def _engine_knows_every_target() -> None:
    """The engine names the targets that would express a misfit (``base.supported_by``): it
    is given the registry once a target, and with it the engine, is loaded (it cannot import
    the registry, which imports the targets, back)."""
    from kfcompile.targets import base

    base.REGISTRY = TARGETS


__all__ = [
    "DEFAULT_TARGET",
    "RELEASES",
    "TARGETS",
    "Placement",
    "Registered",
    "Release",
    "Rendered",
    "Target",
    "canonical_name",
    "registered",
    "target",
    "trainer_releases",
]

# The types, from the modules that define them (the engine's), on first use.
_TYPES: Final = {
    "Placement": "kfcompile.targets.codecs",
    "Rendered": "kfcompile.targets.base",
    "Target": "kfcompile.targets.base",
    "Release": "kfcompile.targets.trainjob",
}


def __getattr__(name: str) -> Any:
    if name not in _TYPES:
        raise AttributeError(f"module 'kfcompile.targets' has no attribute {name!r}")
    return getattr(importlib.import_module(_TYPES[name]), name)


def trainer_releases() -> list[Release]:
    """The registered Trainer releases, newest first (the order detection and import try them)."""
    return sorted(RELEASES.values(), key=lambda r: r.version, reverse=True)


@contextlib.contextmanager
def registered(*releases: Release) -> Iterator[None]:
    """The registry with ``releases`` in it while the block runs, as their registration lines
    would put them (render, import, convert and detection all know them); as it was after.
    For trying a release module out before its line is added."""
    before = [(live, dict(live.entries)) for live in (RELEASES, TARGETS)]
    try:
        for r in releases:
            RELEASES.entries[r.name] = r
            TARGETS.entries[r.name] = r.target
        _engine_knows_every_target()
        yield
    finally:
        for live, entries in before:
            live.entries.clear()
            live.entries.update(entries)


def canonical_name(name: str) -> str:
    """The registered name for ``name``: itself, or the release line of a patch release
    (``trainjob/v2.3.1`` is ``trainjob/v2.3``: patch releases change no API). ValueError
    for anything else, listing the choices."""
    if name in TARGETS:
        return name
    line, dot, patch = name.rpartition(".")
    # Only a MAJOR.MINOR line has patch releases: `pytorchjob/v1` is an API version.
    if dot and patch.isdigit() and patch.isascii() and line in TARGETS and "." in line:
        return line
    raise ValueError(f"unknown target {name!r}; choose one of: {', '.join(TARGETS)}")


def target(name: str) -> Target:
    """The target called ``name`` (a patch release of a known line names that line)."""
    return TARGETS[canonical_name(name)]

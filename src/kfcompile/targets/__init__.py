"""The registry of targets: one module per output shape, each with its placement table."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kfcompile.targets import (
    base,
    pytorchjob_v1,
    trainjob_v2_0,
    trainjob_v2_1,
    trainjob_v2_2,
    trainjob_v2_3,
)
from kfcompile.targets.base import Placement, Rendered, Target
from kfcompile.targets.trainjob import Release

# The Trainer releases, by target name: adding one is its module and a line here. Detection
# and the importer read their marks from here (`trainer_releases`).
RELEASES: dict[str, Release] = {
    r.name: r
    for r in (
        trainjob_v2_0.RELEASE,
        trainjob_v2_1.RELEASE,
        trainjob_v2_2.RELEASE,
        trainjob_v2_3.RELEASE,
    )
}
TARGETS: dict[str, Target] = {
    t.name: t for t in (pytorchjob_v1.TARGET, *(r.target for r in RELEASES.values()))
}
"""Every target by name (``pytorchjob/v1``, ``trainjob/v2.0`` ... ``trainjob/v2.3``)."""
DEFAULT_TARGET = trainjob_v2_3.RELEASE.name
"""The target ``render`` uses when none is named: the newest Trainer release."""
base.REGISTRY.update(TARGETS)

__all__ = [
    "DEFAULT_TARGET",
    "RELEASES",
    "TARGETS",
    "Placement",
    "Release",
    "Rendered",
    "Target",
    "canonical_name",
    "registered",
    "target",
    "trainer_releases",
]


def trainer_releases() -> list[Release]:
    """The registered Trainer releases, newest first (the order detection and import try them)."""
    return sorted(RELEASES.values(), key=lambda r: r.version, reverse=True)


@contextlib.contextmanager
def registered(*releases: Release) -> Iterator[None]:
    """The registry with ``releases`` in it while the block runs, as their registration lines
    would put them (render, import, convert and detection all know them); as it was after.
    For trying a release module out before its line is added."""
    releases_before, targets_before = dict(RELEASES), dict(TARGETS)
    try:
        for r in releases:
            RELEASES[r.name] = r
            TARGETS[r.name] = base.REGISTRY[r.name] = r.target
        yield
    finally:
        RELEASES.clear()
        RELEASES.update(releases_before)
        for live in (TARGETS, base.REGISTRY):
            live.clear()
            live.update(targets_before)


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

"""The registry of targets: one module per output shape, each with its placement table."""

from __future__ import annotations

from kfcompile.targets import (
    base,
    pytorchjob_v1,
    trainjob_v2_0,
    trainjob_v2_1,
    trainjob_v2_2,
    trainjob_v2_3,
)
from kfcompile.targets.base import Placement, Rendered, Target

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        pytorchjob_v1.TARGET,
        trainjob_v2_0.TARGET,
        trainjob_v2_1.TARGET,
        trainjob_v2_2.TARGET,
        trainjob_v2_3.TARGET,
    )
}
DEFAULT_TARGET = trainjob_v2_3.NAME
base.REGISTRY.update(TARGETS)

__all__ = [
    "DEFAULT_TARGET",
    "TARGETS",
    "Placement",
    "Rendered",
    "Target",
    "canonical_name",
    "target",
]


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

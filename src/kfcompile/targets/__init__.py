"""The registry of targets: one module per output shape, each with its placement table."""

from __future__ import annotations

from kfcompile.targets import (
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

__all__ = ["DEFAULT_TARGET", "TARGETS", "Placement", "Rendered", "Target"]


def target(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; choose one of: {', '.join(TARGETS)}") from None

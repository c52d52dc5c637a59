"""YAML text <-> JobSpec: the safe ruamel.yaml loader and the converter of ``structuring``.

Loading happens in two passes, like a compiler: shapes and types of every field (all at once,
with paths), then the rules between fields. Either pass raises ``SpecError`` with one
``Problem`` per line. A spec built in Python goes through exactly the same checks.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from kfcompile.spec import yamlio
from kfcompile.spec.errors import Problem, SpecError
from kfcompile.spec.model import JobSpec
from kfcompile.spec.structuring import SPEC_FAILURES, converter, kind_of, problems_of


def structure(data: Any) -> JobSpec:
    """Build a JobSpec from plain data (as parsed from YAML or JSON)."""
    if not isinstance(data, Mapping):
        raise SpecError([Problem("", f"a job spec must be a mapping, got {kind_of(data)}")])
    try:
        return converter.structure(data, JobSpec)
    except SpecError:
        raise
    except SPEC_FAILURES as exc:
        raise SpecError(problems_of(exc, "")) from None


def unstructure(spec: JobSpec) -> dict[str, Any]:
    """A JobSpec as plain data (what ``structure`` reads back to an equal spec)."""
    return typing.cast(dict[str, Any], converter.unstructure(spec))


def load_spec(text: str) -> JobSpec:
    """YAML text -> JobSpec, or SpecError listing every problem."""
    return structure(yamlio.parse(text))


def dump_spec(spec: JobSpec) -> str:
    """JobSpec -> YAML text that ``load_spec`` reads back to an equal spec."""
    return yamlio.dump(unstructure(spec))

"""What render refuses for a small spec plus some fields: the problems, one string each."""

from __future__ import annotations

import json
from typing import Any

from kfcompile import SpecError, UnsupportedFeature, load_spec, render

BASE: dict[str, Any] = {"name": "demo", "image": "img:1", "command": ["python", "t.py"]}


def problems(target: str, **fields: Any) -> list[str]:
    """The lines load or render gives ``BASE`` plus ``fields`` for ``target`` (what the spec's
    own rules refuse never reaches the render); [] when it renders."""
    try:
        render(load_spec(json.dumps({**BASE, **fields})), target)
    except (SpecError, UnsupportedFeature) as exc:
        return [str(p) for p in exc.problems]
    return []

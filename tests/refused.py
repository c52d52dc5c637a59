"""What render refuses for a small spec plus some fields: the problems, one string each."""

from __future__ import annotations

import json
from typing import Any

from kfcompile import UnsupportedFeature, load_spec, render

BASE: dict[str, Any] = {"name": "demo", "image": "img:1", "command": ["python", "t.py"]}


def problems(target: str, **fields: Any) -> list[str]:
    """The lines render gives ``BASE`` plus ``fields`` for ``target``; [] when it renders."""
    try:
        render(load_spec(json.dumps({**BASE, **fields})), target)
    except UnsupportedFeature as exc:
        return [str(p) for p in exc.problems]
    return []

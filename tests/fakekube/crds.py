"""CRDs for the fake cluster: parsed once per file (so validators are reused), and chosen."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

__all__ = ["choose_crds", "load_crd"]


@functools.cache
def _load_yaml(path: str) -> Obj:
    data: Obj = yaml.load(Path(path).read_text(), Loader=yaml.CSafeLoader)
    return data


def load_crd(path: Path) -> Obj:
    """The parsed CRD file, cached per path: one object per file, so validators are reused.

    Do not mutate it.
    """
    return _load_yaml(str(Path(path).resolve()))


def _release(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.stem))


def choose_crds(
    crd_dir: Path | None = None, crd_files: Sequence[Path] = (), crds: Iterable[Obj] = ()
) -> list[Obj]:
    """One CRD per name: of ``crd_dir``'s top-level ``*.yaml`` the highest release (e.g.
    ``trainjobs-v2.3.0.yaml`` of ``trainjobs-v2.0.1.yaml`` ..), then ``crd_files`` and ``crds``
    (later ones win)."""
    chosen: dict[str, Obj] = {}
    if crd_dir is not None:
        for path in sorted(Path(crd_dir).glob("*.yaml"), key=_release):
            crd = load_crd(path)
            if crd.get("kind") == "CustomResourceDefinition":
                chosen[crd["metadata"]["name"]] = crd
    for crd in [*(load_crd(p) for p in crd_files), *crds]:
        chosen[crd["metadata"]["name"]] = crd
    return list(chosen.values())

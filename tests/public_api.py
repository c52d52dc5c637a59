"""What an example program may import: the standard library, ``kfcompile`` with its
``lifecycle`` and ``ports``, and the Kubernetes adapter; and every ``<package>.<name>`` it uses
must be exported by that package (its ``__all__``)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ALLOWED = {"kfcompile", "kfcompile.lifecycle", "kfcompile.lifecycle.ports", "kfcompile_kube"}


def check(program: Path, exported: Mapping[str, Sequence[str]]) -> None:
    """Assert that ``program`` imports only what is allowed and uses, of each name in
    ``exported`` (``{"kfcompile": kfcompile.__all__}``), only what it exports, and some."""
    tree = ast.parse(program.read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    kf = {m for m in modules if m.split(".")[0] in ("kfcompile", "kfcompile_kube")}
    assert kf <= ALLOWED, kf - ALLOWED
    assert all(m.split(".")[0] in sys.stdlib_module_names for m in modules - kf)
    for package, names in exported.items():
        used = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == package
        }
        assert used, f"{program.name} uses {package}"
        assert used <= set(names), used - set(names)

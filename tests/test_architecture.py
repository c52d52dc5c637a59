"""The direction of imports (ARCHITECTURE.md), read from the source: the core never imports the
CLI, the integrations, the adapters or ``kubernetes``; the targets never import the CLI; the
adapters never import the CLI; and no module imports itself back through others.

Imports are read with ``ast`` (module level and inside functions; ``if TYPE_CHECKING:`` blocks
only name types and are left out), so a lazy import counts like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "kfcompile": ROOT / "src" / "kfcompile",
    "kfcompile_kube": ROOT / "adapters" / "kfcompile_kube",
}
OUTER = ("kfcompile.cli", "kfcompile.__main__", "kfcompile.integrations")  # around the core
FOREIGN = ("kubernetes", "urllib3", "torchx", "nemo_run", "kfcompile_kube")


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            continue
        yield child
        yield from _walk(child)


def imports(module: str) -> set[str]:
    """The modules ``module`` imports (a name imported from a package that is one of its
    modules counts as that module)."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in _walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, *([base] if base else [])])
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in MODULES else base)
    return found


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


CORE = sorted(
    m for m in MODULES if m.startswith("kfcompile") and not _within(m, (*OUTER, "kfcompile_kube"))
)


@pytest.mark.parametrize("module", CORE)
def test_the_core_imports_nothing_outside_it(module: str) -> None:
    outside = sorted(n for n in imports(module) if _within(n, (*OUTER, *FOREIGN)))
    assert outside == [], f"{module} imports {outside}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("kfcompile_kube")))
def test_the_adapters_never_import_the_cli(module: str) -> None:
    assert not [n for n in imports(module) if _within(n, OUTER)]


def test_the_targets_never_import_the_cli() -> None:
    targets = [m for m in MODULES if m.startswith("kfcompile.targets")]
    assert targets
    for module in targets:
        assert not [n for n in imports(module) if _within(n, ("kfcompile.cli",))], module


def test_no_module_imports_itself_back() -> None:
    graph = {m: {n for n in imports(m) if n in MODULES and n != m} for m in MODULES}
    cycles = []
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_the_checks_see_real_imports() -> None:
    """The reader finds what is there (so the tests above cannot pass by reading nothing)."""
    assert "kfcompile.targets.base" in imports("kfcompile.targets.trainjob")
    assert "kfcompile.lifecycle" in imports("kfcompile.cli.cluster")
    assert "kfcompile_kube" in imports("kfcompile.cli.context")  # the one lazy import
    assert "kubernetes" in {n.split(".")[0] for n in imports("kfcompile_kube.cluster")}

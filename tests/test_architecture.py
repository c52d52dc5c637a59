"""The layers of ARCHITECTURE.md, read from its table and checked against the source.

The table (section "Layers") is the ``LAYERS`` this file checks, so the document and the test
cannot drift: every module of ``src/kfcompile``, ``adapters/kfcompile_kube``,
``adapters/kfcompile_local`` and ``src/torchx_plugins`` is in exactly one layer's "where", and
each of its imports goes to its own layer, a layer its "may import" names, a package that column
names, or the standard library.
A layer marked "(lazily)" there is imported only inside functions (or for types).

Imports are read with ``ast``: module level, inside functions, ``if TYPE_CHECKING:`` blocks
(type-only: checked against the layers, but neither lazy nor eager; they close no cycle either)
and ``importlib.import_module(...)`` calls, whose
argument is read as a module name (a literal; an f-string's literal head, for the modules under
it; else the module names the calling module spells out as strings).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = (ROOT / "src", ROOT / "adapters")
PACKAGES = ("kfcompile", "kfcompile_kube", "kfcompile_local", "torchx_plugins")
ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def _modules() -> dict[str, Path]:
    found = {}
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[0] not in PACKAGES:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


# -- the table --------------------------------------------------------------------------------


@attrs.frozen
class Layer:
    name: str
    where: tuple[str, ...]  # paths from the repository's root; a folder ends with "/"
    may_import: tuple[str, ...]  # layers, then packages
    lazily: frozenset[str]  # of those, the layers imported only inside functions


def _where(token: str) -> str:
    # The table's convention: under src/kfcompile/ unless starting with adapters/ or src/.
    return token if token.startswith(("adapters/", "src/")) else f"src/kfcompile/{token}"


def _layers() -> list[Layer]:
    section = ARCHITECTURE.read_text(encoding="utf-8").split("\n## Layers\n", 1)[1]
    rows = [line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("|")]
    assert rows[0].split("|")[1:5] == [" layer ", " where ", " owns ", " may import "], rows[0]
    layers = []
    for row in rows[2:]:
        name, where, _owns, may = (cell.strip() for cell in row.split("|")[1:5])
        allowed = re.findall(r"`([^`]+)`( \(lazily\))?", may)
        layers.append(
            Layer(
                name.strip("`"),
                tuple(_where(t) for t in re.findall(r"`([^`]+)`", where)),
                tuple(t for t, _ in allowed),
                frozenset(t for t, lazy in allowed if lazy),
            )
        )
    return layers


LAYERS = _layers()
BY_NAME = {layer.name: layer for layer in LAYERS}


def _holds(pattern: str, path: str) -> bool:
    if pattern.endswith("/"):
        return path.startswith(pattern)
    return fnmatch.fnmatchcase(path, pattern)


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def layers_of(module: str) -> list[str]:
    path = _relative(MODULES[module])
    return [layer.name for layer in LAYERS if any(_holds(p, path) for p in layer.where)]


def layer_of(module: str) -> str:
    """Its one layer, else "?" (which ``test_every_module_is_in_exactly_one_layer`` reports)."""
    found = layers_of(module)
    return found[0] if len(found) == 1 else "?"


# -- the imports ------------------------------------------------------------------------------


@attrs.frozen
class Edge:
    to: str  # a module of MODULES, or a name outside them as imported
    how: str  # "eager" (module level), "lazy" (in a function), "type", "dynamic"
    line: int


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _walk(node: ast.AST, how: str) -> Iterator[tuple[ast.AST, str]]:
    for child in ast.iter_child_nodes(node):
        inner = how
        if _type_checking(child):
            inner = "type"
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inner = "type" if how == "type" else "lazy"
        yield child, inner
        yield from _walk(child, inner)


def _owner(name: str) -> str:
    """The module of MODULES that ``name`` is or is in (``kfcompile.spec.JobSpec`` ->
    ``kfcompile.spec.model``), else ``name`` itself."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in MODULES:
            return ".".join(parts[:end])
    return name


def _import_module(node: ast.AST) -> ast.expr | None:
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    named = (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module"
    )
    return node.args[0] if named else None


def _dynamic(argument: ast.expr, tree: ast.AST) -> set[str]:
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return {_owner(argument.value)}
    if isinstance(argument, ast.JoinedStr):  # f"kfcompile.cli.{name}": the modules under its head
        head = ""
        for value in argument.values:
            if not isinstance(value, ast.Constant):
                break
            head += str(value.value)
        return {m for m in MODULES if head and m.startswith(head)}
    return {  # a name: the dotted module names the module spells out (_LAZY's keys)
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "." in n.value
        if n.value in MODULES
    }


def edges(module: str) -> list[Edge]:
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node, how in _walk(tree, "eager"):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            found += [Edge(_owner(alias.name), how, line) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, *([base] if base else [])])
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.append(Edge(name if name in MODULES else _owner(base), how, line))
        elif (argument := _import_module(node)) is not None:
            found += [Edge(to, "dynamic", line) for to in sorted(_dynamic(argument, tree)) or ["?"]]
    return [e for e in found if e.to != module]


EDGES = {module: edges(module) for module in MODULES}

# Every module that calls importlib.import_module, and what it loads: the reader's edges are
# checked against the layers like any import; a reason that starts with "?" is a call the reader
# finds no module of the tree for (it loads one outside), named here as the only check.
DYNAMIC = {
    "kfcompile": "kfcompile.status and kfcompile.importer, on first use of a name (_LAZY)",
    "kfcompile.lifecycle": "its modules, on first use of a name (_LAZY) or of the module",
    "kfcompile.targets": "each target's module, on the target's first use; the engine's for "
    "the types it names (_TYPES)",
    "kfcompile_kube.client_modules": "? a submodule of a package whose __init__ it left, and "
    "the module defining a name that __init__ binds (the kubernetes client's), on first use",
    "torchx_plugins.schedulers.kfcompile": "? torchx's own built-in schedulers, by the module "
    "names torchx.schedulers.DEFAULT_SCHEDULER_MODULES gives",
}


def _components(kinds: set[str]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, over the edges of
    ``kinds``."""
    graph = {
        m: sorted({e.to for e in EDGES[m] if e.how in kinds and e.to in MODULES}) for m in MODULES
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


# -- the checks -------------------------------------------------------------------------------


def test_the_table_is_read() -> None:
    """The table has its layers, each importing only layers above it (so layers form no
    cycle), and every path it names exists."""
    assert len(LAYERS) > 1 and all(layer.where for layer in LAYERS), LAYERS
    files = [_relative(p) for p in ROOT.joinpath("src").rglob("*") if p.is_file()]
    files += [_relative(p) for p in ROOT.joinpath("adapters").rglob("*") if p.is_file()]
    for at, layer in enumerate(LAYERS):
        above = [other.name for other in LAYERS[:at]]
        named = [t for t in layer.may_import if t in BY_NAME]
        assert set(named) <= set(above), f"layer {layer.name} may import {named}: not above it"
        assert layer.lazily <= set(named), layer
        for pattern in layer.where:
            assert any(_holds(pattern, f) for f in files), f"{layer.name}: no file {pattern}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_is_in_exactly_one_layer(module: str) -> None:
    found = layers_of(module)
    path = _relative(MODULES[module])
    assert found, f"{module} ({path}) is in no layer: add it to a row of ARCHITECTURE.md's table"
    assert len(found) == 1, f"{module} ({path}) is in {len(found)} layers: {found}"


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_import_goes_to_a_layer_allowed(module: str) -> None:
    own = layer_of(module)
    layer = BY_NAME.get(own)
    assert layer, f"{module} is in no layer, or in several"
    wrong = []
    for edge in EDGES[module]:
        if edge.to == "?" or (edge.to not in MODULES and _stdlib(edge.to)):
            continue
        if edge.to in MODULES:
            to = layer_of(edge.to)
            if to in (own, "?"):  # "?": told by the test of that module's layer
                continue
            if to not in layer.may_import:
                wrong.append(f"line {edge.line}: {edge.to} (layer {to})")
            elif to in layer.lazily and edge.how == "eager":
                wrong.append(f"line {edge.line}: {edge.to} at module level (only lazily)")
        elif not any(edge.to == p or edge.to.startswith(p + ".") for p in layer.may_import):
            wrong.append(f"line {edge.line}: {edge.to} (not in layer {own}'s may import)")
    assert wrong == [], f"{module} (layer {own}) imports " + "; ".join(dict.fromkeys(wrong))


def _shown(components: list[list[str]]) -> str:
    return "\n".join(" <-> ".join(c) for c in components)


def test_no_cycle() -> None:
    runtime = _components({"eager", "lazy", "dynamic"})
    assert runtime == [], "cycles:\n" + _shown(runtime)


def test_no_cycle_of_types() -> None:
    """Nor one that only ``if TYPE_CHECKING:`` imports close: a module naming a type of one
    that imports it is two modules that cannot be read, or changed, one without the other."""
    typed = _components({"eager", "lazy", "dynamic", "type"})
    assert typed == [], "cycles through imports for types:\n" + _shown(typed)


def test_the_cycle_check_sees_a_cycle_of_types() -> None:
    """The reader and the search find one where there is one (so the check cannot pass by
    finding none): a module importing, for a type, one that imports it."""
    a, b = "kfcompile.targets.base", "kfcompile.targets.codecs"
    assert b in {e.to for e in EDGES[a] if e.how == "eager"}
    EDGES[b].append(Edge(a, "type", 0))
    try:
        assert any({a, b} <= set(c) for c in _components({"eager", "type"}))
    finally:
        EDGES[b].pop()


def test_every_import_module_call_is_known() -> None:
    calling = {m: sorted({e.to for e in EDGES[m] if e.how == "dynamic"}) for m in MODULES}
    calling = {m: to for m, to in calling.items() if to}
    assert sorted(calling) == sorted(DYNAMIC)
    for module, to in calling.items():
        assert ("?" in to) == DYNAMIC[module].startswith("?"), (module, to)


def test_the_checks_see_real_imports() -> None:
    """The reader finds what is there (so the tests above cannot pass by reading nothing)."""

    def to(module: str, how: str) -> set[str]:
        return {e.to for e in EDGES[module] if e.how == how}

    assert "kfcompile.targets.base" in to("kfcompile.targets.trainjob", "eager")
    assert "kfcompile.lifecycle" in to("kfcompile.cli.cluster", "eager")
    assert "kfcompile_kube" in to("kfcompile.cli.context", "eager")
    assert "kfcompile_kube" in to("kfcompile.integrations.torchx", "type")
    assert {"kfcompile.status", "kfcompile.importer"} <= to("kfcompile", "dynamic")
    assert "kfcompile.cli.cluster" in to("kfcompile.cli.parser", "lazy")
    assert "kfcompile.lifecycle.submitting" in to("kfcompile.lifecycle", "dynamic")
    assert "kubernetes" in {e.to.split(".")[0] for e in EDGES["kfcompile_kube.client_modules"]}
    assert "torchx_plugins.schedulers.kfcompile" in MODULES
    assert BY_NAME["integrations"].lazily == {"adapters", "local"}


# What ``kfcompile.lifecycle`` exported before its ``__all__`` was cut to what a service uses
# (at 60cc871): each name is exported still, kept with a DeprecationWarning (``_MOVED``), or gone,
# as the library page says with what to use instead (``GONE``).
EXPORTED_BEFORE: Final = frozenset({
    "ApiError", "BACKOFF_CAP", "BACKOFF_START", "Backoff", "Cancelled", "CannotStart", "Clock",
    "Cluster", "ClusterError", "Cursor", "DELETING_WAIT", "EVENT_APIS", "Event", "ExecOutput",
    "ExecResult", "Follower", "Forbidden", "Found", "Gone", "Happened", "InTurn", "Invalid",
    "JOBS_SEGMENT", "JobDeleted", "JobEvent", "JobNotFound", "JobState", "KINDS", "Kind",
    "LIST_PAGE", "LIST_RESTARTS", "LOCAL_QUEUE_API", "Left", "LeftBehind", "Listed",
    "LocalFiles", "LogLine", "MANAGED_BY_LABEL", "MANAGER", "Merge", "NameTaken", "NoSuchRank",
    "Node", "NotFound", "Obj", "Observation", "Packed", "PreflightFailed", "Prepared",
    "RUNTIME_API", "Ref", "Remaining", "Retry", "SPEC_HASH", "SYNC_IMAGE", "SYNC_ROOT",
    "SYNC_TIMEOUT", "Session", "State", "StillDeleting", "Submitted", "Synced",
    "TARGET_ANNOTATION", "TROUBLED_PODS", "TimedOut", "Transient", "Unavailable", "Unreachable",
    "Until", "Vanishing", "WATCH_SEGMENT", "Waiter", "Waiting", "Watcher", "call", "cancel",
    "claim_dir", "crd_problems", "detect_target", "events", "events_about", "find",
    "follow_logs", "job_kind", "list_jobs", "locate", "logs", "merger", "nodes_total",
    "observation", "observe", "preflight", "prepare", "rank_of", "ranks", "reached",
    "read_logs", "removal", "secret", "served_crd", "set_suspended", "spec_hash", "status",
    "submit", "sync_down", "sync_up", "wait", "wait_gone", "waiting", "watch_jobs"
})  # fmt: skip
GONE: Final = {
    "LOCAL_QUEUE_API": "Kueue is read through the version the cluster serves",
    "Vanishing": "`wait_gone`",
    # the package's submodules of these names shadow them: called, each is a TypeError
    "observe": "`kfcompile.lifecycle.observe.observe`",
    "waiting": "`kfcompile.lifecycle.observe.waiting`",
}


def test_every_name_the_lifecycle_exported_is_there_or_said_gone() -> None:
    import kfcompile.lifecycle as lifecycle

    kept = set(lifecycle.__all__) | set(lifecycle._MOVED)
    assert sorted(EXPORTED_BEFORE - kept) == sorted(GONE)
    page = (ROOT / "docs" / "library" / "index.md").read_text(encoding="utf-8")
    for name, instead in GONE.items():
        assert f"| `{name}` | {instead} |" in page, name


def test_every_name_the_lifecycle_moved_is_still_there() -> None:
    """Each name of the deprecation table is its module's, with a warning naming that module."""
    import kfcompile.lifecycle as lifecycle

    for name, module in lifecycle._MOVED.items():
        with pytest.warns(DeprecationWarning, match=rf"lifecycle\.{name} .* {module}$"):
            moved = getattr(lifecycle, name)
        assert moved is getattr(importlib.import_module(module), name), name

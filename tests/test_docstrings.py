"""A library that documents itself: every public name says what it is (the API reference on the
site is made of these docstrings), every member of a public enum too, and the names services
import from ``kfcompile.lifecycle`` are there."""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import itertools
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
from generated import member_docs  # noqa: E402

# Every public API: its module and the names it exports.
PUBLIC = {
    "kfcompile": None,  # None: its __all__
    "kfcompile.lifecycle": None,
    "kfcompile_kube": None,
    "kfcompile_local": None,
    "kfcompile.integrations.torchx": (
        "KfcompileScheduler",
        "KfcompileRequest",
        "RunOpts",
        "SchedulerError",
        "create_scheduler",
    ),
    "kfcompile.integrations.nemo_run": None,
    "kfcompile.testing": None,
    "kfcompile.testing.courses": None,
    "kfcompile.testing.kueue": None,
}


def public() -> list[tuple[str, str]]:
    found = []
    for module, names in PUBLIC.items():
        try:
            loaded = importlib.import_module(module)
        except ImportError:  # a launcher's integration without its launcher
            continue
        found += [(module, n) for n in (names or loaded.__all__)]
    return found


NAMES = public()


def value(module: str, name: str) -> object:
    return getattr(importlib.import_module(module), name)


def home(module: str, name: str) -> str:
    """The module that defines a name a package exports (lazily, from its ``_LAZY``)."""
    package = importlib.import_module(module)
    lazy = getattr(package, "_LAZY", {})
    return next((m for m, names in lazy.items() if name in names), module)


def constant_doc(module: str, name: str) -> str:
    """A module-level constant's docstring: the string right below its assignment (where
    mkdocstrings finds it)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    for statement, after in itertools.pairwise(tree.body):
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AnnAssign) else []
        )  # fmt: skip
        named = any(isinstance(t, ast.Name) and t.id == name for t in targets)
        if named and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            return str(after.value.value)
    return ""


@pytest.mark.parametrize(("module", "name"), NAMES, ids=[f"{m}.{n}" for m, n in NAMES])
def test_every_public_name_says_what_it_is(module: str, name: str) -> None:
    obj = value(module, name)
    if inspect.isclass(obj):  # its own, not a base class's (vars: __doc__ is not inherited)
        doc = vars(obj).get("__doc__") or ""
        # NamedTuple and dataclass write one when there is none: "Name(field, ...)"
        assert not doc.startswith(f"{obj.__name__}("), f"{module}.{name}: {doc!r} is generated"
    elif inspect.isfunction(obj):
        doc = obj.__doc__ or ""
    else:  # a constant, or a type alias
        doc = constant_doc(home(module, name), name)
    assert len(doc.strip()) > 20, f"{module}.{name} has no docstring of its own"


ENUMS = [(m, n) for m, n in NAMES if isinstance(value(m, n), enum.EnumMeta)]


@pytest.mark.parametrize(("module", "name"), ENUMS, ids=[f"{m}.{n}" for m, n in ENUMS])
def test_every_member_of_a_public_enum_says_what_it_is(module: str, name: str) -> None:
    docs = member_docs(value(module, name))  # type: ignore[arg-type]
    assert [m for m, doc in docs.items() if not doc] == []


def test_the_enums_are_found() -> None:
    assert {("kfcompile", "State"), ("kfcompile.lifecycle", "Happened")} <= set(ENUMS)


def test_deleting_is_documented_where_a_service_reads_states() -> None:
    from kfcompile import State
    from kfcompile.lifecycle import Happened

    assert "deleted" in member_docs(State)["DELETING"]
    assert "DELETING" in member_docs(Happened)["DELETING"]


def test_ref_and_forbidden_are_public_in_lifecycle_again() -> None:
    from kfcompile import lifecycle
    from kfcompile.lifecycle import Forbidden, NotFound, Ref, ports

    assert (Ref, Forbidden, NotFound) == (ports.Ref, ports.Forbidden, ports.NotFound)
    assert {"Ref", "Forbidden", "NotFound"} <= set(lifecycle.__all__)


def test_a_name_lifecycle_no_longer_exports_still_works_and_says_where_it_went() -> None:
    from kfcompile import lifecycle
    from kfcompile.lifecycle import ports, session

    with pytest.warns(DeprecationWarning, match=r"lifecycle\.Gone .* kfcompile\.lifecycle\.ports"):
        assert lifecycle.Gone is ports.Gone
    with pytest.warns(DeprecationWarning, match="kfcompile.lifecycle.session"):
        assert lifecycle.Backoff is session.Backoff
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lifecycle.Ref is ports.Ref  # public: no warning
    with pytest.raises(AttributeError):
        lifecycle.NoSuchThing  # noqa: B018

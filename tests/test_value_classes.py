"""kfcompile's attrs classes generate only the methods something uses: attrs compiles each
class's repr, eq and hash when the class is made, at every start-up (a cold render paid tens of
millions of instructions for them). A repr is generated for the public API's classes alone (the
spec's share one, as attrs writes it); eq and hash where values are compared (a class without
them compares by identity)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import attrs
import pytest

import kfcompile
import kfcompile_kube
import kfcompile_local
from kfcompile import Launcher, RuntimeRef, lifecycle, load_spec

PACKAGES = (kfcompile, kfcompile_kube, kfcompile_local)


def _classes() -> list[type[Any]]:
    found = []
    for package in PACKAGES:
        names = [package.__name__] + [
            m.name
            for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
            # The integrations need torchx or nemo_run; __main__ runs the command.
            if not m.name.startswith("kfcompile.integrations") and not m.name.endswith("__main__")
        ]
        for name in names:
            module = importlib.import_module(name)
            found += [
                v
                for v in vars(module).values()
                if isinstance(v, type) and attrs.has(v) and v.__module__ == name
            ]
    return found


def _public() -> set[type[Any]]:
    import kfcompile.testing  # (public too; never imported by a command)

    public = set()
    for package in (kfcompile, lifecycle, kfcompile_kube, kfcompile_local, kfcompile.testing):
        public |= {v for n in package.__all__ if isinstance(v := getattr(package, n), type)}
    return public


def _generated(cls: type[Any], method: str) -> bool:
    code = getattr(cls.__dict__.get(method), "__code__", None)
    return code is not None and code.co_filename.startswith("<attrs generated")


def test_only_the_public_classes_have_a_repr_compiled_for_them() -> None:
    classes, public = _classes(), _public()
    assert len(classes) > 100  # the reader finds them
    compiled = sorted(c.__qualname__ for c in classes if _generated(c, "__repr__"))
    assert compiled and set(compiled) <= {c.__qualname__ for c in public}, compiled


def test_a_class_without_eq_compares_by_identity() -> None:
    lean = [c for c in _classes() if "__eq__" not in c.__dict__]
    assert lean  # the machines' messages and phases, the tables' rows ...
    for cls in lean:
        assert cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__, cls


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (
            Launcher(kind="python", entrypoint="/t.py"),
            "Launcher(kind='python', entrypoint='/t.py', module=None, args=(), no_python=False)",
        ),
        (
            RuntimeRef(name="torch-distributed"),
            "RuntimeRef(name='torch-distributed', kind='ClusterTrainingRuntime', "
            "api_group='trainer.kubeflow.org')",
        ),
    ],
)
def test_a_spec_shows_itself_as_attrs_would(value: object, shown: str) -> None:
    assert repr(value) == shown
    assert not _generated(type(value), "__repr__")


def test_a_spec_is_a_value() -> None:
    text = "name: a\nimage: python:3.12\ncommand: [python, -c, pass]\n"
    assert load_spec(text) == load_spec(text) and hash(load_spec(text)) == hash(load_spec(text))
    assert load_spec(text) != load_spec(text.replace("a\n", "b\n"))


def test_the_tables_rows_and_codecs_are_value_classes_like_the_rest() -> None:
    """One style of value class: the field table's rows, its codecs and specials, a target's
    layout are attrs classes too (they were hand-written for start-up's sake)."""
    from kfcompile.targets import TARGETS, codecs, fields

    rows = [*fields.FIELDS, *(getattr(row, "codec", None) for row in fields.FIELDS)]
    made = [*rows, TARGETS["pytorchjob/v1"].layout, codecs.Decoded(None)]
    assert [type(v).__name__ for v in made if v is not None and not attrs.has(type(v))] == []

"""Kubernetes core/v1 objects checked against the upstream schema, at every depth.

``k8s_core_v1.json`` holds the objects a spec can embed (the closure of ``PodSpec``): for each,
its properties' types and its required keys, generated from the Kubernetes OpenAPI definitions
by ``tools/gen_k8s_schema.py`` and pinned by a test. This module walks a value against that data:
unknown keys (with a did-you-mean), wrong types and missing required keys, one problem per
line with its path. Rules the schema cannot say (one volume source, DNS names...) come in as
``rules``: a check per object name, run wherever that object appears.

The walk is iterative and never raises, whatever it is given; the data loads on first use with
the json module alone, so neither jsonschema nor kubernetes-validate is needed at run time.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kfcompile.spec import k8s_rules
from kfcompile.spec.object_paths import key

Found = Iterator[tuple[str, str]]
ObjectRule = Callable[[Mapping[Any, Any]], Iterable[tuple[str, str]]]

DATA_FILE = os.path.join(os.path.dirname(__file__), "k8s_core_v1.json")
MAX_DEPTH = 64  # far below Python's recursion limit, far above any core/v1 object
_MAX_HINT_KEY = 100  # difflib is quadratic: no suggestions for absurdly long keys
_INT_RANGES = {"int32": 32, "int64": 64}


@functools.cache
def _data() -> dict[str, Any]:
    with open(DATA_FILE, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def definitions() -> frozenset[str]:
    return frozenset(_data()["definitions"])


@functools.cache
def fields(definition: str) -> frozenset[str]:
    """The field names of one object, e.g. ``fields("PodSpec")``."""
    return frozenset(_data()["definitions"][definition]["properties"])


def properties(definition: str) -> Mapping[str, Any]:
    """The type of each field of one object, in the file's notation (``paths.merged`` reads
    how each merges from it); an unknown object has none."""
    found: Mapping[str, Any] = _data()["definitions"].get(definition, {}).get("properties", {})
    return found


def required(definition: str) -> tuple[str, ...]:
    """The keys one object must have; an unknown object has none."""
    return tuple(_data()["definitions"].get(definition, {}).get("required", ()))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scalar(value: Any, kind: str) -> str | None:
    """The problem with ``value`` as a scalar of ``kind``, or None."""
    want: str | None = None
    if kind == "string" and not isinstance(value, str):
        want = "a string"
    elif kind == "boolean" and not isinstance(value, bool):
        want = "true or false"
    elif kind in ("integer", *_INT_RANGES):
        if not _is_int(value):
            want = "an integer"
        elif kind in _INT_RANGES:
            bits = _INT_RANGES[kind]
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            if not low <= value <= high:
                return f"must be an integer from {low} to {high}"
    elif kind == "number":
        if not (_is_int(value) or isinstance(value, float)):
            want = "a number"
        elif isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number"
    elif kind == "int-or-string" and not (_is_int(value) or isinstance(value, str)):
        want = "an integer or a string"
    elif kind == "object" and not isinstance(value, Mapping):
        want = "a mapping"
    elif kind == "quantity":
        problems = k8s_rules.quantity(value)
        return problems[0] if problems else None
    return None if want is None else f"must be {want}, got {_kind(value)}"


def unknown_field(name: str, known: Iterable[str], what: str) -> str:
    """``unknown field (did you mean 'claimName'?)``, or what the object has instead."""
    known = sorted(known)
    by_case = {k.lower(): k for k in known}
    close = [by_case[name.lower()]] if name.lower() in by_case else []
    if not close and len(name) <= _MAX_HINT_KEY:
        import difflib  # only for the hint of an unknown field

        close = difflib.get_close_matches(name, known, n=1)
    if close:
        hint = f"did you mean {close[0]!r}?"
    elif len(known) <= 8:
        hint = f"{what} has {', '.join(known)}"
    else:
        hint = f"not a {what} field"
    return f"unknown field ({hint})"


def check(
    value: Any,
    definition: str,
    *,
    partial: bool = False,
    rules: Mapping[str, ObjectRule] | None = None,
) -> Found:
    """Problems of ``value`` as a ``definition`` object: ``(sub-path, message)`` pairs.

    ``partial``: the value is merged into a generated object (an escape hatch), so its own
    required keys and object rules wait for the merge; everything below it is checked whole.
    """
    defs = _data()["definitions"]
    rules = rules or {}
    stack: list[tuple[Any, Any, str, int]] = [(value, {"ref": definition}, "", 0)]
    while stack:
        node, kind, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            yield at, "nested too deeply"
            continue
        if isinstance(kind, str):
            problem = None if node is None else _scalar(node, kind)
            if problem:
                yield at, problem
            continue
        children: list[tuple[Any, Any, str]] = []
        if "enum" in kind:
            if node is not None and node not in kind["enum"]:
                yield at, f"must be one of: {', '.join(map(str, kind['enum']))}"
        elif "list" in kind:
            if node is None:
                continue
            if not isinstance(node, list | tuple):
                yield at, f"must be a list, got {_kind(node)}"
                continue
            children = [(item, kind["list"], f"{at}[{i}]") for i, item in enumerate(node)]
        elif "map" in kind:
            if node is None:
                continue
            if not isinstance(node, Mapping):
                yield at, f"must be a mapping, got {_kind(node)}"
                continue
            children = [(v, kind["map"], f"{at}{key(str(k))}") for k, v in node.items()]
        else:
            name = kind["ref"]
            if not isinstance(node, Mapping):
                yield at, f"must be a mapping, got {_kind(node)}"
                continue
            props = defs[name]["properties"]
            for k in node:
                if not (isinstance(k, str) and k in props):
                    yield f"{at}{key(str(k))}", unknown_field(str(k), props, name)
            if not (partial and depth == 0):
                for k in defs[name].get("required", ()):
                    if node.get(k) is None:
                        yield f"{at}{key(k)}", "required"
                rule = rules.get(name)
                if rule is not None:
                    for sub, message in rule(node):
                        yield at + sub, message
            children = [
                (v, props[k], f"{at}{key(k)}")
                for k, v in node.items()
                if isinstance(k, str) and k in props and v is not None
            ]
        stack.extend((v, t, p, depth + 1) for v, t, p in reversed(children))

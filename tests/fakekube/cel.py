"""The CEL rules of a CRD (``x-kubernetes-validations``), enforced as the API server enforces
them: each rule evaluated where its schema node meets the object, with ``oldSelf`` for
transition rules (``self == oldSelf``: immutable fields) only on an update and only where the
old object had the field, and a failure reported as ``field.Invalid(path, <schema type>,
<message>)``: ``spec.managedBy: Invalid value: "string": ManagedBy must be ...``; a rule on the
root has no path (``<nil>``). The rules are evaluated by a CEL interpreter (``celpy``, RE2
regular expressions as Kubernetes'), never rewritten here, so every rule a CRD carries holds.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["FieldError", "cel_errors", "field_path", "rules_of"]

Obj = dict[str, Any]
_OLD = re.compile(r"\boldSelf\b")


class FieldError:
    """One ``field.Error`` of apimachinery: ``<field>: <body>`` (``reason`` for ``causes``)."""

    __slots__ = ("body", "field", "reason")

    def __init__(self, field: str, reason: str, body: str) -> None:
        self.field, self.reason, self.body = field, reason, body

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


def field_path(parts: list[str | int]) -> str:
    """``spec.runtimePatches[0].manager``; a map key comes as ``"[app.io/x]"`` already; the
    root is ``<nil>`` (apimachinery's ``field.Path``)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.startswith("["):
            out += part
        else:
            out += f".{part}" if out else part
    return out or "<nil>"


@functools.cache
def _program(rule: str) -> Any:
    import celpy  # the test extra: only fakes of clusters with CEL rules need it

    env = celpy.Environment()
    return env.program(env.compile(rule))


def _value(data: Any) -> Any:
    import celpy

    return celpy.json_to_cel(data)


def _schema_type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    return "object" if "properties" in schema or "additionalProperties" in schema else "string"


def _eval_error(exc: Exception) -> str:
    """What a failed evaluation says (Kubernetes: ``no such key: x``)."""
    args = getattr(exc, "args", ())
    if len(args) >= 2 and args[1] is KeyError:
        found = re.search(r"'([^']*)'", str(args[0]))
        return f"no such key: {found[1] if found else args[0]}"
    return str(args[0]) if args else str(exc)


def _check(
    rule: Mapping[str, Any], node: Any, old: Any, path: list[str | int], schema: Obj
) -> FieldError | None:
    """The FieldError for one rule at one node, or None when it holds (or does not apply)."""
    import celpy

    text = str(rule["rule"])
    transition = bool(_OLD.search(text))
    if transition and old is None:
        return None  # a transition rule holds on create, and for a field new in an update
    message = rule.get("message") or f"failed rule: {text}"
    activation = {"self": _value(node)}
    if transition:
        activation["oldSelf"] = _value(old)
    try:
        holds = bool(_program(text).evaluate(activation))
    except celpy.CELEvalError as exc:
        message, holds = f"{_eval_error(exc)} evaluating rule: {message}", False
    if holds:
        return None
    where = field_path([*path, *_field_of(rule)])
    kind = json.dumps(_schema_type(schema))
    # (no CRD here gives a rule a `reason`: each failure is FieldValueInvalid)
    return FieldError(where, "FieldValueInvalid", f"Invalid value: {kind}: {message}")


def _field_of(rule: Mapping[str, Any]) -> list[str]:
    """A rule's ``fieldPath`` (``.spec.x``) as parts below the node."""
    raw = rule.get("fieldPath")
    return [p for p in str(raw).split(".") if p] if raw else []


def cel_errors(schema: Obj, obj: Any, old: Any = None) -> list[FieldError]:
    """Every rule of ``schema`` that ``obj`` breaks (``old``: the stored object, on update)."""
    return list(_walk(schema, obj, old, []))


def _walk(schema: Obj, node: Any, old: Any, path: list[str | int]) -> Iterator[FieldError]:
    if node is None:
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        error = _check(rule, node, old, path, schema)
        if error is not None:
            yield error
    if isinstance(node, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, value in node.items():
            sub, part = props.get(key), key
            if sub is None and isinstance(extra, dict):
                sub, part = extra, f"[{key}]"
            if isinstance(sub, dict):
                yield from _walk(sub, value, old_map.get(key), [*path, part])
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        items: Obj = schema["items"]
        olds = _correlate(schema, node, old)
        for i, item in enumerate(node):
            yield from _walk(items, item, olds[i], [*path, i])


def _correlate(schema: Obj, new: list[Any], old: Any) -> list[Any]:
    """The old item of each new one: by key in a ``map`` list, none otherwise (as the server
    correlates for transition rules)."""
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list):
        return [None] * len(new)

    def key(item: Any) -> Any:
        return tuple(item.get(k) for k in keys) if isinstance(item, dict) else None

    by_key = {key(item): item for item in old}
    return [by_key.get(key(item)) for item in new]


def rules_of(schema: Any) -> Iterator[str]:
    """Every rule text in a schema (to check that each one compiles)."""
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations") or ():
            yield str(rule["rule"])
        for value in schema.values():
            yield from rules_of(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from rules_of(value)

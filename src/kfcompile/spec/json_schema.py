"""JSON Schema of the job spec, generated from the attrs classes (for editors and CI checks).

``schemas/jobspec.schema.json`` is this output; a test fails when the file is stale.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any, Literal

import attrs

from kfcompile.spec.model import JobSpec, quantity_map, quantity_text

SCHEMA_ID = "https://kfcompile.dev/schemas/jobspec.schema.json"


def _type(t: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if t is str:
        return {"type": "string"}
    if t is bool:
        return {"type": "boolean"}
    if t is int:
        return {"type": "integer"}
    if t is Any:
        return {}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (UnionType, typing.Union):
        options = [_type(a, defs) for a in args if a is not NoneType]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is tuple:
        return {"type": "array", "items": _type(args[0], defs)}
    if origin is Mapping:
        return {"type": "object", "additionalProperties": _type(args[1], defs)}
    if isinstance(t, type) and attrs.has(t):
        if t.__name__ not in defs:
            defs[t.__name__] = {}  # reserve the name first: classes may refer to each other
            defs[t.__name__] = _class(t, defs)
        return {"$ref": f"#/$defs/{t.__name__}"}
    raise TypeError(f"no JSON Schema for {t!r}")


def shown_default(a: attrs.Attribute[Any]) -> Any:
    """A field's default worth documenting: None when required, empty or made by a factory."""
    default = a.default
    factory: Any = attrs.Factory  # attrs.Factory is a class at run time
    if default is attrs.NOTHING or isinstance(default, factory) or default in (None, (), {}):
        return None
    return default


def _class(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for a in attrs.fields(cls):
        prop = _type(hints[a.name], defs)
        if a.metadata.get("load") is quantity_text:  # YAML numbers are quantities too
            prop = {"type": ["string", "number"]}
        elif a.metadata.get("load") is quantity_map:
            prop = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
        if "doc" in a.metadata:
            prop = {**prop, "description": a.metadata["doc"]}
        if a.default is attrs.NOTHING:
            required.append(a.name)
        elif shown_default(a) is not None:
            prop["default"] = a.default
        properties[a.name] = prop
    out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if cls.__doc__:
        out["description"] = " ".join(cls.__doc__.split())
    if required:
        out["required"] = required
    return out


def json_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    root = _class(JobSpec, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kfcompile JobSpec",
        **root,
        "$defs": dict(sorted(defs.items())),
    }

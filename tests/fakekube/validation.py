"""What the API server checks in an object before storing it, as a real one does: unknown
fields (``fieldValidation=Strict`` refuses them with the decoder's words, otherwise they are
pruned), CRD schema errors and CEL rules (422, each as apimachinery formats a field error), CRD
defaults and pruned nulls; and the JSON merge patch (RFC 7386)."""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kfcompile.output import crd as kfcrd

from .cel import FieldError, cel_errors, field_path
from .resources import ResourceKind, StoreError

Obj = dict[str, Any]

__all__ = ["merge_patch", "validate"]

_OBJECT_META = {
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
}


@functools.cache
def _core_validator(name: str) -> Any:
    """kubernetes-validate's strict schema ``name`` (e.g. ``pod-v1``) of the newest release."""
    try:
        import kubernetes_validate  # type: ignore[import-untyped]
        from referencing import Registry, Resource
    except ImportError:  # strict checks of core kinds need the test extra
        return None
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    dirs = sorted(
        root.glob("v*-local-strict"),
        key=lambda d: tuple(int(x) for x in re.findall(r"\d+", d.name)),
    )
    if not dirs or not (dirs[-1] / f"{name}.json").exists():
        return None
    definitions = json.loads((dirs[-1] / "_definitions.json").read_text())
    registry: Any = Registry().with_resource(
        "https://kubernetes.io/api/_definitions.json", Resource.from_contents(definitions)
    )
    schema = json.loads((dirs[-1] / f"{name}.json").read_text())
    return kfcrd._validator_class()(schema, registry=registry)


def _drop_nulls(node: Any) -> Any:
    """The server prunes nulls in a custom resource (no CRD field we serve is nullable)."""
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


def _apply_defaults(schema: Obj, node: Any) -> None:
    """Fill in the CRD schema's ``default`` values where fields are missing, as the server does."""
    if isinstance(node, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in node and "default" in sub:
                node[key] = copy.deepcopy(sub["default"])
            if key in node:
                _apply_defaults(sub, node[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in node.keys() - props.keys():
                _apply_defaults(extra, node[key])
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        for item in node:
            _apply_defaults(schema["items"], item)


def _crd_schema(rk: ResourceKind) -> Obj:
    assert rk.crd is not None
    version = next(v for v in rk.crd["spec"]["versions"] if v["name"] == rk.version)
    schema: Obj = version["schema"]["openAPIV3Schema"]
    return schema


@dataclass
class _Checked:
    unknown: list[tuple[list[str | int], str]]  # (path to the holding object, field)
    invalid: list[FieldError]  # custom resources only

    def unknown_paths(self) -> list[str]:
        return [kfcrd._path([*where, key]) for where, key in self.unknown]


def _check(rk: ResourceKind, obj: Obj) -> _Checked:
    """Unknown fields (any kind with a schema) and schema violations (custom resources)."""
    out = _Checked([], [])
    if rk.crd is not None:
        validator = kfcrd._validator(rk.crd, rk.version)
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            out.unknown += [(["metadata"], k) for k in sorted(meta) if k not in _OBJECT_META]
    elif rk.core_schema is not None:
        validator = _core_validator(rk.core_schema)
    else:
        return out
    if validator is None:
        return out
    for err in validator.iter_errors(obj):
        if err.validator == "additionalProperties" and err.validator_value is False:
            known = err.schema.get("properties", {})
            patterns = err.schema.get("patternProperties", {})
            out.unknown += [
                (list(err.absolute_path), k)
                for k in sorted(err.instance)
                if k not in known and not any(re.search(p, k) for p in patterns)
            ]
        elif rk.crd is not None:
            out.invalid.append(_field_error(err))
    return out


def _quoted(value: Any) -> str:
    """A bad value as apimachinery prints it: strings quoted, numbers and booleans bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(_TYPE_NAMES.get(type(value), "object"))


_TYPE_NAMES: dict[type, str] = {dict: "object", list: "array", type(None): "null"}


def _field_error(err: Any) -> FieldError:
    """A schema violation as the apiextensions validator reports it (``field.TooMany``, ...)."""
    parts = list(err.absolute_path)
    where, value, bound = field_path(parts), err.instance, err.validator_value
    if err.validator == "maxItems":
        noun = "item" if bound == 1 else "items"
        return FieldError(
            where, "FieldValueTooMany", f"Too many: {len(value)}: must have at most {bound} {noun}"
        )
    if err.validator == "maxLength":
        return FieldError(
            where, "FieldValueTooLong", f"Too long: may not be more than {bound} bytes"
        )
    if err.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in bound if v is not None)
        body = f"Unsupported value: {_quoted(value)}: supported values: {allowed}"
        return FieldError(where, "FieldValueNotSupported", body)
    if err.validator == "required":
        missing = re.match(r"'([^']*)'", err.message)
        where = field_path([*parts, missing[1]] if missing else parts)
        return FieldError(where, "FieldValueRequired", "Required value")
    if err.validator == "type":
        got = json.dumps(_json_type(value))
        body = f"Invalid value: {got}: {where} in body must be of type {_expected(bound)}: {got}"
        return FieldError(where, "FieldValueTypeInvalid", body)
    return FieldError(where, "FieldValueInvalid", f"Invalid value: {_quoted(value)}: {err.message}")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else _TYPE_NAMES.get(type(value), "object")


def _expected(bound: Any) -> str:
    names = [bound] if isinstance(bound, str) else [t for t in bound if t != "null"]
    return "/".join(names)


# Schema errors after which the server evaluates no CEL rule (apiextensions' hasBlockingErr).
_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
_NOT_CHECKED = FieldError(
    "<nil>",
    "FieldValueInvalid",
    'Invalid value: "null": some validation rules were not checked because the object was '
    "invalid; correct the existing errors to complete validation",
)


def _prune(obj: Obj, unknown: list[tuple[list[str | int], str]]) -> None:
    for where, key in unknown:
        node: Any = obj
        for part in where:
            node = node[part]
        node.pop(key, None)


def validate(rk: ResourceKind, obj: Obj, *, strict: bool, old: Obj | None = None) -> Obj:
    """The object to store, or StoreError: unknown fields refused when ``strict``, otherwise
    pruned (the real server also warns in a header, which no client here reads). ``old``: the
    stored object this one replaces (an update), for the CRD's transition rules."""
    if rk.crd is not None:
        obj = _drop_nulls(obj)
        _apply_defaults(_crd_schema(rk), obj)
    checked = _check(rk, obj)
    unknown = checked.unknown_paths()
    if unknown and strict:
        fields = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise StoreError(
            400,
            "BadRequest",
            f'{rk.kind} in version "{rk.version}" cannot be handled as a {rk.kind}: '
            f"strict decoding error: {fields}",
        )
    if unknown:
        obj = copy.deepcopy(obj)
        _prune(obj, checked.unknown)
    invalid = checked.invalid
    if rk.crd is not None:
        if any(e.reason in _BLOCKING for e in invalid):
            invalid = [*invalid, _NOT_CHECKED]
        else:
            invalid = [*invalid, *cel_errors(_crd_schema(rk), obj, old)]
    if invalid:
        raise invalid_error(rk, (obj.get("metadata") or {}).get("name", ""), invalid)
    return obj


def invalid_error(rk: ResourceKind, name: str, errors: list[FieldError]) -> StoreError:
    """422 as the server words it: ``TrainJob.trainer.kubeflow.org "x" is invalid: ...``."""
    listed = ", ".join(str(e) for e in errors)
    what = f"{rk.kind}.{rk.group}" if rk.group else rk.kind
    return StoreError(
        422,
        "Invalid",
        f'{what} "{name}" is invalid: ' + (f"[{listed}]" if len(errors) > 1 else listed),
        {
            **rk.details(name),
            "causes": [{"reason": e.reason, "message": e.body, "field": e.field} for e in errors],
        },
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out

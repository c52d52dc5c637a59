"""What the API server checks in an object before storing it, as a real one does: unknown
fields (``fieldValidation=Strict`` refuses them, otherwise they are pruned), CRD schema errors
(422), CRD defaults and pruned nulls; and the JSON merge patch (RFC 7386)."""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kfcompile import crd as kfcrd

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
    invalid: list[tuple[str, str]]  # (path, message), custom resources only

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
            out.invalid.append((kfcrd._path(err.absolute_path), err.message))
    return out


def _prune(obj: Obj, unknown: list[tuple[list[str | int], str]]) -> None:
    for where, key in unknown:
        node: Any = obj
        for part in where:
            node = node[part]
        node.pop(key, None)


def validate(rk: ResourceKind, obj: Obj, *, strict: bool) -> Obj:
    """The object to store, or StoreError: unknown fields refused when ``strict``, otherwise
    pruned (the real server also warns in a header, which no client here reads)."""
    if rk.crd is not None:
        obj = _drop_nulls(obj)
        _apply_defaults(_crd_schema(rk), obj)
    checked = _check(rk, obj)
    unknown = checked.unknown_paths()
    if unknown and strict:
        fields = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise StoreError(400, "BadRequest", f"strict decoding error: {fields}")
    if checked.invalid:
        name = (obj.get("metadata") or {}).get("name", "")
        listed = ", ".join(f"{path}: Invalid value: {msg}" for path, msg in checked.invalid)
        many = len(checked.invalid) > 1
        raise StoreError(
            422,
            "Invalid",
            f'{rk.kind}.{rk.group} "{name}" is invalid: ' + (f"[{listed}]" if many else listed),
            {
                **rk.details(name),
                "causes": [
                    {"reason": "FieldValueInvalid", "message": f"Invalid value: {msg}", "field": p}
                    for p, msg in checked.invalid
                ],
            },
        )
    if unknown:
        obj = copy.deepcopy(obj)
        _prune(obj, checked.unknown)
    return obj


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

"""Validate objects against a CustomResourceDefinition, the way the API server would.

A CRD's ``openAPIV3Schema`` is converted to JSON Schema (draft 2020-12) honouring the
structural-schema extensions, so that:

* unknown fields are errors, exactly as with ``fieldValidation=Strict``, except below
  ``x-kubernetes-preserve-unknown-fields``;
* ``x-kubernetes-int-or-string`` accepts integers and strings, ``nullable`` accepts ``null``;
* ``x-kubernetes-embedded-resource`` objects may carry ``apiVersion``, ``kind`` and ``metadata``;
* ``x-kubernetes-list-type`` ``set``/``map`` lists reject duplicate items / map keys;
* integers are integers: neither ``2.0`` nor ``true`` is one.

Not checked: CEL (``x-kubernetes-validations``), ``format``, admission webhooks. Stricter than
the server on one point: a ``null`` in a non-nullable field is an error (the server would
silently prune it, which for a renderer is a bug too).

Pure: CRDs are passed in already parsed. ``jsonschema`` is imported on first use only, and one
validator is built per CRD version and cached; a CRD must therefore not be mutated after it has
been passed to :func:`errors`.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["crd_versions", "errors", "json_schema"]

Schema = dict[str, Any]

_CACHE_SIZE = 32  # validators kept, one per (CRD object, version)


# --- reading the CRD ----------------------------------------------------------------------------


def _field(node: Any, key: str, kind: type, where: str) -> Any:
    value = node.get(key) if isinstance(node, Mapping) else None
    if not isinstance(value, kind):
        expected = "a string" if kind is str else "a list" if kind is list else "a mapping"
        raise ValueError(f"not a valid CustomResourceDefinition: {where}.{key} must be {expected}")
    return value


def _spec(crd: Mapping[str, Any]) -> tuple[str, str, list[Any]]:
    """``(group, kind, versions)``, or ValueError if ``crd`` is no apiextensions/v1 CRD."""
    spec = _field(crd, "spec", Mapping, "(root)")
    group = _field(spec, "group", str, "spec")
    kind = _field(_field(spec, "names", Mapping, "spec"), "kind", str, "spec.names")
    versions = _field(spec, "versions", list, "spec")
    for i, version in enumerate(versions):
        _field(version, "name", str, f"spec.versions[{i}]")
    return group, kind, versions


def _crd_name(crd: Mapping[str, Any], kind: str) -> str:
    metadata = crd.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) and name else kind


def crd_versions(crd: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(apiVersion, kind, version name)`` of each served version, in the CRD's order.

    E.g. ``[("trainer.kubeflow.org/v1alpha1", "TrainJob", "v1alpha1")]``. Raises ValueError if
    ``crd`` is not a CustomResourceDefinition.
    """
    return _served(*_spec(crd))


def _served(group: str, kind: str, versions: list[Any]) -> list[tuple[str, str, str]]:
    return [(f"{group}/{v['name']}", kind, v["name"]) for v in versions if v.get("served", True)]


# --- openAPIV3Schema -> JSON Schema -------------------------------------------------------------


def _top_metadata() -> Schema:
    """Minimal ObjectMeta; the rest of metadata is the server's business."""
    string_map = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": string_map,
            "annotations": copy.deepcopy(string_map),
        },
        "anyOf": [{"required": ["name"]}, {"required": ["generateName"]}],
    }


_EMBEDDED: Mapping[str, Schema] = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
}
_COMBINATORS = ("anyOf", "allOf", "oneOf", "not")


def _nullable(schema: Schema) -> Schema:
    """``schema`` or null: a type list where possible, for precise error messages."""
    types = schema.get("type")
    if isinstance(types, str | list) and not any(k in schema for k in _COMBINATORS):
        types = [types] if isinstance(types, str) else list(types)
        schema["type"] = types if "null" in types else [*types, "null"]
        if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        return schema
    return {"anyOf": [{"type": "null"}, schema]}


def _convert(node: Schema) -> Schema:
    """One structural-schema node and everything below it, as JSON Schema."""
    out: Schema = {}
    for key, value in node.items():
        if key in ("description", "x-kubernetes-validations", "nullable"):
            continue
        if key == "properties":
            out[key] = {name: _convert(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _convert(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_convert(sub) for sub in value]
        else:
            out[key] = value
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        # OpenAPI 3.0: a boolean flag on the bound; JSON Schema: the bound itself
        if isinstance(out.get(flag), bool) and out.pop(flag) and bound in out:
            out[flag] = out.pop(bound)
    if node.get("x-kubernetes-int-or-string"):  # a type list validates faster than anyOf
        if out.get("anyOf") == [{"type": "integer"}, {"type": "string"}]:
            del out["anyOf"]
        if "anyOf" not in out:
            out["type"] = ["integer", "string"]
    if node.get("x-kubernetes-embedded-resource"):
        out["properties"] = {**_EMBEDDED, **out.get("properties", {})}
    is_object = out.get("type") == "object" or "properties" in out
    if is_object and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)  # Strict: unknown fields are errors
    if node.get("nullable"):
        out = _nullable(out)
    return out


def json_schema(crd: Mapping[str, Any], version: str | None = None) -> dict[str, Any]:
    """JSON Schema of one served version of ``crd`` (default: the first served one).

    ``apiVersion`` and ``kind`` are constants and ``metadata`` a minimal ObjectMeta (a name or
    generateName, namespace, string labels and annotations); all three are required. The result
    is a new dict sharing nothing with ``crd``. Raises ValueError if ``crd`` is not a CRD, or
    ``version`` is not one it serves.
    """
    group, kind, versions = _spec(crd)
    served = [(i, v) for i, v in enumerate(versions) if v.get("served", True)]
    chosen = next(((i, v) for i, v in served if version in (None, v["name"])), None)
    if chosen is None:
        names = ", ".join(repr(v["name"]) for _, v in served) or "none"
        wanted = "a served version" if version is None else f"served version {version!r}"
        raise ValueError(f"CRD {_crd_name(crd, kind)} has no {wanted} (served: {names})")
    i, chosen_version = chosen
    schema_node = _field(chosen_version, "schema", Mapping, f"spec.versions[{i}]")
    root = _field(schema_node, "openAPIV3Schema", Mapping, f"spec.versions[{i}].schema")
    schema = _convert(dict(root))
    props = schema.setdefault("properties", {})
    props["apiVersion"] = {"const": f"{group}/{chosen_version['name']}"}
    props["kind"] = {"const": kind}
    props["metadata"] = _top_metadata()
    schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind", "metadata"})
    return copy.deepcopy(schema)


# --- validation ---------------------------------------------------------------------------------


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 with the API server's notion of integers and list types."""
    from jsonschema import (  # type: ignore[import-untyped]
        Draft202012Validator,
        ValidationError,
        validators,
    )

    def is_int(_checker: object, value: object) -> bool:  # 2.0 is no integer, nor is True
        return isinstance(value, int) and not isinstance(value, bool)

    def list_type(
        _validator: Any, list_type: str, instance: object, schema: Schema
    ) -> Iterator[Any]:
        """``x-kubernetes-list-type`` set/map: the server rejects duplicate items / keys."""
        if list_type not in ("set", "map") or not isinstance(instance, list):
            return
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: set[str] = set()
        for i, item in enumerate(instance):
            is_map = list_type == "map" and isinstance(item, dict)
            dump = json.dumps([item.get(k) for k in keys] if is_map else item, sort_keys=True)
            if dump in seen:
                yield ValidationError(f"duplicate {list_type} entry {dump}", path=(i,))
            seen.add(dump)

    return validators.extend(
        Draft202012Validator,
        validators={"x-kubernetes-list-type": list_type},
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", is_int),
    )


@functools.cache
def _schema_error_types() -> tuple[type[Exception], ...]:
    """What validating raises for a broken schema (rather than a wrong instance)."""
    from jsonschema.exceptions import SchemaError, UnknownType  # type: ignore[import-untyped]

    return SchemaError, UnknownType, re.error


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _path(parts: Iterable[str | int]) -> str:
    """``spec.containers[0].env``; keys other than identifiers quoted: ``labels["app.io/name"]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out or "(root)"


def _format(validation_errors: Iterable[Any]) -> list[str]:
    """``"<path>: <message>"`` for each jsonschema ValidationError, sorted."""
    return sorted(f"{_path(e.absolute_path)}: {e.message}" for e in validation_errors)


_validators: OrderedDict[tuple[int, str], tuple[Mapping[str, Any], Any]] = OrderedDict()
_lock = threading.Lock()


def _validator(crd: Mapping[str, Any], version: str) -> Any:
    """The cached validator of ``crd``'s ``version``.

    Keyed by the CRD's identity: hashing a CRD's contents costs more than validating an object.
    The entry holds the CRD itself, so its id cannot be reused by another object while cached.
    """
    key = (id(crd), version)
    with _lock:
        entry = _validators.get(key)
        if entry is not None and entry[0] is crd:
            _validators.move_to_end(key)
            return entry[1]
    # Not check_schema(): it costs ~100x one validation. A broken schema fails in errors().
    validator = _validator_class()(json_schema(crd, version))
    with _lock:
        _validators[key] = (crd, validator)
        _validators.move_to_end(key)
        while len(_validators) > _CACHE_SIZE:
            _validators.popitem(last=False)
    return validator


def errors(obj: Mapping[str, Any], crd: Mapping[str, Any]) -> list[str]:
    """Every violation of ``obj`` against ``crd``, as ``"<path>: <message>"``, sorted.

    Paths are like ``spec.trainer.numProcPerNode`` or ``spec.containers[0].name`` (``(root)``
    for the object itself). The schema is that of the CRD version named by ``obj``'s
    ``apiVersion``; if ``obj``'s kind or apiVersion is not one ``crd`` serves, that is the only
    error. Raises ValueError if ``crd`` is not a valid CustomResourceDefinition.
    """
    group, crd_kind, versions = _spec(crd)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if kind != crd_kind:
        name = _crd_name(crd, crd_kind)
        return [f"kind: {kind!r} does not belong to CRD {name}, whose kind is {crd_kind!r}"]
    served = _served(group, crd_kind, versions)
    version = next((name for api, _, name in served if api == api_version), None)
    if version is None:
        names = ", ".join(repr(api) for api, _, _ in served) or "none"
        name = _crd_name(crd, crd_kind)
        return [f"apiVersion: {api_version!r} is not served by CRD {name} (served: {names})"]
    try:
        return _format(_validator(crd, version).iter_errors(obj))
    except _schema_error_types() as exc:
        name = _crd_name(crd, crd_kind)
        raise ValueError(f"CRD {name}: invalid schema for {version}: {exc}") from exc

"""What the API server checks in an object before storing it, as a kube-apiserver 1.32 was seen
to (KUBEFLOW.md, "Talking to the API"): unknown fields (refused with the decoder's words under
``fieldValidation=Strict``, else pruned), CRD defaults and pruned nulls, schema errors and the
CRD's CEL rules (422, each worded as apimachinery's ``field.Error``); and JSON merge patch.

The schema is the CRD's own, via ``kfcompile.output.crd`` (core kinds: kubernetes-validate's,
via ``schema_check``). The CEL rules are the CRD's text, never rewritten, evaluated by ``celpy``
as apiextensions-apiserver does (``pkg/apiserver/schema/cel/validation.go``): each where its
schema node meets the object; a transition rule (naming ``oldSelf``) only on update where the
old object had the field (map-list items correlated by key); a failure is ``field.Invalid(path,
<schema type>, <message>)`` (the root's path ``<nil>``); none after a blocking schema error."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import schema_check

from kfcompile.output import crd as kfcrd

from .resources import FieldError, ResourceKind, StoreError, invalid

Obj = dict[str, Any]
Path = list[str | int]

# ObjectMeta's fields (apimachinery ``types.go``): any other is an unknown field.
_OBJECT_META = {
    *("annotations", "creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp"),
    *("finalizers", "generateName", "generation", "labels", "managedFields", "name"),
    *("namespace", "ownerReferences", "resourceVersion", "selfLink", "uid"),
}


def field_path(parts: Path) -> str:
    """``spec.runtimePatches[0].manager``; a map key comes as ``"[app.io/x]"`` already; the
    root is ``<nil>`` (apimachinery's ``field.Path``)."""
    out = ""
    for part in parts:
        if isinstance(part, int) or part.startswith("["):
            out += f"[{part}]" if isinstance(part, int) else part
        else:
            out += f".{part}" if out else part
    return out or "<nil>"


# --- the schema -----------------------------------------------------------------------------------


def _drop_nulls(node: Any) -> Any:
    """The server prunes nulls in a custom resource (no CRD field we serve is nullable)."""
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


def _children(schema: Obj, node: Any) -> Iterator[tuple[Obj, str | int, Any]]:
    """Each child of ``node`` its schema describes: (its schema, its path part, its key)."""
    if isinstance(node, dict):
        props, extra = schema.get("properties") or {}, schema.get("additionalProperties")
        for key in node:
            if isinstance(props.get(key), dict):
                yield props[key], key, key
            elif key not in props and isinstance(extra, dict):
                yield extra, f"[{key}]", key
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        yield from ((schema["items"], i, i) for i in range(len(node)))


def _apply_defaults(schema: Obj, node: Any) -> None:
    """Fill in the CRD schema's ``default`` values where fields are missing, as the server does."""
    if isinstance(node, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key not in node and "default" in sub:
                node[key] = copy.deepcopy(sub["default"])
    for sub, _, key in _children(schema, node):
        _apply_defaults(sub, node[key])


def _crd_schema(rk: ResourceKind) -> Obj:
    assert rk.crd is not None
    version = next(v for v in rk.crd["spec"]["versions"] if v["name"] == rk.version)
    schema: Obj = version["schema"]["openAPIV3Schema"]
    return schema


def _schema_errors(rk: ResourceKind, obj: Obj) -> tuple[list[tuple[Path, str]], list[FieldError]]:
    """Unknown fields (path to the holding object, field) of any kind with a schema, and
    schema violations of a custom resource."""
    unknown: list[tuple[Path, str]] = []
    errors: list[FieldError] = []
    if rk.crd is not None:
        validator = kfcrd._validator(rk.crd, rk.version)
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            unknown += [(["metadata"], k) for k in sorted(meta) if k not in _OBJECT_META]
    elif rk.core_schema is not None:
        validator = schema_check._core_validator(schema_check.K8S_VERSION, rk.core_schema)
    else:
        return unknown, errors
    for err in validator.iter_errors(obj):
        if err.validator == "additionalProperties" and err.validator_value is False:
            known = err.schema.get("properties", {})
            patterns = err.schema.get("patternProperties", {})
            unknown += [
                (list(err.absolute_path), k)
                for k in sorted(err.instance)
                if k not in known and not any(re.search(p, k) for p in patterns)
            ]
        elif rk.crd is not None:
            errors.append(_field_error(err))
    return unknown, errors


def _field_error(err: Any) -> FieldError:
    """A schema violation as the apiextensions validator reports it, in apimachinery's words
    (``pkg/util/validation/field/errors.go``: ``TooMany``, ``TooLong``, ``NotSupported``,
    ``Required``, ``TypeInvalid``, ``Invalid``)."""
    where, value, bound = field_path(list(err.absolute_path)), err.instance, err.validator_value
    if err.validator == "maxItems":
        noun = "item" if bound == 1 else "items"
        body = f"Too many: {len(value)}: must have at most {bound} {noun}"
        return FieldError(where, "FieldValueTooMany", body)
    if err.validator == "maxLength":
        body = f"Too long: may not be more than {bound} byte{'' if bound == 1 else 's'}"
        return FieldError(where, "FieldValueTooLong", body)
    if err.validator == "enum":
        allowed = ", ".join(json.dumps(v) for v in bound if v is not None)
        body = f"Unsupported value: {_quoted(value)}: supported values: {allowed}"
        return FieldError(where, "FieldValueNotSupported", body)
    if err.validator == "required":
        missing = re.match(r"'([^']*)'", err.message)
        where = field_path([*err.absolute_path, missing[1]] if missing else err.absolute_path)
        return FieldError(where, "FieldValueRequired", "Required value")
    if err.validator == "type":
        got = json.dumps(_JSON_TYPES.get(type(value), "object"))
        expected = "/".join(
            [bound] if isinstance(bound, str) else [t for t in bound if t != "null"]
        )
        body = f"Invalid value: {got}: {where} in body must be of type {expected}: {got}"
        return FieldError(where, "FieldValueTypeInvalid", body)
    return FieldError(where, "FieldValueInvalid", f"Invalid value: {_quoted(value)}: {err.message}")


_JSON_TYPES: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
_JSON_TYPES |= {list: "array", type(None): "null"}  # and "object"


def _quoted(value: Any) -> str:
    """A bad value as apimachinery prints it: a scalar as JSON, anything else by its type."""
    scalar = isinstance(value, bool | int | float | str)
    return json.dumps(value if scalar else _JSON_TYPES.get(type(value), "object"))


# Schema errors after which the server evaluates no CEL rule (apiextensions-apiserver
# pkg/registry/customresource/strategy.go, hasBlockingErr).
_BLOCKING = frozenset(
    f"FieldValue{r}" for r in ("NotSupported", "Required", "TooLong", "TooMany", "TypeInvalid")
)
_NOT_CHECKED = FieldError(
    "<nil>",
    "FieldValueInvalid",
    'Invalid value: "null": some validation rules were not checked because the object was '
    "invalid; correct the existing errors to complete validation",
)


# --- the CEL rules --------------------------------------------------------------------------------


@functools.cache
def compiled(rule: str) -> Any:
    """The CEL program of a rule's text, as the CRD writes it."""
    import celpy  # the test extra: only fakes of clusters with CEL rules need it

    env = celpy.Environment()
    return env.program(env.compile(rule))


@functools.lru_cache(maxsize=8192)
def _verdict(text: str, node: str, old: str | None) -> str | None:
    """Why the rule fails on these values (JSON): None when it holds, "" when it is false, the
    evaluation's error otherwise. A pure function of them, cached: the suite's clusters make the
    same objects over and over, and an evaluation costs a millisecond."""
    import celpy

    activation = {"self": celpy.json_to_cel(json.loads(node))}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(json.loads(old))
    try:
        return None if compiled(text).evaluate(activation) else ""
    except celpy.CELEvalError as exc:  # Kubernetes: "no such key: x evaluating rule: ..."
        args = exc.args
        found = re.search(r"'([^']*)'", str(args[0])) if len(args) >= 2 else None
        return f"no such key: {found[1]}" if found and args[1] is KeyError else str(args[0])


def _rule_error(rule: Obj, node: Any, old: Any, path: Path, schema: Obj) -> FieldError | None:
    """The FieldError of one rule at one node, or None when it holds (or does not apply)."""
    text = str(rule["rule"])
    transition = bool(re.search(r"\boldSelf\b", text))
    if transition and old is None:
        return None  # a transition rule holds on create, and for a field new in an update
    message = rule.get("message") or f"failed rule: {text}"
    as_json = functools.partial(json.dumps, sort_keys=True)
    problem = _verdict(text, as_json(node), as_json(old) if transition else None)
    if problem is None:
        return None
    if problem:
        message = f"{problem} evaluating rule: {message}"
    field = [p for p in str(rule.get("fieldPath") or "").split(".") if p]
    kind = schema.get("type") or "object"
    # (no CRD here gives a rule a `reason`: each failure is FieldValueInvalid)
    return FieldError(
        field_path([*path, *field]),
        "FieldValueInvalid",
        f"Invalid value: {json.dumps(kind)}: {message}",
    )


def _cel_errors(schema: Obj, node: Any, old: Any, path: Path) -> Iterator[FieldError]:
    """Every rule of ``schema`` that ``node`` breaks (``old``: the stored object, on update)."""
    if node is None:
        return
    for rule in schema.get("x-kubernetes-validations") or ():
        error = _rule_error(rule, node, old, path, schema)
        if error is not None:
            yield error
    # The old value of each child: by key in an object or a `map` list, none otherwise.
    keys = schema.get("x-kubernetes-list-map-keys") or []
    olds = old if isinstance(old, dict) else {}
    if schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
        olds = {tuple(item.get(k) for k in keys): item for item in old}
    for sub, part, key in _children(schema, node):
        child = node[key]
        if isinstance(node, dict):
            was = olds.get(key)
        else:  # (a list's items are objects where it has old ones by key)
            was = olds.get(tuple(child.get(k) for k in keys)) if olds else None
        yield from _cel_errors(sub, child, was, [*path, part])


def rules_of(schema: Any) -> Iterator[str]:
    """Every rule text in a schema (to check that each one compiles)."""
    if isinstance(schema, dict):
        for rule in schema.get("x-kubernetes-validations") or ():
            yield str(rule["rule"])
        schema = list(schema.values())
    if isinstance(schema, list):
        for value in schema:
            yield from rules_of(value)


# --- the answer -----------------------------------------------------------------------------------


def validate(rk: ResourceKind, obj: Obj, *, strict: bool, old: Obj | None = None) -> Obj:
    """The object to store, or StoreError: unknown fields refused when ``strict``, otherwise
    pruned (the real server also warns in a header, which no client here reads). ``old``: the
    stored object this one replaces (an update), for the CRD's transition rules."""
    if rk.crd is not None:
        obj = _drop_nulls(obj)
        _apply_defaults(_crd_schema(rk), obj)
    unknown, errors = _schema_errors(rk, obj)
    if unknown and strict:
        fields = ", ".join(f'unknown field "{kfcrd._path([*w, key])}"' for w, key in unknown)
        prefix = f'{rk.kind} in version "{rk.version}" cannot be handled as a {rk.kind}'
        raise StoreError(400, "BadRequest", f"{prefix}: strict decoding error: {fields}")
    if unknown:
        obj = copy.deepcopy(obj)
        for where, key in unknown:
            node: Any = obj
            for part in where:
                node = node[part]
            node.pop(key, None)
    if rk.crd is not None:
        if any(e.reason in _BLOCKING for e in errors):
            errors = [*errors, _NOT_CHECKED]
        else:
            errors = [*errors, *_cel_errors(_crd_schema(rk), obj, old, [])]
    if errors:
        raise invalid(rk, (obj.get("metadata") or {}).get("name", ""), errors)
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

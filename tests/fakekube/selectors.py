"""Label and field selectors, parsed as the API server parses them (a bad one is a 400)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from .resources import StoreError

Obj = dict[str, Any]
Matcher = Callable[[Obj], bool]

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"\s*(!?)\s*({_KEY})\s*")
_EQUALS = re.compile(rf"\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*")
_SET = re.compile(rf"\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*")


def _requirement(text: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET.fullmatch(text):
        key, within, values = m[1], m[2] == "in", {v.strip() for v in m[3].split(",")}
        return lambda labels: (labels.get(key) in values) == within
    if m := _EQUALS.fullmatch(text):
        key, equal, value = m[1], m[2] != "!=", m[3]
        return lambda labels: (labels.get(key) == value) == equal
    if m := _EXISTS.fullmatch(text):
        key, negated = m[2], bool(m[1])
        return lambda labels: (key in labels) != negated
    raise StoreError(400, "BadRequest", f"unable to parse requirement: {text.strip()!r}")


def label_matcher(selector: str) -> Matcher:
    """A predicate for ``selector`` (``a=b,c!=d,e in (f,g),h notin (i),j,!k``); StoreError 400
    when it does not parse, as the server answers."""
    if not selector.strip():
        return lambda obj: True
    # the commas between requirements, not those inside ``in (a,b)``
    reqs = [_requirement(part) for part in re.split(r",(?![^()]*\))", selector)]

    def match(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in reqs)

    return match


# Field selectors the real server supports beyond metadata.name/namespace, per kind.
_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        *("spec.nodeName", "spec.restartPolicy", "spec.schedulerName"),
        *("spec.serviceAccountName", "spec.hostNetwork"),
        *("status.phase", "status.podIP", "status.nominatedNodeName"),
    ),
    "Event": (
        *(f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion")),
        *("involvedObject.resourceVersion", "involvedObject.fieldPath"),
        *("reason", "reportingComponent", "source", "type"),
    ),
    "Secret": ("type",),
    "Namespace": ("status.phase",),
    "Job": ("status.successful",),
}
_FIELD_REQ = re.compile(r"\s*([A-Za-z.]+)\s*(==|!=|=)\s*([^,]*?)\s*")


def _field_value(obj: Obj, path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return "" if node is None else str(node).lower() if isinstance(node, bool) else str(node)


def _field_requirements(selector: str, known: Iterable[str]) -> list[tuple[str, str, str]]:
    """``(label, operator, value)`` of each requirement; StoreError 400, in the server's words,
    for a requirement that does not parse or a label not in ``known``."""
    labels = set(known)
    reqs = []
    for part in selector.split(","):
        m = _FIELD_REQ.fullmatch(part)
        if not m:
            raise StoreError(400, "BadRequest", f"invalid selector: '{selector}'")
        if m[1] not in labels:
            raise StoreError(400, "BadRequest", f"field label not supported: {m[1]}")
        reqs.append((m[1], m[2], m[3]))
    return reqs


def field_matcher(kind: str, selector: str) -> Matcher:
    """A predicate for a field selector (``metadata.name=x,status.phase!=Running``)."""
    if not selector.strip():
        return lambda obj: True
    supported = ("metadata.name", "metadata.namespace", *_FIELDS.get(kind, ()))
    reqs = [(p, op == "!=", v) for p, op, v in _field_requirements(selector, supported)]
    return lambda obj: all((_field_value(obj, p) == v) != neg for p, neg, v in reqs)


def rename_fields(selector: str, labels: dict[str, str]) -> str:
    """A field selector in another version's labels (``labels``: this version's -> that one's),
    as the server converts one before matching; StoreError 400 for a label not in ``labels``."""
    if not selector.strip():
        return selector
    return ",".join(f"{labels[p]}{op}{v}" for p, op, v in _field_requirements(selector, labels))

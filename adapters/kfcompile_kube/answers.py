"""What the API server answered, read as a hostile party's bytes: bounded in size, and checked for
the shape the port promises before anything reads it, so a server that is not an API server (an
auth proxy's HTML login page), a broken one or a hostile one is one ``BadAnswer`` line that says
what was wrong (the call is named by the lifecycle), never a traceback, never all its bytes.

The limits (what no API server sends):

- an object: 3 MiB. etcd takes at most 1.5 MiB per request (its ``--max-request-bytes``
  default), and the API server decodes no write body over 3 MiB (``MaxRequestBodyBytes`` in
  k8s.io/apiserver/pkg/server/config.go ``NewConfig``: twice etcd's 1.5 MB, since a JSON body
  shrinks when stored as protobuf), so an answer holding one object is no larger. An error's
  ``Status`` is read up to the same limit (``compat``).
- a list page: 64 MiB. The adapter asks for pages of at most 500 objects (``LIST_PAGE``); a pod
  with its managed fields is 5-30 KiB, so even 500 of the largest pods any job makes are a few
  MiB, and 64 MiB (500 objects of 128 KiB) is room for any page a cluster serves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from kfcompile.lifecycle.ports import ApiError, Obj

MiB: Final = 1 << 20
OBJECT_LIMIT: Final = 3 * MiB
LIST_LIMIT: Final = 64 * MiB
_PIECE: Final = 64 * 1024

# ObjectMeta fields the lifecycle reads, and their JSON types (core/v1 OpenAPI ``ObjectMeta``).
_META: Final[Mapping[str, type]] = {
    "name": str,
    "namespace": str,
    "uid": str,
    "resourceVersion": str,
    "creationTimestamp": str,
    "deletionTimestamp": str,
    "labels": dict,
    "annotations": dict,
    "ownerReferences": list,
}


class BadAnswer(ApiError):
    """The answer came but is not what an API server says: not retried (the same server gives
    the same answer), named by the call that read it."""


def bad(message: str) -> BadAnswer:
    return BadAnswer(0, "BadAnswer", message)


def read(take: Callable[[int], bytes], headers: Mapping[str, str], limit: int) -> bytes:
    """The body (``take(n)``: its next n bytes, fewer at its end), refused past ``limit``
    bytes: at once when its ``Content-Length`` says so, else once limit+1 bytes have come (no
    more is read, chunked or not). A compressed body is refused too: nothing asked for one,
    and its size says nothing of what it would inflate to."""
    header = {str(k).lower(): str(v) for k, v in headers.items()}
    encoding = header.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise bad(f"the answer is {encoding}-encoded, which was not asked for")
    length = header.get("content-length", "").strip()
    if length.isdigit() and int(length) > limit:
        raise bad(f"the answer is {_size(int(length))}, over the {_size(limit)} limit")
    body = bytearray()
    while piece := take(min(_PIECE, limit + 1 - len(body))):
        body += piece
        if len(body) > limit:
            raise bad(f"the answer is over the {_size(limit)} limit")
    return bytes(body)


def _size(n: int) -> str:
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n} bytes"


def json_object(data: bytes, content_type: str | None) -> Obj:
    """The body as a JSON object; an empty body is ``{}``."""
    if not data:
        return {}
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        what = f"{content_type or 'no Content-Type'}, {_size(len(data))}"
        raise bad(f"the answer is not JSON ({what})") from None
    if not isinstance(found, dict):
        raise bad(f"the answer is {_json_type(found)}, not a JSON object")
    return found


# JSON's types as Python decodes them, as messages name them.
_TYPES: Final[Mapping[type, str]] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
}


def _json_type(value: Any) -> str:
    return "null" if value is None else _TYPES.get(type(value), type(value).__name__)


def field(obj: Mapping[str, Any], key: str, kind: type, where: str = "") -> Any:
    """``obj[key]`` when it is of JSON type ``kind``; None when absent or null; else refused."""
    value = obj.get(key)
    if value is None or type(value) is kind:  # not isinstance: True is no integer here
        return value
    raise bad(f"{where}{key} is {_json_type(value)}, not {_TYPES[kind]}")


def k8s_object(obj: Any, where: str = "") -> Obj:
    """``obj`` when it has the shape of a Kubernetes object: a JSON object whose ``metadata``
    is an object with a string ``name`` and the ObjectMeta fields the lifecycle reads of their
    types, and whose ``spec`` and ``status`` are objects when present."""
    if not isinstance(obj, dict):
        raise bad(f"{where.rstrip('.') or 'the answer'} is {_json_type(obj)}, not a JSON object")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        found = _json_type(meta) if "metadata" in obj else "missing"
        raise bad(f"{where}metadata is {found}, not an object")
    if not isinstance(meta.get("name"), str):
        raise bad(f"{where}metadata.name is {_json_type(meta.get('name'))}, not a string")
    for key, kind in _META.items():
        field(meta, key, kind, f"{where}metadata.")
    for key in ("labels", "annotations"):
        for value in (meta.get(key) or {}).values():
            if not isinstance(value, str):
                raise bad(f"{where}metadata.{key} holds {_json_type(value)}, not a string")
    field(obj, "spec", dict, where)
    field(obj, "status", dict, where)
    return obj

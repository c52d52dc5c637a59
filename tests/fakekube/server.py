"""A local fake Kubernetes API server for tests, spoken to over real HTTP.

``FakeKube`` runs an aiohttp server on 127.0.0.1 (ephemeral port) in a background thread, in
front of a :class:`~fakekube.store.Store`. It answers like a real API server where the
``kubernetes`` client and our adapter depend on it: discovery from installed CRDs, CRUD with the
documented status codes (201 for create, 200 otherwise, DELETE with the object or a Status),
``/status`` subresources, ``fieldValidation=Strict`` (400 ``strict decoding error: unknown field
"spec.foo"``; otherwise unknown fields are pruned with a ``Warning`` header), CRD schema errors
(422), label and field selectors, ``limit``/``continue`` pagination, watches with bookmarks and
in-stream 410, garbage collection, pod logs (follow included) and exec over websockets.

Simplifications: strategic-merge patch is a JSON merge patch (lists replaced, not merged) and
is refused for custom resources as the real server does; server-side apply is refused (415);
no conversion between versions of one CRD; pods are deleted at once (no grace period).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import functools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from kfcompile import crd as kfcrd

from .faults import Fault, Faults, error_status
from .store import Change, ResourceKind, Store, StoreError, field_matcher, label_matcher
from .wsexec import exec_handler

Obj = dict[str, Any]

__all__ = ["FakeKube", "RequestLog", "RequestRecord", "load_crd"]

log = logging.getLogger("fakekube")

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
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
_BUILTIN_GROUPS = ("", "batch", "apiextensions.k8s.io")  # list items carry no kind/apiVersion
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
_MERGE = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_JSON_PATCH = "application/json-patch+json"


_DROP_AFTER = web.RequestKey("drop_after", int)  # from a fault: end the stream after N
_EXEC_STDOUT = web.RequestKey("exec_stdout", object)  # from a fault: what an exec sends instead


@dataclass
class RequestRecord:
    """One HTTP request as the server saw it. ``status`` is 0 until answered (or if dropped)."""

    method: str
    path: str
    query: dict[str, str]  # the last value of each parameter
    watch: bool
    status: int = 0
    verb: str = ""  # get list watch create update patch delete deletecollection log exec discovery
    fault: Fault | None = None
    time: float = field(default_factory=time.monotonic)


_RECORD = web.RequestKey("record", RequestRecord)


class RequestLog(list[RequestRecord]):
    """Every request of one FakeKube, oldest first (``clear()`` to start over)."""

    def matching(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        *,
        verb: str | None = None,
        watch: bool | None = None,
    ) -> list[RequestRecord]:
        return [
            r
            for r in list(self)
            if (method is None or r.method == method.upper())
            and (path_contains is None or path_contains in r.path)
            and (verb is None or r.verb == verb)
            and (watch is None or r.watch == watch)
        ]

    def count(  # type: ignore[override]
        self,
        method: str | None = None,
        path_contains: str | None = None,
        *,
        verb: str | None = None,
        watch: bool | None = None,
    ) -> int:
        """How many requests match (every argument optional)."""
        return len(self.matching(method, path_contains, verb=verb, watch=watch))


@functools.cache
def _load_yaml(path: str) -> Obj:
    data: Obj = yaml.load(Path(path).read_text(), Loader=yaml.CSafeLoader)
    return data


def load_crd(path: Path) -> Obj:
    """The parsed CRD file, cached per path: one object per file, so validators are reused.

    Do not mutate it.
    """
    return _load_yaml(str(Path(path).resolve()))


def _release(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.stem))


def _flag(query: Any, name: str) -> bool:
    """A boolean query parameter as the API server reads it (apimachinery's
    ``Convert_Slice_string_To_bool``): absent, "0" or "false" in any case is false, anything
    else true; older clients send ``watch=True``."""
    value = query.get(name)
    return value is not None and value != "0" and value.lower() != "false"


def _json(status: int, body: Any, headers: Iterable[tuple[str, str]] = ()) -> web.Response:
    resp = web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )
    for name, value in headers:
        resp.headers.add(name, value)
    return resp


def _warnings(messages: list[str]) -> list[tuple[str, str]]:
    """``Warning`` headers as the server writes them (RFC 7234, quotes escaped)."""
    return [("Warning", '299 - "{}"'.format(m.replace('"', '\\"'))) for m in messages]


def _error(err: StoreError) -> web.Response:
    headers = [("Retry-After", "1")] if err.code == 429 else []
    return _json(err.code, err.status(), headers)


def _bad(message: str, code: int = 400, reason: str = "BadRequest") -> StoreError:
    return StoreError(code, reason, message)


# --- validation -------------------------------------------------------------------------------


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


def _validate(rk: ResourceKind, obj: Obj, mode: str) -> tuple[Obj, list[str]]:
    """``(object to store, warnings)`` or StoreError, following ``fieldValidation`` ``mode``."""
    if rk.crd is not None:
        obj = _drop_nulls(obj)
        _apply_defaults(_crd_schema(rk), obj)
    checked = _check(rk, obj)
    unknown = checked.unknown_paths()
    if unknown and mode == "Strict":
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
    warnings = [f'unknown field "{p}"' for p in unknown] if mode != "Ignore" else []
    return obj, warnings


# --- patches ----------------------------------------------------------------------------------


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


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _bad(f"invalid JSON pointer {path!r}", 422, "Invalid")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(doc, list):
            doc = doc[int(part)]
        elif isinstance(doc, dict):
            doc = doc[part]
        else:
            raise KeyError(part)
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    if not isinstance(ops, list):
        raise _bad("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        try:
            kind, parts = op["op"], _pointer(op["path"])
            if kind in ("move", "copy"):
                src = _pointer(op["from"])
                value = copy.deepcopy(_walk(doc, src))
                if kind == "move":
                    doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
                doc = json_patch(doc, [{"op": "add", "path": op["path"], "value": value}])
                continue
            if kind == "test":
                if _walk(doc, parts) != op["value"]:
                    raise _bad(f"testing value {op['path']} failed", 422, "Invalid")
                continue
            if not parts:
                doc = copy.deepcopy(op["value"]) if kind != "remove" else None
                continue
            parent, last = _walk(doc, parts[:-1]), parts[-1]
            if kind == "remove" or kind == "replace":
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    del parent[last]
            if kind in ("add", "replace"):
                value = copy.deepcopy(op["value"])
                if isinstance(parent, list):
                    if last == "-":
                        parent.append(value)
                    else:
                        parent.insert(int(last), value)
                else:
                    parent[last] = value
            elif kind != "remove":
                raise _bad(f"unknown json patch operation {kind!r}", 422, "Invalid")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise _bad(
                f"the server rejected our request due to an error in our request: {op!r}: {exc}",
                422,
                "Invalid",
            ) from exc
    return doc


# --- routing ----------------------------------------------------------------------------------


@dataclass
class _Target:
    kind: ResourceKind
    namespace: str | None  # from the URL; None: all namespaces / cluster-scoped
    name: str | None
    sub: str | None
    watch_path: bool  # the legacy /watch/ prefix


class FakeKube:
    """A fake API server: ``with FakeKube(crd_files=[...]) as kube: kube.kubeconfig(path)``."""

    def __init__(
        self,
        crd_dir: Path | None = None,
        crd_files: Sequence[Path] = (),
        *,
        crds: Sequence[Obj] = (),
        history: int = 1000,
    ) -> None:
        """``crd_dir``: install the CRDs of its top-level ``*.yaml`` (of files defining the same
        CRD, e.g. ``trainjobs-v2.0.1.yaml`` .. ``trainjobs-v2.3.0.yaml``, the highest release);
        ``crd_files``: install these (later ones win); ``crds``: already parsed CRDs.
        ``history``: watch events kept (older resourceVersions give 410)."""
        self.store = Store(history=history)
        self.faults = Faults(self.store)
        self.requests = RequestLog()
        self.tokens: set[str] = {"fake-token"}
        self.bookmark_interval = 1.0  # seconds between BOOKMARK events of a watch
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._closing = False
        self._stream_events: set[asyncio.Event] = set()
        chosen: dict[str, Obj] = {}
        if crd_dir is not None:
            for path in sorted(Path(crd_dir).glob("*.yaml"), key=_release):
                crd = load_crd(path)
                if crd.get("kind") == "CustomResourceDefinition":
                    chosen[crd["metadata"]["name"]] = crd
        for path in crd_files:
            crd = load_crd(path)
            chosen[crd["metadata"]["name"]] = crd
        for crd in crds:
            chosen[crd["metadata"]["name"]] = crd
        for crd in chosen.values():
            self.install_crd(crd)

    def install_crd(self, crd: Obj) -> None:
        """Serve a CRD's kinds from now on (discovery, CRUD, validation). Do not mutate ``crd``
        afterwards: validators are cached per CRD object."""
        name = crd["metadata"]["name"]
        existing = self.store.get(*_CRD, None, name)
        if existing is None:
            self.store.create(crd)
            return
        # Replacing a CRD keeps its objects, as on a real cluster
        meta = {**crd["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]}
        self.store.update({**crd, "metadata": meta, "status": existing.get("status")})
        self.store.register_crd(crd)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fakekube", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), loop).result(10)

    async def _serve(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.2
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._closing = True

        async def shutdown() -> None:
            for event in list(self._stream_events):
                event.set()
            if self._runner is not None:
                await self._runner.cleanup()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> FakeKube:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def kubeconfig(
        self,
        path: Path,
        *,
        namespace: str = "default",
        context: str = "fake",
        token: str = "fake-token",
    ) -> Path:
        """Write a kubeconfig for this server (bearer ``token``, which the server then accepts)
        and return ``path``."""
        if not self.url:
            raise RuntimeError("FakeKube.kubeconfig: start the server first")
        self.tokens.add(token)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": token}}],
            "contexts": [
                {
                    "name": context,
                    "context": {"cluster": context, "user": context, "namespace": namespace},
                }
            ],
            "current-context": context,
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2))
        return path

    # --- middleware: record, authenticate, inject faults -------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        watch = _flag(request.query, "watch") or "/watch/" in request.path
        record = RequestRecord(request.method, request.path, dict(request.query), watch)
        self.requests.append(record)
        request[_RECORD] = record
        auth = request.headers.get("Authorization", "")
        if not (auth.startswith("Bearer ") and auth[7:] in self.tokens):
            record.status = 401
            return _json(401, error_status(401))
        fault = self.faults.take(request.method, request.path, watch)
        if fault is not None:
            record.fault = fault
            if fault.hang:
                await request.read()  # as a slow server: the request is in, the answer late
                await asyncio.sleep(fault.hang)
            if fault.drop:
                assert request.transport is not None
                request.transport.abort()
                return web.Response()  # never sent: the connection is gone
            if fault.status is not None:
                record.status = fault.status
                headers = [("Retry-After", str(fault.retry_after))] if fault.status == 429 else []
                body = error_status(fault.status, fault.message, fault.retry_after)
                return _json(fault.status, body, headers)
            if fault.drop_after is not None:
                request[_DROP_AFTER] = fault.drop_after
            if fault.exec_stdout is not None:
                request[_EXEC_STDOUT] = fault.exec_stdout
        response: web.StreamResponse = await handler(request)
        record.status = record.status or response.status
        return response

    # --- dispatch ----------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except StoreError as err:
            return _error(err)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug here: answer it visibly rather than hang the client
            log.exception("fakekube: %s %s failed", request.method, request.path)
            return _json(500, error_status(500, f"fakekube: {type(exc).__name__}: {exc}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        record: RequestRecord = request[_RECORD]
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            raise _bad("the server could not find the requested resource", 404, "NotFound")
        if parts == ["version"]:
            record.verb = "discovery"
            return _json(200, self._version())
        if (parts[0] == "api" and len(parts) <= 2) or (parts[0] == "apis" and len(parts) <= 3):
            record.verb = "discovery"
            return _json(200, self._discovery(parts))
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _bad("the server could not find the requested resource", 404, "NotFound")
        target = self._target(group, version, rest)
        method = request.method
        if target.sub is None and target.name is None:
            if method == "GET" and (record.watch or target.watch_path):
                record.verb = "watch"
                return await self._watch(request, target)
            if method == "GET":
                record.verb = "list"
                return self._list(request, target)
            if method == "POST" and (target.namespace or not target.kind.namespaced):
                record.verb = "create"
                return await self._create(request, target)
            if method == "DELETE":
                record.verb = "deletecollection"
                return self._delete_collection(request, target)
        elif target.sub is None:
            if method == "GET" and (record.watch or target.watch_path):
                record.verb = "watch"
                return await self._watch(request, target)
            handlers = {
                "GET": ("get", self._get),
                "PUT": ("update", self._update),
                "PATCH": ("patch", self._patch),
                "DELETE": ("delete", self._delete),
            }
            if method in handlers:
                record.verb, handle = handlers[method]
                return await handle(request, target)
        elif target.sub == "status" and method in ("GET", "PUT", "PATCH"):
            record.verb = {"GET": "get", "PUT": "update", "PATCH": "patch"}[method]
            if method == "GET":
                return await self._get(request, target)
            if method == "PUT":
                return await self._update(request, target)
            return await self._patch(request, target)
        elif target.sub == "log" and method == "GET":
            record.verb = "log"
            return await self._log(request, target)
        elif target.sub == "exec" and method in ("GET", "POST"):
            record.verb = "exec"
            return await self._exec(request, target)
        raise _bad(
            "the server does not allow this method on the requested resource",
            405,
            "MethodNotAllowed",
        )

    def _target(self, group: str, version: str, rest: list[str]) -> _Target:
        not_found = _bad("the server could not find the requested resource", 404, "NotFound")
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        if not rest:
            raise not_found
        if rest[0] == "namespaces" and len(rest) >= 3:
            kind = self.store.kind_by_plural(group, version, rest[2])
            if kind is not None and kind.namespaced:
                if len(rest) > 5 or (len(rest) == 5 and rest[4] not in kind.subresources):
                    raise not_found
                name = rest[3] if len(rest) > 3 else None
                sub = rest[4] if len(rest) > 4 else None
                return _Target(kind, rest[1], name, sub, watch_path)
        kind = self.store.kind_by_plural(group, version, rest[0])
        if kind is None or len(rest) > 3 or (kind.namespaced and len(rest) > 1):
            raise not_found
        if len(rest) == 3 and rest[2] not in kind.subresources:
            raise not_found
        name = rest[1] if len(rest) > 1 else None
        return _Target(kind, None, name, rest[2] if len(rest) > 2 else None, watch_path)

    # --- discovery ---------------------------------------------------------------------------

    @staticmethod
    def _version() -> Obj:
        return {
            "major": "1",
            "minor": "33",
            "gitVersion": "v1.33.0-fakekube",
            "gitCommit": "0" * 40,
            "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    def _discovery(self, parts: list[str]) -> Obj:
        kinds = self.store.kinds()
        not_found = _bad("the server could not find the requested resource", 404, "NotFound")
        if parts == ["api"]:
            address = self.url.removeprefix("http://")
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": address}
                ],
            }
        if parts[0] == "api":
            if parts[1] != "v1":
                raise not_found
            return self._resource_list("", "v1", kinds)
        groups: dict[str, list[str]] = {}
        for kind in kinds:
            if kind.group and kind.version not in groups.setdefault(kind.group, []):
                groups[kind.group].append(kind.version)

        def group_obj(name: str) -> Obj:
            versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]]
            return {"name": name, "versions": versions, "preferredVersion": versions[0]}

        if len(parts) == 1:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [group_obj(name) for name in groups],
            }
        if parts[1] not in groups:
            raise not_found
        if len(parts) == 2:
            return {"kind": "APIGroup", "apiVersion": "v1", **group_obj(parts[1])}
        if parts[2] not in groups[parts[1]]:
            raise not_found
        return self._resource_list(parts[1], parts[2], kinds)

    @staticmethod
    def _resource_list(group: str, version: str, kinds: list[ResourceKind]) -> Obj:
        resources: list[Obj] = []
        for kind in kinds:
            if (kind.group, kind.version) != (group, version):
                continue
            entry: Obj = {
                "name": kind.plural,
                "singularName": kind.singular,
                "namespaced": kind.namespaced,
                "kind": kind.kind,
                "verbs": _VERBS,
            }
            if kind.short_names:
                entry["shortNames"] = list(kind.short_names)
            resources.append(entry)
            for sub in kind.subresources:
                sub_kind, verbs = {
                    "status": (kind.kind, ["get", "patch", "update"]),
                    "log": (kind.kind, ["get"]),
                    "exec": ("PodExecOptions", ["create", "get"]),
                }[sub]
                resources.append(
                    {
                        "name": f"{kind.plural}/{sub}",
                        "singularName": "",
                        "namespaced": kind.namespaced,
                        "kind": sub_kind,
                        "verbs": verbs,
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    # --- CRUD --------------------------------------------------------------------------------

    @staticmethod
    async def _body(request: web.Request) -> Any:
        raw = await request.read()
        try:
            return json.loads(raw) if raw else None
        except ValueError as exc:
            raise _bad(f"couldn't get version/kind; json parse error: {exc}") from exc

    @staticmethod
    def _check_body(target: _Target, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise _bad("the body of the request must be a JSON object")
        kind = target.kind
        body.setdefault("apiVersion", kind.api_version)  # the endpoint implies both
        body.setdefault("kind", kind.kind)
        if body["apiVersion"] != kind.api_version or body["kind"] != kind.kind:
            raise _bad(
                f"the API version in the data ({body.get('apiVersion')}) and kind "
                f"({body.get('kind')}) do not match the expected {kind.api_version} {kind.kind}"
            )
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise _bad("metadata must be an object")
        meta = body.setdefault("metadata", {})
        if kind.namespaced:
            if meta.get("namespace") and meta["namespace"] != target.namespace:
                raise _bad(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = target.namespace
        if target.name is not None:
            if meta.get("name") and meta["name"] != target.name:
                raise _bad(
                    f"the name of the object ({meta['name']}) does not match the name on the "
                    f"URL ({target.name})"
                )
            meta["name"] = target.name
        return body

    @staticmethod
    def _field_validation(request: web.Request) -> str:
        mode = request.query.get("fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            raise _bad(
                f"fieldValidation parameter unsupported: {mode}; valid values: Ignore, Warn, Strict"
            )
        return mode

    @staticmethod
    def _dry_run(request: web.Request) -> bool:
        value = request.query.get("dryRun")
        if value not in (None, "All"):
            raise _bad(f'dryRun: Unsupported value: "{value}": supported values: "All"')
        return value == "All"

    async def _create(self, request: web.Request, target: _Target) -> web.StreamResponse:
        mode, dry = self._field_validation(request), self._dry_run(request)
        body = self._check_body(target, await self._body(request))
        obj, warnings = _validate(target.kind, body, mode)
        if "status" in target.kind.subresources:
            obj.pop("status", None)  # the status is the controllers' to write
        out = self.store.apply_create(obj, dry_run=dry)
        return _json(201, out, _warnings(warnings))

    def _require_name(self, target: _Target) -> str:
        assert target.name is not None
        return target.name

    def _current(self, target: _Target) -> Obj:
        kind, name = target.kind, self._require_name(target)
        obj = self.store.get(kind.api_version, kind.kind, target.namespace, name)
        if obj is None:
            raise StoreError(
                404, "NotFound", f'{kind.resource} "{name}" not found', kind.details(name)
            )
        return obj

    async def _get(self, request: web.Request, target: _Target) -> web.StreamResponse:
        return _json(200, self._current(target))

    def _part(self, target: _Target) -> str:
        if target.sub == "status":
            return "status"
        return "main" if "status" in target.kind.subresources else "all"

    async def _update(self, request: web.Request, target: _Target) -> web.StreamResponse:
        mode, dry = self._field_validation(request), self._dry_run(request)
        body = self._check_body(target, await self._body(request))
        if target.kind.crd is not None and not body["metadata"].get("resourceVersion"):
            raise StoreError(
                422,
                "Invalid",
                f'{target.kind.kind}.{target.kind.group} "{target.name}" is invalid: '
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                target.kind.details(self._require_name(target)),
            )
        obj, warnings = _validate(target.kind, body, mode)
        out = self.store.apply_update(obj, part=self._part(target), check_rv=True, dry_run=dry)
        return _json(200, out, _warnings(warnings))

    async def _patch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        mode, dry = self._field_validation(request), self._dry_run(request)
        content_type = request.content_type
        patch = await self._body(request)
        current = self._current(target)
        if content_type in _MERGE and not (
            content_type == _MERGE[1] and target.kind.crd is not None
        ):
            if not isinstance(patch, dict):
                raise _bad("a merge patch must be a JSON object")
            result = merge_patch(current, patch)
        elif content_type == _JSON_PATCH:
            result = json_patch(current, patch)
        else:
            raise StoreError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format ({content_type}) - accepted "
                "media types include: application/json-patch+json, "
                "application/merge-patch+json"
                + ("" if target.kind.crd else ", application/strategic-merge-patch+json"),
            )
        if not isinstance(result, dict):
            raise _bad("the patch did not result in an object", 422, "Invalid")
        meta = result.setdefault("metadata", {})
        meta["name"], meta["namespace"] = target.name, target.namespace
        if not target.kind.namespaced:
            del meta["namespace"]
        result["apiVersion"], result["kind"] = target.kind.api_version, target.kind.kind
        obj, warnings = _validate(target.kind, result, mode)
        out = self.store.apply_update(obj, part=self._part(target), check_rv=True, dry_run=dry)
        return _json(200, out, _warnings(warnings))

    async def _delete(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, name = target.kind, self._require_name(target)
        options = await self._body(request) or {}
        if not isinstance(options, dict):
            raise _bad("DeleteOptions must be a JSON object")
        policy = options.get("propagationPolicy") or request.query.get("propagationPolicy")
        orphan = options.get("orphanDependents")
        if orphan is None and "orphanDependents" in request.query:
            orphan = _flag(request.query, "orphanDependents")
        if policy is None:
            policy = "Orphan" if orphan else "Background"
        dry = self._dry_run(request) or "All" in (options.get("dryRun") or [])
        current = self._current(target)
        preconditions = options.get("preconditions") or {}
        for key in ("uid", "resourceVersion"):
            want, have = preconditions.get(key), current["metadata"].get(key)
            if want and want != have:
                raise StoreError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {kind.resource} "{name}": Precondition '
                    f"failed: {key[0].upper() + key[1:]} in precondition: {want}, "
                    f"{key[0].upper() + key[1:]} in object meta: {have}",
                    kind.details(name),
                )
        obj, gone = self.store.apply_delete(
            kind.api_version, kind.kind, target.namespace, name, policy, dry_run=dry
        )
        if gone and not kind.returns_deleted:
            return _json(
                200,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": kind.details(name, obj["metadata"]["uid"]),
                },
            )
        return _json(200, obj)

    def _delete_collection(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind = target.kind
        items = self.store.list(
            kind.api_version,
            kind.kind,
            target.namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
        )
        policy = request.query.get("propagationPolicy", "Background")
        deleted = []
        for item in items:
            meta = item["metadata"]
            try:
                obj, _ = self.store.apply_delete(
                    kind.api_version, kind.kind, meta.get("namespace"), meta["name"], policy
                )
            except StoreError as err:
                if err.code != 404:
                    raise
                continue
            deleted.append(obj)
        return _json(200, self._list_body(kind, deleted, self.store.resource_version, None))

    # --- list and watch ----------------------------------------------------------------------

    @staticmethod
    def _list_body(kind: ResourceKind, items: list[Obj], rv: int, cont: str | None) -> Obj:
        if kind.group in _BUILTIN_GROUPS:
            for item in items:  # the real server leaves these out of built-in list items
                item.pop("apiVersion", None)
                item.pop("kind", None)
        meta: Obj = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
        return {
            "kind": f"{kind.kind}List",
            "apiVersion": kind.api_version,
            "metadata": meta,
            "items": items,
        }

    def _list(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, query = target.kind, request.query
        try:
            limit = int(query.get("limit", "0") or 0)
        except ValueError as exc:
            raise _bad(f"invalid limit: {query.get('limit')}") from exc
        after: tuple[str, str] | None = None
        if token := query.get("continue"):
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                token_rv, after = int(decoded["rv"]), (decoded["start"][0], decoded["start"][1])
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise _bad(f"continue key is not valid: {exc}") from exc
            try:
                self.store.changes_after(token_rv)
            except StoreError as exc:
                raise StoreError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                ) from exc
        items, rv, last = self.store.page(
            kind.api_version,
            kind.kind,
            target.namespace,
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
            limit=limit,
            after=after,
        )
        cont = None
        if last is not None:
            cont = base64.urlsafe_b64encode(
                json.dumps({"rv": rv, "start": list(last)}).encode()
            ).decode()
        return _json(200, self._list_body(kind, items, rv, cont))

    def _waker(self, event: asyncio.Event) -> Callable[[], None]:
        loop = asyncio.get_running_loop()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the stream is gone anyway
                loop.call_soon_threadsafe(event.set)

        return wake

    async def _watch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, query = target.kind, request.query
        labels = label_matcher(query.get("labelSelector", ""))
        fields = field_matcher(kind.kind, query.get("fieldSelector", ""))
        if target.name is not None:  # /watch/namespaces/ns/pods/name
            by_name = field_matcher(kind.kind, f"metadata.name={target.name}")
            fields = (lambda f: lambda o: f(o) and by_name(o))(fields)
        try:
            # 0 or absent: the server's own limit (30-60 min on a real one)
            timeout = float(query.get("timeoutSeconds", "0")) or 1800.0
        except ValueError as exc:
            raise _bad("invalid timeoutSeconds") from exc
        bookmarks = _flag(query, "allowWatchBookmarks")
        drop_after: int | None = request.get(_DROP_AFTER)

        def matches(obj: Obj) -> bool:
            namespace = (obj.get("metadata") or {}).get("namespace")
            in_ns = target.namespace is None or namespace == target.namespace
            return in_ns and labels(obj) and fields(obj)

        response = web.StreamResponse(status=200)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        await response.prepare(request)
        event = asyncio.Event()
        wake = self._waker(event)
        self.store.add_waker(wake)
        self._stream_events.add(event)
        sent = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval

        async def send(type_: str, obj: Obj) -> bool:
            """Write one event; False when the stream must end (dropped by a fault)."""
            nonlocal sent
            if drop_after is not None and sent >= drop_after:
                assert request.transport is not None
                request.transport.abort()
                return False
            line = json.dumps({"type": type_, "object": obj}, separators=(",", ":")) + "\n"
            await response.write(line.encode())
            sent += 1
            return True

        def bookmark(rv: int) -> Obj:
            return {
                "kind": kind.kind,
                "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(rv)},
            }

        try:
            rv_param = query.get("resourceVersion", "")
            if rv_param in ("", "0"):
                objs, cursor = self.store.snapshot(kind.api_version, kind.kind)
                for obj in objs:
                    if matches(obj) and not await send("ADDED", obj):
                        return response
            else:
                try:
                    cursor = int(rv_param)
                except ValueError as exc:
                    raise _bad(f"invalid resourceVersion {rv_param!r}") from exc
            if drop_after == 0:
                return self._drop(request)
            while not self._closing:
                event.clear()
                try:
                    changes = self.store.changes_after(cursor)
                except StoreError as err:
                    await send("ERROR", err.status())
                    return response
                for change in changes:
                    cursor = change.rv
                    typed = self._watch_event(change, kind, matches)
                    if typed is not None and not await send(*typed):
                        return response
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    next_bookmark = now + self.bookmark_interval
                    if not await send("BOOKMARK", bookmark(cursor)):
                        return response
                wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), max(wait, 0.001))
            if bookmarks and not self._closing:
                await send("BOOKMARK", bookmark(cursor))
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away
        finally:
            self.store.remove_waker(wake)
            self._stream_events.discard(event)
        return response

    @staticmethod
    def _watch_event(
        change: Change, kind: ResourceKind, matches: Callable[[Obj], bool]
    ) -> tuple[str, Obj] | None:
        """The event a watcher with this filter sees for ``change`` (None: nothing)."""
        if (change.api_version, change.kind) != (kind.api_version, kind.kind):
            return None
        now = matches(change.obj)
        if change.type != "MODIFIED" or change.old is None:
            return (change.type, change.obj) if now else None
        before = matches(change.old)
        if now and before:
            return "MODIFIED", change.obj
        if now:
            return "ADDED", change.obj
        if before:
            return "DELETED", change.obj
        return None

    # --- logs --------------------------------------------------------------------------------

    def _container(self, target: _Target, pod: Obj, container: str | None) -> str:
        spec = pod.get("spec") or {}
        names: list[str] = [c["name"] for c in spec.get("containers") or []]
        init: list[str] = [c["name"] for c in spec.get("initContainers") or []]
        if not container:
            if len(names) != 1:
                raise _bad(
                    f"a container name must be specified for pod {target.name}, choose one of: "
                    f"[{' '.join(names)}]"
                    + (f" or one of the init containers: [{' '.join(init)}]" if init else "")
                )
            return names[0]
        if container not in names + init:
            raise _bad(f"container {container} is not valid for pod {target.name}")
        return container

    @staticmethod
    def _container_status(pod: Obj, container: str) -> Obj | None:
        status = pod.get("status") or {}
        for entry in (status.get("containerStatuses") or []) + (
            status.get("initContainerStatuses") or []
        ):
            if entry.get("name") == container:
                return dict(entry)
        return None

    def _finished(self, target: _Target, container: str) -> bool:
        pod = self.store.get("v1", "Pod", target.namespace, self._require_name(target))
        if pod is None:
            return True
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return True
        status = self._container_status(pod, container) or {}
        return bool((status.get("state") or {}).get("terminated"))

    async def _log(self, request: web.Request, target: _Target) -> web.StreamResponse:
        query = request.query
        pod = self._current(target)
        name = self._require_name(target)
        container = self._container(target, pod, query.get("container"))
        status = self._container_status(pod, container)
        state = (status or {}).get("state") or {}
        phase = (pod.get("status") or {}).get("phase")
        if "waiting" in state or (status is None and phase == "Pending"):
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            raise _bad(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
        instance = (status or {}).get("restartCount", 0)
        if _flag(query, "previous"):
            if instance == 0:
                raise _bad(f'previous terminated container "{container}" in pod "{name}" not found')
            instance -= 1
        since = query.get("sinceSeconds")
        cutoff = time.time() - float(since) if since else None
        stamps = _flag(query, "timestamps")
        drop_after: int | None = request.get(_DROP_AFTER)
        chunks = self.store.log(target.namespace or "default", name, container)
        first = [
            c for c in chunks if c.instance == instance and (cutoff is None or c.time >= cutoff)
        ]
        lines = [line for c in first for line in _lines(c.text, c.time, stamps)]
        if tail := query.get("tailLines"):
            lines = lines[-int(tail) :] if int(tail) > 0 else []
        if not _flag(query, "follow"):
            text = "".join(lines)
            if limit := query.get("limitBytes"):
                text = text.encode()[: int(limit)].decode(errors="ignore")
            if drop_after is not None:
                return self._drop(request)
            return web.Response(text=text, content_type="text/plain")
        response = web.StreamResponse(status=200)
        response.content_type = "text/plain"
        response.enable_chunked_encoding()
        await response.prepare(request)
        written = 0

        async def write(out: list[str]) -> bool:
            nonlocal written
            for line in out:
                if drop_after is not None and written >= drop_after:
                    assert request.transport is not None
                    request.transport.abort()
                    return False
                await response.write(line.encode())
                written += line.count("\n")
            return True

        event = asyncio.Event()
        wake = self._waker(event)
        self.store.add_waker(wake)
        self._stream_events.add(event)
        try:
            if not await write(lines):
                return response
            seen = len(chunks)
            namespace = target.namespace or "default"
            while not self._closing:
                event.clear()
                finished = self._finished(target, container)
                chunks = self.store.log(namespace, name, container)
                new = [line for c in chunks[seen:] for line in _lines(c.text, c.time, stamps)]
                seen = max(seen, len(chunks))
                if not await write(new):
                    return response
                if finished:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), 1.0)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.remove_waker(wake)
            self._stream_events.discard(event)
        return response

    @staticmethod
    def _drop(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()
        return web.Response()

    # --- exec --------------------------------------------------------------------------------

    async def _exec(self, request: web.Request, target: _Target) -> web.StreamResponse:
        if not request.query.getall("command", []):
            raise _bad("you must specify at least 1 command")
        pod = self._current(target)
        container = self._container(target, pod, request.query.get("container"))
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            raise _bad(f"cannot exec into a container in a completed pod; current phase is {phase}")
        state = (self._container_status(pod, container) or {}).get("state") or {}
        if phase != "Running" or ("running" not in state and state):
            raise _bad(f'unable to upgrade connection: container not found ("{container}")')
        return await exec_handler(
            request,
            self.store,
            pod,
            container,
            answer=request.get(_EXEC_STDOUT),
            drop_after=request.get(_DROP_AFTER),
        )


def _lines(text: str, at: float, stamps: bool) -> list[str]:
    """``text`` split into lines (ends kept), each prefixed with its time if ``stamps``."""
    lines = text.splitlines(keepends=True)
    if not stamps:
        return lines
    moment = datetime.fromtimestamp(at, UTC)
    stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}000Z "
    return [stamp + line for line in lines]

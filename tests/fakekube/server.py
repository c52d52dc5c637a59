"""A local fake Kubernetes API server for tests, spoken to over real HTTP.

``FakeKube`` runs an aiohttp server on 127.0.0.1 (ephemeral port) in a background thread, in
front of the store of a ``PortFake`` (``fakekube.port.Objects``: the one the port fake answers
from, so the scripts of ``fakekube.jobs`` move what it serves). It answers what the adapter
(``kfcompile_kube``), the ``kubernetes`` client and kubectl send, as a real API server does:
discovery, get, create (201; ``fieldValidation=Strict``: 400 ``strict decoding error: unknown
field "spec.foo"``, otherwise unknown fields are pruned), JSON merge patch, delete (the object
or a Status) with a propagation policy, label and field selectors, ``limit``/``continue``
pagination, watches with bookmarks and in-stream 410, pod logs (follow included) and exec over
websockets, a bearer token, RBAC, and injected faults.

What no client here sends is not served: PUT, JSON and strategic-merge patch (415), deleting a
collection, ``/status`` subresources, server-side apply; ``dryRun=All`` only on create. The
answers themselves come from the store; this is how they go over the wire.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from . import streams
from .background import Background, write_kubeconfig
from .clock import FakeClock
from .discovery import discovery, not_found
from .faults import Faults, error_status, retry_after_of
from .port import PortFake, bad
from .requestlog import RECORD, RequestLog, RequestRecord
from .resources import CRD_KEY, ResourceKind, StoreError, crd_kinds
from .wsexec import exec_handler

Obj = dict[str, Any]

__all__ = ["FakeKube", "RequestLog", "RequestRecord"]

log = logging.getLogger("fakekube")

_BUILTIN_GROUPS = (
    "",
    "batch",
    "events.k8s.io",
    "apiextensions.k8s.io",
)  # list items carry no kind/apiVersion
_MERGE_PATCH = "application/merge-patch+json"


# --- request parsing: every query parameter is read here ---------------------------------------


def _flag(query: Any, name: str) -> bool:
    """A boolean query parameter as the API server reads it (apimachinery's
    ``Convert_Slice_string_To_bool``): absent, "0" or "false" in any case is false, anything
    else true; older clients send ``watch=True``."""
    value = query.get(name)
    return value is not None and value != "0" and value.lower() != "false"


def _number(query: Any, name: str, kind: Callable[[str], Any] = int) -> Any:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return kind(value)
    except ValueError as exc:
        raise bad(f"invalid {name}: {value!r}") from exc


def _watch_params(query: Any) -> Obj:
    rv = query.get("resourceVersion", "")
    return {
        "label_selector": query.get("labelSelector", ""),
        "field_selector": query.get("fieldSelector", ""),
        "resource_version": None if rv in ("", "0") else _number(query, "resourceVersion"),
        # 0 or absent: the server's own limit (30-60 min on a real one)
        "timeout": _number(query, "timeoutSeconds", float) or 1800.0,
        "bookmarks": _flag(query, "allowWatchBookmarks"),
    }


def _log_params(query: Any) -> Obj:
    return {
        "container": query.get("container"),
        "follow": _flag(query, "follow"),
        "since_seconds": _number(query, "sinceSeconds", float),
        "tail_lines": _number(query, "tailLines"),
        "timestamps": _flag(query, "timestamps"),
    }


def _dry_run(query: Any) -> bool:
    """``dryRun=All`` (the only value the API has): validate everything, store nothing."""
    values = query.getall("dryRun", [])
    bad = [v for v in values if v != "All"]
    if bad:
        raise StoreError(
            422,
            "Invalid",
            f'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
            f'"{bad[0]}": supported values: "All"',
        )
    return bool(values)


def _strict(query: Any) -> bool:
    mode = query.get("fieldValidation", "Warn")
    if mode not in ("Strict", "Warn", "Ignore"):
        raise bad(
            f"fieldValidation parameter unsupported: {mode}; valid values: Ignore, Warn, Strict"
        )
    return bool(mode == "Strict")


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw) if raw else None
    except ValueError as exc:
        raise bad(f"couldn't get version/kind; json parse error: {exc}") from exc


def _json(status: int, body: Any, headers: Iterable[tuple[str, str]] = ()) -> web.Response:
    resp = web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )
    for name, value in headers:
        resp.headers.add(name, value)
    return resp


@dataclass
class _Target:
    kind: ResourceKind
    namespace: str | None  # from the URL; None: all namespaces / cluster-scoped
    name: str | None
    sub: str | None  # "log" or "exec"


class FakeKube:
    """A fake API server: ``with FakeKube(crds=[...]) as kube: kube.kubeconfig(path)``."""

    def __init__(self, *, crds: Sequence[Obj] = (), fake: PortFake | None = None) -> None:
        """``crds``: the CRDs to install (parsed; do not mutate them afterwards). ``fake``: the
        port fake whose store to serve (by default one of its own, its clock in real time and
        never advanced but by the test)."""
        self.fake = fake or PortFake(FakeClock(start=time.time(), limit=math.inf))
        self.store = self.fake.objects
        self.faults = Faults(self.store)
        self.warming: set[tuple[str, str]] = set()  # kinds whose storage is (re)initializing
        self.requests = RequestLog()
        self.tokens: set[str] = {"fake-token"}
        self.bookmark_interval = 1.0  # seconds between BOOKMARK events of a watch
        self.url = ""
        self.closing = False
        self.stream_events: set[asyncio.Event] = set()  # set on stop, so streams end
        self._background = Background()
        for crd in crds:
            self.install_crd(crd)

    def install_crd(self, crd: Obj) -> None:
        """Serve a CRD's kinds from now on (discovery, CRUD, validation). Do not mutate ``crd``
        afterwards: validators are cached per CRD object."""
        self.store.create(crd)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self.url = self._background.start(app)

    def stop(self) -> None:
        self.closing = True

        def end_streams() -> None:
            for event in list(self.stream_events):
                event.set()

        self._background.stop(end_streams)

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
        return write_kubeconfig(path, self.url, namespace=namespace, context=context, token=token)

    # --- middleware: record, authenticate, inject faults -------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        watch = _flag(request.query, "watch")
        record = RequestRecord(request.method, request.path, dict(request.query), watch)
        self.requests.append(record)
        request[RECORD] = record
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
                if fault.location is not None:
                    location = fault.location + request.path_qs
                    return web.Response(status=fault.status, headers={"Location": location})
                wait = retry_after_of(fault.status, fault.retry_after)
                headers = [("Retry-After", str(wait))] if wait is not None else []
                body = error_status(fault.status, fault.message, wait)
                return _json(fault.status, body, headers)
            if fault.drop_after is not None:
                request[streams.DROP_AFTER] = fault.drop_after
            if fault.exec_stdout is not None:
                request[streams.EXEC_STDOUT] = fault.exec_stdout
            if fault.answer is not None:
                record.status = fault.answer.status
                return await streams.send(request, fault.answer)
        response: web.StreamResponse = await handler(request)
        record.status = record.status or response.status
        return response

    # --- dispatch ----------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            # The garbage collector's due work is done before and after, as if it were instant:
            # a request made after another sees what it did for it, however busy the machine.
            self.store.collect()
            response = await self._route(request)
            self.store.collect()
            return response
        except StoreError as err:
            headers = [("Retry-After", "1")] if err.code == 429 else []
            return _json(err.code, err.status(), headers)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug here: answer it visibly rather than hang the client
            log.exception("fakekube: %s %s failed", request.method, request.path)
            return _json(500, error_status(500, f"fakekube: {type(exc).__name__}: {exc}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        record: RequestRecord = request[RECORD]
        parts = [p for p in request.path.split("/") if p]
        if (parts[:1] == ["api"] and len(parts) <= 2) or (
            parts[:1] == ["apis"] and len(parts) <= 3
        ):
            record.verb = "discovery"
            address = self.url.removeprefix("http://")
            return _json(200, discovery(list(self.store.kinds.values()), parts, address))
        if parts[:1] == ["api"]:
            target = self._target("", parts[1], parts[2:])
        elif parts[:1] == ["apis"]:
            target = self._target(parts[1], parts[2], parts[3:])
        else:
            raise not_found()
        record.verb, handle = self._handler(request.method, target, record.watch)
        verb = {"log": "get", "exec": "create"}.get(record.verb, record.verb)
        name = None if verb == "create" and target.sub is None else target.name
        self.store.authorize(verb, target.kind, target.namespace, name, target.sub)
        return await handle(request, target)

    def _handler(
        self, method: str, target: _Target, watch: bool
    ) -> tuple[str, Callable[[web.Request, _Target], Awaitable[web.StreamResponse]]]:
        if target.name is None:
            collection = {"GET": ("watch", self._watch) if watch else ("list", self._list)}
            if target.namespace or not target.kind.namespaced:
                collection["POST"] = ("create", self._create)
            found = collection.get(method)
        elif target.sub is None:
            found = {
                "GET": ("get", self._get),
                "PATCH": ("patch", self._patch),
                "DELETE": ("delete", self._delete),
            }.get(method)
        elif target.sub == "log":
            found = ("log", self._log) if method == "GET" else None
        else:
            found = ("exec", self._exec) if method in ("GET", "POST") else None
        if found is None:
            raise bad(
                "the server does not allow this method on the requested resource",
                405,
                "MethodNotAllowed",
            )
        return found

    def _target(self, group: str, version: str, rest: list[str]) -> _Target:
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            kind = self.store.kind_by_plural(group, version, rest[2])
            if kind is not None and kind.namespaced:
                if len(rest) > 5 or (len(rest) == 5 and rest[4] not in ("log", "exec")):
                    raise not_found()
                if len(rest) == 5 and rest[4] not in kind.subresources:
                    raise not_found()
                name = rest[3] if len(rest) > 3 else None
                return _Target(kind, rest[1], name, rest[4] if len(rest) > 4 else None)
        kind = self.store.kind_by_plural(group, version, rest[0]) if rest else None
        if kind is None or len(rest) > 2 or (kind.namespaced and len(rest) > 1):
            raise not_found()
        return _Target(kind, None, rest[1] if len(rest) > 1 else None, None)

    # --- handlers ----------------------------------------------------------------------------

    @staticmethod
    def _check_body(target: _Target, body: Any) -> Obj:
        """The object sent to a collection, which must agree with the URL."""
        if not isinstance(body, dict):
            raise bad("the body of the request must be a JSON object")
        kind = target.kind
        body.setdefault("apiVersion", kind.api_version)  # the endpoint implies both
        body.setdefault("kind", kind.kind)
        if body["apiVersion"] != kind.api_version or body["kind"] != kind.kind:
            raise bad(
                f"the API version in the data ({body.get('apiVersion')}) and kind "
                f"({body.get('kind')}) do not match the expected {kind.api_version} {kind.kind}"
            )
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad("metadata must be an object")
        if kind.namespaced:
            if meta.get("namespace") and meta["namespace"] != target.namespace:
                raise bad(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            meta["namespace"] = target.namespace
        return body

    async def _create(self, request: web.Request, target: _Target) -> web.StreamResponse:
        strict, dry_run = _strict(request.query), _dry_run(request.query)
        body = self._check_body(target, await _body(request))
        created = self.store.submit(target.kind, body, strict=strict, dry_run=dry_run)
        if (target.kind.api_version, target.kind.kind) == CRD_KEY and not dry_run:
            # the first list of each of its kinds finds the storage (re)initializing (429)
            self.warming |= {(k.api_version, k.kind) for k in crd_kinds(created)}
        return _json(201, created)

    async def _get(self, request: web.Request, target: _Target) -> web.StreamResponse:
        assert target.name is not None
        return _json(200, self.store.current(target.kind, target.namespace, target.name))

    async def _patch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        assert target.name is not None
        if request.content_type != _MERGE_PATCH:
            raise StoreError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format ({request.content_type}) - "
                f"fakekube accepts only {_MERGE_PATCH}",
            )
        change = await _body(request)
        return _json(200, self.store.patch(target.kind, target.namespace, target.name, change))

    async def _delete(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, name = target.kind, target.name
        assert name is not None
        options = await _body(request) or {}
        if not isinstance(options, dict):
            raise bad("DeleteOptions must be a JSON object")
        policy = options.get("propagationPolicy") or request.query.get("propagationPolicy")
        obj, gone = self.store.delete(
            kind.api_version, kind.kind, target.namespace, name, policy or "Background"
        )
        if gone and not kind.returns_deleted:
            details = kind.details(name, obj["metadata"]["uid"])
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            return _json(200, {**status, "details": details})
        return _json(200, obj)

    async def _list(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, query = target.kind, request.query
        if (kind.api_version, kind.kind) in self.warming:
            self.warming.discard((kind.api_version, kind.kind))
            message = "storage is (re)initializing"
            raise StoreError(429, "TooManyRequests", message, {"retryAfterSeconds": 1})
        items, rv, token, left = self.store.page(
            kind,
            target.namespace,
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
            limit=_number(query, "limit") or 0,
            token=query.get("continue"),
        )
        if kind.group in _BUILTIN_GROUPS:
            for item in items:  # the real server leaves these out of built-in list items
                item.pop("apiVersion", None)
                item.pop("kind", None)
        meta: Obj = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if left is not None:
            meta["remainingItemCount"] = left
        body = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta}
        return _json(200, {**body, "items": items})

    async def _watch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        params = _watch_params(request.query)
        return await streams.watch(self, request, target.kind, target.namespace, params)

    async def _log(self, request: web.Request, target: _Target) -> web.StreamResponse:
        assert target.name is not None
        namespace = target.namespace or "default"
        params = _log_params(request.query)
        return await streams.log(self, request, namespace, target.name, params)

    async def _exec(self, request: web.Request, target: _Target) -> web.StreamResponse:
        assert target.name is not None
        if not request.query.getall("command", []):
            raise bad("you must specify at least 1 command")
        namespace = target.namespace or "default"
        pod, container = self.store.exec_target(
            namespace, target.name, request.query.get("container")
        )
        return await exec_handler(
            request,
            self.store,
            pod,
            container,
            answer=request.get(streams.EXEC_STDOUT),
            drop_after=request.get(streams.DROP_AFTER),
        )

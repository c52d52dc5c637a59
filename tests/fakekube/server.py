"""A local fake Kubernetes API server for tests, spoken to over real HTTP.

``FakeKube`` serves a ``PortFake``'s store (``fakekube.port.Objects``, so what the port fake and
``fakekube.jobs`` do shows here) on 127.0.0.1, answering the adapter, the ``kubernetes`` client
and kubectl as a real API server does (KUBEFLOW.md, "Talking to the API"): discovery, get,
create (``fieldValidation``, ``dryRun=All``), JSON merge patch, delete with a propagation
policy, selectors, ``limit``/``continue``, watches (bookmarks, in-stream 410), pod logs, exec
over websockets, a bearer token, RBAC and injected faults. What no client here sends is not
served: PUT, other patch types (415), deleting a collection, ``/status``, server-side apply.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aiohttp import web

from . import streams
from .clock import FakeClock
from .discovery import discovery, not_found
from .faults import Faults, error_status, retry_after_of
from .port import PortFake, bad
from .requestlog import RECORD, RequestLog, RequestRecord
from .resources import CRD_KEY, ResourceKind, StoreError, crd_kinds
from .wsexec import exec_handler

Obj = dict[str, Any]

__all__ = ["FakeKube", "RequestLog", "RequestRecord", "write_kubeconfig"]

log = logging.getLogger("fakekube")

# Groups whose list items carry no kind/apiVersion on a real server.
_BUILTIN_GROUPS = ("", "batch", "events.k8s.io", "apiextensions.k8s.io")
_MERGE_PATCH = "application/merge-patch+json"
# (what the URL names, method) -> verb; a collection's GET is a watch with ``watch=true``.
_VERBS = {
    ("collection", "GET"): "list",
    ("collection", "POST"): "create",
    ("object", "GET"): "get",
    ("object", "PATCH"): "patch",
    ("object", "DELETE"): "delete",
    ("log", "GET"): "log",
    ("exec", "GET"): "exec",
    ("exec", "POST"): "exec",
}


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    data = json.dumps(body, separators=(",", ":")).encode()
    return web.Response(body=data, status=status, content_type="application/json", headers=headers)


class _Target(NamedTuple):
    kind: ResourceKind
    namespace: str | None  # from the URL; None: all namespaces / cluster-scoped
    name: str  # "": the collection
    sub: str | None  # "log" or "exec"


class FakeKube:
    """A fake API server: ``with FakeKube(crds=[...]) as kube: kube.kubeconfig(path)``."""

    def __init__(self, *, crds: Sequence[Obj] = (), fake: PortFake | None = None) -> None:
        """``crds``: to install (do not mutate them: validators are cached per CRD). ``fake``:
        whose store to serve (by default a new one, its clock in real time, never advanced but
        by the test)."""
        fake = fake or PortFake(FakeClock(start=time.time(), limit=math.inf))
        self.store = fake.objects
        self.faults = Faults(self.store)
        self.warming: set[tuple[str, str]] = set()  # kinds whose storage is (re)initializing
        self.requests = RequestLog()
        self.tokens: set[str] = {"fake-token"}
        self.bookmark_interval = 1.0  # seconds between BOOKMARK events of a watch
        self.url = ""
        self.closing = False
        self.stream_events: set[asyncio.Event] = set()  # set on stop, so streams end
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        for crd in crds:
            self.install_crd(crd)

    def install_crd(self, crd: Obj) -> None:
        """Serve a CRD's kinds from now on (do not mutate ``crd``: validators are cached)."""
        self.store.create(crd)

    def start(self) -> None:
        """Serve on 127.0.0.1 (an ephemeral port), from an event loop on a thread of its own."""
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._loop = loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="fakekube", daemon=True)
        self._thread.start()
        self._runner = runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                              shutdown_timeout=0.2)  # fmt: skip

        async def serve() -> None:
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()

        asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"

    def stop(self) -> None:
        self.closing = True
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None or runner is None:
            return

        async def shutdown() -> None:
            for event in list(self.stream_events):  # so that open streams end
                event.set()
            await runner.cleanup()
            # A handler still hanging (a fault) is cancelled, not left to die with the loop.
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

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

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(
        self, path: Path, *, namespace: str = "default", context: str = "fake",
        token: str = "fake-token",
    ) -> Path:  # fmt: skip
        """Write a kubeconfig for this server (bearer ``token``, then accepted) to ``path``."""
        if not self.url:
            raise RuntimeError("FakeKube.kubeconfig: start the server first")
        self.tokens.add(token)
        return write_kubeconfig(path, self.url, namespace=namespace, context=context, token=token)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        """Record the request, authenticate it, inject the first matching fault, answer."""
        watch = streams.flag(request.query, "watch")
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
                headers = {"Retry-After": str(wait)} if wait is not None else None
                return _json(fault.status, error_status(fault.status, fault.message, wait), headers)
            if fault.drop_after is not None:
                request[streams.DROP_AFTER] = fault.drop_after
            if fault.exec_stdout is not None:
                request[streams.EXEC_STDOUT] = fault.exec_stdout
            if fault.answer is not None:
                record.status = fault.answer.status
                return await streams.send(request, fault.answer)
        response = await self._answer(request)
        record.status = record.status or response.status
        return response

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except StoreError as err:
            return _json(err.code, err.status(), {"Retry-After": "1"} if err.code == 429 else None)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug here: answer it visibly rather than hang the client
            log.exception("fakekube: %s %s failed", request.method, request.path)
            return _json(500, error_status(500, f"fakekube: {type(exc).__name__}: {exc}"))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        record: RequestRecord = request[RECORD]
        parts = [p for p in request.path.split("/") if p]
        if parts and len(parts) <= {"api": 2, "apis": 3}.get(parts[0], 0):  # up to /apis/G/V
            record.verb = "discovery"
            address = self.url.removeprefix("http://")
            return _json(200, discovery(list(self.store.kinds.values()), parts, address))
        if parts[:1] == ["api"]:
            target = self._target("", parts[1], parts[2:])
        elif parts[:1] == ["apis"]:
            target = self._target(parts[1], parts[2], parts[3:])
        else:
            raise not_found()
        names = (target.sub or "object") if target.name else "collection"
        verb = _VERBS.get((names, request.method))
        if verb == "create" and target.kind.namespaced and not target.namespace:
            verb = None  # a POST to all namespaces
        if verb is None:
            message = "the server does not allow this method on the requested resource"
            raise bad(message, 405, "MethodNotAllowed")
        record.verb = "watch" if verb == "list" and record.watch else verb
        rbac_verb = {"log": "get", "exec": "create"}.get(record.verb, record.verb)
        name = None if verb == "create" else target.name or None
        self.store.authorize(rbac_verb, target.kind, target.namespace, name, target.sub)
        handler: Callable[[web.Request, _Target], Any] = getattr(self, f"_{record.verb}")
        response: web.StreamResponse = await handler(request, target)
        return response

    def _target(self, group: str, version: str, rest: list[str]) -> _Target:
        """The kind, namespace, name and subresource a path names (404 for none)."""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            kind = self.store.kind_by_plural(group, version, rest[2])
            if kind is not None and kind.namespaced:
                served = {"log", "exec"} & set(kind.subresources)
                if len(rest) > 5 or (len(rest) == 5 and rest[4] not in served):
                    raise not_found()
                return _Target(kind, rest[1], "".join(rest[3:4]), (rest[4:] or [None])[0])
        kind = self.store.kind_by_plural(group, version, rest[0]) if rest else None
        if kind is None or len(rest) > 2 or (kind.namespaced and len(rest) > 1):
            raise not_found()
        return _Target(kind, None, "".join(rest[1:]), None)

    # --- handlers, one per verb --------------------------------------------------------------

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        try:
            return json.loads(raw) if raw else None
        except ValueError as exc:
            raise bad(f"couldn't get version/kind; json parse error: {exc}") from exc

    async def _create(self, request: web.Request, target: _Target) -> web.StreamResponse:
        query, kind = request.query, target.kind
        mode = query.get("fieldValidation", "Warn")
        if mode not in ("Strict", "Warn", "Ignore"):
            message = f"fieldValidation parameter unsupported: {mode}; valid values: "
            raise bad(message + "Ignore, Warn, Strict")
        dry_run = query.getall("dryRun", [])
        for value in dry_run:  # "All" is the only value the API has (``ValidateDryRun``)
            if value != "All":
                message = f'Unsupported value: "{value}": supported values: "All"'
                options = 'CreateOptions.meta.k8s.io "" is invalid: dryRun'
                raise StoreError(422, "Invalid", f"{options}: {message}")
        body = await self._body(request)
        if not isinstance(body, dict):
            raise bad("the body of the request must be a JSON object")
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
                raise bad("the namespace of the provided object does not match the namespace "
                          "sent on the request")  # fmt: skip
            meta["namespace"] = target.namespace
        created = self.store.submit(kind, body, strict=mode == "Strict", dry_run=bool(dry_run))
        if (kind.api_version, kind.kind) == CRD_KEY and not dry_run:
            # the first list of each of its kinds finds the storage (re)initializing (429)
            self.warming |= {(k.api_version, k.kind) for k in crd_kinds(created)}
        return _json(201, created)

    async def _get(self, request: web.Request, target: _Target) -> web.StreamResponse:
        return _json(200, self.store.current(target.kind, target.namespace, target.name))

    async def _patch(self, request: web.Request, target: _Target) -> web.StreamResponse:
        if request.content_type != _MERGE_PATCH:
            raise StoreError(415, "UnsupportedMediaType", "the body of the request was in an "
                             f"unknown format ({request.content_type}) - fakekube accepts only "
                             f"{_MERGE_PATCH}")  # fmt: skip
        change = await self._body(request)
        return _json(200, self.store.patch(target.kind, target.namespace, target.name, change))

    async def _delete(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, name = target.kind, target.name
        options = await self._body(request) or {}
        if not isinstance(options, dict):
            raise bad("DeleteOptions must be a JSON object")
        policy = options.get("propagationPolicy") or request.query.get("propagationPolicy")
        obj, gone = self.store.delete(
            kind.api_version, kind.kind, target.namespace, name, policy or "Background"
        )
        if gone and not kind.returns_deleted:
            details = kind.details(name, obj["metadata"]["uid"])
            obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                   "details": details}  # fmt: skip
        return _json(200, obj)

    async def _list(self, request: web.Request, target: _Target) -> web.StreamResponse:
        kind, query = target.kind, request.query
        if (kind.api_version, kind.kind) in self.warming:
            self.warming.discard((kind.api_version, kind.kind))
            message = "storage is (re)initializing"
            raise StoreError(429, "TooManyRequests", message, {"retryAfterSeconds": 1})
        labels, fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
        limit = streams.number(query, "limit") or 0
        items, rv, token, left = self.store.page(
            kind, target.namespace, labels, fields, limit=limit, token=query.get("continue")
        )
        if kind.group in _BUILTIN_GROUPS:
            for item in items:
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
        return await streams.watch(self, request, target.kind, target.namespace)

    async def _log(self, request: web.Request, target: _Target) -> web.StreamResponse:
        return await streams.log(self, request, target.namespace or "default", target.name)

    async def _exec(self, request: web.Request, target: _Target) -> web.StreamResponse:
        return await exec_handler(request, self.store, target.namespace or "default", target.name)


def write_kubeconfig(
    path: Path, url: str, *, token: str, namespace: str = "default", context: str = "fake",
    ca: Path | None = None,
) -> Path:  # fmt: skip
    """Write to ``path`` a kubeconfig for the server at ``url`` with a bearer ``token`` (and,
    for https, the CA ``ca``)."""
    cluster: dict[str, str] = {"server": url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    context_of = {"cluster": context, "user": context, "namespace": namespace}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
              "clusters": [{"name": context, "cluster": cluster}],
              "users": [{"name": context, "user": {"token": token}}],
              "contexts": [{"name": context, "context": context_of}]}  # fmt: skip
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path

"""The HTTP harness: a ``kfcompile.testing.FakeCluster`` served over real HTTP, for the adapter's
contract with the real ``kubernetes`` client (URLs, discovery, streams, timeouts, faults on the
wire, the exec protocol). Each request is one call of the fake's port, answered as a real API
server answers (KUBEFLOW.md, "Talking to the API"): errors as a ``Status``, list items without
``kind`` in the built-in groups, a 410 inside a watch's stream, 204 for the log of a pod not
scheduled yet, exec over the ``v5.channel.k8s.io`` websocket. Only what the adapter sends is
served: discovery of a group version, merge patches, exec by GET."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, cast

import schema_check
from aiohttp import WSMsgType, web
from attrs import define

from kfcompile import testing
from kfcompile.lifecycle.ports import ApiError, ExecOutput, Ref
from kfcompile.output import crd as kfcrd
from kfcompile.testing import FakeClock, FakeCluster, Store
from kfcompile.testing.cluster import STATUSES, Calls, Named, check_exec
from kfcompile.testing.store import CRD, ResourceKind, error

Obj = dict[str, Any]
_BUILTIN_GROUPS = ("", "batch", "events.k8s.io", "apiextensions.k8s.io")
_SUBRESOURCES = {"Pod": ["log", "exec"]}
_FRAME = 1 << 20  # exec stdout frames
# /api/v1 or /apis/GROUP/VERSION, then [namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]
_GROUP_VERSION = r"/api(?:s/(?P<group>[^/]+))?/(?P<version>[^/]+)"
_RESOURCE = re.compile(
    _GROUP_VERSION + r"(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?"
)


def _status(err: ApiError) -> Obj:
    """The ``Status`` body the API server sends for ``err``."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": err.message, "reason": err.reason, "code": err.status or 500}  # fmt: skip
    return body | ({"details": {"retryAfterSeconds": err.retry_after}} if err.retry_after else {})


class Closed(Exception):
    """The server stopped: its streams end."""


class PacedClock(FakeClock):
    """Fake time that moves only as ``advance`` is called (by the server's ticker in step with
    real time, or by the test); a served stream waits for it in real time."""

    def __init__(self, step: float) -> None:
        super().__init__(step=step, start=time.time(), limit=math.inf)
        self.moved, self.stopped = threading.Condition(), False

    def advance(self, seconds: float) -> None:
        super().advance(seconds)
        with self.moved:
            self.moved.notify_all()

    def idle(self, until: float | None = None) -> None:
        with self.moved:
            if self.stopped:
                raise Closed
            self.moved.wait(0.05)


@dataclass(frozen=True)
class Body:
    """A test's own answer: ``chunks`` (bytes, or pieces drawn as they are sent) with a
    ``Content-Length`` of ``length`` (-1: that of the bytes; None: chunked), ``drip`` seconds
    before each piece."""

    chunks: bytes | Iterable[bytes]
    content_type: str = "application/json"
    length: int | None = -1
    drip: float = 0.0
    encoding: str | None = None  # its Content-Encoding
    status: int = 200


@define
class Fault(testing.Fault):
    """Trouble on the wire (``FakeKube.faults.add``): a port fault's fields (``method``: an HTTP
    method; ``path``: in the URL's path); ``watch``: only watches (True) or only other requests
    (False); ``hang`` seconds before answering; ``answer`` instead of the server's;
    ``location``: a 3xx's target (scheme://host:port)."""

    watch: bool | None = None
    hang: float | None = None
    answer: Body | None = None
    location: str | None = None

    def matches(self, call: Named) -> bool:
        return self.watch in (None, getattr(call, "watch", None)) and super().matches(call)


class Faults(testing.Faults):
    kind = Fault


@dataclass
class RequestRecord:
    """One request as the server saw it (``status`` 0 until answered, or when dropped)."""

    method: str
    path: str
    query: dict[str, str]  # the last value of each parameter
    watch: bool
    status: int = 0
    verb: str = ""  # get list watch create patch delete log exec discovery
    fault: Fault | None = None


def _flag(query: Any, name: str) -> bool:
    """A boolean parameter as apimachinery reads it (older clients send ``True``)."""
    value = query.get(name)
    return value is not None and value.lower() not in ("0", "false")


def _number(query: Any, name: str) -> int | None:
    return int(query[name]) if query.get(name) else None


def _json(code: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=code,
                        content_type="application/json", headers=headers)  # fmt: skip


class At(NamedTuple):
    """What a request is about: its record, and the kind and object its path names."""

    record: RequestRecord
    kind: ResourceKind
    ref: Ref


Handler = Callable[[web.Request, At], Awaitable[web.StreamResponse]]


def _not_found() -> ApiError:
    return error(404, "NotFound", "the server could not find the requested resource")


class FakeKube:
    """A fake cluster over HTTP: ``with FakeKube() as kube: kube.kubeconfig(path)``. ``fake``:
    the cluster served (by default one of its own, ``checked``); its ``PacedClock`` moves in
    step with real time on a thread of its own (``ticking=False``: as the test advances it)."""

    def __init__(self, *, fake: FakeCluster | None = None, ticking: bool = True) -> None:
        if fake is None:
            fake = FakeCluster(PacedClock(step=0.01))
            checked(fake.store)
        self.fake, self.store = fake, fake.store
        self.faults, self.requests = Faults(), Calls[RequestRecord]()
        self.tokens, self.url = {"fake-token"}, ""
        self._pool = ThreadPoolExecutor(64, thread_name_prefix="fakekube-stream")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fakekube", daemon=True)
        paced = isinstance(fake.clock, PacedClock) and ticking
        self._ticker = threading.Thread(target=self._tick, daemon=True) if paced else None
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> FakeKube:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)

        async def serve() -> None:
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()

        self._thread.start()
        asyncio.run_coroutine_threadsafe(serve(), self._loop).result(10)
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        if self._ticker is not None:
            self._ticker.start()
        return self

    def _tick(self) -> None:
        clock = self.fake.clock
        while not getattr(clock, "stopped", True):
            time.sleep(clock.step)
            clock.advance(clock.step)

    def __exit__(self, *exc: object) -> None:
        if isinstance(self.fake.clock, PacedClock):
            self.fake.clock.stopped = True  # the streams end
        if self._ticker is not None:
            self._ticker.join(10)
        if (runner := self._runner) is not None:

            async def shutdown() -> None:
                await runner.cleanup()
                handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in handlers:  # one still answering (a hung fault, a stream) ends now
                    task.cancel()
                await asyncio.gather(*handlers, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def kubeconfig(self, path: Path, *, namespace: str = "default", context: str = "fake",
                   token: str = "fake-token") -> Path:  # fmt: skip
        """A kubeconfig for this server (bearer ``token``, from now on accepted) at ``path``."""
        self.tokens.add(token)
        return write_kubeconfig(path, {context: self.url}, namespace=namespace, token=token)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        """Record the request, take its fault (trouble on the wire: before any authentication),
        authenticate it, answer."""
        watch = _flag(request.query, "watch")
        record = RequestRecord(request.method, request.path, dict(request.query), watch)
        self.requests.append(record)
        record.fault = fault = cast(Fault | None, self.faults.take(record))
        try:
            if fault is not None:
                if fault.hang:
                    await request.read()  # a slow server: the request is in, the answer late
                    await asyncio.sleep(fault.hang)
                if fault.drop:
                    return _abort(request)
                if fault.location is not None:
                    record.status = fault.status or 0
                    where = fault.location + request.path_qs
                    return web.Response(status=record.status, headers={"Location": where})
                if (raised := fault.raised()) is not None:
                    raise raised
                if fault.answer is not None:
                    record.status = fault.answer.status
                    return await _send(request, fault.answer)
            auth = request.headers.get("Authorization", "")
            if not (auth.startswith("Bearer ") and auth[7:] in self.tokens):
                raise error(401, *STATUSES[401])
            response = await self._route(request, record)
        except ApiError as err:
            wait = {"Retry-After": f"{err.retry_after:g}"} if err.retry_after else None
            response = _json(err.status or 500, _status(err), wait)
        except Closed:
            response = web.Response(status=503)
        record.status = record.status or response.status
        return response

    async def _route(self, request: web.Request, record: RequestRecord) -> web.StreamResponse:
        if found := re.fullmatch(_GROUP_VERSION, request.path):
            record.verb = "discovery"
            return _json(200, self._discovery(found["group"] or "", found["version"]))
        if not (path := _RESOURCE.fullmatch(request.path)):
            raise _not_found()
        namespace, name, sub = path["namespace"], path["name"], path["sub"]
        key = (path["group"] or "", path["version"], path["plural"])
        kind = next(
            (k for k in self.store.kinds.values() if (k.group, k.version, k.plural) == key), None
        )
        if kind is None or sub not in (None, *_SUBRESOURCES.get(kind.kind, [])):
            raise _not_found()
        if name and kind.namespaced != (namespace is not None):
            raise _not_found()
        routes: dict[tuple[str, bool, str | None], tuple[str, Handler]] = {
            ("GET", False, None): ("watch", self._watch) if record.watch else ("list", self._list),
            ("POST", False, None): ("create", self._create),
            ("GET", True, None): ("get", self._get),
            ("PATCH", True, None): ("patch", self._patch),
            ("DELETE", True, None): ("delete", self._delete),
            ("GET", True, "log"): ("log", self._log),
            ("GET", True, "exec"): ("exec", self._exec),
        }
        found = routes.get((request.method, bool(name), sub))
        if found is None or (found[0] == "create" and kind.namespaced and not namespace):
            said = "the server does not allow this method on the requested resource"
            raise error(405, "MethodNotAllowed", said)
        record.verb, handler = found
        at = At(record, kind, Ref(kind.api_version, kind.kind, namespace, name or ""))
        return await handler(request, at)

    def _discovery(self, group: str, version: str) -> Obj:
        """The APIResourceList of ``group``/``version`` (404 if nothing is served there)."""
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        resources = []
        for k in self.store.kinds.values():
            if (k.group, k.version) == (group, version):
                entry = {"singularName": k.kind.lower(), "kind": k.kind, "namespaced": k.namespaced}
                resources.append({"name": k.plural, **entry, "verbs": verbs})
                for sub in _SUBRESOURCES.get(k.kind, []):
                    named = {"name": f"{k.plural}/{sub}", "singularName": ""}
                    resources.append(entry | named | {"verbs": ["create", "get"]})
        if not resources:
            raise _not_found()
        return {"kind": "APIResourceList", "apiVersion": "v1", "resources": resources,
                "groupVersion": f"{group}/{version}" if group else version}  # fmt: skip

    async def _get(self, request: web.Request, at: At) -> web.StreamResponse:
        return _json(200, self.fake.get(at.ref))

    async def _patch(self, request: web.Request, at: At) -> web.StreamResponse:
        if request.content_type != "application/merge-patch+json":
            said = f"the body of the request was in an unknown format ({request.content_type})"
            raise error(415, "UnsupportedMediaType", said)
        return _json(200, self.fake.patch(at.ref, json.loads(await request.read())))

    async def _delete(self, request: web.Request, at: At) -> web.StreamResponse:
        options = json.loads(await request.read() or b"{}")
        uid = (options.get("preconditions") or {}).get("uid")
        self.fake.delete(at.ref, options.get("propagationPolicy") or "Background", uid=uid)
        said = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        return _json(200, said | {"details": {"name": at.ref.name, "kind": at.kind.plural}})

    async def _create(self, request: web.Request, at: At) -> web.StreamResponse:
        body = json.loads(await request.read())  # its kind and namespace: the path's
        body |= {"apiVersion": at.kind.api_version, "kind": at.kind.kind}
        body["metadata"] = {k: v for k, v in body.get("metadata", {}).items() if k != "namespace"}
        body["metadata"] |= {"namespace": at.ref.namespace} if at.ref.namespace else {}
        dry_run = request.query.get("dryRun") == "All"  # the only value the API has
        return _json(201, self.fake.create(body, dry_run=dry_run))

    async def _list(self, request: web.Request, at: At) -> web.StreamResponse:
        query, kind = request.query, at.kind
        page = self.fake.list(
            kind.api_version, kind.kind, at.ref.namespace, limit=_number(query, "limit") or 0,
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""), continue_token=query.get("continue"),
        )  # fmt: skip
        meta: Obj = {"resourceVersion": page.resource_version}
        meta |= {"continue": page.continue_token} if page.continue_token else {}
        meta |= {"remainingItemCount": page.remaining} if page.remaining is not None else {}
        builtin = kind.group in _BUILTIN_GROUPS  # whose list items carry no kind, apiVersion
        items = [{k: v for k, v in i.items() if not builtin or k not in ("apiVersion", "kind")}
                 for i in page.items]  # fmt: skip
        said = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta}
        return _json(200, said | {"items": items})

    async def _watch(self, request: web.Request, at: At) -> web.StreamResponse:
        query, bookmarks = request.query, _flag(request.query, "allowWatchBookmarks")
        events = self.fake.watch(
            at.kind.api_version, at.kind.kind, at.ref.namespace,
            resource_version=query.get("resourceVersion", ""),
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            timeout_seconds=_number(query, "timeoutSeconds") or 1800)  # fmt: skip

        async def lines() -> AsyncIterator[bytes]:
            try:
                async for event in self._drawn(events):
                    if event.type != "BOOKMARK" or bookmarks:
                        said = {"type": event.type, "object": event.object}
                        yield json.dumps(said).encode() + b"\n"
            except ApiError as err:  # a 410 inside the stream, as the server sends it
                said = {"type": "ERROR", "object": _status(err)}
                yield json.dumps(said).encode() + b"\n"

        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        return await _stream(request, response, lines(), at.record.fault)

    async def _log(self, request: web.Request, at: At) -> web.StreamResponse:
        query, follow, fault = request.query, _flag(request.query, "follow"), at.record.fault
        text = self.fake.log_text(
            at.ref.namespace or "", at.ref.name, container=query.get("container"), follow=follow,
            since_seconds=_number(query, "sinceSeconds"), tail_lines=_number(query, "tailLines"),
            timestamps=_flag(query, "timestamps"))  # fmt: skip
        if text is None:
            return web.Response(status=204)  # not scheduled: no kubelet to ask
        if not follow:
            if fault is not None and fault.drop_after is not None:
                return _abort(request)
            return web.Response(text="".join(text), content_type="text/plain")

        async def lines() -> AsyncIterator[bytes]:
            async for piece in self._drawn(text):
                for line in piece.splitlines(keepends=True):
                    yield line.encode()

        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        return await _stream(request, response, lines(), fault)

    async def _drawn(self, items: Iterator[Any]) -> AsyncIterator[Any]:
        """``items``, each drawn on a thread of the pool (a stream of the fake blocks)."""
        loop, end = asyncio.get_running_loop(), object()
        while (item := await loop.run_in_executor(self._pool, next, items, end)) is not end:
            yield item

    async def _exec(self, request: web.Request, at: At) -> web.StreamResponse:
        """The channel websocket: stdin read to its end (v5 closes it with ``[255, 0]``), then
        the command run by the fake; its stdout, stderr and exit Status sent back."""
        query, namespace, name = request.query, at.ref.namespace or "default", at.ref.name
        argv, container = query.getall("command", []), query.get("container", "")
        if not argv:
            raise error(400, "BadRequest", "you must specify at least 1 command")
        check_exec(self.store.current(at.kind, namespace, name), container)  # at the handshake
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"),
                                   max_msg_size=0)  # fmt: skip
        await ws.prepare(request)
        stdin = bytearray()
        if _flag(query, "stdin"):
            async for message in ws:
                data = message.data if message.type == WSMsgType.BINARY else b""
                if message.type != WSMsgType.BINARY or data[:2] == b"\xff\x00":
                    break
                stdin += data[1:] if data[:1] == b"\x00" else b""
        loop, sent = asyncio.get_running_loop(), 0
        cut = at.record.fault.drop_after if at.record.fault else None

        def forward(output: ExecOutput) -> None:
            nonlocal sent
            for chunk in output:
                for start in range(0, len(chunk), _FRAME):
                    if sent == cut:
                        raise Closed
                    frame = b"\x01" + memoryview(chunk)[start : start + _FRAME]
                    asyncio.run_coroutine_threadsafe(ws.send_bytes(frame), loop).result()
                    sent += 1

        try:
            result = await loop.run_in_executor(self._pool, lambda: self.fake.exec(
                namespace, name, container, argv, bytes(stdin), stdout=forward))  # fmt: skip
        except Closed:
            return _abort(request, ws)
        if _flag(query, "stderr") and result.stderr:
            await ws.send_bytes(b"\x02" + result.stderr)
        code = result.exit_code
        said = {"metadata": {}, "status": "Success"} if code == 0 else {
            "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"{argv}, exit code {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}  # fmt: skip
        await ws.send_bytes(b"\x03" + json.dumps(said).encode())
        await ws.close()
        return ws


def _abort(request: web.Request, response: web.StreamResponse | None = None) -> web.StreamResponse:
    """The connection closed without (the rest of) an answer."""
    assert request.transport is not None
    request.transport.abort()
    return response or web.Response()


async def _stream(request: web.Request, response: web.StreamResponse, items: AsyncIterator[bytes],
                  fault: Fault | None = None) -> web.StreamResponse:  # fmt: skip
    """``items`` sent as ``response`` (chunked unless it has a length); a fault's ``drop_after``
    cuts the connection after so many of them."""
    if response.content_length is None:
        response.enable_chunked_encoding()
    await response.prepare(request)
    cut, sent = fault.drop_after if fault is not None else None, 0
    try:
        async for item in items:
            if sent == cut:
                return _abort(request, response)
            await response.write(item)
            sent += 1
        if cut == 0:
            return _abort(request, response)
        await response.write_eof()
    except (ConnectionError, Closed):
        pass  # the client went away, or the server stopped
    return response


async def _send(request: web.Request, body: Body) -> web.StreamResponse:
    """A test's own answer, piece by piece (never drawn past what the client read)."""
    pieces = [body.chunks] if isinstance(body.chunks, bytes) else body.chunks
    response = web.StreamResponse(status=body.status, headers={"Content-Type": body.content_type})
    if body.encoding:
        response.headers["Content-Encoding"] = body.encoding
    whole = len(body.chunks) if isinstance(body.chunks, bytes) else None
    response.content_length = whole if body.length == -1 else body.length

    async def chunks() -> AsyncIterator[bytes]:
        for piece in pieces:
            await asyncio.sleep(body.drip)
            yield piece

    return await _stream(request, response, chunks())


def _defaults(schema: Obj, node: Any) -> None:
    """The CRD schema's ``default`` values filled in where fields are missing."""
    if isinstance(node, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in node and "default" in sub:
                node[key] = json.loads(json.dumps(sub["default"]))
        for key, value in node.items():
            sub = props.get(key, schema.get("additionalProperties"))
            _defaults(sub if isinstance(sub, dict) else {}, value)
    elif isinstance(node, list):
        for value in node:
            _defaults(schema.get("items") or {}, value)


_CRDS: dict[int, Obj] = {}


def checked(store: Store) -> None:
    """Hold what is created to the schemas a real API server holds it to: the CRD's defaults
    first (before Kueue's webhook: a server decodes before admission), the CRD served
    (``kfcompile.output.crd``) or the core schema (kubernetes-validate) last. An unknown field
    is refused in the words KUBEFLOW.md records ("strict decoding error"), anything else 422."""

    def crd_of(obj: Obj) -> Obj | None:
        api = obj["apiVersion"]
        group, rk = api.rpartition("/")[0], store.served(api, obj["kind"])
        found = store.items.get((*CRD, None, f"{rk.plural}.{group}")) if rk and group else None
        # One object per CRD file, whichever cluster stores it: its validator is built once
        # (kfcompile.output.crd keeps them by object; the stored ones share the file's spec).
        return _CRDS.setdefault(id(found["spec"]), found) if found else None

    def defaults(obj: Obj) -> None:
        for version in (crd_of(obj) or {}).get("spec", {}).get("versions", []):
            if obj["apiVersion"].endswith("/" + version["name"]):
                _defaults(version["schema"]["openAPIV3Schema"], obj)

    def validate(obj: Obj) -> None:
        if (crd := crd_of(obj)) is not None:
            problems = kfcrd.errors(obj, crd)
        elif obj["apiVersion"] in ("v1", "batch/v1") and obj["kind"] != "Namespace":
            problems = schema_check.core_errors({k: v for k, v in obj.items() if k != "status"})
        else:
            return
        pattern = r"(.*): Additional properties are not allowed \('(.*)' was unexpected\)"
        found = [m for m in (re.fullmatch(pattern, p) for p in problems) if m]
        unknown = [f'unknown field "{m[2] if m[1] == "(root)" else m[1] + "." + m[2]}"'
                   for m in found]  # fmt: skip
        kind, group, version = obj["kind"], *obj["apiVersion"].rpartition("/")[::2]
        if unknown:
            raise error(400, "BadRequest", f'{kind} in version "{version}" cannot be handled as '
                        f"a {kind}: strict decoding error: {', '.join(unknown)}")  # fmt: skip
        if problems:
            what = f"{kind}.{group}" if group else kind
            raise error(422, "Invalid", f'{what} "{obj["metadata"].get("name", "")}" is invalid: '
                        + "; ".join(problems))  # fmt: skip

    store.admission.insert(0, defaults)
    store.admission.append(validate)


def write_kubeconfig(path: Path, servers: dict[str, str], *, token: str,
                     namespace: str = "default", ca: Path | None = None) -> Path:  # fmt: skip
    """A kubeconfig with a context for each of ``servers`` (its name: the server's URL; the
    first is current), each with a bearer ``token`` (and the CA ``ca``)."""
    cluster = (
        {"certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()} if ca else {}
    )
    config = {"apiVersion": "v1", "kind": "Config", "current-context": next(iter(servers)),
              "clusters": [{"name": n, "cluster": {"server": url, **cluster}}
                           for n, url in servers.items()],
              "users": [{"name": n, "user": {"token": token}} for n in servers],
              "contexts": [{"name": n, "context": {"cluster": n, "user": n, "namespace": namespace}}
                           for n in servers]}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path

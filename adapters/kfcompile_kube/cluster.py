"""``kfcompile.lifecycle.ports.Cluster`` over the official client.

Requests go through the client's REST layer and configuration (``compat.Client``: auth, TLS,
proxies and token refresh stay the client's; ``compat`` holds how each client line is called;
exec's websocket modules load on the first exec) but bodies are read as raw JSON:
objects cross the port exactly as the server sent them, never through the client's strict models.
Failures become the port's ``ApiError`` family (``errors``: the server's answer, or why none
came, in words a user acts on; a redirect, which no request follows; never a credential, even
one the server quotes back); retrying, waiting and ordering are the lifecycle's business, not
this one's. ``execstream`` reads an exec stream.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Concatenate, Final, ParamSpec, TypeVar
from urllib.parse import quote, urlsplit

import urllib3
from attrs import evolve

from kfcompile.lifecycle.ports import (
    ApiError,
    ExecOutput,
    ExecResult,
    NotFound,
    Obj,
    Page,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile_kube import answers, compat
from kfcompile_kube.answers import LIST_LIMIT, OBJECT_LIMIT, BadAnswer, bad, field, k8s_object
from kfcompile_kube.bearer import renewed
from kfcompile_kube.deadline import Deadline, watch_pool
from kfcompile_kube.discovery import DiskDiscovery, trust_anchor
from kfcompile_kube.errors import (
    TRANSPORT_ERRORS,
    Unserved,
    answer_error,
    credentials,
    handshake_error,
    redacted,
    server_of,
    status_error,
    transport_error,
)
from kfcompile_kube.lines import event_lines, log_lines
from kfcompile_local import Threads
from kfcompile_local.fanout import cut_on_stop

# Built-in kinds the lifecycle touches: (plural, namespaced), so their paths need no discovery
# round trip. Whether events.k8s.io/v1 is served (since Kubernetes 1.19) is its list's answer: a
# 404 there is the lifecycle's cue to read core/v1 (``served`` still asks discovery).
_BUILT_IN: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Pod"): ("pods", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Event"): ("events", True),
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("events.k8s.io/v1", "Event"): ("events", True),
}
_CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
_WATCH_MARGIN = 15.0  # seconds past a watch's timeoutSeconds before we call the server hung
REQUEST_TIMEOUT: Final = 30.0  # seconds a request waits for its answer unless told otherwise

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _redacting(
    method: Callable[Concatenate[KubeCluster, P], R],
) -> Callable[Concatenate[KubeCluster, P], R]:
    """A port call whose ``ApiError`` carries no credential."""

    @functools.wraps(method)
    def call(self: KubeCluster, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._redaction():
            return method(self, *args, **kwargs)

    return call


def _redacting_stream(
    method: Callable[Concatenate[KubeCluster, P], Iterator[T]],
) -> Callable[Concatenate[KubeCluster, P], Iterator[T]]:
    """A port call that streams, whose ``ApiError`` (at any point) carries no credential."""

    @functools.wraps(method)
    def stream(self: KubeCluster, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        with self._redaction():
            yield from method(self, *args, **kwargs)

    return stream


class KubeCluster(Threads):
    """The Kubernetes API as ``kfcompile.lifecycle.ports.Cluster``, and as ``Merge`` (``fanout``:
    its
    followed logs read at once, one thread each, cut when the reader stops).

    ``request_timeout`` (kubectl's ``--request-timeout``; ``None``: no limit) bounds each
    request as a whole (``deadline``): connecting (the TCP connect never longer than
    ``connect_timeout`` either), TLS, the answer's headers and its body; a server that does not
    answer in full in time is ``Transient``. Past its answer's start, a watch may stay quiet for
    its ``timeout_seconds`` plus a margin, a followed log as long as the container runs, and
    ``exec`` runs for ``exec_timeout`` in all. Every answer that is not a stream is bounded in
    size and checked for shape (``answers``). ``cache_discovery``: discovery documents are
    kept on disk for the next process, as kubectl keeps them (``discovery``).
    """

    def __init__(
        self,
        api_client: compat.Client,
        *,
        connect_timeout: float = 5.0,
        request_timeout: float | None = REQUEST_TIMEOUT,
        exec_timeout: float = 600.0,
        cache_discovery: bool = False,
    ) -> None:
        self._client = api_client
        self._request_timeout = request_timeout or None  # 0: no limit, as kubectl's
        self._connect_timeout = min(connect_timeout, self._request_timeout or connect_timeout)
        self._exec_timeout = exec_timeout
        host = str(api_client.configuration.host)
        self._server = server_of(host)
        self._discovered: dict[str, dict[str, tuple[str, bool]]] = {}
        self._from_disk: set[str] = set()  # the api versions _discovered holds from the disk
        where = f"{self._server}{urlsplit(host).path}"  # the cache's key: no credentials, no query
        anchor = trust_anchor(api_client.configuration)  # ... and the CA: a re-created cluster
        self._disk = DiskDiscovery.of(where, anchor) if cache_discovery else None
        # The Authorization headers sent (a token refreshed since is still redacted).
        self._sent: set[str] = set()
        self._sent_lock = threading.Lock()

    # --- the port

    @_redacting
    def served(self, api_version: str, kind: str) -> bool:
        if api_version == "v1" and (api_version, kind) in _BUILT_IN:
            return True
        return self._discover(api_version, kind) is not None  # a built-in group too

    @_redacting
    def get(self, ref: Ref) -> Obj:
        try:
            return k8s_object(
                self._rediscovering(ref, lambda: self._json("GET", self._object_path(ref)))
            )
        except NotFound:
            if (ref.api_version, ref.kind) == _CRD:  # the kinds it defined are gone with it
                self._forget_group(ref.name.partition(".")[2])
            raise

    @_redacting
    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        namespace = (obj.get("metadata") or {}).get("namespace")
        ref = Ref(obj["apiVersion"], obj["kind"], namespace, "")
        query = [("fieldValidation", "Strict"), *([("dryRun", "All")] if dry_run else [])]

        def send() -> Obj:
            path = self._collection_path(ref.api_version, ref.kind, namespace, for_object=True)
            return self._json("POST", path, query=query, body=obj)

        return k8s_object(self._rediscovering(ref, send))

    @_redacting
    def patch(self, ref: Ref, patch: Obj) -> Obj:
        def send() -> Obj:
            merge = "application/merge-patch+json"
            return self._json("PATCH", self._object_path(ref), body=patch, content_type=merge)

        return k8s_object(self._rediscovering(ref, send))

    @_redacting
    def delete(self, ref: Ref, propagation: str = "Foreground") -> None:
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        self._rediscovering(ref, lambda: self._json("DELETE", self._object_path(ref), body=options))

    @_redacting
    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 500,
        continue_token: str | None = None,
    ) -> Page:
        query = [*_selectors(label_selector, field_selector), ("limit", str(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        body = self._rediscovering(
            Ref(api_version, kind, namespace, ""),
            lambda: self._json(
                "GET", self._collection_path(api_version, kind, namespace), query=query,
                limit=LIST_LIMIT,
            ),
        )  # fmt: skip
        items = field(body, "items", list) or []
        for i, item in enumerate(items):  # list items come without apiVersion/kind
            k8s_object(item, f"items[{i}].")
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        meta = field(body, "metadata", dict) or {}
        version = field(meta, "resourceVersion", str, "metadata.") or ""
        token = field(meta, "continue", str, "metadata.") or None
        remaining = field(meta, "remainingItemCount", int, "metadata.")
        return Page(items, version, token, remaining)

    @_redacting_stream
    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
            *_selectors(label_selector, field_selector),
        ]
        quiet = timeout_seconds + _WATCH_MARGIN
        # The server starts its answer at once: that is bounded as any request is, the events
        # then by the watch's own timeout (the server ends the stream then).
        response = self._rediscovering(
            Ref(api_version, kind, namespace, ""),
            lambda: self._stream(
                "GET",
                self._collection_path(api_version, kind, namespace),
                query=query,
                read_timeout=self._request_timeout,
            ),
        )
        compat.read_timeout(response, quiet)
        # A watch of every job may stay quiet for minutes: a merge that stops cuts it.
        with cut_on_stop(partial(compat.cut, response)):
            yield from _events(response, api_version, kind, self._broke(quiet))

    @_redacting_stream
    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        query: list[tuple[str, str]] = []
        if container is not None:
            query.append(("container", container))
        if follow:
            query.append(("follow", "true"))
        if since_seconds is not None:
            query.append(("sinceSeconds", str(since_seconds)))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if timestamps:
            query.append(("timestamps", "true"))
        path = f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(pod)}/log"
        # A followed training log may stay quiet for hours (its answer starts with its first
        # line): no read timeout then, nor a deadline past its connection's.
        read_timeout = None if follow else self._request_timeout
        response = self._stream(
            "GET",
            path,
            query=query,
            accept="*/*",
            read_timeout=read_timeout,
            answer_bounded=not follow,
        )
        with cut_on_stop(partial(compat.cut, response)):
            for line in log_lines(_chunks(response, self._broke(read_timeout))):
                yield line.decode("utf-8", "replace")

    @_redacting
    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: Sequence[str],
        stdin: bytes | Iterable[bytes] = b"",
        *,
        stdout: Callable[[ExecOutput], object] | None = None,
    ) -> ExecResult:
        feed = ([stdin] if stdin else []) if isinstance(stdin, bytes) else stdin
        has_stdin = not isinstance(stdin, bytes) or bool(stdin)
        query = [
            *(("command", arg) for arg in command),
            ("container", container),
            ("stdin", "true" if has_stdin else "false"),
            ("stdout", "true"),
            ("stderr", "true"),
            ("tty", "false"),
        ]
        path = f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(pod)}/exec"
        url, headers = self._prepare("GET", path, query, {})
        from websocket import WebSocketException

        from kfcompile_kube.execstream import Channels

        try:
            ws = compat.open_exec(self._client.configuration, url, headers)
        except compat.Refused as e:
            raise answer_error(e.status, e.body, e.headers, url) from None
        except (WebSocketException, OSError) as e:
            raise handshake_error(e, url, (self._connect_timeout, self._exec_timeout)) from e
        channels = Channels(ws, pod, time.monotonic() + self._exec_timeout, self._exec_timeout)
        output = channels.run(iter(feed), has_stdin)
        collected = bytearray()
        try:
            if stdout is None:
                for chunk in output:
                    collected += chunk
            else:
                stdout(output)
                for _ in output:
                    pass  # what the consumer left unread
        except BaseException:
            output.close()
            # No goodbye: the server may still be sending.
            ws.shutdown()  # type: ignore[no-untyped-call]
            raise
        ws.close()
        # close() skips the socket once the server has said goodbye.
        ws.shutdown()  # type: ignore[no-untyped-call]
        assert channels.result is not None, "the stdout consumer closed the output"
        return evolve(channels.result, stdout=bytes(collected))

    # --- paths

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        return _BUILT_IN.get((api_version, kind)) or self._discover(api_version, kind)

    def _discover(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """What discovery says of ``kind`` in ``api_version``: this process's answer, else the
        disk's (``discovery``), else the server's; a kind the disk's lacks may have come since,
        so the server is asked then."""
        resources = self._discovered.get(api_version)
        if resources is None and (resources := self._cached(api_version)) is not None:
            self._discovered[api_version] = resources
            self._from_disk.add(api_version)
        if resources is None or (kind not in resources and api_version in self._from_disk):
            resources = self._ask(api_version)
        return None if resources is None else resources.get(kind)

    def _rediscovering(self, ref: Ref, send: Callable[[], T]) -> T:
        """``send()``, a request to the path of ``ref``'s kind. If its 404 says that path, which
        the disk's discovery gave, is not served (its CRD removed, or another cluster on that
        URL), that discovery is forgotten and the server asked: ``send()`` once more when that
        gives another path (a kind no longer served: the ``NotFound`` an uncached one gets)."""
        try:
            return send()
        except Unserved:
            if ref.api_version not in self._from_disk:
                raise
            before = self._discovered.get(ref.api_version, {}).get(ref.kind)
            self._forget(ref.api_version)
            now = self._discover(ref.api_version, ref.kind)
            if now == before:
                raise
            if now is None:
                raise _not_served(ref.api_version, ref.kind) from None
        return send()

    def _forget(self, api_version: str) -> None:
        """What the disk said of ``api_version``, here and there."""
        self._from_disk.discard(api_version)
        self._discovered.pop(api_version, None)
        if self._disk is not None:
            self._disk.forget(api_version)

    def _forget_group(self, group: str) -> None:
        for api_version in [v for v in self._from_disk if v.partition("/")[0] == group]:
            self._forget(api_version)

    def _cached(self, api_version: str) -> dict[str, tuple[str, bool]] | None:
        doc = None if self._disk is None else self._disk.read(api_version)
        try:
            return None if doc is None else _resources(doc)
        except BadAnswer:
            return None  # not what the server wrote: it is asked instead

    def _ask(self, api_version: str) -> dict[str, tuple[str, bool]] | None:
        self._from_disk.discard(api_version)
        try:
            doc = self._json("GET", _base(api_version))
            resources = _resources(doc)
        except NotFound:
            self._discovered.pop(api_version, None)
            return None  # not cached: the CRD may be installed later
        except BadAnswer as e:
            raise bad(f"discovery of {api_version}: {e.message}") from None
        self._discovered[api_version] = resources
        if self._disk is not None:
            self._disk.write(api_version, doc)
        return resources

    def _collection_path(
        self, api_version: str, kind: str, namespace: str | None, *, for_object: bool = False
    ) -> str:
        resource = self._resource(api_version, kind)
        if resource is None:
            raise _not_served(api_version, kind)
        plural, namespaced = resource
        if not namespaced:
            return f"{_base(api_version)}/{plural}"
        if namespace is None:
            if for_object:
                raise ValueError(f"{kind} is namespaced: the object needs a namespace")
            return f"{_base(api_version)}/{plural}"  # across all namespaces
        return f"{_base(api_version)}/namespaces/{_seg(namespace)}/{plural}"

    def _object_path(self, ref: Ref) -> str:
        path = self._collection_path(ref.api_version, ref.kind, ref.namespace, for_object=True)
        return f"{path}/{_seg(ref.name)}"

    # --- HTTP

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Obj | None = None,
        content_type: str = "application/json",
        limit: int = OBJECT_LIMIT,
    ) -> Obj:
        """The answer, a JSON object of at most ``limit`` bytes, within the request timeout."""
        timeout = self._request_timeout
        with Deadline(timeout) as deadline:
            response = self._send(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                read_timeout=timeout,
                deadline=deadline,
            )
            deadline.answered()
            try:
                data = answers.read(
                    partial(response.read, decode_content=False), response.headers, limit
                )
            except TRANSPORT_ERRORS as e:
                broke = (
                    deadline.error(self._server) if deadline.expired else self._broke(timeout)(e)
                )
                raise broke from e
            except ApiError:
                response.close()  # the rest unread: this connection carries nothing more
                raise
            finally:
                response.release_conn()
        if deadline.expired:  # a cut may read as an end: headers or a body cut short
            raise deadline.error(self._server)
        return answers.json_object(data, response.headers.get("Content-Type"))

    def _stream(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        accept: str = "application/json",
        read_timeout: float | None,
        answer_bounded: bool = True,
    ) -> urllib3.BaseHTTPResponse:
        """A stream's response, unread: its start bounded by the request timeout (unless not
        ``answer_bounded``: then only its connection is, by the connect timeout), its body not."""
        with Deadline(self._request_timeout if answer_bounded else None) as deadline:
            return self._send(
                method, path, query=query, accept=accept, read_timeout=read_timeout,
                deadline=deadline,
            )  # fmt: skip

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Obj | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        read_timeout: float | None,
        deadline: Deadline,
        again_after_401: bool = True,
    ) -> urllib3.BaseHTTPResponse:
        """The response, unread, once its status says success; an ``ApiError`` otherwise. A 401
        is asked again once when the token was renewed since (``bearer``: rotated)."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        url, headers = self._prepare(method, path, query, headers)
        watch_pool(compat.pool(self._client, url))
        timeout = (self._connect_timeout, read_timeout)
        try:
            raw: urllib3.BaseHTTPResponse = compat.send(
                self._client, method, url, headers, body, timeout
            )
        except compat.Refused as e:
            if deadline.expired:  # what came of its body is cut short
                raise deadline.error(self._server) from None
            if e.status == 401 and again_after_401 and renewed(self._client.configuration, headers):
                return self._send(
                    method, path, query=query, body=body, content_type=content_type,
                    accept=accept, read_timeout=read_timeout, deadline=deadline,
                    again_after_401=False,
                )  # fmt: skip
            raise answer_error(e.status, e.body, e.headers, url) from None
        except TRANSPORT_ERRORS as e:
            if deadline.expired:
                raise deadline.error(self._server) from e
            raise transport_error(e, self._server, timeout) from e
        if deadline.expired:  # headers cut short read as their end
            raw.close()
            raise deadline.error(self._server)
        return raw

    def _prepare(
        self, method: str, path: str, query: Sequence[tuple[str, str]], headers: dict[str, str]
    ) -> tuple[str, dict[str, str]]:
        url, headers = compat.prepare(self._client, method, path, query, headers)
        with self._sent_lock:
            self._sent.add(headers.get("authorization", ""))
        return url, headers

    @contextlib.contextmanager
    def _redaction(self) -> Iterator[None]:
        """The ``ApiError`` raised within, without the credentials this cluster knows."""
        try:
            yield
        except ApiError as e:
            with self._sent_lock:
                sent = set(self._sent)
            clean = redacted(e, credentials(self._client.configuration, sent))
            if clean is e:
                raise
            raise clean from None

    def _broke(self, read_timeout: float | None) -> Callable[[BaseException], Transient]:
        """What a connection that broke while an answer was read is, for the port."""
        return partial(
            transport_error, url=self._server, timeout=(self._connect_timeout, read_timeout)
        )


def _not_served(api_version: str, kind: str) -> NotFound:
    return NotFound(404, "NotFound", f"the server does not serve {kind} in {api_version} (no CRD?)")


def _resources(doc: Obj) -> dict[str, tuple[str, bool]]:
    """A discovery document's kinds: kind -> (plural, namespaced), subresources left out."""
    found: dict[str, tuple[str, bool]] = {}
    for i, r in enumerate(field(doc, "resources", list) or []):
        where = f"resources[{i}]."
        if not isinstance(r, dict):
            raise bad(f"resources[{i}] is not a JSON object")
        name, kind = field(r, "name", str, where), field(r, "kind", str, where)
        if name is None or kind is None:
            raise bad(f"{where}name and kind are needed")
        if "/" not in name:  # subresources such as trainjobs/status
            found[kind] = (name, field(r, "namespaced", bool, where) or False)
    return found


def _base(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def _seg(name: str) -> str:
    return quote(name, safe="")


def _selectors(label_selector: str, field_selector: str) -> list[tuple[str, str]]:
    query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _chunks(
    response: urllib3.BaseHTTPResponse, broke: Callable[[BaseException], Transient]
) -> Iterator[bytes]:
    """The body as it arrives (``lines`` makes lines of it)."""
    try:
        yield from compat.chunks(response, 64 * 1024)  # whatever has arrived, not a full block
    except TRANSPORT_ERRORS as e:
        raise broke(e) from e
    finally:
        # Stopping early leaves the body unread: drop that connection, not just the response.
        response.close()
        response.release_conn()


def _too_long(limit: int) -> ApiError:
    return ApiError(
        0,
        "EventTooLong",
        f"the watch sent a line longer than {limit} bytes: no Kubernetes object is that large",
    )


def _events(
    response: urllib3.BaseHTTPResponse,
    api_version: str,
    kind: str,
    broke: Callable[[BaseException], Transient],
) -> Iterator[WatchEvent]:
    for line in event_lines(_chunks(response, broke), _too_long):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            # Half an event: the stream was cut mid-line.
            raise Transient(0, "StreamError", "watch stream ended inside an event") from None
        type_, obj = _event(event)
        if type_ == "ERROR":
            code = field(obj, "code", int, "the ERROR event's object.")
            raise status_error(code or 500, obj)
        if type_ != "BOOKMARK":
            k8s_object(obj, "the event's object.")
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
        yield WatchEvent(type_, obj)


def _event(event: object) -> tuple[str, Obj]:
    """A watch event's type and object, as ``WatchEvent`` holds them."""
    if not isinstance(event, dict):
        raise bad("a watch event is not a JSON object")
    type_, obj = field(event, "type", str, "the event's "), event.get("object")
    if type_ is None or not isinstance(obj, dict):
        raise bad("a watch event has no type or no object")
    return type_, obj

"""The HTTP streams of the fake API server: watches (newline-delimited JSON events, bookmarks,
an in-stream 410), followed pod logs, and a fault's own answer (``send``). What they carry comes
from the store (``fakekube.port.Objects``: the port fake's watches and logs read the same); this
is how it goes over the wire, woken by the store's changes and the clock's ticks, and cut short
by a fault."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .faults import Body
from .resources import ResourceKind, StoreError

if TYPE_CHECKING:
    from .server import FakeKube

Obj = dict[str, Any]

DROP_AFTER = web.RequestKey("drop_after", int)  # from a fault: end the stream after N
EXEC_STDOUT = web.RequestKey("exec_stdout", object)  # from a fault: what an exec sends instead


def _abort(request: web.Request) -> None:
    assert request.transport is not None
    request.transport.abort()


class _Wakeup:
    """An event set (from any thread) whenever the store changes, while the stream lasts."""

    def __init__(self, server: FakeKube) -> None:
        self.server = server
        self.event = asyncio.Event()
        loop = asyncio.get_running_loop()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the stream is gone anyway
                loop.call_soon_threadsafe(self.event.set)

        self._wake = wake

    def __enter__(self) -> asyncio.Event:
        with self.server.store.lock:
            self.server.store.wakers.append(self._wake)
        self.server.stream_events.add(self.event)
        return self.event

    def __exit__(self, *exc: object) -> None:
        with self.server.store.lock:
            self.server.store.wakers.remove(self._wake)
        self.server.stream_events.discard(self.event)


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), max(seconds, 0.001))


async def watch(
    server: FakeKube,
    request: web.Request,
    kind: ResourceKind,
    namespace: str | None,
    params: Obj,
) -> web.StreamResponse:
    """``params``: resource_version, label_selector, field_selector, timeout, bookmarks."""
    matches = server.store.matcher(
        kind, namespace, params["label_selector"], params["field_selector"]
    )
    drop_after = request.get(DROP_AFTER)
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    response.enable_chunked_encoding()
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + params["timeout"]
    next_bookmark = loop.time() + server.bookmark_interval
    sent = 0

    async def send(type_: str, obj: Obj) -> bool:
        """Write one event; False when the stream must end (dropped by a fault)."""
        nonlocal sent
        if drop_after is not None and sent >= drop_after:
            _abort(request)
            return False
        line = json.dumps({"type": type_, "object": obj}, separators=(",", ":")) + "\n"
        await response.write(line.encode())
        sent += 1
        return True

    def bookmark(rv: int) -> Obj:
        meta = {"resourceVersion": str(rv)}
        return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}

    try:
        with _Wakeup(server) as event:
            cursor = params["resource_version"]
            if cursor is None:  # "" or "0": the current state first
                objs, cursor = server.store.snapshot(kind, matches)
                for obj in objs:
                    if not await send("ADDED", obj):
                        return response
            if drop_after == 0:
                _abort(request)
                return response
            while not server.closing:
                event.clear()
                try:
                    seen, cursor = server.store.events(kind, matches, cursor)
                except StoreError as err:
                    await send("ERROR", err.status())
                    return response
                for type_, obj in seen:
                    if not await send(type_, obj):
                        return response
                now = loop.time()
                if now >= deadline:
                    break
                if params["bookmarks"] and now >= next_bookmark:
                    next_bookmark = now + server.bookmark_interval
                    if not await send("BOOKMARK", bookmark(cursor)):
                        return response
                await _wait(event, min(deadline, next_bookmark) - now)
            if params["bookmarks"] and not server.closing:
                await send("BOOKMARK", bookmark(cursor))
            await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass  # the client went away
    return response


async def log(
    server: FakeKube, request: web.Request, namespace: str, name: str, params: Obj
) -> web.StreamResponse:
    """``params``: container, follow, since_seconds, tail_lines, timestamps."""
    lines, reader = server.store.log_read(
        namespace,
        name,
        container=params["container"],
        since_seconds=params["since_seconds"],
        tail_lines=params["tail_lines"],
        stamps=params["timestamps"],
    )
    drop_after = request.get(DROP_AFTER)
    if not params["follow"]:
        if drop_after is not None:
            _abort(request)
            return web.Response()
        return web.Response(text="".join(lines), content_type="text/plain")
    response = web.StreamResponse(status=200)
    response.content_type = "text/plain"
    response.enable_chunked_encoding()
    await response.prepare(request)
    written = 0

    async def write(out: list[str]) -> bool:
        nonlocal written
        for line in out:
            if drop_after is not None and written >= drop_after:
                _abort(request)
                return False
            await response.write(line.encode())
            written += line.count("\n")
        return True

    try:
        with _Wakeup(server) as event:
            if not await write(lines):
                return response
            while not server.closing:
                event.clear()
                finished = reader.finished()  # before reading: its last lines still come
                if not await write(reader.more()):
                    return response
                if finished:
                    break
                await _wait(event, 1.0)
            await response.write_eof()
    except (ConnectionResetError, ConnectionError):
        pass
    return response


async def send(request: web.Request, body: Body) -> web.StreamResponse:
    """A test's own answer (``faults.Body``), in its pieces, with a ``Content-Length`` or
    chunked, each piece after its ``drip``; a client that goes away ends it (a huge body is
    never sent past what was read)."""
    chunks = [body.chunks] if isinstance(body.chunks, bytes) else body.chunks
    length = body.length
    if length == -1:
        length = len(body.chunks) if isinstance(body.chunks, bytes) else None
    headers = {"Content-Type": body.content_type}
    if body.encoding is not None:
        headers["Content-Encoding"] = body.encoding
    response = web.StreamResponse(status=body.status, headers=headers)
    if length is None:
        response.enable_chunked_encoding()
    else:
        response.content_length = length
    await response.prepare(request)
    try:
        for chunk in chunks:
            if body.drip:
                await asyncio.sleep(body.drip)
            await response.write(chunk)
    except (ConnectionResetError, ConnectionError):  # the client stopped reading: done
        return response
    await response.write_eof()
    return response

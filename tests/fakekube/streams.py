"""The HTTP streams of the fake API server: watches (newline-delimited JSON events, bookmarks,
an in-stream 410), followed pod logs, and a fault's own answer (``send``). What they carry comes
from the store (the port fake's watches and logs read the same); they wake on its changes and
the clock's ticks, and a fault's ``drop_after`` cuts them short."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .faults import Body
from .port import bad
from .resources import ResourceKind, StoreError

if TYPE_CHECKING:
    from .server import FakeKube

Obj = dict[str, Any]

DROP_AFTER = web.RequestKey("drop_after", int)  # from a fault: end the stream after N
EXEC_STDOUT = web.RequestKey("exec_stdout", object)  # from a fault: what an exec sends instead


def flag(query: Any, name: str) -> bool:
    """A boolean parameter as apimachinery's ``Convert_Slice_string_To_bool`` reads it: absent,
    "0" or "false" (any case) is false, anything else true (older clients send ``True``)."""
    value = query.get(name)
    return value is not None and value != "0" and value.lower() != "false"


def number(query: Any, name: str, kind: Callable[[str], Any] = int) -> Any:
    value = query.get(name)
    try:
        return None if value in (None, "") else kind(value)
    except ValueError as exc:
        raise bad(f"invalid {name}: {value!r}") from exc


def _abort(request: web.Request) -> None:
    assert request.transport is not None
    request.transport.abort()


class _Dropped(Exception):
    """A fault's ``drop_after`` cut the stream: the connection is gone."""


def _drop_at(request: web.Request, sent: int) -> None:
    """Cut the connection (``_Dropped``) if a fault's ``drop_after`` says so after ``sent``."""
    drop_after = request.get(DROP_AFTER)
    if drop_after is not None and sent >= drop_after:
        _abort(request)
        raise _Dropped


@contextlib.asynccontextmanager
async def _stream(
    server: FakeKube, request: web.Request, content_type: str
) -> AsyncIterator[tuple[web.StreamResponse, asyncio.Event]]:
    """A chunked answer, and an event set (from any thread) whenever the store changes or the
    server stops; a client that goes away ends it quietly."""
    response = web.StreamResponse(status=200)
    response.content_type = content_type
    response.enable_chunked_encoding()
    await response.prepare(request)
    event, loop = asyncio.Event(), asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the stream is gone anyway
            loop.call_soon_threadsafe(event.set)

    with server.store.lock:
        server.store.wakers.append(wake)
    server.stream_events.add(event)
    try:
        yield response, event
    except (ConnectionError, _Dropped):
        pass  # the client went away, or a fault cut it off
    finally:
        with server.store.lock:
            server.store.wakers.remove(wake)
        server.stream_events.discard(event)


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), max(seconds, 0.001))


async def watch(
    server: FakeKube, request: web.Request, kind: ResourceKind, namespace: str | None
) -> web.StreamResponse:
    query = request.query
    rv = query.get("resourceVersion", "")
    cursor = None if rv in ("", "0") else number(query, "resourceVersion")
    # 0 or absent: the server's own limit (30-60 min on a real one)
    timeout = number(query, "timeoutSeconds", float) or 1800.0
    bookmarks = flag(query, "allowWatchBookmarks")
    labels, fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
    matches = server.store.matcher(kind, namespace, labels, fields)
    sent, loop = 0, asyncio.get_running_loop()
    deadline = loop.time() + timeout
    next_bookmark = loop.time() + server.bookmark_interval

    async def send(type_: str, obj: Obj) -> None:
        nonlocal sent
        _drop_at(request, sent)
        line = json.dumps({"type": type_, "object": obj}, separators=(",", ":")) + "\n"
        await response.write(line.encode())
        sent += 1

    def bookmark(rv: int) -> Obj:
        meta = {"resourceVersion": str(rv)}
        return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}

    async with _stream(server, request, "application/json") as (response, event):
        if cursor is None:  # "" or "0": the current state first
            objs, cursor = server.store.snapshot(kind, matches)
            for obj in objs:
                await send("ADDED", obj)
        _drop_at(request, 0)  # drop_after=0: right after the headers
        while not server.closing:
            event.clear()
            try:
                seen, cursor = server.store.events(kind, matches, cursor)
            except StoreError as err:
                await send("ERROR", err.status())
                return response
            for type_, obj in seen:
                await send(type_, obj)
            now = loop.time()
            if now >= deadline:
                break
            if bookmarks and now >= next_bookmark:
                next_bookmark = now + server.bookmark_interval
                await send("BOOKMARK", bookmark(cursor))
            await _wait(event, min(deadline, next_bookmark) - now)
        if bookmarks and not server.closing:
            await send("BOOKMARK", bookmark(cursor))
        await response.write_eof()
    return response


async def log(
    server: FakeKube, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    query = request.query
    lines, reader = server.store.log_read(
        namespace,
        name,
        container=query.get("container"),
        since_seconds=number(query, "sinceSeconds", float),
        tail_lines=number(query, "tailLines"),
        stamps=flag(query, "timestamps"),
    )
    if reader.ended:  # a pod not scheduled yet: 204 No Content, follow=true included
        return web.Response(status=204)
    if not flag(query, "follow"):
        if request.get(DROP_AFTER) is not None:
            _abort(request)
            return web.Response()
        return web.Response(text="".join(lines), content_type="text/plain")
    written = 0

    async def write(out: list[str]) -> None:
        nonlocal written
        for line in out:
            _drop_at(request, written)
            await response.write(line.encode())
            written += line.count("\n")

    async with _stream(server, request, "text/plain") as (response, event):
        await write(lines)
        while not server.closing:
            event.clear()
            finished = reader.finished()  # before reading: its last lines still come
            await write(reader.more())
            if finished:
                break
            await _wait(event, 1.0)
        await response.write_eof()
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
    except ConnectionError:  # the client stopped reading: done
        return response
    await response.write_eof()
    return response

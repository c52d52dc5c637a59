"""How the fake API server sends a ``faults.Body``: the test's own answer, in its pieces,
with a ``Content-Length`` or chunked, each piece after its ``drip``; a client that goes away
ends it (a huge body is never sent past what was read)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from .faults import Body


async def send(request: web.Request, body: Body) -> web.StreamResponse:
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

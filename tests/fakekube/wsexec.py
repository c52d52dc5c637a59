"""Exec into a fake pod over the Kubernetes channel websocket protocol.

Speaks ``v5.channel.k8s.io`` (the client ends stdin with a close frame ``[255, 0]``) and
``v4.channel.k8s.io``: every message starts with a channel byte, 0 stdin, 1 stdout, 2 stderr,
3 error (a ``Status``: ``Success``, or ``Failure`` with the exit code in
``details.causes[{reason: ExitCode}]``). The command runs in-process (``fakekube.shell``).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from .port import bad
from .shell import reads_stdin
from .streams import DROP_AFTER, EXEC_STDOUT

if TYPE_CHECKING:
    from .port import Objects

Obj = dict[str, Any]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
_FRAME = 1 << 20  # stdout/stderr frame size


def _exit_status(code: int, argv: list[str]) -> Obj:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    message = f"command terminated with non-zero exit code: error executing command {argv}"
    return {"metadata": {}, "status": "Failure", "message": f"{message}, exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}  # fmt: skip


def _on(request: web.Request, stream: str) -> bool:
    return request.query.get(stream, "").lower() in ("true", "1")


async def exec_handler(
    request: web.Request, store: Objects, namespace: str, name: str
) -> web.StreamResponse:
    """Upgrade to the channel websocket, run the command, stream its output and exit status.
    A fault's ``exec_stdout`` is sent as stdout (exit 0) instead of running the command; its
    ``drop_after`` cuts the connection after that many stdout frames, with no exit status."""
    argv = request.query.getall("command", [])
    if not argv:
        raise bad("you must specify at least 1 command")
    pod, container = store.exec_target(namespace, name, request.query.get("container"))
    answer, drop_after = request.get(EXEC_STDOUT), request.get(DROP_AFTER)
    ws = web.WebSocketResponse(protocols=(V5, V4), max_msg_size=0, autoping=True)
    await ws.prepare(request)
    stdin = bytearray()
    if _on(request, "stdin") and reads_stdin(argv):
        async for message in ws:
            if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                break
            data: bytes = (
                message.data if message.type == WSMsgType.BINARY else message.data.encode()
            )
            if data[:1] == b"\x00":
                stdin += data[1:]
            elif data[:2] == b"\xff\x00" and ws.ws_protocol == V5:
                break
    stdout, stderr, code = await asyncio.to_thread(store.run, pod, container, argv, stdin, answer)
    del stdin
    try:
        if _on(request, "stdout"):  # else the output is discarded
            frames = 0
            for chunk in stdout:
                view = memoryview(chunk)
                for start in range(0, len(view), _FRAME):
                    if frames == drop_after:
                        assert request.transport is not None
                        request.transport.abort()
                        return ws
                    await ws.send_bytes(b"\x01" + view[start : start + _FRAME])
                    frames += 1
        if _on(request, "stderr"):
            for start in range(0, len(stderr), _FRAME):
                await ws.send_bytes(b"\x02" + stderr[start : start + _FRAME])
        status = json.dumps(_exit_status(code, argv)).encode()
        await ws.send_bytes(b"\x03" + status)
        await ws.close()
    except ConnectionError:
        pass
    return ws

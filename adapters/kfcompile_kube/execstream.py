"""One exec stream, read frame by frame (the ``exec`` of ``KubeCluster``): stdin sent in chunks
as it is drawn, stdout handed on as it arrives, the end of stderr kept, and the exit status
read from the error channel, all within one deadline."""

from __future__ import annotations

import select
import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from websocket import ABNF, WebSocket, WebSocketException, WebSocketTimeoutException

from kfcompile.lifecycle.ports import ApiError, ExecOutput, ExecResult, Transient
from kfcompile_kube import compat
from kfcompile_kube.errors import status_object

STDIN_CHUNK = 64 * 1024
_STDERR_KEPT = 64 * 1024  # the end of stderr (the lifecycle shows its last lines)
_STATUS_MAX = 64 * 1024  # an exit Status is a few hundred bytes; more is not one
_CLOSE_CHANNEL = 255  # exec v5: [255, n] says stream n has ended
T = TypeVar("T")


class Channels:
    """One exec stream read frame by frame. The client's ``WSClient`` would keep all of stdout
    (growing one bytes object, hence quadratic time) and a second copy of it besides; here
    stdout goes out as it arrives, and only the end of stderr is kept."""

    def __init__(self, ws: WebSocket, pod: str, deadline: float, timeout: float) -> None:
        self._sock, self._pod = ws, pod
        # The protocol the server chose (the client sent the offer as a plain header, so the
        # socket's getsubprotocol() does not know it).
        chosen = (ws.getheaders() or {}).get("sec-websocket-protocol", "")
        self._v5 = chosen.strip() == compat.V5_PROTOCOL
        self._deadline, self._timeout = deadline, timeout
        self._stderr, self._status = bytearray(), bytearray()
        self._open = True
        self.result: ExecResult | None = None

    def run(self, feed: Iterator[bytes], has_stdin: bool) -> ExecOutput:
        while has_stdin and self._open:
            chunk = next(feed, None)  # what the feed raises passes through as it is
            if chunk is None:
                self._guard(self._close_stdin)
                break
            for start in range(0, len(chunk), STDIN_CHUNK):
                if not self._open:
                    break  # the command ended without reading it all: its status says why
                self._guard(
                    self._sock.send,
                    b"\x00" + chunk[start : start + STDIN_CHUNK],
                    ABNF.OPCODE_BINARY,
                )
                while self._open and self._ready():  # a full pipe stalls both ends
                    data = self._receive()
                    if data:
                        yield data
        while self._open:
            data = self._receive()
            if data:
                yield data
        self.result = ExecResult(
            b"", bytes(self._stderr), _exit_code(bytes(self._status), self._pod)
        )
        return self.result

    def _close_stdin(self) -> None:
        """EOF: v5 closes channel 0 with [255, 0]; v4 has no way to say it."""
        if self._v5:
            self._sock.send(bytes([_CLOSE_CHANNEL, 0]), ABNF.OPCODE_BINARY)

    def _receive(self) -> bytes:
        """One frame: stdout is returned, the rest kept (``b""`` when it was not stdout)."""
        opcode, frame = self._guard(self._sock.recv_data_frame, True)
        if opcode == ABNF.OPCODE_CLOSE:
            self._open = False
            return b""
        data = frame.data
        if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or not data:
            return b""
        payload = bytes(data[1:]) if isinstance(data, bytes) else str(data[1:]).encode()
        if data[0] in (1, "\x01"):
            return payload
        if data[0] in (2, "\x02"):
            self._stderr += payload
            del self._stderr[:-_STDERR_KEPT]
        elif data[0] in (3, "\x03"):
            self._status += payload[: _STATUS_MAX - len(self._status)]
        return b""

    def _ready(self) -> bool:
        """Whether a frame can be read without waiting (TLS may hold one decrypted already)."""
        raw = self._sock.sock
        if raw is None:
            return False
        if isinstance(raw, ssl.SSLSocket) and raw.pending():
            return True
        poller = select.poll()
        poller.register(raw, select.POLLIN)
        return bool(poller.poll(0))

    def _guard(self, step: Callable[..., T], *args: Any) -> T:
        """``step(*args)`` on the socket within the deadline; its failures as ``Transient``."""
        remaining = self._deadline - time.monotonic()
        late = Transient(0, "Timeout", f"exec in pod {self._pod} ran past {self._timeout:g}s")
        if remaining <= 0:
            raise late
        try:
            self._sock.settimeout(remaining)
            return step(*args)
        except WebSocketTimeoutException:
            raise late from None
        except (WebSocketException, OSError) as e:
            raise Transient(0, "StreamError", f"exec stream to pod {self._pod} broke: {e}") from e


def _exit_code(status: bytes, pod: str) -> int:
    """The command's exit code from the error channel's Status; ``ApiError`` if it never ran."""
    if not status:
        raise Transient(0, "StreamError", f"exec stream to pod {pod} closed without an exit status")
    st = status_object(status)
    if st.get("status") == "Success":
        return 0
    if st.get("reason") == "NonZeroExitCode":
        for cause in (st.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                return int(cause["message"])
    # e.g. the executable does not exist: not worth retrying, hence not Transient
    message = str(st.get("message") or status.decode("utf-8", "replace"))
    raise ApiError(int(st.get("code") or 0), str(st.get("reason") or "Failure"), message)

"""The exec websocket (``podexec``): opened, no redirect followed (``open_exec``), and read frame
by frame (``Channels``): stdin sent in chunks as it is drawn, stdout handed on as it arrives, the
end of stderr kept, and the exit status read from the error channel, all within one deadline."""

from __future__ import annotations

import select
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from websocket import ABNF, WebSocket, WebSocketException, WebSocketTimeoutException

from kfcompile.lifecycle.ports import ApiError, ExecOutput, ExecResult, Transient
from kfcompile_kube import compat
from kfcompile_kube.errors import status_object
from kfcompile_kube.proxy import default_port

# The exec channel protocols, best first. Up to 35.x the client offers only v4, which cannot say
# "end of stdin" (a command reading stdin never ends); 36.0 offers v5 first. We always offer both.
V5_PROTOCOL: Final = "v5.channel.k8s.io"
PROTOCOLS: Final = f"{V5_PROTOCOL},v4.channel.k8s.io"
STDIN_CHUNK = 64 * 1024
_STDERR_KEPT = 64 * 1024  # the end of stderr (the lifecycle shows its last lines)
_STATUS_MAX = 64 * 1024  # an exit Status is a few hundred bytes; more is not one
_CLOSE_CHANNEL = 255  # exec v5: [255, n] says stream n has ended
_WS_SCHEMES: Final = {"http": "ws", "https": "wss"}
# What a failed handshake raises (besides ``compat.Refused``).
HANDSHAKE_ERRORS: Final = (WebSocketException, OSError)
T = TypeVar("T")


class Channels:
    """One exec stream read frame by frame. The client's ``WSClient`` would keep all of stdout
    (growing one bytes object, hence quadratic time) and a second copy of it besides; here
    stdout goes out as it arrives, and only the end of stderr is kept."""

    def __init__(self, ws: WebSocket, pod: str, timeout: float) -> None:
        self._sock, self._pod = ws, pod
        # The protocol the server chose (the client sent the offer as a plain header, so the
        # socket's getsubprotocol() does not know it).
        chosen = (ws.getheaders() or {}).get("sec-websocket-protocol", "")
        self._v5 = chosen.strip() == V5_PROTOCOL
        self._deadline, self._timeout = time.monotonic() + timeout, timeout
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


def open_exec(configuration: Any, url: str, headers: Mapping[str, str]) -> WebSocket:
    """The exec websocket, connected; ``compat.Refused`` when the server answers the upgrade
    with a redirect, which is never followed.

    Built here with the TLS options of the client's own ``create_websocket``
    (``compat.websocket_tls``) and the proxy ``compat.RestClient`` uses, because that one lets
    websocket-client follow up to 3 redirects, repeating the handshake's Authorization header to
    any host the ``Location`` names, plaintext ``ws://`` too. Not ``kubernetes.stream.stream``
    either, which swaps the ApiClient's send method (``request`` up to 36.x, ``call_api`` in
    37.x), takes ``binary=`` only from 30.1 and offers v4 only up to 35.x."""
    parts = urlsplit(url)
    ws_url = urlunsplit(parts._replace(scheme=_WS_SCHEMES.get(parts.scheme, parts.scheme)))
    header = [f"sec-websocket-protocol: {PROTOCOLS}"]
    if "authorization" in headers:
        header.append(f"authorization: {headers['authorization']}")
    options: dict[str, Any] = {"header": header, **_websocket_proxy(configuration)}
    sock = WebSocket(sslopt=compat.websocket_tls(configuration, ws_url), skip_utf8_validation=False)
    try:
        sock.connect(ws_url, redirect_limit=0, **options)  # type: ignore[no-untyped-call]
    except WebSocketException:
        answer = sock.handshake_response  # a redirect: "Redirect limit exhausted"
        if answer is not None and 300 <= answer.status < 400:
            raise compat.Refused(answer.status, b"", answer.headers) from None
        raise
    return sock


def _websocket_proxy(configuration: Any) -> dict[str, Any]:
    """websocket-client's options for ``configuration.proxy``. Without one it would take the
    environment's (loopback included, unless NO_PROXY is unset), and it reads ``http_no_proxy``
    only beside a proxy host: so no proxy is a proxy that no host (``*``) goes through."""
    if not configuration.proxy:
        return {"http_proxy_host": "unused.invalid", "http_proxy_port": 1, "http_no_proxy": ["*"]}
    parts = urlsplit(configuration.proxy)
    options: dict[str, Any] = {
        "http_proxy_host": parts.hostname,
        "http_proxy_port": default_port(parts),
        "proxy_type": parts.scheme if parts.scheme.startswith("socks") else "http",
    }
    if parts.username is not None:
        options["http_proxy_auth"] = (unquote(parts.username), unquote(parts.password or ""))
    return options

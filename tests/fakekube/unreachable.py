"""API servers that are not there, for the tests of failing fast: a port where nothing listens
(``closed_port``), a host that does not resolve (``NO_HOST``), a server that never answers
(``Silent``), one whose TLS certificate the kubeconfig's CA did not sign (``UntrustedTLS``), one
that never finishes the TLS handshake (``StalledTLS``), one that drips its headers
(``Dripping``); and the host a redirect points to (``Elsewhere``: answers 200 ``{}``). Each
counts the connections it ``accepted``: ``with Silent() as s: kubeconfig(tmp / "kc", s.url)``.

``tls/untrusted-server.crt`` (self-signed for 127.0.0.1 and localhost, valid until 2126) and
``tls/other-ca.crt`` (the CA the kubeconfig names instead) were made once with ``openssl req
-x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500``; their keys protect
nothing."""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import threading
from pathlib import Path

from .server import write_kubeconfig

TLS = Path(__file__).parent / "tls"
NO_HOST = "nohost.invalid"  # RFC 6761: never resolves
TOKEN = "unreachable-token-never-printed"


def closed_port() -> int:
    """A localhost port nothing listens on (bound, then closed): connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def kubeconfig(path: Path, server: str, *, ca: Path | None = None) -> Path:
    """A kubeconfig for ``server`` with a bearer token (``TOKEN``) and, for https, the CA
    ``ca`` (default: one that signed no server here)."""
    if server.startswith("https://"):
        ca = ca or TLS / "other-ca.crt"
    return write_kubeconfig(path, {"fake": server}, token=TOKEN, ca=ca)


class Silent:
    """A socket on 127.0.0.1 accepting connections on a thread; ``serve`` handles each (here:
    holds it open and never answers, as a hung server)."""

    scheme = "http"

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"{self.scheme}://127.0.0.1:{self.port}"
        self.accepted = 0
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Silent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):  # wakes the thread blocked in accept()
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(5)
        for conn in self._open:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed: the test is over
                return
            self.accepted += 1
            self._open.append(conn)
            self.serve(conn)

    def serve(self, conn: socket.socket) -> None:
        pass


class UntrustedTLS(Silent):
    """Speaks TLS with a self-signed certificate no kubeconfig here trusts."""

    scheme = "https"

    def __init__(self) -> None:
        super().__init__()
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(TLS / "untrusted-server.crt", TLS / "untrusted-server.key")

    def serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        with contextlib.suppress(ssl.SSLError, OSError):  # the client refused the certificate
            self._context.wrap_socket(conn, server_side=True).close()


class StalledTLS(Silent):
    """Accepts every connection over https and never finishes the TLS handshake (reads the
    client's hello, answers nothing)."""

    scheme = "https"


class Dripping(Silent):
    """Answers every request with a status line, then its headers one byte every ``drip``
    seconds, for ``lasting`` seconds (then hangs up), or until the client goes away."""

    def __init__(self, drip: float, lasting: float) -> None:
        super().__init__()
        self.drip, self.lasting = drip, lasting
        self._stop = threading.Event()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        super().__exit__(*exc)

    def serve(self, conn: socket.socket) -> None:
        threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.recv(65536)  # the request
            conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            for _ in range(int(self.lasting / self.drip)):
                if self._stop.wait(self.drip):
                    break
                conn.sendall(b"x")


class Elsewhere(Silent):
    """Answers each request 200 with an empty JSON object, after recording it in ``received``
    (its bytes as sent: request line, headers, body)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[bytes] = []

    def serve(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                data += chunk
            head = data.partition(b"\r\n\r\n")[0]
            found = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.IGNORECASE)
            length = int(found[1]) if found else 0
            while len(data) < len(head) + 4 + length and (chunk := conn.recv(65536)):
                data += chunk
        self.received.append(data)
        with contextlib.suppress(OSError):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                b"Connection: close\r\n\r\n{}"
            )
        conn.close()

"""API servers that are not there, for the tests of failing fast: a port where nothing listens
(``closed_port``), a host that does not resolve (``NO_HOST``), and sockets on 127.0.0.1 that
count the connections they ``accepted``: ``Silent`` never answers, ``UntrustedTLS`` shows a
certificate no kubeconfig here trusts, ``Dripping`` drips its headers.
``with Silent() as s: kubeconfig(tmp / "kc", s.url)``.

``tls/`` holds a certificate self-signed for 127.0.0.1 and localhost (valid until 2126) and the
other CA the kubeconfig names, made once with ``openssl req -x509 -newkey ec -pkeyopt
ec_paramgen_curve:prime256v1 -nodes -days 36500``; their keys protect nothing."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Self

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
    """Accepts connections on a thread and hands each to ``serve``: here held open and never
    answered, as a hung server (``scheme="https"``: a TLS handshake never finished)."""

    def __init__(self, scheme: str = "http") -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"{scheme}://127.0.0.1:{self._sock.getsockname()[1]}"
        self.accepted = 0
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for sock in [*self._open, self._sock]:
            with contextlib.suppress(OSError):  # wakes the thread in accept() or in serve()
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._thread.join(5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed: the test is over
                return
            self.accepted += 1
            self._open.append(conn)
            with contextlib.suppress(OSError):  # the client went away
                self.serve(conn)

    def serve(self, conn: socket.socket) -> None:
        pass


class UntrustedTLS(Silent):
    """Speaks TLS with a self-signed certificate no kubeconfig here trusts."""

    def __init__(self) -> None:
        super().__init__("https")

    def serve(self, conn: socket.socket) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(TLS / "untrusted-server.crt", TLS / "untrusted-server.key")
        conn.settimeout(5)
        context.wrap_socket(conn, server_side=True).close()  # the client refuses it


class Dripping(Silent):
    """Answers a request with a status line, then its headers a byte every ``drip`` seconds
    until the client goes away."""

    def __init__(self, drip: float) -> None:
        super().__init__()
        self.drip = drip

    def serve(self, conn: socket.socket) -> None:
        conn.recv(65536)  # the request
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Drip: ")
        while True:
            time.sleep(self.drip)
            conn.sendall(b"x")

"""A whole request's time limit (``--request-timeout``): connecting, TLS, the answer's headers and
its body, together. urllib3 has only a timeout per socket operation (a server that drips a byte
every half second holds a request for ever; a TLS handshake is bounded by the connect timeout
instead), so a timer shuts down the socket of the connection the request runs on when its time
is up, whatever it is blocked in; the request then fails, naming the limit (the one the user
set: on a busy machine the timer may fire later than that, and the message must not vary).

    with Deadline(seconds) as deadline:   # None: no limit
        send(...)                         # through a pool ``watch_pool`` has hooked
        deadline.answered()
        read the body
    deadline.expired, deadline.error(server)

The connection is found by hooks on the urllib3 pool of the server
(``compat.watch_connections``): one sees the connection each request is handed (new or kept
alive), one each socket a connection makes (after it, the TLS handshake is bounded by the
request's time left, not by the connect timeout; a copy of the socket is kept, since ssl takes
the socket from the connection for the handshake). A watch is bounded so only until its answer
starts, a followed log until it is connected (``transport``).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from types import TracebackType
from typing import Any

from urllib3.connection import HTTPSConnection

from kfcompile.lifecycle.ports import Transient
from kfcompile_kube import compat

_current = threading.local()  # the Deadline of the request this thread is making


class Deadline:
    """One request's time limit (``seconds``; None: none), from ``__enter__`` to ``__exit__``."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._conns: list[Any] = []
        # Copies of the sockets made in this request: during the TLS handshake the connection
        # holds neither its socket (ssl has taken it over) nor the TLS one (not yet made).
        self._made: list[socket.socket] = []
        self._start = time.monotonic()
        self._answered = False
        self._handshaking = False  # when it expired: a TLS handshake was not finished
        self._done = False
        self._timer: threading.Timer | None = None

    def __enter__(self) -> Deadline:
        self._start = time.monotonic()
        if self.seconds is not None:
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()
        _current.deadline = self
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _current.deadline = None
        with self._lock:  # from now on the connection may carry another request
            self._done = True
            self._conns.clear()
            for copy in self._made:
                copy.close()
            self._made.clear()
        if self._timer is not None:
            # Joined, not only cancelled: a request over leaves no thread behind it.
            self._timer.cancel()
            self._timer.join()

    def answered(self) -> None:
        """The answer has started (its status and headers came)."""
        self._answered = True

    def left(self) -> float | None:
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - (time.monotonic() - self._start))

    def hold(self, conn: Any) -> None:
        """The request runs on ``conn``: cut it when the time is up."""
        with self._lock:
            self._conns.append(conn)
            if self.expired:
                _cut(conn)

    def connected(self, sock: socket.socket) -> None:
        """A socket is made: what follows on it (TLS, the request) waits the time left (with
        no limit, the connect timeout still bounds each step of the handshake)."""
        left = self.left()
        if left is None:
            return
        # A second past the deadline: the timer, not the socket, ends it (and says how).
        sock.settimeout(left + 1.0)
        with self._lock:
            self._made.append(sock.dup())
            if self.expired:
                _cut_socket(sock)

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
            for conn in self._conns:
                sock = getattr(conn, "sock", None)
                https = isinstance(conn, HTTPSConnection)
                self._handshaking |= sock is not None and https and not _tls(sock)
                _cut(conn)
            for copy in self._made:
                _cut_socket(copy)

    def error(self, server: str) -> Transient:
        """What the request's end was, for the port: no answer, or not all of it, within the
        limit."""
        waited = f"{self.seconds:g}s"
        if self._handshaking:
            return Transient(0, "Timeout", f"TLS with {server} not established within {waited}")
        if self._answered:
            return Transient(0, "Timeout", f"the answer from {server} took over {waited}")
        return Transient(0, "Timeout", f"no answer from {server} within {waited}")


def _tls(sock: object) -> bool:
    return isinstance(sock, ssl.SSLSocket) or type(sock).__name__ == "SSLTransport"


def _cut(conn: Any) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        _cut_socket(sock)


def _cut_socket(sock: socket.socket) -> None:
    # The plain socket's shutdown, also for an SSLSocket: the thread blocked in it wakes with
    # an error; SSLSocket.shutdown would drop its SSL object under that thread's feet.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def watch_pool(pool: Any) -> None:
    """Hook ``pool`` (a urllib3 connection pool) so that a request made in a ``Deadline`` is cut
    when it expires (``compat.watch_connections``); once per pool."""
    compat.watch_connections(pool, _taken, _made)


def _taken(conn: Any) -> None:
    deadline: Deadline | None = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.hold(conn)


def _made(sock: socket.socket) -> None:
    deadline: Deadline | None = getattr(_current, "deadline", None)
    if deadline is not None:
        deadline.connected(sock)

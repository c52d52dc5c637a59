"""Requests to one API server, which every family of the port's calls (``objects``, ``watch``,
``logs``, ``podexec``) sends through: the client's REST layer and configuration (``compat``:
auth, TLS, proxies and token refresh stay the client's), bodies read as raw JSON, never through
the client's models. Each request is bounded as a whole (``deadline``), its answer in size and
shape (``answers``); a failure is the port's ``ApiError`` family (``errors``: the server's
answer, or why none came, in words a user acts on; a redirect, which no request follows), and
never carries a credential, even one the server quotes back (``redacting``)."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from kfcompile.lifecycle.ports import ApiError, Obj, Transient
from kfcompile_kube import answers, compat
from kfcompile_kube.answers import OBJECT_LIMIT
from kfcompile_kube.bearer import renewed
from kfcompile_kube.deadline import Deadline, watch_pool
from kfcompile_kube.errors import (
    TRANSPORT_ERRORS,
    answer_error,
    credentials,
    redacted,
    server_of,
    transport_error,
)

REQUEST_TIMEOUT: Final = 30.0  # seconds a request waits for its answer unless told otherwise
# What a header value may hold: printable ASCII, spaces and tabs.
_UNSENDABLE: Final = re.compile(r"[^\t\x20-\x7e]")

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Transport:
    """Requests to the API server of ``client`` (``compat.Client``). ``request_timeout``
    (``None`` or 0: no limit) bounds each request as a whole: connecting (the TCP connect never
    longer than ``connect_timeout`` either), TLS, the answer's headers and its body. ``exec``
    runs for ``exec_timeout`` in all (``podexec``)."""

    def __init__(
        self,
        client: compat.Client,
        *,
        connect_timeout: float,
        request_timeout: float | None,
        exec_timeout: float,
    ) -> None:
        self.client = client
        self.request_timeout = request_timeout or None  # 0: no limit, as kubectl's
        self.connect_timeout = min(connect_timeout, self.request_timeout or connect_timeout)
        self.exec_timeout = exec_timeout
        self.host = str(client.configuration.host)
        self.server = server_of(self.host)
        # The Authorization headers sent (a token refreshed since is still redacted).
        self._sent: set[str] = set()
        self._sent_lock = threading.Lock()

    def json(
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
        timeout = self.request_timeout
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
                broke = deadline.error(self.server) if deadline.expired else self.broke(timeout)(e)
                raise broke from e
            except ApiError:
                response.close()  # the rest unread: this connection carries nothing more
                raise
            finally:
                response.release_conn()
        if deadline.expired:  # a cut may read as an end: headers or a body cut short
            raise deadline.error(self.server)
        return answers.json_object(data, response.headers.get("Content-Type"))

    def stream(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        accept: str = "application/json",
        read_timeout: float | None,
        answer_bounded: bool = True,
    ) -> Any:
        """A stream's urllib3 response, unread: its start bounded by the request timeout (unless
        not ``answer_bounded``: then only its connection is, by the connect timeout), its body
        not; read it with ``chunks``."""
        with Deadline(self.request_timeout if answer_bounded else None) as deadline:
            return self._send(
                method, path, query=query, accept=accept, read_timeout=read_timeout,
                deadline=deadline,
            )  # fmt: skip

    def chunks(self, response: Any, read_timeout: float | None) -> Iterator[bytes]:
        """A stream's body as it arrives (``lines`` makes lines of it), each read waiting at
        most ``read_timeout``; the connection dropped at the end, read or not."""
        compat.read_timeout(response, read_timeout)
        try:
            yield from compat.chunks(response, 64 * 1024)  # what has arrived, not a full block
        except TRANSPORT_ERRORS as e:
            raise self.broke(read_timeout)(e) from e
        finally:
            # Stopping early leaves the body unread: drop that connection, not just the response.
            response.close()
            response.release_conn()

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
    ) -> Any:
        """The response, unread, once its status says success; an ``ApiError`` otherwise. A 401
        is asked again once when the token was renewed since (``bearer``: rotated)."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        url, headers = self.prepare(path, query, headers)
        watch_pool(compat.pool(self.client, url))
        timeout = (self.connect_timeout, read_timeout)
        try:
            response = compat.send(self.client, method, url, headers, body, timeout)
        except compat.Refused as e:
            if deadline.expired:  # what came of its body is cut short
                raise deadline.error(self.server) from None
            if e.status == 401 and again_after_401 and renewed(self.client.configuration, headers):
                return self._send(
                    method, path, query=query, body=body, content_type=content_type,
                    accept=accept, read_timeout=read_timeout, deadline=deadline,
                    again_after_401=False,
                )  # fmt: skip
            raise answer_error(e.status, e.body, e.headers, url) from None
        except TRANSPORT_ERRORS as e:
            if deadline.expired:
                raise deadline.error(self.server) from e
            raise transport_error(e, self.server, timeout) from e
        if deadline.expired:  # headers cut short read as their end
            response.close()
            raise deadline.error(self.server)
        return response

    def prepare(
        self, path: str, query: Sequence[tuple[str, str]], headers: dict[str, str]
    ) -> tuple[str, dict[str, str]]:
        """The request's URL and headers, credentials included (``compat.prepare``).

        ``ApiError`` when a header holds what no header can carry (a line break in a credential):
        sent, http.client would refuse it with an error quoting the whole value."""
        url, headers = compat.prepare(self.client, path, query, headers)
        with self._sent_lock:
            self._sent.add(headers.get("authorization", ""))
        for name, value in headers.items():
            if _UNSENDABLE.search(value):
                what = "credentials" if name.lower() in ("authorization", "cookie") else "value"
                raise ApiError(
                    0,
                    "BadHeader",
                    f"the {what} of the request's {name} header hold a line break, a control "
                    "character or a character that is not ASCII (not printed): it cannot be sent",
                )
        return url, headers

    @contextlib.contextmanager
    def redaction(self) -> Iterator[None]:
        """The ``ApiError`` raised within, without the credentials this client knows."""
        try:
            yield
        except ApiError as e:
            with self._sent_lock:
                sent = set(self._sent)
            clean = redacted(e, credentials(self.client.configuration, sent))
            if clean is e:
                raise
            raise clean from None

    def broke(self, read_timeout: float | None) -> Callable[[BaseException], Transient]:
        """What a connection that broke while an answer was read is, for the port."""
        return partial(
            transport_error, url=self.server, timeout=(self.connect_timeout, read_timeout)
        )


class Sends(Protocol):
    """A family of the port's calls: what it sends through."""

    _transport: Transport


S = TypeVar("S", bound=Sends)


def redacting(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A port call whose ``ApiError`` carries no credential."""

    @functools.wraps(method)
    def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._transport.redaction():
            return method(self, *args, **kwargs)

    return call


def redacting_stream(
    method: Callable[Concatenate[S, P], Iterator[T]],
) -> Callable[Concatenate[S, P], Iterator[T]]:
    """A port call that streams, whose ``ApiError`` (at any point) carries no credential."""

    @functools.wraps(method)
    def stream(self: S, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        with self._transport.redaction():
            yield from method(self, *args, **kwargs)

    return stream

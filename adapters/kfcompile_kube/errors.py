"""What went wrong with a request, as the port's ``ApiError`` family: the server's answer (its
``Status``, and the ``Retry-After`` it asked for), or why no answer came, in the words a user
acts on (connection refused, cannot resolve host, TLS certificate verify failed, no answer in
time) with the server's address, never credentials: a credential a server quotes back is
``<redacted>`` (``redacted``)."""

from __future__ import annotations

import base64
import binascii
import http.client
import json
import re
import socket
import ssl
from collections.abc import Iterable, Iterator, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin, urlsplit

import urllib3

from kfcompile.lifecycle.ports import (
    ApiError,
    NotFound,
    Obj,
    Transient,
    error_class,
)
from kfcompile_kube import compat

if TYPE_CHECKING:
    from websocket import WebSocketException

# What a broken connection looks like from below the client (urllib3, http.client, the socket).
TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)
_RETRY_AFTER_MAX = 3600.0  # seconds; a server asking for more is not believed further
REDACTED: Final = "<redacted>"


def status_object(data: bytes) -> Obj:
    """The Status object in an error body; ``{}`` when the body is something else."""
    try:
        status = json.loads(data)
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


class Unserved(NotFound):
    """A 404 for a path the server does not serve at all (its Status names no object, as the
    API server's answer for a resource it does not have), not for an object that is missing:
    the adapter's own (``KubeCluster`` asks discovery again); a ``NotFound`` past the port."""


def status_error(code: int, status: Obj, headers: Mapping[str, str] | None = None) -> ApiError:
    """The port's error for an answer with HTTP status ``code`` and ``Status`` body."""
    cls = error_class(code)
    details = status.get("details")
    if cls is NotFound and not (isinstance(details, dict) and details.get("name")):
        cls = Unserved
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "Error"
    reason = str(status.get("reason") or phrase.replace(" ", ""))
    message = str(status.get("message") or phrase)
    return cls(code, reason, message, retry_after=_retry_after(status, headers or {}))


def answer_error(code: int, body: bytes, headers: Mapping[str, str], url: str) -> ApiError:
    """The port's error for an answer outside 2xx to the request for ``url``. A redirect is one
    too, naming the host it points to: followed, it would take the request's credentials and
    body there, and that host's answer would be believed."""
    if not 300 <= code < 400:
        return status_error(code, status_object(body), headers)
    location = next((str(v) for k, v in headers.items() if str(k).lower() == "location"), "")
    where = f"redirected to {server_of(urljoin(url, location))}" if location else "redirected"
    return status_error(code, {"message": f"the API server {where}; kfcompile follows no redirect"})


def redacted(error: ApiError, credentials: Iterable[str]) -> ApiError:
    """``error`` as the port has it (an ``Unserved`` is a ``NotFound`` there), or a copy with
    each of ``credentials`` in its reason and message replaced by ``<redacted>`` (a server may
    quote a request's Authorization header back)."""
    # Longest first: a header is one marker, not its scheme and a marker.
    found = sorted({c for c in credentials if c}, key=len, reverse=True)
    port_class = NotFound if isinstance(error, Unserved) else type(error)
    reason, message = error.reason, error.message
    if found:
        pattern = re.compile("|".join(map(re.escape, found)))
        reason, message = pattern.sub(REDACTED, reason), pattern.sub(REDACTED, message)
    if (reason, message, port_class) == (error.reason, error.message, type(error)):
        return error
    clean = port_class(error.status, reason, message, retry_after=error.retry_after)
    clean.call = error.call
    return clean


def credentials(configuration: Any, sent: Iterable[str] = ()) -> set[str]:
    """Every credential a client ``configuration`` holds, and the Authorization headers ``sent``,
    in the forms a message could quote: each header or API key whole and without its scheme
    (``Bearer <token>``, ``<token>``), basic auth decoded (``user:password``, ``password``), the
    password, the proxy's, and the client key's PEM, whole and line by line."""
    proxy = urlsplit(configuration.proxy or "")
    found: set[str] = {configuration.password or "", proxy.password or ""}
    proxy_headers = (configuration.proxy_headers or {}).values()
    for value in map(str, [*sent, *compat.api_keys(configuration), *proxy_headers]):
        scheme, _, secret = value.partition(" ")
        found |= {value, secret}
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(secret, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue
            found |= {pair, pair.partition(":")[2]}
    if configuration.key_file:
        try:
            pem = Path(configuration.key_file).read_text().strip()
        except (OSError, UnicodeDecodeError):
            pem = ""
        found |= {pem, *(line for line in pem.splitlines() if not line.startswith("-----"))}
    return found - {""}


def _retry_after(status: Obj, headers: Mapping[str, str]) -> float | None:
    """The seconds a 429/5xx asks us to wait: the ``Retry-After`` header (in seconds; the API
    server never sends a date), else the Status's ``details.retryAfterSeconds``."""
    details = status.get("details")
    found: list[object] = [v for k, v in headers.items() if str(k).lower() == "retry-after"]
    if isinstance(details, dict):
        found.append(details.get("retryAfterSeconds"))
    for value in found:
        try:
            seconds = float(str(value))
        except ValueError:
            continue
        if seconds >= 0 and seconds == seconds:  # not NaN
            return min(seconds, _RETRY_AFTER_MAX)
    return None


def server_of(url: str) -> str:
    """``scheme://host:port`` of a URL: no credentials, no path or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}" if parts.scheme else url.rpartition("@")[2]


def _chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it wraps: causes, contexts, urllib3's ``reason``."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        found = todo.pop(0)
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        reason = getattr(found, "reason", None)
        todo += [reason if isinstance(reason, BaseException) else None]
        todo += [found.__cause__, found.__context__]


def transport_error(
    error: BaseException, url: str, timeout: tuple[float | None, float | None]
) -> Transient:
    """No answer came: why, with the server's address (``url``'s, without credentials);
    ``timeout``: the seconds a connection, then an answer, were awaited."""
    server = server_of(url)
    chain = list(_chain(error))

    def has(*types: type[BaseException]) -> BaseException | None:
        return next((e for e in chain if isinstance(e, types)), None)

    socks = (e for e in chain if type(e).__module__ == "socks")  # PySocks' errors
    proxy = has(urllib3.exceptions.ProxyError) or next(socks, None)
    if proxy is not None:
        said = [e.strerror for e in chain if isinstance(e, OSError) and e.strerror]
        why = said[0] if said else chain[-1]  # the innermost error: what the proxy said
        return Transient(0, "ProxyError", f"the proxy to {server} failed: {why}")
    if has(socket.gaierror) is not None:
        host = urlsplit(url).hostname or server
        return Transient(0, "UnknownHost", f"cannot resolve host {host} ({server})")
    if has(ConnectionRefusedError) is not None:
        return Transient(0, "ConnectionRefused", f"connection refused by {server}")
    verify = has(ssl.SSLCertVerificationError)
    if verify is not None:
        why = getattr(verify, "verify_message", "") or str(verify)
        return Transient(0, "TLSError", f"TLS certificate verify failed for {server}: {why}")
    tls = has(ssl.SSLError, urllib3.exceptions.SSLError)
    if tls is not None:
        return Transient(0, "TLSError", f"TLS with {server} failed: {tls}")
    # urllib3 counts a failed connect as a connect timeout (NewConnectionError subclasses it).
    failed = has(urllib3.exceptions.NewConnectionError)
    if failed is not None:
        cause = has(OSError)
        why = (cause.strerror or str(cause)) if isinstance(cause, OSError) else str(failed)
        return Transient(0, "ConnectionError", f"cannot connect to {server}: {why}")
    connect, read = timeout
    if has(urllib3.exceptions.ConnectTimeoutError) is not None:
        within = f" within {connect:g}s" if connect else ""
        return Transient(0, "Timeout", f"{server} did not accept a connection{within}")
    if has(urllib3.exceptions.TimeoutError, TimeoutError) is not None:
        within = f" within {read:g}s" if read else ""
        return Transient(0, "Timeout", f"no answer from {server}{within}")
    detail = error.reason if isinstance(error, urllib3.exceptions.MaxRetryError) else error
    return Transient(0, "ConnectionError", f"connection to {server} failed: {detail}")


def handshake_error(
    error: WebSocketException | OSError, url: str, timeout: tuple[float | None, float | None]
) -> ApiError:
    """The exec upgrade failed: the server's answer when there was one, else the connection."""
    from websocket import WebSocketBadStatusException  # exec's alone: not at every command

    if isinstance(error, WebSocketBadStatusException):
        code = error.status_code
        if 200 <= code < 300:  # an answer, but no stream (a proxy's page?): not a success
            said = f"the API server answered {code} instead of opening the exec stream (101)"
            return status_error(code, {"message": said})
        return status_error(code, status_object(error.resp_body or b""))
    return transport_error(error, url, timeout)

"""Every difference between the ``kubernetes`` client lines (and urllib3 lines) the adapter runs on.

Supported: ``kubernetes`` 27.2 to 37.x (pyproject states the range), on urllib3 1.26 or 2.x.
Launchers pin old clients (the Kubeflow SDK 0.5 caps ``kubernetes<36``; torchx 0.7 caps
``urllib3<1.27``, which 37.x cannot run on), so a library they import takes what they have.
Nothing else in the adapter looks at the client's version; each difference below says which
versions and why.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import re
import socket
import ssl
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import unquote, urlencode, urlsplit

import certifi
import urllib3

from kfcompile.lifecycle.ports import ApiError
from kfcompile_kube.answers import OBJECT_LIMIT
from kfcompile_kube.client_modules import Configuration, rest
from kfcompile_kube.proxy import default_port

if TYPE_CHECKING:  # websocket-client (and the client's ws_client, with requests): exec's alone
    from websocket import WebSocket

CLIENT_VERSION: Final = importlib.metadata.version("kubernetes")
CLIENT_MAJOR: Final = int(CLIENT_VERSION.split(".", 1)[0])

# Where the bearer token lives in ``Configuration.api_key``: up to 35.x the loaders write it, and
# ``auth_settings`` reads it, under "authorization"; 36.0 moved both to "BearerToken" (reading
# "authorization" only when "BearerToken" is absent).
TOKEN_KEY: Final = "BearerToken" if CLIENT_MAJOR >= 36 else "authorization"

# The exec channel protocols, best first. Up to 35.x the client offers only v4, which cannot say
# "end of stdin" (a command reading stdin never ends); 36.0 offers v5 first. We always offer both.
V5_PROTOCOL: Final = "v5.channel.k8s.io"
_CHANNEL_PROTOCOLS: Final = f"{V5_PROTOCOL},v4.channel.k8s.io"

# Not shimmed: 27.x ignores a kubeconfig's ``tls-server-name`` (28.1 reads it, for HTTP and
# websockets alike), so a server certificate must then name the address itself.

# What a header value may hold: printable ASCII, spaces and tabs.
_UNSENDABLE: Final = re.compile(r"[^\t\x20-\x7e]")

# urllib3 2 responses have ``read1`` (what has arrived, up to n bytes); 1.26 has none, its
# ``stream`` yields each chunk of a chunked body as it arrives (watches and logs are chunked).
_READ1: Final = hasattr(urllib3.response.HTTPResponse, "read1")


class Refused(Exception):
    """The server answered outside 2xx: its status, headers and body (already read)."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status)
        self.status, self.body, self.headers = status, body, dict(headers or {})


class Client(Protocol):
    """What the adapter sends with: the configuration and the client's REST layer, which both
    the official ``ApiClient`` (a launcher's own) and ``RestClient`` have."""

    configuration: Configuration
    rest_client: Any  # kubernetes.client.rest.RESTClientObject
    default_headers: dict[str, str]
    cookie: str | None

    def close(self) -> None: ...


class RestClient:
    """An API client made of the configuration and the client's own REST layer
    (``rest.RESTClientObject``: the urllib3 pool manager with the configuration's TLS and
    client-certificate settings), without ``ApiClient``. The adapter reads and writes JSON
    itself, so it uses none of ``ApiClient``'s model handling, and importing that module
    (pydantic, dateutil, a thread pool) cost a cold ``kfcompile status`` about 70 ms.

    The configuration's ``proxy`` is used as it is, on every line (``proxied``): the lines'
    own REST layers skip it for ``no_proxy``'s hosts by rules of their own, and up to 36.x
    know no SOCKS proxy."""

    cookie: str | None = None

    def __init__(self, configuration: Configuration) -> None:
        self.configuration = configuration
        proxy, configuration.proxy = configuration.proxy, None
        try:
            self.rest_client = rest.RESTClientObject(configuration)  # a PoolManager, no proxy
        finally:
            configuration.proxy = proxy
        if proxy:
            self.rest_client.pool_manager = proxied(self.rest_client.pool_manager, configuration)
        self.default_headers = {"User-Agent": f"kfcompile kubernetes-python/{CLIENT_VERSION}"}

    def close(self) -> None:
        self.rest_client.pool_manager.clear()


def proxied(direct: urllib3.PoolManager, configuration: Configuration) -> urllib3.PoolManager:
    """A pool manager sending through ``configuration.proxy`` (``proxy.chosen``: http, https
    or socks5h) what ``direct`` would send directly, with the same TLS settings; the proxy's
    credentials (``user:password@``) as kubectl sends them (Proxy-Authorization, or SOCKS5's
    own)."""
    proxy = str(configuration.proxy)
    settings = dict(direct.connection_pool_kw)
    if proxy.startswith("socks"):
        from urllib3.contrib.socks import SOCKSProxyManager

        return SOCKSProxyManager(proxy, **settings)
    headers = dict(configuration.proxy_headers or {})
    parts = urlsplit(proxy)
    if parts.username is not None and not any(k.lower() == "proxy-authorization" for k in headers):
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers.update(urllib3.make_headers(proxy_basic_auth=pair))
    return urllib3.ProxyManager(proxy, proxy_headers=headers, **settings)


def prepare(
    client: Client,
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
) -> tuple[str, dict[str, str]]:
    """The request's full URL (host, path, query) and headers, credentials included, as every
    line's ``ApiClient`` builds them before it sends (its default headers and cookie, then the
    configuration's ``BearerToken`` auth setting, whose reading runs the token refresh hook).

    ``ApiError`` when a header holds what no header can carry (a line break in a credential):
    sent, http.client would refuse it with an error quoting the whole value."""
    all_headers = {**headers, **client.default_headers}
    if client.cookie:
        all_headers["Cookie"] = client.cookie
    auth_query: list[tuple[str, str]] = []
    settings: Mapping[str, Any] = client.configuration.auth_settings()
    auth = settings.get("BearerToken")
    if auth:
        if auth["in"] == "query":
            auth_query.append((auth["key"], auth["value"]))
        else:
            all_headers[auth["key"]] = auth["value"]
    for name, value in all_headers.items():
        if _UNSENDABLE.search(value):
            what = "credentials" if name.lower() in ("authorization", "cookie") else "value"
            raise ApiError(
                0,
                "BadHeader",
                f"the {what} of the request's {name} header hold a line break, a control "
                "character or a character that is not ASCII (not printed): it cannot be sent",
            )
    url = client.configuration.host + path
    if query or auth_query:
        url += "?" + urlencode([*query, *auth_query])
    return url, all_headers


def send(
    client: Client,
    method: str,
    url: str,
    headers: dict[str, str],
    body: object,
    timeout: tuple[float, float | None],
) -> Any:
    """The urllib3 response, body unread, for a 2xx answer; ``Refused`` otherwise, a redirect
    included. Transport failures (TLS ones too) pass through as urllib3/OS errors.

    Sent by the pool manager the client built (TLS, proxies), as its ``RESTClientObject.request``
    would (a JSON body), except that no redirect is followed: no line's ``request`` passes
    ``redirect``, and urllib3 1.26 (``PoolManager.urlopen``) then follows any 3xx to whatever
    host its ``Location`` names, re-sending a 307's body (a Secret's ``stringData``) and
    believing that host's answer; 2.x does too unless the pool's ``retries`` says otherwise."""
    pool: urllib3.PoolManager = client.rest_client.pool_manager
    response = pool.request(
        method,
        url,
        body=None if body is None else json.dumps(body),
        headers=headers,
        timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
        preload_content=False,
        redirect=False,
    )
    if not 200 <= response.status < 300:
        raise Refused(response.status, _error_body(response), response.headers)
    return response


def chunks(response: Any, size: int) -> Iterator[bytes]:
    """The body as it arrives, in pieces of at most ``size`` bytes."""
    if _READ1:
        while chunk := response.read1(size):
            yield chunk
    else:
        yield from response.stream(size, decode_content=True)


def open_exec(configuration: Configuration, url: str, headers: Mapping[str, str]) -> WebSocket:
    """The exec websocket, connected; ``Refused`` when the server answers the upgrade with a
    redirect, which is never followed.

    Built here with the TLS options of the client's own ``create_websocket`` (``_tls_options``)
    and the proxy ``RestClient`` uses, because that one lets websocket-client follow
    up to 3 redirects, repeating the handshake's Authorization header to any host the
    ``Location`` names, plaintext ``ws://`` too. Not ``kubernetes.stream.stream`` either, which
    swaps the ApiClient's send method (``request`` up to 36.x, ``call_api`` in 37.x), takes
    ``binary=`` only from 30.1 and offers v4 only up to 35.x."""
    from kubernetes.stream import ws_client
    from websocket import WebSocket, WebSocketException

    ws_url = ws_client.get_websocket_url(url)  # type: ignore[no-untyped-call]
    header = [f"sec-websocket-protocol: {_CHANNEL_PROTOCOLS}"]
    if "authorization" in headers:
        header.append(f"authorization: {headers['authorization']}")
    options: dict[str, Any] = {"header": header, **_websocket_proxy(configuration)}
    sock = WebSocket(sslopt=_tls_options(configuration, ws_url), skip_utf8_validation=False)
    try:
        sock.connect(ws_url, redirect_limit=0, **options)  # type: ignore[no-untyped-call]
    except WebSocketException:
        answer = sock.handshake_response  # a redirect: "Redirect limit exhausted"
        if answer is not None and 300 <= answer.status < 400:
            raise Refused(answer.status, b"", answer.headers) from None
        raise
    return sock


def _websocket_proxy(configuration: Configuration) -> dict[str, Any]:
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


def _tls_options(configuration: Configuration, ws_url: str) -> dict[str, Any]:
    """What the client's ``create_websocket`` gives websocket-client for TLS, in every line
    (27.x has no ``tls_server_name``)."""
    options: dict[str, Any] = {"cert_reqs": ssl.CERT_NONE}
    if ws_url.startswith("wss://") and configuration.verify_ssl:
        options = {
            "cert_reqs": ssl.CERT_REQUIRED,
            "ca_certs": configuration.ssl_ca_cert or certifi.where(),
        }
        if configuration.assert_hostname is not None:
            options["check_hostname"] = configuration.assert_hostname
    if configuration.cert_file:
        options["certfile"] = configuration.cert_file
    if configuration.key_file:
        options["keyfile"] = configuration.key_file
    server_name = getattr(configuration, "tls_server_name", None)
    if server_name:
        options["server_hostname"] = server_name
    return options


def quiet_unverified(host: str) -> None:
    """No ``InsecureRequestWarning`` for ``host`` from now on: urllib3 gives one per request to
    a server whose certificate is not verified (both lines: "Unverified HTTPS request is being
    made to host '<host>'"); the adapter says it once instead."""
    warnings.filterwarnings(
        "ignore",
        f"Unverified HTTPS request is being made to host '\\[?{re.escape(host)}\\]?'",
        urllib3.exceptions.InsecureRequestWarning,
    )


def read_timeout(response: Any, seconds: float | None) -> None:
    """From now on, each read of ``response``'s body may wait ``seconds`` (``None``: for ever),
    whatever its headers were awaited for. Both urllib3 lines read the body from the socket of
    the connection the response holds, with that socket's timeout."""
    sock = getattr(getattr(response, "_connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def cut(response: Any) -> None:
    """End a read of ``response`` blocked in another thread. urllib3 2.3+ has ``shutdown()``
    for this; on older lines ``close()`` does not wake the reader, so the socket is shut down
    under it (the connection is not reused: it carried an unfinished stream)."""
    shutdown = getattr(response, "shutdown", None)
    if shutdown is not None:
        shutdown()
        return
    sock = getattr(getattr(response, "_connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    response.close()


# What is read of an error answer's body (its Status, a few hundred bytes from a real server):
# the object limit. The rest is left unread and the connection dropped.
ERROR_BODY_LIMIT: Final = OBJECT_LIMIT


def _error_body(response: Any) -> bytes:
    body: bytes = response.read(ERROR_BODY_LIMIT, decode_content=False)
    if response.read(1, decode_content=False):
        response.close()  # more than the limit: the rest is not read
    response.release_conn()
    return body


def pool(client: Client, url: str) -> Any:
    """The urllib3 connection pool a request to ``url`` goes through: that of the client's own
    pool manager (``rest_client.pool_manager`` in every line, which ``send`` sends with),
    proxies included."""
    return client.rest_client.pool_manager.connection_from_url(url)

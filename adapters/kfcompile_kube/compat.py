"""The one module that reaches into the ``kubernetes`` client's internals and urllib3's beneath it:
its REST layer (``rest.RESTClientObject`` and the urllib3 pool manager it holds), the
``Configuration``'s token and TLS settings, urllib3's responses and connection pools. Nothing
else in the adapter names them, or looks at the client's version.

Supported: ``kubernetes`` 27.2 to 37.x (pyproject states the range), on urllib3 1.26 or 2.x.
Launchers pin old clients (the Kubeflow SDK 0.5 caps ``kubernetes<36``; torchx 0.7 caps
``urllib3<1.27``, which 37.x cannot run on), so a library they import takes what they have.
What differs between the lines, and what this module does about it:

======================================  ==============  ==============  ===================
                                        27.2            36.x            37.x
======================================  ==============  ==============  ===================
the token in ``api_key`` (``TOKEN_KEY``)  authorization   BearerToken     BearerToken
``tls_server_name`` (``websocket_tls``)   none            yes             yes
``ca_cert_data`` (``trust_anchor``)       none            none            yes
the REST layer's own proxy rules          HTTP only       HTTP only       HTTP and SOCKS
urllib3 (``chunks``, ``cut``)             1.26            1.26 or 2       2
======================================  ==============  ==============  ===================

- A proxy is the adapter's choice on every line (``RestClient``, ``proxied``): the lines' REST
  layers skip it for ``no_proxy``'s hosts by rules of their own, and up to 36.x know no SOCKS one.
- The public way to send, ``ApiClient.call_api``, serves none of the lines: it is called
  differently in each (27.2 and 36.x take the path, the parameters and ``_preload_content``;
  37.x takes a URL from ``param_serialize`` and gives a ``RESTResponse``), follows redirects
  (urllib3 1.26 to any host, re-sending credentials and a 307's body), reads an error's body
  whole and decodes it as UTF-8, and needs ``ApiClient`` imported: every model up to 36.x,
  pydantic in 37.x (about 70 ms of a cold ``kfcompile status``). So requests go to the pool
  manager of the client's REST layer (``send``), which holds its TLS and client certificate.
- Not shimmed: 27.x ignores a kubeconfig's ``tls-server-name`` (28.1 reads it, for HTTP and
  websockets alike), so a server certificate must then name the address itself.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol
from urllib.parse import unquote, urlencode, urlsplit

import certifi
import urllib3

from kfcompile_kube.answers import OBJECT_LIMIT
from kfcompile_kube.client_modules import Configuration, rest

CLIENT_VERSION: Final = importlib.metadata.version("kubernetes")
CLIENT_MAJOR: Final = int(CLIENT_VERSION.split(".", 1)[0])

# Where the bearer token lives in ``Configuration.api_key``: up to 35.x the loaders write it, and
# ``auth_settings`` reads it, under "authorization"; 36.0 moved both to "BearerToken" (reading
# "authorization" only when "BearerToken" is absent).
TOKEN_KEY: Final = "BearerToken" if CLIENT_MAJOR >= 36 else "authorization"

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
    client-certificate settings), without ``ApiClient`` (the module's docstring says why).

    The configuration is made for the adapter: no retries of urllib3's (the lifecycle retries
    with its own backoff; urllib3's silent ones would multiply timeouts), and its ``proxy``
    used as it is, on every line (``proxied``), none of ``no_proxy``'s rules applied."""

    cookie: str | None = None

    def __init__(self, configuration: Configuration) -> None:
        self.configuration = configuration
        configuration.retries = False
        configuration.no_proxy = None
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


def bear(configuration: Configuration, hook: Callable[[Any], None], header: str) -> None:
    """Send ``header`` (``Bearer <token>``) as the Authorization of the requests made with
    ``configuration``, and have the client call ``hook(configuration)`` before each one (its
    ``refresh_api_key_hook``, which may ``put_token`` another); in place of the loader's."""
    put_token(configuration, header)
    configuration.refresh_api_key_hook = hook  # type: ignore[assignment]


def put_token(configuration: Configuration, header: str) -> None:
    """The Authorization header ``auth_settings`` gives from now on."""
    configuration.api_key[TOKEN_KEY] = header


def token_hook(configuration: Configuration) -> object:
    """The hook ``bear`` gave (or the loader's, or None)."""
    return getattr(configuration, "refresh_api_key_hook", None)


def api_keys(configuration: Configuration) -> list[str]:
    """Every API key ``configuration`` holds (the bearer token's header among them)."""
    return [str(value) for value in configuration.api_key.values()]


def prepare(
    client: Client,
    path: str,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
) -> tuple[str, dict[str, str]]:
    """The request's full URL (host, path, query) and headers, credentials included, as every
    line's ``ApiClient`` builds them before it sends (its default headers and cookie, then the
    configuration's ``BearerToken`` auth setting, whose reading runs the token refresh hook)."""
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


# What is read of an error answer's body (its Status, a few hundred bytes from a real server):
# the object limit. The rest is left unread and the connection dropped.
ERROR_BODY_LIMIT: Final = OBJECT_LIMIT


def _error_body(response: Any) -> bytes:
    body: bytes = response.read(ERROR_BODY_LIMIT, decode_content=False)
    if response.read(1, decode_content=False):
        response.close()  # more than the limit: the rest is not read
    response.release_conn()
    return body


def chunks(response: Any, size: int) -> Iterator[bytes]:
    """The body as it arrives, in pieces of at most ``size`` bytes."""
    if _READ1:
        while chunk := response.read1(size):
            yield chunk
    else:
        yield from response.stream(size, decode_content=True)


def read_timeout(response: Any, seconds: float | None) -> None:
    """From now on, each read of ``response``'s body may wait ``seconds`` (``None``: for ever),
    whatever its headers were awaited for. Both urllib3 lines read the body from the socket of
    the connection the response holds (its private ``_connection``), with that socket's
    timeout."""
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


def pool(client: Client, url: str) -> Any:
    """The urllib3 connection pool a request to ``url`` goes through: that of the client's own
    pool manager (``rest_client.pool_manager`` in every line, which ``send`` sends with),
    proxies included."""
    return client.rest_client.pool_manager.connection_from_url(url)


def watch_connections(
    pool: Any, taken: Callable[[Any], None], made: Callable[[socket.socket], None]
) -> None:
    """Call ``taken(conn)`` with every connection urllib3's connection ``pool`` hands a request
    (new or kept alive), before the request is sent on it, and ``made(sock)`` with every
    socket such a connection makes, before TLS (ssl takes the socket from the connection for
    the handshake). By urllib3's private ``HTTPConnectionPool._get_conn`` and
    ``HTTPConnection._new_conn``, in both lines; once per pool and connection."""
    if getattr(pool, "_kfcompile_watched", False):
        return
    get_conn = pool._get_conn

    def _get_conn(*args: Any, **kwargs: Any) -> Any:
        conn = get_conn(*args, **kwargs)
        if not getattr(conn, "_kfcompile_watched", False):
            new_conn = conn._new_conn

            def _new_conn() -> socket.socket:
                sock: socket.socket = new_conn()
                made(sock)
                return sock

            conn._new_conn = _new_conn
            conn._kfcompile_watched = True
        taken(conn)
        return conn

    pool._get_conn = _get_conn
    pool._kfcompile_watched = True


def websocket_tls(configuration: Configuration, ws_url: str) -> dict[str, Any]:
    """What the client's ``create_websocket`` (``stream/ws_client.py``) gives websocket-client
    for TLS, in every line (27.x has no ``tls_server_name``)."""
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


def trust_anchor(configuration: Configuration) -> bytes:
    """The CA certificates ``configuration`` trusts its server by (what tells a re-created
    cluster from the old one at no cost: a new cluster has a new CA, unless its maker keeps
    one); empty without (plain http, the system's CAs). 37.x may hold them in ``ca_cert_data``;
    the loaders of every line write a file (``ssl_ca_cert``)."""
    data = getattr(configuration, "ca_cert_data", None)
    if data:
        return data.encode() if isinstance(data, str) else bytes(data)
    if not configuration.ssl_ca_cert:
        return b""
    try:
        with open(configuration.ssl_ca_cert, "rb") as f:
            return f.read(OBJECT_LIMIT)
    except OSError:
        return b""

"""Which proxy a request to the API server goes through, chosen as kubectl chooses it (issue 24,
items 2-3): the kubeconfig's ``proxy-url`` (http, https, socks5) whatever the server; else
``HTTPS_PROXY``/``HTTP_PROXY`` by the server's scheme, never for ``NO_PROXY``'s hosts nor for
loopback (localhost, 127.0.0.0/8, ::1: over plain http a proxy would read the bearer token).
A proxy-url that cannot be used is one line saying why.

Real sockets on loopback: an API server stand-in, a recording HTTP proxy and a SOCKS5 proxy,
both of which send every request to that server whatever host it names (as if a name like
``kube.example`` resolved there), so a host that is not loopback can be used through them.
On both client lines: CI runs this file in the launchers' environment too (kubernetes 27.2 on
urllib3 1.26); 36.x, the Kubeflow SDK's pin, read no ``proxy-url``."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import select
import socket
import socketserver
import ssl
import struct
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakekube import FakeKube
from fakekube.unreachable import TLS, closed_port
from test_adapter_kube import NS, echo, running_pod

from kfcompile.lifecycle.ports import ApiError, Transient
from kfcompile_kube import KubeCluster, connect
from kfcompile_kube.config import ConfigError

TOKEN = "proxy-test-t0ken-in-the-clear"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")


@pytest.fixture(autouse=True)
def _no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own proxy settings never leak into a test."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


class _ApiHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Api

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization", "")))
        body = json.dumps({"kind": "ConfigMapList", "items": [], "metadata": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Api(http.server.ThreadingHTTPServer):
    """An API server stand-in: answers every GET with an empty list, recording (path, the
    Authorization header) of each."""

    daemon_threads = True

    def __init__(self, host: str, tls: bool = False) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, 0), _ApiHandler)
        self.seen: list[tuple[str, str]] = []
        if tls:  # its certificate names 127.0.0.1 and localhost
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(TLS / "untrusted-server.crt", TLS / "untrusted-server.key")
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.port: int = self.server_address[1]


@contextlib.contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[Any]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _relay(one: socket.socket, other: socket.socket) -> None:
    """Bytes both ways until either side closes."""
    with contextlib.suppress(OSError):
        while True:
            ready, _, _ = select.select([one, other], [], [], 10)
            if not ready:
                return
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (other if sock is one else one).sendall(data)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Proxy

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_CONNECT(self) -> None:
        self.server.requests.append(
            (self.requestline, {k.lower(): v for k, v in self.headers.items()})
        )
        upstream = socket.create_connection(("127.0.0.1", self.server.upstream), timeout=10)
        self.send_response(200, "Connection established")
        self.end_headers()
        _relay(self.connection, upstream)
        upstream.close()
        self.close_connection = True

    def do_GET(self) -> None:
        self.server.requests.append(
            (self.requestline, {k.lower(): v for k, v in self.headers.items()})
        )
        conn = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=10)
        conn.request("GET", self.path, headers=dict(self.headers))
        answer = conn.getresponse()
        body = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        conn.close()


class _Proxy(http.server.ThreadingHTTPServer):
    """An HTTP proxy on 127.0.0.1 recording each request it gets (its request line and
    headers, their names in lower case), and sending it to the port ``upstream`` whatever host
    it names."""

    daemon_threads = True

    def __init__(self, upstream: int) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _SocksHandler(socketserver.BaseRequestHandler):
    server: _Socks

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(10)
        _, methods = conn.recv(2)
        conn.recv(methods)
        conn.sendall(b"\x05\x00")  # no authentication
        _, _, _, kind = conn.recv(4)  # version, CONNECT, reserved, address type
        if kind == 3:  # a host name, resolved by the proxy
            host = conn.recv(conn.recv(1)[0]).decode()
        else:
            size = 4 if kind == 1 else 16
            family = socket.AF_INET if kind == 1 else socket.AF_INET6
            host = socket.inet_ntop(family, conn.recv(size))
        (port,) = struct.unpack("!H", conn.recv(2))
        self.server.targets.append(f"{host}:{port}")
        upstream = socket.create_connection(("127.0.0.1", self.server.upstream), timeout=10)
        conn.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack("!H", 0))
        _relay(conn, upstream)
        upstream.close()


class _Socks(socketserver.ThreadingTCPServer):
    """A SOCKS5 proxy on 127.0.0.1 (CONNECT, no authentication) recording the host:port each
    connection asks for, and connecting it to the port ``upstream`` instead."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: int) -> None:
        super().__init__(("127.0.0.1", 0), _SocksHandler)
        self.upstream = upstream
        self.targets: list[str] = []
        self.url = f"socks5://127.0.0.1:{self.server_address[1]}"


def kubeconfig(path: Path, server: str, **cluster: object) -> Path:
    entry = {"server": server, **cluster}
    if server.startswith("https://"):  # the stand-in's self-signed certificate, trusted
        entry["certificate-authority"] = str(TLS / "untrusted-server.crt")
    config = {
        "clusters": [{"name": "c", "cluster": entry}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(config))
    return path


def listed(kc: Path) -> None:
    """One request through the adapter, as every command makes them."""
    KubeCluster(connect(str(kc)).api_client, request_timeout=10).list("v1", "ConfigMap", "a")


# --- item 2: loopback is never proxied --------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "scheme"),
    [
        ("127.0.0.1", "http"),
        ("localhost", "http"),
        ("[::1]", "http"),
        ("127.0.0.1", "https"),
        ("localhost", "https"),
    ],
)
def test_a_server_on_loopback_is_never_reached_through_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, scheme: str
) -> None:
    """kubectl (net/http's ProxyFromEnvironment) never proxies localhost nor a loopback
    address: over plain http the proxy received the bearer token in the clear; over https the
    command failed with "Tunnel connection failed"."""
    api_server = _Api(host.strip("[]"), tls=scheme == "https")
    with serving(api_server) as api, serving(_Proxy(api.port)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "kube.internal")  # a list without loopback
        listed(kubeconfig(tmp_path / "kc", f"{scheme}://{host}:{api.port}"))
    assert proxy.requests == []
    assert api.seen == [("/api/v1/namespaces/a/configmaps?limit=500", f"Bearer {TOKEN}")]


@pytest.mark.parametrize(
    ("no_proxy", "proxied"),
    [
        ("", True),
        ("other.example,10.0.0.0/8", True),
        ("kube.example", False),
        ("KUBE.EXAMPLE", False),
        (".example", False),
        ("example", False),  # a domain: its subdomains too
        ("kube.example:1", True),  # another port
        ("*", False),
    ],
)
def test_the_environments_proxy_is_used_but_for_no_proxys_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_proxy: str, proxied: bool
) -> None:
    with serving(_Api("127.0.0.1")) as api, serving(_Proxy(api.port)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("no_proxy", no_proxy)
        kc = kubeconfig(tmp_path / "kc", f"http://kube.example:{api.port}")
        if proxied:
            listed(kc)
        else:  # straight to kube.example, which does not resolve
            with pytest.raises(ApiError, match=r"cannot resolve host kube\.example"):
                listed(kc)
    got = [line for line, _ in proxy.requests]
    url = f"http://kube.example:{api.port}/api/v1/namespaces/a/configmaps?limit=500"
    assert got == ([f"GET {url} HTTP/1.1"] if proxied else [])


def test_https_goes_through_https_proxy_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As net/http: HTTPS_PROXY for an https server (a CONNECT tunnel: the proxy sees the host,
    never the token); HTTP_PROXY is for http servers only."""
    with serving(_Api("127.0.0.1", tls=True)) as api, serving(_Proxy(api.port)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")  # nothing there
        monkeypatch.setenv("HTTPS_PROXY", proxy.url.removeprefix("http://"))  # no scheme: http
        kc = kubeconfig(
            tmp_path / "kc", f"https://kube.example:{api.port}", **{"tls-server-name": "localhost"}
        )
        if "tls_server_name" not in dir(connect(str(kc)).api_client.configuration):
            pytest.skip("kubernetes 27.x reads no tls-server-name")
        listed(kc)
    [(line, headers)] = proxy.requests
    assert line.startswith(f"CONNECT kube.example:{api.port} HTTP/1.")
    assert TOKEN not in json.dumps(headers)


# --- item 3: the kubeconfig's proxy-url, on every client line ---------------------------------


def test_proxy_url_is_used_on_every_client_line(tmp_path: Path) -> None:
    """kubernetes 36 read no proxy-url (the request went straight to the server)."""
    with serving(_Api("127.0.0.1")) as api, serving(_Proxy(api.port)) as proxy:
        listed(
            kubeconfig(
                tmp_path / "kc", f"http://kube.example:{api.port}", **{"proxy-url": proxy.url}
            )
        )
        # Given explicitly, it is used for loopback too, as kubectl uses it.
        listed(
            kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{api.port}", **{"proxy-url": proxy.url})
        )
    assert [line.split()[1] for line, _ in proxy.requests] == [
        f"http://kube.example:{api.port}/api/v1/namespaces/a/configmaps?limit=500",
        f"http://127.0.0.1:{api.port}/api/v1/namespaces/a/configmaps?limit=500",
    ]


def test_an_https_server_is_reached_through_a_proxy_urls_tunnel(tmp_path: Path) -> None:
    with serving(_Api("127.0.0.1", tls=True)) as api, serving(_Proxy(api.port)) as proxy:
        listed(
            kubeconfig(tmp_path / "kc", f"https://localhost:{api.port}", **{"proxy-url": proxy.url})
        )
    [(line, headers)] = proxy.requests
    assert line.startswith(f"CONNECT localhost:{api.port} HTTP/1.")
    assert TOKEN not in json.dumps(headers) and len(api.seen) == 1


@pytest.mark.parametrize("through", ["environment, loopback", "proxy-url"])
def test_exec_takes_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    """The exec websocket goes where every other request goes: websocket-client, left to
    itself, takes the environment's proxy for loopback too (unless NO_PROXY is unset)."""
    with FakeKube() as fake, serving(_Proxy(int(fake.url.rpartition(":")[2]))) as proxy:
        fake.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        running_pod(fake, "p")
        fake.fake.on_exec = echo
        fake.tokens.add(TOKEN)
        if through == "proxy-url":
            server, extra = fake.url.replace("127.0.0.1", "kube.example"), {"proxy-url": proxy.url}
        else:
            server, extra = fake.url, {}
            monkeypatch.setenv("HTTP_PROXY", proxy.url)
            monkeypatch.setenv("NO_PROXY", "kube.internal")
        config = json.loads(kubeconfig(tmp_path / "kc", server, **extra).read_text())
        config["contexts"][0]["context"]["namespace"] = NS
        (tmp_path / "kc").write_text(json.dumps(config))
        kube = KubeCluster(connect(str(tmp_path / "kc")).api_client, request_timeout=10)
        assert kube.exec(NS, "p", "main", ["cat"], b"hello").stdout == b"hello"
    lines = [line.split()[0] for line, _ in proxy.requests]
    assert lines == (["CONNECT"] if through == "proxy-url" else [])


def test_a_proxy_url_with_credentials_authenticates_and_never_prints_them(
    tmp_path: Path,
) -> None:
    with serving(_Api("127.0.0.1")) as api, serving(_Proxy(api.port)) as proxy:
        url = proxy.url.replace("http://", "http://alice:pr0xy-secret@")
        listed(kubeconfig(tmp_path / "kc", f"http://kube.example:{api.port}", **{"proxy-url": url}))
    [(_, headers)] = proxy.requests
    assert headers.get("proxy-authorization") == "Basic YWxpY2U6cHIweHktc2VjcmV0"


def test_a_socks5_proxy_url_is_used(tmp_path: Path) -> None:
    pytest.importorskip("socks", reason="PySocks is not installed")
    with serving(_Api("127.0.0.1")) as api, serving(_Socks(api.port)) as socks:
        kc = kubeconfig(
            tmp_path / "kc", f"http://kube.example:{api.port}", **{"proxy-url": socks.url}
        )
        listed(kc)
    assert socks.targets == [f"kube.example:{api.port}"]  # resolved by the proxy, as kubectl's
    assert len(api.seen) == 1


def test_a_socks5_proxy_url_without_pysocks_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "socks", None)  # as if PySocks were not installed
    kc = kubeconfig(
        tmp_path / "kc", "http://kube.example", **{"proxy-url": "socks5://127.0.0.1:1080"}
    )
    with pytest.raises(ConfigError) as err:
        connect(str(kc))
    assert str(err.value) == (
        f"kubeconfig {kc}, context 'x': cluster proxy-url socks5://127.0.0.1:1080: a SOCKS "
        "proxy needs the PySocks package (pip install PySocks)"
    )


@pytest.mark.parametrize(
    ("proxy_url", "why"),
    [
        ("ftp://proxy:21", "unsupported scheme 'ftp', must be http, https or socks5"),
        ("proxy:3128", "unsupported scheme 'proxy', must be http, https or socks5"),
        ("http://:3128", "no host"),
        ("http://proxy:31x8", "port '31x8' is not a number from 1 to 65535"),
        ("http://proxy:70000", "port '70000' is not a number from 1 to 65535"),
        ("http://[::1", "not a URL"),
    ],
)
def test_a_proxy_url_that_cannot_be_used_is_one_line(
    tmp_path: Path, proxy_url: str, why: str
) -> None:
    """With kubernetes 37, a traceback; with 36 and 27, nothing: the request went direct."""
    secret = proxy_url.replace("://", "://bob:s3cret@", 1) if "://" in proxy_url else proxy_url
    kc = kubeconfig(tmp_path / "kc", "http://kube.example", **{"proxy-url": secret})
    with pytest.raises(ConfigError) as err:
        connect(str(kc))
    said = str(err.value)
    assert said.startswith(f"kubeconfig {kc}, context 'x': cluster proxy-url ")
    assert said.endswith(f": {why}") and "s3cret" not in said and "\n" not in said


def test_a_proxy_variable_that_cannot_be_used_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks4://proxy:1080")
    with pytest.raises(ConfigError) as err:
        connect(str(kubeconfig(tmp_path / "kc", "https://kube.example")))
    why = "unsupported scheme 'socks4', must be http, https or socks5"
    assert str(err.value).endswith(f"HTTPS_PROXY socks4://proxy:1080: {why}")


@pytest.mark.parametrize("scheme", ["http", "socks5"])
def test_a_proxy_that_cannot_be_reached_is_named_as_the_trouble(
    tmp_path: Path, scheme: str
) -> None:
    """Not "connection refused by <the API server>": it was the proxy."""
    if scheme == "socks5":
        pytest.importorskip("socks", reason="PySocks is not installed")
    proxy_url = f"{scheme}://bob:s3cret@127.0.0.1:{closed_port()}"
    kc = kubeconfig(tmp_path / "kc", "http://kube.example:8080", **{"proxy-url": proxy_url})
    with pytest.raises(Transient) as err:
        listed(kc)
    assert (
        str(err.value)
        == "ProxyError: the proxy to http://kube.example:8080 failed: Connection refused"
    )

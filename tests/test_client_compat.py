"""kfcompile_kube.compat, the one module over the client's internals, against the ``kubernetes``
client (and urllib3) actually installed.

CI runs this file in both of its environments (the newest client on urllib3 2, the oldest
supported one on urllib3 1.26), so each shim is checked against each side of its version test.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import certifi
import kubernetes
import pytest
import urllib3
from fakekube import FakeKube
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.kube_config import KubeConfigLoader
from test_adapter_kube import echo

from kfcompile_kube import compat, execstream
from kfcompile_kube.cluster import KubeCluster
from kfcompile_kube.config import connect
from kfcompile_kube.errors import TRANSPORT_ERRORS

NS = "team-a"
TOKEN = "compat-test-token"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def test_the_installed_client_is_in_the_stated_range() -> None:
    """pyproject's range is the one compat is written for: a client outside it fails here first."""
    import tomllib

    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("kubernetes"))
    low = spec.split(">=")[1].split(",")[0]
    installed = tuple(int(n) for n in kubernetes.__version__.split(".")[:2])
    assert tuple(int(n) for n in low.split(".")) <= installed < (38, 0), (spec, installed)
    assert installed[0] == compat.CLIENT_MAJOR


def test_token_key_is_where_the_installed_loader_puts_a_token() -> None:
    """A refreshed token must land where this client's loader put the first one and where its
    auth settings read it ("authorization" up to 35.x, "BearerToken" from 36)."""
    kubeconfig = {
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "first"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    configuration = Configuration()
    KubeConfigLoader(config_dict=kubeconfig).load_and_set(configuration)  # type: ignore[no-untyped-call]
    assert set(configuration.api_key) == {compat.TOKEN_KEY}
    configuration.refresh_api_key_hook = None  # the loader's, which puts "first" back each time
    configuration.api_key[compat.TOKEN_KEY] = "Bearer second"
    assert configuration.auth_settings()["BearerToken"]["value"] == "Bearer second"


# What the adapter sends with: its own client (``connect`` makes one), or a launcher's ApiClient.
CLIENTS = [
    pytest.param(compat.RestClient, id="RestClient"),
    pytest.param(ApiClient, id="ApiClient"),
]


@pytest.mark.parametrize("make", CLIENTS)
def test_prepare_builds_url_headers_and_credentials(make: Any) -> None:
    configuration = Configuration(host="http://127.0.0.1:1")
    refreshed: list[object] = []

    def refresh(config: Any) -> None:
        refreshed.append(config)
        compat.put_token(config, "Bearer t1")

    compat.bear(configuration, refresh, "Bearer t0")
    assert configuration.api_key == {compat.TOKEN_KEY: "Bearer t0"}
    client: compat.Client = make(configuration)
    query = [("labelSelector", "a=b,c in (d)"), ("command", "ls"), ("command", "-l /")]
    url, headers = compat.prepare(client, "/api/v1/pods", query, {"Accept": "text/plain"})
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("http", "127.0.0.1:1", "/api/v1/pods")
    assert parse_qsl(parts.query) == query  # repeated keys kept, in order
    assert headers["authorization"] == "Bearer t1"  # the hook ran before the token was read
    assert refreshed == [configuration]
    assert headers["Accept"] == "text/plain"
    assert headers["User-Agent"] == client.default_headers["User-Agent"]  # its default headers
    assert headers["User-Agent"].startswith("kfcompile " if make is compat.RestClient else "")
    client.close()


# --- send and chunks, against a server that says exactly what a test wants -----------------------


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    released: threading.Event


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def do_GET(self) -> None:
        if self.path.startswith("/redirect"):
            self.send_response(307)
            self.send_header("Location", "http://elsewhere.invalid/api/v1/secrets")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/huge-error"):
            self.send_response(500)
            self.send_header("Content-Length", str(compat.ERROR_BODY_LIMIT + 1024))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client stops reading at its limit
                self.wfile.write(b"x" * (compat.ERROR_BODY_LIMIT + 1024))
            return
        if self.path.startswith("/refused"):
            body = b'{"kind":"Status","message":"\xff\xfe not UTF-8"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        # A chunked body in two parts; the second only once the test has read the first.
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"4\r\none\n\r\n")
        self.wfile.flush()
        self.server.released.wait(10)
        self.wfile.write(b"4\r\ntwo\n\r\n0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.released = threading.Event()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.released.set()
        srv.shutdown()
        srv.server_close()


def _client(srv: _Server, make: Any) -> compat.Client:
    configuration = Configuration(host=f"http://127.0.0.1:{srv.server_address[1]}")
    configuration.retries = False
    client: compat.Client = make(configuration)
    return client


@pytest.mark.parametrize("make", CLIENTS)
def test_send_gives_a_refused_answer_as_its_raw_bytes(server: _Server, make: Any) -> None:
    """Up to 36.x the client raises for the status and ``call_api`` would decode the body as
    UTF-8 (a hostile body would crash it): compat reads it as bytes in every line."""
    client = _client(server, make)
    url, headers = compat.prepare(client, "/refused", [], {"Accept": "application/json"})
    with pytest.raises(compat.Refused) as refused:
        compat.send(client, "GET", url, headers, None, (5.0, 5.0))
    assert refused.value.status == 500
    assert refused.value.body == b'{"kind":"Status","message":"\xff\xfe not UTF-8"}'
    client.close()


@pytest.mark.parametrize("make", CLIENTS)
def test_chunks_give_what_has_arrived_without_waiting_for_more(server: _Server, make: Any) -> None:
    """A watch or a followed log yields each piece as it comes: urllib3 2 through ``read1``,
    1.26 (which has none) through ``stream``."""
    client = _client(server, make)
    url, headers = compat.prepare(client, "/stream", [], {})
    response = compat.send(client, "GET", url, headers, None, (5.0, 30.0))
    assert isinstance(response, urllib3.response.HTTPResponse)
    pieces = compat.chunks(response, 64 * 1024)
    first = next(pieces)
    server.released.set()  # only now does the server send the rest
    assert first == b"one\n"
    assert b"".join(pieces) == b"two\n"
    client.close()


@pytest.mark.parametrize("make", CLIENTS)
def test_send_follows_no_redirect(server: _Server, make: Any) -> None:
    """No line's REST layer passes ``redirect``: urllib3 1.26 would follow a 307 to any host."""
    client = _client(server, make)
    url, headers = compat.prepare(client, "/redirect", [], {})
    with pytest.raises(compat.Refused) as refused:
        compat.send(client, "POST", url, headers, {"stringData": {"k": "v"}}, (5.0, 5.0))
    assert refused.value.status == 307
    assert refused.value.headers["Location"] == "http://elsewhere.invalid/api/v1/secrets"
    client.close()


def test_send_reads_an_error_body_up_to_its_limit(server: _Server) -> None:
    client = _client(server, compat.RestClient)
    url, headers = compat.prepare(client, "/huge-error", [], {})
    with pytest.raises(compat.Refused) as refused:
        compat.send(client, "GET", url, headers, None, (5.0, 5.0))
    assert refused.value.body == b"x" * compat.ERROR_BODY_LIMIT
    client.close()


def _stream(server: _Server) -> tuple[compat.Client, Any, Iterator[bytes]]:
    """A client, the response of the server's stream and its pieces, the first one read."""
    client = _client(server, compat.RestClient)
    url, headers = compat.prepare(client, "/stream", [], {})
    response = compat.send(client, "GET", url, headers, None, (5.0, 30.0))
    pieces = compat.chunks(response, 64 * 1024)
    assert next(pieces) == b"one\n"
    return client, response, pieces


def test_read_timeout_bounds_each_read_of_the_body(server: _Server) -> None:
    """The body's reads wait what ``read_timeout`` says, not the 30 s its headers were given."""
    client, response, pieces = _stream(server)
    compat.read_timeout(response, 0.2)
    with pytest.raises(TRANSPORT_ERRORS):
        next(pieces)  # the server holds the rest back
    client.close()


def test_cut_ends_a_read_blocked_in_another_thread(server: _Server) -> None:
    client, response, pieces = _stream(server)
    ended: list[object] = []

    def read() -> None:
        try:
            ended.append(b"".join(pieces))
        except TRANSPORT_ERRORS as e:
            ended.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # blocked: the server holds the rest back
    compat.cut(response)
    reader.join(10)
    assert not reader.is_alive() and ended and ended[0] != b"two\n"
    client.close()


def test_watch_connections_sees_each_connection_and_socket(server: _Server) -> None:
    """``deadline`` cuts a request's connection through these two hooks."""
    client = _client(server, compat.RestClient)
    url, headers = compat.prepare(client, "/refused", [], {})
    taken: list[Any] = []
    made: list[socket.socket] = []
    for _ in range(2):  # hooked once, however often asked
        compat.watch_connections(compat.pool(client, url), taken.append, made.append)
    for _ in range(2):
        with pytest.raises(compat.Refused):
            compat.send(client, "GET", url, headers, None, (5.0, 5.0))
    assert len(taken) == 2 and taken[0] is taken[1]  # the connection kept alive, taken again
    assert len(made) == 1 and isinstance(made[0], socket.socket)  # its socket made once
    assert made[0] is taken[0].sock
    client.close()


def test_websocket_tls_is_the_clients_own(tmp_path: Path) -> None:
    """What the client's ``create_websocket`` gives websocket-client: the CA, the client
    certificate, and the kubeconfig's ``tls-server-name`` on the lines that read one."""
    configuration = Configuration(host="https://10.0.0.1:6443")
    assert compat.websocket_tls(configuration, "wss://10.0.0.1:6443/x") == {
        "cert_reqs": ssl.CERT_REQUIRED,
        "ca_certs": certifi.where(),
    }
    configuration.ssl_ca_cert, configuration.cert_file, configuration.key_file = "ca", "c", "k"
    has_name = hasattr(configuration, "tls_server_name")  # 28.1 on
    if has_name:
        configuration.tls_server_name = "api.internal"
    options = compat.websocket_tls(configuration, "wss://10.0.0.1:6443/x")
    assert options["ca_certs"] == "ca" and (options["certfile"], options["keyfile"]) == ("c", "k")
    assert options.get("server_hostname") == ("api.internal" if has_name else None)
    configuration.verify_ssl = False
    assert compat.websocket_tls(configuration, "wss://x/")["cert_reqs"] == ssl.CERT_NONE


def test_trust_anchor_is_the_ca_a_configuration_names(tmp_path: Path) -> None:
    configuration = Configuration(host="https://10.0.0.1:6443")
    assert compat.trust_anchor(configuration) == b""
    (tmp_path / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\n...")
    configuration.ssl_ca_cert = str(tmp_path / "ca.crt")
    assert compat.trust_anchor(configuration) == b"-----BEGIN CERTIFICATE-----\n..."
    if hasattr(configuration, "ca_cert_data"):  # 37.x: the certificates themselves
        configuration.ca_cert_data = "-----BEGIN CERTIFICATE-----\ndata"
        assert compat.trust_anchor(configuration) == b"-----BEGIN CERTIFICATE-----\ndata"


def test_rest_client_uses_no_retries_and_its_proxy_on_every_line() -> None:
    configuration = Configuration(host="https://10.0.0.1:6443")
    configuration.ssl_ca_cert = certifi.where()
    configuration.proxy = "http://user:p%40ss@proxy.internal:3128"
    configuration.no_proxy = "10.0.0.1"  # the lines' own rules would skip the proxy for it
    client = compat.RestClient(configuration)
    manager = client.rest_client.pool_manager
    assert isinstance(manager, urllib3.ProxyManager)
    assert manager.proxy is not None and manager.proxy.host == "proxy.internal"
    assert manager.proxy_headers == urllib3.make_headers(proxy_basic_auth="user:p@ss")
    assert manager.connection_pool_kw["ca_certs"] == certifi.where()  # the same TLS settings
    assert configuration.proxy == "http://user:p%40ss@proxy.internal:3128"  # kept as it was
    assert configuration.retries is False and configuration.no_proxy is None
    client.close()


# --- the exec websocket, against the fake API server ---------------------------------------------


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as kube:
        kube.fake.on_exec = echo  # the pod's cat
        kube.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        kube.store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": NS},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            }
        )
        kube.store.patch_status(
            "v1",
            "Pod",
            NS,
            "p",
            {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
                ],
            },
        )
        yield kube


def test_open_exec_offers_v5_so_stdin_can_end(fake: FakeKube, tmp_path: Path) -> None:
    """The client offers only v4 up to 35.x, where a command reading stdin never sees its end."""
    conn = connect(str(fake.kubeconfig(tmp_path / "kc", namespace=NS, token=TOKEN)))
    query = [("command", "cat"), ("container", "main"), ("stdin", "true"), ("stdout", "true")]
    url, headers = compat.prepare(
        conn.api_client, f"/api/v1/namespaces/{NS}/pods/p/exec", query, {}
    )
    sock = execstream.open_exec(conn.api_client.configuration, url, headers)
    try:
        assert sock.getheaders()["sec-websocket-protocol"] == execstream.V5_PROTOCOL
    finally:
        sock.shutdown()
    # ... and through the adapter the command reads its stdin to the end and exits.
    result = KubeCluster(conn.api_client).exec(NS, "p", "main", ["cat"], b"to the end\n")
    assert (result.stdout, result.exit_code) == (b"to the end\n", 0)
    conn.close()


# --- the fake API server reads query booleans as the real one does ------------------------------


@pytest.mark.parametrize(
    ("value", "watch"),
    [
        *[("true", True), ("True", True), ("1", True), ("yes", True), ("", True)],
        *[("false", False), ("False", False), ("FALSE", False), ("0", False)],
    ],
)
def test_fake_reads_watch_as_the_api_server_does(fake: FakeKube, value: str, watch: bool) -> None:
    """apimachinery's ``Convert_Slice_string_To_bool``: only "0" and "false" (any case) are
    false; older clients send ``watch=True``."""
    pool = urllib3.PoolManager(retries=False)
    url = f"{fake.url}/api/v1/namespaces/{NS}/configmaps?watch={value}&timeoutSeconds=30"
    response = pool.request(
        "GET",
        url,
        headers={"Authorization": "Bearer fake-token"},
        timeout=10.0,
        preload_content=False,  # a watch's headers are enough: no need to wait for its end
    )
    try:
        assert response.status == 200
        verb = "watch" if watch else "list"
        assert [r.verb for r in fake.requests.matching("GET", "/configmaps")] == [verb]
    finally:
        response.close()
        pool.clear()

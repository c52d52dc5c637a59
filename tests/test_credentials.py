"""A user's credentials, handled as kubectl handles them (issue 24, items 1, 4-6): a token file
trimmed, and read again as it rotates; a token no header can carry refused in one line that
never prints it; an exec plugin's output and time bounded; an unverified TLS server said once.

Real processes and the real client over real HTTP (``fakekube``), on both client lines: CI runs
this file in the launchers' environment too (kubernetes 27.2 on urllib3 1.26)."""

from __future__ import annotations

import base64
import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakekube import FakeKube

from kfcompile.lifecycle.ports import ApiError, Ref
from kfcompile_kube import KubeCluster, connect
from kfcompile_kube.config import ConfigError

TOKEN = "s3cr3t-t0ken-never-printed-0123456789"
EXEC_API = "client.authentication.k8s.io/v1"
SETTINGS = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "default"},
}


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    with FakeKube() as server:
        server.tokens.add(TOKEN)
        yield server


def kubeconfig(path: Path, server: str, user: dict[str, object]) -> Path:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def plugin(path: Path, token: str) -> dict[str, object]:
    """A kubeconfig user whose exec plugin (a real script) answers ``token``."""
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": token}}
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(credential)}\nEOF\n")
    path.chmod(0o755)
    return {"exec": {"apiVersion": EXEC_API, "command": str(path)}}


def oidc(token: str) -> dict[str, object]:
    """A user of the client's ``oidc`` auth-provider whose id-token (``token`` as its signature)
    has not expired: the client sends it as it is."""

    def b64(part: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")

    id_token = f"{b64({'alg': 'none'})}.{b64({'exp': 4102444800})}.{token}"
    config = {"client-id": "k", "id-token": id_token, "idp-issuer-url": "http://127.0.0.1:1"}
    return {"auth-provider": {"name": "oidc", "config": config}}


def kfcompile(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ``kfcompile`` command, in a process of its own, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kfcompile", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


# --- item 1: a token is trimmed as kubectl trims it, or refused without being printed ----------

# How a user's token reaches the kubeconfig: (kubeconfig user section, whether kubectl sends it).
SOURCES = {
    "tokenFile ending in a newline": (lambda tmp: _file(tmp, TOKEN + "\n"), True),
    "tokenFile with CRLF and spaces": (lambda tmp: _file(tmp, f"  {TOKEN}\r\n\r\n"), True),
    "tokenFile with two lines": (lambda tmp: _file(tmp, f"{TOKEN}\nX-Evil: 1\n"), False),
    "inline token with CRLF": (lambda tmp: {"token": f"{TOKEN}\r\nX-Evil: 1"}, False),
    "inline token with a NUL": (lambda tmp: {"token": f"{TOKEN}\0"}, False),
    "exec plugin token with a newline": (lambda tmp: plugin(tmp / "p.sh", TOKEN + "\n"), False),
    "auth-provider token with a newline": (lambda tmp: oidc(f"{TOKEN}\nX-Evil: 1"), False),
}


def _file(tmp_path: Path, content: str) -> dict[str, object]:
    (tmp_path / "token").write_text(content)
    return {"tokenFile": "token"}  # relative: to the kubeconfig's directory


@pytest.mark.parametrize("source", SOURCES)
def test_no_token_reaches_the_terminal(kube: FakeKube, tmp_path: Path, source: str) -> None:
    """``kfcompile list`` in a process of its own: a token kubectl would send works, any other
    is one line naming where it came from; the token is never on stdout or stderr (it was the
    last line of a traceback, http.client's ``Invalid header value b'Bearer <token>...'``)."""
    user, sendable = SOURCES[source]
    kc = kubeconfig(tmp_path / "kc", kube.url, user(tmp_path))
    done = kfcompile("list", "--kubeconfig", str(kc))
    assert TOKEN not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    if sendable:
        assert done.returncode == 0, done.stderr
        assert kube.requests and all(r.status != 401 for r in kube.requests)  # authenticated
        return
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "(not printed)" in line or "is not printed" in line, line
    assert not kube.requests  # nothing sent with it


def test_a_token_file_is_trimmed_as_kubectl_trims_it(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(f"\t{TOKEN} \n")
    kc = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", {"tokenFile": "token"})
    configuration = connect(str(kc), environ={}).api_client.configuration
    assert configuration.auth_settings()["BearerToken"]["value"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("token", "what"),
    [
        (f"{TOKEN}\n", "a line break (character 38 of 38"),
        (f"{TOKEN}\x1b[2J", "a control character (character 38 of 41"),
        (f"{TOKEN}\u202e", "a character that is not ASCII (character 38 of 38"),
        ("", "empty"),
    ],
)
def test_a_token_no_header_can_carry_is_one_line_without_it(
    tmp_path: Path, token: str, what: str
) -> None:
    kc = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", {"token": token})
    with pytest.raises(ConfigError) as err:
        connect(str(kc), environ={})
    said = str(err.value)
    assert said.startswith(f"kubeconfig {kc}, context 'x': user token: ")
    assert what in said and TOKEN not in said and "\n" not in said
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_the_service_account_token_is_trimmed(kube: FakeKube, tmp_path: Path) -> None:
    """In a pod: the token file as kubelet writes it, or as a user's script does."""
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(TOKEN + "\n")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}
    configuration = connect(service_account_dir=str(sa), environ=env).api_client.configuration
    assert configuration.auth_settings()["BearerToken"]["value"] == f"Bearer {TOKEN}"
    (sa / "token").write_text(f"{TOKEN}\nX-Evil: 1")
    with pytest.raises(ConfigError) as err:
        connect(service_account_dir=str(sa), environ=env)
    assert "holds a line break" in str(err.value) and TOKEN not in str(err.value)


def test_a_token_refused_by_the_adapter_is_never_sent(kube: FakeKube, tmp_path: Path) -> None:
    """A token the configuration got some other way (a launcher's own client, an auth provider)
    is checked where every request's headers are made."""
    kc = kubeconfig(tmp_path / "kc", kube.url, oidc(f"{TOKEN}\r\nX-Evil: 1"))
    cluster = KubeCluster(connect(str(kc), environ={}).api_client)
    with pytest.raises(Exception) as err:
        cluster.list("v1", "ConfigMap", "default")
    assert "not printed" in str(err.value) and TOKEN not in str(err.value)
    assert not kube.requests


# --- item 4: a rotated token is read again, as kubectl reads it -----------------------------------


class Clock:
    """The wall clock tokens are timed by, moved by the test."""

    def __init__(self) -> None:
        self.at = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def sent_token(cluster: KubeCluster) -> str:
    """The Authorization header the next request carries (the refresh hook runs first)."""
    value: str = cluster._transport.client.configuration.auth_settings()["BearerToken"]["value"]
    return value


def refusals(kube: FakeKube) -> int:
    return sum(r.status == 401 for r in kube.requests)


# Port calls a long command makes, streams among them (``logs``, ``logs --follow``).
CALLS: dict[str, Callable[[KubeCluster], object]] = {
    "list": lambda k: k.list("v1", "ConfigMap", "default"),
    "get": lambda k: k.get(Ref("v1", "ConfigMap", "default", "settings")),
    "watch": lambda k: next(iter(k.watch("v1", "ConfigMap", "default", resource_version="1"))),
    "log": lambda k: "".join(k.pod_log("default", "trainer")),
    "follow": lambda k: next(iter(k.pod_log("default", "trainer", follow=True))),
}
# A pod on a node, its log begun: what the log calls read.
TRAINER_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "default"},
    "spec": {"nodeName": "gpu-node-0", "containers": [{"name": "node", "image": "pytorch"}]},
    "status": {"phase": "Running", "containerStatuses": [
        {"name": "node", "restartCount": 0, "state": {"running": {}}}]},
}  # fmt: skip


@pytest.mark.parametrize("call", CALLS)
def test_a_token_file_rotated_under_a_command_is_read_again_after_a_401(
    kube: FakeKube, tmp_path: Path, call: str
) -> None:
    """A projected token rotated (the old one revoked) between two requests: the 401 makes the
    file read again and the request is sent once more, with the new token."""
    kube.store.create(SETTINGS)
    kube.store.create(TRAINER_POD)
    kube.fake.log("default", "trainer", "rank 0: starting\n")
    (tmp_path / "token").write_text("token-1\n")
    kube.tokens = {"token-1"}
    kc = kubeconfig(tmp_path / "kc", kube.url, {"tokenFile": "token"})
    cluster = KubeCluster(connect(str(kc), environ={}).api_client)
    assert CALLS[call](cluster)
    (tmp_path / "token").write_text("token-2\n")
    kube.tokens = {"token-2"}
    kube.requests.clear()
    CALLS[call](cluster)
    assert [r.status == 401 for r in kube.requests] == [True, False]  # a stream's: 0 while open
    assert sent_token(cluster) == "Bearer token-2"


def test_a_token_file_is_read_again_once_a_minute_old(kube: FakeKube, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("token-1\n")
    kube.tokens = {"token-1"}
    clock = Clock()
    kc = kubeconfig(tmp_path / "kc", kube.url, {"tokenFile": "token"})
    cluster = KubeCluster(connect(str(kc), environ={}, now=clock).api_client)
    (tmp_path / "token").write_text("token-2\n")
    clock.advance(59)
    assert sent_token(cluster) == "Bearer token-1"  # read at most once a minute
    clock.advance(1)
    assert sent_token(cluster) == "Bearer token-2"
    kube.tokens = {"token-2"}
    cluster.list("v1", "ConfigMap", "default")
    assert refusals(kube) == 0  # no 401 needed to notice
    (tmp_path / "token").unlink()  # kubelet swapping it, say: the token in hand is kept
    clock.advance(120)
    assert sent_token(cluster) == "Bearer token-2"
    (tmp_path / "token").write_text("token-3")
    assert sent_token(cluster) == "Bearer token-3"  # tried again at the next request


def test_the_service_account_token_is_read_again_once_a_minute_old(tmp_path: Path) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("token-1")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    clock = Clock()
    conn = connect(service_account_dir=str(sa), environ=env, now=clock)
    cluster = KubeCluster(conn.api_client)
    (sa / "token").write_text("token-2\n")
    assert sent_token(cluster) == "Bearer token-1"
    clock.advance(60)
    assert sent_token(cluster) == "Bearer token-2"


def test_an_exec_plugin_is_run_again_after_a_401(kube: FakeKube, tmp_path: Path) -> None:
    """client-go's exec authenticator runs the plugin again when its token is refused."""
    runs = tmp_path / "runs"
    script = tmp_path / "count.sh"
    credential = {"apiVersion": EXEC_API, "kind": "ExecCredential", "status": {"token": "t-N"}}
    script.write_text(
        f"#!/bin/sh\nn=$(( $(cat {runs} 2>/dev/null || echo 0) + 1 )); echo $n > {runs}\n"
        f"echo '{json.dumps(credential)}' | sed \"s/t-N/token-$n/\"\n"
    )
    script.chmod(0o755)
    kube.tokens = {"token-1"}
    user = {"exec": {"apiVersion": EXEC_API, "command": str(script)}}
    kc = kubeconfig(tmp_path / "kc", kube.url, user)
    cluster = KubeCluster(connect(str(kc), environ={}).api_client)
    cluster.list("v1", "ConfigMap", "default")
    kube.tokens = {"token-2"}
    cluster.list("v1", "ConfigMap", "default")
    assert refusals(kube) == 1 and runs.read_text().strip() == "2"


def test_a_token_that_cannot_change_is_not_sent_again_after_a_401(
    kube: FakeKube, tmp_path: Path
) -> None:
    kube.tokens = set()  # TOKEN revoked
    kc = kubeconfig(tmp_path / "kc", kube.url, {"token": TOKEN})
    cluster = KubeCluster(connect(str(kc), environ={}).api_client)
    with pytest.raises(ApiError) as err:
        cluster.list("v1", "ConfigMap", "default")
    assert err.value.status == 401 and len(kube.requests) == 1


# --- item 5: what an exec plugin prints is read within bounds ------------------------------------

FLOOD = 64 * 2**20  # bytes a flooding plugin prints


def _peak_rss_growth(kc: Path) -> tuple[str, int]:
    """``connect``'s error with the kubeconfig ``kc``, and how much the peak RSS of the process
    that ran it grew meanwhile (bytes; Linux counts ru_maxrss in KiB)."""
    script = (
        "import resource, sys\n"
        "from kfcompile_kube import ConfigError, connect\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    connect(sys.argv[1], environ={}, exec_timeout=60)\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(kc)], capture_output=True, text=True, timeout=120
    )
    said, grown = done.stdout.splitlines()
    return said, int(grown) * 1024


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux only")
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            f"head -c {FLOOD} /dev/zero\n",
            "printed over 4 MiB (an ExecCredential is a few KiB); stopped",
        ),
        (
            f"head -c {FLOOD} /dev/zero | tr '\\0' x >&2\n"
            "echo >&2; echo 'access denied' >&2; exit 1\n",
            "exited with status 1: access denied",
        ),
    ],
    ids=["stdout", "stderr"],
)
def test_a_flooding_plugin_is_read_in_bounded_memory(
    tmp_path: Path, body: str, expected: str
) -> None:
    """A plugin printing 64 MiB: on stdout it is stopped past 4 MiB, of its stderr only the end
    is kept (its last line is what the error quotes). Before, all of it was read (and copied):
    an 800 MB plugin took the process to 2.3 GB."""
    script = tmp_path / "flood.sh"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    user = {"exec": {"apiVersion": EXEC_API, "command": str(script)}}
    kc = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", user)
    said, grown = _peak_rss_growth(kc)
    assert said.endswith(f"exec plugin {script}: {expected}"), said
    assert grown < FLOOD // 4, grown


# --- item 6: a server whose certificate is not verified is said once ------------------------------

TLS = Path(__file__).parent / "fakekube" / "tls"


class _NotFound(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"kind": "Status", "code": 404, "reason": "NotFound"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def unverified(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig with ``insecure-skip-tls-verify`` for an https server on 127.0.0.1 (a
    certificate no one signed) that answers every request 404."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(TLS / "untrusted-server.crt", TLS / "untrusted-server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = {
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": f"https://127.0.0.1:{server.server_address[1]}",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kc").write_text(json.dumps(config))
    yield tmp_path / "kc"
    server.shutdown()
    server.server_close()


def test_an_unverified_server_is_said_once_in_kfcompiles_words(unverified: Path) -> None:
    done = kfcompile("list", "-A", "--kubeconfig", str(unverified))
    assert done.returncode == 0, done.stderr
    assert "InsecureRequestWarning" not in done.stderr  # urllib3's, once per request
    [line] = done.stderr.splitlines()
    assert line.startswith("kfcompile: warning: the TLS certificate of https://127.0.0.1:")
    assert f"is not verified (insecure-skip-tls-verify in kubeconfig {unverified}" in line


def test_urllib3_warns_of_no_request_to_an_unverified_server(
    unverified: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")  # as urllib3 sets it for its SecurityWarnings
        for _ in range(2):
            cluster = KubeCluster(connect(str(unverified), environ={}).api_client)
            for _ in range(3):
                with pytest.raises(ApiError):
                    cluster.get(Ref("v1", "ConfigMap", "default", "settings"))
    assert [str(w.message) for w in warned] == []
    assert len([r for r in caplog.records if "is not verified" in r.getMessage()]) == 1


def test_a_token_beside_an_unreadable_token_file_is_sent_until_the_file_reads(
    tmp_path: Path,
) -> None:
    """kubectl's round tripper: the file's token when it reads, else the kubeconfig's."""
    kc = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1", {"token": TOKEN, "tokenFile": "token"})
    cluster = KubeCluster(connect(str(kc), environ={}, now=Clock()).api_client)
    assert sent_token(cluster) == f"Bearer {TOKEN}"
    (tmp_path / "token").write_text("from-the-file\n")
    assert sent_token(cluster) == "Bearer from-the-file"

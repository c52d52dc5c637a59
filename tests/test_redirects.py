"""Credentials and secrets never reach another host, nor the terminal (issue 15, items 1-3).

No request of the adapter follows a redirect, the exec websocket included: a 3xx answer is an
error naming the call and the host it pointed to, and nothing (no Authorization header, no
Secret body) reaches that host (a ``fakekube.unreachable.Silent`` there counts any connection). A
credential quoted back in a server's message is printed as ``<redacted>``.

Real sockets, the real client, on both client lines: CI runs this file in the launchers'
environment too (kubernetes 27.2 on urllib3 1.26, which follows redirects unless told not to).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube import FakeKube
from fakekube.cluster import CLAIM, NAMESPACE, LocalCluster
from fakekube.unreachable import TLS, Silent, UntrustedTLS, kubeconfig
from kubernetes import config
from test_adapter_kube import NS, TOKEN, cm_ref
from test_cli_cluster import SECRET_VALUE, write_spec

from kfcompile.cli import main
from kfcompile.lifecycle.ports import ApiError, Forbidden, Transient
from kfcompile_kube import KubeCluster, connect
from kfcompile_kube.errors import credentials, redacted

REDIRECTS = (301, 302, 303, 307, 308)
SECRET: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "x-env", "namespace": NS},
    "stringData": {"HF_TOKEN": SECRET_VALUE},
}

# Each call of the port, with the method and path of its (first) request.
CALLS: dict[str, tuple[str, str, Callable[[KubeCluster], object]]] = {
    "get": ("GET", "/configmaps/settings", lambda k: k.get(cm_ref("settings"))),
    "list": ("GET", "/configmaps", lambda k: k.list("v1", "ConfigMap", NS)),
    "watch": (
        "GET",
        "/configmaps",
        lambda k: list(k.watch("v1", "ConfigMap", NS, resource_version="1")),
    ),
    "create": ("POST", "/secrets", lambda k: k.create(SECRET)),
    "patch": ("PATCH", "/configmaps/settings", lambda k: k.patch(cm_ref("settings"), {})),
    "delete": ("DELETE", "/configmaps/settings", lambda k: k.delete(cm_ref("settings"))),
    "pod_log": ("GET", "/pods/p/log", lambda k: list(k.pod_log(NS, "p"))),
    "exec": ("GET", "/pods/p/exec", lambda k: k.exec(NS, "p", "main", ["true"])),
}


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as kube:
        kube.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield kube


@pytest.fixture
def elsewhere() -> Iterator[Silent]:
    """Where the redirects point: no client may connect."""
    with Silent() as server:
        yield server


def run(local: LocalCluster, capsys: pytest.CaptureFixture[str], *args: str
        ) -> tuple[int, str, str]:  # fmt: skip
    """The CLI over HTTP to ``local``."""
    code = main([*args, "--kubeconfig", str(local.kubeconfig)])
    out, err = capsys.readouterr()
    return code, out, err


def adapter(fake: FakeKube, tmp_path: Path, client: str) -> KubeCluster:
    """The adapter over a client from ``connect`` or, as a caller of ``KubeCluster`` may
    make one, from the client's own loader (urllib3's default retries: redirects followed)."""
    kubeconfig = str(fake.kubeconfig(tmp_path / "kubeconfig", namespace=NS, token=TOKEN))
    if client == "connect":
        return KubeCluster(connect(kubeconfig).api_client, request_timeout=5.0)
    return KubeCluster(config.new_client_from_config(kubeconfig), request_timeout=5.0)


def target(elsewhere: Silent, call: str) -> str:
    """Where the fake redirects ``call``: a websocket goes to ``ws://`` (plaintext)."""
    return elsewhere.url.replace("http", "ws", 1) if call == "exec" else elsewhere.url


def redirected(location: str) -> str:
    return f"the API server redirected to {location}; kfcompile follows no redirect"


@pytest.mark.parametrize("client", ["connect", "loader"])
@pytest.mark.parametrize("call", list(CALLS))
def test_no_call_follows_a_redirect(
    fake: FakeKube, elsewhere: Silent, tmp_path: Path, call: str, client: str
) -> None:
    method, path, do = CALLS[call]
    kube = adapter(fake, tmp_path, client)
    fake.faults.add(method, path, status=307, location=target(elsewhere, call))
    with pytest.raises(ApiError) as err:
        do(kube)
    assert str(err.value) == f"307 TemporaryRedirect: {redirected(target(elsewhere, call))}"
    assert elsewhere.accepted == 0
    assert fake.store.get("v1", "Secret", NS, "x-env") is None


@pytest.mark.parametrize("code", REDIRECTS)
@pytest.mark.parametrize("call", ["get", "create", "exec"])
def test_every_redirect_status_is_an_error(
    fake: FakeKube, elsewhere: Silent, tmp_path: Path, call: str, code: int
) -> None:
    method, path, do = CALLS[call]
    kube = adapter(fake, tmp_path, "loader")
    fake.faults.add(method, path, status=code, location=target(elsewhere, call))
    with pytest.raises(ApiError) as err:
        do(kube)
    assert err.value.status == code
    assert str(err.value).endswith(redirected(target(elsewhere, call)))
    assert elsewhere.accepted == 0


def test_an_exec_answered_200_is_no_success(fake: FakeKube, tmp_path: Path) -> None:
    fake.faults.add("GET", "/pods/p/exec", status=200)
    with pytest.raises(ApiError) as err:
        CALLS["exec"][2](adapter(fake, tmp_path, "connect"))
    assert str(err.value) == (
        "200 OK: the API server answered 200 instead of opening the exec stream (101)"
    )


# --- the CLI -------------------------------------------------------------------------------------


@pytest.fixture
def local() -> Iterator[LocalCluster]:
    with LocalCluster(schema_check.require_shared()) as cluster:
        yield cluster


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spec whose Secret holds ``$HF_TOKEN``."""
    monkeypatch.setenv("HF_TOKEN", SECRET_VALUE)
    return write_spec(tmp_path, secret_env=["HF_TOKEN"])


@pytest.mark.parametrize(
    ("path", "status", "call"),
    [
        ("/secrets", "307 TemporaryRedirect", f"create Secret {NAMESPACE}/demo-env"),
        ("/trainjobs", "308 PermanentRedirect", f"create TrainJob {NAMESPACE}/demo"),
    ],
)
def test_a_submit_redirected_sends_nothing_and_rolls_back(
    local: LocalCluster,
    elsewhere: Silent,
    capsys: pytest.CaptureFixture[str],
    spec: Path,
    path: str,
    status: str,
    call: str,
) -> None:
    local.kube.faults.add("POST", path, status=int(status[:3]), location=elsewhere.url)
    code, out, err = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.3")
    assert (code, out) == (1, "")
    assert err == f"kfcompile: {call}: {status}: {redirected(elsewhere.url)}\n"
    assert elsewhere.accepted == 0
    assert local.store.get("v1", "Secret", NAMESPACE, "demo-env") is None  # (rolled back)


def test_a_roll_back_redirected_lists_what_stays(
    local: LocalCluster, elsewhere: Silent, capsys: pytest.CaptureFixture[str], spec: Path
) -> None:
    local.kube.faults.add("POST", "/trainjobs", status=307, location=elsewhere.url)
    local.kube.faults.add("DELETE", "/secrets/demo-env", status=307, location=elsewhere.url)
    code, out, err = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.3")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[0].endswith(f"307 TemporaryRedirect: {redirected(elsewhere.url)}")
    assert lines[1] == (
        "kfcompile: the submit failed and could not remove all it had created; 1 object left "
        "on the cluster:"
    )
    assert lines[2].endswith(f"remove it with: kubectl delete secret demo-env -n {NAMESPACE}")
    assert len(lines) == 3 and "Traceback" not in err and SECRET_VALUE not in err
    assert elsewhere.accepted == 0


def test_a_sync_redirected_at_its_exec_sends_nothing(
    local: LocalCluster, elsewhere: Silent, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text("print(2)\n")
    location = target(elsewhere, "exec")
    local.kube.faults.add("GET", "/exec", status=307, location=location)
    code, out, err = run(local, capsys, "sync", "up", str(tmp_path), "--pvc", CLAIM)
    assert (code, out) == (1, "")
    assert err.startswith(f"kfcompile: exec in Pod {NAMESPACE}/kfcompile-sync-") and (
        err.endswith(f": 307 TemporaryRedirect: {redirected(location)}\n")
    )
    assert err.count("\n") == 1
    assert elsewhere.accepted == 0


# --- credentials quoted back ---------------------------------------------------------------------


@pytest.mark.parametrize("call", ["get", "create", "watch", "exec"])
def test_a_token_quoted_back_is_redacted(fake: FakeKube, tmp_path: Path, call: str) -> None:
    method, path, do = CALLS[call]
    kube = adapter(fake, tmp_path, "connect")
    said = f"denied; the request had Authorization: Bearer {TOKEN} (token {TOKEN})"
    fake.faults.add(method, path, status=403, message=said)
    with pytest.raises(ApiError) as err:
        do(kube)
    assert str(err.value) == (
        "403 Forbidden: denied; the request had Authorization: <redacted> (token <redacted>)"
    )


def test_the_cli_never_prints_the_token_a_server_quotes(
    local: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "fake-token"  # the one the LocalCluster's kubeconfig holds
    local.kube.faults.add("GET", "/trainjobs/demo", status=400, message=f"bad header: {token}")
    code, out, err = run(local, capsys, "status", "demo")
    assert code == 1 and token not in out + err
    assert err.endswith("bad header: <redacted>\n") and "Traceback" not in err


def test_a_password_or_client_key_quoted_back_is_redacted(tmp_path: Path) -> None:
    """What a message could quote of the other credentials a kubeconfig holds."""
    key = (TLS / "untrusted-server.key").read_text()
    user = {
        "username": "alice",
        "password": "pa55-w0rd",
        "client-certificate-data": base64.b64encode((TLS / "untrusted-server.crt").read_bytes()),
        "client-key-data": base64.b64encode(key.encode()),
    }
    path = kubeconfig(tmp_path / "kc", "https://127.0.0.1:1")  # (http: no client certificate)
    doc = json.loads(path.read_text())
    doc["users"][0]["user"] = {k: v if isinstance(v, str) else v.decode() for k, v in user.items()}
    path.write_text(json.dumps(doc))
    configuration = connect(str(path)).api_client.configuration
    quoted = f"user alice:pa55-w0rd (password pa55-w0rd) rejected; key line {key.splitlines()[1]}"
    error = redacted(Forbidden(403, "Forbidden", quoted), credentials(configuration))
    assert str(error) == "403 Forbidden: user <redacted> (password <redacted>) rejected; " + (
        "key line <redacted>"
    )


def test_the_exec_websocket_still_verifies_the_server(tmp_path: Path) -> None:
    """The websocket is built by the adapter now, with the client's TLS options."""
    with UntrustedTLS() as server:
        kube = KubeCluster(connect(str(kubeconfig(tmp_path / "kc", server.url))).api_client)
        with pytest.raises(Transient, match=f"TLS certificate verify failed for {server.url}"):
            kube.exec(NS, "p", "main", ["true"])
    assert server.accepted == 1

"""What a cold cluster command imports (``kfcompile.cli.deferred``): in the process the
``kfcompile`` command starts, the ``kubernetes`` client runs only the parts the command uses;
imported as a library, kfcompile leaves the client as it is; and a package deferred is, once
asked for the rest, exactly the package its own ``__init__`` makes, on every client line."""

from __future__ import annotations

import http.server
import importlib
import importlib.util
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, LocalCluster

from kfcompile import lifecycle, structure
from kfcompile.cli import deferred, main

ROOT = Path(__file__).resolve().parents[1]
# Parts of the client no cluster command uses (up to 36.x `import kubernetes` runs them all, and
# every API class and model with `kubernetes.client`).
UNUSED = (
    "kubernetes.dynamic",
    "kubernetes.watch",
    "kubernetes.leaderelection",
    "kubernetes.client.api.core_v1_api",
    "kubernetes.client.models.v1_pod",
    "kubernetes.client.api_client",  # the REST layer sends (compat.RestClient)
    "pydantic",
    "websocket",
    "kubernetes.stream.ws_client",
)
# The lifecycle's modules neither command runs: submit, wait, the logs, the sync, and the watch
# (``list -w``'s).
UNUSED_LIFECYCLE = (
    "kfcompile.lifecycle.job_events",
    "kfcompile.lifecycle.waiting",
    "kfcompile.lifecycle.submitting",
    "kfcompile.lifecycle.pod_logs",
    "kfcompile.lifecycle.sync",
)
# The spec layer and the targets' registry: what a cluster command about a job never reads.
UNUSED_SPEC = (
    "kfcompile.spec.model",
    "kfcompile.spec.load",
    "kfcompile.targets",
    "ruamel.yaml",
    "cattrs",
)
# For an OIDC token refresh (requests_oauthlib) and exec (stream.ws_client); and where the
# client's REST layer imports it itself (27.x's rest.py, for ``should_bypass_proxies``), for that.
_REST = importlib.util.find_spec("kubernetes.client.rest")
if _REST is None or _REST.origin is None or "from requests" not in Path(_REST.origin).read_text():
    UNUSED = (*UNUSED, "requests")
WHOLE = UNUSED[:3]  # what `import kubernetes` runs on every line (37.x loads APIs, models lazily)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(schema_check.require_shared(), scenario="hang", auto=False) as local:
        spec = structure({"name": "demo", "image": "python:3.11-slim", "command": ["true"]})
        lifecycle.submit(local.session(), spec, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        local.advance(1.0)  # running, its first line logged; it never ends
        yield local


def _python(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


# The kfcompile command (its entry point, ``kfcompile.cli.run``), then every module it loaded, on
# stderr's last line: ``-X importtime`` misses those ``importlib.import_module`` loads.
_COMMAND = """
import json, sys
from kfcompile.cli import run
sys.argv[0] = "kfcompile"
try:
    code = run()
finally:
    print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["status", "demo"], "TrainJob demo in namespace default: RUNNING"),
        (["list"], "demo  TrainJob  trainjob/v2.3  RUNNING"),
    ],
)
def test_a_cluster_command_runs_only_the_parts_of_the_client_it_uses(
    cluster: LocalCluster, command: list[str], said: str
) -> None:
    done = _python("-c", _COMMAND, *command, "--kubeconfig", str(cluster.kubeconfig))
    assert done.returncode == 0, done.stderr
    assert said in done.stdout
    imported = set(json.loads(done.stderr.splitlines()[-1]))
    assert "kubernetes.client.rest" in imported  # the official client sent it
    assert not imported & set(UNUSED)
    assert not any(name.startswith("kubernetes.client.models.") for name in imported)
    assert not imported & set(UNUSED_LIFECYCLE)
    assert not imported & set(UNUSED_SPEC)


def test_imported_as_a_library_the_client_is_whole(cluster: LocalCluster) -> None:
    # The CLI's own main(), called in a process kfcompile did not start, defers nothing either.
    assert main(["status", "demo", "--kubeconfig", str(cluster.kubeconfig)]) == 0
    assert not any(isinstance(finder, deferred._Finder) for finder in sys.meta_path)
    code = (
        "import sys, kfcompile, kfcompile.cli, kfcompile_kube, kubernetes; "
        f"missing = [m for m in {WHOLE!r} if m not in sys.modules]; "
        "assert not missing and kubernetes.client.CoreV1Api, missing"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr


# Each package deferred: every name its __init__ re-exports, read before that __init__ runs,
# then all of it, and each stand-in used; printed as the names it then has and whether each
# early one is the same object.
_SURVEY = """
import importlib, json, sys
from kfcompile.cli import deferred
if sys.argv[1] == "deferred":
    deferred.install()
import kfcompile_kube
packages, early = {}, {}
for name in deferred.PACKAGES:
    try:
        packages[name] = package = importlib.import_module(name)
    except ImportError:  # google.auth: where google-auth is installed only
        continue
    early[name] = {n: getattr(package, n) for n in deferred._exports(package.__spec__)}
for package in packages.values():
    dir(package)  # the rest
for (name, attribute), _ in deferred.STAND_INS.items():  # each stand-in used
    if name in packages:
        deferred.resolved(getattr(packages[name], attribute))
early = {name: {n: deferred.resolved(v) for n, v in e.items()} for name, e in early.items()}
found = {
    name: {
        "names": dir(package),
        "same": all(getattr(package, n) is v for n, v in early[name].items()),
        "early": len(early[name]),
    }
    for name, package in packages.items()
}
print(json.dumps(found))
"""


def test_a_deferred_package_asked_for_the_rest_is_the_whole_package() -> None:
    surveys = {}
    for mode in ("deferred", "plain"):
        done = _python("-c", _SURVEY, mode)
        assert done.returncode == 0, done.stderr
        surveys[mode] = json.loads(done.stdout)
    lazy, plain = surveys["deferred"], surveys["plain"]
    assert sorted(lazy) == sorted(plain) and "kubernetes.client" in lazy
    for name, found in lazy.items():
        assert found["same"], name
        assert found["names"] == plain[name]["names"], name
    # Up to 36.x every API class and model is served by name (37.x does so itself).
    assert sum(found["early"] for found in lazy.values()) > 0


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A package ``probe`` in ``tmp_path``, deferred in this process for the test, and ``gate``
    (not deferred), which its ``__init__`` (written by the test) and the test both see."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "part.py").write_text("X = 'part'\n")
    (tmp_path / "gate.py").write_text(
        "import threading\nentered, release = threading.Event(), threading.Event()\nruns = 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    deferred.install(["probe"])
    yield importlib.import_module("gate")
    for name in [m for m in sys.modules if m in ("probe", "gate") or m.startswith("probe.")]:
        del sys.modules[name]


def _body(gate: Any, text: str) -> None:
    Path(gate.__file__).with_name("probe").joinpath("__init__.py").write_text(text)


def test_a_thread_asking_while_the_body_runs_waits_for_it(probe: Any) -> None:
    _body(probe, "import gate\ngate.entered.set()\ngate.release.wait(10)\nVALUE = 1\n")
    package = importlib.import_module("probe")
    got: dict[str, object] = {}

    def ask(who: str) -> None:
        try:
            got[who] = package.VALUE
        except AttributeError as exc:  # what a module half run would give
            got[who] = exc

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert probe.entered.wait(10)  # the first thread is in the body
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    second.join(0.2)
    assert "second" not in got  # waiting, not told the module has no VALUE
    probe.release.set()
    first.join(10)
    second.join(10)
    assert got == {"first": 1, "second": 1}


def test_a_body_that_fails_fails_where_it_is_used_and_again_next_time(probe: Any) -> None:
    _body(probe, "import gate\ngate.runs += 1\nraise RuntimeError('broken')\n")
    package = importlib.import_module("probe")
    assert package.part.X == "part"  # a submodule, without the body
    for runs in (1, 2):
        with pytest.raises(RuntimeError, match="broken"):
            package.anything  # noqa: B018
        assert probe.runs == runs


_STAND_IN = """
import sys
from kfcompile.cli import deferred
deferred.install()
from kubernetes.client import ApiClient, Configuration
assert "kubernetes.client.api_client" not in sys.modules, "loaded by the import"
client = ApiClient(Configuration())
import kubernetes.client
real = sys.modules["kubernetes.client.api_client"].ApiClient
assert type(client) is real and isinstance(client, ApiClient), type(client)
assert kubernetes.client.ApiClient is real, "the package still has the stand-in"
class Mine(ApiClient):
    pass
assert issubclass(Mine, real) and issubclass(Mine, ApiClient)
from requests_oauthlib import OAuth2Session  # a package whose body runs at the first use
assert "requests_oauthlib.oauth2_session" not in sys.modules, "loaded by the import"
session = OAuth2Session(client_id="kubectl")
assert type(session).__module__ == "requests_oauthlib.oauth2_session", type(session)
assert isinstance(session, OAuth2Session) and session.client_id == "kubectl"
"""


def test_a_stand_in_is_the_real_class_from_its_first_use() -> None:
    done = _python("-c", _STAND_IN)
    assert done.returncode == 0, done.stderr


class _Issuer(http.server.BaseHTTPRequestHandler):
    """An OIDC issuer whose discovery document names its token endpoint (which answers ``{}``):
    what the refresh reaches, recorded by path."""

    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        self.seen.append(self.path)
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        found = {"token_endpoint": f"{host}/token"} if "openid-configuration" in self.path else {}
        body = json.dumps(found).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer


def test_an_oidc_refresh_in_the_kfcompile_process_uses_the_real_classes(tmp_path: Path) -> None:
    """The client's OIDC refresh calls ``ApiClient`` and ``OAuth2Session``, both stand-ins in
    the ``kfcompile`` process until then: the refresh reads the issuer's discovery document,
    and oauthlib refuses to send the client secret to a plain-http token endpoint; one line."""
    from test_adapter_config import oidc_kubeconfig

    _Issuer.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Issuer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        issuer = f"http://127.0.0.1:{server.server_address[1]}"
        config = oidc_kubeconfig(tmp_path / "kc", issuer)
        done = _python("-c", _COMMAND, "status", "demo", "--kubeconfig", str(config))
    finally:
        server.shutdown()
        server.server_close()
    said = done.stderr.splitlines()
    assert done.returncode == 1 and len(said) == 2, done.stderr  # the line, then the modules
    assert f"oidc auth-provider cannot refresh its token at {issuer}" in said[0], said[0]
    assert "InsecureTransportError" in said[0]  # raised by the real OAuth2Session
    assert _Issuer.seen == ["/.well-known/openid-configuration"]
    assert "requests_oauthlib.oauth2_session" in json.loads(said[1])

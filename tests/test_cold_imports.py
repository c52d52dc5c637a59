"""What a cold command imports: a render only its target's module, and nothing of the cluster's;
its arguments parsed without the spec layer; a cluster command only the parts of the
``kubernetes`` client it uses (``kfcompile_kube.client_modules``), and a package whose
``__init__`` the adapter left is, once asked for the rest, exactly the package its own
``__init__`` makes, on every client line, for any code in the process. And the ``kfcompile``
process's start-up, with the collector off, frozen after."""

from __future__ import annotations

import argparse
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
from kfcompile.cli import parser
from kfcompile_kube import client_modules

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


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(schema_check.require_shared(), scenario="hang", auto=False) as local:
        spec = structure({"name": "demo", "image": "python:3.11-slim", "command": ["true"]})
        lifecycle.submit(local.session(), spec, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        local.clock.advance(1.0)  # running, its first line logged; it never ends
        yield local


def _python(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


# The kfcompile command (its entry point, ``kfcompile.cli.run``), then every module it loaded and
# the module of each import hook (``sys.meta_path``), on stderr's last line: ``-X importtime``
# misses ``importlib.import_module``'s loads.
_COMMAND = """
import json, sys
from kfcompile.cli import run
sys.argv[0] = "kfcompile"
try:
    code = run()
finally:
    hooks = [getattr(f, "__module__", type(f).__module__) for f in sys.meta_path]
    print(json.dumps({"modules": sorted(sys.modules), "hooks": hooks}), file=sys.stderr)
sys.exit(code)
"""


def _loaded(stderr: str) -> tuple[set[str], list[str]]:
    """The modules and import hooks ``_COMMAND`` says."""
    said = json.loads(stderr.splitlines()[-1])
    return set(said["modules"]), said["hooks"]


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
    imported, hooks = _loaded(done.stderr)
    assert "kubernetes.client.rest" in imported  # the official client sent it
    # No import hook of kfcompile's: the adapter imports the client's modules it uses.
    assert not [hook for hook in hooks if hook.startswith("kfcompile")], hooks
    assert not imported & set(UNUSED)
    assert not any(name.startswith("kubernetes.client.models.") for name in imported)
    assert not imported & set(UNUSED_LIFECYCLE)
    assert not imported & set(UNUSED_SPEC)


# What no render imports: the cluster's parts, the importer, the lifecycle, jsonschema (for
# --crd), and shutil, which argparse imports for the terminal's width, and bz2 and lzma with it.
NOT_RENDER = (
    "kubernetes",
    "kfcompile_kube",
    "urllib3",
    "kfcompile.importer",
    "kfcompile.lifecycle",
    "jsonschema",
    "shutil",
    "bz2",
    "lzma",
)
TARGET_MODULES = {
    "pytorchjob/v1": {"kfcompile.targets.pytorchjob_v1"},
    "trainjob/v2.3": {f"kfcompile.targets.trainjob_v2_{n}" for n in range(4)},  # built on v2.0
}


@pytest.mark.parametrize("target", sorted(TARGET_MODULES))
def test_a_render_imports_its_target_alone(target: str) -> None:
    done = _python("-c", _COMMAND, "render", "examples/llama-4x8-efa.yaml", "-t", target)
    assert done.returncode == 0, done.stderr
    imported, _ = _loaded(done.stderr)
    assert TARGET_MODULES[target] <= imported  # the reader sees what is there
    others = set().union(*TARGET_MODULES.values()) - TARGET_MODULES[target]
    assert not imported & others
    assert not {m for m in imported if m.startswith(NOT_RENDER)}


def test_the_registry_names_each_target_as_its_module_does() -> None:
    """The names the registry holds without importing a target are the targets' own, and the
    default is the newest Trainer release."""
    from kfcompile.targets import DEFAULT_TARGET, RELEASES, TARGETS, trainer_releases

    assert [TARGETS[name].name for name in TARGETS] == list(TARGETS)
    assert [RELEASES[name].name for name in RELEASES] == list(RELEASES)
    assert trainer_releases()[0].name == DEFAULT_TARGET


def test_the_arguments_of_a_render_are_parsed_without_the_spec_layer() -> None:
    """--target's choices and its patch releases (``trainjob/v2.1.0``) are the registry's names."""
    code = (
        "import json, sys; from kfcompile.cli import parser; "
        "argv = ['render', 'job.yaml', '-t', 'trainjob/v2.1.0']; "
        "args = parser.build(argv).parse_args(argv); "
        "print(json.dumps([args.target, sorted(sys.modules)]))"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    target, imported = json.loads(done.stdout)
    assert target == "trainjob/v2.1" and "kfcompile.targets" in imported
    spec_layer = ("kfcompile.spec", "kfcompile.targets.", "kfcompile.kinds", "attr", "cattrs")
    assert not [m for m in imported if m.startswith(spec_layer)]


def test_a_command_line_builds_the_parser_of_its_command_alone() -> None:
    """Each command's parser costs its making (argparse's actions, a formatter): a render's
    command line makes render's; one that names no command makes every one, for the help."""

    def commands(argv: list[str]) -> list[str]:
        built = parser.build(argv)
        (sub,) = (a for a in built._actions if isinstance(a, argparse._SubParsersAction))
        return list(sub.choices)

    assert commands(["render", "job.yaml"]) == ["render"]
    assert commands(["--help"]) == commands(["nope"]) == list(parser.COMMANDS)


_GC = """
import gc, json, sys
from kfcompile.cli import main, run
sys.argv = ["kfcompile", "schema"]
frozen = [gc.get_freeze_count()]
main(["schema"])
frozen.append(gc.get_freeze_count())
run()
print(json.dumps({"frozen": frozen + [gc.get_freeze_count()], "enabled": gc.isenabled()}))
"""


def test_the_kfcompile_process_freezes_its_start_up_and_collects_after_it() -> None:
    """``run`` freezes what start-up made (the modules), so no collection walks it again, and
    then collects as usual; ``main`` (kfcompile as a library) leaves the collector alone."""
    done = _python("-c", _GC)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    before, after_main, after_run = said["frozen"]
    assert before == after_main == 0
    assert after_run > 10_000  # the interpreter's, attrs' and kfcompile's modules at least
    assert said["enabled"]


@pytest.mark.parametrize("columns", ["40", "100", "", "wide"])
def test_the_help_is_as_wide_as_argparse_would_make_it(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    theirs = argparse.RawDescriptionHelpFormatter("kfcompile")  # from shutil's terminal width
    assert parser._Help("kfcompile")._width == theirs._width  # type: ignore[attr-defined]


def test_a_host_importing_the_client_after_the_adapter_gets_the_real_names() -> None:
    """A launcher importing the client after kfcompile: the names it imports are the real ones
    (no stand-in), and the client's parts it uses are there."""
    code = (
        "import inspect, sys, kfcompile_kube, kubernetes; "
        "from kubernetes.client import ApiClient, CoreV1Api; "
        "from requests_oauthlib import OAuth2Session; "
        "from kubernetes.config import kube_config; "
        "assert inspect.isclass(ApiClient) and inspect.isclass(OAuth2Session); "
        "assert ApiClient is sys.modules['kubernetes.client.api_client'].ApiClient; "
        "assert not inspect.isclass(kube_config.ApiClient), 'the stand-in is kube_config\\'s'; "
        "assert isinstance(kube_config.ApiClient(), ApiClient); "
        "assert kubernetes.watch.Watch and kubernetes.__version__ and CoreV1Api"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr


# Each package the adapter leaves: the names served before its __init__ runs, then all of it;
# printed as the names it then has and whether each early one is the same object. "plain": the
# client imported whole before the adapter.
_SURVEY = """
import importlib, json, sys
if sys.argv[1] == "plain":
    import kubernetes, requests_oauthlib, oauthlib.oauth2
    try:
        import google.auth.transport.requests
    except ImportError:
        pass
from kfcompile_kube import client_modules
packages, early = {}, {}
for name in client_modules.PACKAGES:
    try:
        packages[name] = package = importlib.import_module(name)
    except ImportError:  # google.auth: where google-auth is installed only
        continue
    early[name] = {n: getattr(package, n) for p, n in client_modules.DEFINED_IN if p == name}
for package in packages.values():
    dir(package)  # the rest
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


def test_a_package_left_asked_for_the_rest_is_the_whole_package() -> None:
    surveys = {}
    for mode in ("adapter first", "plain"):
        done = _python("-c", _SURVEY, mode)
        assert done.returncode == 0, done.stderr
        surveys[mode] = json.loads(done.stdout)
    lazy, plain = surveys["adapter first"], surveys["plain"]
    assert sorted(lazy) == sorted(plain) and "kubernetes.client" in lazy
    for name, found in lazy.items():
        assert found["same"], name
        assert found["names"] == plain[name]["names"], name
    assert sum(found["early"] for found in lazy.values()) == len(client_modules.DEFINED_IN)


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A package ``probe`` in ``tmp_path`` and ``gate``, which its ``__init__`` (``_body``) and
    the test both see."""
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "part.py").write_text("X = 'part'\n")
    (tmp_path / "gate.py").write_text(
        "import threading\nentered, release = threading.Event(), threading.Event()\nruns = 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("gate")
    for name in [m for m in sys.modules if m in ("probe", "gate") or m.startswith("probe.")]:
        del sys.modules[name]


def _body(gate: Any, text: str) -> None:
    """``probe``'s ``__init__``, left to run on first use (``leave_init``)."""
    Path(gate.__file__).with_name("probe").joinpath("__init__.py").write_text(text)
    client_modules.leave_init("probe")


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
import kfcompile_kube
from kubernetes.config import kube_config
from kubernetes.client import Configuration
assert "kubernetes.client.api_client" not in sys.modules, "loaded by the adapter's imports"
client = kube_config.ApiClient(Configuration())
real = sys.modules["kubernetes.client.api_client"].ApiClient
assert type(client) is real and isinstance(client, kube_config.ApiClient), type(client)
class Mine(kube_config.ApiClient):
    pass
assert issubclass(Mine, real) and issubclass(Mine, kube_config.ApiClient)
assert "requests_oauthlib.oauth2_session" not in sys.modules, "loaded by the adapter's imports"
session = kube_config.OAuth2Session(client_id="kubectl")
assert type(session).__module__ == "requests_oauthlib.oauth2_session", type(session)
assert isinstance(session, kube_config.OAuth2Session) and session.client_id == "kubectl"
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
    assert "requests_oauthlib.oauth2_session" in _loaded(said[1])[0]

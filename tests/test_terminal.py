"""Nothing a cluster says reaches a terminal raw: every string of its answers (a condition's
reason and message, an annotation, a pod's phase, an event, an API error, a training metric, a
log line on a terminal) is printed escaped by ``kfcompile.terminal``, through every command that
shows it; ``-o json`` carries it as the cluster said it, escaped by json itself.

The oracle is Unicode's, not the code's: no character of categories Cc, Cf, Cs, Zl or Zp in
what is printed but the newlines that end its lines (and a log's tabs)."""

from __future__ import annotations

import ast
import json
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, LocalCluster, with_demo
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kfcompile.cli import main
from kfcompile.lifecycle.ports import ApiError
from kfcompile.lifecycle.session import TARGET_ANNOTATION
from kfcompile.progress import read_progress
from kfcompile.terminal import UNSAFE, last_drawing, log_line, printable

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
# The issue's own: retitle and clear the window; reverse what follows; hide a character.
ATTACK = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\u202etxt.exe\u200b\x9b2J"
# What each escape the brief names looks like, and more of the same kinds.
HOSTILE_CHARS = (
    "\x00\x07\x08\t\n\r\x1b\x7f\x85\x9b\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029"
    "\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069\ufeff\U000e0041\ud800"
)
hostile_text = st.text(
    st.sampled_from(HOSTILE_CHARS) | st.characters(codec="utf-8") | st.sampled_from("[];0m"),
    min_size=1,
    max_size=40,
)


def unsafe(text: str, allowed: str = "\n") -> set[str]:
    return {c for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES} - set(allowed)


# --- the escaping ------------------------------------------------------------------------------


def test_every_unsafe_character_of_unicode_is_escaped() -> None:
    """The table holds every character of the unsafe categories this Python knows (and only
    those, or ones it does not know yet: a newer Unicode's)."""
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        matched = UNSAFE.fullmatch(chr(code)) is not None
        assert matched == (category in UNSAFE_CATEGORIES) or (matched and category == "Cn"), (
            hex(code),
            category,
        )


@given(st.text(st.sampled_from(HOSTILE_CHARS) | st.characters()))
def test_printable_escapes_visibly_and_faithfully(text: str) -> None:
    shown = printable(text)
    assert not unsafe(shown, allowed="")
    assert printable(shown) == shown  # escaping what is escaped changes nothing
    if "\\" not in text:  # each escape reads back as the character it stands for
        assert shown.encode("latin-1", "backslashreplace").decode("unicode_escape") == text
    if not unsafe(text, allowed=""):
        assert shown == text  # any script, as it is


def test_the_escapes_are_what_a_user_can_read() -> None:
    assert printable(ATTACK) == (
        "\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\u202etxt.exe\\u200b\\x9b2J"
    )
    other = "\u00e9\u4e2d\u00a0"  # a letter, a CJK ideograph, a no-break space: as they are
    assert printable(f"a\U000e0041\ud800{other}") == f"a\\U000e0041\\ud800{other}"


@given(st.text(st.sampled_from(HOSTILE_CHARS) | st.characters()))
def test_a_log_line_is_escaped_on_a_terminal_only(text: str) -> None:
    assert not unsafe(log_line(text, terminal=True), allowed="\t")
    assert log_line(text, terminal=False) == last_drawing(text)  # a pipe, a file: as written


def test_an_api_error_is_escaped_wherever_it_is_printed() -> None:
    error = ApiError(403, "Forbidden", f"no {ATTACK}")
    error.named("get TrainJob team-a/demo\x1b[2J")
    assert not unsafe(str(error), allowed="") and not unsafe(error.line, allowed="")
    assert error.message == f"no {ATTACK}"  # kept as the server said it


def test_progress_is_kept_as_reported_and_shown_escaped() -> None:
    report = {"progressPercentage": 5, "metrics": [{"name": "loss\u202e", "value": ATTACK[:64]}]}
    got = read_progress({"kind": "TrainJob", "status": {"trainerStatus": report}})
    assert got is not None and got.metrics == (("loss\u202e", ATTACK[:64]),)
    assert not unsafe(got.line(got.updated or _now()), allowed="")


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


# --- one place: the cluster commands print through ``say`` -------------------------------------

CLI = Path(__file__).resolve().parents[1] / "src/kfcompile/cli"


@pytest.mark.parametrize("module", ["cluster.py", "listing.py", "workers.py", "context.py"])
def test_the_cluster_commands_print_only_through_say(module: str) -> None:
    """No ``print`` in the modules of the cluster commands; their few direct writes are the
    redrawn progress line, the logs (``log_line``), ``-o json`` and the files of
    ``--save-logs`` (no terminal)."""
    tree = ast.parse((CLI / module).read_text())
    prints = [n.lineno for n in ast.walk(tree) if _calls(n, "print")]
    assert prints == [], f"{module}: print() at lines {prints}: use common.say"
    writers = {
        f.name
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef) and any(_calls(n, "write") for n in ast.walk(f))
    }
    assert writers <= {"__call__", "close", "_print_logs", "cmd_status", "_write_ranks"}, writers


def _calls(node: ast.AST, name: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (
        isinstance(func, ast.Attribute) and func.attr == name
    )


# --- every surface, against the local API server -------------------------------------------------


@pytest.fixture(scope="module")
def local() -> Iterator[LocalCluster]:
    with with_demo(schema_check.require_shared(), running=True) as cluster:
        yield cluster


def _says(local: LocalCluster, hostile: str) -> str:
    """Make every string the server sends of job ``demo`` ``hostile``: its target annotation,
    its failed condition's reason and message, its progress, its pod's phase, an event about it
    and its pod's log. Returns the pod's name."""
    store = local.store
    meta = {"annotations": {TARGET_ANNOTATION: hostile}}
    store.change(TRAINJOB, "TrainJob", NAMESPACE, "demo", {"metadata": meta})
    failed = {"type": "Failed", "status": "True", "reason": hostile, "message": hostile}
    metrics = [{"name": hostile[:64], "value": hostile[:64]}]
    progress = {"progressPercentage": 7, "metrics": metrics}
    status = {"conditions": [failed], "trainerStatus": progress}
    store.patch_status(TRAINJOB, "TrainJob", NAMESPACE, "demo", status)
    pod = next(p for p in local.objects("Pod") if p["metadata"]["name"].startswith("demo-node"))
    name = pod["metadata"]["name"]
    store.patch_status("v1", "Pod", NAMESPACE, name, {**pod["status"], "phase": hostile})
    about = {"kind": "TrainJob", "name": "demo", "namespace": NAMESPACE}
    event = {"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": hostile,
             "message": hostile, "involvedObject": about, "lastTimestamp": "2026-12-01T10:00:00Z",
             "metadata": {"name": "demo.hostile", "namespace": NAMESPACE}}  # fmt: skip
    store.put(event)
    local.fake.log(NAMESPACE, name, hostile.encode("utf-8", "replace").decode())  # bytes
    return name


def _run(local: LocalCluster, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    main([*args, "--kubeconfig", str(local.kubeconfig)])
    out, err = capsys.readouterr()
    return out + err


SURFACES = [
    ("status", "demo"),
    ("wait", "demo", "--until", "done"),
    ("list",),
    ("events", "demo"),
]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(ATTACK)
@given(hostile_text)
def test_no_surface_prints_what_the_server_says_raw(
    local: LocalCluster,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hostile: str,
) -> None:
    _says(local, hostile)
    for surface in SURFACES:
        printed = _run(local, capsys, *surface)
        assert not unsafe(printed), (surface, printed)
    first, second = _run(local, capsys, "status", "demo").splitlines()[:2]
    assert first.startswith("TrainJob demo in namespace default: FAILED (")  # one line
    assert second.startswith("nodes: ")
    doc = json.loads(_run(local, capsys, "status", "demo", "-o", "json"))
    assert doc["message"] == hostile  # -o json: as the server said it, escaped by json
    with monkeypatch.context() as patched:  # a log on a terminal
        patched.setattr(sys.stdout, "isatty", lambda: True)
        printed = _run(local, capsys, "logs", "demo")
    assert not unsafe(printed, allowed="\n\t"), printed
    local.kube.faults.add("GET", "/trainjobs", status=403, message=hostile)
    printed = _run(local, capsys, "status", "demo")
    assert "403" in printed and not unsafe(printed), printed


def test_an_error_has_its_own_lines_whatever_the_server_says(
    local: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """A condition's message with a newline does not add a line to the error that quotes it
    (a line that looks like kfcompile's own)."""
    said = "one\nkfcompile: two\x1b[2J"
    suspended = {"type": "Suspended", "status": "True", "reason": "Why", "message": said}
    local.store.patch_status(TRAINJOB, "TrainJob", NAMESPACE, "demo", {"conditions": [suspended]})
    printed = _run(local, capsys, "wait", "demo", "--until", "running", "--timeout", "0.1")
    timed_out = [line for line in printed.splitlines() if "did not become running" in line]
    assert len(timed_out) == 1 and timed_out[0].endswith("one\\x0akfcompile: two\\x1b[2J")
    assert not unsafe(printed) and "kfcompile: kfcompile:" not in printed


def test_a_log_that_is_piped_is_the_programs_own(
    local: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    local.fake.log(NAMESPACE, _says(local, "ok"), "\x1b[32mgreen\x1b[0m\tdone")
    printed = _run(local, capsys, "logs", "demo")
    assert "\x1b[32mgreen\x1b[0m\tdone\n" in printed  # `| less -R` shows the colours


def test_the_launchers_show_what_the_server_says_escaped(
    local: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What TorchX prints (`torchx status`, `list`, `log` and its errors) and NeMo-Run (its
    experiment status, list and logs) of the same job."""
    pytest.importorskip("torchx", reason="torchx is not installed (CI's launcher env)")
    from kfcompile.integrations.torchx import SchedulerError, create_scheduler

    name = _says(local, ATTACK)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    torchx = create_scheduler("s", kubeconfig=str(local.kubeconfig))
    described = torchx.describe("default:demo")
    hosts = [r.hostname for s in described.roles_statuses for r in s.replicas]
    assert hosts == [name] and not unsafe(described.msg, allowed="")
    assert described.msg.startswith("FAILED (\\x1b]0;owned\\x07")
    assert not unsafe(" ".join(a.app_id for a in torchx.list()), allowed="")
    logged = "".join(torchx.log_iter("default:demo", "node", 0))
    assert "\\x1b[2J" in logged and not unsafe(logged, allowed="\n\t")
    local.kube.faults.add("GET", "/trainjobs", status=403, message=ATTACK)
    with pytest.raises(SchedulerError) as refused:
        torchx.describe("default:demo")
    assert "403" in str(refused.value) and not unsafe(str(refused.value))
    torchx.close()

    pytest.importorskip("nemo_run", reason="nemo_run is not installed (CI's launcher env)")
    from kfcompile.integrations.nemo_run_scheduler import KfcompileScheduler

    monkeypatch.setenv("KUBECONFIG", str(local.kubeconfig))
    nemo = KfcompileScheduler("s")
    described = nemo.describe("default:demo")
    assert described is not None and not unsafe(described.msg, allowed="")
    assert "\\u202e" in described.msg
    assert not unsafe(" ".join(a.app_id for a in nemo.list()), allowed="")
    logged = "".join(nemo.log_iter("default:demo", "node", 0))
    assert "\\x1b[2J" in logged and not unsafe(logged, allowed="\n\t")

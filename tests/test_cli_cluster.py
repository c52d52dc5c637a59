"""The cluster commands of the CLI, in-process, on the port-level fake (``PortCluster.wire``:
the CLI's session is the fake's, on its clock): exit codes, what goes to stdout and stderr,
and what never appears there (Secret values). What the wire shows (requests, tokens) is in
test_cold_requests.py, test_credentials.py and test_lifecycle_http.py."""

from __future__ import annotations

import io
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fakekube.cluster import CLAIM, NAMESPACE, QUEUE, SCENARIO_ANNOTATION, PortCluster, cli

from kfcompile.cli import main
from kfcompile.testing.courses import SLOW_IMAGE

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
SECRET_VALUE = "hf_do_not_print_me"


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> PortCluster:
    return cli(monkeypatch)


def write_spec(tmp_path: Path, scenario: str = "succeeds", **extra: object) -> Path:
    data = {
        "name": "demo",
        "image": "python:3.11-slim",
        "command": ["python", "-c", "print(1)"],
        "num_nodes": 2,
        "annotations": {SCENARIO_ANNOTATION: scenario},
        **extra,
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(local: PortCluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_wait_done_saves_every_rank_log(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path)
    logs = tmp_path / "logs"
    code, out, err = run(local, capsys, "submit", str(spec), "--wait", "done", "--save-logs",
                         str(logs))  # fmt: skip
    assert code == 0, err
    assert "TrainJob demo in namespace default: created" in out
    assert "SUCCEEDED (Complete)" in out
    assert "nodes 0/2 ready" in err and "RUNNING" in err  # progress lines as it went
    assert sorted(p.name for p in logs.iterdir()) == ["rank-0.log", "rank-1.log"]
    assert "rank 1 step 1" in (logs / "rank-1.log").read_text()
    code, out, _ = run(local, capsys, "submit", str(spec))
    assert code == 0 and "unchanged" in out


def test_a_spec_the_target_cannot_express_creates_nothing(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = write_spec(tmp_path, active_deadline_seconds=60)
    code, _, err = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.1")
    assert code == 1 and "Traceback" not in err
    assert f"{spec} (trainjob/v2.1): active_deadline_seconds: " in err
    assert local.calls.count("create") == 0


def test_a_failed_job_exits_1(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        local, capsys, "submit", str(write_spec(tmp_path, "fails")), "--wait", "done"
    )
    assert code == 1 and "FAILED" in out


def test_status_text_and_json(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, "hang")), "--wait", "running")
    code, out, _ = run(local, capsys, "status", "demo")
    assert code == 0 and out.startswith("TrainJob demo in namespace default: RUNNING")
    assert "demo-node-0-1-" in out
    code, out, _ = run(local, capsys, "status", "demo", "-o", "json")
    doc = yaml.safe_load(out)
    assert (doc["kind"], doc["state"], doc["nodesTotal"]) == ("TrainJob", "RUNNING", 2)
    assert [n["rank"] for n in doc["nodes"]] == [0, 1]
    fields = {"when", "type", "reason", "about", "message", "count"}
    assert doc["events"] and all(set(e) == fields for e in doc["events"])
    code, _, err = run(local, capsys, "status", "nope")
    assert code == 1 and "no TrainJob or PyTorchJob named nope in namespace default" in err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--rank", "5"], "--rank 5: TrainJob demo in namespace default has rank 0: there is no"),
        (["--rank", "5", "--follow"], "has rank 0: there is no rank 5"),
        (["--rank", "-1"], "argument --rank: not a whole number >= 0: '-1'"),
        (["--tail", "-5"], "argument --tail: not a whole number >= 0: '-5'"),
    ],
)
def test_logs_of_a_rank_or_tail_the_job_cannot_have_is_a_usage_error(
    local: PortCluster,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    args: list[str],
    said: str,
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, num_nodes=1)), "--wait", "done")
    try:
        code, out, err = run(local, capsys, "logs", "demo", *args)
    except SystemExit as exc:  # argparse's usage errors
        code, (out, err) = int(str(exc.code)), capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert said in err and "Traceback" not in err
    assert local.calls.count("pod_log") == 0


def test_logs_show_a_progress_bar_as_a_terminal_would(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, num_nodes=1)), "--wait", "done")
    [pod] = local.store.list("v1", "Pod", NAMESPACE)
    bar = "".join(f"\r{i:>3}%|{'#' * (i // 10):<10}|" for i in range(0, 101))
    local.store.append_log(NAMESPACE, pod["metadata"]["name"], "node", f"epoch 1{bar}\n")
    code, out, _ = run(local, capsys, "logs", "demo")
    assert code == 0 and out.splitlines()[-1] == "100%|##########|"
    assert "\r" not in out


def test_logs_follow_of_a_rank_that_cannot_start_gives_up_in_one_line(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, "invalid_image", num_nodes=1)))
    code, out, err = run(local, capsys, "logs", "demo", "--follow")
    assert (code, out) == (1, ""), err
    last = err.splitlines()[-1]
    assert last.startswith("kfcompile: rank 0: pod demo-node-0-0-")
    assert "cannot start (InvalidImageName)" in last and "Traceback" not in err
    assert last.endswith("; giving up: it has not started for 0s")


def test_logs_all_ranks_are_prefixed(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path)), "--wait", "done")
    code, out, _ = run(local, capsys, "logs", "demo", "--all-ranks")
    assert code == 0
    assert {line.split("]")[0] for line in out.splitlines()} == {"[rank 0", "[rank 1"}
    code, out, _ = run(local, capsys, "logs", "demo", "--rank", "1", "--tail", "1")
    assert code == 0 and out.count("\n") == 1 and "rank 1" in out
    code, out, _ = run(local, capsys, "logs", "demo", "--follow")
    assert code == 0 and "rank 0: exit 0" in out


def test_cancel_suspend_resume_events_list(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, "hang")), "--wait", "running")
    code, out, err = run(local, capsys, "suspend", "demo")
    assert out.strip() == "TrainJob demo in namespace default: suspended", err
    code, _, err = run(local, capsys, "resume", "demo")
    assert code == 0, err
    code, out, _ = run(local, capsys, "events", "demo")
    assert code == 0 and "SuccessfulCreate job/demo-node-0: Created pod: demo-node-0-0-" in out
    code, out, _ = run(local, capsys, "list")
    assert code == 0 and out.splitlines()[1].split()[:3] == ["default", "demo", "TrainJob"]
    code, out, _ = run(local, capsys, "cancel", "demo", "--wait", "--timeout", "20s")
    assert code == 0 and "deleted, with all its pods" in out
    code, _, err = run(local, capsys, "cancel", "demo")
    assert code == 0 and "nothing to cancel" in err
    assert run(local, capsys, "list")[1].splitlines()[1:] == []


def test_a_job_being_deleted_says_what_holds_it(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, "hang")), "--wait", "running")
    local.store.gc(running=False)  # no garbage collector: foregroundDeletion holds the job
    # another client's delete (kubectl delete --cascade=foreground)
    local.store.delete(TRAINJOB, "TrainJob", NAMESPACE, "demo", "Foreground")
    held = "DELETING (held by foregroundDeletion: waiting for the garbage collector)"
    code, out, _ = run(local, capsys, "status", "demo")
    assert out.startswith(f"TrainJob demo in namespace default: {held} deletion requested at ")
    assert "only after up to 30 s" in out
    code, out, _ = run(local, capsys, "list")
    assert held in out.splitlines()[1]
    # cancel deletes in the background: the finalizer goes with the job; what it made stays
    # until the (absent) garbage collector deletes it
    code, _, err = run(local, capsys, "cancel", "demo", "--wait", "--timeout", "0.3s")
    assert code == 1 and "Traceback" not in err
    progress, last = err.splitlines()[0], err.splitlines()[-1]
    assert re.fullmatch(
        r"\[ *\d+\.\ds\] demo: cancel --wait: waiting for JobSet demo, Job demo-node-0, "
        r"pod demo-node-0-0-\w+, pod demo-node-0-1-\w+",
        progress,
    )
    # The time it waited, at least the 0.3 s asked (a loaded machine may take longer).
    assert re.match(r"kfcompile: TrainJob demo in namespace default not gone after \d+\.\ds", last)
    assert "still there: JobSet demo, Job demo-node-0, pod demo-node-0-0-" in last
    local.store.gc(running=True)
    local.store.collect()
    assert run(local, capsys, "list")[1].splitlines()[1:] == []
    assert local.store.list("v1", "Pod", NAMESPACE) == []


def test_cancel_wait_of_a_job_kueue_manages_returns(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 28, item 1: with Foreground propagation the Trainer re-created the JobSet of a
    TrainJob Kueue manages for as long as the job waited for its dependents, and ``cancel
    --wait`` ran out its timeout ("held by foregroundDeletion") every time."""
    spec = write_spec(tmp_path, "hang", queue=QUEUE)
    code, _, err = run(local, capsys, "submit", str(spec), "--wait", "running")
    assert code == 0, err
    code, out, err = run(local, capsys, "cancel", "demo", "--wait", "--timeout", "10s")
    assert code == 0, err
    assert out == "TrainJob demo in namespace default: deleted, with all its pods\n"
    assert local.store.get("jobset.x-k8s.io/v1alpha2", "JobSet", NAMESPACE, "demo") is None
    assert local.store.list("batch/v1", "Job", NAMESPACE) == []
    assert local.store.list("v1", "Pod", NAMESPACE) == []


def test_list_all_namespaces_without_the_right_falls_back_to_the_namespace(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path, "hang")))
    local.store.namespaces_allowed = {NAMESPACE}  # alice's Role, no ClusterRole
    code, out, err = run(local, capsys, "list", "-A")
    assert code == 0, err
    assert err == (
        "kfcompile: listing jobs in all namespaces is forbidden (trainjobs.trainer.kubeflow.org "
        'is forbidden: User "alice" cannot list resource "trainjobs" in API group '
        '"trainer.kubeflow.org" at the cluster scope): it needs list at the cluster scope (a '
        "ClusterRole); listing namespace default instead\n"
    )
    assert out.splitlines()[1].split()[:3] == ["default", "demo", "TrainJob"]


def test_sync_up_and_down(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print(2)\n")
    code, out, _ = run(
        local, capsys, "sync", "up", str(tmp_path / "src"), "--pvc", CLAIM, "--path", "/code"
    )
    assert code == 0 and out.strip().endswith(": 1 files, 9 bytes")
    code, out, _ = run(
        local, capsys, "sync", "down", str(tmp_path / "back"), "--pvc", CLAIM, "--path", "/code"
    )
    assert code == 0 and (tmp_path / "back" / "train.py").read_text() == "print(2)\n"


def test_transient_trouble_is_retried_and_said_once(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run(local, capsys, "submit", str(write_spec(tmp_path)), "--wait", "done")
    local.faults.add("get", "TrainJob/demo", status=503, times=3)
    code, out, err = run(local, capsys, "status", "demo")
    assert code == 0 and "SUCCEEDED" in out
    assert err.count("retrying for up to 60s") == 1 and "503" in err


def test_sync_of_a_missing_directory_is_one_line(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(local, capsys, "sync", "up", str(tmp_path / "nope"), "--pvc", CLAIM)
    assert code == 1 and err.count("\n") == 1 and "not a directory" in err
    assert local.calls.count("create") == 0


@pytest.mark.parametrize("direction", ["up", "down"])
def test_sync_to_a_claim_that_does_not_exist_is_one_line_and_makes_no_pod(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path, direction: str
) -> None:
    code, _, err = run(local, capsys, "sync", direction, str(tmp_path), "--pvc", "nope")
    assert (code, err) == (
        1,
        "kfcompile: PersistentVolumeClaim nope does not exist in namespace default: create it, "
        "or name another with --pvc\n",
    )
    assert local.calls.count("create") == 0


def test_submit_waits_for_the_sync_helper_as_long_as_its_timeout_says(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    spec = write_spec(tmp_path, work_dir={"local": ".", "pvc": CLAIM, "mount_path": "/w"})
    started = time.monotonic()
    code, _, err = run(
        local, capsys, "submit", str(spec), "--sync-image", f"{SLOW_IMAGE}:1", "--timeout", "0.5s"
    )
    assert time.monotonic() - started < 30  # not the 5 minutes of the helper's default
    assert code == 1 and "Traceback" not in err
    assert "kfcompile: sync helper not running after 0.5s (--timeout)" in err, err
    assert local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []


def test_namespace_comes_from_flag_then_spec_then_context(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = cli(monkeypatch, namespace="ctx-ns")  # the kubeconfig context's
    for ns in ("ctx-ns", "spec-ns", "flag-ns"):
        local.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    plain = write_spec(tmp_path)
    for extra, where in (([], "ctx-ns"), (["-n", "flag-ns"], "flag-ns")):
        assert main(["submit", str(plain), *extra]) == 0
        assert local.store.get(TRAINJOB, "TrainJob", where, "demo") is not None
    (tmp_path / "s").mkdir()
    with_ns = write_spec(tmp_path / "s", namespace="spec-ns")
    assert main(["submit", str(with_ns)]) == 0
    assert local.store.get(TRAINJOB, "TrainJob", "spec-ns", "demo") is not None
    capsys.readouterr()


def test_configuration_errors_name_what_was_tried(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["status", "demo"]) == 1
    err = capsys.readouterr().err
    assert "kubeconfig" in err and "in-cluster" in err and "Traceback" not in err
    assert main(["status", "demo", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert str(tmp_path / "missing") in capsys.readouterr().err


def test_secret_values_and_tokens_are_never_printed(
    local: PortCluster,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET_VALUE)
    spec = write_spec(tmp_path, secret_env=["HF_TOKEN"])
    code, out, err = run(local, capsys, "submit", str(spec), "--wait", "done")
    assert code == 0
    code, out2, err2 = run(local, capsys, "status", "demo", "-o", "json")
    assert code == 0
    assert SECRET_VALUE not in out + err + out2 + err2
    # render keeps the values out unless asked, and says where they would come from
    assert main(["render", str(spec)]) == 0
    out, err = capsys.readouterr()
    assert SECRET_VALUE not in out and "kind: Secret" not in out
    assert "secret_env reads Secret demo-env" in err
    assert main(["render", str(spec), "--with-secrets"]) == 0
    out, _ = capsys.readouterr()
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["Secret", "TrainJob"]
    assert docs[0]["stringData"] == {"HF_TOKEN": SECRET_VALUE}


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Ctrl-C as the ``kfcompile`` process gets it: Python's own handler (KeyboardInterrupt),
    whatever an earlier test left installed in this process (torchx's local scheduler installs
    one of its own when it is imported)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def interrupt_once_waiting(local: PortCluster) -> None:
    """Ctrl-C once the submit is watching the job: a real SIGINT, raised in the main thread
    (the command's) at the first tick of the fake clock after the watch started."""
    sent: list[bool] = []

    def interrupt() -> None:
        if not sent and local.calls.count("watch", "TrainJob"):
            sent.append(True)
            signal.raise_signal(signal.SIGINT)

    local.clock.on_tick(interrupt)


@pytest.mark.usefixtures("python_sigint")
def test_ctrl_c_while_waiting_leaves_the_job_and_says_how_to_cancel(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    interrupt_once_waiting(local)
    code, _, err = run(local, capsys, "submit", str(write_spec(tmp_path, "hang")), "--wait", "done")
    assert code == 130
    assert "keeps running; cancel it with: kfcompile cancel demo -n default" in err
    assert local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo") is not None


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.usefixtures("python_sigint")
def test_ctrl_c_at_a_terminal_asks_and_cancels(
    local: PortCluster,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    interrupt_once_waiting(local)
    code, _, err = run(local, capsys, "submit", str(write_spec(tmp_path, "hang")), "--wait", "done")
    assert code == 130 and "cancelled" in err
    local.store.collect()
    assert local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo") is None


JOB_COMMANDS = ["status", "wait", "logs", "events", "cancel", "suspend", "resume", "sync", "list"]


@pytest.mark.parametrize("command", JOB_COMMANDS)
def test_help_of_a_command_without_a_spec_says_its_namespace_default(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "namespace (default: the context's, then default)" in text


def test_help_of_submit_says_the_spec_namespace_comes_between(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "namespace (default: the spec's, then the context's, then default)" in text


def test_submit_of_a_patch_release_records_the_line(
    local: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from kfcompile.lifecycle import TARGET_ANNOTATION

    spec = write_spec(tmp_path)
    code, out, err = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.3.1")
    assert code == 0, err
    job = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert job is not None
    assert job["metadata"]["annotations"][TARGET_ANNOTATION] == "trainjob/v2.3"
    code, out, _ = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.3")
    assert code == 0 and "unchanged" in out  # the same job, whichever name was given


@pytest.fixture
def secret_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spec with ``secret_env: [HF_TOKEN]``, the value set in the environment."""
    monkeypatch.setenv("HF_TOKEN", SECRET_VALUE)
    return write_spec(tmp_path, secret_env=["HF_TOKEN"])


def test_a_submit_that_leaves_objects_behind_says_how_to_remove_them(
    local: PortCluster, capsys: pytest.CaptureFixture[str], secret_spec: Path
) -> None:
    spec = secret_spec
    local.faults.add("patch", "Secret/demo-env", status=403)
    local.faults.add("delete", "TrainJob/demo", status=403)
    local.faults.add("delete", "Secret/demo-env", status=403)
    # (--target: stderr starts with the failure, not with the target detected)
    code, out, err = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.3")
    assert (code, out) == (1, "")
    lines = err.splitlines()
    assert lines[1] == (
        "kfcompile: the submit failed and could not remove all it had created; 2 objects left "
        "on the cluster:"
    )
    assert lines[2].endswith("remove it with: kfcompile cancel demo -n default --kind TrainJob")
    assert lines[3].endswith("remove it with: kubectl delete secret demo-env -n default")
    assert SECRET_VALUE not in err and "Traceback" not in err
    code, out, err = run(local, capsys, "submit", str(spec), "-t", "trainjob/v2.3")
    assert code == 0
    assert (
        out
        == "TrainJob demo in namespace default: already submitted; its companions were repaired\n"
    )
    assert err == (
        "kfcompile: repaired: Secret demo-env in namespace default had lost its owner: owned by "
        "the job again\n"
    )

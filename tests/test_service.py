"""``examples/service.py``: a reconciler on ``lifecycle.watch_jobs``, built only on kfcompile's
public API, run as a program against the local API server."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import public_api
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, LocalCluster

import kfcompile
from kfcompile.lifecycle import MANAGED_BY_LABEL
from kfcompile.testing import courses

SERVICE = Path(__file__).resolve().parents[1] / "examples" / "service.py"
TRAINJOB = "trainer.kubeflow.org/v1alpha1"
WORKERS = ("svc-0", "svc-1", "svc-2")


def test_the_service_uses_only_the_public_api() -> None:
    """Imports: the standard library, ``kfcompile``, its ``lifecycle`` and ``ports`` and the
    Kubernetes adapter; every ``kfcompile.<name>`` it uses is in ``kfcompile.__all__``, every
    ``lifecycle.<name>`` in ``lifecycle.__all__``."""
    public_api.check(
        SERVICE, {"kfcompile": kfcompile.__all__, "lifecycle": kfcompile.lifecycle.__all__}
    )


def test_dry_run_renders_single_gpu_kueue_queued_workers() -> None:
    done = subprocess.run(
        [sys.executable, str(SERVICE), "--dry-run", "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["items"]
    assert [j["metadata"]["name"] for j in listed] == ["svc-0", "svc-1"]
    for job in listed:
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
        trainer = job["spec"]["trainer"]
        assert trainer["numNodes"] == 1
        assert trainer["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "1"}


def test_a_kubeconfig_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    done = subprocess.run(
        [sys.executable, str(SERVICE), "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert done.stderr == f"service: kubeconfig {missing}: file not found (from --kubeconfig)\n"
    assert done.stdout == ""


def test_the_service_runs_its_workers_from_one_watch(tmp_path: Path) -> None:
    """Three workers: one succeeds, one fails, one keeps running until a request cancels it.
    The service sees every change from one watch, archives each worker's logs when it ends, and
    stops once all three have."""
    archive = tmp_path / "archive"
    with LocalCluster(schema_check.require_shared(), auto=False, scenario=None) as local:
        lives = {"svc-1": {"reason": "FailedJobs"}, "svc-2": {"ends": None}}  # svc-0 succeeds
        local.store.on_create.append(
            lambda job: courses.queued(local.fake, **lives.get(job["metadata"]["name"], {}))(job)
        )
        argv = ["--workers", "3", "--queue", QUEUE, "--archive", str(archive)]
        proc = subprocess.Popen(
            [sys.executable, str(SERVICE), *argv, "--kubeconfig", str(local.kubeconfig)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            # Once it watches (after submitting all three), the jobs run.
            ran = local.run_once_watched("trainjobs", "pytorchjobs")
            lines = []
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if line.startswith("service: svc-2: running"):
                    ran.join(timeout=30)  # its pods have written their logs, as running pods do
                    proc.stdin.write("cancel svc-2\n")
                    proc.stdin.flush()
            code = proc.wait(timeout=30)
        finally:
            proc.kill()
            proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        found = {
            j["metadata"]["name"]: j for j in local.store.list(TRAINJOB, "TrainJob", NAMESPACE)
        }
        secrets = local.store.list("v1", "Secret", NAMESPACE)
        watches = local.kube.requests.count("GET", "/trainjobs", watch=True)
    assert code == 1, (lines, err)  # svc-1 failed
    said = [line.removeprefix("service: ") for line in lines]
    for name in WORKERS:
        assert f"{name}: submitted" in said
        changes = [s.split(": ", 1)[1].split(" (")[0] for s in said if s.startswith(f"{name}: ")]
        whats = [c for c in changes if c in {"listed", "suspended", "admitted", "running"}]
        assert whats == ["listed", "admitted", "running"], said
        # Created suspended by Kueue: queued from the first report, not a job with no status,
        # with the reason Kueue gives (its Workload: QuotaReserved=False, Pending).
        assert f"{name}: listed (SUSPENDED Queued)" in said, said
    assert "svc-0: finished (SUCCEEDED Complete)" in said
    assert any(s.startswith("svc-1: finished (FAILED") for s in said)
    assert "svc-2: cancel requested" in said
    # Deleted in the background: gone at once, as it last was (never held by foregroundDeletion)
    assert "svc-2: deleted (RUNNING JobsActive)" in said
    assert said[-1] == "all 3 workers ended; failed: svc-1"
    # Every worker's logs, archived when it ended (svc-2's before it was deleted).
    assert sorted(p.name for p in archive.iterdir()) == [f"{n}.log" for n in WORKERS]
    assert "[rank 0] " in (archive / "svc-0.log").read_text()
    assert "[rank 0] " in (archive / "svc-2.log").read_text()
    # The finished workers stay, each a single-GPU Kueue-queued job owning its own token.
    assert sorted(found) == ["svc-0", "svc-1"]
    tokens = set()
    for name, job in found.items():
        assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == QUEUE
        assert job["metadata"]["labels"][MANAGED_BY_LABEL] == "kfcompile"
        assert job["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "1"}
        [secret] = [s for s in secrets if s["metadata"]["name"] == f"{name}-env"]
        [owner] = secret["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("TrainJob", job["metadata"]["uid"])
        tokens.add(base64.b64decode(secret["data"]["WORKER_TOKEN"]))
        assert secret["data"]["WORKER_TOKEN"] not in "\n".join(lines)
    assert len(tokens) == 2  # each its own
    assert watches == 1  # one watch of every TrainJob, never a poll of each

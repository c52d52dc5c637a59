"""``examples/launcher.py``: run as a program, and built only on kfcompile's public API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import public_api
import pytest
import schema_check

import kfcompile

LAUNCHER = Path(__file__).resolve().parents[1] / "examples" / "launcher.py"


def launch(*argv: str) -> tuple[int, Any, str]:
    done = subprocess.run(
        [sys.executable, str(LAUNCHER), *argv], capture_output=True, text=True, timeout=60
    )
    out = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, out, done.stderr


@pytest.mark.parametrize("target", sorted(kfcompile.TARGETS))
def test_launcher_renders_and_reads_back(target: str) -> None:
    code, out, err = launch(
        "--name", "demo", "--nodes", "2", "--gpus", "4", "--queue", "team-a",
        "--target", target, "/app/train.py", "--epochs", "3",
    )  # fmt: skip
    assert code == 0, err
    assert out["kind"] == "List"
    [job] = out["items"]
    assert job["metadata"]["name"] == "demo"
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-a"}
    if target == "pytorchjob/v1":
        assert job["kind"] == "PyTorchJob"
        assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
        [container] = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
        assert container["command"][-3:] == ["/app/train.py", "--epochs", "3"]
    else:
        assert job["kind"] == "TrainJob"
        assert job["spec"]["trainer"]["numNodes"] == 2
        assert job["spec"]["trainer"]["command"] == ["torchrun", "/app/train.py", "--epochs", "3"]
    assert err == (f"launcher: {job['kind']} demo for {target}: 1 object(s), read back unchanged\n")


def test_launcher_reports_every_problem() -> None:
    code, out, err = launch("--name", "Bad_Name", "--nodes", "0", "/app/train.py")
    assert (code, out) == (1, None)
    assert [line.split(": ")[1] for line in err.splitlines()] == ["name", "num_nodes"]


def test_launcher_uses_only_the_public_api() -> None:
    """Imports: the standard library, ``kfcompile``, its ``lifecycle`` and ``ports`` and the
    Kubernetes adapter ``kfcompile_kube``; every ``kfcompile.<name>`` it uses is exported in
    ``kfcompile.__all__``."""
    public_api.check(LAUNCHER, {"kfcompile": kfcompile.__all__})


def test_launcher_runs_the_job_on_a_cluster() -> None:
    """--submit drives the lifecycle through the ports against the local API server."""
    from fakekube.cluster import NAMESPACE, LocalCluster

    with LocalCluster(schema_check.require_shared()) as local:
        argv = ["--nodes", "2", "--submit", "--kubeconfig", str(local.kubeconfig), "/app/train.py"]
        done = subprocess.run(
            [sys.executable, str(LAUNCHER), *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "SUCCEEDED Complete" in done.stderr
        ranks = {line.split("]")[0] for line in done.stdout.splitlines()}
        assert ranks == {"[rank 0", "[rank 1"}
        assert local.store.get("trainer.kubeflow.org/v1alpha1", "TrainJob", NAMESPACE, "demo")

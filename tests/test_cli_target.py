"""The target from the cluster, ``submit --dry-run=server`` and ``validate --cluster`` through the
CLI, on a cluster serving the upstream CRDs of one release: what stdout and stderr say, and
which calls reached the cluster (none that writes, for the last two)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fakekube.cluster import NAMESPACE, RELEASES, PortCluster, cli
from test_cli_cluster import run

from kfcompile.lifecycle import TARGET_ANNOTATION

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
WRITES = ("create", "patch", "delete")


@pytest.fixture
def v21(monkeypatch: pytest.MonkeyPatch) -> PortCluster:
    return cli(monkeypatch, crds=RELEASES["trainjob/v2.1"])


def write_spec(tmp_path: Path, **extra: object) -> Path:
    data = {"name": "demo", "image": "python:3.11-slim", "command": ["python"], **extra}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def writes(local: PortCluster) -> list[str]:
    return [f"{c.method} {c.path}" for c in local.calls if c.method in WRITES]


def test_submit_renders_for_the_release_the_cluster_runs(
    v21: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(v21, capsys, "submit", str(write_spec(tmp_path)))
    assert (code, out) == (0, "TrainJob demo in namespace default: created\n")
    assert err == (
        "kfcompile: target trainjob/v2.1, detected from the cluster: the served TrainJob CRD has "
        "spec.podTemplateOverrides\n"
    )
    job = v21.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert job is not None and job["metadata"]["annotations"][TARGET_ANNOTATION] == "trainjob/v2.1"


def test_target_always_wins(
    v21: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = str(write_spec(tmp_path))
    code, _, err = run(v21, capsys, "submit", spec, "-t", "trainjob/v2.0", "--dry-run=server")
    assert code == 0 and "detected" not in err
    reads = [c for c in v21.calls if c.method == "get"]
    assert reads and not [c for c in reads if c.kind == "CustomResourceDefinition"
                          or c.namespace == "kubeflow-system"]  # fmt: skip


def test_a_server_dry_run_creates_nothing(
    v21: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = write_spec(
        tmp_path, script="print(1)", launcher={"kind": "python", "entrypoint": "x.py"}
    )
    spec.write_text(spec.read_text().replace("command:\n- python\n", ""))
    code, out, _ = run(v21, capsys, "submit", str(spec), "--dry-run=server")
    assert (code, out) == (
        0,
        "TrainJob demo in namespace default: accepted by the server (dry run: nothing was "
        "created)\n",
    )
    posts = v21.calls.matching("create")
    assert [c.kind for c in posts] == ["ConfigMap", "TrainJob"]
    assert all(c.query == {"dry_run": True} for c in posts)
    assert writes(v21) == [f"create {c.path}" for c in posts]  # no owner patch, no rollback
    assert v21.store.list(TRAINJOB, "TrainJob") == [] and v21.objects("ConfigMap") == []


def test_a_dry_run_has_nothing_to_wait_for(
    v21: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = str(write_spec(tmp_path))
    code, _, err = run(v21, capsys, "submit", spec, "--dry-run=server", "--wait", "done")
    assert code == 2 and "--dry-run=server creates nothing to wait for" in err
    assert list(v21.calls) == []


def test_validate_against_the_crd_the_cluster_serves(
    v21: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = str(write_spec(tmp_path))
    code, out, err = run(v21, capsys, "validate", spec, "--cluster")
    assert code == 0
    assert out == f"{spec}: valid for trainjob/v2.1 against the CRDs the cluster serves\n"
    # For another release, the served CRD says what it does not know, and nothing was written.
    deadline = str(write_spec(tmp_path, active_deadline_seconds=600))
    code, _, err = run(v21, capsys, "validate", deadline, "--cluster", "-t", "trainjob/v2.3")
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"{deadline} (trainjob/v2.3): TrainJob/demo: spec: Additional prop")
    assert "'activeDeadlineSeconds' was unexpected" in line
    assert line.endswith("(per the CRD trainjobs.trainer.kubeflow.org the cluster serves)")
    assert writes(v21) == []


def test_validate_says_what_it_cannot_read_or_find(
    v21: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec = str(write_spec(tmp_path))
    code, _, err = run(v21, capsys, "validate", spec, "--cluster", "-t", "pytorchjob/v1")
    assert code == 1
    assert err == (
        f"{spec} (pytorchjob/v1): PyTorchJob is not served by this cluster (no CRD "
        "pytorchjobs.kubeflow.org): install the Kubeflow Training Operator v1 (kubeflow/trainer "
        "v1.9)\n"
    )
    v21.faults.add("get", "CustomResourceDefinition/trainjobs", status=403)
    code, _, err = run(v21, capsys, "validate", spec, "--cluster", "-t", "trainjob/v2.1")
    assert code == 1
    assert err.startswith(
        "kfcompile: cannot read CRD trainjobs.trainer.kubeflow.org: 403 Forbidden"
    )
    assert err.rstrip().endswith(
        "(needs get on customresourcedefinitions: `kfcompile rbac --cluster-reads` prints the "
        "ClusterRole)"
    )

"""Jobs Kueue's MultiKueue dispatches, followed to the worker cluster that runs them: the CLI,
in-process, over real HTTP against two fake API servers (a manager and a worker, one
kubeconfig with a context each) with MultiKueue between them (``fakekube.multikueue``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
import yaml
from fakekube.cluster import NAMESPACE, QUEUE
from fakekube.multikueue import KUEUE, MULTIKUEUE, TwoClusters
from fakekube.scenarios import SCENARIO_ANNOTATION

from kfcompile.cli import main

TRAINJOB = "trainer.kubeflow.org/v1alpha1"


@pytest.fixture
def clusters() -> Iterator[TwoClusters]:
    with TwoClusters(schema_check.require_shared()) as two:
        yield two


def write_spec(tmp_path: Path, scenario: str = "succeeds") -> Path:
    data = {
        "name": "demo",
        "image": "python:3.11-slim",
        "command": ["python", "-c", "print(1)"],
        "num_nodes": 2,
        "queue": QUEUE,
        "annotations": {SCENARIO_ANNOTATION: scenario},
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    code = main([*args, "--kubeconfig", str(clusters.kubeconfig), "--context", "manager"])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_fake_dispatches_mirrors_and_copies_status_back(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(clusters, capsys, "submit", str(write_spec(tmp_path)))
    assert code == 0, err
    clusters.settle()
    job = clusters.manager.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert job is not None and job["spec"]["managedBy"] == MULTIKUEUE
    (workload,) = clusters.manager.store.list(KUEUE, "Workload", NAMESPACE)
    assert workload["status"]["clusterName"] == TwoClusters.WORKER
    mirror = clusters.worker.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert mirror is not None and "managedBy" not in mirror["spec"]
    assert clusters.manager.store.list("v1", "Pod", NAMESPACE) == []
    assert len(clusters.worker.store.list("v1", "Pod", NAMESPACE)) == 2
    conditions = {c["type"] for c in job["status"]["conditions"]}
    assert "Complete" in conditions

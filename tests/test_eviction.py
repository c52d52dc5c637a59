"""Right after an eviction (Kueue preempts the job: it is suspended, its pods deleted) the pods
stay Terminating until their kubelets have stopped them: ``status`` counts none of them ready."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
import yaml
from fakekube.cluster import NAMESPACE, PortCluster, cli

from kfcompile import lifecycle, structure
from kfcompile.cli import main
from kfcompile.lifecycle.ports import Ref
from kfcompile.status import State
from kfcompile.testing import courses

NODES = ("gpu-node-0", "gpu-node-1")  # where the fake's ranks run


@pytest.fixture
def local() -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as cluster:
        cluster.store.on_create.append(courses.runs(cluster.fake, ends=None))
        cluster.store.on_patch.append(courses.suspends(cluster.fake))
        yield cluster


def evicted(local: PortCluster, ref: Ref) -> None:
    """The job runs, then is suspended (as Kueue evicts it): its pods are deleted and, their
    kubelets not having stopped them yet, stay Terminating."""
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    assert lifecycle.status(local.session(), ref).nodes_ready == 2
    local.store.kubelets_down.update(NODES)  # slow to stop them: for now, not at all
    lifecycle.set_suspended(local.session(), ref, True)


def test_terminating_pods_are_not_ready(local: PortCluster) -> None:
    spec = structure({"name": "demo", "image": "python:3.11-slim", "command": ["python"],
                      "num_nodes": 2})  # fmt: skip
    ref = lifecycle.submit(local.session(), spec, "trainjob/v2.3", namespace=NAMESPACE,
                           environ={}).ref  # fmt: skip
    evicted(local, ref)
    observed = lifecycle.status(local.session(), ref)
    assert observed.state.state is State.SUSPENDED
    assert [n.phase for n in observed.nodes] == ["Running", "Running"]  # as last reported
    assert [n.reason.split(":")[0] for n in observed.nodes] == [
        f"Terminating on node {node}" for node in NODES
    ]
    assert observed.nodes_ready == 0
    assert not any(n.ready for n in observed.nodes)


def test_status_says_no_node_is_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"name": "demo", "image": "python:3.11-slim",
                                    "command": ["true"], "num_nodes": 2}))  # fmt: skip
    local = cli(monkeypatch, scenario="hang")
    assert main(["submit", str(spec), "--wait", "running"]) == 0
    local.store.kubelets_down.update(NODES)
    for pod in courses.pods(local.fake, NAMESPACE, "demo"):
        local.store.delete("v1", "Pod", NAMESPACE, pod["metadata"]["name"], "Background")
    capsys.readouterr()
    assert main(["status", "demo"]) == 0
    out = capsys.readouterr().out
    assert "nodes: 0/2 ready" in out
    assert out.count(" Terminating on node gpu-node-") == 2

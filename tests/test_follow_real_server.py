"""``logs`` and ``logs --follow`` as a real API server answers them (KUBEFLOW.md, "Talking to the
API"): the log of a pod not scheduled yet is 204 No Content (empty), follow included; a watch
begun without a resourceVersion first delivers what exists as ADDED; a log read the server
cannot pass on to the node's kubelet is a 500 carrying the dial error. On the port-level fake
(fake clock: requests counted over fake seconds) and through the real client over HTTP."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import schema_check
import yaml
from fakekube.cluster import NAMESPACE, LocalCluster, PortCluster

from kfcompile import lifecycle, structure
from kfcompile.cli import main
from kfcompile.lifecycle.ports import Obj, Ref
from kfcompile.testing import FakeCluster, FakeTimeLimit, courses

NODES = 2


@pytest.fixture
def local() -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as cluster:
        yield cluster


def submit(local: PortCluster | LocalCluster, nodes: int = NODES) -> Ref:
    spec = structure({"name": "demo", "image": "python:3.11-slim", "command": ["python"],
                      "num_nodes": nodes})  # fmt: skip
    return lifecycle.submit(local.session(), spec, "trainjob/v2.3", namespace=NAMESPACE,
                            environ={}).ref  # fmt: skip


def follow_for(local: PortCluster, ref: Ref, rank: int, seconds: float) -> list[str]:
    """Follow rank ``rank`` for ``seconds`` of fake time: the lines shown, and what it said."""
    shown: list[str] = []
    local.clock.limit = local.clock.monotonic() + seconds
    follow = lifecycle.logs(
        local.session(), ref, rank=rank, follow=True, on_waiting=lambda w: shown.append(str(w))
    )
    with pytest.raises(FakeTimeLimit):
        shown += [line.text for line in follow]
    return shown


def never_scheduled(local: PortCluster) -> Ref:
    """A job whose pods exist and never start: no scheduler (as where the real Trainer's
    objects were recorded)."""
    local.fake.at(0.2, lambda: courses.pending(local.fake, NAMESPACE, "demo", "NotScheduled"))
    ref = submit(local)
    local.clock.advance(1)
    assert len(courses.pods(local.fake, NAMESPACE, "demo")) == NODES
    return ref


def rewritten_every(local: PortCluster, seconds: float) -> None:
    """The scheduler rewrites each unschedulable pod's condition as the cluster changes (its
    message counts the nodes): the pod changes, it is no nearer to starting."""
    rewrites = iter(range(5, 1000))

    def rewrite() -> None:
        nodes = next(rewrites)
        for pod in courses.pods(local.fake, NAMESPACE, "demo"):
            condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": f"0/{nodes} nodes are available: {nodes} Insufficient "
                                    "nvidia.com/gpu."}  # fmt: skip
            local.store.change("v1", "Pod", NAMESPACE, pod["metadata"]["name"],
                               {"status": {"conditions": [condition]}})  # fmt: skip
        local.fake.at(seconds, rewrite)

    local.fake.at(seconds, rewrite)


@pytest.mark.parametrize("seconds", [20, 120])
def test_pods_that_never_start_are_waited_on_one_watch(local: PortCluster, seconds: int) -> None:
    """Per rank: one read of its (empty: 204) log, then one watch from the pods' list until
    the pod changes, and no new read of the log while it has not: not 21 reads in 20 s, nor
    one more each time the watch is renewed."""
    ref = never_scheduled(local)
    for rank in range(NODES):
        before = len(local.calls)
        said = follow_for(local, ref, rank, seconds)
        calls = local.calls[before:]
        assert said == [f"rank {rank}: pod {courses.pod_name('demo', rank)} is not scheduled yet"]
        reads = [c for c in calls if c.method == "pod_log"]
        assert len(reads) == 1, [c.method for c in calls]
        watches = [c for c in calls if c.method == "watch"]
        assert 1 <= len(watches) <= 1 + seconds // 30  # one a segment (the job is read again)
        version = str(local.store.resource_version)  # nothing changed since the pods' list
        assert [w.query["rv"] for w in watches] == [version] * len(watches)
        # the job and its pods (which ranks), then the follow's job, pods, log and watch; then
        # at each renewed watch, the job, its pods and the watch
        assert len(calls) <= 6 + 3 * (seconds // 30)


def test_a_pod_rewritten_without_starting_is_not_read_again(local: PortCluster) -> None:
    local.fake.at(0.2, lambda: courses.pending(local.fake, NAMESPACE, "demo", "Unschedulable"))
    ref = submit(local)
    local.clock.advance(1)
    rewritten_every(local, 2.0)
    for rank in range(NODES):
        before = len(local.calls)
        said = follow_for(local, ref, rank, 20)
        reads = [c for c in local.calls[before:] if c.method == "pod_log"]
        assert len(reads) <= 3, f"{len(reads)} log reads in 20 s"
        assert len(said) <= 3 and "cannot start (Unschedulable)" in said[0]


def test_the_watch_wakes_the_follow_when_the_pod_starts(local: PortCluster) -> None:
    ref = never_scheduled(local)
    local.fake.at(25, lambda: courses.start(local.fake, NAMESPACE, "demo"))
    local.fake.at(26, lambda: courses.finish(local.fake, NAMESPACE, "demo"))
    local.clock.limit = local.clock.monotonic() + 60
    lines = [x.text for x in lifecycle.logs(local.session(), ref, rank=1, follow=True)]
    assert lines == ["rank 1: starting", "rank 1: exit 0"]
    assert local.clock.monotonic() < 28  # woken by the pod's change, not by a poll
    assert len(local.calls.matching("pod_log")) <= 3


# --- a node whose kubelet cannot be reached ----------------------------------------------------


def running_on_a_lost_node(local: PortCluster) -> Ref:
    local.fake.at(0.2, lambda: courses.start(local.fake, NAMESPACE, "demo"))
    ref = submit(local)
    local.clock.advance(1)
    local.store.kubelets_down.add("gpu-node-0")  # rank 0's node
    return ref


def test_a_follow_fails_at_once_naming_the_node_whose_kubelet_is_unreachable(
    local: PortCluster,
) -> None:
    ref = running_on_a_lost_node(local)
    start, before = local.clock.monotonic(), len(local.calls)
    with pytest.raises(lifecycle.CannotRead) as info:
        list(lifecycle.logs(local.session(retry_for=60), ref, rank=0, follow=True))
    assert str(info.value) == (
        "rank 0: pod demo-node-0-0-5wpnr is on node gpu-node-0, whose kubelet is unreachable: "
        "its log cannot be read (dial tcp gpu-node-0:10250: connect: connection refused)"
    )
    assert "API server" not in str(info.value)
    assert local.clock.monotonic() - start < 1  # not retried for the session's 60 s
    assert len([c for c in local.calls[before:] if c.method == "pod_log"]) == 1


def test_a_read_says_so_at_once_and_the_other_ranks_are_read(local: PortCluster) -> None:
    ref = running_on_a_lost_node(local)
    told: list[lifecycle.Waiting] = []
    start = local.clock.monotonic()
    lines = list(lifecycle.logs(local.session(retry_for=60), ref, on_waiting=told.append))
    assert [(line.rank, line.text) for line in lines] == [(1, "rank 1: starting")]
    [notice] = told
    assert (notice.rank, notice.reason, notice.stuck) == (0, "KubeletUnreachable", True)
    assert "node gpu-node-0, whose kubelet is unreachable" in str(notice)
    assert local.clock.monotonic() - start < 1
    assert len(local.calls.matching("pod_log")) == NODES


# --- through the real client, over HTTP ----------------------------------------------------------


def scripted(local: LocalCluster, *steps: tuple[float, Callable[[FakeCluster, str, str], None]]
             ) -> None:  # fmt: skip
    """What happens to each TrainJob created: ``(seconds after, step)``."""

    def script(job: Obj) -> None:
        if job["kind"] == "TrainJob":
            name = job["metadata"]["name"]
            for at, step in steps:
                local.fake.at(at, functools.partial(step, local.fake, NAMESPACE, name))

    local.store.on_create.append(script)


def test_a_pod_not_scheduled_is_answered_204_and_the_follow_waits_on_its_watch() -> None:
    with LocalCluster(schema_check.require_shared(), scenario=None) as local:
        not_scheduled = functools.partial(courses.pending, why="NotScheduled")
        scripted(local, (0.05, not_scheduled), (1.0, courses.start), (1.2, courses.finish))
        ref = submit(local, nodes=1)
        while not courses.pods(local.fake, NAMESPACE, "demo"):
            time.sleep(0.01)
        told: list[lifecycle.Waiting] = []
        follow = lifecycle.logs(local.session(), ref, rank=0, follow=True, on_waiting=told.append)
        lines = [line.text for line in follow]
        reads = local.kube.requests.matching("GET", "/log")
        watches = local.kube.requests.matching("GET", "/pods", watch=True)
    assert lines == ["rank 0: starting", "rank 0: exit 0"]
    assert [n.reason for n in told] == ["NotScheduled"]
    assert reads[0].status == 204 and reads[0].query["follow"] == "true"
    assert len(reads) <= 3
    assert watches and all(w.query["resourceVersion"] not in ("", "0") for w in watches)


def test_logs_follow_fails_at_once_when_the_kubelet_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"name": "demo", "image": "python:3.11-slim",
                                    "command": ["true"], "num_nodes": 1}))  # fmt: skip
    with LocalCluster(schema_check.require_shared(), scenario="hang") as local:
        config = ["--kubeconfig", str(local.kubeconfig)]
        assert main(["submit", str(spec), "--wait", "running", *config]) == 0
        local.store.kubelets_down.add("gpu-node-0")
        capsys.readouterr()
        start = time.monotonic()
        code = main(["logs", "demo", "--follow", *config])
        took = time.monotonic() - start
        _, err = capsys.readouterr()
        reads = local.kube.requests.matching("GET", "/log")
    assert code == 1
    assert "pod demo-node-0-0-5wpnr is on node gpu-node-0, whose kubelet is unreachable" in err
    assert "dial tcp gpu-node-0:10250: connect: connection refused" in err
    assert "kept failing" not in err and "Traceback" not in err
    assert [r.status for r in reads] == [500]
    assert took < 10  # not the 60 s the API server's own trouble is ridden out for

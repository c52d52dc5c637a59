"""Deleting jobs at the Cluster port, against the small fake on a fake clock, with the
deletions a real cluster has (issue 9, items 3-5): the ``foregroundDeletion`` finalizer that
holds a job until the garbage collector has deleted its dependents, a garbage collector that
lags (a real one notices a newly installed kind only after up to 30 s) or is absent, and a pod
that stays Terminating on a node whose kubelet does not answer. Nothing here sleeps in real
time; the one CLI test is in test_cli_cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schema_check
from fakekube import jobs
from fakekube.cluster import NAMESPACE, PortCluster

from kfcompile import lifecycle, structure
from kfcompile.lifecycle import StillDeleting
from kfcompile.lifecycle.deleting import Remaining
from kfcompile.lifecycle.ports import Ref
from kfcompile.lifecycle.session import Backoff
from kfcompile.spec.model import JobSpec
from kfcompile.status import State

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
HELD = "held by foregroundDeletion: waiting for the garbage collector"


def cluster(step: float = 0.1) -> PortCluster:
    """Each job's pods run 0.2 s after its create, until the test ends it."""
    local = PortCluster(schema_check.require_shared(), step=step)
    local.fake.on_create.append(jobs.runs(local.fake, ends=None))
    return local


@pytest.fixture
def local() -> Iterator[PortCluster]:
    with cluster() as local:
        yield local


def spec() -> JobSpec:
    return structure(
        {
            "name": "demo",
            "image": "python:3.11-slim",
            "command": ["python", "-c", "print('hi')"],
            "num_nodes": 2,
        }
    )


def submit(local: PortCluster) -> Ref:
    session = local.session()
    return lifecycle.submit(session, spec(), "trainjob/v2.3", namespace=NAMESPACE, environ={}).ref


def running(local: PortCluster) -> Ref:
    ref = submit(local)
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    return ref


def the_job(local: PortCluster) -> dict[str, Any] | None:
    return local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")


def pods(local: PortCluster) -> list[dict[str, Any]]:
    return local.store.list("v1", "Pod", NAMESPACE, "jobset.sigs.k8s.io/jobset-name=demo")


# --- submit right after cancel ------------------------------------------------------------------


def test_submit_right_after_cancel_waits_for_the_old_job_then_creates_it(
    local: PortCluster,
) -> None:
    ref = running(local)
    old = the_job(local)
    assert old is not None
    local.store.gc(lag=3.0)  # the garbage collector notices the deletion 3 s late
    lifecycle.cancel(local.session(), ref)
    told: list[tuple[Remaining, float]] = []
    start, slept = local.clock.monotonic(), len(local.clock.slept)
    done = lifecycle.submit(
        local.session(),
        spec(),
        "trainjob/v2.3",
        namespace=NAMESPACE,
        environ={},
        on_deleting=lambda left, waited: told.append((left, waited)),
    )
    assert done.created  # not "unchanged": the job it found was on its way out
    new = the_job(local)
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    assert not new["metadata"].get("deletionTimestamp")
    assert local.clock.monotonic() - start >= 3.0  # it waited for the garbage collector
    [(left, _)] = told  # said once: what held it did not change until it was gone
    assert left.job is not None and left.job.state is State.DELETING and left.job.reason == HELD
    # The pauses between looks are the session's one backoff, in order.
    pauses = local.clock.slept[slept:]
    assert pauses == [Backoff().delay(i, 0.5) for i in range(len(pauses))]
    assert local.calls.count("create", "TrainJob") == 2


def test_submit_says_when_the_old_job_is_still_being_deleted(local: PortCluster) -> None:
    ref = running(local)
    local.store.gc(running=False)  # no garbage collector: the old job stays
    lifecycle.cancel(local.session(), ref)
    start = local.clock.monotonic()
    with pytest.raises(StillDeleting) as info:
        lifecycle.submit(
            local.session(),
            spec(),
            "trainjob/v2.3",
            namespace=NAMESPACE,
            environ={},
            deleting_wait=20,
        )
    assert str(info.value).startswith(
        f"TrainJob demo in namespace default is still being deleted after 20s ({HELD}): "
        "nothing was created; submit again once it is gone"
    )
    assert 20 <= local.clock.monotonic() - start < 25  # bounded
    assert local.calls.count("create", "TrainJob") == 1


# --- status, list, cancel --wait ----------------------------------------------------------------


def test_status_and_list_show_a_job_being_deleted_and_what_holds_it(
    local: PortCluster,
) -> None:
    ref = running(local)
    local.store.gc(running=False)
    lifecycle.cancel(local.session(), ref)
    state = lifecycle.status(local.session(), ref).state
    assert (state.state, state.reason) == (State.DELETING, HELD)
    assert "only after up to 30 s" in state.message and "2 pods left" in state.message
    [listed] = lifecycle.list_jobs(local.session(), NAMESPACE)
    assert (listed.state.state, listed.state.reason) == (State.DELETING, HELD)
    local.store.gc(running=True)
    local.clock.advance(0.5)
    assert the_job(local) is None and pods(local) == []


def test_a_finished_job_being_deleted_keeps_its_state(local: PortCluster) -> None:
    ref = running(local)
    local.fake.at(1.0, lambda: jobs.finish(local.fake, NAMESPACE, "demo"))
    assert lifecycle.wait(local.session(), ref, "done", timeout=30).state.finished
    local.store.gc(running=False)
    lifecycle.cancel(local.session(), ref)
    state = lifecycle.status(local.session(), ref).state
    assert state.state is State.SUCCEEDED and state.message.endswith(f"; being deleted ({HELD})")


def test_cancel_wait_says_it_waits_for_the_garbage_collector_and_a_pod_terminating(
    local: PortCluster,
) -> None:
    ref = running(local)
    [first, second] = sorted(pods(local), key=lambda p: p["metadata"]["name"])
    node = first["spec"]["nodeName"]
    local.store.kubelets_down.add(node)  # its pods, once deleted, stay Terminating
    told: list[str] = []
    with pytest.raises(StillDeleting) as info:
        lifecycle.cancel(
            local.session(),
            ref,
            wait_gone=True,
            timeout=10,
            on_change=lambda left, waited: told.append(str(left)),
        )
    pod = first["metadata"]["name"]
    terminating = f"pod {pod} (Terminating on node {node}: waiting for its kubelet"
    assert f"still there: TrainJob demo ({HELD}), {terminating}" in str(info.value)
    assert told[-1].startswith(f"TrainJob demo ({HELD}), {terminating}")
    assert second["metadata"]["name"] not in told[-1]  # on a node with a kubelet: gone
    status = lifecycle.status(local.session(), ref)
    assert f"pod {pod} is Terminating on node {node}" in status.state.message
    [left] = status.nodes
    assert left.reason.startswith(f"Terminating on node {node}: waiting for its kubelet")
    local.store.kubelets_down.discard(node)  # the kubelet confirms: the pod goes, then the job
    lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=10)  # (gone by its first call)
    assert the_job(local) is None and pods(local) == []


def test_cancel_wait_rides_out_a_slow_garbage_collector(local: PortCluster) -> None:
    ref = running(local)
    local.store.gc(lag=30.0)  # as a real one with a newly installed kind
    told: list[Remaining] = []
    start = local.clock.monotonic()
    done = lifecycle.cancel(
        local.session(),
        ref,
        wait_gone=True,
        timeout=60,
        on_change=lambda left, _: told.append(left),
    )
    assert done.existed and the_job(local) is None and pods(local) == []
    assert 30 <= local.clock.monotonic() - start < 36  # a look at most one capped pause late
    assert told[0].job is not None and told[0].job.reason == HELD


# --- a DELETE whose answer was lost --------------------------------------------------------------


def test_cancel_whose_delete_answer_was_lost_says_it_deleted_the_job() -> None:
    # Ticks every 0.05 s: the garbage collector is done before the DELETE is sent again.
    with cluster(step=0.05) as local:
        ref = running(local)
        session = local.session()
        lifecycle.status(session, ref)  # the API has answered this session
        local.faults.add("delete", "TrainJob", lost=True)  # done, its answer never came
        done = lifecycle.cancel(session, ref)
        assert [c.fault is not None for c in local.calls.matching("delete", "TrainJob")] == [
            True,
            False,  # sent again: 404, the first one deleted it
        ]
        assert done.existed and the_job(local) is None

"""Deleting jobs at the Cluster port, against the small fake on a fake clock, with the
deletions a real cluster has (issue 9, items 3-5; issue 28, item 1): the ``foregroundDeletion``
finalizer that holds a job until the garbage collector has deleted its dependents (another
client's delete: kfcompile's own is Background), a garbage collector that lags (a real one
notices a newly installed kind only after up to 30 s) or is absent, a pod that stays
Terminating on a node whose kubelet does not answer, and the Trainer re-creating the JobSet of
a Kueue-managed TrainJob deleted in the foreground. Nothing here sleeps in real time; the CLI's
tests are in test_cli_cluster.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, PortCluster, live

from kfcompile import lifecycle, structure
from kfcompile.lifecycle import StillDeleting
from kfcompile.lifecycle.deleting import Remaining
from kfcompile.lifecycle.ports import Ref
from kfcompile.lifecycle.session import Backoff
from kfcompile.spec.model import JobSpec
from kfcompile.status import State
from kfcompile.testing import courses

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"
HELD = "held by foregroundDeletion: waiting for the garbage collector"


def cluster(step: float = 0.1) -> PortCluster:
    """Each job's pods run 0.2 s after its create (a queued job's once Kueue admits it, 0.5 s
    after), until the test ends it."""
    local = PortCluster(schema_check.require_shared(), step=step)
    local.store.on_create.append(lambda job: live(local.fake, job, "hang"))
    return local


@pytest.fixture
def local() -> Iterator[PortCluster]:
    with cluster() as local:
        yield local


def spec(**more: Any) -> JobSpec:
    return structure(
        {
            "name": "demo",
            "image": "python:3.11-slim",
            "command": ["python", "-c", "print('hi')"],
            "num_nodes": 2,
            **more,
        }
    )


def submit(local: PortCluster, target: str = "trainjob/v2.3", **more: Any) -> Ref:
    session = local.session()
    return lifecycle.submit(session, spec(**more), target, namespace=NAMESPACE, environ={}).ref


def running(local: PortCluster, target: str = "trainjob/v2.3", **more: Any) -> Ref:
    ref = submit(local, target, **more)
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    return ref


def the_job(local: PortCluster) -> dict[str, Any] | None:
    return local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")


def pods(local: PortCluster) -> list[dict[str, Any]]:
    return local.store.list("v1", "Pod", NAMESPACE, "jobset.sigs.k8s.io/jobset-name=demo")


def made(local: PortCluster) -> list[str]:
    """What the Trainer, JobSet and Job controllers made of job demo that is still there."""
    jobset = local.store.get(JOBSET, "JobSet", NAMESPACE, "demo")
    labelled = [
        obj
        for kind in ("Job", "Pod")
        for obj in local.store.list(
            "batch/v1" if kind == "Job" else "v1", kind, NAMESPACE, JOBSET_LABEL
        )
    ]
    return [
        f"{o['kind']} {o['metadata']['name']}" for o in [*([jobset] if jobset else []), *labelled]
    ]


JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name=demo"


def foreground_delete(local: PortCluster, ref: Ref) -> None:
    """Another client's delete, as ``kubectl delete --cascade=foreground`` sends it."""
    local.store.delete(ref.api_version, ref.kind, ref.namespace, ref.name, "Foreground")


def jobsets_created(local: PortCluster) -> int:
    return sum(t == "ADDED" and o["kind"] == "JobSet" for _, t, o, _ in local.store.changes)


# --- submit right after another client's foreground delete --------------------------------------


def test_submit_right_after_a_foreground_delete_waits_for_the_old_job_then_creates_it(
    local: PortCluster,
) -> None:
    ref = running(local)
    old = the_job(local)
    assert old is not None
    local.store.gc(lag=3.0)  # the garbage collector notices the deletion 3 s late
    foreground_delete(local, ref)
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
    foreground_delete(local, ref)
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
    foreground_delete(local, ref)
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
    local.fake.at(1.0, lambda: courses.finish(local.fake, NAMESPACE, "demo"))
    assert lifecycle.wait(local.session(), ref, "done", timeout=30).state.finished
    local.store.gc(running=False)
    foreground_delete(local, ref)
    state = lifecycle.status(local.session(), ref).state
    assert state.state is State.SUCCEEDED and state.message.endswith(f"; being deleted ({HELD})")


def test_cancel_deletes_in_the_background(local: PortCluster) -> None:
    """The job goes at once; what it made goes after, by the garbage collector."""
    ref = running(local)
    local.store.gc(running=False)
    assert lifecycle.cancel(local.session(), ref).existed
    [call] = local.calls.matching("delete", "TrainJob")
    assert call.query["propagation"] == "Background"
    assert the_job(local) is None
    assert made(local) == [
        "JobSet demo",
        "Job demo-node-0",
        "Pod demo-node-0-0-5wpnr",
        "Pod demo-node-0-1-mtwt2",
    ]
    local.store.gc(running=True)
    local.settle()
    assert made(local) == []


def test_cancel_wait_done_by_its_second_look_says_nothing() -> None:
    """Right after the delete the JobSet, Job and pods are there (the collector runs apart from
    the requests); a wait they are gone from by its next look has nothing to tell."""
    with cluster(step=0.05) as local:  # a tick within the first pause (0.075 s)
        ref = running(local)
        told: list[str] = []
        lifecycle.cancel(
            local.session(),
            ref,
            wait_gone=True,
            timeout=10,
            on_change=lambda left, _: told.append(str(left)),
        )
        assert told == [] and made(local) == []
        assert local.calls.count("list", "Pod") >= 2  # it did look twice


def test_cancel_wait_names_a_pod_left_terminating(local: PortCluster) -> None:
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
    assert f"still there: {terminating}" in str(info.value)
    assert told[-1].startswith(terminating)  # the job, its JobSet and Job are gone
    assert second["metadata"]["name"] not in told[-1]  # on a node with a kubelet: gone
    local.store.kubelets_down.discard(node)  # the kubelet confirms: the pod goes
    lifecycle.wait_gone(local.session(), ref, dependents=True, timeout=10)
    assert made(local) == []


@pytest.mark.parametrize(
    ("target", "first_told"),
    [
        ("trainjob/v2.3", ["JobSet demo", "Job demo-node-0", "pod demo-node-0-0-5wpnr"]),
        ("pytorchjob/v1", ["pod demo-master-0", "pod demo-worker-0"]),
    ],
)
def test_cancel_wait_rides_out_a_slow_garbage_collector(
    local: PortCluster, target: str, first_told: list[str]
) -> None:
    ref = running(local, target)
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
    assert done.existed and local.store.get(ref.api_version, ref.kind, NAMESPACE, "demo") is None
    assert local.store.list("v1", "Pod", NAMESPACE) == []
    assert 30 <= local.clock.monotonic() - start < 36  # a look at most one capped pause late
    assert told[0].job is None  # gone at once: it waited for what the job made
    assert list(told[0].dependents[: len(first_told)]) == first_told


def test_cancel_wait_is_for_the_job_deleted_not_one_submitted_again_meanwhile(
    local: PortCluster,
) -> None:
    """The job goes at once, what it made 2 s later; meanwhile a job of the same name is
    created again (another submit) and runs. The wait is for the deleted job (its uid) and
    what it made: it returns once those are gone, never waiting on the new job, its JobSet,
    Job or pods (on which it would wait its whole timeout)."""
    ref = running(local)
    old = the_job(local)
    assert old is not None
    local.store.gc(lag=2.0)
    again = {k: v for k, v in old.items() if k != "status"}
    again["metadata"] = {
        k: v for k, v in old["metadata"].items() if k in ("name", "namespace", "labels")
    }
    local.fake.at(0.5, lambda: local.store.create(again))
    start = local.clock.monotonic()
    done = lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=60)
    assert done.existed and local.clock.monotonic() - start < 10
    new = the_job(local)
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    jobset = local.store.get(JOBSET, "JobSet", NAMESPACE, "demo")
    assert jobset is not None  # the new job's, running
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == new["metadata"]["uid"]
    assert len(pods(local)) == 2
    # all there is the new job's (the fake's Trainer takes over the JobSet of that name)
    assert [p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-uid"] for p in pods(local)] == [
        jobset["metadata"]["uid"]
    ] * 2


def test_cancel_never_deletes_a_job_submitted_again_before_its_delete_is_resent(
    local: PortCluster,
) -> None:
    """The first DELETE deleted the job, but its answer never came; before it is sent again a
    job of the same name is submitted. The DELETE names the uid read (a precondition), so the
    one sent again is refused and the new job runs on; the job read counts as cancelled."""
    ref = running(local)
    old = the_job(local)
    assert old is not None
    again = {k: v for k, v in old.items() if k != "status"}
    again["metadata"] = {
        k: v for k, v in old["metadata"].items() if k in ("name", "namespace", "labels")
    }
    local.faults.add("delete", "TrainJob/demo", lost=True)

    def submitted_again(call: Any) -> None:
        if call.method == "delete" and call.kind == "TrainJob" and call.fault is None:
            local.store.create(again)

    local.calls.listeners.append(submitted_again)
    done = lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=60)
    assert done.existed
    new = the_job(local)
    assert new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]
    assert not new["metadata"].get("deletionTimestamp")
    sent = [c.query["uid"] for c in local.calls.matching("delete", "TrainJob/demo")]
    assert sent == [old["metadata"]["uid"]] * 2


# --- a job Kueue manages (issue 28, item 1) -------------------------------------------------------


@pytest.mark.parametrize("queued", [True, False])
def test_a_foreground_delete_of_a_kueue_managed_trainjob_never_ends(
    local: PortCluster, queued: bool
) -> None:
    """As recorded with the real Trainer v2.3.0 beside Kueue v0.19.2: while the TrainJob waits
    for its dependents the Trainer re-creates its JobSet (51 times a minute), so the job stays;
    the same job without a queue goes."""
    ref = running(local, **({"queue": QUEUE} if queued else {}))
    before = jobsets_created(local)
    foreground_delete(local, ref)
    local.clock.advance(60.0)
    job = the_job(local)
    if not queued:
        assert job is None and made(local) == [] and jobsets_created(local) == before
        return
    assert job is not None and job["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert jobsets_created(local) - before >= 51
    with pytest.raises(StillDeleting, match=f"still there: TrainJob demo \\({HELD}\\)"):
        lifecycle.wait_gone(local.session(), ref, timeout=30)


def test_cancel_wait_of_a_kueue_managed_job_returns_once_all_it_made_is_gone(
    local: PortCluster,
) -> None:
    ref = running(local, queue=QUEUE)
    assert made(local)[:2] == ["JobSet demo", "Job demo-node-0"]
    before, start = jobsets_created(local), local.clock.monotonic()
    told: list[str] = []
    done = lifecycle.cancel(
        local.session(),
        ref,
        wait_gone=True,
        timeout=60,
        on_change=lambda left, _: told.append(str(left)),
    )
    assert done.existed and the_job(local) is None and made(local) == []
    assert local.clock.monotonic() - start < 1.0  # (Foreground: never; 60 s, then StillDeleting)
    assert jobsets_created(local) == before  # the Trainer re-created nothing
    [call] = local.calls.matching("delete", "TrainJob")
    assert call.query["propagation"] == "Background"


def test_cancel_ends_a_kueue_managed_job_a_foreground_delete_left_stuck(local: PortCluster) -> None:
    """A delete with Background propagation drops the ``foregroundDeletion`` finalizer of an
    object already being deleted (as the API server does): cancel ends what an earlier
    Foreground delete (kubectl's, or kfcompile's before) left re-creating its JobSet."""
    ref = running(local, queue=QUEUE)
    foreground_delete(local, ref)
    local.clock.advance(10.0)
    assert the_job(local) is not None  # stuck
    lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=30)
    assert the_job(local) is None and made(local) == []


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

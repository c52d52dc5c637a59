"""``wait`` on a job Kueue holds in a queue (suspended, no pod, its Workload saying why): what
changes then is Kueue's word, so the wait watches the job's Workload in long segments rather
than the job in segments of ``WATCH_SEGMENT`` with a pod list and a Workload read after each
(issue 28, item 4: 543 requests for a job admitted after 11 minutes). Each reason Kueue gives
is still said as it changes, and the wait still returns as soon as the job runs. On the
port-level fake (``kfcompile.testing``), through each Kueue API a release serves, and with no
Kueue (then as before: the job watched in short segments)."""

from __future__ import annotations

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, SERVES, LocalCluster, PortCluster
from test_lifecycle import TRAINJOB, spec, submit

from kfcompile import lifecycle, structure
from kfcompile.lifecycle.observe import Observation, PodsListed
from kfcompile.lifecycle.ports import Transient
from kfcompile.lifecycle.session import Pause, Slept
from kfcompile.lifecycle.waiting import (
    HELD_SEGMENT,
    WATCH_SEGMENT,
    Bookmark,
    KueueMoved,
    Listed,
    ListJob,
    ReadWorkload,
    Refused,
    StreamEnded,
    Trouble,
    Waiter,
    WatchJob,
    WatchWorkload,
)
from kfcompile.status import State
from kfcompile.testing import Store, courses
from kfcompile.testing import kueue as fake_kueue

ADMITTED_AFTER = 660.0  # seconds: 11 minutes in the queue
STARTS = 0.2  # seconds after its admission the job's pods run (``courses.runs``)
PENDING_AT, RETRY_AT = 60.0, 400.0  # Kueue's other reasons, the job itself unchanged


def checking(store: Store, state: str) -> None:
    """The job's Workload: quota reserved, the admission check ``prov`` ``state``."""
    job = store.items[(TRAINJOB, "TrainJob", NAMESPACE, "demo")]
    fake_kueue.checking(store, job, "prov", "Waiting for capacity", state)


def queued_eleven_minutes(
    serves: str,
) -> tuple[list[tuple[float, State, str]], float, int]:
    """A queued job admitted after 11 minutes (Kueue serving ``SERVES[serves]``), two other
    reasons in between; ``wait --until running`` on it: what it said (when, the state, the
    reason), when it returned after the job was admitted, and its requests."""
    with PortCluster(schema_check.require_shared(), kueue=serves) as cluster:
        cluster.store.on_create.append(
            courses.queued(cluster.fake, admits=ADMITTED_AFTER, starts=STARTS, ends=None)
        )
        ref = submit(cluster, spec(queue=QUEUE))
        cluster.fake.at(PENDING_AT, lambda: checking(cluster.store, "Pending"))
        cluster.fake.at(RETRY_AT, lambda: checking(cluster.store, "Retry"))
        start = cluster.clock.monotonic()
        before = len(cluster.calls)
        said: list[tuple[float, State, str]] = []

        def told(obs: Observation, elapsed: float) -> None:
            said.append((elapsed, obs.state.state, obs.state.reason))

        obs = lifecycle.wait(cluster.session(), ref, "running", timeout=3600, on_change=told)
        assert obs.state.state is State.RUNNING
        returned = cluster.clock.monotonic() - start - ADMITTED_AFTER
        return said, returned, len(cluster.calls) - before


@pytest.mark.parametrize("serves", list(SERVES))
def test_a_job_held_in_a_queue_is_waited_for_with_a_few_requests(serves: str) -> None:
    said, returned, requests = queued_eleven_minutes(serves)
    waiting = [(state, reason) for at, state, reason in said if at < ADMITTED_AFTER]
    assert waiting == [
        (State.SUSPENDED, "Queued"),
        (State.SUSPENDED, "AdmissionCheckPending"),
        (State.SUSPENDED, "AdmissionCheckRetry"),
    ], said
    assert said[-1][1:] == (State.RUNNING, "JobsActive"), said
    # each reason said as Kueue gave it, not a segment later
    assert PENDING_AT <= said[1][0] < PENDING_AT + 1, said
    assert RETRY_AT <= said[2][0] < RETRY_AT + 1, said
    # returned as soon as the pods ran after the admission
    assert STARTS <= returned < STARTS + 1, returned
    assert requests <= 40, requests  # 543 when the job was watched in 5 s segments


def test_with_no_kueue_a_job_without_pods_is_watched_as_before() -> None:
    """No Kueue API served: no Workload to watch, so a job whose pods come late is watched in
    short segments (a pod list after each), and the wait returns as soon as they run."""
    with PortCluster(schema_check.require_shared(), kueue=None) as cluster:
        cluster.store.on_create.append(courses.runs(cluster.fake, starts=60.0, ends=None))
        ref = submit(cluster, spec())
        start, before = cluster.clock.monotonic(), len(cluster.calls)
        obs = lifecycle.wait(cluster.session(), ref, "running", timeout=3600)
        returned = cluster.clock.monotonic() - start
        calls = cluster.calls[before:]
    assert obs.state.state is State.RUNNING
    assert 60.0 <= returned < 61.0, returned
    assert not [c for c in calls if c.kind == "Workload"]
    watches = [c for c in calls if c.method == "watch"]
    assert len(watches) >= 60.0 / WATCH_SEGMENT, calls  # a watch per short segment


# --- the machine: when it watches the Workload, and what that watch's answers do --------------

HELD_JOB = {
    "apiVersion": TRAINJOB,
    "kind": "TrainJob",
    "metadata": {"name": "demo", "namespace": NAMESPACE, "uid": "u1", "resourceVersion": "10",
                 "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
    "spec": {"suspend": True},
    "status": {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended",
                               "message": "TrainJob is suspended"}]},
}  # fmt: skip
WAITING_WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "trainjob-demo-1a2b3", "namespace": NAMESPACE, "resourceVersion": "7"},
    "spec": {"queueName": QUEUE},
    "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                               "message": "no quota"}]},
}  # fmt: skip
ADMITTED_WORKLOAD = {
    **WAITING_WORKLOAD,
    "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted",
                               "message": "The workload is admitted"}]},
}  # fmt: skip
TERMINATING_POD = {
    "metadata": {"name": "demo-node-0-0-x", "namespace": NAMESPACE,
                 "deletionTimestamp": "2025-06-02T09:14:03Z",
                 "labels": {"jobset.sigs.k8s.io/jobset-name": "demo"}},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}  # fmt: skip


def fed(*answers: object, at: float = 1.0) -> Waiter:
    waiter = Waiter.start("running", 0.0, 3600.0, retry_for=20.0)
    for answer in (Listed(HELD_JOB, "10"), *answers):
        waiter = waiter.receive(answer, at)  # type: ignore[arg-type]
    return waiter


def test_a_job_kueue_holds_with_no_pod_has_its_workload_watched_in_long_segments() -> None:
    waiter = fed(PodsListed([], workload=WAITING_WORKLOAD))
    assert waiter.next_request(1.0) == WatchWorkload(WAITING_WORKLOAD, HELD_SEGMENT)
    assert waiter.next_request(3590.5) == WatchWorkload(WAITING_WORKLOAD, 10)  # what is left


@pytest.mark.parametrize(
    "listed",
    [
        PodsListed([TERMINATING_POD], workload=WAITING_WORKLOAD),  # evicted: pods still going
        PodsListed([], workload=ADMITTED_WORKLOAD),  # admitted, the job not unsuspended yet
        PodsListed([]),  # no Workload (no Kueue, or it may not be read)
    ],
)
def test_otherwise_the_job_is_watched_in_short_segments(listed: PodsListed) -> None:
    assert fed(listed).next_request(1.0) == WatchJob("10", WATCH_SEGMENT)


HELD_NOW = PodsListed([], workload=WAITING_WORKLOAD)


@pytest.mark.parametrize(
    "answer", [KueueMoved(ADMITTED_WORKLOAD), StreamEnded()], ids=["changed", "segment over"]
)
def test_the_workload_changing_or_its_segment_ending_lists_the_job_again(answer: object) -> None:
    waiter = fed(HELD_NOW, at=1.0).receive(answer, 2.0)  # type: ignore[arg-type]
    assert waiter.next_request(2.0) == ListJob()
    assert not waiter.streaming  # the Workload's watch is closed


def test_a_bookmark_of_the_workload_is_not_the_job_s_version() -> None:
    waiter = fed(HELD_NOW).receive(Bookmark("99"), 2.0)
    assert waiter.next_request(2.0) == ReadWorkload()
    assert waiter.version == "10"


def test_trouble_on_the_workload_s_watch_pauses_and_watches_it_again() -> None:
    waiter = fed(HELD_NOW).receive(Trouble(Transient(503, "ServiceUnavailable", "busy")), 2.0)
    assert isinstance(waiter.next_request(2.0), Pause)
    assert waiter.receive(Slept(), 3.0).next_request(3.0) == WatchWorkload(
        WAITING_WORKLOAD, HELD_SEGMENT
    )


def test_a_workload_watch_refused_leaves_the_job_watched_as_before() -> None:
    waiter = fed(HELD_NOW).receive(Refused(), 2.0)
    assert waiter.next_request(2.0) == ListJob()
    again = waiter.receive(Listed(HELD_JOB, "12"), 2.0).receive(HELD_NOW, 2.0)
    assert again.next_request(2.0) == WatchJob("12", WATCH_SEGMENT)


# --- on the port-level fake: a held job deleted, Workloads that may not be watched --------------


def test_a_held_job_deleted_ends_the_wait_at_once() -> None:
    """Its Workload goes with it (owned by it): that is a change of the Workload watched."""
    with PortCluster(schema_check.require_shared()) as cluster:
        cluster.store.on_create.append(
            courses.queued(cluster.fake, admits=ADMITTED_AFTER, ends=None)
        )
        ref = submit(cluster, spec(queue=QUEUE))
        cluster.fake.at(30.0, lambda: cluster.store.delete(TRAINJOB, "TrainJob", NAMESPACE,
                                                           "demo", "Background"))  # fmt: skip
        start = cluster.clock.monotonic()
        with pytest.raises(lifecycle.JobDeleted):
            lifecycle.wait(cluster.session(), ref, "running", timeout=3600)
        assert cluster.clock.monotonic() - start < 30.0 + 2.0


def test_workloads_that_may_not_be_watched_leave_the_job_watched_as_before() -> None:
    """A Role granting ``list`` of Workloads, not ``watch``: one watch refused, then the job
    watched in short segments (each reason said at the next look), and no Workload watch
    again."""
    with PortCluster(schema_check.require_shared()) as cluster:
        cluster.store.on_create.append(
            courses.queued(cluster.fake, admits=120.0, starts=STARTS, ends=None)
        )
        ref = submit(cluster, spec(queue=QUEUE))
        cluster.faults.add("watch", "Workload", status=403, times=1000)
        cluster.fake.at(PENDING_AT, lambda: checking(cluster.store, "Pending"))
        said: list[tuple[float, str]] = []
        obs = lifecycle.wait(
            cluster.session(),
            ref,
            "running",
            timeout=3600,
            on_change=lambda o, at: said.append((at, o.state.reason)),
        )
        assert obs.state.state is State.RUNNING
        assert cluster.calls.count("watch", "Workload/") == 1
    assert [reason for _, reason in said][:2] == ["Queued", "AdmissionCheckPending"]
    assert PENDING_AT <= said[1][0] <= PENDING_AT + WATCH_SEGMENT + 1, said
    assert 120.0 + STARTS <= said[-1][0] < 120.0 + STARTS + 1, said


# --- over HTTP: the Workload watched through the served version, from its state now ------------


@pytest.mark.parametrize(("serves", "version"), [("both", "v1beta2"), ("v1beta1", "v1beta1")])
def test_over_http_the_workload_is_watched_by_name_through_the_served_version(
    serves: str, version: str
) -> None:
    shared = schema_check.require_shared()
    with LocalCluster(shared, kueue=serves) as local:
        local.admits = 2.0  # fake seconds (a tenth of that in real time)
        job = structure(
            {"name": "demo", "image": "python:3", "command": ["python"], "queue": QUEUE}
        )
        session = local.session()
        submitted = lifecycle.submit(session, job, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        obs = lifecycle.wait(session, submitted.ref, "running", timeout=60)
        path = f"/apis/kueue.x-k8s.io/{version}/namespaces/{NAMESPACE}/workloads"
        watches = local.kube.requests.matching("GET", path, watch=True)
    assert obs.state.state is State.RUNNING
    assert watches, "the Workload was not watched"
    name = watches[0].query["fieldSelector"]
    assert name.startswith("metadata.name=trainjob-demo-"), name
    assert watches[0].query.get("resourceVersion", "") == ""  # from its state now

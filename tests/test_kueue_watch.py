"""Kueue's reason in ``watch_jobs`` when only the Workload changes: a queued job stays
``SUSPENDED`` and unchanged while Kueue's word on it moves (waiting for quota, an admission
check Pending, then Retry), and each new reason is an event (``CHANGED``), read from one list
and one watch of the Workloads through the Kueue API the cluster serves; then the admission
is the job's own change. First ``Held`` (what makes the event) and the ``Workloads`` reading,
then the driver on the port-level fake, then over HTTP (the URL is the served version's)."""

from __future__ import annotations

import threading
import time
from contextlib import closing
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, SERVES, LocalCluster, PortCluster
from test_lifecycle import TRAINJOB, spec, submit

from kfcompile import lifecycle, structure
from kfcompile.kinds import TRAINJOB as TRAINJOB_KIND
from kfcompile.kinds import JobState, State
from kfcompile.lifecycle import Happened, JobEvent
from kfcompile.lifecycle.job_events import (
    Held,
    KueueNews,
    PageListed,
    Removed,
    Said,
    Watcher,
    Workloads,
    happened,
    watch_workloads,
)
from kfcompile.lifecycle.ports import Ref
from kfcompile.lifecycle.waiting import Changed
from kfcompile.testing import Store, courses
from kfcompile.testing import kueue as fake_kueue

KUEUE = "kueue.x-k8s.io/v1beta2"
JOB = Ref(TRAINJOB, "TrainJob", NAMESPACE, "demo")
QUEUED_WORD = ("Queued", "Kueue: waiting in queue team-a: no quota")
QUEUED = JobState(State.SUSPENDED, *QUEUED_WORD)
CHECK = ("AdmissionCheckPending", "Kueue admission check prov is Pending: Waiting")


def event(what: Happened, state: JobState) -> JobEvent:
    return JobEvent(TRAINJOB_KIND, JOB, what, state)


def said(word: tuple[str, str] | None, uid: str = "uid-1", job: Ref = JOB) -> KueueNews:
    return KueueNews((Said(job, uid, word),), ready=True)


OWN = JobState(State.SUSPENDED, "Suspended", "TrainJob is suspended")  # the job's own state


# --- Held: Kueue's word on the jobs' events, and alone ------------------------------------------


def test_the_events_wait_for_the_workloads_and_then_have_kueue_s_word() -> None:
    held = Held(ready=False)
    assert held.jobs((event(Happened.LISTED, OWN),)) == []
    assert held.workloads(KueueNews((Said(JOB, "uid-1", QUEUED_WORD),), ready=False)) == []
    [listed] = held.workloads(KueueNews((), ready=True))
    assert (listed.what, listed.state) == (Happened.LISTED, QUEUED)


def test_a_new_reason_for_a_suspended_job_is_a_changed_event() -> None:
    held = Held(ready=True)
    held.workloads(said(QUEUED_WORD))
    [listed] = held.jobs((event(Happened.LISTED, OWN),))
    assert listed.state == QUEUED
    [changed] = held.workloads(said(CHECK))
    assert (changed.what, changed.state) == (Happened.CHANGED, JobState(State.SUSPENDED, *CHECK))
    assert changed.previous == QUEUED
    assert held.workloads(said(CHECK)) == []  # the same word again: nothing new
    # the message alone changing is no event (as for the job's own state)
    assert held.workloads(said((CHECK[0], "Kueue admission check prov is Pending: more"))) == []


def test_kueue_letting_go_makes_no_event_and_its_word_is_for_suspended_jobs_only() -> None:
    """Kueue's word dropping (admitted) is told by the job's own change that follows; a job
    no longer suspended is its own (a word that came first never undoes an admission); the
    word of a Workload of the job before (another uid) going does not clear the new one's."""
    held = Held(ready=True)
    held.workloads(said(QUEUED_WORD))
    held.jobs((event(Happened.LISTED, OWN),))
    assert held.workloads(said(CHECK, uid="uid-0")) != []
    assert held.workloads(said(None, uid="uid-old")) == []
    assert held.jobs((event(Happened.CHANGED, OWN),))[0].state.reason == CHECK[0]
    assert held.workloads(said(None)) == []
    resumed = JobState(State.PENDING, "Resumed", "TrainJob is resumed")
    held.workloads(said(QUEUED_WORD))
    [admitted] = held.jobs((event(Happened.ADMITTED, resumed),))
    assert admitted.state == resumed
    assert held.workloads(said(CHECK)) == []
    held.jobs((event(Happened.SUSPENDED, OWN), event(Happened.DELETED, OWN)))
    assert held.workloads(said(QUEUED_WORD)) == []
    assert held.workloads(said(CHECK, job=Ref(TRAINJOB, "TrainJob", NAMESPACE, "other"))) == []


# --- the Workloads reading ------------------------------------------------------------------------


def workload(name: str = "w", **meta: Any) -> dict[str, Any]:
    owner = {"apiVersion": TRAINJOB, "kind": "TrainJob", "name": "demo", "uid": "uid-1",
             "controller": True}  # fmt: skip
    metadata = {"name": name, "namespace": NAMESPACE, "resourceVersion": "5",
                "ownerReferences": [owner], **meta}  # fmt: skip
    conditions = [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                   "message": "no quota"}]  # fmt: skip
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": metadata,
            "spec": {"queueName": "team-a"}, "status": {"conditions": conditions}}  # fmt: skip


@pytest.mark.parametrize(
    "owners",
    [
        [],
        [{"kind": "TrainJob", "name": "demo", "uid": "u"}],  # not its controller
        [{"kind": "Deployment", "name": "demo", "uid": "u", "controller": True}],
        "hostile",
        [{"kind": "TrainJob", "name": 3, "controller": True}],
    ],
)
def test_a_workload_of_no_job_of_ours_is_passed_over(owners: object) -> None:
    assert Workloads(KUEUE).seen(workload(ownerReferences=owners)) is None


def test_the_watch_of_workloads_tells_what_each_says_of_its_job() -> None:
    reads = Workloads(KUEUE)
    watcher = Watcher.start(reads, 0.0, 10.0).receive(PageListed([workload()], "5"), 0.0)
    word = ("Queued", "Kueue: waiting in queue team-a: no quota")
    assert watcher.events == (Said(JOB, "uid-1", word),)
    deleting = workload(resourceVersion="6", deletionTimestamp="2025-06-02T09:14:03Z")
    watcher = watcher.receive(Changed(deleting), 0.0)
    assert watcher.events == (Said(JOB, "uid-1", None),)  # a Workload going says nothing
    assert watcher.receive(Removed(deleting), 0.0).events == (Said(JOB, "uid-1", None),)


# --- the driver on the port-level fake ------------------------------------------------------------

ADMITTED_AFTER = 660.0  # seconds: 11 minutes in the queue


def checking(store: Store, state: str) -> None:
    """The job's Workload: quota reserved, the admission check ``prov`` ``state``."""
    job = store.items[(TRAINJOB, "TrainJob", NAMESPACE, "demo")]
    fake_kueue.checking(store, job, "prov", "Waiting for capacity", state)


@pytest.mark.parametrize("serves", list(SERVES))
def test_watch_jobs_says_each_reason_kueue_gives_while_the_job_is_unchanged(serves: str) -> None:
    """Queued (no quota), then at 1 minute an admission check Pending, at 6:40 Retry: the job
    itself unchanged; admitted at 11 minutes, it runs."""
    crds = ("trainjobs-v2.3.0.yaml",)
    with PortCluster(schema_check.require_shared(), kueue=serves, crds=crds) as cluster:
        cluster.store.on_create.append(
            courses.queued(cluster.fake, admits=ADMITTED_AFTER, ends=None)
        )
        submit(cluster, spec(queue=QUEUE))
        cluster.fake.at(60.0, lambda: checking(cluster.store, "Pending"))
        cluster.fake.at(400.0, lambda: checking(cluster.store, "Retry"))
        before = len(cluster.calls)
        seen: list[JobEvent] = []
        with closing(lifecycle.watch_jobs(cluster.session(), NAMESPACE)) as events:
            for one in events:
                seen.append(one)
                if one.state.state is State.RUNNING:
                    break
        workloads = {c.api_version for c in cluster.calls[before:] if c.kind == "Workload"
                     and c.method in ("list", "watch")}  # fmt: skip
    assert [(e.what, e.state.state, e.state.reason) for e in seen] == [
        (Happened.LISTED, State.SUSPENDED, "Queued"),
        (Happened.CHANGED, State.SUSPENDED, "AdmissionCheckPending"),
        (Happened.CHANGED, State.SUSPENDED, "AdmissionCheckRetry"),
        (Happened.ADMITTED, State.PENDING, "Resumed"),
        (Happened.RUNNING, State.RUNNING, "JobsActive"),
    ]
    assert seen[1].state.message == "Kueue admission check prov is Pending: Waiting for capacity"
    assert seen[2].previous == seen[1].state
    assert workloads == {f"kueue.x-k8s.io/{SERVES[serves][0]}"}  # the newest served


def test_workloads_that_may_not_be_read_end_their_watch_and_leave_the_jobs_own_states() -> None:
    with PortCluster(schema_check.require_shared(), crds=("trainjobs-v2.3.0.yaml",)) as cluster:
        cluster.store.on_create.append(courses.queued(cluster.fake, admits=30.0, ends=None))
        submit(cluster, spec(queue=QUEUE))
        cluster.faults.add("list", "Workload", status=403, times=10)
        told = list(watch_workloads(cluster.session(), KUEUE, NAMESPACE))  # no error
        assert told == [KueueNews((), ready=True)]
        with closing(lifecycle.watch_jobs(cluster.session(), NAMESPACE)) as events:
            first, then = next(events), next(events)
        assert cluster.calls.count("watch", "Workload") == 0
    assert (first.what, first.state.reason) == (Happened.LISTED, "Suspended")
    assert (then.what, then.state.reason) == (Happened.ADMITTED, "Resumed")


# --- over HTTP: the URL is the served Kueue version's ---------------------------------------------


def _when(condition: Any, then: Any) -> threading.Thread:
    """``then()`` once ``condition()`` holds (polled in real time, for 30 s at most)."""

    def run() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not condition():
            time.sleep(0.02)
        then()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(("serves", "version"), [("both", "v1beta2"), ("v1beta1", "v1beta1")])
def test_over_http_the_workloads_are_watched_through_the_served_version(
    serves: str, version: str
) -> None:
    shared = schema_check.require_shared()
    with LocalCluster(shared, auto=False, scenario=None, kueue=serves) as local:
        local.store.on_create.append(courses.queued(local.fake, admits=float("inf"), ends=None))
        job = structure(
            {"name": "demo", "image": "python:3", "command": ["python"], "queue": QUEUE}
        )
        lifecycle.submit(local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        path = f"/apis/kueue.x-k8s.io/{version}/namespaces/{NAMESPACE}/workloads"
        seen: list[tuple[Happened, str]] = []
        changer = _when(  # once the job was listed and the Workloads are watched
            lambda: bool(seen) and local.kube.requests.count("GET", path, watch=True) > 0,
            lambda: checking(local.store, "Pending"),
        )
        with closing(lifecycle.watch_jobs(local.session(), NAMESPACE)) as events:
            for one in events:
                seen.append((one.what, one.state.reason))
                if one.what is Happened.CHANGED:
                    break
        changer.join(30)
        other = "v1beta1" if version == "v1beta2" else "v1beta2"
        elsewhere = local.kube.requests.count("GET", f"/apis/kueue.x-k8s.io/{other}/", watch=True)
    assert seen == [(Happened.LISTED, "Queued"), (Happened.CHANGED, "AdmissionCheckPending")]
    assert elsewhere == 0


def test_workloads_that_may_not_be_watched_end_their_watch_after_the_list() -> None:
    """A Role of before (``list`` of workloads, no ``watch``): no polling of the Workloads."""
    with PortCluster(schema_check.require_shared(), crds=("trainjobs-v2.3.0.yaml",)) as cluster:
        cluster.store.on_create.append(courses.queued(cluster.fake, admits=30.0, ends=None))
        submit(cluster, spec(queue=QUEUE))
        cluster.faults.add("watch", "Workload", status=403, times=10)
        told = list(watch_workloads(cluster.session(), KUEUE, NAMESPACE))
        assert [s.word and s.word[0] for news in told for s in news.said] == ["Queued"]
        assert told[-1] == KueueNews((), ready=True)
        assert (cluster.calls.count("list", "Workload"), cluster.calls.count("watch")) == (1, 1)


def test_a_suspended_job_with_another_reason_is_changed_not_admitted() -> None:
    """Still SUSPENDED with another reason (Kueue's, or the job's own) was called ``admitted``."""
    suspended = JobState(State.SUSPENDED, "Suspended", "TrainJob is suspended")
    assert happened(QUEUED, suspended) is Happened.CHANGED
    assert happened(JobState(State.PENDING, "Resumed", ""), QUEUED) is Happened.ADMITTED

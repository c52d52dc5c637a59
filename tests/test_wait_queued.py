"""``wait`` on a job Kueue holds in a queue (suspended, no pod, its Workload saying why): what
changes then is Kueue's word, so the wait watches the job's Workload in long segments rather
than the job in segments of ``WATCH_SEGMENT`` with a pod list and a Workload read after each
(issue 28, item 4: 543 requests for a job admitted after 11 minutes). Each reason Kueue gives
is still said as it changes, and the wait still returns as soon as the job runs. On the
port-level fake (``kfcompile.testing``), through each Kueue API a release serves, and with no
Kueue (then as before: the job watched in short segments)."""

from __future__ import annotations

import copy

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, SERVES, PortCluster
from test_lifecycle import TRAINJOB, spec, submit

from kfcompile import lifecycle
from kfcompile.lifecycle.observe import Observation
from kfcompile.lifecycle.waiting import WATCH_SEGMENT
from kfcompile.status import State
from kfcompile.testing import Store, courses
from kfcompile.testing import kueue as fake_kueue

ADMITTED_AFTER = 660.0  # seconds: 11 minutes in the queue
STARTS = 0.2  # seconds after its admission the job's pods run (``courses.runs``)
PENDING_AT, RETRY_AT = 60.0, 400.0  # Kueue's other reasons, the job itself unchanged


def checking(store: Store, state: str) -> None:
    """The job's Workload: quota reserved, the admission check ``prov`` ``state``."""
    job = store.items[(TRAINJOB, "TrainJob", NAMESPACE, "demo")]
    fake_kueue.checking(store, job, "prov", "Waiting for capacity")
    found = fake_kueue.workload_of(store, job)
    assert found is not None
    changed = copy.deepcopy(found)
    changed["status"]["admissionChecks"][0]["state"] = state
    store.put(changed)


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

"""Kueue's reason where the user looks: a job Kueue holds says why, as its Workload says it
(``QuotaReserved=False``, an admission check not Ready, ``Evicted``), in ``status``, ``wait``
(as it changes), the ``list`` row and ``watch_jobs`` events, read through the Kueue API the
cluster serves (KUBEFLOW.md, Kueue: what the real Kueue v0.19.2 wrote)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, SERVES, PortCluster, cli, live
from test_cli_cluster import write_spec
from test_lifecycle import TRAINJOB, spec, submit

from kfcompile import lifecycle
from kfcompile.cli import main
from kfcompile.status import State, job_state, kueue_says
from kfcompile.testing import courses
from kfcompile.testing import kueue as fake_kueue

# What the real Kueue v0.19.2 said of a job asking for more GPUs than its ClusterQueue has.
NO_GPUS = (
    "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor "
    "default-flavor, previously considered podsets requests (0) + current podset request (8) > "
    "maximum capacity (4)"
)
SUSPENDED_JOB = {
    "kind": "TrainJob",
    "spec": {"suspend": True},
    "status": {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended",
                               "message": "TrainJob is suspended"}]},
}  # fmt: skip


def wl(*conditions: tuple[str, str, str, str], **more: Any) -> dict[str, Any]:
    """A Workload of queue team-a with ``conditions`` (type, status, reason, message)."""
    said = [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]
    spec = {"queueName": "team-a", **more.pop("spec", {})}
    return {"spec": spec, "status": {"conditions": said, **more}}


PENDING = ("QuotaReserved", "False", "Pending", NO_GPUS)


@pytest.mark.parametrize(
    ("workload", "said"),
    [
        (wl(PENDING), ("Queued", f"Kueue: waiting in queue team-a: {NO_GPUS}")),
        (
            wl(("QuotaReserved", "False", "Inadmissible", "LocalQueue team-a is stopped")),
            ("Inadmissible", "Kueue: waiting in queue team-a: LocalQueue team-a is stopped"),
        ),
        (
            wl(("QuotaReserved", "True", "QuotaReserved", "ok"), admissionChecks=[
                {"name": "prov", "state": "Pending", "message": "Waiting for capacity"}]),
            (
                "AdmissionCheckPending",
                "Kueue admission check prov is Pending: Waiting for capacity",
            ),
        ),
        (
            wl(("Evicted", "True", "Preempted", "Preempted to accommodate a workload"), PENDING),
            ("Evicted", "Kueue evicted it (Preempted): Preempted to accommodate a workload; "
             f"waiting in queue team-a: {NO_GPUS}"),
        ),
        (
            wl(("Evicted", "True", "Deactivated", "The workload is deactivated"),
               spec={"active": False}),
            ("Deactivated", "Kueue evicted it (Deactivated): The workload is deactivated"),
        ),
        (wl(("Admitted", "True", "Admitted", "The workload is admitted"), PENDING), None),
        (wl(), None),  # made, nothing said yet
        ({"status": "x", "spec": 3}, None),  # hostile shapes read as nothing
        (wl(("QuotaReserved", "False", "Pending", "a\nb  " + "x" * 5000)), (
            "Queued", "Kueue: waiting in queue team-a: a b " + "x" * 1019)),
    ],
)  # fmt: skip
def test_what_a_workload_says(workload: dict[str, Any], said: tuple[str, str] | None) -> None:
    assert kueue_says(workload) == said


def test_the_workload_refines_only_a_waiting_job() -> None:
    queued = job_state(SUSPENDED_JOB, workload=wl(PENDING))
    assert (queued.state, queued.reason) == (State.SUSPENDED, "Queued")
    assert job_state(SUSPENDED_JOB) == job_state(SUSPENDED_JOB, workload=wl())
    done = {
        "kind": "TrainJob",
        "status": {
            "conditions": [
                {"type": "Complete", "status": "True", "reason": "AllJobsCompleted", "message": "m"}
            ]
        },
    }
    assert job_state(done, workload=wl(PENDING)) == job_state(done)  # fmt: skip


@pytest.fixture(params=list(SERVES))
def held(request: pytest.FixtureRequest) -> Iterator[PortCluster]:
    """Kueue never admits a queued job here (the quota is not there), through each version."""
    with PortCluster(schema_check.require_shared(), kueue=request.param) as cluster:
        cluster.store.on_create.append(
            lambda job: live(cluster.fake, job, "succeeds", admits=math.inf)
        )
        cluster.store.on_patch.append(courses.suspends(cluster.fake))
        yield cluster


def _no_gpus(cluster: PortCluster, name: str = "demo") -> dict[str, Any]:
    job = cluster.store.get(TRAINJOB, "TrainJob", NAMESPACE, name)
    assert job is not None
    workload = fake_kueue.workload_of(cluster.store, job)
    assert workload is not None
    workload["status"]["conditions"][0]["message"] = NO_GPUS
    cluster.store.put({**workload, "apiVersion": fake_kueue.api(cluster.store)})
    return job


def test_status_list_and_watch_jobs_say_why_kueue_holds_the_job(held: PortCluster) -> None:
    ref = submit(held, spec(queue=QUEUE))
    _no_gpus(held)
    session = held.session()
    obs = lifecycle.status(session, ref)
    assert (obs.state.state, obs.state.reason) == (State.SUSPENDED, "Queued")
    assert obs.state.message == f"Kueue: waiting in queue {QUEUE}: {NO_GPUS}"
    [listed] = lifecycle.list_jobs(session, NAMESPACE)
    assert listed.state == obs.state
    with closing(lifecycle.watch_jobs(session, NAMESPACE)) as events:
        first = next(events)
    assert (first.what, first.state) == (lifecycle.Happened.LISTED, obs.state)


def test_status_says_an_eviction_and_a_deactivation(held: PortCluster) -> None:
    ref = submit(held, spec(queue=QUEUE))
    job = fake_kueue.admit(held.store, _no_gpus(held))
    fake_kueue.evict(held.store, job)
    obs = lifecycle.status(held.session(), ref)
    assert (obs.state.state, obs.state.reason) == (State.SUSPENDED, "Evicted")
    assert obs.state.message.startswith(
        "Kueue evicted it (Preempted): Preempted to accommodate a workload (UID: 1f2e) due to "
        f"prioritization in the ClusterQueue; waiting in queue {QUEUE}: "
    )
    fake_kueue.evict(held.store, job, "Deactivated")
    obs = lifecycle.status(held.session(), ref)
    assert obs.state.reason == "Deactivated"


def test_wait_says_each_reason_as_kueue_changes_it(held: PortCluster) -> None:
    """Queued, then an admission check pending (the job itself does not change: seen at the
    next look), then admitted: it runs and succeeds."""
    ref = submit(held, spec(queue=QUEUE))
    job = _no_gpus(held)
    message = "Waiting for the ProvisioningRequest to be Provisioned"
    held.fake.at(2.0, lambda: fake_kueue.checking(held.store, job, "prov", message))
    then = courses.runs(held.fake)

    def admitted() -> None:
        now = fake_kueue.admit(held.store, held.store.items[(TRAINJOB, "TrainJob", NAMESPACE,
                                                              "demo")])  # fmt: skip
        then(now)

    held.fake.at(8.0, admitted)
    seen: list[tuple[State, str, str]] = []
    obs = lifecycle.wait(
        held.session(),
        ref,
        "done",
        timeout=60,
        on_change=lambda o, _: seen.append((o.state.state, o.state.reason, o.state.message)),
    )
    assert obs.state.state is State.SUCCEEDED
    reasons = [reason for _, reason, _ in seen]
    assert reasons[:2] == ["Queued", "AdmissionCheckPending"], seen
    assert seen[1][2] == f"Kueue admission check prov is Pending: {message}"


def test_the_cli_says_it_in_status_and_the_list_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = cli(monkeypatch, scenario=None)
    cluster.store.on_create.append(lambda job: live(cluster.fake, job, "succeeds",
                                                    admits=math.inf))  # fmt: skip
    assert main(["submit", str(write_spec(tmp_path, "succeeds", queue=QUEUE))]) == 0
    capsys.readouterr()
    assert main(["status", "demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"TrainJob demo in namespace default: SUSPENDED (Queued) Kueue: waiting in queue "
        f"{QUEUE}: {fake_kueue.WAITING}\n"
    )
    assert main(["list"]) == 0
    [_, row] = capsys.readouterr().out.splitlines()
    assert " SUSPENDED (Queued) " in row

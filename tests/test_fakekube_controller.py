"""fakekube.controller: each scenario walks the states kfcompile.status reports, writing pods,
events and logs shaped as KUBEFLOW.md says and parseable by the strict kubernetes client."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube.controller import Controller
from fakekube.resources import ResourceKind
from fakekube.scenarios import (
    QUEUE_LABEL,
    SCENARIO_ANNOTATION,
    SCENARIOS,
    UNSCHEDULABLE_MESSAGE,
)
from fakekube.server import FakeKube
from fakekube.store import Store
from kubernetes import client, config
from kubernetes.client import CoreV1Event, V1Pod

from kfcompile.status import State, job_state

Obj = dict[str, Any]
NS = "team-a"
T0 = datetime(2025, 6, 2, 9, 14, 3, tzinfo=UTC)
T0_TEXT = "2025-06-02T09:14:03Z"
T0_MICRO = "2025-06-02T09:14:03.000000Z"
IMAGE = "ghcr.io/acme/mnist:1.4"
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
PYTORCHJOB = ("kubeflow.org/v1", "PyTorchJob")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")


@pytest.fixture
def store() -> Store:
    s = Store()
    s.register_kind(ResourceKind("trainer.kubeflow.org", "v1alpha1", *TRAINJOB[1:], "trainjobs",
                                 True, subresources=("status",)))  # fmt: skip
    s.register_kind(ResourceKind("kubeflow.org", "v1", *PYTORCHJOB[1:], "pytorchjobs", True,
                                 subresources=("status",)))  # fmt: skip
    s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return s


@pytest.fixture
def ctl(store: Store) -> Controller:
    return Controller(store, auto=False, clock=lambda: T0, seed=7)


def trainjob(
    name: str = "mnist", *, nodes: int | None = 2, scenario: str | None = None, **meta: Any
) -> Obj:
    trainer: Obj = {"image": IMAGE, "command": ["torchrun"], "args": ["train.py"]}
    if nodes is not None:
        trainer["numNodes"] = nodes
    annotations = {SCENARIO_ANNOTATION: scenario} if scenario else {}
    return {
        "apiVersion": TRAINJOB[0],
        "kind": TRAINJOB[1],
        "metadata": {"name": name, "namespace": NS, "annotations": annotations, **meta},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
    }


def pytorchjob(
    name: str = "mnist", *, workers: int = 2, master: bool = True, scenario: str | None = None,
    **meta: Any,
) -> Obj:  # fmt: skip
    def replica(n: int) -> Obj:
        container = {"name": "pytorch", "image": IMAGE, "command": ["python", "train.py"]}
        return {
            "replicas": n,
            "restartPolicy": "OnFailure",
            "template": {
                "metadata": {"labels": {"team": "vision"}},
                "spec": {"containers": [container]},
            },
        }

    replicas = {"Worker": replica(workers)}
    if master:
        replicas["Master"] = replica(1)
    annotations = {SCENARIO_ANNOTATION: scenario} if scenario else {}
    return {
        "apiVersion": PYTORCHJOB[0],
        "kind": PYTORCHJOB[1],
        "metadata": {"name": name, "namespace": NS, "annotations": annotations, **meta},
        "spec": {"pytorchReplicaSpecs": replicas},
    }


MAKERS: dict[str, Callable[..., Obj]] = {"TrainJob": trainjob, "PyTorchJob": pytorchjob}


def current(store: Store, job: Obj) -> Obj:
    found = store.get(job["apiVersion"], job["kind"], NS, job["metadata"]["name"])
    assert found is not None
    return found


def pods_of(store: Store, job: Obj) -> list[Obj]:
    name = job["metadata"]["name"]
    if job["kind"] == "TrainJob":
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    else:
        selector = f"training.kubeflow.org/job-name={name}"
    return store.list("v1", "Pod", NS, selector)


def state(store: Store, job: Obj) -> tuple[State, str]:
    found = job_state(current(store, job), pods_of(store, job))
    return found.state, found.reason


def walk(
    store: Store, ctl: Controller, job: Obj, each: Callable[[], None] = lambda: None
) -> list[tuple[State, str]]:
    """Tick the job until it idles; the distinct states it went through, in order."""
    seen: list[tuple[State, str]] = []
    for _ in range(100):
        if not ctl.advance(NS, job["metadata"]["name"]):
            return seen
        each()
        now = state(store, job)
        if not seen or seen[-1] != now:
            seen.append(now)
    raise AssertionError(f"{job['metadata']['name']} never idled")


def events(store: Store, **about: str) -> list[Obj]:
    """Events whose involvedObject (or, for ``reason``, the event) matches, oldest first."""
    found = sorted(
        store.list("v1", "Event", NS), key=lambda e: int(e["metadata"]["resourceVersion"])
    )
    return [
        e
        for e in found
        if all((e if k == "reason" else e["involvedObject"]).get(k) == v for k, v in about.items())
    ]


def assert_realistic(objs: list[Obj], schema: str) -> None:
    """The strict pydantic client parses them and the strict core/v1 schema (no unknown fields)
    accepts them, as the API server's own objects would be."""
    parse = V1Pod.from_dict if schema == "pod-v1" else CoreV1Event.from_dict
    validator = schema_check._core_validator(schema_check.K8S_VERSION, schema)
    for obj in objs:
        parse(obj)
        assert schema_check._errors(validator, obj) == [], obj["metadata"]["name"]


P, S, R, OK, F = State.PENDING, State.SUSPENDED, State.RUNNING, State.SUCCEEDED, State.FAILED
# A child Job counts pending pods as active: PENDING until a pod has started.
TJ_RUN = [(P, "NoStatus"), (P, "PodsPending"), (R, "JobsActive")]
TJ_STUCK = [(P, "NoStatus"), (P, "PodsPending")]
PT_RUN = [(P, "Created"), (R, "Running")]

WALKS: list[tuple[str, str, list[tuple[State, str]]]] = [
    ("TrainJob", "succeeds", [*TJ_RUN, (OK, "Complete")]),
    ("PyTorchJob", "succeeds", [*PT_RUN, (OK, "Succeeded")]),
    ("TrainJob", "fails", [*TJ_RUN, (F, "FailedJobs")]),
    ("PyTorchJob", "fails", [*PT_RUN, (F, "PyTorchJobFailed")]),
    ("TrainJob", "restarts", [*TJ_RUN, (OK, "Complete")]),
    ("PyTorchJob", "restarts", [*PT_RUN, (R, "Restarting"), (R, "Running"), (OK, "Succeeded")]),
    ("TrainJob", "deadline", [*TJ_RUN, (F, "DeadlineExceeded")]),
    ("PyTorchJob", "deadline", [*PT_RUN, (F, "DeadlineExceeded")]),
    ("TrainJob", "unschedulable", [*TJ_STUCK, (P, "Unschedulable")]),
    ("PyTorchJob", "unschedulable", [(P, "Created"), (P, "Unschedulable")]),
    ("TrainJob", "image_pull", [*TJ_STUCK, (P, "ImagePullBackOff")]),
    ("PyTorchJob", "image_pull", [(P, "Created"), (P, "ImagePullBackOff")]),
    ("TrainJob", "invalid_image", [*TJ_STUCK, (P, "InvalidImageName")]),
    ("PyTorchJob", "invalid_image", [(P, "Created"), (P, "InvalidImageName")]),
    ("TrainJob", "hang", TJ_RUN),
    ("PyTorchJob", "hang", PT_RUN),
]  # fmt: skip


WALK_PARAMS = [pytest.param(*walk, id=f"{walk[0]}-{walk[1]}") for walk in WALKS]


def test_every_scenario_is_walked() -> None:
    assert {s for _, s, _ in WALKS} == set(SCENARIOS)


@pytest.mark.parametrize(("kind", "scenario", "expected"), WALK_PARAMS)
def test_scenario_walks_the_documented_states(
    store: Store, ctl: Controller, kind: str, scenario: str, expected: list[tuple[State, str]]
) -> None:
    job = MAKERS[kind](scenario=scenario)
    store.create(job)

    def realistic() -> None:  # every intermediate pod and event, not just the last ones
        assert_realistic(pods_of(store, job), "pod-v1")

    assert walk(store, ctl, job, realistic) == expected
    assert_realistic(store.list("v1", "Event", NS), "event-v1")
    assert not ctl.advance(NS, "mnist")  # idle means idle


@pytest.mark.parametrize(("kind", "scenario", "expected"), WALK_PARAMS)
def test_job_status_matches_the_crd(
    store: Store, ctl: Controller, kind: str, scenario: str, expected: list[tuple[State, str]]
) -> None:
    schema_check.require_shared()
    crd = "trainjobs-v2.3.0.yaml" if kind == "TrainJob" else "pytorchjobs-v1.9.4.yaml"
    job = MAKERS[kind](scenario=scenario)
    store.create(job)
    while ctl.advance(NS, "mnist"):
        assert schema_check.crd_errors(current(store, job), crd) == []


# --- Pods -------------------------------------------------------------------------------------


def test_trainjob_pods_are_named_labelled_and_owned_like_jobset_pods(
    store: Store, ctl: Controller
) -> None:
    job = store.create(trainjob(nodes=3, scenario="hang"))
    ctl.run_until_idle()
    jobset = store.get(*JOBSET, NS, "mnist")
    assert jobset is not None
    assert jobset["metadata"]["ownerReferences"] == [
        {"apiVersion": TRAINJOB[0], "kind": "TrainJob", "name": "mnist",
         "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    pods = sorted(pods_of(store, job), key=lambda p: p["metadata"]["name"])
    assert len(pods) == 3
    for rank, pod in enumerate(pods):
        meta, spec, status = pod["metadata"], pod["spec"], pod["status"]
        assert re.fullmatch(rf"mnist-node-0-{rank}-[a-z0-9]{{5}}", meta["name"])
        assert meta["labels"]["jobset.sigs.k8s.io/jobset-name"] == "mnist"
        assert meta["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        assert meta["labels"]["jobset.sigs.k8s.io/job-index"] == "0"
        assert meta["labels"]["batch.kubernetes.io/job-completion-index"] == str(rank)
        assert not [k for k in meta["labels"] if k.startswith("trainer.kubeflow.org/")]
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("JobSet", "mnist")
        assert owner["uid"] == jobset["metadata"]["uid"] and owner["controller"] is True
        assert (spec["hostname"], spec["subdomain"]) == (f"mnist-node-0-{rank}", "mnist")
        [container] = spec["containers"]
        assert (container["name"], container["image"]) == ("node", IMAGE)
        assert (container["command"], container["args"]) == (["torchrun"], ["train.py"])
        assert spec["nodeName"] == f"gpu-node-{rank}"
        assert status["phase"] == "Running"
        assert status["startTime"] == T0_TEXT and status["podIP"] and status["hostIP"]
        assert {c["type"]: c["status"] for c in status["conditions"]} == {
            "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True",
            "Ready": "True",
        }  # fmt: skip
        [cstatus] = status["containerStatuses"]
        assert cstatus["state"] == {"running": {"startedAt": T0_TEXT}}
        assert cstatus["ready"] and cstatus["started"] and cstatus["restartCount"] == 0
        assert cstatus["imageID"].startswith("ghcr.io/acme/mnist@sha256:")


def test_trainjob_without_num_nodes_has_one_pod(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob(nodes=None, scenario="hang"))
    ctl.run_until_idle()
    [pod] = pods_of(store, job)
    assert pod["metadata"]["name"].startswith("mnist-node-0-0-")


def test_trainjob_pods_take_labels_from_overrides_and_runtime_patches(
    store: Store, ctl: Controller
) -> None:
    job = trainjob(scenario="hang")
    job["spec"]["runtimePatches"] = [{
        "manager": "example.com/kfcompile",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
            "name": "node",
            "template": {"spec": {"template": {
                "metadata": {"labels": {"team": "vision"}},
                "spec": {"nodeSelector": {"gpu": "a100"}},
            }}},
        }]}}},
    }]  # fmt: skip
    store.create(job)
    ctl.run_until_idle()
    for pod in pods_of(store, job):
        assert pod["metadata"]["labels"]["team"] == "vision"
        assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}


def test_pytorchjob_pods_are_named_labelled_and_owned_like_the_operators(
    store: Store, ctl: Controller
) -> None:
    job = store.create(pytorchjob(scenario="hang"))
    ctl.run_until_idle()
    pods = {p["metadata"]["name"]: p for p in pods_of(store, job)}
    assert sorted(pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    for name, pod in pods.items():
        labels = pod["metadata"]["labels"]
        rtype, index = name.split("-")[1:]
        assert labels["training.kubeflow.org/job-name"] == "mnist"
        assert labels["training.kubeflow.org/replica-type"] == rtype
        assert labels["training.kubeflow.org/replica-index"] == index
        assert labels["training.kubeflow.org/operator-name"] == "pytorchjob-controller"
        assert labels["team"] == "vision"  # from the replica template
        assert ("training.kubeflow.org/job-role" in labels) == (rtype == "master")
        [owner] = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("PyTorchJob", job["metadata"]["uid"])
        [container] = pod["spec"]["containers"]
        assert container["name"] == "pytorch" and container["command"] == ["python", "train.py"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["MASTER_ADDR"] == "mnist-master-0" and env["WORLD_SIZE"] == "3"
        assert env["RANK"] == {"mnist-master-0": "0", "mnist-worker-0": "1"}.get(name, "2")
    assert current(store, job)["status"]["replicaStatuses"]["Worker"]["active"] == 2


def test_pytorchjob_without_master_gets_no_rendezvous_env(store: Store, ctl: Controller) -> None:
    job = store.create(pytorchjob(master=False, workers=2, scenario="hang"))
    ctl.run_until_idle()
    pods = pods_of(store, job)
    assert sorted(p["metadata"]["name"] for p in pods) == ["mnist-worker-0", "mnist-worker-1"]
    for pod in pods:
        assert not [e for e in pod["spec"]["containers"][0].get("env", []) if e["name"] == "RANK"]
    assert state(store, job) == (State.RUNNING, "Running")


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_failed_rank_terminates_with_exit_code_1(store: Store, ctl: Controller, kind: str) -> None:
    job = store.create(MAKERS[kind](scenario="fails"))
    ctl.run_until_idle()
    failed = [p for p in pods_of(store, job) if p["status"]["phase"] == "Failed"]
    assert len(failed) == 1
    [cstatus] = failed[0]["status"]["containerStatuses"]
    assert cstatus["state"]["terminated"]["exitCode"] == 1
    assert cstatus["state"]["terminated"]["reason"] == "Error"
    [cond] = [c for c in current(store, job)["status"]["conditions"] if c["type"] == "Failed"]
    if kind == "TrainJob":
        assert failed[0]["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1"
        assert len(pods_of(store, job)) == 1  # the failed Job's other pods are deleted
        assert "mnist-node-0" in cond["message"]
    else:
        assert failed[0]["metadata"]["name"] == "mnist-worker-0"  # rank 1
        assert "1 Worker replica(s) failed" in cond["message"]


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_restart_shows_in_restart_count_and_last_state(
    store: Store, ctl: Controller, kind: str
) -> None:
    job = store.create(MAKERS[kind](scenario="restarts"))
    ctl.run_until_idle()
    restarted = [
        p for p in pods_of(store, job) if p["status"]["containerStatuses"][0]["restartCount"]
    ]
    assert len(restarted) == 1
    cstatus = restarted[0]["status"]["containerStatuses"][0]
    assert cstatus["restartCount"] == 1
    assert cstatus["lastState"]["terminated"]["exitCode"] == 1
    assert cstatus["state"]["terminated"]["exitCode"] == 0  # then the job succeeded
    if kind == "PyTorchJob":
        types = [c["type"] for c in current(store, job)["status"]["conditions"]]
        assert "Restarting" not in types  # Running replaced it
        assert types[-1] == "Succeeded"


def test_succeeded_pods_terminate_with_exit_code_0(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob())
    ctl.run_until_idle()
    for pod in pods_of(store, job):
        assert pod["status"]["phase"] == "Succeeded"
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    [complete] = current(store, job)["status"]["conditions"]
    assert (complete["type"], complete["reason"]) == ("Complete", "AllJobsCompleted")
    assert current(store, job)["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]


def test_pytorchjob_clean_pod_policy_all_removes_pods_when_done(
    store: Store, ctl: Controller
) -> None:
    job = pytorchjob()
    job["spec"]["runPolicy"] = {"cleanPodPolicy": "All"}
    store.create(job)
    ctl.run_until_idle()
    assert state(store, job) == (State.SUCCEEDED, "Succeeded")
    assert pods_of(store, job) == []


def test_deadline_deletes_the_jobset_and_its_pods(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob(scenario="deadline"))
    ctl.run_until_idle()
    store.settle()
    assert store.get(*JOBSET, NS, "mnist") is None
    assert pods_of(store, job) == []
    assert state(store, job) == (State.FAILED, "DeadlineExceeded")


def test_one_thousand_pods_are_created_in_one_step(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob(nodes=1000, scenario="hang"))
    ctl.advance(NS, "mnist")  # observe: the JobSet
    ctl.advance(NS, "mnist")  # create the pods
    pods = pods_of(store, job)
    assert len({p["metadata"]["name"] for p in pods}) == 1000
    assert state(store, job) == (State.PENDING, "PodsPending")  # created, none started yet


# --- Logs and events ----------------------------------------------------------------------------


def log_lines(store: Store, pod: str, container: str, run: int | None = None) -> list[str]:
    chunks = store.log(NS, pod, container)
    return "".join(c.text for c in chunks if run is None or c.instance == run).splitlines()


def test_each_rank_logs_its_training_steps(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob())
    ctl.run_until_idle()
    for pod in pods_of(store, job):
        rank = pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        lines = log_lines(store, pod["metadata"]["name"], "node")
        assert f"rank {rank} step 1 loss 0.9" in lines
        assert f"rank {rank} step 3 loss 0.729" in lines


def test_failing_rank_logs_a_traceback(store: Store, ctl: Controller) -> None:
    job = store.create(pytorchjob(scenario="fails"))
    ctl.run_until_idle()
    lines = log_lines(store, "mnist-worker-0", "pytorch")
    assert lines[-1].startswith("torch.OutOfMemoryError")
    assert "Traceback (most recent call last):" in lines
    assert not [x for x in log_lines(store, "mnist-master-0", "pytorch") if "Traceback" in x]
    assert pods_of(store, job)  # cleanPodPolicy None (the default) keeps the pods


def test_restarted_container_logs_per_run(store: Store, ctl: Controller) -> None:
    store.create(pytorchjob(scenario="restarts"))
    ctl.run_until_idle()
    before = log_lines(store, "mnist-worker-0", "pytorch", run=0)
    after = log_lines(store, "mnist-worker-0", "pytorch", run=1)
    assert before[-1].startswith("RuntimeError: NCCL")
    assert after[0].startswith("rank 1: restarted")


def test_events_name_the_job_and_its_pods(store: Store, ctl: Controller) -> None:
    job = store.create(pytorchjob())
    ctl.run_until_idle()
    on_job = events(store, kind="PyTorchJob", name="mnist", uid=job["metadata"]["uid"])
    reasons = [e["reason"] for e in on_job]
    assert reasons[0] == "PyTorchJobCreated" and reasons[-1] == "PyTorchJobSucceeded"
    assert reasons.count("SuccessfulCreatePod") == 3
    assert {"Created pod: mnist-master-0", "Created pod: mnist-worker-1"} <= {
        e["message"] for e in on_job
    }
    scheduled, *started = events(store, kind="Pod", name="mnist-worker-1")
    assert [e["reason"] for e in started] == ["Pulled", "Created", "Started"]
    for event in [*on_job, scheduled, *started]:
        assert re.fullmatch(r"[a-z0-9-]+\.[0-9a-f]{16}", event["metadata"]["name"])
        assert event["metadata"]["name"].startswith(event["involvedObject"]["name"] + ".")
    for event in on_job + started:  # the core/v1 recorder's
        assert (event["count"], event["firstTimestamp"], event["lastTimestamp"]) == (
            1, T0_TEXT, T0_TEXT,
        )  # fmt: skip
    # The scheduler's, written as events/v1 and stored (read here) as core/v1: no legacy times.
    assert scheduled["reason"] == "Scheduled" and "count" not in scheduled
    assert (scheduled["eventTime"], scheduled["firstTimestamp"]) == (T0_MICRO, None)
    assert scheduled["reportingComponent"] == "default-scheduler"


def test_trainjob_pod_creation_is_reported_on_its_job(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob(nodes=2, scenario="fails"))
    ctl.run_until_idle()
    created = events(store, kind="Job", name="mnist-node-0")
    assert [e["reason"] for e in created] == ["SuccessfulCreate"] * 2
    [failed] = events(store, kind="JobSet", name="mnist")
    assert (failed["type"], failed["reason"]) == ("Warning", "FailedJobs")
    assert failed["involvedObject"]["uid"] == store.get(*JOBSET, NS, "mnist")["metadata"]["uid"]
    assert job["metadata"]["uid"] != failed["involvedObject"]["uid"]


def test_unschedulable_pods_get_a_failed_scheduling_warning(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob(scenario="unschedulable"))
    ctl.run_until_idle()
    for pod in pods_of(store, job):
        [cond] = pod["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "PodScheduled", "False", "Unschedulable",
        )  # fmt: skip
        assert cond["message"] == UNSCHEDULABLE_MESSAGE
        assert "nodeName" not in pod["spec"]
        [warning] = events(store, kind="Pod", name=pod["metadata"]["name"])
        assert (warning["type"], warning["reason"]) == ("Warning", "FailedScheduling")
        assert warning["message"] == UNSCHEDULABLE_MESSAGE
    assert job_state(current(store, job), pods_of(store, job)).message.endswith(
        UNSCHEDULABLE_MESSAGE
    )


def test_image_pull_backoff_is_waiting_with_kubelet_events(store: Store, ctl: Controller) -> None:
    job = store.create(pytorchjob(scenario="image_pull"))
    ctl.run_until_idle()
    for pod in pods_of(store, job):
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert waiting == {
            "reason": "ImagePullBackOff", "message": f'Back-off pulling image "{IMAGE}"',
        }  # fmt: skip
        kubelet = events(store, kind="Pod", name=pod["metadata"]["name"])
        assert ("Warning", "Failed") in [(e["type"], e["reason"]) for e in kubelet]
        assert "BackOff" in [e["reason"] for e in kubelet]
        assert {e["involvedObject"].get("fieldPath") for e in kubelet} >= {
            "spec.containers{pytorch}"
        }


# --- Kueue and suspension -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_queue_label_makes_kueue_hold_then_admit_the_job(store: Store, kind: str) -> None:
    ctl = Controller(store, auto=False, clock=lambda: T0, admission_delay=3)
    job = store.create(MAKERS[kind](labels={QUEUE_LABEL: "user-queue"}))  # default: succeeds
    ctl.advance(NS, "mnist")  # Kueue's webhook suspends it
    spec = current(store, job)["spec"]
    assert (spec if kind == "TrainJob" else spec["runPolicy"])["suspend"] is True
    ticks_suspended = 0
    while state(store, job)[0] is not State.RUNNING:
        assert ctl.advance(NS, "mnist")
        if state(store, job)[0] is State.SUSPENDED:
            ticks_suspended += 1
            assert pods_of(store, job) == []
    assert ticks_suspended == 3 + 2  # the Suspended condition, the delay, the admission
    reasons = [e["reason"] for e in events(store, kind=kind, name="mnist")]
    assert reasons.index("CreatedWorkload") < reasons.index("Started")
    suspended = [c for c in current(store, job)["status"]["conditions"] if c["type"] == "Suspended"]
    assert [c["status"] for c in suspended] == ["False"]
    assert suspended[0]["reason"] in ("Resumed", "PyTorchJobResumed")
    ctl.run_until_idle()
    assert state(store, job)[0] is State.SUCCEEDED


def test_without_admission_delay_kueue_keeps_the_job_waiting(store: Store) -> None:
    ctl = Controller(store, auto=False, admission_delay=None)
    job = store.create(trainjob(labels={QUEUE_LABEL: "user-queue"}))
    ctl.run_until_idle()
    assert state(store, job) == (State.SUSPENDED, "Suspended")
    assert pods_of(store, job) == []


def set_suspend(store: Store, job: Obj, suspend: bool) -> None:
    obj = current(store, job)
    if obj["kind"] == "TrainJob":
        obj["spec"]["suspend"] = suspend
    else:
        obj["spec"].setdefault("runPolicy", {})["suspend"] = suspend
    store.update(obj)


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_job_created_suspended_waits_for_resume(store: Store, ctl: Controller, kind: str) -> None:
    job = MAKERS[kind]()
    if kind == "TrainJob":
        job["spec"]["suspend"] = True
    else:
        job["spec"]["runPolicy"] = {"suspend": True}
    store.create(job)
    ctl.run_until_idle()
    assert state(store, job) == (State.SUSPENDED, "Suspended")
    assert pods_of(store, job) == []
    set_suspend(store, job, False)
    ctl.run_until_idle()
    assert state(store, job)[0] is State.SUCCEEDED


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_suspending_a_running_job_deletes_its_pods(
    store: Store, ctl: Controller, kind: str
) -> None:
    job = store.create(MAKERS[kind](scenario="hang"))
    ctl.run_until_idle()
    before = {p["metadata"]["name"] for p in pods_of(store, job)}
    set_suspend(store, job, True)
    ctl.run_until_idle()
    assert pods_of(store, job) == []
    assert state(store, job) == (State.SUSPENDED, "Suspended")
    if kind == "PyTorchJob":
        conds = {c["type"]: c for c in current(store, job)["status"]["conditions"]}
        assert (conds["Running"]["status"], conds["Running"]["reason"]) == (
            "False", "PyTorchJobSuspended",
        )  # fmt: skip
    else:
        assert store.get(*JOBSET, NS, "mnist")["spec"]["suspend"] is True
    set_suspend(store, job, False)
    ctl.run_until_idle()
    assert state(store, job)[0] is State.RUNNING
    after = {p["metadata"]["name"] for p in pods_of(store, job)}
    assert len(after) == len(before)
    if kind == "TrainJob":  # new pods, new random suffixes
        assert not after & before


# --- Choosing scenarios -------------------------------------------------------------------------


def test_scenario_call_beats_the_annotation(store: Store, ctl: Controller) -> None:
    ctl.scenario(NS, "mnist", "fails")
    job = store.create(trainjob(scenario="succeeds"))
    ctl.run_until_idle()
    assert state(store, job) == (State.FAILED, "FailedJobs")


def test_switching_a_hanging_job_finishes_it(store: Store, ctl: Controller) -> None:
    job = store.create(pytorchjob(scenario="hang"))
    ctl.run_until_idle()
    assert state(store, job) == (State.RUNNING, "Running")
    ctl.scenario(NS, "mnist", "succeeds")
    ctl.run_until_idle()
    assert state(store, job) == (State.SUCCEEDED, "Succeeded")


def test_default_scenario_applies_without_annotation(store: Store) -> None:
    ctl = Controller(store, auto=False, default_scenario="deadline")
    job = store.create(trainjob())
    ctl.run_until_idle()
    assert state(store, job) == (State.FAILED, "DeadlineExceeded")


def test_unknown_scenarios(store: Store, ctl: Controller) -> None:
    with pytest.raises(ValueError, match="unknown scenario 'explodes'"):
        ctl.scenario(NS, "mnist", "explodes")
    with pytest.raises(ValueError, match="unknown scenario"):
        Controller(store, default_scenario="explodes")
    job = store.create(trainjob(scenario="explodes"))
    ctl.run_until_idle()
    assert state(store, job) == (State.SUCCEEDED, "Complete")  # the default
    [warning] = events(store, kind="TrainJob", reason="UnknownScenario")
    assert "'explodes'" in warning["message"] and warning["type"] == "Warning"


# --- Deletion -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_deleting_the_job_stops_its_scenario(
    store: Store, ctl: Controller, kind: str, propagation: str
) -> None:
    job = store.create(MAKERS[kind]())
    for _ in range(4):
        ctl.advance(NS, "mnist")
    assert state(store, job)[0] is State.RUNNING
    store.delete(job["apiVersion"], kind, NS, "mnist", propagation)
    assert not ctl.advance(NS, "mnist")  # at once, even while a foreground deletion waits
    store.settle()
    written = store.resource_version
    assert not ctl.advance(NS, "mnist")
    assert ctl.run_until_idle() == 0
    assert store.resource_version == written  # nothing recreated, no event recorded
    assert pods_of(store, job) == [] and store.list(*JOBSET, NS) == []


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_job_deleted_while_its_pods_are_created_leaves_none(
    store: Store, ctl: Controller, kind: str
) -> None:
    job = store.create(MAKERS[kind]())
    ctl.advance(NS, "mnist")

    def delete_on_first_pod(event: str, obj: Obj) -> None:
        # Runs in the controller's thread, inside its create_pods step: the job and its garbage
        # collection are gone before the other pods exist, so nothing would ever collect them.
        gone = store.get(job["apiVersion"], kind, NS, "mnist") is None
        if event == "ADDED" and obj["kind"] == "Pod" and not gone:
            store.delete(job["apiVersion"], kind, NS, "mnist")
            store.settle()

    store.subscribe(delete_on_first_pod)
    ctl.advance(NS, "mnist")
    store.settle()
    assert pods_of(store, job) == []
    assert ctl.run_until_idle() == 0


def test_recreated_job_starts_from_scratch(store: Store, ctl: Controller) -> None:
    job = store.create(trainjob())
    ctl.run_until_idle()
    store.delete(*TRAINJOB, NS, "mnist")
    store.settle()
    job = store.create(trainjob(scenario="hang"))
    assert walk(store, ctl, job) == TJ_RUN
    assert len(pods_of(store, job)) == 2


# --- The own thread, and the real client over HTTP ----------------------------------------------


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_manual_controller_has_no_thread(store: Store, ctl: Controller) -> None:
    with pytest.raises(RuntimeError, match="advance"):
        ctl.start()


def test_own_thread_drives_jobs_and_stops(store: Store) -> None:
    with Controller(store, step=0.001) as ctl:
        job = store.create(pytorchjob())
        wait_for(lambda: state(store, job)[0] is State.SUCCEEDED)
    assert ctl.errors == []
    written = store.resource_version
    store.create(pytorchjob("after-stop"))
    time.sleep(0.02)
    assert store.resource_version == written + 1  # stopped: nobody acted on the new job


def test_real_client_reads_what_the_controller_writes(tmp_path: Path) -> None:
    shared = schema_check.require_shared()
    with FakeKube(crd_dir=shared / "crds") as kube, Controller(kube.store, step=0.001) as ctl:
        kube.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        api = config.new_client_from_config(str(kube.kubeconfig(tmp_path / "kubeconfig")))
        try:
            custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
            body = trainjob(scenario="restarts")
            custom.create_namespaced_custom_object(
                "trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", body
            )

            def complete() -> bool:
                job = custom.get_namespaced_custom_object(
                    "trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", "mnist"
                )
                return job_state(job).state is State.SUCCEEDED

            wait_for(complete)
            pods = core.list_namespaced_pod(
                NS, label_selector="jobset.sigs.k8s.io/jobset-name=mnist"
            )
            assert sorted(p.status.phase for p in pods.items) == ["Succeeded", "Succeeded"]
            restarted = [p for p in pods.items if p.status.container_statuses[0].restart_count]
            assert restarted[0].status.container_statuses[0].last_state.terminated.exit_code == 1
            log = core.read_namespaced_pod_log(pods.items[0].metadata.name, NS, container="node")
            assert "step 1 loss 0.9" in log
            listed = core.list_namespaced_event(NS, field_selector="involvedObject.kind=Pod")
            assert {"Scheduled", "Started"} <= {e.reason for e in listed.items}
        finally:
            api.close()
    assert ctl.errors == []

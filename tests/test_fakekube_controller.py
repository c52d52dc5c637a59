"""fakekube.controller, pinned to what a real cluster writes: each scenario walks the states
its name says, every pod and Event it writes passes the strict core/v1 schema and the strict
kubernetes client, every job status the CRD's schema, and pods are named, labelled and owned as
JobSet and the Training Operator make them (KUBEFLOW.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import schema_check
from fakekube.controller import Controller
from fakekube.resources import ResourceKind
from fakekube.scenarios import (
    SCENARIO_ANNOTATION,
    SCENARIOS,
)
from fakekube.store import Store
from kubernetes.client import CoreV1Event, V1Pod

from kfcompile.status import State, job_state

Obj = dict[str, Any]
NS = "team-a"
T0 = datetime(2025, 6, 2, 9, 14, 3, tzinfo=UTC)
T0_TEXT = "2025-06-02T09:14:03Z"
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
    schema_check.require_shared()
    crd = "trainjobs-v2.3.0.yaml" if kind == "TrainJob" else "pytorchjobs-v1.9.4.yaml"
    job = MAKERS[kind](scenario=scenario)
    store.create(job)

    def realistic() -> None:  # every intermediate pod, event and job status, not just the last
        assert_realistic(pods_of(store, job), "pod-v1")
        assert schema_check.crd_errors(current(store, job), crd) == []

    assert walk(store, ctl, job, realistic) == expected
    assert_realistic(store.list("v1", "Event", NS), "event-v1")
    assert not ctl.advance(NS, "mnist")  # idle means idle


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

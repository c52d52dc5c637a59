"""What the simulated control plane knows: the kinds it drives, what it remembers per job and
pod, the scenarios a job walks (:data:`SCENARIOS`) and how job conditions are written."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

Obj = dict[str, Any]

TRAINJOB: Final = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
PYTORCHJOB: Final = ("kubeflow.org/v1", "PyTorchJob")
JOBSET: Final = ("jobset.x-k8s.io/v1alpha2", "JobSet")
POD: Final = ("v1", "Pod")
JOB_KINDS: Final = {TRAINJOB[1]: TRAINJOB, PYTORCHJOB[1]: PYTORCHJOB}

SCENARIO_ANNOTATION: Final = "fake.kfcompile.dev/scenario"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
UNSCHEDULABLE_MESSAGE: Final = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
NODE_COUNT: Final = 4  # the fake cluster's nodes, named gpu-node-<i> (see the message above)
# Kubernetes' generateName alphabet (no vowels, no look-alikes): a subset of [a-z0-9].
NAME_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- What the controller remembers per job and pod ----------------------------------------------


@dataclasses.dataclass
class PodRecord:
    name: str
    uid: str
    rank: int
    replica: str  # TrainJob: the replicated job "node"; PyTorchJob: "Master" or "Worker"
    container: str
    image: str
    node: str
    ip: str
    stage: str = "created"  # see pod_status
    scheduled_at: str = ""
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    restarts: int = 0
    last_state: Obj = dataclasses.field(default_factory=dict)
    obj: Obj = dataclasses.field(default_factory=dict)  # the pod as last written


@dataclasses.dataclass
class JobRecord:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    scenario: str = ""  # resolved when the job is first observed
    kueue: bool = False
    observed: bool = False
    suspended: bool = False  # the controller has acted on spec suspend=true
    admitted: bool = False
    admit_in: int | None = None  # ticks left before Kueue admits; None: it never does
    finished: bool = False
    replicas: tuple[str, ...] = ()  # PyTorchJob replica types in the spec
    pos: int = 0  # index of the next scenario step
    log_step: int = 0
    pods: list[PodRecord] = dataclasses.field(default_factory=list)
    status: Obj = dataclasses.field(default_factory=dict)

    @property
    def ref(self) -> tuple[str, str, str, str]:
        return (self.api_version, self.kind, self.namespace, self.name)

    @property
    def owner(self) -> Obj:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


# --- Scenarios: the steps a job walks, one per tick ---------------------------------------------

# A step names a Controller method and its arguments after the job: ("move_pods", "running").
Step = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Scenario:
    steps: tuple[Step, ...]


_RUN: Final[tuple[Step, ...]] = (
    ("create_pods",),
    ("move_pods", "creating"),  # scheduled; the kubelet creates the container
    ("move_pods", "running"),  # running and ready; each rank logs a first line
)
_RETRIES: Final[tuple[Step, ...]] = (("retry",), ("retry",))
_TRAIN: Final[tuple[Step, ...]] = (("log_step",), ("log_step",), ("log_step",), ("succeed",))

# All scenarios share their first steps, so switching a running job from `hang` to `succeeds` or
# `fails` (Controller.scenario keeps the position) finishes it that way.
SCENARIOS: Final[Mapping[str, Scenario]] = {
    "succeeds": Scenario((*_RUN, *_TRAIN)),
    "fails": Scenario((*_RUN, ("log_step",), ("fail",))),
    "restarts": Scenario((*_RUN, ("log_step",), ("crash",), ("restart",), *_TRAIN)),
    "deadline": Scenario((*_RUN, ("log_step",), ("deadline",))),
    # Stuck pods are tried again (the repeats are the series of their events/v1 events).
    "unschedulable": Scenario((("create_pods",), ("move_pods", "unschedulable"), *_RETRIES)),
    "image_pull": Scenario((*_RUN[:2], ("move_pods", "image_pull"), *_RETRIES)),
    "invalid_image": Scenario((*_RUN[:2], ("move_pods", "invalid_image"))),
    "hang": Scenario((*_RUN, ("log_step",))),
}


# --- Job conditions -----------------------------------------------------------------------------


def set_trainjob_condition(
    status: Obj, type_: str, ok: bool, reason: str, message: str, at: str, generation: int
) -> None:
    """metav1.Condition semantics: one per type, lastTransitionTime kept unless status flips."""
    conds: list[Obj] = status.setdefault("conditions", [])
    new = {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
        "observedGeneration": generation,
    }
    for i, cond in enumerate(conds):
        if cond["type"] == type_:
            if cond["status"] == new["status"]:
                new["lastTransitionTime"] = cond["lastTransitionTime"]
            conds[i] = new
            return
    conds.append(new)


def set_pytorchjob_condition(
    status: Obj, type_: str, ok: bool, reason: str, message: str, at: str
) -> None:
    """The Training Operator's updateJobConditions: Running and Restarting replace each other,
    Succeeded/Failed turn Running False, and the new condition goes last."""
    kept = []
    for cond in status.get("conditions") or []:
        if cond["type"] == type_ or {cond["type"], type_} == {"Running", "Restarting"}:
            continue
        if type_ in ("Succeeded", "Failed") and cond["type"] == "Running":
            cond = {**cond, "status": "False"}
        kept.append(cond)
    kept.append(
        {
            "type": type_,
            "status": "True" if ok else "False",
            "reason": reason,
            "message": message,
            "lastUpdateTime": at,
            "lastTransitionTime": at,
        }
    )
    status["conditions"] = kept


def check_scenario(scenario: str) -> None:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")

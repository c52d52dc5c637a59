"""A simulated Kubeflow control plane for the fake API server: what a cluster does to a job.

One :class:`Controller` plays the Trainer v2 + JobSet + Job controllers (TrainJob), the Training
Operator (PyTorchJob), Kueue, the scheduler and the kubelet, writing into a ``fakekube`` Store
the objects a real cluster would: the JobSet, pods with realistic statuses, job conditions, core/v1
Events and container logs (KUBEFLOW.md has the names, labels and conditions).

Each job follows a *scenario*, a row of :data:`SCENARIOS`: the list of steps it walks, one per
tick. Picked, first match wins, by :meth:`Controller.scenario`, the job's annotation
``fake.kfcompile.dev/scenario``, or the controller's default. Before the steps come two gates
that any job may meet: Kueue (a job labelled ``kueue.x-k8s.io/queue-name`` is suspended, then
admitted after ``admission_delay`` ticks) and suspension (a suspended job has no pods and waits
until its ``suspend`` flag is cleared; suspending a running job deletes its pods and starts its
steps over, like the real controllers).

Ticks come from the controller's own thread (``start()``/``stop()``, one tick per job every
``step`` seconds) or, with ``auto=False``, from the test: ``advance(namespace, name)`` and
``run_until_idle()``. A job whose object is gone is dropped: the store's garbage collection
removes its dependents and nothing here ever recreates them.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import random
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from .store import StoreError

if TYPE_CHECKING:
    from .store import Store

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


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- What the controller remembers per job and pod ----------------------------------------------


@dataclasses.dataclass
class _Pod:
    name: str
    uid: str
    rank: int
    replica: str  # TrainJob: the replicated job "node"; PyTorchJob: "Master" or "Worker"
    container: str
    image: str
    node: str
    ip: str
    stage: str = "created"  # see _pod_status
    scheduled_at: str = ""
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    restarts: int = 0
    last_state: Obj = dataclasses.field(default_factory=dict)
    obj: Obj = dataclasses.field(default_factory=dict)  # the pod as last written


@dataclasses.dataclass
class _Job:
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
    admit_in: int | None = None  # ticks left before Kueue admits; None: only admit()
    finished: bool = False
    replicas: tuple[str, ...] = ()  # PyTorchJob replica types in the spec
    pos: int = 0  # index of the next scenario step
    log_step: int = 0
    pods: list[_Pod] = dataclasses.field(default_factory=list)
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
    queued: bool = False  # Kueue queues the job even without the queue label
    suspended: bool = False  # the job starts suspended even without spec suspend=true


_RUN: Final[tuple[Step, ...]] = (
    ("create_pods",),
    ("move_pods", "creating"),  # scheduled; the kubelet creates the container
    ("move_pods", "running"),  # running and ready; each rank logs a first line
)
_TRAIN: Final[tuple[Step, ...]] = (("log_step",), ("log_step",), ("log_step",), ("succeed",))

# All scenarios share their first steps, so switching a running job from `hang` to `succeeds` or
# `fails` (Controller.scenario keeps the position) finishes it that way.
SCENARIOS: Final[Mapping[str, Scenario]] = {
    "succeeds": Scenario((*_RUN, *_TRAIN)),
    "fails": Scenario((*_RUN, ("log_step",), ("fail",))),
    "restarts": Scenario((*_RUN, ("log_step",), ("crash",), ("restart",), *_TRAIN)),
    "deadline": Scenario((*_RUN, ("log_step",), ("deadline",))),
    "queued": Scenario((*_RUN, *_TRAIN), queued=True),
    "suspended": Scenario((*_RUN, *_TRAIN), suspended=True),
    "unschedulable": Scenario((("create_pods",), ("move_pods", "unschedulable"))),
    "image_pull": Scenario((*_RUN[:2], ("move_pods", "image_pull"))),
    "hang": Scenario((*_RUN, ("log_step",))),
}


# --- Pod statuses, by stage ---------------------------------------------------------------------


def _condition(type_: str, ok: bool, at: str, reason: str = "", message: str = "") -> Obj:
    cond: Obj = {
        "type": type_,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": at,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _image_id(image: str) -> str:
    repo = image.split("@")[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    return f"{repo}@sha256:{_digest(image)}"


def _container_status(pod: _Pod, state: Obj, *, ready: bool, pulled: bool = True) -> Obj:
    status: Obj = {
        "name": pod.container,
        "image": pod.image,
        "imageID": _image_id(pod.image) if pulled else "",
        "ready": ready,
        "restartCount": pod.restarts,
        "started": "running" in state,
        "state": state,
        "lastState": pod.last_state,
    }
    if "waiting" not in state:
        status["containerID"] = f"containerd://{_digest(f'{pod.uid}/{pod.restarts}')}"
    return status


def _terminated(pod: _Pod, exit_code: int, at: str) -> Obj:
    return {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": pod.started_at,
        "finishedAt": at,
        "containerID": f"containerd://{_digest(f'{pod.uid}/{pod.restarts}')}",
    }


def _pod_status(pod: _Pod) -> Obj:
    """The status the scheduler and kubelet would report for a pod at its stage."""
    if pod.stage == "created":
        return {"phase": "Pending"}
    if pod.stage == "unschedulable":
        cond = _condition(
            "PodScheduled", False, pod.scheduled_at, "Unschedulable", UNSCHEDULABLE_MESSAGE
        )
        return {"phase": "Pending", "conditions": [cond]}
    sched, start, end = pod.scheduled_at, pod.started_at, pod.finished_at
    unready = f"containers with unready status: [{pod.container}]"
    phase, ready, since, why, message = "Running", False, sched, "ContainersNotReady", unready
    if pod.stage in ("creating", "image_pull"):
        phase = "Pending"
        if pod.stage == "creating":
            waiting: Obj = {"reason": "ContainerCreating"}
        else:
            waiting = {
                "reason": "ImagePullBackOff",
                "message": f'Back-off pulling image "{pod.image}"',
            }
        container = _container_status(pod, {"waiting": waiting}, ready=False, pulled=False)
    elif pod.stage == "running":
        ready, since, why, message = True, start, "", ""
        container = _container_status(pod, {"running": {"startedAt": start}}, ready=True)
    elif pod.stage == "crashed":  # the container exited; the kubelet is about to restart it
        since = end
        state = {"terminated": _terminated(pod, pod.exit_code, end)}
        container = _container_status(pod, state, ready=False)
    else:  # succeeded / failed
        phase = "Succeeded" if pod.stage == "succeeded" else "Failed"
        since, why, message = end, "PodCompleted" if phase == "Succeeded" else "PodFailed", ""
        state = {"terminated": _terminated(pod, pod.exit_code, end)}
        container = _container_status(pod, state, ready=False)
    status: Obj = {
        "phase": phase,
        "conditions": [
            _condition("Initialized", True, sched),
            _condition("Ready", ready, since, why, message),
            _condition("ContainersReady", ready, since, why, message),
            _condition("PodScheduled", True, sched),
        ],
        "hostIP": _node_ip(pod.node),
        "hostIPs": [{"ip": _node_ip(pod.node)}],
        "startTime": sched,
        "containerStatuses": [container],
    }
    if pod.stage != "creating" and pod.stage != "image_pull":
        status["podIP"] = pod.ip
        status["podIPs"] = [{"ip": pod.ip}]
    return status


def _node_ip(node: str) -> str:
    return f"10.0.0.{int(node.rsplit('-', 1)[1]) + 10}"


def _qos_class(containers: list[Obj]) -> str:
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits") and all(r["limits"].get(k) == v for k, v in r.get("requests", {}).items())
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(container: Obj) -> Obj:
    """The fields the API server defaults on every container."""
    image = str(container.get("image", ""))
    pull = "Always" if image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1] else None
    return {
        "imagePullPolicy": pull or "IfNotPresent",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        **container,
    }


def _default_pod_spec(spec: Obj) -> Obj:
    return {
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": spec.get("serviceAccountName", "default"),
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ],
        **spec,
        "containers": [_default_container(c) for c in spec.get("containers", [])],
    }


# --- Pod templates, per kind --------------------------------------------------------------------

# Pod spec fields that TrainJob overrides (v2.0/v2.1) and runtime patches (v2.2+) may set.
_POD_PATCH_FIELDS: Final = (
    "serviceAccountName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "terminationGracePeriodSeconds",
)


def _trainjob_pod_patches(spec: Obj) -> Iterator[tuple[Obj, Obj]]:
    """(pod metadata, pod spec) patches aimed at the `node` job, in every release's shape."""
    for override in spec.get("podSpecOverrides") or []:  # v2.0
        if any(t.get("name") == "node" for t in override.get("targetJobs") or []):
            yield {}, override
    for override in spec.get("podTemplateOverrides") or []:  # v2.1
        if any(t.get("name") == "node" for t in override.get("targetJobs") or []):
            yield override.get("metadata") or {}, override.get("spec") or {}
    for patch in spec.get("runtimePatches") or []:  # v2.2+
        runtime = patch.get("trainingRuntimeSpec") or {}
        jobs = ((runtime.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        for rjob in jobs:
            if rjob.get("name") == "node":
                pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
                yield pod.get("metadata") or {}, pod.get("spec") or {}


def _trainjob_template(cr: Obj) -> Obj:
    """The pod template the torch-distributed runtime plus the TrainJob's trainer give `node`."""
    name = cr["metadata"]["name"]
    trainer = cr.get("spec", {}).get("trainer") or {}
    nodes = int(trainer.get("numNodes") or 1)
    env = [
        *(trainer.get("env") or []),
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": str(trainer.get("numProcPerNode", "auto"))},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {
                "fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                }
            },
        },
        {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": "29400"},
    ]
    container: Obj = {
        "name": "node",
        "image": trainer.get("image") or "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
        "env": env,
        "ports": [{"containerPort": 29400, "protocol": "TCP"}],
        "resources": trainer.get("resourcesPerNode") or {},
    }
    for key in ("command", "args"):
        if trainer.get(key):
            container[key] = list(trainer[key])
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    pod_spec: Obj = {"containers": [container], "restartPolicy": "OnFailure"}
    for meta, patch in _trainjob_pod_patches(cr.get("spec") or {}):
        labels.update(meta.get("labels") or {})
        annotations.update(meta.get("annotations") or {})
        pod_spec.update({k: patch[k] for k in _POD_PATCH_FIELDS if k in patch})
        for c_patch in (patch.get("containers") or []) + (patch.get("initContainers") or []):
            for target in pod_spec["containers"]:
                if target["name"] == c_patch.get("name"):
                    target["env"] = [*target.get("env", []), *(c_patch.get("env") or [])]
                    mounts = c_patch.get("volumeMounts") or []
                    target["volumeMounts"] = [*target.get("volumeMounts", []), *mounts]
                    if "securityContext" in c_patch:
                        target["securityContext"] = c_patch["securityContext"]
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}


@dataclasses.dataclass(frozen=True)
class _PodPlan:
    """One pod to create: its name (without any random suffix), rank and metadata."""

    base: str
    rank: int
    replica: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: Obj


def _trainjob_pods(cr: Obj) -> Iterator[_PodPlan]:
    name = cr["metadata"]["name"]
    nodes = int((cr.get("spec", {}).get("trainer") or {}).get("numNodes") or 1)
    template = _trainjob_template(cr)
    job_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cr['metadata'].get('uid')}/{name}-node-0"))
    for rank in range(nodes):
        labels = {
            **template["metadata"]["labels"],
            "batch.kubernetes.io/controller-uid": job_uid,
            "batch.kubernetes.io/job-completion-index": str(rank),
            "batch.kubernetes.io/job-name": f"{name}-node-0",
            "controller-uid": job_uid,
            "job-name": f"{name}-node-0",
            "jobset.sigs.k8s.io/global-replicas": "1",
            "jobset.sigs.k8s.io/job-global-index": "0",
            "jobset.sigs.k8s.io/job-index": "0",
            "jobset.sigs.k8s.io/job-key": _digest(f"{cr['metadata'].get('namespace')}/{name}")[:40],
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
            "jobset.sigs.k8s.io/restart-attempt": "0",
        }
        annotations = {
            **template["metadata"]["annotations"],
            "batch.kubernetes.io/job-completion-index": str(rank),
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
        }
        spec = {**template["spec"], "hostname": f"{name}-node-0-{rank}", "subdomain": name}
        yield _PodPlan(f"{name}-node-0-{rank}", rank, "node", labels, annotations, spec)


def _pytorchjob_pods(cr: Obj) -> Iterator[_PodPlan]:
    name = cr["metadata"]["name"]
    spec = cr.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs") or {}
    has_master = "Master" in replicas
    world = sum(int(r.get("replicas", 1)) for r in replicas.values())
    rank = 0
    for rtype in ("Master", "Worker"):
        if rtype not in replicas:
            continue
        rspec = replicas[rtype]
        template = rspec.get("template") or {}
        restart = rspec.get("restartPolicy", "OnFailure")
        for index in range(int(rspec.get("replicas", 1))):
            labels = {
                **((template.get("metadata") or {}).get("labels") or {}),
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-index": str(index),
                "training.kubeflow.org/replica-type": rtype.lower(),
            }
            if rtype == "Master":
                labels["training.kubeflow.org/job-role"] = "master"
            pod_spec = copy.deepcopy(template.get("spec") or {})
            pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
            if has_master:  # only with a Master does the operator inject the rendezvous env
                injected = [
                    {"name": "MASTER_PORT", "value": "23456"},
                    {"name": "MASTER_ADDR", "value": f"{name}-master-0"},
                    {"name": "WORLD_SIZE", "value": str(world)},
                    {"name": "RANK", "value": str(rank)},
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                ]
                for container in pod_spec.get("containers", []):
                    if container.get("name") == "pytorch":
                        container["env"] = [*(container.get("env") or []), *injected]
            annotations = dict((template.get("metadata") or {}).get("annotations") or {})
            base = f"{name}-{rtype.lower()}-{index}"
            yield _PodPlan(base, rank, rtype, labels, annotations, pod_spec)
            rank += 1


# --- Job conditions -----------------------------------------------------------------------------


def _set_trainjob_condition(
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


def _set_pytorchjob_condition(
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


# --- The controller -----------------------------------------------------------------------------


class Controller:
    """Drives every TrainJob and PyTorchJob created in ``store`` through its scenario.

    ``step``: seconds between ticks of the own thread (``start()``/``stop()``). ``auto=False``:
    no thread; the test ticks with :meth:`advance` and :meth:`run_until_idle`.
    ``admission_delay``: ticks a queued job stays suspended before Kueue admits it (``None``: only
    :meth:`admit` admits). ``clock``: the time written into timestamps and logs (settable later
    as ``.clock``). ``seed``: for pod name suffixes and event names.
    """

    def __init__(
        self,
        store: Store,
        *,
        step: float = 0.02,
        auto: bool = True,
        default_scenario: str = "succeeds",
        admission_delay: int | None = 2,
        clock: Callable[[], datetime] | None = None,
        seed: int | None = None,
    ) -> None:
        _check_scenario(default_scenario)
        self.store = store
        self.step = step
        self.auto = auto
        self.default_scenario = default_scenario
        self.admission_delay = admission_delay
        self.clock: Callable[[], datetime] = clock or (lambda: datetime.now(UTC))
        self.errors: list[Exception] = []  # what broke a job in the own thread (then dropped)
        self._rng = random.Random(seed)
        self._lock = threading.RLock()  # one tick at a time; guards everything below
        self._jobs: dict[tuple[str, str, str], _Job] = {}
        self._chosen: dict[tuple[str, str], str] = {}
        # Store callbacks run in the writer's thread (an HTTP handler, the GC): they only queue
        # (event, kind, namespace, name, uid) here and never wait for a tick.
        self._inbox: collections.deque[tuple[str, str, str, str, str]] = collections.deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        store.subscribe(self._on_change)

    # --- public API -----------------------------------------------------------------------------

    def start(self) -> None:
        if not self.auto:
            raise RuntimeError("Controller(auto=False) is ticked by advance()/run_until_idle()")
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="fakekube-controller")
            self._thread.daemon = True
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Controller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def scenario(self, namespace: str, name: str, scenario: str) -> None:
        """Use ``scenario`` for the job(s) named so, created yet or not (this beats the
        annotation). A job already walking another scenario keeps its position."""
        _check_scenario(scenario)
        with self._lock:
            self._drain()
            self._chosen[(namespace, name)] = scenario
            for job in self._matching(namespace, name):
                if job.observed:
                    job.scenario = scenario

    def admit(self, namespace: str, name: str) -> None:
        """Kueue admits the queued job(s) named so at their next tick."""
        with self._lock:
            self._drain()
            for job in self._matching(namespace, name):
                job.admit_in = 0

    def advance(self, namespace: str, name: str) -> bool:
        """One tick of the job(s) named so: whether anything changed (False: the job waits, is
        done, or is gone)."""
        with self._lock:
            self._drain()
            return any([self._tick(job) for job in self._matching(namespace, name)])

    def run_until_idle(self, max_rounds: int = 1000) -> int:
        """Tick every job until a round changes nothing; the number of rounds that did."""
        with self._lock:
            for rounds in range(max_rounds):
                self._drain()
                if not any([self._tick(job) for job in list(self._jobs.values())]):
                    return rounds
        raise RuntimeError(f"jobs still changing after {max_rounds} rounds")

    # --- ticking --------------------------------------------------------------------------------

    def _on_change(self, event: str, obj: Obj) -> None:
        kind = obj.get("kind", "")
        expected = JOB_KINDS.get(kind)
        if event in ("ADDED", "DELETED") and expected and obj.get("apiVersion") == expected[0]:
            meta = obj["metadata"]
            self._inbox.append((event, kind, meta["namespace"], meta["name"], meta["uid"]))

    def _drain(self) -> None:
        while self._inbox:
            event, kind, namespace, name, uid = self._inbox.popleft()
            key = (kind, namespace, name)
            if event == "ADDED" and (key not in self._jobs or self._jobs[key].uid != uid):
                self._jobs[key] = _Job(JOB_KINDS[kind][0], kind, namespace, name, uid)
            elif event == "DELETED" and key in self._jobs and self._jobs[key].uid == uid:
                del self._jobs[key]

    def _matching(self, namespace: str, name: str) -> list[_Job]:
        return [j for j in self._jobs.values() if (j.namespace, j.name) == (namespace, name)]

    def _run(self) -> None:
        while not self._stop.wait(self.step):
            with self._lock:
                self._drain()
                for job in list(self._jobs.values()):
                    try:
                        self._tick(job)
                    except Exception as exc:  # keep the other jobs going; tests read .errors
                        self.errors.append(exc)
                        self._forget(job)

    def _live(self, job: _Job) -> Obj | None:
        """The job as stored now; None when it (or its kind) is gone, is being deleted (e.g.
        waiting for a foreground deletion to remove its pods), or was recreated."""
        try:
            cr = self.store.get(*job.ref)
        except StoreError as exc:
            if exc.code == 404:
                return None
            raise
        if cr is None or cr["metadata"].get("deletionTimestamp"):
            return None
        return cr if cr["metadata"]["uid"] == job.uid else None

    def _forget(self, job: _Job) -> None:
        key = (job.kind, job.namespace, job.name)
        if self._jobs.get(key) is job:
            del self._jobs[key]

    def _tick(self, job: _Job) -> bool:
        try:
            return self._tick_unguarded(job)
        except StoreError as exc:
            # A 404 mid-step means the job was deleted under us: its garbage is the store's.
            if exc.code == 404 and self._live(job) is None:
                self._forget(job)
                return False
            raise

    def _tick_unguarded(self, job: _Job) -> bool:
        cr = self._live(job)
        if cr is None:
            self._forget(job)
            return False
        if job.finished:
            return False
        if not job.observed:
            self._observe(job, cr)
            return True
        spec = cr.get("spec") or {}
        flags = spec if job.kind == "TrainJob" else spec.get("runPolicy") or {}
        if flags.get("suspend"):
            if not job.suspended:
                self._suspend(job)
                return True
            if job.kueue and not job.admitted and job.admit_in is not None:
                if job.admit_in > 0:
                    job.admit_in -= 1
                else:
                    self._admit(job, cr)
                return True
            return False
        if job.suspended:
            self._resume(job)
            return True
        steps = SCENARIOS[job.scenario].steps
        if job.pos >= len(steps):
            return False
        method, *args = steps[job.pos]
        job.pos += 1
        getattr(self, method)(job, *args)
        return True

    # --- gates: first sight, Kueue, suspension --------------------------------------------------

    def _observe(self, job: _Job, cr: Obj) -> None:
        meta = cr["metadata"]
        annotated = (meta.get("annotations") or {}).get(SCENARIO_ANNOTATION)
        job.scenario = self._chosen.get((job.namespace, job.name)) or annotated or ""
        if job.scenario not in SCENARIOS:
            if job.scenario:
                msg = (
                    f"{SCENARIO_ANNOTATION}={job.scenario!r} is not one of "
                    f"{', '.join(SCENARIOS)}; using {self.default_scenario!r}"
                )
                self.event(job.ref, job.uid, "Warning", "UnknownScenario", msg, "fakekube")
            job.scenario = self.default_scenario
        scenario = SCENARIOS[job.scenario]
        job.kueue = scenario.queued or QUEUE_LABEL in (meta.get("labels") or {})
        job.admit_in = self.admission_delay
        job.observed = True
        if job.kueue or scenario.suspended:  # as Kueue's webhook does, before any controller
            cr = self._write_suspend(job, True) or cr
        if job.kueue:
            workload = f"{job.kind.lower()}-{job.name}-{_digest(job.uid)[:5]}"
            msg = f"Created Workload: {job.namespace}/{workload}"
            self.event(job.ref, job.uid, "Normal", "CreatedWorkload", msg, "kueue-job-controller")
        if job.kind == "TrainJob":
            self._create_jobset(job, cr)
        else:
            specs = (cr.get("spec") or {}).get("pytorchReplicaSpecs") or {}
            job.replicas = tuple(r for r in ("Master", "Worker") if r in specs)
            msg = f"PyTorchJob {job.name} is created."
            self._pt_condition(job, "Created", True, "PyTorchJobCreated", msg)
            self._pt_event(job, "Normal", "PyTorchJobCreated", msg)
            self._sync_status(job)

    def _write_suspend(self, job: _Job, suspend: bool) -> Obj | None:
        def change(cr: Obj) -> None:
            spec = cr.setdefault("spec", {})
            flags = spec if job.kind == "TrainJob" else spec.setdefault("runPolicy", {})
            flags["suspend"] = suspend

        return self._modify(job.ref, change)

    def _admit(self, job: _Job, cr: Obj) -> None:
        queue = (cr["metadata"].get("labels") or {}).get(QUEUE_LABEL, "user-queue")
        job.admitted = True
        self._write_suspend(job, False)
        msg = f"Admitted by clusterQueue cluster-queue (local queue {queue})"
        self.event(job.ref, job.uid, "Normal", "Started", msg, "kueue-admission")

    def _suspend(self, job: _Job) -> None:
        """Like the controllers on suspend=true: the pods go; the steps start over on resume."""
        job.suspended = True
        job.pos = job.log_step = 0
        self._delete_pods(job, job.pods)
        if job.kind == "TrainJob":
            self._tj_condition(job, "Suspended", True, "Suspended", "TrainJob is suspended")
            self._update_jobset(job, suspend=True)
        else:
            msg = f"PyTorchJob {job.name} is suspended."
            if self._pt_true(job, "Running"):
                self._pt_condition(job, "Running", False, "PyTorchJobSuspended", msg)
            self._pt_condition(job, "Suspended", True, "PyTorchJobSuspended", msg)
            job.status.pop("startTime", None)
            self._pt_event(job, "Normal", "PyTorchJobSuspended", msg)
        self._sync_status(job)

    def _resume(self, job: _Job) -> None:
        job.suspended = False
        if job.kind == "TrainJob":
            self._tj_condition(job, "Suspended", False, "Resumed", "TrainJob is resumed")
            self._update_jobset(job, suspend=False)
        else:
            msg = f"PyTorchJob {job.name} is resumed."
            self._pt_condition(job, "Suspended", False, "PyTorchJobResumed", msg)
            self._pt_event(job, "Normal", "PyTorchJobResumed", msg)
        self._sync_status(job)

    # --- steps (named by SCENARIOS) -------------------------------------------------------------

    def create_pods(self, job: _Job) -> None:
        cr = self._live(job)
        if cr is None:
            return
        trainjob = job.kind == "TrainJob"
        plans = _trainjob_pods(cr) if trainjob else _pytorchjob_pods(cr)
        owner = self._jobset_owner(job) if trainjob else job.owner
        main = "node" if trainjob else "pytorch"
        for plan in plans:
            suffix = "".join(self._rng.choices(NAME_ALPHABET, k=5))
            name = f"{plan.base}-{suffix}" if trainjob else plan.base
            spec = _default_pod_spec(plan.spec)
            meta: Obj = {
                "name": name,
                "namespace": job.namespace,
                "labels": plan.labels,
                "annotations": plan.annotations,
                "ownerReferences": [owner],
            }
            if trainjob:  # the Job controller names pods by generateName
                meta["generateName"] = f"{plan.base}-"
            status = {"phase": "Pending", "qosClass": _qos_class(spec["containers"])}
            pod_obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
            created = self.store.create({**pod_obj, "status": status})
            image = next((c.get("image", "") for c in spec["containers"] if c["name"] == main), "")
            node = f"gpu-node-{plan.rank % NODE_COUNT}"
            ip = f"10.244.{plan.rank // 250}.{plan.rank % 250 + 2}"
            uid = created["metadata"]["uid"]
            pod = _Pod(name, uid, plan.rank, plan.replica, main, image, node, ip, obj=created)
            job.pods.append(pod)
            msg = f"Created pod: {name}"
            if trainjob:
                child = ("batch/v1", "Job", job.namespace, f"{job.name}-node-0")
                child_uid = plan.labels["batch.kubernetes.io/controller-uid"]
                self.event(child, child_uid, "Normal", "SuccessfulCreate", msg, "job-controller")
            else:
                self._pt_event(job, "Normal", "SuccessfulCreatePod", msg)
        if self._live(job) is None:  # deleted meanwhile: GC may have run before these existed
            self._delete_pods(job, job.pods)
            return
        if not trainjob:
            job.status.setdefault("startTime", self.now())
        self._sync_status(job)

    def move_pods(self, job: _Job, stage: str) -> None:
        now = self.now()
        for pod in job.pods:
            pod.stage = stage
            if stage in ("creating", "unschedulable"):
                pod.scheduled_at = now
            elif stage == "running":
                pod.started_at = now
        self._write_pods(job, job.pods)
        for pod in job.pods:
            self._pod_events(job, pod, stage)
            if stage == "running":
                self._log(job, pod, f"rank {pod.rank}: world size {len(job.pods)}, starting")
        self._sync_status(job)

    def log_step(self, job: _Job) -> None:
        job.log_step += 1
        loss = 0.9**job.log_step
        for pod in job.pods:
            if pod.stage == "running":
                self._log(job, pod, f"rank {pod.rank} step {job.log_step} loss {loss:.4g}")

    def succeed(self, job: _Job) -> None:
        now = self.now()
        for pod in job.pods:
            self._log(job, pod, f"rank {pod.rank}: training finished")
            pod.stage, pod.finished_at, pod.exit_code = "succeeded", now, 0
        self._write_pods(job, job.pods)
        job.finished = True
        if job.kind == "TrainJob":
            msg = "jobset completed successfully"
            self._tj_condition(job, "Complete", True, "AllJobsCompleted", msg)
            self._jobset_finished(job, "Completed", "AllJobsCompleted", msg)
        else:
            msg = f"PyTorchJob {job.name} is successfully completed."
            self._pt_condition(job, "Succeeded", True, "PyTorchJobSucceeded", msg)
            msg = f"PyTorchJob {job.namespace}/{job.name} successfully completed."
            self._pt_event(job, "Normal", "PyTorchJobSucceeded", msg)
            job.status["completionTime"] = now
            self._clean_pods(job)
        self._sync_status(job)

    def fail(self, job: _Job) -> None:
        victim = job.pods[min(1, len(job.pods) - 1)]
        for line in (
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 42, in <module>',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ):
            self._log(job, victim, line)
        victim.stage, victim.finished_at, victim.exit_code = "failed", self.now(), 1
        self._write_pods(job, [victim])
        job.finished = True
        if job.kind == "TrainJob":
            msg = (
                "jobset failed due to one or more job failures "
                f"(first failed job: {job.name}-node-0)"
            )
            self._tj_condition(job, "Failed", True, "FailedJobs", msg)
            self._jobset_finished(job, "Failed", "FailedJobs", msg)
            # The failed Job's controller deletes its pods that still run.
            self._delete_pods(job, [p for p in job.pods if p is not victim])
        else:
            msg = (
                f"PyTorchJob {job.namespace}/{job.name} has failed because 1 "
                f"{victim.replica} replica(s) failed."
            )
            self._pt_condition(job, "Failed", True, "PyTorchJobFailed", msg)
            self._pt_event(job, "Normal", "PyTorchJobFailed", msg)
            job.status["completionTime"] = self.now()
            self._clean_pods(job)
        self._sync_status(job)

    def crash(self, job: _Job) -> None:
        victim = job.pods[min(1, len(job.pods) - 1)]
        self._log(job, victim, f"RuntimeError: NCCL communicator was aborted on rank {victim.rank}")
        victim.stage, victim.finished_at, victim.exit_code = "crashed", self.now(), 1
        self._write_pods(job, [victim])
        if job.kind == "PyTorchJob":
            msg = (
                f"PyTorchJob {job.namespace}/{job.name} is restarting because 1 "
                f"{victim.replica} replica(s) failed."
            )
            self._pt_condition(job, "Restarting", True, "PyTorchJobRestarting", msg)
            self._pt_event(job, "Warning", "PyTorchJobRestarting", msg)
        self._sync_status(job)

    def restart(self, job: _Job) -> None:
        """The kubelet restarts the crashed container in place (restartPolicy OnFailure)."""
        now = self.now()
        restarted = [p for p in job.pods if p.stage == "crashed"]
        for pod in restarted:
            pod.last_state = {"terminated": _terminated(pod, pod.exit_code, pod.finished_at)}
            pod.restarts += 1
            pod.stage, pod.started_at, pod.finished_at = "running", now, ""
        self._write_pods(job, restarted)
        for pod in restarted:
            self._pod_events(job, pod, "running")
            self._log(job, pod, f"rank {pod.rank}: restarted, resuming from the last checkpoint")
        if job.kind == "PyTorchJob":
            msg = f"PyTorchJob {job.name} is running."
            self._pt_condition(job, "Running", True, "PyTorchJobRunning", msg)
        self._sync_status(job)

    def deadline(self, job: _Job) -> None:
        job.finished = True
        if job.kind == "TrainJob":
            msg = "TrainJob exceeded its active deadline"
            self._tj_condition(job, "Failed", True, "DeadlineExceeded", msg)
            # The Trainer deletes the JobSet; the store's garbage collection takes the pods.
            self._delete(*JOBSET, job.namespace, job.name)
            job.pods = []
        else:
            msg = f"Job {job.name} has failed because it was active longer than specified deadline"
            self._pt_condition(job, "Failed", True, "PyTorchJobFailed", msg)
            self._pt_event(job, "Normal", "PyTorchJobFailed", msg)
            job.status["completionTime"] = self.now()
            self._clean_pods(job)
        self._sync_status(job)

    # --- writing objects ------------------------------------------------------------------------

    def now(self) -> str:
        return rfc3339(self.clock())

    def event(
        self,
        involved: tuple[str, str, str, str],
        uid: str,
        type_: str,
        reason: str,
        message: str,
        component: str,
        *,
        host: str = "",
        field_path: str = "",
    ) -> Obj:
        """Record a core/v1 Event about ``involved`` (apiVersion, kind, namespace, name)."""
        api_version, kind, namespace, name = involved
        now = self.now()
        about: Obj = {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "uid": uid,
        }
        if field_path:
            about["fieldPath"] = field_path
        source: Obj = {"component": component, **({"host": host} if host else {})}
        return self.store.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{name}.{self._rng.getrandbits(64):016x}",
                    "namespace": namespace,
                },
                "involvedObject": about,
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": source,
                "reportingComponent": component,
                "reportingInstance": host or component,
            }
        )

    def _pt_event(self, job: _Job, type_: str, reason: str, message: str) -> None:
        self.event(job.ref, job.uid, type_, reason, message, "pytorchjob-controller")

    def _pod_events(self, job: _Job, pod: _Pod, stage: str) -> None:
        ref = (*POD, job.namespace, pod.name)
        if stage == "creating":
            msg = f"Successfully assigned {job.namespace}/{pod.name} to {pod.node}"
            self.event(ref, pod.uid, "Normal", "Scheduled", msg, "default-scheduler")
            return
        if stage == "unschedulable":
            msg = UNSCHEDULABLE_MESSAGE
            self.event(ref, pod.uid, "Warning", "FailedScheduling", msg, "default-scheduler")
            return
        kubelet: tuple[tuple[str, str, str], ...] = ()
        if stage == "running":
            kubelet = (
                ("Normal", "Pulled", f'Container image "{pod.image}" already present on machine'),
                ("Normal", "Created", f"Created container: {pod.container}"),
                ("Normal", "Started", f"Started container {pod.container}"),
            )
        elif stage == "image_pull":
            kubelet = (
                (
                    "Warning",
                    "Failed",
                    f'Failed to pull image "{pod.image}": rpc error: code = NotFound desc = '
                    f'failed to pull and unpack image "{pod.image}": not found',
                ),
                ("Warning", "Failed", "Error: ErrImagePull"),
                ("Normal", "BackOff", f'Back-off pulling image "{pod.image}"'),
                ("Warning", "Failed", "Error: ImagePullBackOff"),
            )
        where = f"spec.containers{{{pod.container}}}"
        for type_, reason, msg in kubelet:
            self.event(ref, pod.uid, type_, reason, msg, "kubelet", host=pod.node, field_path=where)

    def _log(self, job: _Job, pod: _Pod, line: str) -> None:
        at = self.clock().timestamp()
        self.store.append_log(job.namespace, pod.name, pod.container, line + "\n", at=at)

    def _write_pods(self, job: _Job, pods: list[_Pod]) -> None:
        """Write each pod's status (and its node, once scheduled) over the version last seen,
        with optimistic concurrency as real controllers do: most writes need no read first, and
        that matters for 1,000-pod jobs."""
        for pod in pods:
            current = pod.obj
            while True:
                spec = current["spec"]
                if pod.stage not in ("created", "unschedulable"):
                    spec = {**spec, "nodeName": pod.node}
                qos = current["status"]["qosClass"]
                status = {**_pod_status(pod), "qosClass": qos}
                try:
                    pod.obj = self.store.apply_update(
                        {**current, "spec": spec, "status": status}, check_rv=True
                    )
                    break
                except StoreError as exc:
                    if exc.code == 404:  # deleted by someone else: never recreate it
                        break
                    if exc.code != 409:
                        raise
                found = self.store.get(*POD, job.namespace, pod.name)
                if found is None:
                    break
                current = found

    def _delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        try:
            self.store.delete(api_version, kind, namespace, name)
        except StoreError as exc:
            if exc.code != 404:  # 404: someone (or the GC) was first
                raise

    def _delete_pods(self, job: _Job, pods: list[_Pod]) -> None:
        for pod in pods:
            self._delete(*POD, job.namespace, pod.name)
        gone = {id(p) for p in pods}
        job.pods = [p for p in job.pods if id(p) not in gone]

    def _clean_pods(self, job: _Job) -> None:
        """PyTorchJob runPolicy.cleanPodPolicy (default None) once the job is finished."""
        cr = self._live(job) or {}
        policy = ((cr.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy", "None")
        self._delete_pods(
            job,
            [
                p
                for p in job.pods
                if policy == "All"
                or (policy == "Running" and p.stage not in ("succeeded", "failed"))
            ],
        )

    def _write_status(self, job: _Job) -> None:
        self.store.patch_status(*job.ref, copy.deepcopy(job.status))

    def _tj_condition(self, job: _Job, type_: str, ok: bool, reason: str, message: str) -> None:
        generation = int(((self._live(job) or {}).get("metadata") or {}).get("generation") or 1)
        _set_trainjob_condition(job.status, type_, ok, reason, message, self.now(), generation)

    def _pt_condition(self, job: _Job, type_: str, ok: bool, reason: str, message: str) -> None:
        _set_pytorchjob_condition(job.status, type_, ok, reason, message, self.now())

    def _pt_true(self, job: _Job, type_: str) -> bool:
        return any(
            c["type"] == type_ and c["status"] == "True" for c in job.status.get("conditions", [])
        )

    def _sync_status(self, job: _Job) -> None:
        """Counters from the pods (TrainJob: its one child Job; PyTorchJob: pods per replica
        type), PyTorchJob Running once all its pods run, then write the status."""
        stages = [p.stage for p in job.pods]
        all_running = bool(stages) and all(s == "running" for s in stages)
        if job.kind == "TrainJob":
            done = {c["type"] for c in job.status.get("conditions", []) if c["status"] == "True"}
            counts = {
                "ready": int(all_running),
                "succeeded": int("Complete" in done),
                "failed": int("Failed" in done),
                "active": int(bool(stages) and not done & {"Complete", "Failed"}),
                "suspended": int(job.suspended),
            }
            self._update_jobset(job, counts=counts)
            job.status["jobsStatus"] = [{"name": "node", **counts}]
        else:
            replicas: Obj = {}
            for rtype in job.replicas:
                entry: Obj = {
                    "selector": f"training.kubeflow.org/job-name={job.name},"
                    "training.kubeflow.org/operator-name=pytorchjob-controller,"
                    f"training.kubeflow.org/replica-type={rtype.lower()}",
                }
                for key, counted in (
                    ("active", ("running", "crashed")),  # pods in phase Running
                    ("succeeded", ("succeeded",)),
                    ("failed", ("failed",)),
                ):
                    n = sum(p.replica == rtype and p.stage in counted for p in job.pods)
                    if n:  # omitempty
                        entry[key] = n
                replicas[rtype] = entry
            job.status["replicaStatuses"] = replicas
            quiet = not (self._pt_true(job, "Running") or self._pt_true(job, "Restarting"))
            if all_running and not job.finished and quiet:
                msg = f"PyTorchJob {job.name} is running."
                self._pt_condition(job, "Running", True, "PyTorchJobRunning", msg)
            job.status["lastReconcileTime"] = self.now()
        self._write_status(job)

    # --- the TrainJob's JobSet ------------------------------------------------------------------

    def _create_jobset(self, job: _Job, cr: Obj) -> None:
        spec = cr.get("spec") or {}
        nodes = int((spec.get("trainer") or {}).get("numNodes") or 1)
        job_template = {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                "parallelism": nodes,
                "completions": nodes,
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": _trainjob_template(cr),
            },
        }
        self.store.create(
            {
                "apiVersion": JOBSET[0],
                "kind": JOBSET[1],
                "metadata": {
                    "name": job.name,
                    "namespace": job.namespace,
                    "labels": dict(spec.get("labels") or {}),
                    "annotations": dict(spec.get("annotations") or {}),
                    "ownerReferences": [job.owner],
                },
                "spec": {
                    "suspend": bool(spec.get("suspend")),
                    "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All"},
                    "replicatedJobs": [{"name": "node", "replicas": 1, "template": job_template}],
                },
            }
        )

    def _jobset_owner(self, job: _Job) -> Obj:
        jobset = self.store.get(*JOBSET, job.namespace, job.name) or {"metadata": {}}
        uid = jobset["metadata"].get("uid", "")
        return {**job.owner, "apiVersion": JOBSET[0], "kind": JOBSET[1], "uid": uid}

    def _update_jobset(
        self, job: _Job, *, suspend: bool | None = None, counts: Obj | None = None
    ) -> None:
        def change(jobset: Obj) -> None:
            if suspend is not None:
                jobset["spec"]["suspend"] = suspend
            if counts is not None:
                status = jobset.setdefault("status", {})
                status["replicatedJobsStatus"] = [{"name": "node", **counts}]

        self._modify((*JOBSET, job.namespace, job.name), change)

    def _jobset_finished(self, job: _Job, type_: str, reason: str, message: str) -> None:
        def change(jobset: Obj) -> None:
            status = jobset.setdefault("status", {})
            _set_trainjob_condition(status, type_, True, reason, message, self.now(), 1)
            status["terminalState"] = type_

        jobset = self._modify((*JOBSET, job.namespace, job.name), change)
        if jobset is not None:
            kind = "Normal" if type_ == "Completed" else "Warning"
            ref = (*JOBSET, job.namespace, job.name)
            self.event(ref, jobset["metadata"]["uid"], kind, reason, message, "jobset")

    def _modify(self, ref: tuple[str, str, str, str], change: Callable[[Obj], None]) -> Obj | None:
        """Read, change, write with optimistic concurrency (retrying on a conflict), as real
        controllers do; None when the object is gone."""
        while True:
            obj = self.store.get(*ref)
            if obj is None:
                return None
            change(obj)
            try:
                return self.store.apply_update(obj, check_rv=True)
            except StoreError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 409:
                    raise


def _check_scenario(scenario: str) -> None:
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}: expected one of {', '.join(SCENARIOS)}")

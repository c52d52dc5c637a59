"""What Kubeflow Trainer (with JobSet) or the Training Operator and the kubelets write for a job,
as steps a lifecycle test scripts on a ``PortFake``: ``start`` (a Running pod per rank, labelled
as JobSet or the operator labels them, the Job controller's event for each TrainJob pod, the job
running), ``restart`` (a PyTorchJob's ``Restarting``), ``finish`` (the pods' ends and the job's
condition). ``runs`` does them for each job created, at fake-clock times after its create;
``helpers`` is the kubelet of the work-dir sync's helper pods. The shapes are KUBEFLOW.md's
(trainer ``pkg/apis/trainer/v1alpha1``, training-operator ``pkg/apis/kubeflow.org/v1``, JobSet's
labels, core/v1 PodStatus, events.k8s.io/v1 Event)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kfcompile.kinds import COMPLETION_INDEX, PYTORCHJOB, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB
from kfcompile.spec.additions import QUEUE_LABEL

from .port import Obj, PortFake
from .resources import rfc3339

__all__ = [
    "crash",
    "finish",
    "helpers",
    "kueue",
    "pending",
    "pod_name",
    "pods",
    "progress",
    "restart",
    "runs",
    "start",
    "suspends",
    "train",
]

KINDS = {kind.name: kind for kind in (TRAINJOB, PYTORCHJOB)}
Plan = tuple[str, int, dict[str, str]]  # a pod's name, rank and labels
Fake = PortFake  # the lifecycle tests' fake, or the one whose store the HTTP server serves


def pod_name(job: str, rank: int) -> str:
    """A TrainJob's pod, as the Job controller names it: ``<jobset>-<replicated job>-<job
    index>-<pod index>-`` and five random letters (here always the same)."""
    return f"{job}-node-0-{rank}-bcdfg"


def _plans(job: Obj) -> list[Plan]:
    name, spec = job["metadata"]["name"], job.get("spec") or {}
    if job["kind"] == "TrainJob":
        labels = {"jobset.sigs.k8s.io/jobset-name": name,
                  "jobset.sigs.k8s.io/replicatedjob-name": "node"}  # fmt: skip
        nodes = int((spec.get("trainer") or {}).get("numNodes", 1))
        return [(pod_name(name, r), r, {**labels, COMPLETION_INDEX: str(r)}) for r in range(nodes)]
    plans, replicas = [], spec.get("pytorchReplicaSpecs") or {}
    for kind in ("Master", "Worker"):
        for index in range(int((replicas.get(kind) or {"replicas": 0}).get("replicas", 1))):
            labels = {"training.kubeflow.org/job-name": name, REPLICA_TYPE: kind.lower(),
                      REPLICA_INDEX: str(index)}  # fmt: skip
            plans.append((f"{name}-{kind.lower()}-{index}", len(plans), labels))
    return plans


def _job(fake: Fake, namespace: str, kind: str, name: str) -> Obj | None:
    """The job, unless it was deleted meanwhile."""
    job = fake.objects.items.get((KINDS[kind].api_version, kind, namespace, name))
    return None if job is None or job["metadata"].get("deletionTimestamp") else job


def pods(fake: Fake, namespace: str, name: str, kind: str = "TrainJob") -> list[Obj]:
    return fake.objects.list("v1", "Pod", namespace, KINDS[kind].pods.format(name=name))


def _container(phase: str, at: str, code: int, restarts: int = 0) -> Obj:
    if phase == "Running":
        state: Obj = {"ready": True, "started": True, "state": {"running": {"startedAt": at}}}
    else:
        reason = "Completed" if code == 0 else "Error"
        ended = {"exitCode": code, "reason": reason, "startedAt": at, "finishedAt": at}
        state = {"ready": False, "started": False, "state": {"terminated": ended}}
    return {"restartCount": restarts, **state}


def _pod(fake: Fake, job: Obj, plan: Plan, phase: str, code: int = 0) -> None:
    meta, (name, rank, labels) = job["metadata"], plan
    kind = KINDS[job["kind"]]
    owner = {"apiVersion": kind.api_version, "kind": kind.name, "name": meta["name"],
             "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    where = {"name": name, "namespace": meta["namespace"]}
    # a restarted container's count stays (its logs are kept per run)
    old = fake.objects.items.get(("v1", "Pod", meta["namespace"], name)) or {}
    runs = [
        s.get("restartCount", 0) for s in (old.get("status") or {}).get("containerStatuses") or []
    ]
    at = rfc3339(fake.clock.time())
    container = {"name": kind.container, **_container(phase, at, code, max(runs, default=0))}
    fake.objects.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**where, "labels": labels, "ownerReferences": [owner]},
            "spec": {"nodeName": f"gpu-node-{rank}", "containers": [{"name": kind.container}]},
            "status": {"phase": phase, "containerStatuses": [container]},
        }
    )


def _created(fake: Fake, namespace: str, job: str, pod: str) -> None:
    """The Job controller's event for each pod it creates (events.k8s.io/v1)."""
    fake.objects.put(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{pod}.created", "namespace": namespace},
            "regarding": {"apiVersion": "batch/v1", "kind": "Job", "name": job},
            "reason": "SuccessfulCreate",
            "note": f"Created pod: {pod}",
            "type": "Normal",
            "eventTime": rfc3339(fake.clock.time()),
            "reportingController": "job-controller",
        }
    )


def _conditions(fake: Fake, job: Obj, *conditions: tuple[str, str, str]) -> None:
    """Write the job's conditions ``(type, status, reason)``, in this order."""
    at = rfc3339(fake.clock.time())
    written = [{"type": t, "status": s, "reason": r, "message": f"{r} ({job['metadata']['name']})",
                "lastTransitionTime": at} for t, s, r in conditions]  # fmt: skip
    meta = job["metadata"]
    fake.objects.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                        {"status": {"conditions": written}})  # fmt: skip


def start(fake: Fake, namespace: str, name: str, kind: str = "TrainJob") -> None:
    """The job's pods run, one per rank, each having logged its first line."""
    job = _job(fake, namespace, kind, name)
    if job is None:
        return
    plans = _plans(job)
    for plan in plans:
        _pod(fake, job, plan, "Running")
        fake.log(namespace, plan[0], f"rank {plan[1]}: starting")
        if kind == "TrainJob":
            _created(fake, namespace, f"{name}-node-0", plan[0])
    if kind == "TrainJob":
        # JobSet's ReplicatedJobStatus: every count required (the v2.3 CRD's jobsStatus items)
        active = [{"name": "node", "active": len(plans), "ready": len(plans), "succeeded": 0,
                   "failed": 0, "suspended": 0}]  # fmt: skip
        fake.objects.change(
            job["apiVersion"], kind, namespace, name, {"status": {"jobsStatus": active}}
        )
    else:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Running", "True", "PyTorchJobRunning"))  # fmt: skip


def progress(
    fake: Fake, namespace: str, name: str, percent: int, *, remaining: int = 0, loss: str = "0.9"
) -> None:
    """A TrainJob's trainer reports a training step (trainerStatus, the Trainer's TrainJobStatus
    feature gate from v2.2: ``pkg/apis/trainer/v1alpha1`` TrainerStatus)."""
    job = _job(fake, namespace, "TrainJob", name)
    if job is None:
        return
    status = {"progressPercentage": percent, "estimatedRemainingSeconds": remaining,
              "metrics": [{"name": "loss", "value": loss}],
              "lastUpdatedTime": rfc3339(fake.clock.time())}  # fmt: skip
    fake.objects.change(job["apiVersion"], "TrainJob", namespace, name,
                        {"status": {"trainerStatus": status}})  # fmt: skip


def train(fake: Fake, namespace: str, name: str, kind: str, step: int, *, report: bool) -> None:
    """Each running rank logs training step ``step`` (its loss 0.9 ** step); ``report``: a
    TrainJob's trainer reports it too, 30 % a step (``progress``)."""
    job = _job(fake, namespace, kind, name)
    if job is None:
        return
    loss = f"{0.9**step:.4g}"
    for pod, rank, _ in _plans(job):
        fake.log(namespace, pod, f"rank {rank} step {step} loss {loss}")
    if report and kind == "TrainJob":
        percent = min(30 * step, 100)
        progress(fake, namespace, name, percent, remaining=(100 - percent) // 30 * 60, loss=loss)


def crash(fake: Fake, namespace: str, name: str, rank: int, line: str) -> None:
    """Rank ``rank``'s container of a PyTorchJob crashes, saying ``line``, and the kubelet
    starts it again: its log starts over, its restart counted (``lastState`` the crash)."""
    job = _job(fake, namespace, "PyTorchJob", name)
    if job is None:
        return
    pod, _, _ = _plans(job)[rank]
    fake.log(namespace, pod, line)  # the new run's log starts empty (its restartCount)
    at = rfc3339(fake.clock.time())
    [status] = fake.objects.items["v1", "Pod", namespace, pod]["status"]["containerStatuses"]
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": at}}
    again = {**_container("Running", at, 0, status["restartCount"] + 1), "lastState": crashed}
    change = {"status": {"containerStatuses": [{**status, **again}]}}
    fake.objects.change("v1", "Pod", namespace, pod, change)
    fake.at(0.1, lambda: fake.log(namespace, pod, f"rank {rank}: starting"))  # after its back-off
    restart(fake, namespace, name)


def restart(fake: Fake, namespace: str, name: str) -> None:
    """A PyTorchJob's pods are being recreated after a retryable failure."""
    job = _job(fake, namespace, "PyTorchJob", name)
    if job is not None:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Restarting", "True", "PyTorchJobRestarting"))  # fmt: skip


def finish(
    fake: Fake, namespace: str, name: str, kind: str = "TrainJob", *, reason: str = ""
) -> None:
    """The pods end and the job's condition says how: it succeeded, or failed for ``reason``
    (rank 0 exits 1; ``DeadlineExceeded``: its pods are deleted, none failed)."""
    job = _job(fake, namespace, kind, name)
    if job is None:
        return
    for plan in _plans(job):
        code = 1 if reason and plan[1] == 0 and reason != "DeadlineExceeded" else 0
        fake.log(namespace, plan[0], f"rank {plan[1]}: exit {code}")
        _pod(fake, job, plan, "Failed" if code else "Succeeded", code)
    if kind == "TrainJob":
        done = ("Failed", "True", reason) if reason else ("Complete", "True", "AllJobsCompleted")
        _conditions(fake, job, done)
    else:
        done = (
            ("Failed", "True", reason) if reason else ("Succeeded", "True", "PyTorchJobSucceeded")
        )
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Running", "False", "PyTorchJobRunning"), done)  # fmt: skip


# Why a pod waits to start, as the scheduler or the kubelet writes it, and the Warning event
# each writes with it (the event's reason and note); None: none.
PENDING: dict[str, tuple[Obj, tuple[str, str] | None]] = {
    "NotScheduled": ({}, None),
    "Unschedulable": (
        {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                }
            ]
        },
        ("FailedScheduling", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
    ),
    "ContainerCreating": ({"reason": "ContainerCreating"}, None),
    "ImagePullBackOff": (
        {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "python:3.11-slim"'},
        ("Failed", 'Failed to pull image "python:3.11-slim": not found'),
    ),
    "InvalidImageName": (
        {"reason": "InvalidImageName", "message": 'Failed to apply default image tag "bad image"'},
        ("InspectFailed", 'Failed to apply default image tag "bad image": invalid reference'),
    ),
}


def pending(fake: Fake, namespace: str, name: str, why: str, kind: str = "TrainJob") -> None:
    """The job's pods exist and wait to start, for ``why`` (a key of ``PENDING``)."""
    job = _job(fake, namespace, kind, name)
    if job is None:
        return
    said, event = PENDING[why]
    container = KINDS[kind].container
    for plan in _plans(job):
        _pod(fake, job, plan, "Pending")
        pod = fake.objects.items[("v1", "Pod", namespace, plan[0])]
        status: Obj = {"phase": "Pending", "conditions": said.get("conditions", [])}
        spec = pod["spec"] if why not in ("NotScheduled", "Unschedulable") else {"nodeName": None}
        if "reason" in said:
            status["containerStatuses"] = [{"name": container, "ready": False, "restartCount": 0,
                                            "state": {"waiting": said}}]  # fmt: skip
        else:
            status["containerStatuses"] = None
        fake.objects.change("v1", "Pod", namespace, plan[0], {"spec": spec, "status": status})
        if event is not None:
            fake.objects.put(
                {
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "Event",
                    "metadata": {"name": f"{plan[0]}.{event[0].lower()}", "namespace": namespace},
                    "regarding": {"apiVersion": "v1", "kind": "Pod", "name": plan[0]},
                    "reason": event[0],
                    "note": event[1],
                    "type": "Warning",
                    "eventTime": rfc3339(fake.clock.time()),
                }
            )


def runs(
    fake: Fake,
    *,
    starts: float = 0.2,
    ends: float | None = 1.0,
    reason: str = "",
    restarts: float | None = None,
    waits: str | None = None,
    steps: int = 0,
    reports: Callable[[], bool] = lambda: False,
) -> Callable[[Obj], None]:
    """What happens to each job created: its pods run ``starts`` s after, a PyTorchJob restarts
    ``restarts`` s after if given, and it ends ``ends`` s after (None: never), failed for
    ``reason`` if given; ``waits``: its pods wait to start instead, for that (a key of
    ``PENDING``); ``steps``: training steps between its start and its end, logged (``train``;
    ``reports()``: reported too). Pass it to ``fake.on_create``."""

    def script(obj: Obj) -> None:
        if obj["kind"] not in KINDS:
            return
        ns, name, kind = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["kind"]
        if waits is not None:
            fake.at(starts, lambda: pending(fake, ns, name, waits, kind))
            return
        fake.at(starts, lambda: start(fake, ns, name, kind))
        gap = ((6 * starts if ends is None else ends) - starts) / (steps + 1)  # never: as 1 s
        for step in range(1, steps + 1):
            done = functools.partial(train, fake, ns, name, kind, step)
            fake.at(starts + step * gap, lambda done=done: done(report=reports()))
        if restarts is not None:
            fake.at(restarts, lambda: restart(fake, ns, name))
        if ends is not None:
            fake.at(ends, lambda: finish(fake, ns, name, kind, reason=reason))

    return script


def _suspended(job: Obj) -> bool:
    spec = job.get("spec") or {}
    return bool(spec.get("suspend") if job["kind"] == "TrainJob" else
                (spec.get("runPolicy") or {}).get("suspend"))  # fmt: skip


def _condition(job: Obj, type_: str) -> Obj:
    conditions = (job.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), {})


def suspends(fake: Fake) -> Callable[[Obj], None]:
    """The controllers' answer to a job's suspend flag, for ``fake.on_patch``: suspended, its
    pods are deleted and its ``Suspended`` condition is True; resumed, it runs again."""

    def script(obj: Obj) -> None:
        if obj["kind"] not in KINDS:
            return
        ns, name, kind = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["kind"]
        if _suspended(obj):
            for pod in pods(fake, ns, name, kind):
                fake.objects.delete("v1", "Pod", ns, pod["metadata"]["name"])
            _conditions(fake, obj, ("Suspended", "True", "Suspended"))
        elif {"type": "Suspended", "status": "True"}.items() <= _condition(
            obj, "Suspended"
        ).items():
            _conditions(fake, obj, ("Suspended", "False", "Resumed"))
            fake.at(0.2, lambda: start(fake, ns, name, kind))

    return script


def _nested(path: tuple[str, ...], value: object) -> Obj:
    """A merge patch of the spec field at ``path``."""
    patch: Obj = {path[-1]: value}
    for part in reversed(path[:-1]):
        patch = {part: patch}
    return {"spec": patch}


def kueue(fake: Fake, *, admits: float = 0.5, **lives: Any) -> Callable[[Obj], None]:
    """Kueue for each job created with a queue: its webhook suspends it, the job is admitted
    (resumed) ``admits`` s later, and from then it ``runs(**lives)``."""
    then = runs(fake, **lives)

    def script(obj: Obj) -> None:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] not in KINDS or QUEUE_LABEL not in labels:
            return
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        key = (obj["apiVersion"], obj["kind"], ns, name)
        flag = ("suspend",) if obj["kind"] == "TrainJob" else ("runPolicy", "suspend")
        fake.objects.change(*key, _nested(flag, True))
        _conditions(fake, fake.objects.items[key], ("Suspended", "True", "Suspended"))

        def admit() -> None:
            fake.objects.change(*key, _nested(flag, False))
            _conditions(fake, fake.objects.items[key], ("Suspended", "False", "Resumed"))
            then(fake.objects.items[key])

        fake.at(admits, admit)

    return script


# What the kubelet does with a helper pod of these images: it waits to start, for that reason.
BAD_IMAGE, SLOW_IMAGE = "does-not-exist", "slow-to-pull"  # mistyped; never done pulling
IMAGES = {BAD_IMAGE: "ImagePullBackOff", SLOW_IMAGE: "ContainerCreating"}


def helpers(fake: Fake, *, waiting: str | None = None, after: float = 0.1) -> Callable[[Obj], None]:
    """The kubelet of the work-dir sync's helper pods: each runs ``after`` s after its create
    (0: at once, before the create is answered), or stays waiting to start for ``waiting``
    (``ImagePullBackOff``; by default as ``IMAGES`` says of its image). Pass it to
    ``on_create``."""

    def script(obj: Obj) -> None:
        meta = obj["metadata"]
        if obj["kind"] != "Pod" or (meta.get("labels") or {}).get("kfcompile.dev/role") != "sync":
            return
        names = [c["name"] for c in obj["spec"]["containers"]]
        image = " ".join(c.get("image", "") for c in obj["spec"]["containers"])
        why = next((why for part, why in IMAGES.items() if part in image), waiting)
        state = {"waiting": {"reason": why}} if why else {"running": {}}
        containers = [{"name": n, "ready": not why, "state": state} for n in names]
        status = {"phase": "Pending" if why else "Running", "containerStatuses": containers}
        key = ("v1", "Pod", meta["namespace"], meta["name"])

        def kubelet() -> None:
            if key in fake.objects.items:  # not deleted meanwhile
                fake.objects.change(*key, {"status": status})

        if after:
            fake.at(after, kubelet)
        else:
            kubelet()

    return script

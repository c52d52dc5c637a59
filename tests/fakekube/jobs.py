"""What Kubeflow Trainer (with JobSet) or the Training Operator and the kubelets write for a job,
as steps a test scripts on a ``PortFake``: ``start``, ``train``/``progress``, ``crash``/``restart``
(a PyTorchJob's), ``pending``, ``finish``; ``runs``, ``kueue`` and ``suspends`` do them for each
job at fake-clock times; ``helpers`` is the kubelet of the work-dir sync's helper pods. Shapes
are KUBEFLOW.md's (trainer ``pkg/apis/trainer/v1alpha1``, training-operator
``pkg/apis/kubeflow.org/v1``, JobSet's labels, core/v1 PodStatus, events.k8s.io/v1 Event).

A TrainJob's pods are owned as the real controllers own them (``observed/trainer-v2.3.0``): the
TrainJob owns its JobSet (named like it), which owns the Job ``<name>-node-0``, which owns the
pods; a PyTorchJob owns its pods. While ``runs`` scripts jobs the Trainer runs (``Trainer``): it
re-creates the JobSet of a Kueue-managed TrainJob that waits for its dependents (a Foreground
delete), so that delete never ends, as recorded with the real Trainer v2.3.0 and Kueue v0.19.2
(KUBEFLOW.md, Kueue)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kfcompile.kinds import COMPLETION_INDEX, PYTORCHJOB, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB

from . import kueue as fake_kueue
from .port import FOREGROUND, Obj, PortFake
from .resources import rfc3339

__all__ = ["Trainer", "crash", "finish", "helpers", "kueue", "pending", "pod_name", "pods",
           "progress", "restart", "runs", "start", "suspends", "train"]  # fmt: skip

KINDS = {kind.name: kind for kind in (TRAINJOB, PYTORCHJOB)}
JOBSET = "jobset.x-k8s.io/v1alpha2"
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
    plans: list[Plan] = []
    replicas = spec.get("pytorchReplicaSpecs") or {}
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


def _owner(obj: Obj) -> Obj:
    """An ownerReference to ``obj``, as a controller sets it on what it makes."""
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _owned_by(obj: Obj | None, owner: Obj) -> bool:
    refs = (obj or {}).get("metadata", {}).get("ownerReferences") or []
    return any(r.get("uid") == owner["metadata"]["uid"] for r in refs)


def _jobset(fake: Fake, job: Obj) -> Obj:
    """The JobSet the Trainer makes of a TrainJob and the Job the JobSet controller makes of
    that (made now if missing): the Job, the owner of the pods."""
    meta = job["metadata"]
    ns, name = meta["namespace"], meta["name"]
    jobset = fake.objects.items.get((JOBSET, "JobSet", ns, name))
    if not _owned_by(jobset, job):
        spec = {"replicatedJobs": [{"name": "node", "replicas": 1}]}
        jobset = fake.objects.put({"apiVersion": JOBSET, "kind": "JobSet", "spec": spec,
                                   "metadata": {"name": name, "namespace": ns,
                                                "ownerReferences": [_owner(job)]}})  # fmt: skip
    assert jobset is not None
    made = fake.objects.items.get(("batch/v1", "Job", ns, f"{name}-node-0"))
    if not _owned_by(made, jobset):
        nodes = int((job.get("spec") or {}).get("trainer", {}).get("numNodes", 1))
        labels = {"jobset.sigs.k8s.io/jobset-name": name,
                  "jobset.sigs.k8s.io/replicatedjob-name": "node"}  # fmt: skip
        spec = {"completions": nodes, "parallelism": nodes, "completionMode": "Indexed"}
        made = fake.objects.put({"apiVersion": "batch/v1", "kind": "Job", "spec": spec,
                                 "metadata": {"name": f"{name}-node-0", "namespace": ns,
                                              "labels": labels,
                                              "ownerReferences": [_owner(jobset)]}})  # fmt: skip
    assert made is not None
    return made


@dataclass(frozen=True)
class Trainer:
    """The Trainer controller's answer to its JobSet being deleted (``on_remove``): a
    Kueue-managed TrainJob deleted in the foreground gets it again, so the garbage collector
    deletes it again and the job never goes (51 JobSets and 51 Jobs a minute with the real
    Trainer v2.3.0 beside Kueue v0.19.2, KUBEFLOW.md). Deleted in the background, the TrainJob
    is gone at once and the JobSet stays gone."""

    fake: Fake

    def __call__(self, gone: Obj) -> None:
        meta = gone["metadata"]
        refs = meta.get("ownerReferences") or [] if gone["kind"] == "JobSet" else []
        for ref in (r for r in refs if r.get("kind") == "TrainJob"):
            job = self.fake.objects.items.get(
                (TRAINJOB.api_version, "TrainJob", meta["namespace"], ref["name"])
            )
            if (
                job is None
                or job["metadata"]["uid"] != ref["uid"]
                or fake_kueue.queue_of(job) is None
            ):
                continue
            if FOREGROUND in (job["metadata"].get("finalizers") or []):
                _jobset(self.fake, job)


def _pod(fake: Fake, job: Obj, plan: Plan, phase: str, code: int = 0) -> None:
    meta, (name, rank, labels) = job["metadata"], plan
    kind = KINDS[job["kind"]]
    owner = _owner(_jobset(fake, job) if kind is TRAINJOB else job)
    # a restarted container's count stays (its logs are kept per run)
    old = fake.objects.items.get(("v1", "Pod", meta["namespace"], name)) or {}
    was = (old.get("status") or {}).get("containerStatuses") or []
    runs = [s.get("restartCount", 0) for s in was]
    at = rfc3339(fake.clock.time())
    container = {"name": kind.container, **_container(phase, at, code, max(runs, default=0))}
    where = {"name": name, "namespace": meta["namespace"]}
    spec = {"nodeName": f"gpu-node-{rank}", "containers": [{"name": kind.container}]}
    fake.objects.put({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                      "metadata": {**where, "labels": labels, "ownerReferences": [owner]},
                      "status": {"phase": phase, "containerStatuses": [container]}})  # fmt: skip


def _event(fake: Fake, namespace: str, name: str, regarding: Obj, reason: str, note: str,
           type_: str = "Normal", **more: str) -> None:  # fmt: skip
    """An event (events.k8s.io/v1) about ``regarding``."""
    fake.objects.put({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                      "metadata": {"name": name, "namespace": namespace}, "regarding": regarding,
                      "reason": reason, "note": note, "type": type_,
                      "eventTime": rfc3339(fake.clock.time()), **more})  # fmt: skip


def _conditions(fake: Fake, job: Obj, *conditions: tuple[str, str, str]) -> None:
    """Write the job's conditions ``(type, status, reason)``, in this order."""
    at, meta = rfc3339(fake.clock.time()), job["metadata"]
    written = [{"type": t, "status": s, "reason": r, "message": f"{r} ({meta['name']})",
                "lastTransitionTime": at} for t, s, r in conditions]  # fmt: skip
    fake.objects.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                        {"status": {"conditions": written}})  # fmt: skip


def start(fake: Fake, namespace: str, name: str, kind: str = "TrainJob") -> None:
    """The job's pods run, one per rank, each having logged its first line; the Job
    controller's event for each TrainJob pod."""
    job = _job(fake, namespace, kind, name)
    if job is None:
        return
    plans = _plans(job)
    for pod, rank, labels in plans:
        _pod(fake, job, (pod, rank, labels), "Running")
        fake.log(namespace, pod, f"rank {rank}: starting")
        if kind == "TrainJob":
            _event(fake, namespace, f"{pod}.created", {"apiVersion": "batch/v1", "kind": "Job",
                   "name": f"{name}-node-0"}, "SuccessfulCreate", f"Created pod: {pod}",
                   reportingController="job-controller")  # fmt: skip
    if kind == "TrainJob":
        _jobs_status(fake, job, ready=1)  # the one Job `node`, its pods all ready
    else:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Running", "True", "PyTorchJobRunning"))  # fmt: skip


def _jobs_status(fake: Fake, job: Obj, *, ready: int) -> None:
    """A TrainJob's jobsStatus as the Trainer copies it from JobSet's ReplicatedJobStatus: it
    counts child Jobs, not pods (one Job `node`, active while a pod of it runs or is Pending,
    ready once all are: ``../shared/observed/trainer-v2.3.0``); every count is required."""
    counts = [{"name": "node", "active": 1, "ready": ready, "succeeded": 0, "failed": 0,
               "suspended": 0}]  # fmt: skip
    meta = job["metadata"]
    fake.objects.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                        {"status": {"jobsStatus": counts}})  # fmt: skip


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
    fake.objects.change("v1", "Pod", namespace, pod,
                        {"status": {"containerStatuses": [{**status, **again}]}})  # fmt: skip
    fake.at(0.1, lambda: fake.log(namespace, pod, f"rank {rank}: starting"))  # after its back-off
    restart(fake, namespace, name)


def restart(fake: Fake, namespace: str, name: str) -> None:
    """A PyTorchJob's pods are being recreated after a retryable failure."""
    job = _job(fake, namespace, "PyTorchJob", name)
    if job is not None:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Restarting", "True", "PyTorchJobRestarting"))  # fmt: skip


# The condition of a job that succeeded.
_SUCCEEDED = {"TrainJob": ("Complete", "True", "AllJobsCompleted"),
              "PyTorchJob": ("Succeeded", "True", "PyTorchJobSucceeded")}  # fmt: skip


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
    done = ("Failed", "True", reason) if reason else _SUCCEEDED[kind]
    if kind == "TrainJob":
        _conditions(fake, job, done)
    else:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Running", "False", "PyTorchJobRunning"), done)  # fmt: skip


# Why a pod waits to start, as the scheduler or the kubelet writes it, and the Warning event
# each writes with it (the event's reason and note); None: none.
_NO_GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
PENDING: dict[str, tuple[Obj, tuple[str, str] | None]] = {
    "NotScheduled": ({}, None),
    "Unschedulable": ({"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable", "message": _NO_GPU}]},
                      ("FailedScheduling", _NO_GPU)),
    "ContainerCreating": ({"reason": "ContainerCreating"}, None),
    "ImagePullBackOff": (
        {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "python:3.11-slim"'},
        ("Failed", 'Failed to pull image "python:3.11-slim": not found')),
    "InvalidImageName": (
        {"reason": "InvalidImageName", "message": 'Failed to apply default image tag "bad image"'},
        ("InspectFailed", 'Failed to apply default image tag "bad image": invalid reference')),
}  # fmt: skip


def pending(fake: Fake, namespace: str, name: str, why: str, kind: str = "TrainJob") -> None:
    """The job's pods exist and wait to start, for ``why`` (a key of ``PENDING``)."""
    job = _job(fake, namespace, kind, name)
    if job is None:
        return
    said, event = PENDING[why]
    for plan in _plans(job):
        _pod(fake, job, plan, "Pending")
        pod = fake.objects.items[("v1", "Pod", namespace, plan[0])]
        status: Obj = {"phase": "Pending", "conditions": said.get("conditions", [])}
        spec = pod["spec"] if why not in ("NotScheduled", "Unschedulable") else {"nodeName": None}
        waiting = {"name": KINDS[kind].container, "ready": False, "restartCount": 0,
                   "state": {"waiting": said}}  # fmt: skip
        status["containerStatuses"] = [waiting] if "reason" in said else None
        fake.objects.change("v1", "Pod", namespace, plan[0], {"spec": spec, "status": status})
        if event is not None:
            regarding = {"apiVersion": "v1", "kind": "Pod", "name": plan[0],
                         "uid": pod["metadata"]["uid"]}  # fmt: skip
            _event(fake, namespace, f"{plan[0]}.{event[0].lower()}", regarding, *event, "Warning")
    if kind == "TrainJob":
        _jobs_status(fake, job, ready=0)  # active, none ready: as the real Trainer reports it


def runs(fake: Fake, *, starts: float = 0.2, ends: float | None = 1.0, reason: str = "",
         restarts: float | None = None, waits: str | None = None, steps: int = 0,
         reports: Callable[[], bool] = lambda: False) -> Callable[[Obj], None]:  # fmt: skip
    """What happens to each job created (pass it to ``fake.on_create``): its pods run ``starts``
    s after, a PyTorchJob restarts ``restarts`` s after if given, and it ends ``ends`` s after
    (None: never), failed for ``reason`` if given; ``waits``: its pods wait to start instead,
    for that (a key of ``PENDING``); ``steps``: training steps between its start and its end,
    logged (``train``; ``reports()``: reported too)."""

    if not any(isinstance(hook, Trainer) for hook in fake.objects.on_remove):
        fake.objects.on_remove.append(Trainer(fake))

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


def _flag(kind: str, value: bool) -> Obj:
    """A merge patch of the job's suspend flag."""
    return {"spec": {"suspend": value} if kind == "TrainJob" else {"runPolicy": {"suspend": value}}}


def suspends(fake: Fake) -> Callable[[Obj], None]:
    """The controllers' answer to a job's suspend flag, for ``fake.on_patch``: suspended, its
    pods are deleted and its ``Suspended`` condition is True; resumed, it runs again."""

    def script(obj: Obj) -> None:
        if obj["kind"] not in KINDS:
            return
        ns, name, kind = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["kind"]
        spec = obj.get("spec") or {}
        flags = spec if kind == "TrainJob" else spec.get("runPolicy") or {}
        conditions = (obj.get("status") or {}).get("conditions") or []
        was: Obj = next((c for c in conditions if c.get("type") == "Suspended"), {})
        if flags.get("suspend"):
            for pod in pods(fake, ns, name, kind):
                fake.objects.delete("v1", "Pod", ns, pod["metadata"]["name"])
            _conditions(fake, obj, ("Suspended", "True", "Suspended"))
        elif was.get("status") == "True":
            _conditions(fake, obj, ("Suspended", "False", "Resumed"))
            fake.at(0.2, lambda: start(fake, ns, name, kind))

    return script


def kueue(fake: Fake, *, admits: float = 0.5, **lives: Any) -> Callable[[Obj], None]:
    """Kueue (``fakekube.kueue``) for each job created with a queue, which its webhook created
    suspended: the Trainer says so (``Suspended``) and Kueue makes its Workload, waiting; it
    is admitted ``admits`` s later (two Updates of the job) and from then it ``runs(**lives)``.
    A job created without Kueue's webhook (a store without Kueue) is only suspended."""
    then = runs(fake, **lives)

    def script(obj: Obj) -> None:
        if fake_kueue.queue_of(obj) is None:
            return
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
        fake.objects.change(*key, _flag(obj["kind"], True))
        _conditions(fake, fake.objects.items[key], ("Suspended", "True", "Suspended"))
        if fake.objects.served(fake_kueue.V1BETA2, "Workload") or fake.objects.served(
            fake_kueue.V1BETA1, "Workload"
        ):
            fake_kueue.held(fake.objects, fake.objects.items[key])

        def admit() -> None:
            job = _job(fake, meta["namespace"], obj["kind"], meta["name"])
            if job is None or not (_flags_of(job).get("suspend")):
                return
            admitted = fake_kueue.admit(fake.objects, job)
            _conditions(fake, admitted, ("Suspended", "False", "Resumed"))
            grace = fake_kueue.V2_3_ONLY
            if grace in str(job["spec"]) and grace not in str(admitted["spec"]):
                refused(fake, admitted)  # Kueue dropped it: the JobSet cannot be updated
                return
            then(fake.objects.items[key])

        fake.at(admits, admit)

    return script


# What the Trainer's event says when the JobSet webhook refuses its update of the JobSet.
REFUSED = (
    'TrainJob resources reconciliation failed: admission webhook "vjobset.kb.io" denied the '
    'request: spec.replicatedJobs: Invalid value: "array": field is immutable'
)


def refused(fake: Fake, job: Obj) -> None:
    """The Trainer cannot update the job's JobSet (its webhook refuses the change): its Warning
    event ``TrainJobResourcesCreationFailed``, and the job, resumed, never runs."""
    meta = job["metadata"]
    regarding = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"],
                 "uid": meta["uid"]}  # fmt: skip
    _event(fake, meta["namespace"], f"{meta['name']}.refused", regarding,
           "TrainJobResourcesCreationFailed", REFUSED, "Warning",
           reportingController="trainer", action="Reconciling")  # fmt: skip


def _flags_of(job: Obj) -> Obj:
    spec = job.get("spec") or {}
    return spec if job["kind"] == "TrainJob" else spec.get("runPolicy") or {}


# What the kubelet does with a helper pod of these images: it waits to start, for that reason.
BAD_IMAGE, SLOW_IMAGE = "does-not-exist", "slow-to-pull"  # mistyped; never done pulling
IMAGES = {BAD_IMAGE: "ImagePullBackOff", SLOW_IMAGE: "ContainerCreating"}


def helpers(fake: Fake, *, waiting: str | None = None, after: float = 0.1) -> Callable[[Obj], None]:
    """The kubelet of the work-dir sync's helper pods (for ``on_create``): each runs ``after`` s
    after its create (0: at once, before the create is answered), or stays waiting to start
    for ``waiting`` (``ImagePullBackOff``; by default as ``IMAGES`` says of its image)."""

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

        fake.at(after, kubelet) if after else kubelet()

    return script

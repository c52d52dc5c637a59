"""Job courses: what Kubeflow Trainer (with JobSet), the Training Operator and the kubelets
write as a job goes, as steps to script on a ``FakeCluster`` or as hooks for every job created
(``runs``, ``suspends``, ``queued``, ``helpers``), and what a Kubeflow install serves. A
TrainJob's shapes are those the real Trainer v2.3.0 and JobSet v0.12.0 were recorded making
(``../shared/observed/trainer-v2.3.0``, which the suite holds these to); a PyTorchJob's are the
Training Operator's (KUBEFLOW.md)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, Final

from kfcompile.kinds import COMPLETION_INDEX, KINDS, REPLICA_INDEX, REPLICA_TYPE
from kfcompile.lifecycle.ports import Obj
from kfcompile.spec.model import DEFAULT_RUNTIME
from kfcompile.testing import kueue as fake_kueue
from kfcompile.testing.cluster import FakeCluster
from kfcompile.testing.kueue import Said
from kfcompile.testing.store import FOREGROUND, ResourceKind, Store, owner, rfc3339

__all__ = ["PENDING", "Trainer", "crash", "finish", "helpers", "install", "pending",
           "pod_name", "pods", "progress", "queued", "release", "restart", "runs", "start",
           "suspends", "train"]  # fmt: skip

JOBSET: Final = "jobset.x-k8s.io/v1alpha2"
TRAINER_NAMESPACE, TRAINER_CONFIGMAP = "kubeflow-system", "kubeflow-trainer-public"  # v2.2 on
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # the Job controller's random names'
# What JobSet puts on the Job of its replicated job ``node`` and on its pods (labels and
# annotations), besides the JobSet's name and uid and the Job's key.
_JOBSET_SAYS: Final = {f"jobset.sigs.k8s.io/{k}": v for k, v in [
    ("global-replicas", "1"), ("group-name", "default"), ("group-replicas", "1"),
    ("job-global-index", "0"), ("job-group-index", "0"), ("job-index", "0"),
    ("replicatedjob-name", "node"), ("replicatedjob-replicas", "1"), ("restart-attempt", "0"),
]}  # fmt: skip


def pod_name(job: str, rank: int) -> str:
    """A TrainJob's pod: ``<name>-node-0-<rank>-`` and five letters (the same on every run)."""
    digest = hashlib.sha1(f"{job}/{rank}".encode()).digest()
    return f"{job}-node-0-{rank}-" + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _patched(job: Obj, depth: int) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations the job's runtime patches give its JobSet (``depth`` 0), Job
    (1) or pods (2), merged in order."""
    labels: dict[str, str] = {}
    notes: dict[str, str] = {}
    for patch in job["spec"].get("runtimePatches") or []:
        node: Obj = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        if depth:
            jobs = (node.get("spec") or {}).get("replicatedJobs") or []
            node = next((r.get("template") or {} for r in jobs if r.get("name") == "node"), {})
        if depth > 1:
            node = (node.get("spec") or {}).get("template") or {}
        labels |= (node.get("metadata") or {}).get("labels") or {}
        notes |= (node.get("metadata") or {}).get("annotations") or {}
    return labels, notes


def _owned(fake: FakeCluster, by: Obj, obj: Obj) -> Obj:
    """``obj``, in ``by``'s namespace, as stored: made now, owned by ``by``, unless it is."""
    meta, of = obj["metadata"], by["metadata"]
    found = fake.store.items.get((obj["apiVersion"], obj["kind"], of["namespace"], meta["name"]))
    if found is not None and found["metadata"]["ownerReferences"][0]["uid"] == of["uid"]:
        return found
    meta |= {"namespace": of["namespace"], "ownerReferences": [owner(by)]}
    return fake.store.put(obj)


def _nodes(job: Obj) -> int:
    return int((job["spec"].get("trainer") or {}).get("numNodes", 1))


def _made(fake: FakeCluster, job: Obj) -> Obj:
    """The JobSet the Trainer makes of a TrainJob and the Job JobSet makes of that (each made
    now if missing): the Job, the owner of the pods."""
    ns, name, nodes = job["metadata"]["namespace"], job["metadata"]["name"], _nodes(job)
    labels, notes = _patched(job, 0)
    meta = {"name": name, "labels": labels, "annotations": notes}
    spec = {"replicatedJobs": [{"name": "node", "replicas": 1}], "suspend": False}
    jobset = _owned(fake, job, {"apiVersion": JOBSET, "kind": "JobSet", "metadata": meta,
                                "spec": spec})  # fmt: skip
    key = hashlib.sha1(f"{ns}/{name}-node-0".encode()).hexdigest()
    said = {**_JOBSET_SAYS, "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/jobset-uid": jobset["metadata"]["uid"],
            "jobset.sigs.k8s.io/job-key": key}  # fmt: skip
    labels, notes = _patched(job, 1)
    step = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    meta = {"name": f"{name}-node-0", "labels": said | labels | step, "annotations": said | notes}
    spec = {"completions": nodes, "parallelism": nodes, "completionMode": "Indexed"}
    return _owned(fake, jobset, {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                                 "spec": spec})  # fmt: skip


def _pods(fake: FakeCluster, job: Obj) -> list[Obj]:
    """The job's pods as their controller makes them, by rank (a TrainJob's JobSet and Job made
    now if missing)."""
    ns, name, spec = job["metadata"]["namespace"], job["metadata"]["name"], job["spec"]
    made: list[tuple[str, dict[str, str], dict[str, str]]] = []  # name, labels, annotations
    by = job  # their owner
    if job["kind"] == "TrainJob":
        by = _made(fake, job)
        uid, of, (labels, notes) = by["metadata"]["uid"], by["metadata"]["name"], _patched(job, 2)
        said = {k: v for k, v in by["metadata"]["labels"].items() if k.startswith("jobset.")}
        labels |= {**said, "jobset.sigs.k8s.io/priority": "0", "controller-uid": uid,
                   "batch.kubernetes.io/controller-uid": uid, "job-name": of,
                   "batch.kubernetes.io/job-name": of}  # fmt: skip
        for rank in range(_nodes(job)):
            ranked = {COMPLETION_INDEX: str(rank)}
            made.append((pod_name(name, rank), labels | ranked, said | notes | ranked))
    for role in ("Master", "Worker") if job["kind"] == "PyTorchJob" else ():
        replicas = (spec.get("pytorchReplicaSpecs") or {}).get(role) or {"replicas": 0}
        for index in range(int(replicas.get("replicas", 1))):
            labels = {"training.kubeflow.org/job-name": name, REPLICA_TYPE: role.lower(),
                      REPLICA_INDEX: str(index)}  # fmt: skip
            labels |= {"training.kubeflow.org/job-role": "master"} if role == "Master" else {}
            made.append((f"{name}-{role.lower()}-{index}", labels, {}))
    container = {"name": KINDS[job["kind"]].container, "image": _image(spec)}
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": pod, "namespace": ns, "labels": labels, "annotations": notes,
        "ownerReferences": [owner(by)]},
        "spec": {"nodeName": f"gpu-node-{rank}", "containers": [container]},
    } for rank, (pod, labels, notes) in enumerate(made)]  # fmt: skip


def _image(spec: Obj) -> str:
    for replica in (spec.get("pytorchReplicaSpecs") or {}).values():
        return str(replica["template"]["spec"]["containers"][0].get("image", ""))
    return str((spec.get("trainer") or {}).get("image") or "pytorch/pytorch")


def _put(fake: FakeCluster, pod: Obj, phase: str, state: Obj | None, *, restarts: int = 0,
         **more: Any) -> Obj:  # fmt: skip
    """Write ``pod`` in ``phase``, its container in ``state`` (None: no node yet), its restarts
    counted; ``more``: in its status too."""
    meta, spec = pod["metadata"], dict(pod["spec"])
    [container] = spec["containers"]
    old = fake.store.items.get(("v1", "Pod", meta["namespace"], meta["name"])) or {}
    was = (old.get("status") or {}).get("containerStatuses") or []
    runs = [s.get("restartCount", 0) for s in was]
    said = {"name": container["name"], "image": container["image"], "imageID": "",
            "restartCount": sum(runs) + restarts, "ready": phase == "Running",
            "started": phase == "Running", "state": state}  # fmt: skip
    status = {"phase": phase, "containerStatuses": [said], **more}
    if state is None:
        del spec["nodeName"], status["containerStatuses"]
    return fake.store.put({**pod, "spec": spec, "status": status})


def _job(fake: FakeCluster, namespace: str, kind: str, name: str) -> Obj | None:
    """The job, unless it is gone or being deleted."""
    job = fake.store.items.get((KINDS[kind].api_version, kind, namespace, name))
    return None if job is None or job["metadata"].get("deletionTimestamp") else job


def pods(fake: FakeCluster, namespace: str, name: str, kind: str = "TrainJob") -> list[Obj]:
    """The job's pods, as its kind's label selects them."""
    return fake.store.list("v1", "Pod", namespace, KINDS[kind].pods.format(name=name))


def _event(fake: FakeCluster, name: str, regarding: Obj, reason: str, note: str,
           type_: str = "Normal", **more: str) -> None:  # fmt: skip
    """The event (events.k8s.io/v1) ``name`` about ``regarding``, a stored object."""
    meta = regarding["metadata"]
    about = {"apiVersion": regarding["apiVersion"], "kind": regarding["kind"],
             "name": meta["name"], "uid": meta["uid"]}  # fmt: skip
    fake.store.put({"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding": about,
                    "metadata": {"name": name, "namespace": meta["namespace"]},
                    "reason": reason, "note": note, "type": type_,
                    "eventTime": rfc3339(fake.clock.time(), nano=True), **more})  # fmt: skip


def _status(fake: FakeCluster, job: Obj, *said: Said, **status: Any) -> None:
    """The job's status now says ``status`` and (if given) the conditions ``said``."""
    if said:
        status["conditions"] = fake_kueue.conditions(fake.store, *said)
    meta = job["metadata"]
    fake.store.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                      {"status": status})  # fmt: skip


def _operator(job: Obj, type_: str, status: str = "True", reason: str = "") -> Said:
    """A PyTorchJob's condition, in the Training Operator's words."""
    words = f"PyTorchJob {job['metadata']['namespace']}/{job['metadata']['name']} is"
    return type_, status, reason or f"PyTorchJob{type_}", f"{words} {type_.lower()}."


def _counted(*, ready: int, suspended: int = 0) -> list[Obj]:
    """A TrainJob's ``jobsStatus``: it counts its one Job (active while a pod runs or waits,
    ready once all run), not pods."""
    return [{"name": "node", "active": 1 - suspended, "ready": ready, "succeeded": 0,
             "failed": 0, "suspended": suspended}]  # fmt: skip


def start(fake: FakeCluster, namespace: str, name: str, kind: str = "TrainJob") -> None:
    """The job's pods run, each having logged its first line (a TrainJob's: the Job
    controller's ``SuccessfulCreate`` events)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    for rank, pod in enumerate(_pods(fake, job)):
        _put(fake, pod, "Running", {"running": {"startedAt": rfc3339(fake.clock.time())}})
        made = pod["metadata"]["name"]
        fake.log(namespace, made, f"rank {rank}: starting")
        if kind == "TrainJob":
            _event(fake, f"{made}.created", _made(fake, job), "SuccessfulCreate",
                   f"Created pod: {made}", reportingController="job-controller")  # fmt: skip
    if kind == "TrainJob":
        _status(fake, job, jobsStatus=_counted(ready=1))
    else:
        _status(fake, job, _operator(job, "Created"), _operator(job, "Running"))


def progress(fake: FakeCluster, namespace: str, name: str, percent: int, *, remaining: int = 0,
             loss: str = "0.9") -> None:  # fmt: skip
    """A TrainJob's training process reports a step (``status.trainerStatus``: the Trainer's
    ``TrainJobStatus`` feature gate, v2.2 on)."""
    if (job := _job(fake, namespace, "TrainJob", name)) is not None:
        _status(fake, job, trainerStatus={
            "progressPercentage": percent, "estimatedRemainingSeconds": remaining,
            "metrics": [{"name": "loss", "value": loss}],
            "lastUpdatedTime": rfc3339(fake.clock.time())})  # fmt: skip


def train(fake: FakeCluster, namespace: str, name: str, kind: str, step: int, *,
          report: bool) -> None:  # fmt: skip
    """Each rank logs training step ``step`` (its loss 0.9 ** step); ``report``: a TrainJob's
    training process reports it too, 30 % a step (``progress``)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    loss = f"{0.9**step:.4g}"
    for rank, pod in enumerate(_pods(fake, job)):
        fake.log(namespace, pod["metadata"]["name"], f"rank {rank} step {step} loss {loss}")
    if report and kind == "TrainJob":
        percent = min(30 * step, 100)
        progress(fake, namespace, name, percent, remaining=(100 - percent) // 30 * 60, loss=loss)


def crash(fake: FakeCluster, namespace: str, name: str, rank: int, line: str) -> None:
    """Rank ``rank`` of a PyTorchJob crashes saying ``line``; the kubelet restarts it (its log
    starts over)."""
    if (job := _job(fake, namespace, "PyTorchJob", name)) is None:
        return
    pod, at = _pods(fake, job)[rank], rfc3339(fake.clock.time())
    fake.log(namespace, pod["metadata"]["name"], line)
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": at}}
    _put(fake, pod, "Running", {"running": {"startedAt": at}}, restarts=1, lastState=crashed)
    again = f"rank {rank}: starting"
    fake.at(0.1, lambda: fake.log(namespace, pod["metadata"]["name"], again))  # its back-off
    restart(fake, namespace, name)


def restart(fake: FakeCluster, namespace: str, name: str) -> None:
    """A PyTorchJob's pods are being recreated after a retryable failure."""
    if (job := _job(fake, namespace, "PyTorchJob", name)) is not None:
        _status(fake, job, _operator(job, "Created"), _operator(job, "Restarting"))


def finish(fake: FakeCluster, namespace: str, name: str, kind: str = "TrainJob", *,
           reason: str = "") -> None:  # fmt: skip
    """The job ends: it succeeded, or failed for ``reason`` (rank 0 exits 1); a TrainJob past
    its deadline (``DeadlineExceeded``) loses its JobSet (observed)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    if reason == "DeadlineExceeded" and kind == "TrainJob":
        fake.store.delete(JOBSET, "JobSet", namespace, name)
        failed = ("Failed", "True", reason, "TrainJob exceeded its active deadline")
        _status(fake, job, failed, jobsStatus=None)
        return
    at = rfc3339(fake.clock.time())
    for rank, pod in enumerate(_pods(fake, job)):
        code = 1 if reason and rank == 0 else 0
        fake.log(namespace, pod["metadata"]["name"], f"rank {rank}: exit {code}")
        ended = {"exitCode": code, "reason": "Error" if code else "Completed", "startedAt": at,
                 "finishedAt": at}  # fmt: skip
        _put(fake, pod, "Failed" if code else "Succeeded", {"terminated": ended})
    if kind == "TrainJob":  # in JobSet's words, which the Trainer copies
        failed = ("Failed", "True", reason, f"jobset failed due to {reason}")
        _status(fake, job, failed if reason else COMPLETE)
    else:
        said = _operator(job, "Failed", reason=reason) if reason else _operator(job, "Succeeded")
        _status(fake, job, _operator(job, "Created"), _operator(job, "Running", "False"), said)


COMPLETE: Final = ("Complete", "True", "AllJobsCompleted", "jobset completed successfully")
_NO_GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
PENDING: Final[dict[str, tuple[Obj | None, tuple[str, str] | None]]] = {
    "NotScheduled": (None, None),
    "Unschedulable": (None, ("FailedScheduling", _NO_GPU)),
    "ContainerCreating": ({"reason": "ContainerCreating"}, None),
    "ImagePullBackOff": (
        {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "python:3.11-slim"'},
        ("Failed", 'Failed to pull image "python:3.11-slim": not found')),
    "InvalidImageName": (
        {"reason": "InvalidImageName", "message": 'Failed to apply default image tag "bad image"'},
        ("InspectFailed", 'Failed to apply default image tag "bad image": invalid reference')),
}  # fmt: skip
"""Why a pod waits to start (``pending``): its container's ``waiting`` state (None: no node
yet) and the Warning event the scheduler or the kubelet writes (reason, note), if any."""


def pending(fake: FakeCluster, namespace: str, name: str, why: str,
            kind: str = "TrainJob") -> None:  # fmt: skip
    """The job's pods exist and wait to start, for ``why`` (a key of ``PENDING``;
    ``NotScheduled``: no node yet, as the recorded jobs' pods, with no scheduler)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    waiting, event = PENDING[why]
    for pod in _pods(fake, job):
        if event is not None and event[0] == "FailedScheduling":
            said = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
            pod = _put(fake, pod, "Pending", None, conditions=[said | {"message": event[1]}])
        else:
            pod = _put(fake, pod, "Pending", None if waiting is None else {"waiting": waiting})
        if event is not None:
            named = f"{pod['metadata']['name']}.{event[0].lower()}"
            _event(fake, named, pod, *event, "Warning")
    if kind == "TrainJob":
        _status(fake, job, jobsStatus=_counted(ready=0))  # active, none ready: as the Trainer says


def runs(fake: FakeCluster, *, starts: float = 0.2, ends: float | None = 1.0, reason: str = "",
         restarts: float | None = None, waits: str | None = None, steps: int = 0,
         reports: Callable[[], bool] = lambda: False) -> Callable[[Obj], None]:  # fmt: skip
    """What happens to each job created (for ``fake.store.on_create``): it ``start``s at
    ``starts``, a PyTorchJob ``restart``s at ``restarts``, it ``finish``es at ``ends`` (None:
    never) for ``reason``; ``waits``: it is ``pending`` for that instead; ``steps``: ``train``
    steps between (``reports()``: reported). The ``Trainer`` runs beside."""
    if not any(isinstance(hook, Trainer) for hook in fake.store.on_remove):
        fake.store.on_remove.append(Trainer(fake))

    def trains(ns: str, name: str, kind: str, step: int) -> None:
        train(fake, ns, name, kind, step, report=reports())

    def script(obj: Obj) -> None:
        if obj["kind"] not in KINDS:
            return
        ns, name, kind = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["kind"]
        if waits is not None:
            fake.at(starts, lambda: pending(fake, ns, name, waits, kind))
            return
        fake.at(starts, lambda: start(fake, ns, name, kind))
        gap = ((6 * starts if ends is None else ends) - starts) / (steps + 1)
        for step in range(1, steps + 1):
            fake.at(starts + step * gap, functools.partial(trains, ns, name, kind, step))
        if restarts is not None:
            fake.at(restarts, lambda: restart(fake, ns, name))
        if ends is not None:
            fake.at(ends, lambda: finish(fake, ns, name, kind, reason=reason))

    return script


class Trainer:
    """For ``store.on_remove``: the Trainer makes the JobSet of a Kueue-managed TrainJob being
    deleted in the foreground again as it goes, so the TrainJob never goes (KUBEFLOW.md)."""

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake

    def __call__(self, gone: Obj) -> None:
        refs = gone["metadata"].get("ownerReferences") or [] if gone["kind"] == "JobSet" else []
        for ref in (r for r in refs if r.get("kind") == "TrainJob"):
            key = (ref["apiVersion"], "TrainJob", gone["metadata"]["namespace"], ref["name"])
            job = self.fake.store.items.get(key)
            if job is None or job["metadata"]["uid"] != ref["uid"] or not fake_kueue.queue_of(job):
                continue
            if FOREGROUND in (job["metadata"].get("finalizers") or []):
                _made(self.fake, job)


SUSPENDED: Final = ("Suspended", "True", "Suspended", "TrainJob is suspended")
RESUMED: Final = ("Suspended", "False", "Resumed", "TrainJob is resumed")


def suspends(fake: FakeCluster) -> Callable[[Obj], None]:
    """The controllers' answer to a job's suspend flag (for ``fake.store.on_patch``):
    suspended, its pods are deleted and it says ``Suspended``; resumed, it runs again."""

    def script(obj: Obj) -> None:
        if obj["kind"] not in KINDS:
            return
        ns, name, kind = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["kind"]
        conditions = (obj.get("status") or {}).get("conditions") or []
        was: Obj = next((c for c in conditions if c.get("type") == "Suspended"), {})
        if fake_kueue.flags_of(obj).get("suspend"):
            for pod in pods(fake, ns, name, kind):
                fake.store.delete("v1", "Pod", ns, pod["metadata"]["name"])
            _status(fake, obj, SUSPENDED)
        elif was.get("status") == "True":
            _status(fake, obj, RESUMED)
            fake.at(0.2, lambda: start(fake, ns, name, kind))

    return script


# What the Trainer's event says when the JobSet webhook refuses its update of the JobSet.
REFUSED: Final = ('TrainJob resources reconciliation failed: admission webhook "vjobset.kb.io" '
                  'denied the request: spec.replicatedJobs: Invalid value: "array": field is '
                  "immutable")  # fmt: skip


def queued(fake: FakeCluster, *, admits: float = 0.5, **lives: Any) -> Callable[[Obj], None]:
    """Kueue, for each job created with a queue (for ``fake.store.on_create``): it says it is
    suspended, waits for its Workload ``admits`` seconds, then ``runs(**lives)``; unless Kueue
    dropped ``kueue.V2_3_ONLY``: the JobSet webhook refuses the Trainer (its Warning event)."""
    then = runs(fake, **lives)

    def script(obj: Obj) -> None:
        if fake_kueue.queue_of(obj) is None:
            return
        meta, kind = obj["metadata"], obj["kind"]
        key = (obj["apiVersion"], kind, meta["namespace"], meta["name"])
        job = fake_kueue.suspended(fake.store, fake.store.items[key], True)
        # Trainer v2.1 on: a TrainJob's JobSet's Job counted, suspended
        counted = {"jobsStatus": _counted(ready=0, suspended=1)} if kind == "TrainJob" else {}
        _status(fake, job, SUSPENDED, **counted)
        if fake.store.served(fake_kueue.api(fake.store), "Workload"):
            fake_kueue.held(fake.store, fake.store.items[key])

        def admit() -> None:
            job = _job(fake, meta["namespace"], kind, meta["name"])
            if job is None or not fake_kueue.flags_of(job).get("suspend"):
                return
            admitted = fake_kueue.admit(fake.store, job)
            _status(fake, admitted, RESUMED)
            dropped = fake_kueue.V2_3_ONLY in str(job["spec"]) and (
                fake_kueue.V2_3_ONLY not in str(admitted["spec"])
            )
            if not dropped:
                then(fake.store.items[key])
                return
            why = "TrainJobResourcesCreationFailed"
            _event(fake, f"{meta['name']}.refused", admitted, why, REFUSED, "Warning",
                   reportingController="trainer", action="Reconciling")  # fmt: skip

        fake.at(admits, admit)

    return script


SLOW_IMAGE: Final = "slow-to-pull"  # a sync helper pod of this image waits: ContainerCreating


def helpers(fake: FakeCluster, *, waiting: str | None = None,
            after: float = 0.1) -> Callable[[Obj], None]:  # fmt: skip
    """The kubelet of the sync's helper pods (for ``fake.store.on_create``): each runs ``after``
    seconds after its create (0: at once), or waits for ``waiting`` (``SLOW_IMAGE``'s:
    ``ContainerCreating``)."""

    def script(obj: Obj) -> None:
        meta = obj["metadata"]
        if obj["kind"] != "Pod" or (meta.get("labels") or {}).get("kfcompile.dev/role") != "sync":
            return
        key = ("v1", "Pod", meta["namespace"], meta["name"])
        why = "ContainerCreating" if SLOW_IMAGE in str(obj["spec"]["containers"]) else waiting

        def kubelet() -> None:
            if (pod := fake.store.items.get(key)) is not None:  # not deleted meanwhile
                state = {"waiting": {"reason": why}} if why else {"running": {}}
                _put(fake, pod, "Pending" if why else "Running", state)

        fake.at(after, kubelet) if after else kubelet()

    return script


# The ClusterTrainingRuntime ``torch-distributed`` Trainer v2.3.0 installs (in short).
_NODE = {"name": "node", "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"}
TORCH_DISTRIBUTED: Final = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": DEFAULT_RUNTIME, "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
        {"name": "node", "replicas": 1, "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [_NODE]}}}}}]}}},
}  # fmt: skip


def release(store: Store, version: str) -> None:
    """The Trainer's public ConfigMap (v2.2 on) saying its release is ``version``."""
    store.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": TRAINER_NAMESPACE}})  # fmt: skip
    store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": TRAINER_CONFIGMAP, "namespace": TRAINER_NAMESPACE},
        "data": {"kubeflow_trainer_version": version}})  # fmt: skip


def install(fake: FakeCluster, *, kueue: tuple[str, ...] = ()) -> None:
    """What a cluster with Kubeflow Trainer v2.3.0 (``torch-distributed``) and the Training
    Operator serves, and Kueue serving the API versions ``kueue`` names (its queue ``team-a``).
    No CRD: a test that needs one creates it."""
    for kind in ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "PyTorchJob"):
        trainer = kind != "PyTorchJob"
        group, version = ("trainer.kubeflow.org", "v1alpha1") if trainer else ("kubeflow.org", "v1")
        namespaced = kind != "ClusterTrainingRuntime"
        rk = ResourceKind(group, version, kind, f"{kind.lower()}s", namespaced)
        fake.store.kinds[(rk.api_version, kind)] = rk
    release(fake.store, "v2.3.0")
    fake.store.create(TORCH_DISTRIBUTED)
    if kueue:
        fake_kueue.install(fake.store, kueue)

"""Job courses: what Kubeflow Trainer (with JobSet), the Training Operator and the kubelets
write as a job goes, as steps to script on a ``FakeCluster`` (``start``, ``train``,
``progress``, ``crash``, ``restart``, ``pending``, ``finish``) or to have done to every job
created (``runs``, ``suspends``, ``queued``, ``helpers``), and what a Kubeflow install serves
(``install``).

The shapes are those the real Trainer v2.3.0 and JobSet v0.12.0 made from kfcompile's TrainJobs
(``../shared/observed/trainer-v2.3.0``, which the suite holds these to): the TrainJob owns its
JobSet (named like it), which owns the Job ``<name>-node-0``, which owns one pod per node,
``<name>-node-0-<rank>-<5 letters>``, labelled with the JobSet's and the Job's names and uids
and the rank (``batch.kubernetes.io/job-completion-index``); a TrainJob whose pods run or wait
has no condition, only ``jobsStatus`` counting the Job (active, ready once all its pods are);
it ends ``Complete`` or ``Failed``. A PyTorchJob owns its pods ``<name>-master-0`` and
``<name>-worker-<i>`` and says Created, Running, Restarting, Succeeded, Failed (KUBEFLOW.md)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any, Final

from kfcompile.kinds import COMPLETION_INDEX, PYTORCHJOB, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB
from kfcompile.lifecycle.ports import Obj
from kfcompile.spec.model import DEFAULT_RUNTIME
from kfcompile.testing import kueue as fake_kueue
from kfcompile.testing.cluster import FakeCluster
from kfcompile.testing.store import FOREGROUND, ResourceKind, Store, owner, rfc3339

__all__ = ["PENDING", "Trainer", "crash", "finish", "helpers", "install", "pending",
           "pod_name", "pods", "progress", "queued", "release", "restart", "runs", "start",
           "suspends", "train"]  # fmt: skip

KINDS: Final = {kind.name: kind for kind in (TRAINJOB, PYTORCHJOB)}
JOBSET: Final = "jobset.x-k8s.io/v1alpha2"
TRAINER_NAMESPACE, TRAINER_CONFIGMAP = "kubeflow-system", "kubeflow-trainer-public"  # v2.2 on
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"  # the Job controller's random names'
Plan = tuple[str, int, dict[str, str]]  # a pod's name, its rank and its labels


def pod_name(job: str, rank: int) -> str:
    """A TrainJob's pod: ``<jobset>-<replicated job>-<job index>-<rank>-`` and five letters
    (the same on every run)."""
    digest = hashlib.sha1(f"{job}/{rank}".encode()).digest()
    return f"{job}-node-0-{rank}-" + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _jobset_labels(name: str, namespace: str, jobset_uid: str) -> dict[str, str]:
    """What JobSet puts on its Job of replicated job ``node`` (labels and annotations)."""
    key = hashlib.sha1(f"{namespace}/{name}-node-0".encode()).hexdigest()
    one = ("global-replicas", "group-replicas", "replicatedjob-replicas")
    zero = ("job-global-index", "job-group-index", "job-index", "restart-attempt")
    said = {"group-name": "default", "job-key": key, "jobset-name": name,
            "jobset-uid": jobset_uid, "replicatedjob-name": "node",
            **dict.fromkeys(one, "1"), **dict.fromkeys(zero, "0")}  # fmt: skip
    return {f"jobset.sigs.k8s.io/{k}": v for k, v in said.items()}


def _patched(job: Obj, depth: int) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations the job's runtime patches give the JobSet (``depth`` 0), the
    Job of replicated job ``node`` (1) or its pods (2), as the Trainer merges them (observed)."""
    labels: dict[str, str] = {}
    notes: dict[str, str] = {}
    for patch in (job.get("spec") or {}).get("runtimePatches") or []:
        node: Obj = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        if depth:
            jobs = (node.get("spec") or {}).get("replicatedJobs") or []
            node = next((r.get("template") or {} for r in jobs if r.get("name") == "node"), {})
        if depth > 1:
            node = (node.get("spec") or {}).get("template") or {}
        labels |= (node.get("metadata") or {}).get("labels") or {}
        notes |= (node.get("metadata") or {}).get("annotations") or {}
    return labels, notes


def _made(fake: FakeCluster, job: Obj) -> Obj:
    """The JobSet the Trainer makes of a TrainJob and the Job JobSet makes of that (each made
    now if missing): the Job, the owner of the pods."""
    ns, name, uid = (job["metadata"][k] for k in ("namespace", "name", "uid"))
    jobset = fake.store.items.get((JOBSET, "JobSet", ns, name))
    if jobset is None or jobset["metadata"]["ownerReferences"][0]["uid"] != uid:
        spec = {"replicatedJobs": [{"name": "node", "replicas": 1}], "suspend": False}
        labels, notes = _patched(job, 0)
        meta = {"name": name, "namespace": ns, "ownerReferences": [owner(job)],
                **({"labels": labels} if labels else {}),
                **({"annotations": notes} if notes else {})}  # fmt: skip
        jobset = fake.store.put({"apiVersion": JOBSET, "kind": "JobSet", "metadata": meta,
                                 "spec": spec})  # fmt: skip
    made = fake.store.items.get(("batch/v1", "Job", ns, f"{name}-node-0"))
    if made is None or made["metadata"]["ownerReferences"][0]["uid"] != jobset["metadata"]["uid"]:
        nodes = int(((job.get("spec") or {}).get("trainer") or {}).get("numNodes", 1))
        said = _jobset_labels(name, ns, jobset["metadata"]["uid"])
        labels, notes = _patched(job, 1)
        step = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
        meta = {"name": f"{name}-node-0", "namespace": ns, "labels": said | labels | step,
                "annotations": said | notes, "ownerReferences": [owner(jobset)]}  # fmt: skip
        spec = {"completions": nodes, "parallelism": nodes, "completionMode": "Indexed"}
        made = fake.store.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                               "spec": spec})  # fmt: skip
    return made


def _plans(fake: FakeCluster, job: Obj) -> list[Plan]:
    """Each pod of the job: its name, rank and labels (a TrainJob's Job made if missing)."""
    name, spec = job["metadata"]["name"], job.get("spec") or {}
    if job["kind"] == "TrainJob":
        made = _made(fake, job)
        uid, of = made["metadata"]["uid"], made["metadata"]["name"]
        said = _jobset_labels(name, job["metadata"]["namespace"], made["metadata"]["labels"][
            "jobset.sigs.k8s.io/jobset-uid"])  # fmt: skip
        labels = {**_patched(job, 2)[0], **said, "jobset.sigs.k8s.io/priority": "0",
                  "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
                  "batch.kubernetes.io/job-name": of, "job-name": of}  # fmt: skip
        nodes = int((spec.get("trainer") or {}).get("numNodes", 1))
        return [(pod_name(name, r), r, {**labels, COMPLETION_INDEX: str(r)}) for r in range(nodes)]
    plans: list[Plan] = []
    for role in ("Master", "Worker"):
        replicas = (spec.get("pytorchReplicaSpecs") or {}).get(role) or {"replicas": 0}
        for index in range(int(replicas.get("replicas", 1))):
            labels = {"training.kubeflow.org/job-name": name, REPLICA_TYPE: role.lower(),
                      REPLICA_INDEX: str(index)}  # fmt: skip
            labels |= {"training.kubeflow.org/job-role": "master"} if role == "Master" else {}
            plans.append((f"{name}-{role.lower()}-{index}", len(plans), labels))
    return plans


def _job(fake: FakeCluster, namespace: str, kind: str, name: str) -> Obj | None:
    """The job, unless it is gone or being deleted."""
    job = fake.store.items.get((KINDS[kind].api_version, kind, namespace, name))
    return None if job is None or job["metadata"].get("deletionTimestamp") else job


def pods(fake: FakeCluster, namespace: str, name: str, kind: str = "TrainJob") -> list[Obj]:
    """The job's pods, as its kind's label selects them."""
    return fake.store.list("v1", "Pod", namespace, KINDS[kind].pods.format(name=name))


def _image(job: Obj) -> str:
    spec = job.get("spec") or {}
    for replica in (spec.get("pytorchReplicaSpecs") or {}).values():
        return str(replica["template"]["spec"]["containers"][0].get("image", ""))
    return str((spec.get("trainer") or {}).get("image") or "pytorch/pytorch")


def _pod(fake: FakeCluster, job: Obj, plan: Plan, phase: str, code: int = 0) -> Obj:
    """Write the pod of ``plan`` in ``phase`` (exited ``code`` if it ended), its container's
    restart count kept (its log is kept by run)."""
    (name, rank, labels), kind = plan, KINDS[job["kind"]]
    ns, at, image = job["metadata"]["namespace"], rfc3339(fake.clock.time()), _image(job)
    old = (fake.store.items.get(("v1", "Pod", ns, name)) or {}).get("status") or {}
    runs = max((s.get("restartCount", 0) for s in old.get("containerStatuses") or []), default=0)
    if phase == "Running":
        state: Obj = {"ready": True, "started": True, "state": {"running": {"startedAt": at}}}
    else:
        ended = {"exitCode": code, "reason": "Error" if code else "Completed", "startedAt": at,
                 "finishedAt": at}  # fmt: skip
        state = {"ready": False, "started": False, "state": {"terminated": ended}}
    notes = {k: v for k, v in labels.items() if k.startswith("jobset.") and "priority" not in k}
    if kind is TRAINJOB:
        notes |= {**_patched(job, 2)[1], COMPLETION_INDEX: str(rank)}
    meta = {"name": name, "namespace": ns, "labels": labels, "annotations": notes,
            "ownerReferences": [owner(_made(fake, job) if kind is TRAINJOB else job)]}  # fmt: skip
    status = {"name": kind.container, "image": image, "imageID": "", "restartCount": runs}
    return fake.store.put({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "nodeName": f"gpu-node-{rank}", "containers": [{"name": kind.container, "image": image}]},
        "status": {"phase": phase, "containerStatuses": [status | state]}})  # fmt: skip


def _event(fake: FakeCluster, namespace: str, name: str, regarding: Obj, reason: str,
           note: str, type_: str = "Normal", **more: str) -> None:  # fmt: skip
    """An event (events.k8s.io/v1) about ``regarding``."""
    fake.store.put({"apiVersion": "events.k8s.io/v1", "kind": "Event", "regarding": regarding,
                    "metadata": {"name": name, "namespace": namespace}, "reason": reason,
                    "note": note, "type": type_,
                    "eventTime": rfc3339(fake.clock.time(), nano=True), **more})  # fmt: skip


def _conditions(fake: FakeCluster, job: Obj, *said: tuple[str, str, str, str]) -> None:
    """The job's conditions ``(type, status, reason, message)``, in this order."""
    at, meta = rfc3339(fake.clock.time()), job["metadata"]
    written = [{"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": at}
               for t, s, r, m in said]  # fmt: skip
    fake.store.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                      {"status": {"conditions": written}})  # fmt: skip


def _said(job: Obj, type_: str, status: str = "True",
          reason: str = "") -> tuple[str, str, str, str]:  # fmt: skip
    """A PyTorchJob's condition, in the Training Operator's words."""
    meta = job["metadata"]
    words = f"PyTorchJob {meta['namespace']}/{meta['name']} is {type_.lower()}."
    return type_, status, reason or f"PyTorchJob{type_}", words


def _jobs_status(fake: FakeCluster, job: Obj, *, ready: int, suspended: int = 0) -> None:
    """A TrainJob's ``jobsStatus``, copied from its JobSet's: it counts Jobs, not pods (the
    one Job ``node``, active while a pod of it runs or waits, ready once all are; or
    ``suspended``, as the Trainer made the JobSet of a job Kueue holds)."""
    meta = job["metadata"]
    counts = {"name": "node", "active": 1 - suspended, "ready": ready, "succeeded": 0,
              "failed": 0, "suspended": suspended}  # fmt: skip
    fake.store.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                      {"status": {"jobsStatus": [counts]}})  # fmt: skip


def start(fake: FakeCluster, namespace: str, name: str, kind: str = "TrainJob") -> None:
    """The job's pods run, one per rank, each having logged its first line (the Job
    controller's ``SuccessfulCreate`` event for each TrainJob pod)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    for pod, rank, labels in _plans(fake, job):
        _pod(fake, job, (pod, rank, labels), "Running")
        fake.log(namespace, pod, f"rank {rank}: starting")
        if kind == "TrainJob":
            regarding = {"apiVersion": "batch/v1", "kind": "Job", "name": f"{name}-node-0"}
            _event(fake, namespace, f"{pod}.created", regarding, "SuccessfulCreate",
                   f"Created pod: {pod}", reportingController="job-controller")  # fmt: skip
    if kind == "TrainJob":
        _jobs_status(fake, job, ready=1)
    else:
        _conditions(fake, job, _said(job, "Created"), _said(job, "Running"))


def progress(fake: FakeCluster, namespace: str, name: str, percent: int, *, remaining: int = 0,
             loss: str = "0.9") -> None:  # fmt: skip
    """A TrainJob's training process reports a step (``status.trainerStatus``: the Trainer's
    ``TrainJobStatus`` feature gate, v2.2 on)."""
    if _job(fake, namespace, "TrainJob", name) is None:
        return
    status = {"progressPercentage": percent, "estimatedRemainingSeconds": remaining,
              "metrics": [{"name": "loss", "value": loss}],
              "lastUpdatedTime": rfc3339(fake.clock.time())}  # fmt: skip
    fake.store.change(TRAINJOB.api_version, "TrainJob", namespace, name,
                      {"status": {"trainerStatus": status}})  # fmt: skip


def train(fake: FakeCluster, namespace: str, name: str, kind: str, step: int, *,
          report: bool) -> None:  # fmt: skip
    """Each rank logs training step ``step`` (its loss 0.9 ** step); ``report``: a TrainJob's
    training process reports it too, 30 % a step (``progress``)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    loss = f"{0.9**step:.4g}"
    for pod, rank, _ in _plans(fake, job):
        fake.log(namespace, pod, f"rank {rank} step {step} loss {loss}")
    if report and kind == "TrainJob":
        percent = min(30 * step, 100)
        progress(fake, namespace, name, percent, remaining=(100 - percent) // 30 * 60, loss=loss)


def crash(fake: FakeCluster, namespace: str, name: str, rank: int, line: str) -> None:
    """Rank ``rank`` of a PyTorchJob crashes saying ``line``; the kubelet starts it again:
    its log starts over, its restart counted (``lastState``: the crash)."""
    if (job := _job(fake, namespace, "PyTorchJob", name)) is None:
        return
    pod, at = _plans(fake, job)[rank][0], rfc3339(fake.clock.time())
    fake.log(namespace, pod, line)
    [status] = fake.store.items["v1", "Pod", namespace, pod]["status"]["containerStatuses"]
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": at}}
    again = {"restartCount": status["restartCount"] + 1, "state": {"running": {"startedAt": at}},
             "lastState": crashed}  # fmt: skip
    fake.store.change("v1", "Pod", namespace, pod,
                      {"status": {"containerStatuses": [status | again]}})  # fmt: skip
    fake.at(0.1, lambda: fake.log(namespace, pod, f"rank {rank}: starting"))  # its back-off
    restart(fake, namespace, name)


def restart(fake: FakeCluster, namespace: str, name: str) -> None:
    """A PyTorchJob's pods are being recreated after a retryable failure."""
    if (job := _job(fake, namespace, "PyTorchJob", name)) is not None:
        _conditions(fake, job, _said(job, "Created"), _said(job, "Restarting"))


def finish(fake: FakeCluster, namespace: str, name: str, kind: str = "TrainJob", *,
           reason: str = "") -> None:  # fmt: skip
    """The job ends: it succeeded, or failed for ``reason`` (rank 0 exits 1); a TrainJob past
    its ``activeDeadlineSeconds`` (``DeadlineExceeded``) loses its JobSet, as the Trainer
    deletes it (observed)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    if reason == "DeadlineExceeded" and kind == "TrainJob":
        fake.store.delete(JOBSET, "JobSet", namespace, name)
        fake.store.change(job["apiVersion"], kind, namespace, name,
                          {"status": {"jobsStatus": None}})  # fmt: skip
        _conditions(fake, job, ("Failed", "True", reason, "TrainJob exceeded its active deadline"))
        return
    for plan in _plans(fake, job):
        code = 1 if reason and plan[1] == 0 else 0
        fake.log(namespace, plan[0], f"rank {plan[1]}: exit {code}")
        _pod(fake, job, plan, "Failed" if code else "Succeeded", code)
    if kind == "TrainJob":  # in JobSet's words, which the Trainer copies
        done = ("Failed", "True", reason, f"jobset failed due to {reason}") if reason else (
            "Complete", "True", "AllJobsCompleted", "jobset completed successfully")  # fmt: skip
        _conditions(fake, job, done)
    else:
        ended = _said(job, "Failed", reason=reason) if reason else _said(job, "Succeeded")
        _conditions(fake, job, _said(job, "Created"), _said(job, "Running", "False"), ended)


_NO_GPU = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
PENDING: Final[dict[str, tuple[Obj, tuple[str, str] | None]]] = {
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
"""Why a pod waits to start (``pending``), as the scheduler or the kubelet says it: what the
pod's status says, and the Warning event written with it (reason, note; None: none)."""


def pending(fake: FakeCluster, namespace: str, name: str, why: str,
            kind: str = "TrainJob") -> None:  # fmt: skip
    """The job's pods exist and wait to start, for ``why`` (a key of ``PENDING``;
    ``NotScheduled``: no node yet, as the recorded jobs' pods, with no scheduler)."""
    if (job := _job(fake, namespace, kind, name)) is None:
        return
    said, event = PENDING[why]
    for plan in _plans(fake, job):
        pod = _pod(fake, job, plan, "Pending")
        waiting = {"name": KINDS[kind].container, "image": _image(job), "imageID": "",
                   "ready": False, "restartCount": 0, "state": {"waiting": said}}  # fmt: skip
        status = {"phase": "Pending", "conditions": said.get("conditions", []),
                  "containerStatuses": [waiting] if "reason" in said else None}  # fmt: skip
        placed = why not in ("NotScheduled", "Unschedulable")
        spec = {**pod["spec"], "nodeName": pod["spec"]["nodeName"] if placed else None}
        fake.store.change("v1", "Pod", namespace, plan[0], {"spec": spec, "status": status})
        if event is not None:
            about = {"apiVersion": "v1", "kind": "Pod", "name": plan[0],
                     "uid": pod["metadata"]["uid"]}  # fmt: skip
            _event(fake, namespace, f"{plan[0]}.{event[0].lower()}", about, *event, "Warning")
    if kind == "TrainJob":
        _jobs_status(fake, job, ready=0)  # active, none ready: as the real Trainer says it


def runs(fake: FakeCluster, *, starts: float = 0.2, ends: float | None = 1.0, reason: str = "",
         restarts: float | None = None, waits: str | None = None, steps: int = 0,
         reports: Callable[[], bool] = lambda: False) -> Callable[[Obj], None]:  # fmt: skip
    """What happens to each job created (give it to ``fake.store.on_create``): its pods run
    ``starts`` seconds after, a PyTorchJob restarts at ``restarts`` if given, and it ends at
    ``ends`` (None: never), failed for ``reason`` if given; ``waits``: its pods wait to start
    instead, for that (a key of ``PENDING``); ``steps``: training steps logged between its
    start and its end (``train``; ``reports()``: reported too). The ``Trainer`` runs beside."""
    if not any(isinstance(hook, Trainer) for hook in fake.store.on_remove):
        fake.store.on_remove.append(Trainer(fake))

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
            fake.at(starts + step * gap, functools.partial(_step, fake, ns, name, kind, step,
                                                           reports))  # fmt: skip
        if restarts is not None:
            fake.at(restarts, lambda: restart(fake, ns, name))
        if ends is not None:
            fake.at(ends, lambda: finish(fake, ns, name, kind, reason=reason))

    return script


def _step(fake: FakeCluster, namespace: str, name: str, kind: str, step: int,
          reports: Callable[[], bool]) -> None:  # fmt: skip
    train(fake, namespace, name, kind, step, report=reports())


class Trainer:
    """The Trainer's answer to the JobSet of a Kueue-managed TrainJob being deleted while the
    TrainJob waits for its dependents (a Foreground delete): it makes the JobSet again, so the
    collector deletes it again and the TrainJob never goes (51 times a minute with the real
    Trainer v2.3.0 beside Kueue v0.19.2: KUBEFLOW.md). For ``store.on_remove``."""

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake

    def __call__(self, gone: Obj) -> None:
        refs = gone["metadata"].get("ownerReferences") or [] if gone["kind"] == "JobSet" else []
        for ref in (r for r in refs if r.get("kind") == "TrainJob"):
            key = (TRAINJOB.api_version, "TrainJob", gone["metadata"]["namespace"], ref["name"])
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
            _conditions(fake, obj, SUSPENDED)
        elif was.get("status") == "True":
            _conditions(fake, obj, RESUMED)
            fake.at(0.2, lambda: start(fake, ns, name, kind))

    return script


# What the Trainer's event says when the JobSet webhook refuses its update of the JobSet.
REFUSED: Final = ('TrainJob resources reconciliation failed: admission webhook "vjobset.kb.io" '
                  'denied the request: spec.replicatedJobs: Invalid value: "array": field is '
                  "immutable")  # fmt: skip


def queued(fake: FakeCluster, *, admits: float = 0.5, **lives: Any) -> Callable[[Obj], None]:
    """Kueue, for each job created with a queue (for ``fake.store.on_create``): Kueue's webhook
    suspended it (``kfcompile.testing.kueue``), it says so, Kueue makes its Workload, waiting,
    and admits it ``admits`` seconds later (two Updates); from then it ``runs(**lives)``. Where
    Kueue drops what only Trainer v2.3 has (``kueue.V2_3_ONLY``), the Trainer cannot update
    the JobSet: its Warning event, and the job never runs."""
    then = runs(fake, **lives)

    def script(obj: Obj) -> None:
        if fake_kueue.queue_of(obj) is None:
            return
        meta, kind = obj["metadata"], obj["kind"]
        key = (obj["apiVersion"], kind, meta["namespace"], meta["name"])
        _conditions(fake, fake_kueue.suspended(fake.store, fake.store.items[key], True), SUSPENDED)
        if kind == "TrainJob":  # Trainer v2.1 on: its JobSet's Job counted, suspended
            _jobs_status(fake, fake.store.items[key], ready=0, suspended=1)
        if fake.store.served(fake_kueue.api(fake.store), "Workload"):
            fake_kueue.held(fake.store, fake.store.items[key])

        def admit() -> None:
            job = _job(fake, meta["namespace"], kind, meta["name"])
            if job is None or not fake_kueue.flags_of(job).get("suspend"):
                return
            admitted = fake_kueue.admit(fake.store, job)
            _conditions(fake, admitted, RESUMED)
            dropped = fake_kueue.V2_3_ONLY in str(job["spec"]) and (
                fake_kueue.V2_3_ONLY not in str(admitted["spec"]))  # fmt: skip
            if not dropped:
                then(fake.store.items[key])
                return
            regarding = {"apiVersion": job["apiVersion"], "kind": kind, "name": meta["name"],
                         "uid": meta["uid"]}  # fmt: skip
            _event(fake, meta["namespace"], f"{meta['name']}.refused", regarding,
                   "TrainJobResourcesCreationFailed", REFUSED, "Warning",
                   reportingController="trainer", action="Reconciling")  # fmt: skip

        fake.at(admits, admit)

    return script


# What the kubelet does with a sync helper pod of these images: it waits, for that reason.
BAD_IMAGE, SLOW_IMAGE = "does-not-exist", "slow-to-pull"
IMAGES: Final = {BAD_IMAGE: "ImagePullBackOff", SLOW_IMAGE: "ContainerCreating"}


def helpers(fake: FakeCluster, *, waiting: str | None = None,
            after: float = 0.1) -> Callable[[Obj], None]:  # fmt: skip
    """The kubelet of the work-dir sync's helper pods (for ``fake.store.on_create``): each runs
    ``after`` seconds after its create (0: before the create is answered), or waits to start
    for ``waiting`` (by default, what ``IMAGES`` says of its image)."""

    def script(obj: Obj) -> None:
        meta = obj["metadata"]
        if obj["kind"] != "Pod" or (meta.get("labels") or {}).get("kfcompile.dev/role") != "sync":
            return
        image = " ".join(c.get("image", "") for c in obj["spec"]["containers"])
        why = next((why for part, why in IMAGES.items() if part in image), waiting)
        state = {"waiting": {"reason": why}} if why else {"running": {}}
        said = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": not why,
                 "restartCount": 0, "state": state} for c in obj["spec"]["containers"]]  # fmt: skip
        key = ("v1", "Pod", meta["namespace"], meta["name"])

        def kubelet() -> None:
            if key in fake.store.items:  # not deleted meanwhile
                status = {"phase": "Pending" if why else "Running", "containerStatuses": said}
                fake.store.change(*key, {"status": status})

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


def install(
    fake: FakeCluster,
    *,
    trainer: str | None = "v2.3.0",
    training_operator: bool = True,
    runtimes: tuple[Obj, ...] = (TORCH_DISTRIBUTED,),
    kueue: tuple[str, ...] = (),
) -> None:
    """What a cluster with Kubeflow serves: TrainJobs and training runtimes (``trainer``: the
    release its public ConfigMap says, from v2.2; None: no Trainer) with ``runtimes``,
    PyTorchJobs (``training_operator``), and Kueue serving the API versions ``kueue`` names
    (``kfcompile.testing.kueue.install``, with its queue ``team-a``). No CRD: a v2.0 or v2.1
    cluster is told by its CRD, which a test installs itself (``fake.store.create(crd)``)."""
    served = [("TrainJob", "trainjobs", True), ("TrainingRuntime", "trainingruntimes", True),
              ("ClusterTrainingRuntime", "clustertrainingruntimes", False)]  # fmt: skip
    for kind, plural, namespaced in served if trainer else ():
        rk = ResourceKind("trainer.kubeflow.org", "v1alpha1", kind, plural, namespaced)
        fake.store.kinds[(rk.api_version, kind)] = rk
    says = trainer is not None and not trainer.startswith(("v2.0.", "v2.1."))
    if says:
        release(fake.store, str(trainer))
    for runtime in runtimes if trainer else ():
        fake.store.create(runtime)
    if training_operator:
        fake.store.kinds[(PYTORCHJOB.api_version, "PyTorchJob")] = ResourceKind(
            "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")  # fmt: skip
    if kueue:
        fake_kueue.install(fake.store, kueue, patches=says)

"""What Kubeflow Trainer (with JobSet) or the Training Operator and the kubelets write for a job,
as steps a lifecycle test scripts on a ``PortFake``: ``start`` (a Running pod per rank, labelled
as JobSet or the operator labels them, the Job controller's event for each TrainJob pod, the job
running), ``restart`` (a PyTorchJob's ``Restarting``), ``finish`` (the pods' ends and the job's
condition). ``runs`` does them for each job created, at fake-clock times after its create;
``helpers`` is the kubelet of the work-dir sync's helper pods. The shapes are KUBEFLOW.md's
(trainer ``pkg/apis/trainer/v1alpha1``, training-operator ``pkg/apis/kubeflow.org/v1``, JobSet's
labels, core/v1 PodStatus, events.k8s.io/v1 Event)."""

from __future__ import annotations

from collections.abc import Callable

from kfcompile.kinds import COMPLETION_INDEX, PYTORCHJOB, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB

from .port import Obj, PortFake, rfc3339

__all__ = ["finish", "helpers", "pod_name", "pods", "restart", "runs", "start"]

KINDS = {kind.name: kind for kind in (TRAINJOB, PYTORCHJOB)}
Plan = tuple[str, int, dict[str, str]]  # a pod's name, rank and labels


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


def _job(fake: PortFake, namespace: str, kind: str, name: str) -> Obj | None:
    """The job, unless it was deleted meanwhile."""
    job = fake.objects.items.get((KINDS[kind].api_version, kind, namespace, name))
    return None if job is None or job["metadata"].get("deletionTimestamp") else job


def pods(fake: PortFake, namespace: str, name: str, kind: str = "TrainJob") -> list[Obj]:
    return fake.objects.list("v1", "Pod", namespace, KINDS[kind].pods.format(name=name))


def _container(phase: str, at: str, code: int, restarts: int = 0) -> Obj:
    if phase == "Running":
        state: Obj = {"ready": True, "started": True, "state": {"running": {"startedAt": at}}}
    else:
        reason = "Completed" if code == 0 else "Error"
        ended = {"exitCode": code, "reason": reason, "startedAt": at, "finishedAt": at}
        state = {"ready": False, "started": False, "state": {"terminated": ended}}
    return {"restartCount": restarts, **state}


def _pod(fake: PortFake, job: Obj, plan: Plan, phase: str, code: int = 0) -> None:
    meta, (name, rank, labels) = job["metadata"], plan
    kind = KINDS[job["kind"]]
    owner = {"apiVersion": kind.api_version, "kind": kind.name, "name": meta["name"],
             "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    where = {"name": name, "namespace": meta["namespace"]}
    container = {"name": kind.container, **_container(phase, rfc3339(fake.clock.time()), code)}
    fake.objects.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**where, "labels": labels, "ownerReferences": [owner]},
            "spec": {"nodeName": f"gpu-node-{rank}", "containers": [{"name": kind.container}]},
            "status": {"phase": phase, "containerStatuses": [container]},
        }
    )


def _created(fake: PortFake, namespace: str, job: str, pod: str) -> None:
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


def _conditions(fake: PortFake, job: Obj, *conditions: tuple[str, str, str]) -> None:
    """Write the job's conditions ``(type, status, reason)``, in this order."""
    at = rfc3339(fake.clock.time())
    written = [{"type": t, "status": s, "reason": r, "message": f"{r} ({job['metadata']['name']})",
                "lastTransitionTime": at} for t, s, r in conditions]  # fmt: skip
    meta = job["metadata"]
    fake.objects.change(job["apiVersion"], job["kind"], meta["namespace"], meta["name"],
                        {"status": {"conditions": written}})  # fmt: skip


def start(fake: PortFake, namespace: str, name: str, kind: str = "TrainJob") -> None:
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
        active = [{"name": "node", "active": len(plans), "ready": len(plans), "succeeded": 0,
                   "failed": 0}]  # fmt: skip
        fake.objects.change(
            job["apiVersion"], kind, namespace, name, {"status": {"jobsStatus": active}}
        )
    else:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Running", "True", "PyTorchJobRunning"))  # fmt: skip


def restart(fake: PortFake, namespace: str, name: str) -> None:
    """A PyTorchJob's pods are being recreated after a retryable failure."""
    job = _job(fake, namespace, "PyTorchJob", name)
    if job is not None:
        _conditions(fake, job, ("Created", "True", "PyTorchJobCreated"),
                    ("Restarting", "True", "PyTorchJobRestarting"))  # fmt: skip


def finish(
    fake: PortFake, namespace: str, name: str, kind: str = "TrainJob", *, reason: str = ""
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


def runs(
    fake: PortFake, *, starts: float = 0.2, ends: float | None = 1.0, reason: str = ""
) -> Callable[[Obj], None]:
    """What happens to each job created: its pods run ``starts`` s after, and it ends ``ends``
    s after (None: never), failed for ``reason`` if given. Pass it to ``fake.on_create``."""

    def script(obj: Obj) -> None:
        if obj["kind"] not in KINDS:
            return
        ns, name, kind = obj["metadata"]["namespace"], obj["metadata"]["name"], obj["kind"]
        fake.at(starts, lambda: start(fake, ns, name, kind))
        if ends is not None:
            fake.at(ends, lambda: finish(fake, ns, name, kind, reason=reason))

    return script


def helpers(fake: PortFake, *, waiting: str | None = None) -> Callable[[Obj], None]:
    """The kubelet of the work-dir sync's helper pods: each runs 0.1 s after its create, or
    stays waiting to start for ``waiting`` (``ImagePullBackOff``). Pass it to ``on_create``."""

    def script(obj: Obj) -> None:
        meta = obj["metadata"]
        if obj["kind"] != "Pod" or (meta.get("labels") or {}).get("kfcompile.dev/role") != "sync":
            return
        names = [c["name"] for c in obj["spec"]["containers"]]
        state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
        containers = [{"name": n, "ready": not waiting, "state": state} for n in names]
        status = {"phase": "Pending" if waiting else "Running", "containerStatuses": containers}
        key = ("v1", "Pod", meta["namespace"], meta["name"])

        def kubelet() -> None:
            if key in fake.objects.items:  # not deleted meanwhile
                fake.objects.change(*key, {"status": status})

        fake.at(0.1, kubelet)

    return script

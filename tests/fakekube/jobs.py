"""What Kubeflow Trainer, JobSet and the kubelets write for a TrainJob, as steps a lifecycle test
scripts on a ``PortFake``: ``start`` (a Running pod per node, labelled as JobSet labels them,
the Job controller's event for each, ``jobsStatus`` active), ``finish`` (the pods' ends and the
job's ``Complete`` or ``Failed`` condition). ``runs`` does both for each TrainJob created, at
fake-clock times after its create. The shapes are those KUBEFLOW.md describes (trainer
``pkg/apis/trainer/v1alpha1``, JobSet's labels, core/v1 PodStatus, events.k8s.io/v1 Event)."""

from __future__ import annotations

from collections.abc import Callable

from kfcompile.kinds import COMPLETION_INDEX

from .port import Obj, PortFake, rfc3339

__all__ = ["finish", "helpers", "pod_name", "pods", "runs", "start"]

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"


def _job(fake: PortFake, namespace: str, name: str) -> Obj | None:
    return fake.objects.items.get((TRAINJOB, "TrainJob", namespace, name))


def pods(fake: PortFake, namespace: str, name: str) -> list[Obj]:
    return fake.objects.list("v1", "Pod", namespace, f"{JOBSET_NAME}={name}")


def _state(phase: str, at: str, code: int) -> Obj:
    if phase == "Running":
        return {"ready": True, "started": True, "state": {"running": {"startedAt": at}}}
    reason = "Completed" if code == 0 else "Error"
    ended = {"exitCode": code, "reason": reason, "startedAt": at, "finishedAt": at}
    return {"ready": False, "started": False, "state": {"terminated": ended}}


def _pod(fake: PortFake, job: Obj, rank: int, phase: str, code: int = 0) -> None:
    meta, now = job["metadata"], rfc3339(fake.clock.time())
    name = pod_name(meta["name"], rank)
    owner = {"apiVersion": TRAINJOB, "kind": "TrainJob", "name": meta["name"],
             "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    labels = {JOBSET_NAME: meta["name"], REPLICATED_JOB: "node", COMPLETION_INDEX: str(rank)}
    container = {"name": "node", "restartCount": 0, **_state(phase, now, code)}
    fake.objects.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": labels,
                "ownerReferences": [owner],
            },
            "spec": {"nodeName": f"gpu-node-{rank}", "containers": [{"name": "node"}]},
            "status": {"phase": phase, "containerStatuses": [container]},
        }
    )


def pod_name(job: str, rank: int) -> str:
    """As the Job controller names them: ``<jobset>-<replicated job>-<job index>-<pod index>-``
    and five random letters (here always the same)."""
    return f"{job}-node-0-{rank}-bcdfg"


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


def start(fake: PortFake, namespace: str, name: str) -> None:
    """The job's pods run, one per node, each having logged its first line."""
    job = _job(fake, namespace, name)
    if job is None or job["metadata"].get("deletionTimestamp"):
        return  # deleted meanwhile
    nodes = int(job["spec"].get("trainer", {}).get("numNodes", 1))
    for rank in range(nodes):
        _pod(fake, job, rank, "Running")
        pod = pod_name(name, rank)
        fake.log(namespace, pod, f"rank {rank}: starting")
        _created(fake, namespace, f"{name}-node-0", pod)
    active = [{"name": "node", "active": nodes, "ready": nodes, "succeeded": 0, "failed": 0}]
    fake.objects.change(TRAINJOB, "TrainJob", namespace, name, {"status": {"jobsStatus": active}})


def finish(fake: PortFake, namespace: str, name: str, *, ok: bool = True) -> None:
    """The pods end (rank 0 fails when not ``ok``), and the job's condition says so."""
    job = _job(fake, namespace, name)
    if job is None or job["metadata"].get("deletionTimestamp"):
        return
    for pod in pods(fake, namespace, name):
        rank = int(pod["metadata"]["labels"][COMPLETION_INDEX])
        code = 0 if ok or rank else 1
        fake.log(namespace, pod["metadata"]["name"], f"rank {rank}: exit {code}")
        _pod(fake, job, rank, "Succeeded" if code == 0 else "Failed", code)
    kind, reason, message = (
        ("Complete", "AllJobsCompleted", "jobset completed successfully")
        if ok
        else ("Failed", "FailedJobs", f"jobset failed due to one or more job failures ({name})")
    )
    condition = {"type": kind, "status": "True", "reason": reason, "message": message,
                 "lastTransitionTime": rfc3339(fake.clock.time())}  # fmt: skip
    fake.objects.change(
        TRAINJOB, "TrainJob", namespace, name, {"status": {"conditions": [condition]}}
    )


def runs(
    fake: PortFake, *, starts: float = 0.2, ends: float | None = 1.0, ok: bool = True
) -> Callable[[Obj], None]:
    """What happens to each TrainJob created: its pods run ``starts`` s after, and it ends
    ``ends`` s after (None: never). Pass it to ``fake.on_create``."""

    def script(obj: Obj) -> None:
        if obj["kind"] != "TrainJob":
            return
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        fake.at(starts, lambda: start(fake, ns, name))
        if ends is not None:
            fake.at(ends, lambda: finish(fake, ns, name, ok=ok))

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

"""Kueue and MultiKueue in the fake cluster, as KUBEFLOW.md records the real Kueue v0.19.2
beside the real Trainer v2.3.0: its webhook suspends a queued job, its Workload says why the
job waits, admission is two full Updates of the job, eviction suspends it again; a MultiKueue
manager mirrors its jobs to a worker and copies the mirror's status back. Its kinds are served
in the API versions a release serves; its controllers write through the newest served."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from kfcompile.lifecycle.ports import Obj
from kfcompile.testing.store import ResourceKind, Store, clone, owner, rfc3339

if TYPE_CHECKING:
    from kfcompile.testing.cluster import FakeCluster

__all__ = ["CHECK", "CLUSTER_QUEUE", "WORKER", "admit", "api", "checking", "dispatches",
           "evict", "held", "install", "multikueue", "queue_of", "workload_crd",
           "workload_of"]  # fmt: skip

GROUP: Final = "kueue.x-k8s.io"
V1BETA1: Final = f"{GROUP}/v1beta1"
V1BETA2: Final = f"{GROUP}/v1beta2"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
MANAGER: Final = "kueue.x-k8s.io/manager"  # Kueue's runtimePatches entry
RESOURCE_IN_USE: Final = "kueue.x-k8s.io/resource-in-use"  # the Workload's finalizer
MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"
PREBUILT: Final = "kueue.x-k8s.io/prebuilt-workload-name"  # an annotation of the mirror
# The field of a TrainJob's patches only Trainer v2.3 has: Kueue up to v0.19 (built against
# Trainer v2.2's API, and serving v1beta1) drops it when it admits the job.
V2_3_ONLY: Final = "terminationGracePeriodSeconds"
CLUSTER_QUEUE: Final = "cluster-queue"
"""The ClusterQueue of the LocalQueue ``install`` makes."""
FLAVOR: Final = "default-flavor"
CHECK: Final = "multikueue"
"""The MultiKueue AdmissionCheck of a manager's ClusterQueue (``multikueue``)."""
WORKER: Final = "worker1"
"""The MultiKueueCluster every job is dispatched to (``dispatches``)."""
# Why a job waits for quota that others use now (flavorassigner: "insufficient unused quota").
WAITING: Final = ("couldn't assign flavors to pod set node: insufficient unused quota for cpu in "
                  f"flavor {FLAVOR}, 2 more needed")  # fmt: skip
JOB_GROUPS: Final = {"TrainJob": "trainer.kubeflow.org", "PyTorchJob": "kubeflow.org"}
# What the API server defaults managedBy to (the CRDs) before Kueue's webhook sees the job.
DEFAULT_MANAGERS: Final = ("trainer.kubeflow.org/trainjob-controller",
                           "kubeflow.org/training-operator")  # fmt: skip
EVICTIONS: Final = {
    "Preempted": "Preempted to accommodate a workload (UID: 1f2e) due to prioritization in the "
    "ClusterQueue",
    "Deactivated": "The workload is deactivated",
}
# The newest minor release of Kueue serving each set of its API versions: what ``install``
# makes by default (``kfcompile.lifecycle.kueue.SERVING``).
NEWEST_SERVING: Final = {("v1beta2",): 20, ("v1beta2", "v1beta1"): 19, ("v1beta1",): 14}
Said = tuple[str, str, str, str]  # a condition's type, status, reason and message
ADMITTED: Final = ("Admitted", "True", "Admitted", "The workload is admitted")
RESERVED: Final = ("QuotaReserved", "True", "QuotaReserved",
                   f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}")  # fmt: skip
UNRESERVED: Final = ("QuotaReserved", "False", "Pending")  # and why


def _flags(job: Obj) -> Obj:
    """Where the job keeps ``suspend`` and ``managedBy`` (made if missing)."""
    spec: Obj = job.setdefault("spec", {})
    return spec if job.get("kind") == "TrainJob" else spec.setdefault("runPolicy", {})


def flags_of(job: Obj) -> Obj:
    """The job's ``suspend`` and ``managedBy`` (and what else is beside them), as stored."""
    spec = job.get("spec") or {}
    return spec if job["kind"] == "TrainJob" else spec.get("runPolicy") or {}


def queue_of(job: Obj) -> str | None:
    """The Kueue queue a job names (None: not Kueue's)."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    return labels.get(QUEUE_LABEL) if job.get("kind") in JOB_GROUPS else None


def api(store: Store, kind: str = "Workload") -> str:
    """The version Kueue's controllers write ``kind`` through: v1beta2 where it is served."""
    return V1BETA2 if store.served(V1BETA2, kind) else V1BETA1


def conditions(store: Store, *said: Said) -> list[Obj]:
    """The conditions ``said``, as a controller writes them now."""
    at = rfc3339(store.clock.time())
    return [{"type": t, "status": s, "reason": r, "message": m, "lastTransitionTime": at}
            for t, s, r, m in said]  # fmt: skip


def workload_crd(versions: Iterable[str], minor: int) -> Obj:
    """The Workload CRD of Kueue v0.``minor`` serving ``versions``, as far as a client tells
    releases apart by it: v1beta2's ``spec.preemptionGates`` from v0.17 (all else kept)."""
    versions = list(versions)
    kept = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    gates = {"preemptionGates": {"type": "array", "items": {"type": "string"}}}

    def served(name: str) -> Obj:
        spec = kept | ({"properties": gates} if name == "v1beta2" and minor >= 17 else {})
        schema = {"type": "object", "properties": {"spec": spec, "status": kept}}
        return {"name": name, "served": True, "storage": name == versions[0],
                "schema": {"openAPIV3Schema": schema}, "subresources": {"status": {}}}  # fmt: skip

    names = {"kind": "Workload", "plural": "workloads", "singular": "workload"}
    spec = {"group": GROUP, "names": names, "scope": "Namespaced",
            "versions": [served(v) for v in versions]}  # fmt: skip
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"workloads.{GROUP}"}, "spec": spec}  # fmt: skip


def install(store: Store, versions: Iterable[str], *, patches: bool = True,
            queue: str | None = "team-a") -> None:  # fmt: skip
    """Kueue, the newest release serving ``versions`` (``"v1beta2"``, ``"v1beta1"``), with its
    webhook (``patches``: TrainJobs have runtimePatches, Trainer v2.2 on), its Workload
    controller and the LocalQueue ``queue`` (of ``default``, in ``CLUSTER_QUEUE``)."""
    versions = tuple(versions)
    for version in versions:  # (the Workload's CRD serves the Workload)
        for kind in ("LocalQueue", "ClusterQueue", "AdmissionCheck"):
            rk = ResourceKind(GROUP, version, kind, f"{kind.lower()}s", kind == "LocalQueue")
            store.kinds[(rk.api_version, kind)] = rk
    store.create(workload_crd(versions, NEWEST_SERVING.get(versions, 19)))
    store.admission.append(lambda obj: _webhook(obj, patches))
    store.controllers.append(lambda: _release(store))
    if queue is not None:
        store.create({"apiVersion": api(store, "LocalQueue"), "kind": "LocalQueue",
                      "metadata": {"name": queue, "namespace": "default"},
                      "spec": {"clusterQueue": CLUSTER_QUEUE}})  # fmt: skip


def _webhook(obj: Obj, patches: bool) -> None:
    """Kueue's webhook: a job naming a queue is suspended; a TrainJob gets Kueue's
    runtimePatches entry, appended."""
    if queue_of(obj) is None:
        return
    _flags(obj)["suspend"] = True
    if obj["kind"] == "TrainJob" and patches:
        found = obj["spec"].setdefault("runtimePatches", [])
        if not any(p.get("manager") == MANAGER for p in found):
            found.append({"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}})


def workload_name(job: Obj) -> str:
    """``<kind>-<name>-<5 hex>`` (jobframework ``GetWorkloadNameForOwnerWithGVK``)."""
    meta, kind = job["metadata"], job["kind"]
    said = f"{kind}\n{JOB_GROUPS[kind]}\n{meta['name']}\n{meta['uid']}"
    digest = hashlib.sha1(said.encode()).hexdigest()[:5]
    return f"{kind.lower()}-{meta['name']}"[:247] + "-" + digest


def suspended(store: Store, job: Obj, suspend: bool) -> Obj:
    """The job as stored once Kueue's Update set its ``suspend``."""
    job = clone(job)
    _flags(job)["suspend"] = suspend
    return store.put(job)


def workload_of(store: Store, job: Obj) -> Obj | None:
    """The job's Workload as stored, if Kueue made it."""
    key = (api(store), "Workload", job["metadata"]["namespace"], workload_name(job))
    return store.items.get(key)


def held(store: Store, job: Obj, message: str = WAITING) -> Obj:
    """Kueue makes the job's Workload, waiting for quota (``message`` says why)."""
    meta = job["metadata"]
    nodes = int((job.get("spec") or {}).get("trainer", {}).get("numNodes", 1))
    return store.put({
        "apiVersion": api(store), "kind": "Workload",
        "metadata": {"name": workload_name(job), "namespace": meta["namespace"],
                     "labels": {JOB_UID_LABEL: meta["uid"]}, "ownerReferences": [owner(job)],
                     "finalizers": [RESOURCE_IN_USE]},
        "spec": {"queueName": queue_of(job), "active": True, "podSets": [
            {"name": "node", "count": nodes, "template": {"spec": {"containers": []}}}]},
        "status": {"conditions": conditions(store, (*UNRESERVED, message))},
    })  # fmt: skip


def _says(store: Store, job: Obj, *said: Said, active: bool = True, **status: object) -> None:
    """The job's Workload, if there is one, says ``said`` (its conditions) and ``status``."""
    if (found := workload_of(store, job)) is not None:
        spec = {**found["spec"], "active": active}
        store.put({**found, "spec": spec, "status": {"conditions": conditions(store, *said),
                                                     **status}})  # fmt: skip


def _check(store: Store, name: str, state: str, message: str) -> Obj:
    return {"name": name, "state": state, "message": message,
            "lastTransitionTime": rfc3339(store.clock.time())}  # fmt: skip


def admit(store: Store, job: Obj) -> Obj:
    """Kueue admits the job: its Workload reserves quota and is admitted, then the job is
    updated (Kueue's patch gets what the pods need; Kueue up to v0.19 drops ``V2_3_ONLY``) and
    unsuspended: two full Updates. The job as it is then."""
    assigned = [{"name": "node", "flavors": {"cpu": FLAVOR}, "count": 1}]
    _says(store, job, RESERVED, ADMITTED,
          admission={"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": assigned})  # fmt: skip
    job = clone(job)
    if job["kind"] == "TrainJob":
        pod = {"labels": {"kueue.x-k8s.io/cluster-queue-name": CLUSTER_QUEUE,
                          "kueue.x-k8s.io/local-queue-name": queue_of(job),
                          "kueue.x-k8s.io/podset": "node"},
               "annotations": {"kueue.x-k8s.io/workload": workload_name(job)}}  # fmt: skip
        for patch in job["spec"].get("runtimePatches") or []:
            spec = patch["trainingRuntimeSpec"]["template"]["spec"]
            if patch.get("manager") == MANAGER:
                node = {"name": "node", "template": {"spec": {"template": {"metadata": pod}}}}
                spec["replicatedJobs"] = [node]
            elif store.served(V1BETA1, "Workload"):  # v0.19 or older: Trainer v2.2's types
                for rjob in spec.get("replicatedJobs") or []:
                    template = ((rjob.get("template") or {}).get("spec") or {}).get("template")
                    ((template or {}).get("spec") or {}).pop(V2_3_ONLY, None)
        job = store.put(job)  # the first Update: the patch, while suspended
    return suspended(store, job, False)  # the second: unsuspended


def checking(store: Store, job: Obj, check: str, message: str, state: str = "Pending") -> None:
    """Quota reserved for the job, its admission check ``check`` in ``state`` (``Pending``,
    ``Retry``: a ProvisioningRequest's, say), saying ``message``: not admitted yet."""
    unchecked = ("Admitted", "False", "UnsatisfiedAdmissionChecks",
                 "The workload has not all admission checks")  # fmt: skip
    _says(store, job, RESERVED, unchecked, admission={"clusterQueue": CLUSTER_QUEUE},
          admissionChecks=[_check(store, check, state, message)])  # fmt: skip


def evict(store: Store, job: Obj, reason: str = "Preempted") -> Obj:
    """Kueue evicts the job (``Preempted``; ``Deactivated``: its Workload made inactive) and
    suspends it (an Update its controller sees: ``on_patch``). The job as it is then."""
    evicted = ("Evicted", "True", reason, EVICTIONS[reason])
    unadmitted = ("Admitted", "False", "NoReservation", "The workload has no reservation")
    _says(store, job, evicted, (*UNRESERVED, WAITING), unadmitted,
          active=reason != "Deactivated")  # fmt: skip
    out = suspended(store, job, True)
    for hook in store.on_patch:
        hook(out)
    return out


def _release(store: Store) -> None:
    """Kueue's Workload controller: a Workload being deleted loses Kueue's finalizer."""
    for obj in [o for k, o in store.items.items() if k[1] == "Workload"]:
        left = [f for f in obj["metadata"].get("finalizers") or [] if f != RESOURCE_IN_USE]
        if obj["metadata"].get("deletionTimestamp") and left != obj["metadata"]["finalizers"]:
            store.put({**obj, "metadata": {**obj["metadata"], "finalizers": left}})


def multikueue(store: Store, queue: str = "team-a") -> None:
    """What a MultiKueue manager has: ``CLUSTER_QUEUE`` names the MultiKueue AdmissionCheck,
    and Kueue's webhook gives each job of ``queue`` ``managedBy`` MultiKueue (Kueue's
    ``CanDefaultManagedBy``: unset, or the kind's own controller)."""
    store.create({"apiVersion": api(store, "AdmissionCheck"), "kind": "AdmissionCheck",
                  "metadata": {"name": CHECK}, "spec": {"controllerName": MULTIKUEUE}})  # fmt: skip
    checks = {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}
    store.create({"apiVersion": api(store, "ClusterQueue"), "kind": "ClusterQueue",
                  "metadata": {"name": CLUSTER_QUEUE}, "spec": checks})  # fmt: skip

    def webhook(obj: Obj) -> None:
        if queue_of(obj) == queue and _flags(obj).get("managedBy") in (None, *DEFAULT_MANAGERS):
            _flags(obj)["managedBy"] = MULTIKUEUE

    store.admission.append(webhook)


def dispatches(manager: FakeCluster, worker: FakeCluster, *,
               after: float = 0.1) -> Callable[[Obj], None]:  # fmt: skip
    """MultiKueue, for the manager's ``store.on_create``: a job it manages gets its Workload
    (``WORKER`` nominated), ``after`` seconds later its mirror on ``worker`` (the Workload's
    ``clusterName``), then the mirror's status at each tick until the job is being deleted,
    when the mirror is deleted."""
    admission = {"clusterQueue": CLUSTER_QUEUE}

    def dispatch(key: tuple[str, str, str, str]) -> None:
        job = manager.store.items.get(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        # The mirror: the job with its prebuilt Workload, the worker's own controller as its
        # manager, without Kueue's runtimePatches entry.
        meta, spec = job["metadata"], clone(job["spec"])
        if "runtimePatches" in spec:
            spec["runtimePatches"] = [p for p in spec["runtimePatches"] if p["manager"] != MANAGER]
        labels = {**(meta.get("labels") or {}), ORIGIN_LABEL: "multikueue"}
        notes = {**(meta.get("annotations") or {}), PREBUILT: workload_name(job)}
        mirror = {"apiVersion": job["apiVersion"], "kind": job["kind"], "spec": spec, "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "labels": labels,
            "annotations": notes}}  # fmt: skip
        _flags(mirror).pop("managedBy", None)
        if job["kind"] == "TrainJob":
            spec["managedBy"] = DEFAULT_MANAGERS[0]
        worker.store.create(mirror)
        ready = _check(manager.store, CHECK, "Ready", f'The workload was admitted on "{WORKER}"')
        _says(manager.store, job, RESERVED, ADMITTED, clusterName=WORKER, admission=admission,
              admissionChecks=[ready])  # fmt: skip
        suspended(manager.store, job, False)
        follow(key)

    def follow(key: tuple[str, str, str, str]) -> None:
        job = manager.store.items.get(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            if worker.store.items.get(key) is not None:
                worker.store.delete(*key)
            return
        manager.at(0.0, lambda: follow(key))
        status = (worker.store.items.get(key) or {}).get("status")
        if status is not None and status != job.get("status"):
            manager.store.put({**job, "status": status})

    def script(obj: Obj) -> None:
        if obj["kind"] not in JOB_GROUPS or flags_of(obj).get("managedBy") != MULTIKUEUE:
            return
        held(manager.store, obj)
        pending = _check(manager.store, CHECK, "Pending", "")
        _says(manager.store, obj, RESERVED, nominatedClusterNames=[WORKER],
              admission=admission, admissionChecks=[pending])  # fmt: skip
        meta = obj["metadata"]
        key = (obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
        manager.at(after, lambda: dispatch(key))

    return script

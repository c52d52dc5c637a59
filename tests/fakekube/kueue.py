"""Kueue's API in the fake cluster, as a Kueue release serves it: the real CRDs (v0.15.8, in
``../shared/crds/kueue``) with the versions that release serves (``SERVES``), installed by
``install``, and the objects stored once and served through each version (``CONVERSIONS``, as
Kueue's conversion webhook converts them: ``apis/kueue/v1beta1/*_conversion.go``).

Stored as ``v1beta2`` (the storage version from Kueue v0.16); what differs in ``v1beta1`` among
the fields anything here writes or reads: a ClusterQueue's ``spec.admissionChecks`` (v1beta1
only: v1beta2 has ``admissionChecksStrategy.admissionChecks[].name``, which v1beta1 also serves,
so a v1beta1 read of a converted ClusterQueue has only the strategy) and ``spec.cohort``
(v1beta2 ``cohortName``), a Workload's ``status.accumulatedPastExexcutionTimeSeconds``
(v1beta2 fixes the spelling).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any, Final, Protocol

import yaml

from .events import Conversion
from .resources import clone, rfc3339

Obj = dict[str, Any]

GROUP: Final = "kueue.x-k8s.io"
V1BETA1: Final = f"{GROUP}/v1beta1"
V1BETA2: Final = f"{GROUP}/v1beta2"
# What each kind of Kueue release serves: v0.20 on only v1beta2, v0.15 to v0.19 both, v0.13
# and v0.14 only v1beta1 (KUBEFLOW.md, Kueue).
SERVES: Final[dict[str, tuple[str, ...]]] = {
    "v1beta2": ("v1beta2",),
    "both": ("v1beta2", "v1beta1"),
    "v1beta1": ("v1beta1",),
}
KINDS: Final = {"LocalQueue": "localqueues", "ClusterQueue": "clusterqueues",
                "Workload": "workloads", "AdmissionCheck": "admissionchecks"}  # fmt: skip
RELEASE: Final = "v0.15.8"  # the CRD files'
CLUSTER_QUEUE: Final = "cluster-queue"  # the ClusterQueue of the LocalQueue ``cluster.QUEUE``


@functools.cache
def crd(shared: Path, kind: str, serves: str) -> Obj:
    """The CRD of ``kind`` serving exactly the versions of ``SERVES[serves]`` (one object per
    arguments: a CRD must not change once installed)."""
    versions = SERVES[serves]
    suffix = "-v1beta2only" if versions == ("v1beta2",) else ""
    path = shared / "crds" / "kueue" / f"{KINDS[kind]}-{RELEASE}{suffix}.yaml"
    found: Obj = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    kept = [v for v in found["spec"]["versions"] if v["name"] in versions]
    storage = "v1beta2" if "v1beta2" in versions else "v1beta1"
    kept = [{**v, "served": True, "storage": v["name"] == storage} for v in kept]
    return {**found, "spec": {**found["spec"], "versions": kept}}


class Seeded(Protocol):
    def create(self, obj: Obj) -> object: ...


def install(store: Seeded, shared: Path, serves: str) -> None:
    """Kueue's CRDs, serving the versions of ``SERVES[serves]``."""
    for kind in KINDS:
        store.create(crd(shared, kind, serves))


class Served(Protocol):
    def served(self, api_version: str, kind: str) -> object: ...


def api(store: Served, kind: str = "Workload") -> str:
    """The version Kueue's controllers write ``kind`` through: v1beta2 where it is served."""
    return V1BETA2 if store.served(V1BETA2, kind) else V1BETA1


# --- v1beta1 <-> v1beta2 (stored) ---------------------------------------------------------------


def _renamed(node: Obj, old: str, new: str) -> Obj:
    return {(new if k == old else k): v for k, v in node.items()}


def _at(obj: Obj, part: str, change: Any) -> Obj:
    return {**obj, part: change(obj[part])} if isinstance(obj.get(part), dict) else obj


def _cq_to_v1beta2(spec: Obj) -> Obj:
    spec = _renamed(spec, "cohort", "cohortName")
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    return spec


def _as(api_version: str, obj: Obj) -> Obj:
    return {**clone(obj), "apiVersion": api_version}


def _cq_write(obj: Obj) -> Obj:
    return _at(_as(V1BETA2, obj), "spec", _cq_to_v1beta2)


def _cq_read(obj: Obj) -> Obj:
    return _at(_as(V1BETA1, obj), "spec", lambda s: _renamed(s, "cohortName", "cohort"))


_TYPO = ("accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")


def _wl_write(obj: Obj) -> Obj:
    return _at(_as(V1BETA2, obj), "status", lambda s: _renamed(s, *_TYPO))


def _wl_read(obj: Obj) -> Obj:
    return _at(_as(V1BETA1, obj), "status", lambda s: _renamed(s, _TYPO[1], _TYPO[0]))


_SAME: Final = {"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}
_CHANGES: Final = {"ClusterQueue": (_cq_read, _cq_write), "Workload": (_wl_read, _wl_write)}


def _plain(api_version: str) -> Any:
    return lambda obj: _as(api_version, obj)


# Each v1beta1 kind, served from the v1beta2 storage (``fakekube.port.Objects``).
CONVERSIONS: Final[dict[tuple[str, str], Conversion]] = {
    (V1BETA1, kind): Conversion(
        (V1BETA2, kind), *_CHANGES.get(kind, (_plain(V1BETA1), _plain(V1BETA2))), _SAME
    )
    for kind in KINDS
}


# --- Kueue's controllers: its webhook, the job's Workload, admission and eviction ---------------
# As the real Kueue v0.19.2 did beside the real Trainer v2.3.0 (KUBEFLOW.md, Kueue): on create a
# queued job is suspended and a TrainJob gets Kueue's own runtimePatches entry; its Workload
# (``trainjob-<name>-<5 hex>``, labelled with the job's uid, owned by it, with Kueue's finalizer)
# says why it waits (``QuotaReserved=False``, reason ``Pending``); admission is a full Update of
# the job (Kueue's patch gets the pod-template labels and the workload annotation), then another
# that unsuspends it (generation 1 -> 3); eviction says ``Evicted`` and suspends it again.

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
MANAGER: Final = "kueue.x-k8s.io/manager"  # Kueue's runtimePatches entry
RESOURCE_IN_USE: Final = "kueue.x-k8s.io/resource-in-use"  # the Workload's finalizer
WORKLOAD_ANNOTATION: Final = "kueue.x-k8s.io/workload"
# The field of a TrainJob's patches only Trainer v2.3 has: Kueue up to v0.19 (built against
# Trainer v2.2's API, and serving kueue.x-k8s.io/v1beta1) drops it when it admits the job.
V2_3_ONLY: Final = "terminationGracePeriodSeconds"
FLAVOR: Final = "default-flavor"
# Why a job waits for quota that others use now (flavorassigner: "insufficient unused quota").
WAITING: Final = (
    "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor "
    f"{FLAVOR}, 2 more needed"
)
JOB_KINDS: Final = {"TrainJob": "trainer.kubeflow.org", "PyTorchJob": "kubeflow.org"}


def _flags(job: Obj) -> Obj:
    """Where the job keeps ``suspend`` and ``managedBy``."""
    spec: Obj = job.setdefault("spec", {})
    return spec if job.get("kind") == "TrainJob" else spec.setdefault("runPolicy", {})


def queue_of(job: Obj) -> str | None:
    labels = (job.get("metadata") or {}).get("labels") or {}
    return labels.get(QUEUE_LABEL) if job.get("kind") in JOB_KINDS else None


class CRDs(Protocol):
    def served(self, api_version: str, kind: str) -> Any: ...


def _patches(store: CRDs) -> bool:
    """Whether the TrainJobs served have ``spec.runtimePatches`` (Trainer v2.2 on: Kueue v0.17
    on patches through it)."""
    served = store.served("trainer.kubeflow.org/v1alpha1", "TrainJob")
    crd = getattr(served, "crd", None) or {}
    versions = (crd.get("spec") or {}).get("versions") or [{}]
    spec = versions[0].get("schema", {}).get("openAPIV3Schema", {}).get("properties", {})
    return "runtimePatches" in ((spec.get("spec") or {}).get("properties") or {})


def webhook(store: CRDs) -> Any:
    """Kueue's mutating webhook (jobframework defaulting) for ``store.admission``: a job naming
    a queue is suspended; a TrainJob gets Kueue's runtimePatches entry, appended."""

    def admit(obj: Obj) -> None:
        if queue_of(obj) is None:
            return
        _flags(obj)["suspend"] = True
        if obj["kind"] == "TrainJob" and _patches(store):
            patches = obj["spec"].setdefault("runtimePatches", [])
            if not any(p.get("manager") == MANAGER for p in patches):
                patches.append({"manager": MANAGER,
                                "trainingRuntimeSpec": {"template": {"spec": {}}}})  # fmt: skip

    return admit


def workload_name(job: Obj) -> str:
    """``<kind>-<name>-<5 hex>`` (jobframework ``GetWorkloadNameForOwnerWithGVK``)."""
    meta, kind = job["metadata"], job["kind"]
    said = f"{kind}\n{JOB_KINDS[kind]}\n{meta['name']}\n{meta['uid']}"
    return (
        f"{kind.lower()}-{meta['name']}"[:247] + "-" + hashlib.sha1(said.encode()).hexdigest()[:5]
    )


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> Obj:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now, "observedGeneration": 1}  # fmt: skip


def workload(job: Obj, api_version: str, now: str, message: str = WAITING) -> Obj:
    """The job's Workload as Kueue makes it, waiting: ``QuotaReserved=False``, ``Pending``."""
    meta = job["metadata"]
    owner = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"],
             "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    nodes = int((job.get("spec") or {}).get("trainer", {}).get("numNodes", 1))
    pods = [{"name": "node", "count": nodes, "template": {"spec": {"containers": []}}}]
    return {
        "apiVersion": api_version, "kind": "Workload",
        "metadata": {"name": workload_name(job), "namespace": meta["namespace"],
                     "labels": {JOB_UID_LABEL: meta["uid"]}, "ownerReferences": [owner],
                     "finalizers": [RESOURCE_IN_USE]},
        "spec": {"queueName": queue_of(job), "podSets": pods, "active": True},
        "status": {"conditions": [_condition("QuotaReserved", "False", "Pending", message, now)]},
    }  # fmt: skip


class Clock(Protocol):
    def time(self) -> float: ...


class Store(Protocol):
    items: dict[Any, Obj]
    clock: Clock
    lock: Any
    rv: int
    on_patch: list[Any]

    def put(self, obj: Obj) -> Obj: ...
    def served(self, api_version: str, kind: str) -> Any: ...


def _now(store: Store) -> str:
    return rfc3339(store.clock.time())


def held(store: Store, job: Obj, message: str = WAITING) -> Obj:
    """Kueue makes the job's Workload (the job as stored, with its uid), waiting."""
    return store.put(workload(job, api(store), _now(store), message))


def workload_of(store: Store, job: Obj) -> Obj | None:
    """The job's Workload as stored (v1beta2), if Kueue made it."""
    return store.items.get((V1BETA2, "Workload", job["metadata"]["namespace"], workload_name(job)))


def _write(store: Store, stored: Obj, **parts: Obj) -> None:
    """A Workload written again with ``parts`` (spec, status) through the version served."""
    store.put({**stored, "apiVersion": api(store), **parts})


def _status(store: Store, job: Obj, status: Obj) -> None:
    found = workload_of(store, job)
    if found is not None:
        _write(store, found, status=status)


def admit(store: Store, job: Obj, cluster_queue: str = CLUSTER_QUEUE) -> Obj:
    """Kueue admits the job: its Workload reserves quota and is admitted, then the job is
    updated (Kueue's runtimePatches entry gets what the pods need) and unsuspended, two full
    Updates; the job as it is then."""
    now = _now(store)
    assignment = [{"name": "node", "flavors": {"cpu": FLAVOR}, "count": 1}]
    _status(store, job, {
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": assignment},
        "conditions": [_condition("QuotaReserved", "True", "QuotaReserved",
                                  f"Quota reserved in ClusterQueue {cluster_queue}", now),
                       _condition("Admitted", "True", "Admitted",
                                  "The workload is admitted", now)]})  # fmt: skip
    job = clone(job)
    if job["kind"] == "TrainJob":
        pod = {"metadata": {
            "labels": {"kueue.x-k8s.io/cluster-queue-name": cluster_queue,
                       "kueue.x-k8s.io/local-queue-name": queue_of(job),
                       "kueue.x-k8s.io/podset": "node"},
            "annotations": {WORKLOAD_ANNOTATION: workload_name(job)}}}  # fmt: skip
        for patch in job["spec"].get("runtimePatches") or []:
            if patch.get("manager") == MANAGER:
                patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = [
                    {"name": "node", "template": {"spec": {"template": pod}}}]  # fmt: skip
            elif store.served(V1BETA1, "Workload"):  # v0.19 or older: Trainer v2.2's types
                for rjob in patch["trainingRuntimeSpec"]["template"]["spec"].get(
                    "replicatedJobs") or []:  # fmt: skip
                    pod_spec = ((rjob.get("template") or {}).get("spec") or {}).get("template")
                    ((pod_spec or {}).get("spec") or {}).pop(V2_3_ONLY, None)
        job = store.put(job)  # the first Update: the patch, while suspended
    flags = clone(job)
    _flags(flags)["suspend"] = False
    return store.put(flags)  # the second: unsuspended


def checking(store: Store, job: Obj, check: str, message: str) -> None:
    """Quota reserved for the job, its admission check ``check`` Pending (a
    ProvisioningRequest's, say), saying ``message``: not admitted yet."""
    now = _now(store)
    reserved = _condition("QuotaReserved", "True", "QuotaReserved",
                          f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}", now)  # fmt: skip
    unsatisfied = _condition("Admitted", "False", "UnsatisfiedAdmissionChecks",
                             "The workload has not all admission checks", now)  # fmt: skip
    pending = {"name": check, "state": "Pending", "message": message, "lastTransitionTime": now}
    _status(store, job, {"admission": {"clusterQueue": CLUSTER_QUEUE},
                         "conditions": [reserved, unsatisfied],
                         "admissionChecks": [pending]})  # fmt: skip


# What Kueue says of an eviction, by its reason.
EVICTIONS: Final = {
    "Preempted": "Preempted to accommodate a workload (UID: 1f2e) due to prioritization in the "
    "ClusterQueue",
    "Deactivated": "The workload is deactivated",
}


def evict(store: Store, job: Obj, reason: str = "Preempted", message: str = "") -> Obj:
    """Kueue evicts the job (``Preempted``; ``Deactivated``: its Workload made inactive): its
    Workload says ``Evicted`` and waits again, the job is suspended (an Update the job's
    controller sees: ``on_patch``); the job as it is then."""
    now = _now(store)
    said = message or EVICTIONS.get(reason, reason)
    found = workload_of(store, job)
    if found is not None:
        active = reason != "Deactivated"
        _write(store, found, spec={**found["spec"], "active": active}, status={
            "conditions": [_condition("Evicted", "True", reason, said, now),
                           _condition("QuotaReserved", "False", "Pending", WAITING, now),
                           _condition("Admitted", "False", "NoReservation",
                                      "The workload has no reservation", now)]})  # fmt: skip
    stopped = clone(job)
    _flags(stopped)["suspend"] = True
    out = store.put(stopped)
    for hook in store.on_patch:
        hook(out)
    return out


def releases(store: Store) -> Any:
    """Kueue's Workload controller, for ``Objects.controllers``: a Workload being deleted (its
    job gone: the garbage collector) loses Kueue's finalizer, and goes."""
    seen = -1

    def tick() -> None:
        nonlocal seen
        with store.lock:
            if store.rv == seen:
                return
            for key, obj in list(store.items.items()):
                meta = obj["metadata"]
                held = RESOURCE_IN_USE in (meta.get("finalizers") or [])
                if key[:2] == (V1BETA2, "Workload") and meta.get("deletionTimestamp") and held:
                    left = [f for f in meta["finalizers"] if f != RESOURCE_IN_USE]
                    _write(store, obj, metadata={**meta, "finalizers": left})
            seen = store.rv

    return tick

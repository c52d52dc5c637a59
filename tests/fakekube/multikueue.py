"""Kueue's MultiKueue for tests (KUBEFLOW.md, Kueue; ``pkg/controller/admissionchecks/multikueue``;
Kueue v0.13+ shapes), as steps in the style of ``fakekube.jobs``, and ``TwoClusters`` (a manager
and a worker ``LocalCluster``) they move. ``webhook``: Kueue's mutating admission on the manager
gives a job for ``QUEUE`` (whose ClusterQueue has the MultiKueue AdmissionCheck:
``install_manager``) ``managedBy: kueue.x-k8s.io/multikueue`` and suspends it. ``dispatch``: the
job's Workload (labelled ``kueue.x-k8s.io/job-uid``, owned by the job) says ``WORKER`` admitted
it, the mirror (no ``managedBy``, labelled ``kueue.x-k8s.io/multikueue-origin``) is created
there, the manager's job unsuspended. ``follow``: the mirror's status copied to the manager's
job, the mirror deleted once that is being deleted. Nothing runs on its own: tests call
``TwoClusters.settle``, or wrap a blocking command in ``ticking`` (settled at each request).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from kfcompile.spec.additions import QUEUE_LABEL

from . import jobs, kueue
from .cluster import NAMESPACE, QUEUE, LocalCluster, live
from .kueue import CLUSTER_QUEUE
from .port import Objects, PortFake
from .requestlog import RequestRecord
from .resources import StoreError, clone, rfc3339

Obj = dict[str, Any]
Key = tuple[str, str, str, str]

MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"
PREBUILT: Final = "kueue.x-k8s.io/prebuilt-workload-name"  # an annotation of the mirror
# What an API server defaults managedBy to (the CRDs) before Kueue's webhook sees the job.
DEFAULT_MANAGERS: Final = ("trainer.kubeflow.org/trainjob-controller",
                            "kubeflow.org/training-operator")  # fmt: skip
CHECK: Final = "multikueue"
WORKER: Final = "worker1"  # the MultiKueueCluster every job is dispatched to


def _flags(job: Obj) -> Obj:
    spec: Obj = job.setdefault("spec", {})
    return spec if job.get("kind") == "TrainJob" else spec.setdefault("runPolicy", {})


def install_manager(store: Objects) -> None:
    """What a MultiKueue manager has: the ClusterQueue of the LocalQueue ``QUEUE`` names the
    MultiKueue AdmissionCheck (``spec.controllerName``); Kueue's webhook."""
    check = {"metadata": {"name": CHECK}, "spec": {"controllerName": MULTIKUEUE}}
    store.create({"apiVersion": kueue.api(store, "AdmissionCheck"), "kind": "AdmissionCheck",
                  **check})  # fmt: skip
    checks = {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}
    queue = {"metadata": {"name": CLUSTER_QUEUE}, "spec": checks}
    store.create({"apiVersion": kueue.api(store, "ClusterQueue"), "kind": "ClusterQueue", **queue})
    store.admission.append(webhook)


def webhook(obj: Obj) -> None:
    """Kueue's webhook on the manager, for a job of ``QUEUE`` (a MultiKueue queue), besides
    what it does to every queued job (``kueue.webhook``): MultiKueue's ``managedBy``."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if obj.get("kind") in jobs.KINDS and labels.get(QUEUE_LABEL) == QUEUE:
        flags = _flags(obj)
        # Kueue's CanDefaultManagedBy (jobframework): unset or the kind's own controller.
        if flags.get("managedBy") in (None, *DEFAULT_MANAGERS):
            flags["managedBy"] = MULTIKUEUE


def dispatches(manager: PortFake, worker: Objects, *, after: float = 0.1) -> Callable[[Obj], None]:
    """MultiKueue for each job created that it manages: its Workload at once, quota reserved on
    the manager and ``WORKER`` nominated (``nominate``); ``dispatch`` ``after`` s later, then
    ``follow``. Pass it to the manager's ``on_create``."""

    def script(obj: Obj) -> None:
        if obj["kind"] in jobs.KINDS and _flags(obj).get("managedBy") == MULTIKUEUE:
            meta = obj["metadata"]
            key = (obj["apiVersion"], obj["kind"], meta["namespace"], meta["name"])
            nominate(manager, obj)
            manager.at(after, lambda: dispatch(manager, worker, key))

    return script


def _check(state: str, message: str, now: str) -> Obj:
    return {"name": CHECK, "state": state, "message": message, "lastTransitionTime": now}


def nominate(manager: PortFake, job: Obj) -> None:
    """The job's Workload on the manager before dispatch: quota reserved there, the MultiKueue
    check Pending, the worker it may go to in ``status.nominatedClusterNames`` (no
    ``clusterName`` yet)."""
    now = rfc3339(manager.clock.time())
    workload = kueue.workload(job, kueue.api(manager.objects), now)
    reserved = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                "message": f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}",
                "lastTransitionTime": now}  # fmt: skip
    workload["status"] = {"conditions": [reserved], "nominatedClusterNames": [WORKER],
                          "admission": {"clusterQueue": CLUSTER_QUEUE},
                          "admissionChecks": [_check("Pending", "", now)]}  # fmt: skip
    manager.objects.put(workload)


def mirror_of(job: Obj, workload: str) -> Obj:
    """What MultiKueue creates on the worker (the TrainJob adapter's ``SyncJob``): the job's
    name, labels and annotations, the origin label, ``workload`` as its prebuilt Workload (an
    annotation), the spec without Kueue's runtimePatches entry and with the worker's own
    controller as ``managedBy``."""
    meta = job["metadata"]
    labels = {**(meta.get("labels") or {}), ORIGIN_LABEL: "multikueue"}
    notes = {**(meta.get("annotations") or {}), PREBUILT: workload}
    spec = clone(job["spec"])
    if "runtimePatches" in spec:
        spec["runtimePatches"] = [
            p for p in spec["runtimePatches"] if p["manager"] != kueue.MANAGER
        ]
    mirror = {"apiVersion": job["apiVersion"], "kind": job["kind"], "spec": spec,
              "metadata": {"name": meta["name"], "namespace": meta["namespace"], "labels": labels,
                           "annotations": notes}}  # fmt: skip
    if job["kind"] == "TrainJob":
        mirror["spec"]["managedBy"] = DEFAULT_MANAGERS[0]
    else:
        _flags(mirror).pop("managedBy", None)  # the worker's own controller runs the mirror
    return mirror


def dispatch(manager: PortFake, worker: Objects, key: Key) -> None:
    """The worker admits the job: its mirror is created there, the manager's Workload says the
    worker (``clusterName``; the check Ready) and is admitted, the manager's job unsuspended;
    from then the mirror is followed (``follow``)."""
    job = clone(manager.objects.items.get(key))
    found = kueue.workload_of(manager.objects, job) if job else None
    if job is None or found is None or job["metadata"].get("deletionTimestamp"):
        return
    worker.create(mirror_of(job, found["metadata"]["name"]))
    now = rfc3339(manager.clock.time())
    admitted = {"type": "Admitted", "status": "True", "reason": "Admitted",
                "message": "The workload is admitted", "lastTransitionTime": now}  # fmt: skip
    status = {k: v for k, v in found["status"].items() if k != "nominatedClusterNames"}
    status |= {"clusterName": WORKER, "conditions": [*status["conditions"], admitted],
               "admissionChecks": [_check("Ready", f'The workload was admitted on "{WORKER}"',
                                          now)]}  # fmt: skip
    manager.objects.put({**found, "apiVersion": kueue.api(manager.objects), "status": status})
    _flags(job)["suspend"] = False
    manager.objects.put(job)
    follow(manager, worker, key)


def follow(manager: PortFake, worker: Objects, key: Key) -> None:
    """Copy the mirror's status to the manager's job, again at the next tick; or delete the
    mirror, once the manager's job is being deleted or gone."""
    job = manager.objects.items.get(key)
    if job is None or job["metadata"].get("deletionTimestamp"):
        try:
            worker.delete(*key)
        except StoreError as exc:
            if exc.code != 404:
                raise
        return
    manager.at(0.0, lambda: follow(manager, worker, key))
    status = (worker.get(*key) or {}).get("status")
    if status is not None and status != job.get("status"):
        manager.objects.put({**job, "status": status})


class TwoClusters:
    """A manager and one worker (``WORKER``), each a ``LocalCluster`` (its clock advanced by
    ``settle``), MultiKueue between them, and one kubeconfig with a context per cluster
    (``manager``, and ``worker_context`` for the worker: by default the worker's cluster name;
    None: the kubeconfig has no way to the worker), and a cluster mapping file
    (``clusters_file``, for ``$KFCOMPILE_CLUSTERS``) that maps the worker to its context for the
    manager context when ``mapped``. Each job on the worker lives ``scenario`` (a row of
    ``cluster.LIVES``); both serve the Kueue API versions ``kueue`` names."""

    WORKER: Final = WORKER

    def __init__(
        self,
        shared: Path,
        *,
        worker_context: str | None = WORKER,
        scenario: str = "succeeds",
        kueue: str = "v1beta2",
        mapped: bool = True,
    ) -> None:
        self.manager = LocalCluster(shared, step=0.1, scenario=None, auto=False, kueue=kueue)
        self.worker = LocalCluster(shared, step=0.1, scenario=None, auto=False, kueue=kueue)
        install_manager(self.manager.store)
        self.scenario = scenario
        self.worker.fake.on_create.append(lambda job: live(self.worker.fake, job, self.scenario))
        self.manager.fake.on_create.append(dispatches(self.manager.fake, self.worker.store))
        self.worker_context = worker_context
        self.kubeconfig = self.manager.kubeconfig.with_name("two-clusters")  # in its tmp dir
        self.clusters_file = self.kubeconfig.with_name("clusters.yaml")
        self.mapped = mapped and worker_context is not None

    def __enter__(self) -> TwoClusters:
        self.manager.__enter__()
        self.worker.__enter__()
        tmp, contexts = self.kubeconfig.parent, {"manager": self.manager}
        if self.worker_context is not None:
            contexts[self.worker_context] = self.worker
        paths = [c.kube.kubeconfig(tmp / f"ctx-{name}", namespace=NAMESPACE, context=name)
                 for name, c in contexts.items()]  # fmt: skip
        configs = [json.loads(path.read_text()) for path in paths]
        lists = {k: [e for c in configs for e in c[k]] for k in ("clusters", "users", "contexts")}
        self.kubeconfig.write_text(json.dumps(configs[0] | lists))
        workers = {WORKER: self.worker_context} if self.mapped else {}
        self.clusters_file.write_text(json.dumps({"managers": {"manager": workers}}))
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.__exit__()
        self.manager.__exit__()

    def settle(self, rounds: int = 200) -> None:
        """Let 2 s pass on both clusters, until nothing changes."""
        for _ in range(rounds):
            before = (self.manager.store.resource_version, self.worker.store.resource_version)
            self.manager.advance(2.0)
            self.worker.advance(2.0)
            if before == (self.manager.store.resource_version, self.worker.store.resource_version):
                return
        raise RuntimeError(f"still changing after {rounds} rounds")

    @contextmanager
    def ticking(self) -> Iterator[None]:
        """While inside: the clusters settle as each request arrives at either server, before
        it is answered (a blocking command moves them on by asking, and an open watch never
        waits on a change that only time would bring)."""

        def on_request(record: RequestRecord) -> None:
            self.settle()

        logs = (self.manager.kube.requests, self.worker.kube.requests)
        for log in logs:
            log.listeners.append(on_request)
        try:
            yield
        finally:
            for log in logs:
                log.listeners.remove(on_request)


__all__ = ["CHECK", "CLUSTER_QUEUE", "QUEUE", "TwoClusters", "dispatch", "follow",
           "install_manager", "webhook"]  # fmt: skip

"""Kueue's MultiKueue, for tests: a manager cluster and worker clusters, each its own fake API
server, and :class:`MultiKueue`, which does to them what MultiKueue does (KUBEFLOW.md, Kueue;
Kueue's ``pkg/controller/admissionchecks/multikueue``):

- on the manager, Kueue's webhook gives a job for a LocalQueue whose ClusterQueue has a
  MultiKueue AdmissionCheck ``managedBy: kueue.x-k8s.io/multikueue`` (TrainJob
  ``spec.managedBy``, PyTorchJob ``spec.runPolicy.managedBy``) and suspends it; no Trainer
  runs it there (the manager has no fake controller);
- each :meth:`MultiKueue.tick` makes the job's Workload (``kueue.x-k8s.io/v1beta1``, labelled
  ``kueue.x-k8s.io/job-uid`` and owned by the job, as Kueue's job reconciler makes it), then
  dispatches it: the mirror (same namespace and name, no ``managedBy``, labelled
  ``kueue.x-k8s.io/multikueue-origin``) is created on the worker, the Workload's
  ``status.clusterName`` and ``status.admissionChecks[]`` say so (Kueue v0.13+ shapes) and the
  manager's job is unsuspended; later ticks copy the mirror's status to the manager's job, and
  delete the mirror once the manager's job is being deleted or gone.

Nothing runs on its own: tests call :meth:`TwoClusters.settle` between commands, and wrap a
command that blocks (``submit --follow``, ``cancel --wait``) in :meth:`TwoClusters.ticking`,
which settles them as each request arrives at either server: deterministic, with no thread of
its own.
"""

from __future__ import annotations

import json
import math
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from kfcompile.spec.additions import QUEUE_LABEL

from . import jobs
from .audit import AUDIT
from .clock import FakeClock
from .cluster import NAMESPACE, QUEUE, install, live
from .requestlog import RequestRecord
from .resources import ResourceKind, StoreError
from .scripted import StoreJobs
from .server import FakeKube
from .store import Store

Obj = dict[str, Any]

KUEUE: Final = "kueue.x-k8s.io/v1beta1"
MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"
# What an API server defaults managedBy to (the CRDs) before Kueue's webhook sees the job.
DEFAULT_MANAGERS: Final = (
    "trainer.kubeflow.org/trainjob-controller",
    "kubeflow.org/training-operator",
)
CLUSTER_QUEUE: Final = "cluster-queue"
CHECK: Final = "multikueue"
ADMISSION_CHECK: Final = ResourceKind(
    "kueue.x-k8s.io", "v1beta1", "AdmissionCheck", "admissionchecks", False, "admissioncheck",
    (), ("status",),
)  # fmt: skip


def _flags(job: Obj) -> Obj:
    spec = job.setdefault("spec", {})
    return spec if job.get("kind") == "TrainJob" else spec.setdefault("runPolicy", {})


def install_manager(store: Store) -> None:
    """What a MultiKueue manager has: the ClusterQueue of the LocalQueue ``QUEUE`` names the
    MultiKueue AdmissionCheck (``spec.controllerName``)."""
    store.register_kind(ADMISSION_CHECK)
    store.create(
        {
            "apiVersion": KUEUE,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": MULTIKUEUE},
        }
    )
    store.create(
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {"admissionChecks": [CHECK]},
        }
    )


class MultiKueue:
    """MultiKueue between ``manager`` and ``workers`` (by cluster name); every job goes to the
    first worker unless :attr:`route` names another for it (by job name)."""

    def __init__(self, manager: Store, workers: Mapping[str, Store]) -> None:
        self.manager = manager
        self.workers = dict(workers)
        self.route: dict[str, str] = {}
        self._lock = threading.Lock()
        manager.admission.append(self._webhook)

    def _multikueue_queue(self, namespace: str, queue: str) -> bool:
        local = self.manager.get(KUEUE, "LocalQueue", namespace, queue) or {}
        cq_name = (local.get("spec") or {}).get("clusterQueue", "")
        cq = self.manager.get(KUEUE, "ClusterQueue", None, cq_name) or {}
        for name in (cq.get("spec") or {}).get("admissionChecks") or []:
            check = self.manager.get(KUEUE, "AdmissionCheck", None, name) or {}
            if (check.get("spec") or {}).get("controllerName") == MULTIKUEUE:
                return True
        return False

    def _webhook(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        if obj.get("kind") not in jobs.KINDS or not queue:
            return
        if self._multikueue_queue(meta.get("namespace") or "default", queue):
            flags = _flags(obj)
            # Kueue's CanDefaultManagedBy (jobframework): unset or the kind's own controller.
            if flags.get("managedBy") in (None, *DEFAULT_MANAGERS):
                flags["managedBy"] = MULTIKUEUE
            flags["suspend"] = True

    # --- ticking ----------------------------------------------------------------------------

    def tick(self) -> bool:
        """One pass over every job of the manager and every mirror: whether anything changed."""
        with self._lock:
            changed = False
            for kind, api_version in ((k.name, k.api_version) for k in jobs.KINDS.values()):
                for job in self.manager.list(api_version, kind, None):
                    if _flags(job).get("managedBy") == MULTIKUEUE:
                        changed |= self._sync(job)
                for worker in self.workers.values():
                    for mirror in worker.list(api_version, kind, None):
                        changed |= self._collect(worker, mirror)
            return changed

    def _sync(self, job: Obj) -> bool:
        meta = job["metadata"]
        if meta.get("deletionTimestamp"):
            return False  # its mirror goes in _collect
        workload = self.manager.get(KUEUE, "Workload", meta["namespace"], _workload_name(job))
        if workload is None:
            self.manager.create(_workload(job))
            return True
        cluster = (workload.get("status") or {}).get("clusterName")
        if not cluster:
            self._dispatch(job, workload)
            return True
        mirror = self.workers[cluster].get(
            job["apiVersion"], job["kind"], meta["namespace"], meta["name"]
        )
        status = (mirror or {}).get("status")
        if status is None or status == job.get("status"):
            return False
        self.manager.patch_status(
            job["apiVersion"], job["kind"], meta["namespace"], meta["name"], status
        )
        return True

    def _dispatch(self, job: Obj, workload: Obj) -> None:
        meta = job["metadata"]
        cluster = self.route.get(meta["name"], next(iter(self.workers)))
        mirror = {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "labels": {**(meta.get("labels") or {}), ORIGIN_LABEL: "multikueue"},
                "annotations": dict(meta.get("annotations") or {}),
            },
            "spec": json.loads(json.dumps(job.get("spec") or {})),
        }
        _flags(mirror).pop("managedBy", None)  # the worker's own controller runs the mirror
        try:
            self.workers[cluster].create(mirror)
        except StoreError as exc:
            if exc.code != 409:
                raise
        now = self.manager.now()
        message = f'The workload got reservation on "{cluster}"'
        self.manager.patch_status(
            KUEUE,
            "Workload",
            meta["namespace"],
            workload["metadata"]["name"],
            {
                "clusterName": cluster,
                "admission": {"clusterQueue": CLUSTER_QUEUE},
                "admissionChecks": [
                    {"name": CHECK, "state": "Ready", "message": message, "lastTransitionTime": now}
                ],
                "conditions": [
                    {
                        "type": "Admitted",
                        "status": "True",
                        "reason": "Admitted",
                        "message": "The workload is admitted",
                        "lastTransitionTime": now,
                    }
                ],
            },
        )
        live = self.manager.get(job["apiVersion"], job["kind"], meta["namespace"], meta["name"])
        if live is not None:
            _flags(live)["suspend"] = False
            self.manager.update(live)

    def _collect(self, worker: Store, mirror: Obj) -> bool:
        """Delete a mirror whose manager's job is being deleted or gone."""
        meta = mirror["metadata"]
        if ORIGIN_LABEL not in (meta.get("labels") or {}) or meta.get("deletionTimestamp"):
            return False
        ref = (mirror["apiVersion"], mirror["kind"], meta["namespace"], meta["name"])
        job = self.manager.get(*ref)
        if job is not None and not job["metadata"].get("deletionTimestamp"):
            return False
        try:
            worker.delete(*ref)
        except StoreError as exc:
            if exc.code != 404:
                raise
        return True


def _workload_name(job: Obj) -> str:
    meta = job["metadata"]
    return f"{job['kind'].lower()}-{meta['name']}-{meta['uid'][:5]}"


def _workload(job: Obj) -> Obj:
    meta = job["metadata"]
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": _workload_name(job),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": job["apiVersion"],
                    "kind": job["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": (meta.get("labels") or {}).get(QUEUE_LABEL, ""),
            "podSets": [{"name": "node", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }


class TwoClusters:
    """A manager and one worker (``WORKER``), each a fake API server with Kubeflow installed,
    MultiKueue between them, and one kubeconfig with a context per cluster (``manager``, and
    ``worker_context`` for the worker: by default the worker's cluster name; None: the
    kubeconfig has no way to the worker)."""

    WORKER: Final = "worker1"

    def __init__(
        self, shared: Path, *, worker_context: str | None = WORKER, scenario: str = "succeeds"
    ) -> None:
        self.manager = FakeKube()
        self.worker = FakeKube()
        for kube in (self.manager, self.worker):
            AUDIT.requests(kube.requests)  # what the commands ask, checked against the Role
            install(kube.store, shared, ("trainjobs-v2.3.0.yaml", "pytorchjobs-v1.9.4.yaml"), True)
        install_manager(self.manager.store)
        # The worker's controllers: each job there lives ``scenario``, on the fake clock.
        self.scenario = scenario
        self.clock = FakeClock(step=0.1, start=time.time(), limit=math.inf)
        self.fake = StoreJobs(self.worker.store, self.clock)
        self.fake.on_create.append(lambda job: live(self.fake, job, self.scenario))
        self.fake.on_patch.append(jobs.suspends(self.fake))
        self.multikueue = MultiKueue(self.manager.store, {self.WORKER: self.worker.store})
        self.worker_context = worker_context
        self._tmp = tempfile.TemporaryDirectory(prefix="kfcompile-multikueue-")
        self.kubeconfig = Path(self._tmp.name) / "kubeconfig"

    def __enter__(self) -> TwoClusters:
        self.manager.start()
        self.worker.start()
        tmp = Path(self._tmp.name)
        parts = [self.manager.kubeconfig(tmp / "m", namespace=NAMESPACE, context="manager")]
        if self.worker_context is not None:
            parts.append(
                self.worker.kubeconfig(tmp / "w", namespace=NAMESPACE, context=self.worker_context)
            )
        configs = [json.loads(p.read_text()) for p in parts]
        merged = {**configs[0]}
        for key in ("clusters", "users", "contexts"):
            merged[key] = [entry for c in configs for entry in c[key]]
        self.kubeconfig.write_text(json.dumps(merged))
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        self.manager.stop()
        self._tmp.cleanup()

    def tick(self) -> bool:
        """MultiKueue's tick, then what the worker's controllers do in the next 2 s."""
        before = self.worker.store.resource_version
        dispatched = self.multikueue.tick()
        self.clock.advance(2.0)
        return dispatched or self.worker.store.resource_version != before

    def settle(self, rounds: int = 200) -> None:
        """Tick MultiKueue and the worker's controllers until nothing changes."""
        for _ in range(rounds):
            if not self.tick():
                return
        raise RuntimeError(f"still changing after {rounds} rounds")

    @contextmanager
    def ticking(self) -> Iterator[None]:
        """While inside: the clusters settle as each request arrives at either server, before
        it is answered (a blocking command moves them on by asking, and an open watch never
        waits on a change that only time would bring)."""

        def on_request(record: RequestRecord) -> None:
            self.settle()

        logs = (self.manager.requests, self.worker.requests)
        for log in logs:
            log.listeners.append(on_request)
        try:
            yield
        finally:
            for log in logs:
                log.listeners.remove(on_request)


__all__ = ["CHECK", "QUEUE", "MultiKueue", "TwoClusters", "install_manager"]

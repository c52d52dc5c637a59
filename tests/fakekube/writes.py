"""How the simulated controllers write (a mixin of ``Controller``): Events, logs, pod statuses
with optimistic concurrency, job conditions and counters, and the TrainJob's JobSet."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from .pods import pod_status, trainjob_template
from .resources import StoreError
from .scenarios import (
    JOBSET,
    POD,
    UNSCHEDULABLE_MESSAGE,
    JobRecord,
    Obj,
    PodRecord,
    rfc3339,
    set_pytorchjob_condition,
    set_trainjob_condition,
)

if TYPE_CHECKING:
    from .events import Reporter
    from .store import Store


class Writer:
    store: Store
    clock: Callable[[], datetime]
    _rng: random.Random
    _scheduler: Reporter  # events/v1, as kube-scheduler writes them
    _kubelet: Reporter  # events/v1 of image pulls
    trainer_status: bool  # the TrainJobStatus feature gate

    def now(self) -> str:
        return rfc3339(self.clock())

    def event(
        self,
        involved: tuple[str, str, str, str],
        uid: str,
        type_: str,
        reason: str,
        message: str,
        component: str,
        *,
        host: str = "",
        field_path: str = "",
    ) -> Obj:
        """Record a core/v1 Event about ``involved`` (apiVersion, kind, namespace, name)."""
        api_version, kind, namespace, name = involved
        now = self.now()
        about: Obj = {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "uid": uid,
        }
        if field_path:
            about["fieldPath"] = field_path
        source: Obj = {"component": component, **({"host": host} if host else {})}
        return self.store.create(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{name}.{self._rng.getrandbits(64):016x}",
                    "namespace": namespace,
                },
                "involvedObject": about,
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": source,
                "reportingComponent": component,
                "reportingInstance": host or component,
            }
        )

    def _pt_event(self, job: JobRecord, type_: str, reason: str, message: str) -> None:
        self.event(job.ref, job.uid, type_, reason, message, "pytorchjob-controller")

    def _pod_events(self, job: JobRecord, pod: PodRecord, stage: str) -> None:
        """What the scheduler and kubelet say of a pod at ``stage`` (again on a retry: the
        events/v1 ones then count up their series)."""
        ref = (*POD, job.namespace, pod.name)
        regarding = {"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                     "namespace": job.namespace, "uid": pod.uid}  # fmt: skip
        at = self.clock()
        if stage == "creating":
            msg = f"Successfully assigned {job.namespace}/{pod.name} to {pod.node}"
            self._scheduler.report(regarding, "Normal", "Scheduled", "Binding", msg, at)
            return
        if stage == "unschedulable":
            msg = UNSCHEDULABLE_MESSAGE
            self._scheduler.report(regarding, "Warning", "FailedScheduling", "Scheduling", msg, at)
            return
        where = f"spec.containers{{{pod.container}}}"
        if stage == "image_pull":
            container = {**regarding, "fieldPath": where}
            for type_, reason, msg in (
                ("Normal", "Pulling", f'Pulling image "{pod.image}"'),
                (
                    "Warning",
                    "Failed",
                    f'Failed to pull image "{pod.image}": rpc error: code = NotFound desc = '
                    f'failed to pull and unpack image "{pod.image}": not found',
                ),
                ("Normal", "BackOff", f'Back-off pulling image "{pod.image}"'),
            ):
                self._kubelet.report(
                    container, type_, reason, "Pulling", msg, at, instance=pod.node
                )
            return
        if stage == "running":
            for type_, reason, msg in (
                ("Normal", "Pulled", f'Container image "{pod.image}" already present on machine'),
                ("Normal", "Created", f"Created container: {pod.container}"),
                ("Normal", "Started", f"Started container {pod.container}"),
            ):
                self.event(
                    ref, pod.uid, type_, reason, msg, "kubelet", host=pod.node, field_path=where
                )

    def _log(self, job: JobRecord, pod: PodRecord, line: str) -> None:
        at = self.clock().timestamp()
        self.store.append_log(job.namespace, pod.name, pod.container, line + "\n", at=at)

    def _write_pods(self, job: JobRecord, pods: list[PodRecord]) -> None:
        """Write each pod's status (and its node, once scheduled) over the version last seen,
        with optimistic concurrency as real controllers do: most writes need no read first, and
        that matters for 1,000-pod jobs."""
        for pod in pods:
            current = pod.obj
            while True:
                spec = current["spec"]
                if pod.stage not in ("created", "unschedulable"):
                    spec = {**spec, "nodeName": pod.node}
                qos = current["status"]["qosClass"]
                status = {**pod_status(pod), "qosClass": qos}
                try:
                    pod.obj = self.store.apply_update(
                        {**current, "spec": spec, "status": status}, check_rv=True
                    )
                    break
                except StoreError as exc:
                    if exc.code == 404:  # deleted by someone else: never recreate it
                        break
                    if exc.code != 409:
                        raise
                found = self.store.get(*POD, job.namespace, pod.name)
                if found is None:
                    break
                current = found

    def _delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        try:
            self.store.delete(api_version, kind, namespace, name)
        except StoreError as exc:
            if exc.code != 404:  # 404: someone (or the GC) was first
                raise

    def _delete_pods(self, job: JobRecord, pods: list[PodRecord]) -> None:
        for pod in pods:
            self._delete(*POD, job.namespace, pod.name)
        gone = {id(p) for p in pods}
        job.pods = [p for p in job.pods if id(p) not in gone]

    def _clean_pods(self, job: JobRecord) -> None:
        """PyTorchJob runPolicy.cleanPodPolicy (default None) once the job is finished."""
        cr = self._live(job) or {}
        policy = ((cr.get("spec") or {}).get("runPolicy") or {}).get("cleanPodPolicy", "None")
        self._delete_pods(
            job,
            [
                p
                for p in job.pods
                if policy == "All"
                or (policy == "Running" and p.stage not in ("succeeded", "failed"))
            ],
        )

    def _write_status(self, job: JobRecord) -> None:
        self.store.patch_status(*job.ref, copy.deepcopy(job.status))

    def _tj_condition(
        self, job: JobRecord, type_: str, ok: bool, reason: str, message: str
    ) -> None:
        generation = int(((self._live(job) or {}).get("metadata") or {}).get("generation") or 1)
        set_trainjob_condition(job.status, type_, ok, reason, message, self.now(), generation)

    def _pt_condition(
        self, job: JobRecord, type_: str, ok: bool, reason: str, message: str
    ) -> None:
        set_pytorchjob_condition(job.status, type_, ok, reason, message, self.now())

    def _pt_true(self, job: JobRecord, type_: str) -> bool:
        return any(
            c["type"] == type_ and c["status"] == "True" for c in job.status.get("conditions", [])
        )

    def _sync_status(self, job: JobRecord) -> None:
        """Counters from the pods (TrainJob: its one child Job; PyTorchJob: pods per replica
        type), PyTorchJob Running once all its pods run, then write the status."""
        stages = [p.stage for p in job.pods]
        all_running = bool(stages) and all(s == "running" for s in stages)
        if job.kind == "TrainJob":
            done = {c["type"] for c in job.status.get("conditions", []) if c["status"] == "True"}
            counts = {
                "ready": int(all_running),
                "succeeded": int("Complete" in done),
                "failed": int("Failed" in done),
                "active": int(bool(stages) and not done & {"Complete", "Failed"}),
                "suspended": int(job.suspended),
            }
            self._update_jobset(job, counts=counts)
            job.status["jobsStatus"] = [{"name": "node", **counts}]
        else:
            replicas: Obj = {}
            for rtype in job.replicas:
                entry: Obj = {
                    "selector": f"training.kubeflow.org/job-name={job.name},"
                    "training.kubeflow.org/operator-name=pytorchjob-controller,"
                    f"training.kubeflow.org/replica-type={rtype.lower()}",
                }
                for key, counted in (
                    ("active", ("running", "crashed")),  # pods in phase Running
                    ("succeeded", ("succeeded",)),
                    ("failed", ("failed",)),
                ):
                    n = sum(p.replica == rtype and p.stage in counted for p in job.pods)
                    if n:  # omitempty
                        entry[key] = n
                replicas[rtype] = entry
            job.status["replicaStatuses"] = replicas
            quiet = not (self._pt_true(job, "Running") or self._pt_true(job, "Restarting"))
            if all_running and not job.finished and quiet:
                msg = f"PyTorchJob {job.name} is running."
                self._pt_condition(job, "Running", True, "PyTorchJobRunning", msg)
            job.status["lastReconcileTime"] = self.now()
        self._write_status(job)

    # --- the TrainJob's JobSet ------------------------------------------------------------------

    def _create_jobset(self, job: JobRecord, cr: Obj) -> None:
        spec = cr.get("spec") or {}
        nodes = int((spec.get("trainer") or {}).get("numNodes") or 1)
        job_template = {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                "parallelism": nodes,
                "completions": nodes,
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": trainjob_template(cr),
            },
        }
        self.store.create(
            {
                "apiVersion": JOBSET[0],
                "kind": JOBSET[1],
                "metadata": {
                    "name": job.name,
                    "namespace": job.namespace,
                    "labels": dict(spec.get("labels") or {}),
                    "annotations": dict(spec.get("annotations") or {}),
                    "ownerReferences": [job.owner],
                },
                "spec": {
                    "suspend": bool(spec.get("suspend")),
                    "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All"},
                    "replicatedJobs": [{"name": "node", "replicas": 1, "template": job_template}],
                },
            }
        )

    def _jobset_owner(self, job: JobRecord) -> Obj:
        jobset = self.store.get(*JOBSET, job.namespace, job.name) or {"metadata": {}}
        uid = jobset["metadata"].get("uid", "")
        return {**job.owner, "apiVersion": JOBSET[0], "kind": JOBSET[1], "uid": uid}

    def _update_jobset(
        self, job: JobRecord, *, suspend: bool | None = None, counts: Obj | None = None
    ) -> None:
        def change(jobset: Obj) -> None:
            if suspend is not None:
                jobset["spec"]["suspend"] = suspend
            if counts is not None:
                status = jobset.setdefault("status", {})
                status["replicatedJobsStatus"] = [{"name": "node", **counts}]

        self._modify((*JOBSET, job.namespace, job.name), change)

    def _jobset_finished(self, job: JobRecord, type_: str, reason: str, message: str) -> None:
        def change(jobset: Obj) -> None:
            status = jobset.setdefault("status", {})
            set_trainjob_condition(status, type_, True, reason, message, self.now(), 1)
            status["terminalState"] = type_

        jobset = self._modify((*JOBSET, job.namespace, job.name), change)
        if jobset is not None:
            kind = "Normal" if type_ == "Completed" else "Warning"
            ref = (*JOBSET, job.namespace, job.name)
            self.event(ref, jobset["metadata"]["uid"], kind, reason, message, "jobset")

    def _modify(self, ref: tuple[str, str, str, str], change: Callable[[Obj], None]) -> Obj | None:
        """Read, change, write with optimistic concurrency (retrying on a conflict), as real
        controllers do; None when the object is gone."""
        while True:
            obj = self.store.get(*ref)
            if obj is None:
                return None
            change(obj)
            try:
                return self.store.apply_update(obj, check_rv=True)
            except StoreError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 409:
                    raise

    def _live(self, job: JobRecord) -> Obj | None:
        """The job as stored now; None when it (or its kind) is gone, is being deleted (e.g.
        waiting for a foreground deletion to remove its pods), or was recreated."""
        try:
            cr = self.store.get(*job.ref)
        except StoreError as exc:
            if exc.code == 404:
                return None
            raise
        if cr is None or cr["metadata"].get("deletionTimestamp"):
            return None
        return cr if cr["metadata"]["uid"] == job.uid else None

"""The steps of the scenarios (named by ``SCENARIOS``): what the controllers, the scheduler and
the kubelet do to a job and its pods at each tick (a mixin of ``Controller``)."""

from __future__ import annotations

from .pods import default_pod_spec, pytorchjob_pods, qos_class, terminated, trainjob_pods
from .scenarios import JOBSET, NAME_ALPHABET, NODE_COUNT, JobRecord, Obj, PodRecord
from .writes import Writer

PERCENT_PER_STEP = 30  # the scenarios' training steps, as trainerStatus reports them


class Steps(Writer):
    def create_pods(self, job: JobRecord) -> None:
        cr = self._live(job)
        if cr is None:
            return
        trainjob = job.kind == "TrainJob"
        plans = trainjob_pods(cr) if trainjob else pytorchjob_pods(cr)
        owner = self._jobset_owner(job) if trainjob else job.owner
        main = "node" if trainjob else "pytorch"
        for plan in plans:
            suffix = "".join(self._rng.choices(NAME_ALPHABET, k=5))
            name = f"{plan.base}-{suffix}" if trainjob else plan.base
            spec = default_pod_spec(plan.spec)
            meta: Obj = {
                "name": name,
                "namespace": job.namespace,
                "labels": plan.labels,
                "annotations": plan.annotations,
                "ownerReferences": [owner],
            }
            if trainjob:  # the Job controller names pods by generateName
                meta["generateName"] = f"{plan.base}-"
            status = {"phase": "Pending", "qosClass": qos_class(spec["containers"])}
            pod_obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
            created = self.store.create({**pod_obj, "status": status})
            image = next((c.get("image", "") for c in spec["containers"] if c["name"] == main), "")
            node = f"gpu-node-{plan.rank % NODE_COUNT}"
            ip = f"10.244.{plan.rank // 250}.{plan.rank % 250 + 2}"
            uid = created["metadata"]["uid"]
            pod = PodRecord(name, uid, plan.rank, plan.replica, main, image, node, ip, obj=created)
            job.pods.append(pod)
            msg = f"Created pod: {name}"
            if trainjob:
                child = ("batch/v1", "Job", job.namespace, f"{job.name}-node-0")
                child_uid = plan.labels["batch.kubernetes.io/controller-uid"]
                self.event(child, child_uid, "Normal", "SuccessfulCreate", msg, "job-controller")
            else:
                self._pt_event(job, "Normal", "SuccessfulCreatePod", msg)
        if self._live(job) is None:  # deleted meanwhile: GC may have run before these existed
            self._delete_pods(job, job.pods)
            return
        if not trainjob:
            job.status.setdefault("startTime", self.now())
        self._sync_status(job)

    def move_pods(self, job: JobRecord, stage: str) -> None:
        now = self.now()
        for pod in job.pods:
            pod.stage = stage
            if stage in ("creating", "unschedulable"):
                pod.scheduled_at = now
            elif stage == "running":
                pod.started_at = now
        self._write_pods(job, job.pods)
        for pod in job.pods:
            self._pod_events(job, pod, stage)
            if stage == "running":
                self._log(job, pod, f"rank {pod.rank}: world size {len(job.pods)}, starting")
        self._sync_status(job)

    def retry(self, job: JobRecord) -> None:
        """The scheduler or the kubelet tries a stuck pod again, and says so again."""
        for pod in job.pods:
            self._pod_events(job, pod, pod.stage)

    def log_step(self, job: JobRecord) -> None:
        job.log_step += 1
        loss = 0.9**job.log_step
        for pod in job.pods:
            if pod.stage == "running":
                self._log(job, pod, f"rank {pod.rank} step {job.log_step} loss {loss:.4g}")
        if self.trainer_status and job.kind == "TrainJob":
            job.status["trainerStatus"] = {
                "progressPercentage": min(job.log_step * PERCENT_PER_STEP, 100),
                "estimatedRemainingSeconds": max(100 // PERCENT_PER_STEP - job.log_step, 0) * 60,
                "metrics": [{"name": "loss", "value": f"{loss:.4g}"}],
                "lastUpdatedTime": self.now(),
            }
            self._write_status(job)

    def succeed(self, job: JobRecord) -> None:
        now = self.now()
        for pod in job.pods:
            self._log(job, pod, f"rank {pod.rank}: training finished")
            pod.stage, pod.finished_at, pod.exit_code = "succeeded", now, 0
        self._write_pods(job, job.pods)
        job.finished = True
        if job.kind == "TrainJob":
            msg = "jobset completed successfully"
            self._tj_condition(job, "Complete", True, "AllJobsCompleted", msg)
            self._jobset_finished(job, "Completed", "AllJobsCompleted", msg)
        else:
            msg = f"PyTorchJob {job.name} is successfully completed."
            self._pt_condition(job, "Succeeded", True, "PyTorchJobSucceeded", msg)
            msg = f"PyTorchJob {job.namespace}/{job.name} successfully completed."
            self._pt_event(job, "Normal", "PyTorchJobSucceeded", msg)
            job.status["completionTime"] = now
            self._clean_pods(job)
        self._sync_status(job)

    def fail(self, job: JobRecord) -> None:
        victim = job.pods[min(1, len(job.pods) - 1)]
        for line in (
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 42, in <module>',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ):
            self._log(job, victim, line)
        victim.stage, victim.finished_at, victim.exit_code = "failed", self.now(), 1
        self._write_pods(job, [victim])
        job.finished = True
        if job.kind == "TrainJob":
            msg = (
                "jobset failed due to one or more job failures "
                f"(first failed job: {job.name}-node-0)"
            )
            self._tj_condition(job, "Failed", True, "FailedJobs", msg)
            self._jobset_finished(job, "Failed", "FailedJobs", msg)
            # The failed Job's controller deletes its pods that still run.
            self._delete_pods(job, [p for p in job.pods if p is not victim])
        else:
            msg = (
                f"PyTorchJob {job.namespace}/{job.name} has failed because 1 "
                f"{victim.replica} replica(s) failed."
            )
            self._pt_condition(job, "Failed", True, "PyTorchJobFailed", msg)
            self._pt_event(job, "Normal", "PyTorchJobFailed", msg)
            job.status["completionTime"] = self.now()
            self._clean_pods(job)
        self._sync_status(job)

    def crash(self, job: JobRecord) -> None:
        victim = job.pods[min(1, len(job.pods) - 1)]
        self._log(job, victim, f"RuntimeError: NCCL communicator was aborted on rank {victim.rank}")
        victim.stage, victim.finished_at, victim.exit_code = "crashed", self.now(), 1
        self._write_pods(job, [victim])
        if job.kind == "PyTorchJob":
            msg = (
                f"PyTorchJob {job.namespace}/{job.name} is restarting because 1 "
                f"{victim.replica} replica(s) failed."
            )
            self._pt_condition(job, "Restarting", True, "PyTorchJobRestarting", msg)
            self._pt_event(job, "Warning", "PyTorchJobRestarting", msg)
        self._sync_status(job)

    def restart(self, job: JobRecord) -> None:
        """The kubelet restarts the crashed container in place (restartPolicy OnFailure)."""
        now = self.now()
        restarted = [p for p in job.pods if p.stage == "crashed"]
        for pod in restarted:
            pod.last_state = {"terminated": terminated(pod, pod.exit_code, pod.finished_at)}
            pod.restarts += 1
            pod.stage, pod.started_at, pod.finished_at = "running", now, ""
        self._write_pods(job, restarted)
        for pod in restarted:
            self._pod_events(job, pod, "running")
            self._log(job, pod, f"rank {pod.rank}: restarted, resuming from the last checkpoint")
        if job.kind == "PyTorchJob":
            msg = f"PyTorchJob {job.name} is running."
            self._pt_condition(job, "Running", True, "PyTorchJobRunning", msg)
        self._sync_status(job)

    def deadline(self, job: JobRecord) -> None:
        job.finished = True
        if job.kind == "TrainJob":
            msg = "TrainJob exceeded its active deadline"
            self._tj_condition(job, "Failed", True, "DeadlineExceeded", msg)
            # The Trainer deletes the JobSet; the store's garbage collection takes the pods.
            self._delete(*JOBSET, job.namespace, job.name)
            job.pods = []
        else:
            msg = f"Job {job.name} has failed because it was active longer than specified deadline"
            self._pt_condition(job, "Failed", True, "PyTorchJobFailed", msg)
            self._pt_event(job, "Normal", "PyTorchJobFailed", msg)
            job.status["completionTime"] = self.now()
            self._clean_pods(job)
        self._sync_status(job)

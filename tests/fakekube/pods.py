"""The pods of a simulated job: their names, labels and specs as each controller makes them
(JobSet for a TrainJob, the Training Operator for a PyTorchJob), the fields the API server
defaults, and the status the scheduler and kubelet report at each stage."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any, Final

from .scenarios import UNSCHEDULABLE_MESSAGE, PodRecord, digest

Obj = dict[str, Any]

# --- Pod statuses, by stage ---------------------------------------------------------------------


def _condition(type_: str, ok: bool, at: str, reason: str = "", message: str = "") -> Obj:
    cond: Obj = {
        "type": type_,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": at,
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _image_id(image: str) -> str:
    repo = image.split("@")[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    return f"{repo}@sha256:{digest(image)}"


def _container_status(pod: PodRecord, state: Obj, *, ready: bool, pulled: bool = True) -> Obj:
    status: Obj = {
        "name": pod.container,
        "image": pod.image,
        "imageID": _image_id(pod.image) if pulled else "",
        "ready": ready,
        "restartCount": pod.restarts,
        "started": "running" in state,
        "state": state,
        "lastState": pod.last_state,
    }
    if "waiting" not in state:
        status["containerID"] = f"containerd://{digest(f'{pod.uid}/{pod.restarts}')}"
    return status


def terminated(pod: PodRecord, exit_code: int, at: str) -> Obj:
    return {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "startedAt": pod.started_at,
        "finishedAt": at,
        "containerID": f"containerd://{digest(f'{pod.uid}/{pod.restarts}')}",
    }


NOT_STARTED = ("creating", "image_pull", "invalid_image")  # scheduled stages with no container


def pod_status(pod: PodRecord) -> Obj:
    """The status the scheduler and kubelet would report for a pod at its stage."""
    if pod.stage == "created":
        return {"phase": "Pending"}
    if pod.stage == "unschedulable":
        cond = _condition(
            "PodScheduled", False, pod.scheduled_at, "Unschedulable", UNSCHEDULABLE_MESSAGE
        )
        return {"phase": "Pending", "conditions": [cond]}
    sched, start, end = pod.scheduled_at, pod.started_at, pod.finished_at
    unready = f"containers with unready status: [{pod.container}]"
    phase, ready, since, why, message = "Running", False, sched, "ContainersNotReady", unready
    if pod.stage in NOT_STARTED:
        phase = "Pending"
        if pod.stage == "creating":
            waiting: Obj = {"reason": "ContainerCreating"}
        elif pod.stage == "invalid_image":  # the kubelet's words for a reference it cannot parse
            waiting = {
                "reason": "InvalidImageName",
                "message": f'Failed to apply default image tag "{pod.image}": couldn\'t parse '
                f'image name "{pod.image}": invalid reference format',
            }
        else:
            waiting = {
                "reason": "ImagePullBackOff",
                "message": f'Back-off pulling image "{pod.image}"',
            }
        container = _container_status(pod, {"waiting": waiting}, ready=False, pulled=False)
    elif pod.stage == "running":
        ready, since, why, message = True, start, "", ""
        container = _container_status(pod, {"running": {"startedAt": start}}, ready=True)
    elif pod.stage == "crashed":  # the container exited; the kubelet is about to restart it
        since = end
        state = {"terminated": terminated(pod, pod.exit_code, end)}
        container = _container_status(pod, state, ready=False)
    else:  # succeeded / failed
        phase = "Succeeded" if pod.stage == "succeeded" else "Failed"
        since, why, message = end, "PodCompleted" if phase == "Succeeded" else "PodFailed", ""
        state = {"terminated": terminated(pod, pod.exit_code, end)}
        container = _container_status(pod, state, ready=False)
    status: Obj = {
        "phase": phase,
        "conditions": [
            _condition("Initialized", True, sched),
            _condition("Ready", ready, since, why, message),
            _condition("ContainersReady", ready, since, why, message),
            _condition("PodScheduled", True, sched),
        ],
        "hostIP": _node_ip(pod.node),
        "hostIPs": [{"ip": _node_ip(pod.node)}],
        "startTime": sched,
        "containerStatuses": [container],
    }
    if pod.stage not in NOT_STARTED:
        status["podIP"] = pod.ip
        status["podIPs"] = [{"ip": pod.ip}]
    return status


def _node_ip(node: str) -> str:
    return f"10.0.0.{int(node.rsplit('-', 1)[1]) + 10}"


def qos_class(containers: list[Obj]) -> str:
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits") and all(r["limits"].get(k) == v for k, v in r.get("requests", {}).items())
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(container: Obj) -> Obj:
    """The fields the API server defaults on every container."""
    image = str(container.get("image", ""))
    pull = "Always" if image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1] else None
    return {
        "imagePullPolicy": pull or "IfNotPresent",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        **container,
    }


def default_pod_spec(spec: Obj) -> Obj:
    return {
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccount": spec.get("serviceAccountName", "default"),
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ],
        **spec,
        "containers": [_default_container(c) for c in spec.get("containers", [])],
    }


# --- Pod templates, per kind --------------------------------------------------------------------

# Pod spec fields that TrainJob overrides (v2.0/v2.1) and runtime patches (v2.2+) may set.
_POD_PATCH_FIELDS: Final = (
    "serviceAccountName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "terminationGracePeriodSeconds",
)


def _trainjob_pod_patches(spec: Obj) -> Iterator[tuple[Obj, Obj]]:
    """(pod metadata, pod spec) patches aimed at the `node` job, in every release's shape."""
    for override in spec.get("podSpecOverrides") or []:  # v2.0
        if any(t.get("name") == "node" for t in override.get("targetJobs") or []):
            yield {}, override
    for override in spec.get("podTemplateOverrides") or []:  # v2.1
        if any(t.get("name") == "node" for t in override.get("targetJobs") or []):
            yield override.get("metadata") or {}, override.get("spec") or {}
    for patch in spec.get("runtimePatches") or []:  # v2.2+
        runtime = patch.get("trainingRuntimeSpec") or {}
        jobs = ((runtime.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        for rjob in jobs:
            if rjob.get("name") == "node":
                pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
                yield pod.get("metadata") or {}, pod.get("spec") or {}


def trainjob_template(cr: Obj) -> Obj:
    """The pod template the torch-distributed runtime plus the TrainJob's trainer give `node`."""
    name = cr["metadata"]["name"]
    trainer = cr.get("spec", {}).get("trainer") or {}
    nodes = int(trainer.get("numNodes") or 1)
    env = [
        *(trainer.get("env") or []),
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": str(trainer.get("numProcPerNode", "auto"))},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {
                "fieldRef": {
                    "apiVersion": "v1",
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
                }
            },
        },
        {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": "29400"},
    ]
    container: Obj = {
        "name": "node",
        "image": trainer.get("image") or "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
        "env": env,
        "ports": [{"containerPort": 29400, "protocol": "TCP"}],
        "resources": trainer.get("resourcesPerNode") or {},
    }
    for key in ("command", "args"):
        if trainer.get(key):
            container[key] = list(trainer[key])
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    pod_spec: Obj = {"containers": [container], "restartPolicy": "OnFailure"}
    for meta, patch in _trainjob_pod_patches(cr.get("spec") or {}):
        labels.update(meta.get("labels") or {})
        annotations.update(meta.get("annotations") or {})
        pod_spec.update({k: patch[k] for k in _POD_PATCH_FIELDS if k in patch})
        for c_patch in (patch.get("containers") or []) + (patch.get("initContainers") or []):
            for target in pod_spec["containers"]:
                if target["name"] == c_patch.get("name"):
                    target["env"] = [*target.get("env", []), *(c_patch.get("env") or [])]
                    mounts = c_patch.get("volumeMounts") or []
                    target["volumeMounts"] = [*target.get("volumeMounts", []), *mounts]
                    if "securityContext" in c_patch:
                        target["securityContext"] = c_patch["securityContext"]
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}


@dataclasses.dataclass(frozen=True)
class PodPlan:
    """One pod to create: its name (without any random suffix), rank and metadata."""

    base: str
    rank: int
    replica: str
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: Obj


def trainjob_pods(cr: Obj) -> Iterator[PodPlan]:
    name = cr["metadata"]["name"]
    nodes = int((cr.get("spec", {}).get("trainer") or {}).get("numNodes") or 1)
    template = trainjob_template(cr)
    job_uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{cr['metadata'].get('uid')}/{name}-node-0"))
    for rank in range(nodes):
        labels = {
            **template["metadata"]["labels"],
            "batch.kubernetes.io/controller-uid": job_uid,
            "batch.kubernetes.io/job-completion-index": str(rank),
            "batch.kubernetes.io/job-name": f"{name}-node-0",
            "controller-uid": job_uid,
            "job-name": f"{name}-node-0",
            "jobset.sigs.k8s.io/global-replicas": "1",
            "jobset.sigs.k8s.io/job-global-index": "0",
            "jobset.sigs.k8s.io/job-index": "0",
            "jobset.sigs.k8s.io/job-key": digest(f"{cr['metadata'].get('namespace')}/{name}")[:40],
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
            "jobset.sigs.k8s.io/restart-attempt": "0",
        }
        annotations = {
            **template["metadata"]["annotations"],
            "batch.kubernetes.io/job-completion-index": str(rank),
            "jobset.sigs.k8s.io/jobset-name": name,
            "jobset.sigs.k8s.io/replicatedjob-name": "node",
        }
        spec = {**template["spec"], "hostname": f"{name}-node-0-{rank}", "subdomain": name}
        yield PodPlan(f"{name}-node-0-{rank}", rank, "node", labels, annotations, spec)


def pytorchjob_pods(cr: Obj) -> Iterator[PodPlan]:
    name = cr["metadata"]["name"]
    spec = cr.get("spec") or {}
    replicas = spec.get("pytorchReplicaSpecs") or {}
    has_master = "Master" in replicas
    world = sum(int(r.get("replicas", 1)) for r in replicas.values())
    rank = 0
    for rtype in ("Master", "Worker"):
        if rtype not in replicas:
            continue
        rspec = replicas[rtype]
        template = rspec.get("template") or {}
        restart = rspec.get("restartPolicy", "OnFailure")
        for index in range(int(rspec.get("replicas", 1))):
            labels = {
                **((template.get("metadata") or {}).get("labels") or {}),
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-index": str(index),
                "training.kubeflow.org/replica-type": rtype.lower(),
            }
            if rtype == "Master":
                labels["training.kubeflow.org/job-role"] = "master"
            pod_spec = copy.deepcopy(template.get("spec") or {})
            pod_spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
            if has_master:  # only with a Master does the operator inject the rendezvous env
                injected = [
                    {"name": "MASTER_PORT", "value": "23456"},
                    {"name": "MASTER_ADDR", "value": f"{name}-master-0"},
                    {"name": "WORLD_SIZE", "value": str(world)},
                    {"name": "RANK", "value": str(rank)},
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                ]
                for container in pod_spec.get("containers", []):
                    if container.get("name") == "pytorch":
                        container["env"] = [*(container.get("env") or []), *injected]
            annotations = dict((template.get("metadata") or {}).get("annotations") or {})
            base = f"{name}-{rtype.lower()}-{index}"
            yield PodPlan(base, rank, rtype, labels, annotations, pod_spec)
            rank += 1

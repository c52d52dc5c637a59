"""PyTorchJob ``kubeflow.org/v1`` for Training Operator v1.7-v1.9.

One node is a Master only (never ``Worker: 0``); more nodes are a Master plus Workers; an elastic
job is Workers only. Every replica runs a container named ``pytorch``. The pod and container
slots land in every replica (``*``), and any other pod or container field passes through.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kfcompile.kinds import PYTORCHJOB
from kfcompile.output import limits as output_limits
from kfcompile.spec import torchrun
from kfcompile.spec.errors import Problem
from kfcompile.spec.model import JobSpec
from kfcompile.targets import base, fields, kueue
from kfcompile.targets.base import Rendered, Slot, Table, Target
from kfcompile.targets.codecs import Placement

NAME = "pytorchjob/v1"
API_VERSION = PYTORCHJOB.api_version
KIND = PYTORCHJOB.name
CONTAINER = PYTORCHJOB.container
# The operator reads the master port from this named port (it defaults it to 23456 when absent).
PORT = {"name": "pytorchjob-port", "containerPort": 23456}
MANAGERS = PYTORCHJOB.managers
# What the operator appends to every container's env, so that a value the spec gives is
# overwritten (training-operator pkg/controller.v1/pytorch/envvar.go setPodEnv, master.go
# MasterEnvVarGenerator, elastic.go ElasticEnvVarGenerator). PYTHONUNBUFFERED, which it sets
# too, is left to the user: every value means the same to Python.
OPERATOR_ENV = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}
    | {o.env for o in (torchrun.NPROC_PER_NODE, torchrun.NODE_RANK, torchrun.NNODES)}
)
OPERATOR_ELASTIC_ENV = frozenset(
    o.env for o in (torchrun.RDZV_ENDPOINT, torchrun.RDZV_BACKEND, torchrun.NNODES)
)
REPLICAS = "spec.pytorchReplicaSpecs.*"
POD = f"{REPLICAS}.template.spec"
MAIN = f"{POD}.containers[name={CONTAINER}]"
RUN = "spec.runPolicy"

TABLE: Table = {
    **base.JOB_METADATA,
    "run.runtimeRef": None,
    "run.initializer": None,
    "runtime.labels": None,
    "runtime.annotations": None,
    "pod.labels": Slot.at(f"{REPLICAS}.template.metadata.labels"),
    "pod.annotations": Slot.at(f"{REPLICAS}.template.metadata.annotations"),
    "container.*": Slot.at(MAIN),  # image, command, env, resources, volumeMounts, ...
    "scale.numNodes": Slot.at(),  # the replica layout, built in render()
    "scale.nprocPerNode": Slot.at("spec.nprocPerNode", convert=str),
    "pod.*": Slot.at(POD),  # every PodSpec field
    "run.suspend": Slot.at(f"{RUN}.suspend"),
    "run.managedBy": Slot.at(f"{RUN}.managedBy"),  # Training Operator v1.9+
    "run.activeDeadlineSeconds": Slot.at(f"{RUN}.activeDeadlineSeconds"),
    "run.backoffLimit": Slot.at(f"{RUN}.backoffLimit"),
    "run.ttlSecondsAfterFinished": Slot.at(f"{RUN}.ttlSecondsAfterFinished"),
    "run.cleanPodPolicy": Slot.at(f"{RUN}.cleanPodPolicy"),
    "run.schedulingPolicy": Slot.at(f"{RUN}.schedulingPolicy"),
    "run.restartPolicy": Slot.at(f"{REPLICAS}.restartPolicy"),
    "run.elastic": Slot.at("spec.elasticPolicy"),
}


def command(spec: JobSpec) -> list[str] | None:
    """torchrun flags from values Kubernetes really provides: literals, or ``$(VAR)`` of env the
    operator injects (RANK, MASTER_ADDR, MASTER_PORT exist only with a Master)."""
    if spec.launcher is None:
        return None
    if spec.launcher.kind == "python":
        return ["python", *base.program(spec)]
    flags = [torchrun.NPROC_PER_NODE(spec.nprocs)]
    if spec.elastic is not None:
        e = spec.elastic
        flags = [
            torchrun.NNODES(f"{e.min_nodes}:{e.max_nodes}"),
            *flags,
            torchrun.RDZV_BACKEND(e.rdzv_backend),
            torchrun.RDZV_ENDPOINT(f"{spec.name}-worker-0:{e.rdzv_port}"),
            torchrun.RDZV_ID(spec.name),
        ]
        if e.max_restarts is not None:
            flags.append(torchrun.MAX_RESTARTS(e.max_restarts))
    else:
        flags = [
            torchrun.NNODES(spec.num_nodes),
            *flags,
            torchrun.NODE_RANK("$(RANK)"),
            torchrun.MASTER_ADDR("$(MASTER_ADDR)"),
            torchrun.MASTER_PORT("$(MASTER_PORT)"),
        ]
    return ["torchrun", *flags, *base.program(spec)]


def pod_suffixes(spec: JobSpec) -> list[str]:
    """Pods (and their Services) are `<name>-master-0` and `<name>-worker-<i>`; an elastic job
    may grow to `elastic.max_nodes` workers."""
    workers = spec.elastic.max_nodes if spec.elastic else spec.num_nodes - 1
    return (["-master-0"] if spec.elastic is None else []) + (
        [f"-worker-{workers - 1}"] if workers else []
    )


def operator_env(spec: JobSpec) -> frozenset[str]:
    """The variables the operator sets for this spec: with a Master its rendezvous, world size
    and ranks; for an elastic job (Workers only) the elastic agent's settings."""
    if spec.elastic is None:
        return OPERATOR_ENV
    restarts = {torchrun.MAX_RESTARTS.env} if spec.elastic.max_restarts is not None else set()
    return OPERATOR_ELASTIC_ENV | restarts


def _run_differently(spec: JobSpec) -> Iterator[Problem]:
    """What the operator accepts and then runs otherwise than the spec says."""
    yield from base.launcher_env(
        spec,
        operator_env(spec),
        "the Training Operator sets it in every PyTorchJob pod",
        CONTAINER,
    )
    if "restartPolicy" in spec.pod_spec_overrides:
        # SetRestartPolicy (training-operator pkg/controller.v1/common/pod.go) writes the replica's
        # policy over the pod template's.
        yield Problem(
            "pod_spec_overrides.restartPolicy",
            "the operator sets each pod's restartPolicy from the replica's: use restart_policy",
        )
    launcher, gpus = spec.launcher, spec.gpus_per_node
    python = launcher is not None and launcher.kind == "python"
    if python and spec.nprocs_per_node is None and gpus > 1:
        # setPodEnv: WORLD_SIZE = replicas x nprocPerNode, which defaults to the GPUs; python
        # starts one process (a program that starts its own says how many: nprocs_per_node).
        yield Problem(
            "launcher.kind",
            f"python starts one process per node, but with {gpus} GPUs the operator sets "
            f"WORLD_SIZE to {spec.num_nodes * gpus}: use torchrun, or set nprocs_per_node "
            "(1, or the processes your program starts)",
        )


MASTER, WORKER = PYTORCHJOB.replica_types


def _replicas(spec: JobSpec) -> dict[str, int]:
    if spec.elastic is not None:
        return {WORKER: spec.num_nodes}
    workers = spec.num_nodes - 1
    return {MASTER: 1, WORKER: workers} if workers else {MASTER: 1}


def render(spec: JobSpec) -> Rendered:
    replicas = _replicas(spec)
    job: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {},
        "spec": {
            "pytorchReplicaSpecs": {
                role: {
                    "replicas": count,
                    "template": {
                        "metadata": {},
                        "spec": {"containers": [{"name": CONTAINER, "ports": [dict(PORT)]}]},
                    },
                }
                for role, count in replicas.items()
            }
        },
    }
    objects = base.with_companions(spec, job)
    index = len(objects) - 1
    layout = [
        Placement("num_nodes", index, f"spec.pytorchReplicaSpecs.{role}.replicas", count)
        for role, count in replicas.items()
    ]
    problems = list(base.pod_name_budget(spec.name, pod_suffixes(spec), "a PyTorchJob"))
    problems += base.launcher_args(spec, CONTAINER)
    problems += base.training_mounts(spec, CONTAINER)
    problems += _run_differently(spec)
    problems += kueue.topology_problems(spec, replicas, "a PyTorchJob")
    if spec.managed_by is not None and spec.managed_by not in MANAGERS:
        problems.append(Problem("managed_by", f"PyTorchJob accepts only: {', '.join(MANAGERS)}"))
    items = list(fields.entries(spec, command(spec)))
    placed = base.place(job, index, items, LAYOUT, NAME, problems)
    for role in job["spec"]["pytorchReplicaSpecs"].values():
        if not role["template"]["metadata"]:
            del role["template"]["metadata"]
    return base.checked(Rendered(objects, layout + placed), TARGET)


LAYOUT = base.Layout(TABLE)
TARGET = Target(
    NAME,
    API_VERSION,
    KIND,
    "Training Operator v1.7-v1.9",
    TABLE,
    render,
    pod_suffixes,
    LAYOUT,
    limits=output_limits.PYTORCHJOB_V1,
    whole_pods=True,
)

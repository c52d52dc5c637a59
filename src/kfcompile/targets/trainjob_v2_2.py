"""TrainJob for Trainer v2.2: ``spec.runtimePatches`` replace the overrides.

From v2.2 ``numProcPerNode`` is an int (omit it for auto), ``spec.labels`` is gone (JobSet and
Job labels travel in the patch), ``activeDeadlineSeconds`` exists, and command/args hold at
most 128 items. Patches must name the runtime's own job and container (``node``).
"""

from __future__ import annotations

from typing import Any

from kfcompile.spec import JobSpec
from kfcompile.targets import trainjob
from kfcompile.targets.base import OMIT, Rendered, Slot, Table, Target

NAME = "trainjob/v2.2"
# Our entry in the list keyed by manager: a domain-prefixed name that is neither Kueue's nor
# the Kubeflow SDK's, so neither overwrites it.
MANAGER = "kfcompile.dev/kfcompile"
RUNTIME = f"spec.runtimePatches[manager={MANAGER}].trainingRuntimeSpec.template"
JOB = f"{RUNTIME}.spec.replicatedJobs[name={trainjob.NODE}].template"
META = f"{JOB}.spec.template.metadata"
POD = f"{JOB}.spec.template.spec"
NODE = f"{POD}.containers[name={trainjob.NODE}]"
MAX_COMMAND_ITEMS = 128


def num_proc_per_node(value: Any) -> Any:
    return OMIT if value == "auto" else value


TABLE: Table = {
    "job.name": Slot.at("metadata.name"),
    "job.namespace": Slot.at("metadata.namespace"),
    "job.labels": Slot.at("metadata.labels"),
    "job.annotations": Slot.at("metadata.annotations"),
    "run.runtimeRef": Slot.at("spec.runtimeRef"),
    "run.initializer": Slot.at("spec.initializer"),
    "runtime.labels": Slot.at(f"{RUNTIME}.metadata.labels", f"{JOB}.metadata.labels"),
    "runtime.annotations": Slot.at(
        f"{RUNTIME}.metadata.annotations", f"{JOB}.metadata.annotations"
    ),
    "pod.labels": Slot.at(f"{META}.labels"),
    "pod.annotations": Slot.at(f"{META}.annotations"),
    "container.image": Slot.at("spec.trainer.image"),
    "container.imagePullPolicy": None,
    "container.command": Slot.at("spec.trainer.command"),
    "container.args": Slot.at("spec.trainer.args"),
    "scale.numNodes": Slot.at("spec.trainer.numNodes"),
    "scale.nprocPerNode": Slot.at("spec.trainer.numProcPerNode", convert=num_proc_per_node),
    # The webhook forbids env patches on the `node` container: env goes to spec.trainer.env.
    "container.env": Slot.at("spec.trainer.env"),
    "container.resources": Slot.at("spec.trainer.resourcesPerNode"),
    "container.volumeMounts": Slot.at(f"{NODE}.volumeMounts"),
    "container.securityContext": Slot.at(f"{NODE}.securityContext"),
    "pod.serviceAccountName": Slot.at(f"{POD}.serviceAccountName"),
    "pod.nodeSelector": Slot.at(f"{POD}.nodeSelector"),
    "pod.tolerations": Slot.at(f"{POD}.tolerations"),
    "pod.affinity": Slot.at(f"{POD}.affinity"),
    "pod.schedulingGates": Slot.at(f"{POD}.schedulingGates"),
    "pod.imagePullSecrets": Slot.at(f"{POD}.imagePullSecrets"),
    "pod.volumes": Slot.at(f"{POD}.volumes"),
    "pod.initContainers": Slot.at(f"{POD}.initContainers"),
    "pod.containers": Slot.at(f"{POD}.containers"),
    "pod.securityContext": Slot.at(f"{POD}.securityContext"),
    "pod.terminationGracePeriodSeconds": None,
    "run.suspend": Slot.at("spec.suspend"),
    "run.managedBy": Slot.at("spec.managedBy"),
    "run.activeDeadlineSeconds": Slot.at("spec.activeDeadlineSeconds"),
    "run.backoffLimit": None,
    "run.ttlSecondsAfterFinished": None,
    "run.cleanPodPolicy": None,
    "run.restartPolicy": None,
    "run.elastic": None,
    "run.schedulingPolicy": None,
}


def render(spec: JobSpec) -> Rendered:
    return trainjob.render(spec, NAME, TABLE, max_command_items=MAX_COMMAND_ITEMS)


TARGET = Target(NAME, trainjob.API_VERSION, trainjob.KIND, "Trainer v2.2.x", TABLE, render)

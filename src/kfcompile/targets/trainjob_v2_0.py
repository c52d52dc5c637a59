"""TrainJob for Trainer v2.0: pod customisation through ``spec.podSpecOverrides``.

v2.0 overrides carry no pod metadata, affinity or image pull secrets; ``numProcPerNode`` is
int-or-string; ``spec.labels``/``spec.annotations`` reach the JobSet and Jobs.
"""

from __future__ import annotations

from kfcompile.spec import JobSpec
from kfcompile.targets import trainjob
from kfcompile.targets.base import Rendered, Slot, Table, Target

NAME = "trainjob/v2.0"
OVERRIDES = "spec.podSpecOverrides"
POD = f"{OVERRIDES}[0]"
NODE = f"{POD}.containers[name={trainjob.NODE}]"

TABLE: Table = {
    "job.name": Slot.at("metadata.name"),
    "job.namespace": Slot.at("metadata.namespace"),
    "job.labels": Slot.at("metadata.labels"),
    "job.annotations": Slot.at("metadata.annotations"),
    "run.runtimeRef": Slot.at("spec.runtimeRef"),
    "run.initializer": Slot.at("spec.initializer"),
    "runtime.labels": Slot.at("spec.labels"),
    "runtime.annotations": Slot.at("spec.annotations"),
    "pod.labels": None,
    "pod.annotations": None,
    "container.image": Slot.at("spec.trainer.image"),
    "container.imagePullPolicy": None,
    "container.command": Slot.at("spec.trainer.command"),
    "container.args": Slot.at("spec.trainer.args"),
    "scale.numNodes": Slot.at("spec.trainer.numNodes"),
    "scale.nprocPerNode": Slot.at("spec.trainer.numProcPerNode"),
    "container.env": Slot.at("spec.trainer.env"),
    "container.resources": Slot.at("spec.trainer.resourcesPerNode"),
    "container.volumeMounts": Slot.at(f"{NODE}.volumeMounts"),
    "container.securityContext": None,
    "pod.serviceAccountName": Slot.at(f"{POD}.serviceAccountName"),
    "pod.nodeSelector": Slot.at(f"{POD}.nodeSelector"),
    "pod.tolerations": Slot.at(f"{POD}.tolerations"),
    "pod.affinity": None,
    "pod.schedulingGates": Slot.at(f"{POD}.schedulingGates"),
    "pod.imagePullSecrets": None,
    "pod.volumes": Slot.at(f"{POD}.volumes"),
    "pod.initContainers": Slot.at(f"{POD}.initContainers"),
    "pod.containers": Slot.at(f"{POD}.containers"),
    "pod.securityContext": None,
    "pod.terminationGracePeriodSeconds": None,
    "run.suspend": Slot.at("spec.suspend"),
    "run.managedBy": Slot.at("spec.managedBy"),
    "run.activeDeadlineSeconds": None,
    "run.backoffLimit": None,
    "run.ttlSecondsAfterFinished": None,
    "run.cleanPodPolicy": None,
    "run.restartPolicy": None,
    "run.elastic": None,
    "run.schedulingPolicy": None,
}


def render(spec: JobSpec) -> Rendered:
    return trainjob.render(spec, NAME, TABLE, override_list=OVERRIDES)


TARGET = Target(NAME, trainjob.API_VERSION, trainjob.KIND, "Trainer v2.0.x", TABLE, render)

"""TrainJob for Trainer v2.0: pod customisation through ``spec.podSpecOverrides``.

v2.0 overrides carry no pod metadata, affinity or image pull secrets; ``numProcPerNode`` is
int-or-string; ``spec.labels``/``spec.annotations`` reach the JobSet and Jobs.
"""

from __future__ import annotations

from kfcompile.spec import JobSpec
from kfcompile.targets import base, trainjob
from kfcompile.targets.base import Rendered, Slot, Table, Target

NAME = "trainjob/v2.0"
OVERRIDES = "spec.podSpecOverrides"
POD = f"{OVERRIDES}[0]"
NODE = f"{POD}.containers[name={trainjob.NODE}]"

# The pod fields v2.0 can override (containers and initContainers: name, env, volumeMounts).
POD_FIELDS = (
    "serviceAccountName",
    "nodeSelector",
    "tolerations",
    "volumes",
    "schedulingGates",
    "initContainers",
    "containers",
)

TABLE: Table = {
    **trainjob.UNCHANGED,
    **base.rows("pod", POD, POD_FIELDS),
    "runtime.labels": Slot.at("spec.labels"),
    "runtime.annotations": Slot.at("spec.annotations"),
    "pod.labels": None,
    "pod.annotations": None,
    "container.volumeMounts": Slot.at(f"{NODE}.volumeMounts"),
    "container.securityContext": None,
    "run.activeDeadlineSeconds": None,
}


def render(spec: JobSpec) -> Rendered:
    return trainjob.render(spec, NAME, TABLE, override_list=OVERRIDES)


TARGET = Target(NAME, trainjob.API_VERSION, trainjob.KIND, "Trainer v2.0.x", TABLE, render)

"""TrainJob for Trainer v2.0: pod customisation through ``spec.podSpecOverrides``.

v2.0 overrides carry no pod metadata, affinity or image pull secrets; ``numProcPerNode`` is
int-or-string; ``spec.labels``/``spec.annotations`` reach the JobSet and Jobs.
"""

from __future__ import annotations

from kfcompile.output import limits as output_limits
from kfcompile.targets import base, trainjob
from kfcompile.targets.base import Slot, Table

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

OVERRIDDEN = trainjob.Mark("podSpecOverrides", OVERRIDES)
# What v2.0 and v2.1 TrainJobs have and v2.2 removed.
BEFORE_V2_2 = (
    trainjob.Mark("spec.labels", "spec.labels"),
    trainjob.Mark("spec.annotations", "spec.annotations"),
    trainjob.Mark("string numProcPerNode", f"{trainjob.TRAINER}.numProcPerNode", str),
)

RELEASE = trainjob.Release(
    (2, 0),
    TABLE,
    OVERRIDDEN,
    (OVERRIDDEN, *BEFORE_V2_2),
    override_list=OVERRIDES,
    mirrors=(base.Mirror(f"{NODE}.env", f"{trainjob.TRAINER}.env"),),
    limits=output_limits.TRAINJOB_V2_0,
)
TARGET = RELEASE.target

"""TrainJob for Trainer v2.1: ``spec.podTemplateOverrides`` (v2.0's fields plus pod metadata,
affinity and image pull secrets); ``numProcPerNode`` still int-or-string; ``spec.labels`` kept.
"""

from __future__ import annotations

from kfcompile.output import limits as output_limits
from kfcompile.targets import base, trainjob, trainjob_v2_0
from kfcompile.targets.base import Slot, Table

OVERRIDES = "spec.podTemplateOverrides"
META = f"{OVERRIDES}[0].metadata"
POD = f"{OVERRIDES}[0].spec"
NODE = f"{POD}.containers[name={trainjob.NODE}]"

POD_FIELDS = (*trainjob_v2_0.POD_FIELDS, "affinity", "imagePullSecrets")

TABLE: Table = {
    **trainjob.UNCHANGED,
    **base.rows("pod", POD, POD_FIELDS),
    "runtime.labels": Slot.at("spec.labels"),
    "runtime.annotations": Slot.at("spec.annotations"),
    "pod.labels": Slot.at(f"{META}.labels"),
    "pod.annotations": Slot.at(f"{META}.annotations"),
    "container.volumeMounts": Slot.at(f"{NODE}.volumeMounts"),
    "container.securityContext": None,
    "run.activeDeadlineSeconds": None,
}

OVERRIDDEN = trainjob.Mark("podTemplateOverrides", OVERRIDES)

RELEASE = trainjob.Release(
    (2, 1),
    TABLE,
    OVERRIDDEN,
    (OVERRIDDEN, *trainjob_v2_0.BEFORE_V2_2),
    override_list=OVERRIDES,
    mirrors=(base.Mirror(f"{NODE}.env", f"{trainjob.TRAINER}.env"),),
    limits=output_limits.TRAINJOB_V2_1,
)
TARGET = RELEASE.target

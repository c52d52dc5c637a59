"""TrainJob for Trainer v2.2: ``spec.runtimePatches`` replace the overrides.

From v2.2 ``numProcPerNode`` is an int (omit it for auto), ``spec.labels`` is gone (JobSet and
Job labels travel in the patch), ``activeDeadlineSeconds`` exists, and command/args hold at
most 128 items. Patches must name the runtime's own job and container (``node``).
"""

from __future__ import annotations

from typing import Any

from kfcompile.output import limits as output_limits
from kfcompile.targets import base, trainjob, trainjob_v2_1
from kfcompile.targets.base import OMIT, Slot, Table

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


# v2.1's pod fields plus securityContext (containers also take securityContext).
POD_FIELDS = (*trainjob_v2_1.POD_FIELDS, "securityContext")

TABLE: Table = {
    **trainjob.UNCHANGED,
    **base.rows("pod", POD, POD_FIELDS),
    "runtime.labels": Slot.at(f"{RUNTIME}.metadata.labels", f"{JOB}.metadata.labels"),
    "runtime.annotations": Slot.at(
        f"{RUNTIME}.metadata.annotations", f"{JOB}.metadata.annotations"
    ),
    "pod.labels": Slot.at(f"{META}.labels"),
    "pod.annotations": Slot.at(f"{META}.annotations"),
    "scale.nprocPerNode": Slot.at(f"{trainjob.TRAINER}.numProcPerNode", convert=num_proc_per_node),
    "container.volumeMounts": Slot.at(f"{NODE}.volumeMounts"),
    "container.securityContext": Slot.at(f"{NODE}.securityContext"),
    "run.activeDeadlineSeconds": Slot.at("spec.activeDeadlineSeconds"),
}

PATCHED = trainjob.Mark("runtimePatches", "spec.runtimePatches")

RELEASE = trainjob.Release(
    (2, 2),
    TABLE,
    PATCHED,
    (PATCHED, trainjob.Mark("activeDeadlineSeconds", "spec.activeDeadlineSeconds")),
    max_command_items=MAX_COMMAND_ITEMS,
    patches_node_env=False,
    limits=output_limits.TRAINJOB_V2_2,
)
TARGET = RELEASE.target

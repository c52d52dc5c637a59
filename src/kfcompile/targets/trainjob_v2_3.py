"""TrainJob for Trainer v2.3: v2.2's runtimePatches plus ``terminationGracePeriodSeconds``.

v2.3 merges patches with strategic-merge semantics, so a replicated job or container name the
runtime lacks would be appended rather than ignored: the names here are exactly the runtime's.
"""

from __future__ import annotations

from kfcompile.output import limits as output_limits
from kfcompile.targets import base, trainjob, trainjob_v2_2
from kfcompile.targets.base import Table

POD = trainjob_v2_2.POD

POD_FIELDS = (*trainjob_v2_2.POD_FIELDS, "terminationGracePeriodSeconds")

TABLE: Table = {
    **trainjob_v2_2.TABLE,
    **base.rows("pod", POD, POD_FIELDS),
}

# The new pod field, in any patch of any replicated job (the CRD's schema: in its items).
GRACE = trainjob.Mark(
    "terminationGracePeriodSeconds",
    "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec"
    ".template.spec.terminationGracePeriodSeconds",
)

RELEASE = trainjob.Release(
    (2, 3),
    TABLE,
    GRACE,
    (*trainjob_v2_2.RELEASE.marks, GRACE),
    max_command_items=trainjob_v2_2.MAX_COMMAND_ITEMS,
    patches_node_env=False,
    limits=output_limits.TRAINJOB_V2_3,
)
TARGET = RELEASE.target

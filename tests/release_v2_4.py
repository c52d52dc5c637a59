"""A Trainer release as its module would be written in ``src/kfcompile/targets/``: a
hypothetical v2.4, v2.3 plus one change (``spec.backoffLimit``, which marks it in a manifest and
in its CRD). Not registered: ``test_releases`` adds it with ``kfcompile.targets.registered``."""

from __future__ import annotations

import attrs

from kfcompile.targets import trainjob, trainjob_v2_3
from kfcompile.targets.base import Slot, Table

BACKOFF = trainjob.Mark("backoffLimit", "spec.backoffLimit")

TABLE: Table = {**trainjob_v2_3.TABLE, "run.backoffLimit": Slot.at("spec.backoffLimit")}

RELEASE = attrs.evolve(
    trainjob_v2_3.RELEASE,
    version=(2, 4),
    table=TABLE,
    crd_mark=BACKOFF,
    marks=(*trainjob_v2_3.RELEASE.marks, BACKOFF),
    # v2.3's CRD limits, which attrs.evolve keeps
)
TARGET = RELEASE.target

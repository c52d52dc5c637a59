"""What the importer reads after the field table's rows that take whole slots: the required
fields, the defaults that rows leave (the runtime, the controller, the number of nodes, the
elastic range) and the special cases, each read by its own ``read`` beside its ``render``
(``targets/special.py``), in the order ``read_specials`` runs them: each reads what those
before it found (the GPUs decide the default processes per node, the job's name the Secret of
``secret_env``, the scale and the elastic range the launcher's command).
"""

from __future__ import annotations

from typing import Final

import attrs

from kfcompile.importer.state import NotImportable, Reading
from kfcompile.kinds import KINDS, TRAINJOB
from kfcompile.spec.errors import Problem
from kfcompile.spec.model import RuntimeRef
from kfcompile.targets.codecs import MISSING, Reader, Values
from kfcompile.targets.special import (
    ENV,
    GPUS,
    NPROCS,
    PROGRAM,
    PROVISIONING,
    VOLUMES,
    Read,
    Special,
)

DERIVED_RENDEZVOUS: Final = ("rdzvHost", "rdzvId")  # kfcompile's come from the job name
REQUIRED: Final = {
    "name": ("job.name", "the job needs a name"),
    "image": ("container.image", "the training image"),
}


def read_specials(r: Reading, values: Values) -> None:
    for field, (slot, what) in REQUIRED.items():
        if field not in r.data:
            raise NotImportable([Problem(r.place(slot), f"required: {what}")])
    _runtime_ref(r, values)
    _managed_by(r)
    _num_nodes(r)
    for step in ORDER:
        read = step.read if isinstance(step, Special) else step
        assert read is not None  # each special in ORDER reads itself
        read(r, values)


def _runtime_ref(r: Reading, values: Values) -> None:
    """The default runtime needs no ``runtime_ref``; one without a name runs the default."""
    ref = r.data.get("runtime_ref")
    if ref is None:
        return
    default = RuntimeRef()
    if "name" not in ref:
        r.lose(values["run.runtimeRef"][0] / "name", f"absent: {default.name} is written")
    defaults = attrs.asdict(default)
    if {**defaults, **ref} == defaults:
        del r.data["runtime_ref"]


def _managed_by(r: Reading) -> None:
    """The kind's own controller (the first it accepts) is what an absent ``managedBy`` means."""
    if r.data.get("managed_by") == KINDS[r.kind].managers[0]:
        del r.data["managed_by"]


def _num_nodes(r: Reading) -> None:
    if r.kind != TRAINJOB.name or "num_nodes" in r.data:
        return  # a PyTorchJob's replicas were counted already
    r.data["num_nodes"] = 1
    if "runtime_ref" in r.data:
        r.lose(r.place("scale.numNodes"), "absent (the runtime's default): written as 1")


def _elastic(r: Reader, values: Values) -> None:
    """The operator's defaults for the node range; the rendezvous kfcompile derives."""
    if "run.elastic" not in values:
        return
    where, doc = values["run.elastic"]
    for k in DERIVED_RENDEZVOUS:
        if doc.take((k,)) is not MISSING:
            r.lose(where / k, "kfcompile derives it from the job name: dropped")
    policy = r.data.setdefault("elastic", {})
    policy.setdefault("min_nodes", r.data["num_nodes"])
    policy.setdefault("max_nodes", r.data["num_nodes"])


# The specials (their mounts are read with their volumes), and the elastic range the program
# is checked with.
ORDER: Final[tuple[Special | Read, ...]] = (
    GPUS,
    NPROCS,
    ENV,
    _elastic,
    VOLUMES,
    PROGRAM,
    PROVISIONING,
)

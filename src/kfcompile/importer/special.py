"""The special cases of the field table read backward (``targets/special.py`` renders them): what
no row's codec can say, each a plain function, in the order ``read_specials`` runs them (each
reads what those before it found: the GPUs decide the default processes per node, the job's
name the Secret of ``secret_env``, the scale the launcher's command).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from kfcompile import generated
from kfcompile.errors import Problem
from kfcompile.fieldpath import FieldPath
from kfcompile.generated import DEFAULT_GPU, GPU_RESOURCES, SHM_DIR
from kfcompile.importer import program
from kfcompile.importer.document import MISSING, Doc, present
from kfcompile.importer.state import NotImportable, Reading
from kfcompile.kinds import KINDS, TRAINJOB
from kfcompile.paths import Select, find_named
from kfcompile.spec import RuntimeRef
from kfcompile.targets.codecs import plain_env, secret_env_var

DERIVED_RENDEZVOUS: Final = ("rdzvHost", "rdzvId")  # kfcompile's come from the job name
OLD_NPROCS: Final = "nProcPerNode"  # where the Training Operator once read processes per node
REQUIRED: Final = {
    "name": ("job.name", "the job needs a name"),
    "image": ("container.image", "the training image"),
}
# The slots whose parts the special cases take before the rows that take the rest.
TAKES_PARTS: Final = frozenset({"container.resources", "container.volumeMounts", "pod.volumes"})

Values = Mapping[str, tuple[FieldPath, Doc]]  # slot -> where it was read, its working copy


def read_specials(r: Reading, values: Values) -> None:
    for field, (slot, what) in REQUIRED.items():
        if field not in r.data:
            raise NotImportable([Problem(r.place(slot), f"required: {what}")])
    _runtime_ref(r, values)
    _managed_by(r)
    _num_nodes(r)
    _gpus(r, values)
    _nprocs(r, values)
    _environment(r)
    _elastic(r, values)
    _shm(r, values)
    program.read_program(r, values.get("pod.volumes"), values.get("container.volumeMounts"))


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


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _gpus(r: Reading, values: Values) -> None:
    """A known accelerator whose limit is a count and whose request, if any, equals it."""
    if "container.resources" not in values:
        return
    where, doc = values["container.resources"]
    requests, limits = (doc.get((group,)) for group in ("requests", "limits"))
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    for gpu in GPU_RESOURCES:
        count = _count(limits.get(gpu))
        if count and (gpu not in requests or _count(requests[gpu]) == count):
            doc.take(("requests", gpu))
            doc.take(("limits", gpu))
            r.put("gpus_per_node", count, where / "limits" / gpu)
            if gpu != DEFAULT_GPU:
                r.put("gpu_resource", gpu, where / "limits" / gpu)
            return


def _nprocs(r: Reading, values: Values) -> None:
    """Processes per node, left out where the spec derives the same number. Absent from the
    manifest it is ``auto``: the default of every Trainer release and of the operator (an
    elastic policy's ``nProcPerNode``, where the operator once read it, is read then)."""
    found = r.one("scale.nprocPerNode")
    if found is None and "run.elastic" in values:
        where, doc = values["run.elastic"]
        old = doc.take((OLD_NPROCS,))
        found = None if old is MISSING else (where / OLD_NPROCS, old)
    value: Any = "auto" if found is None else found[1]
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if found is not None and value in ("cpu", "gpu"):
        r.lose(found[0], f"{value!r} has no spec equivalent: written as 'auto'")
        value = "auto"
    if value != (r.data.get("gpus_per_node") or 1):
        r.put("nprocs_per_node", value, found[0] if found else "")


def _environment(r: Reading) -> None:
    """The container's env list split as the spec renders it: plain values first (``env``),
    ``secret_env`` references last, anything else between (``env_list``)."""
    items: list[tuple[FieldPath, Any]] = []
    seen: dict[str, FieldPath] = {}
    first: FieldPath | None = None
    for at, value in r.found.get("container.env", []):
        if not isinstance(value, list):
            r.lose(at, "must be a list: dropped")
            continue
        first = first or at
        for item in value:
            name = item.get("name") if isinstance(item, dict) else None
            here = at / Select("name", name) if isinstance(name, str) else at
            if isinstance(name, str) and name in seen:
                r.lose(here, f"also set in {seen[name]}: dropped")
                continue
            if isinstance(name, str):
                seen[name] = at
            items.append((here, item))
    if first is None:
        return
    start = 0
    while start < len(items) and plain_env(items[start][1]):
        start += 1
    end = len(items)
    secret = generated.secret_name(r.data["name"])
    while end > start and _secret_ref(items[end - 1][1], secret):
        end -= 1
    if start:
        r.put("env", {item["name"]: item["value"] for _, item in items[:start]}, first)
    if end > start:
        r.put("env_list", [item for _, item in items[start:end]], first)
    if end < len(items):
        r.put("secret_env", [item["name"] for _, item in items[end:]], first)
    for at, item in items[:start]:
        r.note(FieldPath.of("env", item["name"]), at)
    for i, (at, _) in enumerate(items[start:end]):
        r.note(FieldPath.of("env_list", i), at)
    for i, (at, _) in enumerate(items[end:]):
        r.note(FieldPath.of("secret_env", i), at)


def _secret_ref(item: Any, secret: str) -> bool:
    """An entry as ``secret_env`` renders it: the job's Secret, key = name."""
    name = item.get("name") if isinstance(item, dict) else None
    return isinstance(name, str) and item == secret_env_var(name, secret)


def _elastic(r: Reading, values: Values) -> None:
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


def _shm(r: Reading, values: Values) -> None:
    """The memory-backed /dev/shm that ``shm_size`` writes: a mount there of an ``emptyDir``
    with ``medium: Memory`` and a size limit (whatever its volume's name)."""
    if "pod.volumes" not in values or "container.volumeMounts" not in values:
        return
    (where, volumes), (_, mounts) = values["pod.volumes"], values["container.volumeMounts"]
    if not isinstance(volumes.root, list) or not isinstance(mounts.root, list):
        return
    for i, m in enumerate(mounts.root):
        if isinstance(m, dict) and m == generated.mount(m.get("name"), SHM_DIR):
            size = _shm_size(find_named(present(volumes.root), m["name"]))
            if size is not None:
                mounts.take((i,))
                volumes.take((Select("name", m["name"]),))
                at = where / Select("name", m["name"]) / "emptyDir" / "sizeLimit"
                r.put("shm_size", size, at)
            return


def _shm_size(volume: Any) -> Any:
    """The size of a memory-backed emptyDir with a size limit (what ``shm_size`` renders)."""
    empty = volume.get("emptyDir") if isinstance(volume, dict) else None
    if not isinstance(empty, dict) or "sizeLimit" not in empty:
        return None
    size = empty["sizeLimit"]
    return size if volume == generated.shm_volume(volume.get("name"), size) else None

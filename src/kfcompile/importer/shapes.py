"""The shapes a kind spreads one job over, read as the one shape the targets' tables describe.

A PyTorchJob has one replica spec per role: the replicas become ``num_nodes`` and the primary
role's pod is read (the others must be the same). A TrainJob may carry several overrides or
runtime patches: those for the ``node`` job merge into the first, read as kfcompile's own. Left
over pod and container fields that a target passes through become the escape hatches.
"""

from __future__ import annotations

from typing import Any, Final

from kfcompile.importer import identify
from kfcompile.importer.document import differences, empty, merge_into
from kfcompile.importer.state import NotImportable, Reading
from kfcompile.kinds import PYTORCHJOB
from kfcompile.spec.errors import Problem
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.k8s_schema import fields
from kfcompile.spec.object_paths import EACH, Path, Select, item_segment
from kfcompile.targets import TARGETS, pytorchjob_v1, trainer_releases, trainjob, trainjob_v2_2
from kfcompile.targets.codecs import GONE, MISSING

# The Training Operator's default for every replica (training-operator pkg/apis/kubeflow.org/v1
# pytorch_defaults.go SetDefaults_PyTorchJob: PytorchJobDefaultRestartPolicy).
PT_DEFAULT_RESTART: Final = "OnFailure"
MASTER_PORTS: Final = (pytorchjob_v1.PORT, {**pytorchjob_v1.PORT, "protocol": "TCP"})
REPLICAS: Final = PYTORCHJOB.replica_specs
MASTER, WORKER = PYTORCHJOB.replica_types
KUEUE_MANAGER: Final = "kueue.x-k8s.io/manager"


# --- PyTorchJob: replicas to num_nodes, one pod shape -------------------------------------------


def replicas(r: Reading) -> None:
    r.targets = [TARGETS[pytorchjob_v1.NAME]]
    r.detected = f"{pytorchjob_v1.KIND} {pytorchjob_v1.API_VERSION}"
    r.target = pytorchjob_v1.NAME
    specs = r.doc.get(REPLICAS)
    roles = [role for role in PYTORCHJOB.replica_types if isinstance(specs, dict) and role in specs]
    if not roles:
        raise NotImportable([Problem(FieldPath(REPLICAS), "required: a Master or Worker replica")])
    for role in [role for role in specs if role not in roles]:
        r.doc.take((*REPLICAS, role))
        r.lose((*REPLICAS, role), "a PyTorchJob has Master and Worker only: dropped")
    counts = {role: _count(r, role) for role in roles}
    r.put("num_nodes", sum(counts.values()), FieldPath(REPLICAS))
    primary = roles[0]
    elastic = r.doc.get(("spec", "elasticPolicy")) is not MISSING
    if counts.get(MASTER, 1) != 1:
        r.lose((*REPLICAS, MASTER, "replicas"), "one Master: the rest are Workers")
    if elastic and MASTER in roles:
        r.lose((*REPLICAS, MASTER), "an elastic job has Workers only: a Worker now")
    if not elastic and MASTER not in roles:
        r.lose((*REPLICAS, WORKER), "no Master and not elastic: node 0 is a Master")
    for role in roles[1:]:
        theirs = _replica_view(r.doc.get((*REPLICAS, primary)))
        mine = _replica_view(r.doc.get((*REPLICAS, role)))
        for path in differences(theirs, mine, (*REPLICAS, role)):
            r.lose(path, f"differs from {primary}: every node gets the {primary}'s")
        r.doc.take((*REPLICAS, role))
    r.subst = {("pytorchReplicaSpecs", EACH): primary}
    meta = r.doc.get((*REPLICAS, primary, "template", "metadata"))
    if isinstance(meta, dict) and "creationTimestamp" in meta and meta["creationTimestamp"] is None:
        del meta["creationTimestamp"]  # how the API server writes an empty time


def _count(r: Reading, role: str) -> int:
    at = (*REPLICAS, role)
    count = r.doc.take((*at, "replicas"))
    if count is MISSING:
        count = 1  # the operator's default
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise NotImportable([Problem(FieldPath((*at, "replicas")), "must be a number of pods")])
    box_at: Path = (*at, "template", "spec", "containers", Select("name", pytorchjob_v1.CONTAINER))
    box = r.doc.get(box_at)
    ports = box.get("ports") if isinstance(box, dict) else None
    if isinstance(ports, list):  # kfcompile's, and the operator's default, master port
        kept = [p for p in ports if p not in MASTER_PORTS]
        if kept:
            box["ports"] = kept
        else:
            del box["ports"]
    return count


def _replica_view(replica: Any) -> dict[str, Any]:
    """What must agree between replicas: the pod template and the restart policy."""
    if not isinstance(replica, dict):
        return {}
    view = {k: replica[k] for k in ("template", "restartPolicy") if k in replica}
    view.setdefault("restartPolicy", PT_DEFAULT_RESTART)
    template = view.get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    if isinstance(meta, dict) and "creationTimestamp" in meta and meta["creationTimestamp"] is None:
        trimmed = {k: v for k, v in meta.items() if k != "creationTimestamp"}
        view["template"] = {**template, "metadata": trimmed}  # type: ignore[dict-item]
    return view


# --- TrainJob: the release, then the overrides or patches merged into the one kfcompile writes


def trainjob_shape(r: Reading) -> None:
    spec = r.doc.get(("spec",))
    releases, features = identify.trainjob_releases(spec if isinstance(spec, dict) else {})
    r.detected = identify.detected(releases, features)
    newest = max(releases) if releases else max(max(f) for _, f in features)
    # Newest first: where several shapes hold a value, the newest shape is read first.
    known = trainer_releases()
    r.target = next(t.name for t in known if t.version == newest)
    r.targets = [t.target for t in known]
    for key in ("podSpecOverrides", "podTemplateOverrides"):
        _overrides(r, key)
    _patches(r)


def _overrides(r: Reading, key: str) -> None:
    """v2.0/v2.1: the items that target the ``node`` job, merged into the first of them."""
    items = r.doc.get(("spec", key))
    kept: list[int] = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        at: Path = ("spec", key, i)
        jobs = item.get("targetJobs") if isinstance(item, dict) else None
        names = [j.get("name") for j in jobs or [] if isinstance(j, dict)]
        if trainjob.NODE not in names:
            r.doc.take(at)
            targets = ", ".join(map(str, names)) or "no job"
            r.lose(at, f"targets {targets}, not the runtime's node job: dropped")
            continue
        r.doc.take((*at, "targetJobs"))
        if len(names) > 1:
            others = ", ".join(str(n) for n in names if n != trainjob.NODE)
            r.lose((*at, "targetJobs"), f"applies to node only, not to {others}")
        kept.append(i)
    first = _merge_into_first(r, key, items, kept)
    if first is not None:
        r.subst[(key, 0)] = first


def _patches(r: Reading) -> None:
    """v2.2+: Kueue's patch is Kueue's; the others merge into the first, read as kfcompile's."""
    items = r.doc.get(("spec", "runtimePatches"))
    kept: list[int] = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        manager = item.get("manager")
        if manager == KUEUE_MANAGER:
            items[i] = GONE
            continue
        item.pop("time", None)  # when its writer wrote it
        at: Path = ("spec", "runtimePatches", i)
        r.doc.take((*at, "manager"))
        if manager != trainjob_v2_2.MANAGER:
            r.lose((*at, "manager"), f"{manager}: written as {trainjob_v2_2.MANAGER}")
        jobs_at = (*at, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        jobs = r.doc.get(jobs_at)
        for j, job in enumerate(jobs if isinstance(jobs, list) else []):
            if item_segment(job, j) != Select("name", trainjob.NODE):
                r.doc.take((*jobs_at, j))
                where = (*jobs_at, item_segment(job, j))
                r.lose(where, "patches a job other than the runtime's node job: dropped")
        kept.append(i)
    first = _merge_into_first(r, "runtimePatches", items, kept)
    if first is not None:
        r.subst[("runtimePatches", Select("manager", trainjob_v2_2.MANAGER))] = first


def _merge_into_first(r: Reading, key: str, items: Any, kept: list[int]) -> int | None:
    """The items of ``spec.<key>`` at ``kept`` merged into the first of them (where they
    differ, the first wins and the other is lost); where that first one is."""
    if not kept:
        return None
    first = kept[0]
    for i in kept[1:]:
        for path in merge_into(items[first], items[i], ()):
            r.lose(("spec", key, i, *path), f"conflicts with {key}[{first}]: dropped")
        items[i] = GONE
    return first


# --- pod and container fields the typed slots do not hold ---------------------------------------


def escape_hatches(r: Reading) -> None:
    """Left-over pod and container fields that a target passes through become
    ``pod_spec_overrides`` / ``container_overrides`` (the same place on rendering)."""
    pod_over: dict[str, Any] = {}
    container_over: dict[str, Any] = {}
    roots: set[tuple[Path, Path]] = set()
    for t in r.targets:
        pod_root = _root(r, t.layout.get("pod.volumes"))  # every target has volumes
        box_root = _root(r, t.layout.get("container.volumeMounts"))
        if (pod_root, box_root) in roots:
            continue
        roots.add((pod_root, box_root))
        box = r.doc.get(box_root)
        if isinstance(box, dict):
            if r.kind == trainjob.KIND and "env" in box:  # the trainer's container
                env_at = (*box_root, "env")
                r.found["container.env"].append((FieldPath(env_at), r.doc.take(env_at)))
            for k in sorted(set(box) & fields("Container") - {"name"}):
                if t.layout.get(f"container.{k}") is not None:
                    path = (*box_root, k)
                    _hatch(r, container_over, "container_overrides", path, r.doc.take(path))
            if set(box) == {"name"}:
                r.doc.take(box_root)
        pod = r.doc.get(pod_root)
        for k in sorted(set(pod) & fields("PodSpec") if isinstance(pod, dict) else ()):
            if t.layout.get(f"pod.{k}") is None:
                continue
            path = (*pod_root, k)
            if k != "containers":
                _hatch(r, pod_over, "pod_spec_overrides", path, r.doc.take(path))
            elif isinstance(pod[k], list):  # the sidecars; the training container stays
                segments = [item_segment(c, i) for i, c in enumerate(pod[k]) if c is not GONE]
                sidecars = [r.doc.take((*path, seg)) for seg in segments if seg != box_root[-1]]
                _hatch(r, pod_over, "pod_spec_overrides", path, sidecars)
    if pod_over:
        r.data["pod_spec_overrides"] = pod_over
    if container_over:
        r.data["container_overrides"] = container_over


def _root(r: Reading, slot: Any) -> Path:
    """The object that holds a slot: the pod spec of ``pod.volumes``, the container of
    ``container.volumeMounts``."""
    assert slot is not None
    return r.resolve(slot.paths[0])[:-1]


def _hatch(r: Reading, into: dict[str, Any], spec_field: str, path: Path, value: Any) -> None:
    key = str(path[-1])
    if empty(value):
        return
    at = FieldPath.of(spec_field, key)
    if key in into:
        r.lose(path, f"conflicts with {r.sources[str(at)]}: dropped")
        return
    into[key] = value
    r.note(at, FieldPath(path))
    for i, item in enumerate(value if isinstance(value, list) else []):
        seg = item_segment(item, i)
        if isinstance(seg, Select):  # a named item (a sidecar): its loss names it, not the list
            r.note(at / i, FieldPath((*path, seg)))

"""Existing manifests back to a ``JobSpec``: the targets' placement tables, read backwards.

``import_manifest(obj)`` reads a PyTorchJob (``kubeflow.org/v1``) or a TrainJob
(``trainer.kubeflow.org/v1alpha1``, written for any Trainer release v2.0-v2.3) and returns the
``JobSpec`` that renders it. ``import_manifest_lossy`` returns the same spec with what it
detected and every *loss*: a field of the input that no spec field holds, one ``Problem`` per
field path of the input manifest, saying what happens to it. ``convert_manifest`` imports and
renders for another target, adding what that target cannot hold.

How it reads. Every slot a spec value can fill (``container.env``, ``pod.tolerations``...) is
looked up in the placement tables of ``targets/`` (for a TrainJob, in the tables of every Trainer
release, so any of the three pod-customisation shapes reads), and *taken out* of a working copy
of the manifest. What is left at the end is exactly what the spec could not hold: each left-over
field is a loss, so nothing is dropped silently. Left-over pod and container fields that a
target's table passes through become ``pod_spec_overrides`` / ``container_overrides``.

Detection, from the manifest alone: apiVersion and kind; for a TrainJob the Trainer release from
the fields only some releases have (``podSpecOverrides``: v2.0; ``podTemplateOverrides``: v2.1;
``runtimePatches``, ``activeDeadlineSeconds``: v2.2+; ``terminationGracePeriodSeconds`` in a
patch: v2.3; ``spec.labels``/``spec.annotations`` or a string ``numProcPerNode``: v2.0-v2.1).
When several releases fit, ``Imported.detected`` says so ("v2.2 or v2.3").

Dropped without a loss line, because the API server or a controller sets them and a new object
must not carry them: ``status``; ``metadata`` ``managedFields``, ``resourceVersion``, ``uid``,
``creationTimestamp``, ``generation``, ``selfLink``, ``ownerReferences``, ``deletionTimestamp``,
``deletionGracePeriodSeconds``; the ``kubectl.kubernetes.io/last-applied-configuration``
annotation; ``creationTimestamp`` in pod template metadata; Kueue's own runtime patch (manager
``kueue.x-k8s.io/manager``) and every patch's ``time``; ``managedBy`` equal to the kind's default
controller (the TrainJob CRD's default; what the Training Operator takes an absent one for).

kfcompile's own artefacts are recognised, so that importing a rendered job gives its spec back:
the memory-backed ``/dev/shm`` volume (``shm_size``; any ``emptyDir: {medium: Memory,
sizeLimit}`` mounted at ``/dev/shm``), the inline script (its ConfigMap, passed as a companion,
with the ``kfcompile-script`` volume and mount), the ``torchrun``/``python`` commands of
``launcher``, the PyTorchJob master port, the ``secret_env`` entries, and PyTorchJob replicas
whose pods are the same.

Normalisation: for a spec ``s`` that renders on target ``t``, ``import(render(s, t))`` equals
``s`` after these rewrites (``tests/test_import.py::normalise`` implements them):

1. ``nprocs_per_node`` is omitted when it equals its default (``gpus_per_node`` or 1).
2. GPUs of a resource that is not a known accelerator (see ``GPU_RESOURCES``) become extra
   resource requests and limits (``nprocs_per_node`` then keeps their count); ``gpu_resource``
   is dropped when there are no GPUs.
3. The environment is split again as the importer splits the container's list: the leading plain
   ``{name, value}`` entries are ``env``, the trailing ``<job>-env`` Secret references (key = name)
   are ``secret_env``, everything between is ``env_list``.
4. ``labels`` holding the Kueue queue or priority label (non-empty) become ``queue`` /
   ``priority_class``; an empty ``queue`` / ``priority_class`` is dropped (it renders nothing).
5. ``runtime_ref`` equal to the default runtime is omitted.
6. ``managed_by`` equal to the target kind's default controller is omitted.
7. A ``command`` (without ``args``) shaped like a launcher's becomes that launcher (``python
   -m module ...`` and torchrun's ``-m module`` the ``module`` form); with a ``script``, the
   default entrypoint ``train.py`` is written out.
8. ``work_dir`` becomes its volume (``workdir``) and mount: its local directory is not in any
   manifest.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from attrs import field, frozen

from kfcompile import paths, rules
from kfcompile.errors import KfcompileError, Problem, SpecError, UnsupportedFeature
from kfcompile.k8s_schema import fields
from kfcompile.load import structure, unstructure
from kfcompile.paths import EACH, Path, Segment, Select
from kfcompile.spec import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SCRIPT_DIR,
    SCRIPT_VOLUME,
    SHM_DIR,
    JobSpec,
    RuntimeRef,
)
from kfcompile.targets import (
    TARGETS,
    Target,
    base,
    canonical_name,
    pytorchjob_v1,
    trainjob,
    trainjob_v2_2,
)

__all__ = [
    "GPU_RESOURCES",
    "Converted",
    "Imported",
    "LossyImport",
    "NotImportable",
    "convert_manifest",
    "import_manifest",
    "import_manifest_lossy",
    "jobs_in",
]

# Extended resources counted as the job's GPUs (``gpus_per_node``); others stay extra resources.
GPU_RESOURCES: Final = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "google.com/tpu",
)
SERVER_METADATA: Final = (
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "ownerReferences",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
KUEUE_MANAGER: Final = "kueue.x-k8s.io/manager"
DEFAULT_MANAGED_BY: Final = {
    pytorchjob_v1.KIND: "kubeflow.org/training-operator",
    trainjob.KIND: "trainer.kubeflow.org/trainjob-controller",
}
# Variables the Training Operator injects into PyTorchJob pods (with a Master) and TrainJob lacks.
OPERATOR_ENV: Final = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
_OPERATOR_REF = re.compile(
    r"\$(?:\((?P<a>[A-Z_]+)\)|\{(?P<b>[A-Z_]+)\}|(?P<c>[A-Z_]+)\b)"  # $(X), ${X}, $X
)
LAUNCHERS: Final = ("torchrun", "python")
# Releases newest first: where several shapes hold a value, the newest shape is read first.
TRAINJOB_TARGETS: Final = ("trainjob/v2.3", "trainjob/v2.2", "trainjob/v2.1", "trainjob/v2.0")
_MISSING: Final = object()
_GONE: Final = object()  # a list item taken out (kept in place so later indices stay right)


class LossyImport(KfcompileError):
    """Something in the manifest would be lost: one problem per input field path."""


class NotImportable(KfcompileError):
    """No spec (or no output for the target) can be made from the manifest."""


@frozen
class Imported:
    """A manifest read back: the spec, what was detected, and what the spec cannot hold."""

    spec: JobSpec
    detected: str  # e.g. "TrainJob for Trainer v2.2 or v2.3 (runtimePatches)"
    target: str  # the kfcompile target whose output has this shape (the newest that fits)
    losses: tuple[Problem, ...] = ()
    # spec field path (as in Problem paths: ``env.FOO``, ``tolerations``) -> input field path
    sources: Mapping[str, str] = field(factory=dict, eq=False)

    def source_of(self, spec_path: str) -> str:
        """The input field a spec field path came from (its closest recorded parent)."""
        return _source_of(self.sources, spec_path)


@frozen
class Converted:
    """A manifest imported and rendered for another target, with every loss on the way."""

    objects: list[dict[str, Any]]
    imported: Imported
    losses: tuple[Problem, ...] = ()


# --- public API ---------------------------------------------------------------------------------


def import_manifest(
    obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]] = ()
) -> JobSpec:
    """The spec that renders ``obj`` (a PyTorchJob or TrainJob), or ``LossyImport`` listing every
    input field the spec cannot hold. ``companions`` are objects applied with it (the inline
    script's ConfigMap, as ``render`` returns before the job)."""
    imported = import_manifest_lossy(obj, companions)
    if imported.losses:
        raise LossyImport(imported.losses)
    return imported.spec


def import_manifest_lossy(
    obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]] = ()
) -> Imported:
    """Like ``import_manifest``, but the losses are returned in ``Imported.losses``.

    Raises ``NotImportable`` when no spec can be made (another kind, no image, values the spec
    refuses), with the input field paths.
    """
    imported = _Import(obj, companions).run()
    try:  # what the manifest's own target refuses (a name too long for its pods) never ran
        TARGETS[imported.target].render(imported.spec)
    except UnsupportedFeature as exc:
        raise NotImportable(
            [Problem(imported.source_of(p.path), p.message) for p in exc.problems]
        ) from None
    return imported


def convert_manifest(
    obj: Mapping[str, Any],
    target_name: str,
    companions: Iterable[Mapping[str, Any]] = (),
    *,
    allow_lossy: bool = False,
) -> Converted:
    """Import ``obj`` and render it for ``target_name``.

    What the target cannot hold is dropped and listed as a loss (input field path: why), after
    the import's own losses. Without ``allow_lossy`` any loss raises ``LossyImport``; a loss that
    cannot be dropped (the job's name, image, program or scale) raises ``NotImportable``.
    """
    target_name = canonical_name(target_name)  # ValueError naming the choices
    target = TARGETS[target_name]
    imported = import_manifest_lossy(obj, companions)
    losses = [*imported.losses, *_program_losses(imported, target)]
    try:
        objects = target.render(imported.spec).objects
    except UnsupportedFeature as exc:  # drop every misfit at once, then it renders
        losses += [
            Problem(imported.source_of(p.path), f"{p.message}: dropped") for p in exc.problems
        ]
        objects = target.render(
            _without(imported.spec, exc.problems, imported, target_name)
        ).objects
    if losses and not allow_lossy:
        raise LossyImport(losses)
    return Converted(objects, imported, tuple(losses))


Job = tuple[Mapping[str, Any], list[Mapping[str, Any]]]  # a job and the ConfigMaps it uses


def jobs_in(documents: Iterable[Any]) -> tuple[list[Job], list[Problem]]:
    """The jobs among parsed YAML documents (``kind: List`` items included), each with the
    ConfigMaps that belong to it (its inline script), and a problem for every other document."""
    flat: list[tuple[str, Any]] = []
    for i, doc in enumerate(documents):
        if doc is None:
            continue
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            items = doc.get("items")
            for j, item in enumerate(items if isinstance(items, list) else []):
                flat.append((f"documents[{i}].items[{j}]", item))
        else:
            flat.append((f"documents[{i}]", doc))
    jobs = [(at, d) for at, d in flat if _job_kind(d) is not None]
    wanted = {(_meta(d).get("namespace"), f"{_meta(d).get('name')}-script") for _, d in jobs}
    claimed: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    others: list[Problem] = []
    for at, d in flat:
        if _job_kind(d) is not None:
            continue
        if isinstance(d, Mapping) and d.get("kind") == "ConfigMap" and d.get("apiVersion") == "v1":
            key = (_meta(d).get("namespace"), _meta(d).get("name"))
            if key in wanted and key not in claimed:
                claimed[key] = d
                continue
        others.append(Problem(at, f"{_describe(d)} is not a PyTorchJob or TrainJob: not converted"))
    out: list[Job] = []
    for _, d in jobs:
        key = (_meta(d).get("namespace"), f"{_meta(d).get('name')}-script")
        out.append((d, [claimed[key]] if key in claimed else []))
    return out, others


# --- the working copy ---------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Plain dicts and lists (a parser may hand over other mappings and sequences)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _meta(obj: Any) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _describe(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return "a document that is no mapping"
    return f"{obj.get('kind', 'an object without kind')} {_meta(obj).get('name', '')}".rstrip()


def _job_kind(obj: Any) -> str | None:
    if not isinstance(obj, Mapping):
        return None
    shape = (obj.get("apiVersion"), obj.get("kind"))
    if shape == (pytorchjob_v1.API_VERSION, pytorchjob_v1.KIND):
        return pytorchjob_v1.KIND
    if shape == (trainjob.API_VERSION, trainjob.KIND):
        return trainjob.KIND
    return None


def _item_segment(item: Any, index: int) -> Segment:
    """How a list item is named in reported paths: by ``name`` when it has one."""
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return Select("name", item["name"])
    return index


def _child(node: Any, seg: Segment) -> Any:
    if isinstance(seg, str):
        return node.get(seg, _MISSING) if isinstance(node, dict) else _MISSING
    if not isinstance(node, list):
        return _MISSING
    if isinstance(seg, int):
        return node[seg] if seg < len(node) and node[seg] is not _GONE else _MISSING
    if isinstance(seg, Select):
        for item in node:
            if isinstance(item, dict) and item.get(seg.key) == seg.value:
                return item
    return _MISSING


def _empty(value: Any) -> bool:
    """Nothing to carry: null, ``{}``, or a list whose items were all taken."""
    if isinstance(value, list):
        return all(v is _GONE for v in value)
    return value is _GONE or value is None or value == {}


class _Doc:
    """The manifest being read. Values are taken out as they are understood and every container
    passed on the way is remembered, so ``leftovers`` names exactly what was not understood, at
    the shallowest path that holds it."""

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.root: dict[str, Any] = _plain(obj)
        self.touched: set[Path] = {()}

    def get(self, path: Path) -> Any:
        node: Any = self.root
        for seg in path:
            node = _child(node, seg)
            if node is _MISSING:
                return _MISSING
        return node

    def take(self, path: Path) -> Any:
        """The value at ``path``, removed from the document (``_MISSING`` when absent). Every
        container looked into on the way counts as read, so what is left in it is reported key
        by key. A list item leaves a placeholder: the paths of the items after it stay right."""
        parent: Any = self.root
        for i, seg in enumerate(path[:-1]):
            child = _child(parent, seg)
            if child is _MISSING:
                return _MISSING
            self.touched.add(path[: i + 1])
            parent = child
        value = _child(parent, path[-1])
        if value is _MISSING:
            return _MISSING
        self.touched.add(path)
        leaf = path[-1]
        if isinstance(leaf, str):
            del parent[leaf]
        else:
            parent[next(i for i, v in enumerate(parent) if v is value)] = _GONE
        return _plain_list(value)

    def leftovers(self) -> Iterator[str]:
        def walk(node: Any, path: Path) -> Iterator[str]:
            if _empty(node):
                return
            if path in self.touched and isinstance(node, dict):
                # The key a table path selected this item by (``[name=node]``) names it.
                chosen = path[-1].key if path and isinstance(path[-1], Select) else None
                for k, v in node.items():
                    if k != chosen:
                        yield from walk(v, (*path, k))
            elif path in self.touched and isinstance(node, list):
                for i, item in enumerate(node):
                    yield from walk(item, (*path, _item_segment(item, i)))
            else:
                yield paths.format(path)

        yield from walk(self.root, ())


def _plain_list(value: Any) -> Any:
    """A taken value without the placeholders of items taken from it earlier."""
    return [v for v in value if v is not _GONE] if isinstance(value, list) else value


def _where(path: Path) -> str:
    return paths.format(path)


def _source_of(sources: Mapping[str, str], spec_path: str) -> str:
    path = spec_path
    while path:
        if path in sources:
            return sources[path]
        cut = max(path.rfind("."), path.rfind("["))
        path = path[:cut] if cut > 0 else ""
    return spec_path


# --- reading one manifest -----------------------------------------------------------------------

# Every slot ``base.entries`` fills, read from each path a table gives it (tests check the list
# against ``reference.field_slots``, so a new slot cannot be forgotten here).
SLOTS: Final = (
    "job.name",
    "job.namespace",
    "job.labels",
    "job.annotations",
    "run.runtimeRef",
    "run.initializer",
    "container.image",
    "container.imagePullPolicy",
    "container.command",
    "container.args",
    "scale.numNodes",
    "scale.nprocPerNode",
    "container.env",
    "container.resources",
    "runtime.labels",
    "runtime.annotations",
    "pod.labels",
    "pod.annotations",
    "container.volumeMounts",
    "pod.serviceAccountName",
    "pod.nodeSelector",
    "pod.tolerations",
    "pod.affinity",
    "pod.schedulingGates",
    "pod.imagePullSecrets",
    "pod.terminationGracePeriodSeconds",
    "pod.volumes",
    "run.suspend",
    "run.managedBy",
    "run.activeDeadlineSeconds",
    "run.backoffLimit",
    "run.ttlSecondsAfterFinished",
    "run.cleanPodPolicy",
    "run.restartPolicy",
    "run.elastic",
    "run.schedulingPolicy",
)
# Slots whose value is a spec field as it stands.
SCALAR_FIELDS: Final = {
    "job.namespace": "namespace",
    "container.imagePullPolicy": "image_pull_policy",
    "pod.serviceAccountName": "service_account_name",
    "pod.affinity": "affinity",
    "pod.tolerations": "tolerations",
    "pod.terminationGracePeriodSeconds": "termination_grace_period_seconds",
    "run.suspend": "suspend",
    "run.activeDeadlineSeconds": "active_deadline_seconds",
    "run.backoffLimit": "backoff_limit",
    "run.ttlSecondsAfterFinished": "ttl_seconds_after_finished",
    "run.cleanPodPolicy": "clean_pod_policy",
    "run.restartPolicy": "restart_policy",
}
# Map slots: the union of every place they were found.
MAP_FIELDS: Final = {
    "job.annotations": "annotations",
    "runtime.labels": "runtime_labels",
    "runtime.annotations": "runtime_annotations",
    "pod.labels": "pod_labels",
    "pod.annotations": "pod_annotations",
    "pod.nodeSelector": "node_selector",
}
ELASTIC_KEYS: Final = {
    "minReplicas": "min_nodes",
    "maxReplicas": "max_nodes",
    "rdzvBackend": "rdzv_backend",
    "rdzvPort": "rdzv_port",
    "maxRestarts": "max_restarts",
}
SCHEDULING_KEYS: Final = {
    "minAvailable": "min_available",
    "queue": "queue",
    "minResources": "min_resources",
    "priorityClass": "priority_class",
    "scheduleTimeoutSeconds": "schedule_timeout_seconds",
}
RUNTIME_REF_KEYS: Final = {"name": "name", "kind": "kind", "apiGroup": "api_group"}
NOT_HELD: Final = "no JobSpec field holds it: dropped"
PT_DEFAULT_RESTART: Final = "OnFailure"  # the Training Operator's default for every replica
MASTER_PORTS: Final = (pytorchjob_v1.PORT, {**pytorchjob_v1.PORT, "protocol": "TCP"})
DERIVED_RENDEZVOUS: Final = ("rdzvHost", "rdzvId")  # kfcompile's come from the job name
REPLICAS: Final = ("spec", "pytorchReplicaSpecs")

Found = list[tuple[str, Any]]


class _Import:
    """One manifest being read: the working copy, the spec data built from it, and the losses."""

    def __init__(self, obj: Mapping[str, Any], companions: Iterable[Mapping[str, Any]]) -> None:
        kind = _job_kind(obj)
        if kind is None:
            raise NotImportable(
                [
                    Problem(
                        "kind",
                        f"{_describe(obj)} is not a job kfcompile reads "
                        f"({pytorchjob_v1.KIND} {pytorchjob_v1.API_VERSION}, "
                        f"{trainjob.KIND} {trainjob.API_VERSION})",
                    )
                ]
            )
        self.kind: str = kind
        self.doc = _Doc(obj)
        self.doc.take(("apiVersion",))
        self.doc.take(("kind",))
        _strip_server_fields(self.doc.root)
        self.companions: list[dict[str, Any]] = [_plain(c) for c in companions]
        for c in self.companions:
            _strip_server_fields(c)
        self.data: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.losses: list[Problem] = []
        self.targets: list[Target] = []
        # Path segments read as others: PyTorchJob replicas (``*``) as the one whose pod is
        # read, TrainJob overrides and patches (``[0]``, ``[manager=kfcompile...]``) as the
        # item that holds them.
        self.subst: dict[tuple[Segment, Segment], Segment] = {}
        self.found: dict[str, Found] = {}
        self.detected = ""
        self.target = ""
        self.volumes: list[Any] = []
        self.mounts: list[Any] = []
        self.volumes_at = self.mounts_at = ""

    # -- bookkeeping

    def lose(self, where: str, what: str) -> None:
        self.losses.append(Problem(where, what))

    def put(self, spec_field: str, value: Any, where: str) -> None:
        self.data[spec_field] = value
        self.sources[spec_field] = where

    def resolve(self, text: str) -> Path:
        parsed = paths.parse(text)
        return tuple(
            self.subst.get((parsed[i - 1], seg), seg) if i else seg for i, seg in enumerate(parsed)
        )

    def one(self, slot: str) -> tuple[str, Any] | None:
        """A slot's value where it was found (the first place; others that differ are lost)."""
        found = self.found.get(slot, [])
        if not found:
            return None
        for where, value in found[1:]:
            if value != found[0][1]:
                self.lose(where, f"conflicts with {found[0][0]}: dropped")
        return found[0]

    def one_mapping(self, slot: str) -> tuple[str, dict[str, Any]] | None:
        """``one(slot)`` when it is a mapping; anything else there is lost."""
        found = self.one(slot)
        if found is None:
            return None
        where, value = found
        if not isinstance(value, dict):
            self.lose(where, "must be a mapping: dropped")
            return None
        return where, value

    def union(self, slot: str) -> tuple[str, dict[str, Any]] | None:
        """A map slot merged from every place it was found. The spec writes the map to all of a
        target's places alike, so a key missing from one of them, or different there, is lost."""
        maps: list[tuple[str, dict[str, Any]]] = []
        for where, value in self.found.get(slot, []):
            if isinstance(value, dict):
                maps.append((where, value))
            else:
                self.lose(where, "must be a mapping: dropped")
        if not maps:
            return None
        merged: dict[str, Any] = {}
        for _, value in maps:
            for k, v in value.items():
                merged.setdefault(k, v)
        for where, value in maps:
            for k, v in merged.items():
                if k not in value:
                    places = ", ".join(w for w, _ in maps)
                    self.lose(f"{where}{paths.key(k)}", f"absent here: written to all of {places}")
                elif value[k] != v:
                    self.lose(f"{where}{paths.key(k)}", f"conflicts with {maps[0][0]}: dropped")
        return maps[0][0], merged

    # -- the steps

    def run(self) -> Imported:
        if self.kind == pytorchjob_v1.KIND:
            self.replicas()
        else:
            self.trainjob_shape()
        for slot in SLOTS:
            self.found[slot] = self.read(slot)
        self.escape_hatches()
        self.build()
        for where in self.doc.leftovers():
            self.lose(where, NOT_HELD)
        for c in self.companions:
            self.lose(
                f"{_describe(c)}",
                "not the job's inline script as kfcompile writes it: not converted",
            )
        try:
            spec = structure(self.data)
        except SpecError as exc:
            raise NotImportable(
                [
                    Problem(_source_of(self.sources, p.path), f"{p.message} (spec field {p.path})")
                    for p in exc.problems
                ]
            ) from None
        return Imported(spec, self.detected, self.target, tuple(self.losses), dict(self.sources))

    def read(self, slot: str) -> Found:
        """A slot's values from every place a table puts it. Where one target writes a slot to
        several places (v2.2+ JobSet and Job labels), a place without it is a loss."""
        out: Found = []
        taken: dict[Path, bool] = {}
        for t in self.targets:
            s = base.lookup(t.table, slot)
            places = [self.resolve(text) for text in (s.paths if s is not None else ())]
            for path in places:
                if path not in taken:
                    value = self.doc.take(path)
                    taken[path] = value is not _MISSING
                    if taken[path]:
                        out.append((_where(path), value))
            found = [_where(p) for p in places if taken[p]]
            for path in places:
                missing = (_where(path), f"absent: written here as at {', '.join(found)}")
                if found and not taken[path] and Problem(*missing) not in self.losses:
                    self.lose(*missing)
        return out

    # -- PyTorchJob: replicas to num_nodes, one pod shape

    def replicas(self) -> None:
        self.targets = [TARGETS[pytorchjob_v1.NAME]]
        self.detected = f"{pytorchjob_v1.KIND} {pytorchjob_v1.API_VERSION}"
        self.target = pytorchjob_v1.NAME
        specs = self.doc.get(REPLICAS)
        roles = [r for r in ("Master", "Worker") if isinstance(specs, dict) and r in specs]
        if not roles:
            raise NotImportable([Problem(_where(REPLICAS), "required: a Master or Worker replica")])
        for role in [r for r in specs if r not in roles]:
            self.doc.take((*REPLICAS, role))
            self.lose(_where((*REPLICAS, role)), "a PyTorchJob has Master and Worker only: dropped")
        counts = {role: self._count(role) for role in roles}
        self.put("num_nodes", sum(counts.values()), _where(REPLICAS))
        primary = roles[0]
        elastic = self.doc.get(("spec", "elasticPolicy")) is not _MISSING
        if counts.get("Master", 1) != 1:
            self.lose(_where((*REPLICAS, "Master", "replicas")), "one Master: the rest are Workers")
        if elastic and "Master" in roles:
            self.lose(
                _where((*REPLICAS, "Master")), "an elastic job has Workers only: a Worker now"
            )
        if not elastic and "Master" not in roles:
            self.lose(
                _where((*REPLICAS, "Worker")), "no Master and not elastic: node 0 is a Master"
            )
        for role in roles[1:]:
            theirs = _replica_view(self.doc.get((*REPLICAS, primary)))
            mine = _replica_view(self.doc.get((*REPLICAS, role)))
            for path in _differences(theirs, mine, (*REPLICAS, role)):
                self.lose(_where(path), f"differs from {primary}: every node gets the {primary}'s")
            self.doc.take((*REPLICAS, role))
        self.subst = {("pytorchReplicaSpecs", EACH): primary}
        meta = self.doc.get((*REPLICAS, primary, "template", "metadata"))
        if (
            isinstance(meta, dict)
            and "creationTimestamp" in meta
            and meta["creationTimestamp"] is None
        ):
            del meta["creationTimestamp"]  # how the API server writes an empty time

    def _count(self, role: str) -> int:
        at = (*REPLICAS, role)
        count = self.doc.take((*at, "replicas"))
        if count is _MISSING:
            count = 1  # the operator's default
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise NotImportable([Problem(_where((*at, "replicas")), "must be a number of pods")])
        container = Select("name", pytorchjob_v1.CONTAINER)
        ports = self.doc.get((*at, "template", "spec", "containers", container, "ports"))
        if isinstance(ports, list):  # kfcompile's, and the operator's default, master port
            kept = [p for p in ports if p not in MASTER_PORTS]
            box = self.doc.get((*at, "template", "spec", "containers", container))
            if kept:
                box["ports"] = kept
            else:
                del box["ports"]
        return count

    # -- TrainJob: the release, then the overrides or patches merged into the one kfcompile writes

    def trainjob_shape(self) -> None:
        spec = self.doc.get(("spec",))
        releases, features = _trainjob_releases(spec if isinstance(spec, dict) else {})
        self.detected = _detected(releases, features)
        newest = max(releases) if releases else max(max(r) for _, r in features)
        self.target = f"trainjob/v2.{newest}"
        self.targets = [TARGETS[n] for n in TRAINJOB_TARGETS]
        for key in ("podSpecOverrides", "podTemplateOverrides"):
            self._overrides(key)
        self._patches()

    def _overrides(self, key: str) -> None:
        """v2.0/v2.1: the items that target the ``node`` job, merged into the first of them."""
        items = self.doc.get(("spec", key))
        first: int | None = None
        for i, item in enumerate(items if isinstance(items, list) else []):
            at: Path = ("spec", key, i)
            jobs = item.get("targetJobs") if isinstance(item, dict) else None
            names = [j.get("name") for j in jobs or [] if isinstance(j, dict)]
            if trainjob.NODE not in names:
                self.doc.take(at)
                targets = ", ".join(map(str, names)) or "no job"
                self.lose(_where(at), f"targets {targets}, not the runtime's node job: dropped")
                continue
            self.doc.take((*at, "targetJobs"))
            if len(names) > 1:
                others = ", ".join(str(n) for n in names if n != trainjob.NODE)
                self.lose(_where((*at, "targetJobs")), f"applies to node only, not to {others}")
            if first is None:
                first = i
                continue
            for path in _merge_into(items[first], item, ()):
                self.lose(_where((*at, *path)), f"conflicts with {key}[{first}]: dropped")
            items[i] = _GONE
        if first is not None:
            self.subst[(key, 0)] = first

    def _patches(self) -> None:
        """v2.2+: Kueue's patch is Kueue's; the others merge into the first, read as
        kfcompile's own."""
        items = self.doc.get(("spec", "runtimePatches"))
        first: int | None = None
        for i, item in enumerate(items if isinstance(items, list) else []):
            if not isinstance(item, dict):
                continue
            manager = item.get("manager")
            if manager == KUEUE_MANAGER:
                items[i] = _GONE
                continue
            item.pop("time", None)  # when its writer wrote it
            at: Path = ("spec", "runtimePatches", i)
            self.doc.take((*at, "manager"))
            if manager != trainjob_v2_2.MANAGER:
                self.lose(f"{_where(at)}.manager", f"{manager}: written as {trainjob_v2_2.MANAGER}")
            jobs_at = (*at, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
            jobs = self.doc.get(jobs_at)
            for j, job in enumerate(jobs if isinstance(jobs, list) else []):
                if _item_segment(job, j) != Select("name", trainjob.NODE):
                    self.doc.take((*jobs_at, j))
                    where = _where((*jobs_at, _item_segment(job, j)))
                    self.lose(where, "patches a job other than the runtime's node job: dropped")
            if first is None:
                first = i
                continue
            for path in _merge_into(items[first], item, ()):
                self.lose(_where((*at, *path)), f"conflicts with runtimePatches[{first}]: dropped")
            items[i] = _GONE
        if first is not None:
            self.subst[("runtimePatches", Select("manager", trainjob_v2_2.MANAGER))] = first

    # -- pod and container fields the typed slots do not hold

    def escape_hatches(self) -> None:
        """Left-over pod and container fields that a target passes through become
        ``pod_spec_overrides`` / ``container_overrides`` (the same place on rendering)."""
        pod_over: dict[str, Any] = {}
        container_over: dict[str, Any] = {}
        roots: set[tuple[Path, Path]] = set()
        for t in self.targets:
            pod_slot = base.lookup(t.table, "pod.volumes")
            box_slot = base.lookup(t.table, "container.volumeMounts")
            assert pod_slot is not None and box_slot is not None  # every target has volumes
            pod_root = self.resolve(pod_slot.paths[0])[:-1]
            box_root = self.resolve(box_slot.paths[0])[:-1]
            if (pod_root, box_root) in roots:
                continue
            roots.add((pod_root, box_root))
            box = self.doc.get(box_root)
            if isinstance(box, dict):
                if self.kind == trainjob.KIND and "env" in box:  # the trainer's container
                    env_at = (*box_root, "env")
                    self.found["container.env"].append((_where(env_at), self.doc.take(env_at)))
                for k in sorted(set(box) & fields("Container") - {"name"}):
                    if base.lookup(t.table, f"container.{k}") is not None:
                        path = (*box_root, k)
                        self._hatch(
                            container_over, "container_overrides", path, self.doc.take(path)
                        )
                if set(box) == {"name"}:
                    self.doc.take(box_root)
            pod = self.doc.get(pod_root)
            for k in sorted(set(pod) & fields("PodSpec") if isinstance(pod, dict) else ()):
                if base.lookup(t.table, f"pod.{k}") is None:
                    continue
                path = (*pod_root, k)
                if k != "containers":
                    self._hatch(pod_over, "pod_spec_overrides", path, self.doc.take(path))
                elif isinstance(pod[k], list):  # the sidecars; the training container stays
                    segments = [_item_segment(c, i) for i, c in enumerate(pod[k]) if c is not _GONE]
                    sidecars = [
                        self.doc.take((*path, seg)) for seg in segments if seg != box_root[-1]
                    ]
                    self._hatch(pod_over, "pod_spec_overrides", path, sidecars)
        if pod_over:
            self.data["pod_spec_overrides"] = pod_over
        if container_over:
            self.data["container_overrides"] = container_over

    def _hatch(self, into: dict[str, Any], spec_field: str, path: Path, value: Any) -> None:
        key = str(path[-1])
        if _empty(value):
            return
        if key in into:
            self.lose(
                _where(path), f"conflicts with {self.sources[f'{spec_field}.{key}']}: dropped"
            )
            return
        into[key] = value
        self.sources[f"{spec_field}.{key}"] = _where(path)

    # -- slot values to spec fields: the inverse of ``base.entries``

    def build(self) -> None:
        name = self.one("job.name")
        if name is None:
            raise NotImportable([Problem("metadata.name", "required: the job needs a name")])
        self.put("name", name[1], name[0])
        image = self.one("container.image")
        if image is None:
            raise NotImportable([Problem(self._image_path(), "required: the training image")])
        self.put("image", image[1], image[0])
        for slot, spec_field in SCALAR_FIELDS.items():
            found = self.one(slot)
            if found is not None:
                self.put(spec_field, found[1], found[0])
        for slot, spec_field in MAP_FIELDS.items():
            merged = self.union(slot)
            if merged is not None and merged[1]:
                self.put(spec_field, merged[1], merged[0])
        self.job_labels()
        self.runtime_ref()
        self.initializer()
        self.managed_by()
        self.names("pod.schedulingGates", "scheduling_gates")
        self.names("pod.imagePullSecrets", "image_pull_secrets")
        self.num_nodes()
        self.resources()
        self.nprocs()
        self.environment()
        self.elastic()
        self.scheduling_policy()
        self.storage()
        self.program()
        if self.volumes:
            self.put("volumes", self.volumes, self.volumes_at)
            for i, v in enumerate(self.volumes):
                if isinstance(v, dict) and isinstance(v.get("name"), str):
                    self.sources[f"volumes[{i}]"] = self.volumes_at + paths.select(
                        "name", v["name"]
                    )
        if self.mounts:
            self.put("volume_mounts", self.mounts, self.mounts_at)

    def _image_path(self) -> str:
        slot = base.lookup(self.targets[0].table, "container.image")
        assert slot is not None
        return _where(self.resolve(slot.paths[0]))

    def job_labels(self) -> None:
        merged = self.union("job.labels")
        if merged is None:
            return
        where, labels = merged
        for label, spec_field in ((QUEUE_LABEL, "queue"), (PRIORITY_LABEL, "priority_class")):
            if labels.get(label):
                self.put(spec_field, labels.pop(label), f"{where}{paths.key(label)}")
        if labels:
            self.put("labels", labels, where)

    def runtime_ref(self) -> None:
        found = self.one_mapping("run.runtimeRef")
        if found is None:
            return
        where, ref = found
        for k in sorted(ref.keys() - RUNTIME_REF_KEYS.keys()):
            self.lose(f"{where}.{k}", NOT_HELD)
        data = {RUNTIME_REF_KEYS[k]: v for k, v in ref.items() if k in RUNTIME_REF_KEYS}
        default = RuntimeRef()
        if "name" not in data:
            self.lose(f"{where}.name", f"absent: {default.name} is written")
        defaults = {"name": default.name, "kind": default.kind, "api_group": default.api_group}
        if {**defaults, **data} != defaults:  # the default runtime needs no runtime_ref
            self.put("runtime_ref", data, where)

    def initializer(self) -> None:
        found = self.one_mapping("run.initializer")
        if found is None:
            return
        where, init = found
        data: dict[str, Any] = {}
        for kind, source in init.items():
            at = f"{where}.{kind}"
            if kind in ("dataset", "model") and isinstance(source, dict):
                data[kind] = self._initializer_source(source, at)
                self.sources[f"initializer.{kind}"] = at
            else:
                self.lose(at, NOT_HELD)
        self.put("initializer", data, where)

    def _initializer_source(self, source: dict[str, Any], at: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in source.items():
            if k == "storageUri":
                out["storage_uri"] = v
            elif k == "secretRef" and isinstance(v, dict) and set(v) == {"name"}:
                out["secret_ref"] = v["name"]
            elif k == "env" and isinstance(v, list):
                env = {}
                for item in v:
                    if _plain_env(item):
                        env[item["name"]] = item["value"]
                    else:
                        self.lose(f"{at}.env{_select(item)}", "plain values only here: dropped")
                if env:
                    out["env"] = env
            else:
                self.lose(f"{at}.{k}", NOT_HELD)
        return out

    def managed_by(self) -> None:
        found = self.one("run.managedBy")
        if found is not None and found[1] != DEFAULT_MANAGED_BY[self.kind]:
            self.put("managed_by", found[1], found[0])

    def names(self, slot: str, spec_field: str) -> None:
        """``[{name: x}, ...]`` lists (scheduling gates, pull secrets) as lists of names."""
        found = self.one(slot)
        if found is None:
            return
        where, items = found
        names = []
        for i, item in enumerate(items if isinstance(items, list) else [items]):
            if isinstance(item, dict) and set(item) == {"name"}:
                names.append(item["name"])
            else:
                self.lose(f"{where}[{i}]", f"{spec_field} holds names only: dropped")
        if names:
            self.put(spec_field, names, where)

    def num_nodes(self) -> None:
        if self.kind != trainjob.KIND:
            return  # a PyTorchJob's replicas were counted already
        found = self.one("scale.numNodes")
        if found is not None:
            self.put("num_nodes", found[1], found[0])
            return
        self.data["num_nodes"] = 1
        if "runtime_ref" in self.data:
            self.lose("spec.trainer.numNodes", "absent (the runtime's default): written as 1")

    def resources(self) -> None:
        found = self.one_mapping("container.resources")
        if found is None:
            return
        where, res = found
        requests = dict(res["requests"]) if isinstance(res.get("requests"), dict) else {}
        limits = dict(res["limits"]) if isinstance(res.get("limits"), dict) else {}
        for k in sorted(res):
            if k not in ("requests", "limits") or not isinstance(res[k], dict):
                self.lose(f"{where}.{k}", NOT_HELD)
        for group, values in (("request", requests), ("limit", limits)):
            for kind in ("cpu", "memory"):
                if kind in values:
                    self.put(f"{kind}_{group}", values.pop(kind), f"{where}.{group}s.{kind}")
        for gpu in GPU_RESOURCES:
            count = _count(limits.get(gpu))
            if count and (gpu not in requests or _count(requests[gpu]) == count):
                requests.pop(gpu, None)
                limits.pop(gpu)
                self.put("gpus_per_node", count, f"{where}.limits{paths.key(gpu)}")
                if gpu != "nvidia.com/gpu":
                    self.put("gpu_resource", gpu, f"{where}.limits{paths.key(gpu)}")
                break
        if requests:
            self.put("extra_resource_requests", requests, f"{where}.requests")
        if limits:
            self.put("extra_resource_limits", limits, f"{where}.limits")

    def nprocs(self) -> None:
        """Processes per node, left out where the spec derives the same number. Absent from the
        manifest it is ``auto``: the default of every Trainer release and of the operator."""
        found = self.one("scale.nprocPerNode")
        value: Any = "auto" if found is None else found[1]
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        if found is not None and value in ("cpu", "gpu"):
            self.lose(found[0], f"{value!r} has no spec equivalent: written as 'auto'")
            value = "auto"
        if value != (self.data.get("gpus_per_node") or 1):
            self.put("nprocs_per_node", value, found[0] if found else "")

    def environment(self) -> None:
        """The container's env list split as the spec renders it: plain values first
        (``env``), ``secret_env`` references last, anything else between (``env_list``)."""
        items: list[tuple[str, Any]] = []
        seen: dict[str, str] = {}
        where = ""
        for at, value in self.found.get("container.env", []):
            if not isinstance(value, list):
                self.lose(at, "must be a list: dropped")
                continue
            where = where or at
            for item in value:
                name = item.get("name") if isinstance(item, dict) else None
                if isinstance(name, str) and name in seen:
                    self.lose(f"{at}{_select(item)}", f"also set in {seen[name]}: dropped")
                    continue
                if isinstance(name, str):
                    seen[name] = at
                items.append((f"{at}{_select(item)}", item))
        start = 0
        while start < len(items) and _plain_env(items[start][1]):
            start += 1
        end = len(items)
        secret = f"{self.data['name']}-env"
        while end > start and _secret_env(items[end - 1][1], secret):
            end -= 1
        if start:
            self.put("env", {item["name"]: item["value"] for _, item in items[:start]}, where)
        if end > start:
            self.put("env_list", [item for _, item in items[start:end]], where)
        if end < len(items):
            self.put("secret_env", [item["name"] for _, item in items[end:]], where)
        for at, item in items[:start]:
            self.sources[f"env.{item['name']}"] = at
        for i, (at, _) in enumerate(items[start:end]):
            self.sources[f"env_list[{i}]"] = at
        for i, (at, _) in enumerate(items[end:]):
            self.sources[f"secret_env[{i}]"] = at

    def elastic(self) -> None:
        found = self.one_mapping("run.elastic")
        if found is None:
            return
        where, policy = found
        data = {ELASTIC_KEYS[k]: v for k, v in policy.items() if k in ELASTIC_KEYS}
        data.setdefault("min_nodes", self.data["num_nodes"])  # the operator's defaults
        data.setdefault("max_nodes", self.data["num_nodes"])
        for k, v in policy.items():
            if k == "nProcPerNode" and "nprocs_per_node" not in self.sources:
                self.found["scale.nprocPerNode"] = [(f"{where}.{k}", v)]  # the old place
                self.nprocs()
            elif k in DERIVED_RENDEZVOUS:
                self.lose(f"{where}.{k}", "kfcompile derives it from the job name: dropped")
            elif k not in ELASTIC_KEYS:
                self.lose(f"{where}.{k}", NOT_HELD)
        self.put("elastic", data, where)

    def scheduling_policy(self) -> None:
        found = self.one_mapping("run.schedulingPolicy")
        if found is None:
            return
        where, policy = found
        for k in sorted(policy.keys() - SCHEDULING_KEYS.keys()):
            self.lose(f"{where}.{k}", NOT_HELD)
        data = {SCHEDULING_KEYS[k]: v for k, v in policy.items() if k in SCHEDULING_KEYS}
        self.put("scheduling_policy", data, where)

    def storage(self) -> None:
        """Volumes and mounts, without the memory-backed /dev/shm that ``shm_size`` writes."""
        for slot, attr in (("pod.volumes", "volumes"), ("container.volumeMounts", "mounts")):
            found = self.one(slot)
            if found is None:
                continue
            if isinstance(found[1], list):
                setattr(self, attr, found[1])
                setattr(self, f"{attr}_at", found[0])
            else:
                self.lose(found[0], "must be a list: dropped")
        for m in self.mounts:
            if (
                isinstance(m, dict)
                and set(m) == {"name", "mountPath"}
                and m["mountPath"] == SHM_DIR
            ):
                volume = _named(self.volumes, m["name"])
                size = _shm_size(volume)
                if volume is not None and size is not None:
                    self.mounts.remove(m)
                    self.volumes.remove(volume)
                    at = self.volumes_at + paths.select("name", m["name"])
                    self.put("shm_size", size, f"{at}.emptyDir.sizeLimit")
                return

    def program(self) -> None:
        """command/args, or the launcher (and inline script) that kfcompile writes as them."""
        command = self.one("container.command")
        args = self.one("container.args")
        launcher = None
        if command is not None and args is None and _words(command[1]):
            launcher = self._launcher(command[1])
        if command is not None and launcher is not None:
            self._script(launcher)
            if not launcher["args"]:
                del launcher["args"]
            self.put("launcher", launcher, command[0])
            return
        if command is not None:
            self.put("command", command[1], command[0])
        if args is not None:
            self.put("args", args[1], args[0])

    def _launcher(self, command: list[str]) -> dict[str, Any] | None:
        kind = command[0]
        if kind not in LAUNCHERS:
            return None
        start = 1
        if self.kind == pytorchjob_v1.KIND and kind == "torchrun":  # the rendezvous flags first
            start = next(
                (i for i, w in enumerate(command) if i and (w == "-m" or not w.startswith("-"))),
                len(command),
            )
        program = _program(command[start:])
        if program is None:
            return None
        launcher = {"kind": kind, **program}
        if self.kind == pytorchjob_v1.KIND and kind == "torchrun":
            return launcher if self._renders_as(launcher, command) else None
        return launcher

    def _renders_as(self, launcher: dict[str, Any], command: list[str]) -> bool:
        """Whether the PyTorchJob target writes exactly ``command`` for this launcher."""
        keys = ("name", "num_nodes", "nprocs_per_node", "gpus_per_node", "elastic")
        data = {k: self.data[k] for k in keys if k in self.data}
        try:
            spec = structure({**data, "image": "image", "launcher": launcher})
        except SpecError:
            return False
        return pytorchjob_v1.command(spec) == command

    def _script(self, launcher: dict[str, Any]) -> None:
        """The inline script: its ConfigMap, volume and mount, exactly as kfcompile writes them."""
        entry: str | None = launcher.get("entrypoint")
        if entry is None or not entry.startswith(SCRIPT_DIR + "/"):
            return
        file_name = entry[len(SCRIPT_DIR) + 1 :]
        config_map = f"{self.data['name']}-script"
        volume = {"name": SCRIPT_VOLUME, "configMap": {"name": config_map}}
        mount = {"name": SCRIPT_VOLUME, "mountPath": SCRIPT_DIR, "readOnly": True}
        if volume not in self.volumes or mount not in self.mounts:
            return
        meta = {
            "name": config_map,
            **({"namespace": ns} if (ns := self.data.get("namespace")) else {}),
        }
        for c in self.companions:
            if c.get("kind") == "ConfigMap" and c.get("metadata") == meta:
                data = c.get("data")
                if (
                    set(c) == {"apiVersion", "kind", "metadata", "data"}
                    and isinstance(data, dict)
                    and list(data) == [file_name]
                ):
                    self.volumes.remove(volume)
                    self.mounts.remove(mount)
                    self.companions.remove(c)
                    launcher["entrypoint"] = file_name
                    self.put("script", data[file_name], f"ConfigMap {config_map}.data")
                return


# --- helpers ------------------------------------------------------------------------------------


def _strip_server_fields(obj: dict[str, Any]) -> None:
    obj.pop("status", None)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for k in SERVER_METADATA:
            meta.pop(k, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)


def _select(item: Any) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return paths.select("name", name) if isinstance(name, str) else ""


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


def _differences(a: Any, b: Any, at: Path) -> Iterator[Path]:
    """Paths (under ``at``) where ``b`` differs from ``a``; named list items matched by name."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if k in a and k in b:
                yield from _differences(a[k], b[k], (*at, k))
            else:
                yield (*at, k)
    elif isinstance(a, list) and isinstance(b, list) and _all_named(a) and _all_named(b):
        for name in dict.fromkeys([i["name"] for i in a] + [i["name"] for i in b]):
            x, y = _named(a, name), _named(b, name)
            if x is None or y is None:
                yield (*at, Select("name", name))
            else:
                yield from _differences(x, y, (*at, Select("name", name)))
    elif a != b:
        yield at


def _merge_into(target: dict[str, Any], extra: dict[str, Any], at: Path) -> Iterator[Path]:
    """Merge ``extra`` into ``target`` in place (maps by key, named lists by name); yields the
    paths below ``at`` where ``extra`` had another value (``target`` keeps its own)."""
    for k, v in extra.items():
        mine = target.get(k, _MISSING)
        if mine is _MISSING:
            target[k] = v
        elif isinstance(mine, dict) and isinstance(v, dict):
            yield from _merge_into(mine, v, (*at, k))
        elif isinstance(mine, list) and isinstance(v, list) and _all_named(mine) and _all_named(v):
            for item in v:
                same = _named(mine, item["name"])
                if same is None:
                    mine.append(item)
                else:
                    yield from _merge_into(same, item, (*at, k, Select("name", item["name"])))
        elif mine != v:
            yield (*at, k)


def _all_named(items: list[Any]) -> bool:
    return all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


def _named(items: list[Any], name: str) -> dict[str, Any] | None:
    return next((i for i in items if isinstance(i, dict) and i.get("name") == name), None)


def _shm_size(volume: Any) -> Any:
    """The size of a memory-backed emptyDir with a size limit (what ``shm_size`` renders)."""
    if not isinstance(volume, dict) or set(volume) != {"name", "emptyDir"}:
        return None
    empty = volume["emptyDir"]
    if not isinstance(empty, dict) or set(empty) != {"medium", "sizeLimit"}:
        return None
    return empty["sizeLimit"] if empty["medium"] == "Memory" else None


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _plain_env(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and set(item) == {"name", "value"}
        and isinstance(item["name"], str)
        and isinstance(item["value"], str)
    )


def _secret_env(item: Any, secret: str) -> bool:
    """An entry as ``secret_env`` renders it: the job's ``<name>-env`` Secret, key = name."""
    if not isinstance(item, dict) or set(item) != {"name", "valueFrom"}:
        return False
    return bool(item["valueFrom"] == {"secretKeyRef": {"name": secret, "key": item["name"]}})


def _words(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(w, str) for w in value)


def _entrypoint(word: str) -> bool:
    return bool(word.strip()) and not word.startswith("-")


def _program(words: list[str]) -> dict[str, Any] | None:
    """A launcher's program as kfcompile writes it: ``-m module args`` or ``file args``."""
    if words[:1] == ["-m"]:
        if len(words) < 2 or any(rules.python_module(words[1])):
            return None
        return {"module": words[1], "args": words[2:]}
    if not words or not _entrypoint(words[0]):
        return None
    return {"entrypoint": words[0], "args": words[1:]}


# --- TrainJob releases --------------------------------------------------------------------------


def _trainjob_releases(spec: Mapping[str, Any]) -> tuple[set[int], list[tuple[str, set[int]]]]:
    """The Trainer releases (minor versions) whose TrainJob has every field ``spec`` uses, and
    the fields that told."""
    features: list[tuple[str, set[int]]] = []
    for key, label, releases in (
        ("podSpecOverrides", "podSpecOverrides", {0}),
        ("podTemplateOverrides", "podTemplateOverrides", {1}),
        ("runtimePatches", "runtimePatches", {2, 3}),
        ("activeDeadlineSeconds", "activeDeadlineSeconds", {2, 3}),
        ("labels", "spec.labels", {0, 1}),
        ("annotations", "spec.annotations", {0, 1}),
    ):
        if key in spec:
            features.append((label, releases))
    if _patch_has(spec, "terminationGracePeriodSeconds"):
        features.append(("terminationGracePeriodSeconds", {3}))
    trainer = spec.get("trainer")
    if isinstance(trainer, Mapping) and isinstance(trainer.get("numProcPerNode"), str):
        features.append(("string numProcPerNode", {0, 1}))
    fitting = {0, 1, 2, 3}
    for _, releases in features:
        fitting &= releases
    return fitting, features


def _patch_has(spec: Mapping[str, Any], key: str) -> bool:
    pod_path = paths.parse("trainingRuntimeSpec.template.spec.replicatedJobs")
    for patch in spec.get("runtimePatches") or []:
        try:
            jobs = paths.get(patch, pod_path)
        except (KeyError, TypeError, AttributeError):
            continue
        for job in jobs if isinstance(jobs, list) else []:
            try:
                pod = paths.get(job, paths.parse("template.spec.template.spec"))
            except (KeyError, TypeError, AttributeError):
                continue
            if isinstance(pod, Mapping) and key in pod:
                return True
    return False


def _releases_text(releases: Iterable[int]) -> str:
    names = [f"v2.{r}" for r in sorted(releases)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _detected(releases: set[int], features: list[tuple[str, set[int]]]) -> str:
    if not features:
        return "TrainJob for any Trainer release v2.0-v2.3 (no release-specific field)"
    told = ", ".join(dict.fromkeys(f for f, _ in features))
    if releases:
        return f"TrainJob for Trainer {_releases_text(releases)} ({told})"
    parts = "; ".join(f"{f}: {_releases_text(r)}" for f, r in features)
    return f"TrainJob mixing Trainer releases ({parts})"


# --- converting ---------------------------------------------------------------------------------

# Fields a conversion never drops: without them there is no job to write.
ESSENTIAL: Final = frozenset(
    {"name", "image", "num_nodes", "command", "args", "launcher", "script"}
)


def _without(
    spec: JobSpec, problems: Sequence[Problem], imported: Imported, target: str
) -> JobSpec:
    """``spec`` without the fields ``target`` refused (see ``convert_manifest``)."""
    data = unstructure(spec)
    hard = []
    for p in problems:
        top = re.split(r"[.\[]", p.path, maxsplit=1)[0]
        if top in ESSENTIAL or top not in data:
            hard.append(Problem(imported.source_of(p.path), f"{p.message} (for {target})"))
        elif top == "env" and p.path.startswith("env."):
            data["env"].pop(p.path[len("env.") :], None)
        elif m := re.fullmatch(r"(env_list|secret_env|volume_mounts)\[(\d+)\].*", p.path):
            data[m[1]][int(m[2])] = None
        elif m := re.fullmatch(r"(pod_spec_overrides|container_overrides)\.(\w+).*", p.path):
            data[m[1]].pop(m[2], None)
        elif m := re.fullmatch(r"initializer\.(dataset|model)", p.path):
            data["initializer"].pop(m[1], None)
            if not data["initializer"]:
                del data["initializer"]
        else:
            del data[top]
    if hard:
        raise NotImportable(hard)
    for key in (
        "env",
        "env_list",
        "secret_env",
        "volume_mounts",
        "pod_spec_overrides",
        "container_overrides",
    ):
        if key in data:
            kept = (
                [v for v in data[key] if v is not None]
                if isinstance(data[key], list)
                else data[key]
            )
            data[key] = kept
            if not kept:
                del data[key]
    try:
        return structure(data)
    except SpecError as exc:
        raise NotImportable(
            [Problem(imported.source_of(p.path), p.message) for p in exc.problems]
        ) from None


def _program_losses(imported: Imported, target: Target) -> Iterator[Problem]:
    """A PyTorchJob program that needs what only the Training Operator gives it, on a TrainJob."""
    spec = imported.spec
    if imported.target != pytorchjob_v1.NAME or target.kind != trainjob.KIND:
        return
    where = imported.source_of("launcher" if spec.launcher else "command")
    words = [*spec.command, *spec.args, *(spec.launcher.args if spec.launcher else ())]
    words += list(spec.env.values())
    used = sorted(
        {
            name
            for w in words
            for m in _OPERATOR_REF.finditer(w)
            if (name := m["a"] or m["b"] or m["c"]) in OPERATOR_ENV
        }
    )
    if used:
        yield Problem(
            where,
            f"uses {', '.join(used)}, which a TrainJob does not set: kept as written (its "
            "torchrun reads the PET_* variables the runtime sets: drop the rendezvous flags)",
        )
    elif spec.num_nodes > 1 and not _runs_torchrun(spec):
        program = _program_words(spec)
        shown = " ".join(program)
        shown = repr(shown if len(shown) <= 80 else shown[:77] + "...")
        yield Problem(
            where,
            f"runs {shown} on {spec.num_nodes} nodes without torchrun: a PyTorchJob sets "
            "MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for it, a TrainJob sets only the "
            "PET_* variables torchrun reads, so the nodes cannot rendezvous (run it with "
            "torchrun, or use launcher kind torchrun): kept as written",
        )


_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_PYTHON: Final = re.compile(r"python[0-9.]*")
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
# torchrun, or its module form, as a command inside a shell script.
_TORCHRUN_IN_SCRIPT: Final = re.compile(
    r"(?:^|[\s;&|(`/])(?:torchrun|-m\s*torch\.distributed\.(?:run|launch))(?:\s|$|[;&|)`])"
)


def _program_words(spec: JobSpec) -> list[str]:
    if spec.launcher is not None:
        if spec.launcher.module is not None:
            return [spec.launcher.kind, "-m", spec.launcher.module]
        return [spec.launcher.kind, *(spec.launcher.entrypoint or "",)]
    return [*spec.command, *spec.args]


def _runs_torchrun(spec: JobSpec) -> bool:
    """Whether the job's program is torchrun (directly, as ``python -m torch.distributed.run``,
    after ``env VAR=...``, or inside a ``sh -c`` script): the one launcher that reads PET_*."""
    words = [*spec.command, *spec.args]
    if spec.launcher is not None:  # `python -m torch.distributed.run` is torchrun too
        words = [spec.launcher.kind, *base.program(spec)]
    if words and posixpath.basename(words[0]) == "env":
        words = words[1:]
        while words and (_ASSIGNMENT.fullmatch(words[0]) or words[0].startswith("-")):
            words = words[1:]
    if not words:
        return False
    program = posixpath.basename(words[0])
    if program == "torchrun":
        return True
    if _PYTHON.fullmatch(program):
        for i, w in enumerate(words[1:], 1):
            if w == "-m":
                return words[i + 1 : i + 2] in (
                    ["torch.distributed.run"],
                    ["torch.distributed.launch"],
                )
            if w.startswith("-m"):
                return w[2:] in ("torch.distributed.run", "torch.distributed.launch")
            if not w.startswith("-"):
                return False  # a script file: python train.py
        return False
    if program in _SHELLS:
        for i, w in enumerate(words[1:], 1):
            if w.startswith("-") and "c" in w[1:] and not w.startswith("--"):
                script = words[i + 1] if i + 1 < len(words) else ""
                return bool(_TORCHRUN_IN_SCRIPT.search(script))
        return False
    return False

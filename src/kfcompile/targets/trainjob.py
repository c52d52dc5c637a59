"""The part of TrainJob rendering that no Trainer release changed.

Each release module (``trainjob_v2_0`` ... ``trainjob_v2_3``) declares its placement table and a
``Release`` (with the marks that tell it from the others); this module turns a spec and a
``Release`` into the objects to apply.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from attrs import field, frozen

from kfcompile.kinds import TRAINJOB
from kfcompile.output.limits import Limit
from kfcompile.spec import object_paths, torchrun
from kfcompile.spec.errors import Problem
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.model import JobSpec
from kfcompile.targets import base, fields, kueue
from kfcompile.targets.base import Rendered, Slot, Table, Target

API_VERSION = TRAINJOB.api_version
KIND = TRAINJOB.name
# The default runtime `torch-distributed` has one replicated job and one container, both `node`.
NODE = TRAINJOB.container
MANAGERS = TRAINJOB.managers
# The Torch plugin sets these for torchrun; the webhook rejects a TrainJob that sets them.
RESERVED_ENV = frozenset(
    o.env
    for o in (
        torchrun.NNODES,
        torchrun.NPROC_PER_NODE,
        torchrun.NODE_RANK,
        torchrun.MASTER_ADDR,
        torchrun.MASTER_PORT,
    )
)
TRAINER = "spec.trainer"

# Rows no Trainer release changed. Each release module adds its pod customisation shape and
# the fields that came or went with it.
UNCHANGED: Table = {
    **base.JOB_METADATA,
    "run.runtimeRef": Slot.at("spec.runtimeRef"),
    "run.initializer": Slot.at("spec.initializer"),
    "container.image": Slot.at(f"{TRAINER}.image"),
    "container.command": Slot.at(f"{TRAINER}.command"),
    "container.args": Slot.at(f"{TRAINER}.args"),
    "scale.numNodes": Slot.at(f"{TRAINER}.numNodes"),
    "scale.nprocPerNode": Slot.at(f"{TRAINER}.numProcPerNode"),
    # env always goes to the trainer: the v2.2+ webhook forbids env patches on `node`.
    "container.env": Slot.at(f"{TRAINER}.env"),
    "container.resources": Slot.at(f"{TRAINER}.resourcesPerNode"),
    "run.suspend": Slot.at("spec.suspend"),
    "run.managedBy": Slot.at("spec.managedBy"),
    # No release has these: the runtime owns the pod image policy and the JobSet's failure policy.
    "container.imagePullPolicy": None,
    "run.backoffLimit": None,
    "run.ttlSecondsAfterFinished": None,
    "run.cleanPodPolicy": None,
    "run.restartPolicy": None,
    "run.elastic": None,  # Trainer has no PyTorch elastic
    "run.schedulingPolicy": None,
}


# The upstream ClusterTrainingRuntimes (../shared/crds/runtimes) and their replicated jobs. Trainer
# fills `spec.initializer` into the `<kind>-initializer` jobs only and applies overrides by
# container name, so asking a runtime for what it lacks is dropped without a word (or, from
# v2.3, appended broken). Render, which sees no cluster, takes another runtime to have what the
# spec names (`node`, and the initializer jobs of the initializers the spec sets); submit reads
# the runtime and checks it (`kfcompile.lifecycle.runtimes`).
UPSTREAM_RUNTIMES: dict[str, tuple[str, ...]] = {
    "torch-distributed": (NODE,),
    "torch-distributed-with-cache": ("dataset-initializer", NODE),
    "deepspeed-distributed": (NODE, "launcher"),
}
INITIALIZERS = ("dataset", "model")
# JobSet names pods `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<5 random characters>`
# and its webhook refuses a JobSet whose longest pod name is no DNS label. Every replicated
# job has one Job; only `node` runs one pod per training node.
POD_SUFFIX = "-{job}-0-{last}-xxxxx"


def runtime_jobs(spec: JobSpec) -> tuple[str, ...]:
    """The replicated jobs of the runtime the spec runs on, as far as kfcompile can know."""
    runtime = spec.runtime
    if runtime.kind == "ClusterTrainingRuntime" and runtime.name in UPSTREAM_RUNTIMES:
        return UPSTREAM_RUNTIMES[runtime.name]
    wanted = [k for k in INITIALIZERS if spec.initializer and getattr(spec.initializer, k)]
    return (*(f"{k}-initializer" for k in wanted), NODE)


def pod_suffixes(spec: JobSpec) -> list[str]:
    return [
        POD_SUFFIX.format(job=job, last=spec.num_nodes - 1 if job == NODE else 0)
        for job in runtime_jobs(spec)
    ]


UPSTREAM_NODE_CONTAINERS = frozenset({NODE})


@frozen(repr=False, slots=False)
class Mark:
    """A field some Trainer releases' TrainJobs have and others lack: ``path`` from the
    TrainJob's root (``[]``: any item of a list) whose value is a ``holds`` (a string
    ``numProcPerNode`` is v2.0-v2.1's); ``label`` is how the importer names it. As a CRD mark,
    the path is looked up in the served CRD's schema."""

    label: str
    path: str
    holds: type = object

    @property
    def keys(self) -> tuple[str, ...]:
        """The path's steps: keys, and ``[]`` for any item of a list."""
        steps: list[str] = []
        for part in self.path.split("."):
            key = part.removesuffix("[]")
            steps += [key] if key == part else [key, "[]"]
        return tuple(steps)

    def found_in(self, job: Any) -> bool:
        """Whether the TrainJob ``job`` has a ``holds`` at the path (in any item of a list)."""
        return _holds(job, self.keys, self.holds)


def _holds(node: Any, keys: tuple[str, ...], holds: type) -> bool:
    if not keys:
        return isinstance(node, holds)
    key, rest = keys[0], keys[1:]
    if key == "[]":
        return isinstance(node, list) and any(_holds(item, rest, holds) for item in node)
    return isinstance(node, Mapping) and key in node and _holds(node[key], rest, holds)


@frozen(repr=False, eq=False, slots=False)
class Release:
    """One Trainer release: its version and placement table, what its TrainJob can hold beyond
    the table, and how it is told from the others. Detection
    (``kfcompile.lifecycle.target_evidence``) and the
    importer read these through the registry (``kfcompile.targets``), so a release is its
    module and a line there."""

    version: tuple[int, int]  # (major, minor): patch releases change no API
    table: Table
    # A field its CRD's schema has that no older release's has (detection asks newest first).
    crd_mark: Mark
    # Every field its TrainJob may have that some other release's lacks: a manifest with one is
    # of a release that lists it.
    marks: tuple[Mark, ...]
    override_list: str | None = None  # v2.0/v2.1: the list whose items need `targetJobs` first
    max_command_items: int | None = None  # v2.2+: command and args hold at most this many
    patches_node_env: bool = True  # v2.2+: the webhook forbids env patches on `node`
    # v2.0/v2.1: the override's `node` env and the trainer's env fill one container's env.
    mirrors: tuple[base.Mirror, ...] = ()
    # What its CRD bounds (`output.limits`): render checks its output by them.
    limits: tuple[Limit, ...] = field(kw_only=True)
    name: str = field(init=False)
    layout: base.Layout = field(init=False, eq=False, repr=False)
    target: Target = field(init=False, eq=False, repr=False)  # its registry entry

    def __attrs_post_init__(self) -> None:
        major, minor = self.version
        object.__setattr__(self, "name", f"trainjob/v{major}.{minor}")
        object.__setattr__(self, "layout", base.Layout(self.table))
        target = Target(
            self.name,
            API_VERSION,
            KIND,
            f"Trainer v{major}.{minor}.x",
            self.table,
            functools.partial(render, release=self),
            pod_suffixes,
            self.layout,
            limits=self.limits,
            whole_pods=False,  # a TrainJob patches its runtime's pods
        )
        object.__setattr__(self, "target", target)


def command(spec: JobSpec) -> list[str] | None:
    """torchrun reads its rendezvous settings from the PET_* variables the runtime injects."""
    if spec.launcher is None:
        return None
    return [spec.launcher.kind, *base.program(spec)]


def _problems(spec: JobSpec, release: Release) -> Iterator[Problem]:
    # (from v2.2 an env patch on `node` is an error of its own: `_override_containers`)
    patched = NODE if release.patches_node_env else None
    yield from base.launcher_env(
        spec, RESERVED_ENV, "reserved on TrainJob: the Torch runtime sets it", patched
    )
    yield from base.pod_name_budget(spec.name, pod_suffixes(spec), "a TrainJob (JobSet pods)")
    yield from base.launcher_args(spec, NODE)
    yield from base.training_mounts(spec, NODE)
    if base.lookup(release.table, "pod.annotations") is not None:  # else: not supported
        yield from kueue.topology_problems(spec, {NODE: spec.num_nodes}, "a TrainJob")
    runtime = spec.runtime
    upstream = runtime.kind == "ClusterTrainingRuntime" and runtime.name in UPSTREAM_RUNTIMES
    if upstream and spec.initializer is not None:
        for kind in INITIALIZERS:
            if getattr(spec.initializer, kind) and f"{kind}-initializer" not in runtime_jobs(spec):
                yield Problem(
                    FieldPath.of("initializer", kind),
                    f"runtime {runtime.name} has no {kind}-initializer job; set runtime_ref to "
                    "one that has",
                )
    mounted: set[str] = set()
    for i, m in enumerate(spec.volume_mounts):
        if m["name"] in mounted:  # the TrainJob CRDs key a container's mounts by volume name
            at = FieldPath.of("volume_mounts", i, "name")
            yield Problem(at, "TrainJob mounts each volume once")
        mounted.add(m["name"])
    if spec.managed_by is not None and spec.managed_by not in MANAGERS:
        yield Problem("managed_by", f"TrainJob accepts only: {', '.join(MANAGERS)}")
    most = release.max_command_items
    if most is not None:
        limit = f"at most {most} items from this release"
        if len(command(spec) or spec.command) > most:
            yield Problem("launcher" if spec.launcher else "command", limit)
        if len(spec.args) > most:
            yield Problem("args", limit)
    if upstream:
        yield from _override_containers(spec, release)


def _override_containers(spec: JobSpec, release: Release) -> Iterator[Problem]:
    """Overridden containers must be ones the upstream runtime's `node` job has."""
    for key in ("containers", "initContainers"):
        items = spec.pod_spec_overrides.get(key, [])
        for i, item in enumerate(items if isinstance(items, list) else []):
            name = item.get("name") if isinstance(item, dict) else None
            at = FieldPath.of("pod_spec_overrides", key, i)
            if key == "initContainers" or name not in UPSTREAM_NODE_CONTAINERS:
                yield Problem(at / "name", f"runtime {spec.runtime.name} has no such {key[:-1]}")
            elif "env" in item and not release.patches_node_env:
                yield Problem(at / "env", "the webhook refuses env patches on node: use env")


def render(spec: JobSpec, release: Release) -> Rendered:
    """Render ``spec`` as a TrainJob of ``release``."""
    job: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {},
        "spec": {"runtimeRef": fields.runtime_ref(spec.runtime)},
    }
    objects = base.with_companions(spec, job)
    index = len(objects) - 1
    items = list(fields.entries(spec, command(spec)))
    problems = list(_problems(spec, release))
    placed = base.place(job, index, items, release.layout, release.name, problems, release.mirrors)
    if release.override_list is not None:
        for item in _get_list(job, release.override_list):
            rest = {k: v for k, v in item.items() if k != "targetJobs"}
            item.clear()
            item.update({"targetJobs": [{"name": NODE}], **rest})
    return base.checked(Rendered(objects, placed), release.target)


def _get_list(doc: dict[str, Any], where: str) -> list[dict[str, Any]]:
    try:
        found = object_paths.get(doc, object_paths.parse(where))
    except KeyError:
        return []
    return list(found)

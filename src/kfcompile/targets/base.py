"""What every target shares: the spec broken into neutral *slots*, and the engine that places them.

A spec becomes a list of ``Entry`` values, each naming the spec field it came from (``source``),
a neutral slot (``pod.tolerations``, ``container.env``), an optional sub-path inside the slot
(``[name=FOO]``) and the value. Each target module declares a table from slot to output path;
``render`` walks the entries through that table. ``explain`` is the same walk, reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from attrs import field, frozen

from kfcompile import paths
from kfcompile.errors import Problem, UnsupportedFeature
from kfcompile.paths import copied
from kfcompile.spec import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SCRIPT_DIR,
    SCRIPT_VOLUME,
    SHM_DIR,
    SHM_VOLUME,
    WORKDIR_VOLUME,
    JobSpec,
)


class Entry(NamedTuple):
    source: str  # spec field path, as a user writes it
    slot: str  # neutral slot name, looked up in a target's table
    value: Any
    sub: str = ""  # path below the slot, e.g. '[name=FOO]' or '.requests.cpu'
    merge: bool = False  # deep-merge into what is there (the escape hatches)


def _identity(value: Any) -> Any:
    return value


@frozen
class Slot:
    """Where a slot lands in one target: one or more paths, and how the value is written."""

    paths: tuple[str, ...]
    convert: Callable[[Any], Any] = _identity

    @classmethod
    def at(cls, *where: str, convert: Callable[[Any], Any] = _identity) -> Slot:
        return cls(where, convert)


OMIT = object()  # a converter's answer for "write nothing here" (e.g. numProcPerNode auto)

# Every job is a Kubernetes object: its identity lands in its own metadata on every target.
JOB_METADATA: Mapping[str, Slot] = {
    "job.name": Slot.at("metadata.name"),
    "job.namespace": Slot.at("metadata.namespace"),
    "job.labels": Slot.at("metadata.labels"),
    "job.annotations": Slot.at("metadata.annotations"),
}


class Placement(NamedTuple):
    """One value as it landed: the explain row and what the property tests read back."""

    source: str
    doc: int  # index into the rendered object list
    path: str
    value: Any
    merge: bool = False


@frozen
class Rendered:
    objects: list[dict[str, Any]]
    placements: list[Placement] = field(factory=list)


Table = Mapping[str, "Slot | None"]  # None (or no row): the target cannot express this slot


def rows(group: str, prefix: str, names: tuple[str, ...]) -> dict[str, Slot]:
    """Slots ``<group>.<name>`` that land at ``<prefix>.<name>``, e.g. the pod fields a release
    lets a TrainJob override."""
    return {f"{group}.{n}": Slot.at(f"{prefix}.{n}") for n in names}


def _no_pods(spec: JobSpec) -> list[str]:
    return []


@frozen
class Target:
    """One output shape: what ``kfcompile targets`` lists and ``render`` dispatches on."""

    name: str
    api_version: str
    kind: str
    releases: str
    table: Table
    render: Callable[[JobSpec], Rendered]
    # What the controllers append to the job's name to name its pods, for this spec.
    pod_suffixes: Callable[[JobSpec], list[str]] = _no_pods

    def name_limit(self, spec: JobSpec) -> int:
        """The longest job name this target can give ``spec`` (it depends on the number of
        nodes and the runtime); ``render`` refuses longer ones. For launchers that make names."""
        return name_limit(self.pod_suffixes(spec))


# --- the spec in neutral slots ------------------------------------------------------------------


def _keyed(field: str, slot: str, mapping: Mapping[str, str]) -> Iterator[Entry]:
    """One entry per key of a map field (labels, annotations, node selector)."""
    for k, v in mapping.items():
        yield Entry(f"{field}{paths.key(k)}", slot, v, paths.key(k))


def _env_var(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def entries(spec: JobSpec, command: list[str] | None) -> Iterator[Entry]:
    """The spec as neutral entries, in the order they should appear in the output.

    ``command`` is the target's launcher command (it differs by kind), or None.
    """
    yield Entry("name", "job.name", spec.name)
    if spec.namespace:
        yield Entry("namespace", "job.namespace", spec.namespace)
    yield from _keyed("labels", "job.labels", spec.labels)
    if spec.queue:
        yield Entry("queue", "job.labels", spec.queue, paths.key(QUEUE_LABEL))
    if spec.priority_class:
        yield Entry("priority_class", "job.labels", spec.priority_class, paths.key(PRIORITY_LABEL))
    yield from _keyed("annotations", "job.annotations", spec.annotations)

    if spec.runtime_ref is not None:
        r = spec.runtime_ref
        yield Entry("runtime_ref.name", "run.runtimeRef", r.name, ".name")
        yield Entry("runtime_ref.api_group", "run.runtimeRef", r.api_group, ".apiGroup")
        yield Entry("runtime_ref.kind", "run.runtimeRef", r.kind, ".kind")
    if spec.initializer is not None:
        if spec.initializer.dataset is None and spec.initializer.model is None:
            yield Entry("initializer", "run.initializer", {})
        for kind in ("dataset", "model"):
            src = getattr(spec.initializer, kind)
            if src is None:
                continue
            base = f"initializer.{kind}"
            yield Entry(
                f"{base}.storage_uri", "run.initializer", src.storage_uri, f".{kind}.storageUri"
            )
            for k, v in src.env.items():
                yield Entry(
                    f"{base}.env.{k}",
                    "run.initializer",
                    _env_var(k, v),
                    f".{kind}.env" + paths.select("name", k),
                )
            if src.secret_ref:
                yield Entry(
                    f"{base}.secret_ref",
                    "run.initializer",
                    src.secret_ref,
                    f".{kind}.secretRef.name",
                )

    yield from _container(spec, command)
    yield from _keyed("runtime_labels", "runtime.labels", spec.runtime_labels)
    yield from _keyed("runtime_annotations", "runtime.annotations", spec.runtime_annotations)
    yield from _keyed("pod_labels", "pod.labels", spec.pod_labels)
    yield from _keyed("pod_annotations", "pod.annotations", spec.pod_annotations)
    yield from _mounts(spec)
    yield from _pod(spec)
    yield from _run_policy(spec)
    for k, v in spec.container_overrides.items():
        yield Entry(f"container_overrides.{k}", f"container.{k}", copied(v), merge=True)
    for k, v in spec.pod_spec_overrides.items():
        yield Entry(f"pod_spec_overrides.{k}", f"pod.{k}", copied(v), merge=True)


def _container(spec: JobSpec, command: list[str] | None) -> Iterator[Entry]:
    yield Entry("image", "container.image", spec.image)
    if spec.image_pull_policy:
        yield Entry("image_pull_policy", "container.imagePullPolicy", spec.image_pull_policy)
    if command is not None:
        yield Entry("launcher", "container.command", command)
    elif spec.command:
        yield Entry("command", "container.command", list(spec.command))
        if spec.args:
            yield Entry("args", "container.args", list(spec.args))
    yield Entry("num_nodes", "scale.numNodes", spec.num_nodes)
    yield Entry("nprocs_per_node", "scale.nprocPerNode", spec.nprocs)

    for k, v in spec.env.items():
        yield Entry(f"env.{k}", "container.env", _env_var(k, v), paths.select("name", k))
    for i, item in enumerate(spec.env_list):
        yield Entry(
            f"env_list[{i}]", "container.env", copied(item), paths.select("name", item["name"])
        )
    for i, name in enumerate(spec.secret_env):
        yield Entry(
            f"secret_env[{i}]",
            "container.env",
            {"name": name, "valueFrom": {"secretKeyRef": {"name": spec.secret_name, "key": name}}},
            paths.select("name", name),
        )

    res: list[tuple[str, str, str | None]] = [
        ("cpu_request", "requests", spec.cpu_request),
        ("memory_request", "requests", spec.memory_request),
        ("cpu_limit", "limits", spec.cpu_limit),
        ("memory_limit", "limits", spec.memory_limit),
    ]
    for source, group, value in res:
        if value is not None:
            yield Entry(source, "container.resources", value, f".{group}.{source.split('_')[0]}")
    gpu = paths.key(spec.gpu_resource)
    if spec.gpus_per_node:
        # GPUs cannot be overcommitted: the limit is required, the request must equal it.
        for group in ("requests", "limits"):
            yield Entry(
                "gpus_per_node", "container.resources", str(spec.gpus_per_node), f".{group}{gpu}"
            )
    for source, group, extra in [
        ("extra_resource_requests", "requests", spec.extra_resource_requests),
        ("extra_resource_limits", "limits", spec.extra_resource_limits),
    ]:
        for k, v in extra.items():
            yield Entry(
                f"{source}{paths.key(k)}", "container.resources", v, f".{group}{paths.key(k)}"
            )


def _mounts(spec: JobSpec) -> Iterator[Entry]:
    for i, m in enumerate(spec.volume_mounts):
        yield Entry(
            f"volume_mounts[{i}]",
            "container.volumeMounts",
            copied(m),
            paths.select("mountPath", m["mountPath"]),
        )
    if spec.shm_size:
        yield Entry(
            "shm_size",
            "container.volumeMounts",
            {"name": SHM_VOLUME, "mountPath": SHM_DIR},
            paths.select("mountPath", SHM_DIR),
        )
    if spec.script is not None:
        yield Entry(
            "script",
            "container.volumeMounts",
            {"name": SCRIPT_VOLUME, "mountPath": SCRIPT_DIR, "readOnly": True},
            paths.select("mountPath", SCRIPT_DIR),
        )
    if spec.work_dir is not None:
        yield Entry(
            "work_dir",
            "container.volumeMounts",
            {"name": WORKDIR_VOLUME, "mountPath": spec.work_dir.mount_path},
            paths.select("mountPath", spec.work_dir.mount_path),
        )


def _pod(spec: JobSpec) -> Iterator[Entry]:
    if spec.service_account_name:
        yield Entry("service_account_name", "pod.serviceAccountName", spec.service_account_name)
    yield from _keyed("node_selector", "pod.nodeSelector", spec.node_selector)
    if spec.tolerations:
        yield Entry("tolerations", "pod.tolerations", copied(spec.tolerations))
    if spec.affinity is not None:
        yield Entry("affinity", "pod.affinity", copied(spec.affinity))
    if spec.scheduling_gates:
        yield Entry(
            "scheduling_gates", "pod.schedulingGates", [{"name": g} for g in spec.scheduling_gates]
        )
    if spec.image_pull_secrets:
        yield Entry(
            "image_pull_secrets",
            "pod.imagePullSecrets",
            [{"name": s} for s in spec.image_pull_secrets],
        )
    if spec.termination_grace_period_seconds is not None:
        yield Entry(
            "termination_grace_period_seconds",
            "pod.terminationGracePeriodSeconds",
            spec.termination_grace_period_seconds,
        )
    for i, volume in enumerate(spec.volumes):
        yield Entry(
            f"volumes[{i}]", "pod.volumes", copied(volume), paths.select("name", volume["name"])
        )
    if spec.shm_size:
        yield Entry(
            "shm_size",
            "pod.volumes",
            {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}},
            paths.select("name", SHM_VOLUME),
        )
    if spec.script is not None:
        yield Entry(
            "script",
            "pod.volumes",
            {"name": SCRIPT_VOLUME, "configMap": {"name": script_configmap_name(spec)}},
            paths.select("name", SCRIPT_VOLUME),
        )
    if spec.work_dir is not None:
        yield Entry(
            "work_dir",
            "pod.volumes",
            {"name": WORKDIR_VOLUME, "persistentVolumeClaim": {"claimName": spec.work_dir.pvc}},
            paths.select("name", WORKDIR_VOLUME),
        )


def _run_policy(spec: JobSpec) -> Iterator[Entry]:
    simple = [
        ("suspend", "run.suspend", spec.suspend),
        ("managed_by", "run.managedBy", spec.managed_by),
        ("active_deadline_seconds", "run.activeDeadlineSeconds", spec.active_deadline_seconds),
        ("backoff_limit", "run.backoffLimit", spec.backoff_limit),
        (
            "ttl_seconds_after_finished",
            "run.ttlSecondsAfterFinished",
            spec.ttl_seconds_after_finished,
        ),
        ("clean_pod_policy", "run.cleanPodPolicy", spec.clean_pod_policy),
        ("restart_policy", "run.restartPolicy", spec.restart_policy),
    ]
    for source, slot, value in simple:
        if value is not None:
            yield Entry(source, slot, value)
    if spec.elastic is not None:
        e = spec.elastic
        yield Entry("elastic.min_nodes", "run.elastic", e.min_nodes, ".minReplicas")
        yield Entry("elastic.max_nodes", "run.elastic", e.max_nodes, ".maxReplicas")
        yield Entry("elastic.rdzv_backend", "run.elastic", e.rdzv_backend, ".rdzvBackend")
        yield Entry("elastic.rdzv_port", "run.elastic", e.rdzv_port, ".rdzvPort")
        if e.max_restarts is not None:
            yield Entry("elastic.max_restarts", "run.elastic", e.max_restarts, ".maxRestarts")
    if spec.scheduling_policy is not None:
        p = spec.scheduling_policy
        policy: list[tuple[str, str, Any]] = [
            ("min_available", ".minAvailable", p.min_available),
            ("queue", ".queue", p.queue),
            ("min_resources", ".minResources", dict(p.min_resources) or None),
            ("priority_class", ".priorityClass", p.priority_class),
            ("schedule_timeout_seconds", ".scheduleTimeoutSeconds", p.schedule_timeout_seconds),
        ]
        given = [(source, sub, value) for source, sub, value in policy if value is not None]
        for source, sub, value in given:
            yield Entry(f"scheduling_policy.{source}", "run.schedulingPolicy", value, sub)
        if not given:  # an empty policy is still a policy the target must be able to hold
            yield Entry("scheduling_policy", "run.schedulingPolicy", {})


# --- launchers ------------------------------------------------------------------------------


def entrypoint_path(spec: JobSpec) -> str:
    """The file the launcher runs: the inline script's, else ``launcher.entrypoint``."""
    if spec.script is not None:
        return f"{SCRIPT_DIR}/{spec.script_entrypoint}"
    assert spec.launcher is not None and spec.launcher.entrypoint
    return spec.launcher.entrypoint


def program(spec: JobSpec) -> list[str]:
    """The program and its arguments, exactly as written: no shell ever sees them. A module
    runs as ``-m module``, which python and torchrun (``-m``/``--module``) both take."""
    assert spec.launcher is not None
    if spec.launcher.module is not None:
        return ["-m", spec.launcher.module, *spec.launcher.args]
    return [entrypoint_path(spec), *spec.launcher.args]


DNS_LABEL_MAX = 63  # pod names become hostnames (and PyTorchJob Service names): DNS labels


def name_limit(suffixes: Iterable[str]) -> int:
    """The longest name for which every ``<name><suffix>`` is a DNS label."""
    return DNS_LABEL_MAX - max((len(s) for s in suffixes), default=0)


def pod_name_budget(name: str, suffixes: Iterable[str], who: str) -> Iterator[Problem]:
    """The job's pods are named ``<name><suffix>``; each must be a DNS label (at most 63).

    A name over the budget is accepted by the API server and then never gets pods, so it is
    an error here, naming the pod name that would be too long and the longest name that fits.
    """
    longest = max(suffixes, key=len)
    pod = name + longest
    if len(pod) > DNS_LABEL_MAX:
        yield Problem(
            "name",
            f"too long for {who}: pod name {pod!r} would be {len(pod)} characters (a DNS "
            f"label allows {DNS_LABEL_MAX}); this spec allows names of at most "
            f"{name_limit([longest])} characters",
        )


def script_configmap_name(spec: JobSpec) -> str:
    return f"{spec.name}-script"


def with_companions(spec: JobSpec, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects to apply, in order: companions the job refers to first, the job last."""
    return [script_configmap(spec), job] if spec.script is not None else [job]


def script_configmap(spec: JobSpec) -> dict[str, Any]:
    assert spec.script is not None
    meta: dict[str, Any] = {"name": script_configmap_name(spec)}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {spec.script_entrypoint: spec.script},
    }


# --- the engine -------------------------------------------------------------------------------


_resolved: dict[tuple[int, str], Slot | None] = {}  # tables are module constants


def lookup(table: Table, slot: str) -> Slot | None:
    """Where ``slot`` lands: its own row, else a wildcard row such as ``pod.*``; None if nowhere."""
    cache_key = (id(table), slot)
    if cache_key not in _resolved:
        found = table.get(slot, OMIT)
        if found is OMIT:
            group, _, rest = slot.partition(".")
            wildcard = table.get(f"{group}.*")
            found = wildcard and Slot(
                tuple(p + paths.key(rest) for p in wildcard.paths), wildcard.convert
            )
        assert found is None or isinstance(found, Slot)
        _resolved[cache_key] = found
    return _resolved[cache_key]


# Every target, by name: filled by the registry (`kfcompile.targets`), which imports the target
# modules, so that the engine can name the targets that would express a misfit without
# importing the registry back.
REGISTRY: dict[str, Target] = {}


def supported_by(slot: str) -> list[str]:
    """Every target whose table can express ``slot``, for error messages."""
    return [t.name for t in REGISTRY.values() if lookup(t.table, slot) is not None]


def place(
    doc: dict[str, Any],
    index: int,
    items: list[Entry],
    table: Table,
    target: str,
    problems: list[Problem] | None = None,
) -> list[Placement]:
    """Write every entry into ``doc`` through ``table``.

    Raises one ``UnsupportedFeature`` naming every misfit, after any ``problems`` the target
    found itself, so a user sees everything wrong at once.
    """
    placed: list[Placement] = []
    misfits: dict[str, Problem] = {}  # one line per top-level spec field
    builder = paths.Builder(doc)
    for e in items:
        slot = lookup(table, e.slot)
        if slot is None:
            field = re.split(r"[.\[]", e.source, maxsplit=1)[0]
            if e.merge:  # an escape hatch names the key the target lacks
                field = e.source
            others = supported_by(e.slot)
            where = f"supported by: {', '.join(others)}" if others else "no target supports it"
            misfits.setdefault(field, Problem(field, f"not supported by {target} ({where})"))
            continue
        value = e.value if slot.convert is _identity else slot.convert(e.value)
        if value is OMIT:
            continue
        for i, where in enumerate(slot.paths):
            text = where + e.sub
            try:
                builder.put(paths.parse(text), paths.copied(value) if i else value, e.merge)
            except paths.MergeConflict as exc:
                misfits.setdefault(e.source, Problem(e.source, str(exc)))
                break
            placed.append(Placement(e.source, index, text, value, e.merge))
    if problems or misfits:
        raise UnsupportedFeature([*(problems or ()), *misfits.values()])
    return placed

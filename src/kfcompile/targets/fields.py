"""The one field table: each spec field, the neutral slot it fills, and how its value is written.

``render`` walks ``FIELDS`` forward (``entries``: the spec as ``Entry`` values, in output order);
the importer walks it backward (each row's ``codec.decode``); ``reference`` and the README read
it directly. A target's own table (``targets/<target>.py``) says where each slot lands; the two
together, resolved when the target is built, are ``Target.fields``.

A row is a spec field path (``runtime_ref.name``), a slot (``run.runtimeRef``), a sub-path below
the slot (``.name``) and a codec. Rows whose field is inside a part (``elastic.*``) render the
part as ``{}`` when the part is set but none of its rows wrote anything. The few parts of a spec
that are no row (the program, processes per node, the environment, GPUs, and the volumes
kfcompile adds itself) are ``Special`` steps: plain code, placed in the table where they render.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, Protocol

from attrs import field, frozen

from kfcompile.paths import FieldPath, Path, Select, copied, key, select
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
    at: FieldPath = FieldPath()  # the spec field a target that cannot hold it names


class Decoded(NamedTuple):
    """A slot value read back: the spec value (or ``SKIP`` / ``LEAVE``), the parts of the input
    that are lost (a path below the value, why), and finer sources (spec parts below the field,
    input parts below the value)."""

    value: Any
    losses: tuple[tuple[Path, str], ...] = ()
    sources: tuple[tuple[Path, Path], ...] = ()


SKIP = object()  # decoded: the value is read, the spec gets nothing from it
LEAVE = object()  # decoded: not this field's (another row takes it, or it is reported as lost)


class Codec(Protocol):
    def encode(self, row: Field, value: Any, out: list[Entry]) -> None: ...

    def decode(self, row: Field, value: Any) -> Decoded: ...


_SCALARS = frozenset({str, int, bool, float})


def _is_empty(value: Any) -> bool:
    return isinstance(value, str | tuple | list | Mapping) and not value


@frozen
class Value:
    """The value as it stands; ``empty``: an empty one renders nothing (and reads as nothing)."""

    empty: bool = False

    def encode(self, row: Field, value: Any, out: list[Entry]) -> None:
        if not (self.empty and _is_empty(value)):
            value = value if type(value) in _SCALARS else copied(value)
            out.append(Entry(row.source, row.slot, value, row.sub, False, row.at))

    def decode(self, row: Field, value: Any) -> Decoded:
        return Decoded(LEAVE if self.empty and (value is None or _is_empty(value)) else value)


@frozen
class Keyed:
    """A map: one entry per key, each at its own key below the slot."""

    def encode(self, row: Field, value: Mapping[str, Any], out: list[Entry]) -> None:
        source, slot, sub, at = row.source, row.slot, row.sub, row.at
        for k, v in value.items():
            out.append(Entry(source + key(k), slot, v, sub + key(k), False, at))

    def decode(self, row: Field, value: Any) -> Decoded:
        if not isinstance(value, dict):
            return Decoded(LEAVE)
        return Decoded(dict(value) if value else SKIP)


@frozen
class Names:
    """A list of names as the list of ``{name: ...}`` Kubernetes writes (gates, pull secrets)."""

    def encode(self, row: Field, value: tuple[str, ...], out: list[Entry]) -> None:
        if value:
            names = [{"name": n} for n in value]
            out.append(Entry(row.source, row.slot, names, row.sub, False, row.at))

    def decode(self, row: Field, value: Any) -> Decoded:
        names, losses = [], []
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, dict) and set(item) == {"name"}:
                names.append(item["name"])
            else:
                losses.append(((i,), f"{row.at.top} holds names only: dropped"))
        return Decoded(names or SKIP, tuple(losses))


@frozen
class Items:
    """A list of Kubernetes objects, each the list item whose ``by`` is its own."""

    by: str

    def encode(self, row: Field, value: tuple[Mapping[str, Any], ...], out: list[Entry]) -> None:
        for i, item in enumerate(value):
            sub = row.sub + select(self.by, item[self.by])
            out.append(Entry(f"{row.source}[{i}]", row.slot, copied(item), sub, False, row.at))

    def decode(self, row: Field, value: Any) -> Decoded:
        if not isinstance(value, list):
            return Decoded(SKIP, (((), "must be a list: dropped"),))
        found = tuple(((i,), (item_segment(item, i),)) for i, item in enumerate(value))
        return Decoded(value or SKIP, sources=found)


@frozen
class EnvPairs:
    """A map of environment variables as the ``{name, value}`` list of a container's env."""

    def encode(self, row: Field, value: Mapping[str, str], out: list[Entry]) -> None:
        for k, v in value.items():
            sub = row.sub + select("name", k)
            out.append(Entry(row.source + key(k), row.slot, env_var(k, v), sub, False, row.at))

    def decode(self, row: Field, value: Any) -> Decoded:
        if not isinstance(value, list):
            return Decoded(LEAVE)
        env, losses = {}, []
        for i, item in enumerate(value):
            if plain_env(item):
                env[item["name"]] = item["value"]
            else:
                losses.append(((item_segment(item, i),), "plain values only here: dropped"))
        return Decoded(env or SKIP, tuple(losses))


@frozen
class Hatch:
    """An escape hatch: each key deep-merged into the slot of that name in its group (``pod.*``);
    read back from what the typed slots leave in the pod and the container."""

    def encode(self, row: Field, value: Mapping[str, Any], out: list[Entry]) -> None:
        for k, v in value.items():
            at = row.at / k
            out.append(Entry(str(at), self.slot(row, k), copied(v), "", True, at))

    @staticmethod
    def slot(row: Field, key: str) -> str:
        """The slot a key lands in: ``pod_spec_overrides.hostNetwork`` -> ``pod.hostNetwork``."""
        return f"{row.slot.removesuffix('.*')}.{key}"

    def decode(self, row: Field, value: Any) -> Decoded:
        return Decoded(LEAVE)  # the importer's escape hatches read what is left over


VALUE = Value()
NONEMPTY = Value(empty=True)
KEYED = Keyed()
NAMES = Names()
HATCH = Hatch()


@frozen
class Field:
    """One row: the spec field at ``source`` fills ``slot`` at ``sub``, written by ``codec``."""

    source: str
    slot: str
    sub: str = ""
    codec: Codec = VALUE
    chain: tuple[str, ...] = field(init=False)  # the attributes, e.g. (runtime_ref, name)
    at: FieldPath = field(init=False)  # the top-level field: what an error names
    part: str | None = field(init=False)  # the part the row is inside (``elastic``), if any

    def __attrs_post_init__(self) -> None:
        chain = tuple(self.source.split("."))  # spec attribute names: plain identifiers
        object.__setattr__(self, "chain", chain)
        object.__setattr__(self, "at", FieldPath.of(chain[0]))
        object.__setattr__(self, "part", chain[0] if len(chain) > 1 else None)


Render = Callable[[JobSpec, "list[str] | None"], Iterator[Entry]]


@frozen
class Special:
    """A step of the table written as code: what it feeds (spec field, slot) and how it
    renders; the importer reads it back with code of its own."""

    name: str
    feeds: tuple[tuple[str, str], ...]
    render: Render


# --- the special cases --------------------------------------------------------------------------


def env_var(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def plain_env(item: Any) -> bool:
    """An env entry ``env_var`` writes: a string name and a string value, nothing else."""
    return (
        isinstance(item, dict)
        and set(item) == {"name", "value"}
        and isinstance(item["name"], str)
        and isinstance(item["value"], str)
    )


def item_segment(item: Any, index: int) -> Select | int:
    """How a list item is named in a path: by its ``name`` when it has one, else its index."""
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return Select("name", item["name"])
    return index


def secret_env_var(name: str, secret: str) -> dict[str, Any]:
    """A ``secret_env`` entry: the value of key ``name`` in the job's Secret."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}}


_SPECIAL_FIELDS = ("launcher", "command", "args", "nprocs_per_node", "gpus_per_node", "env")
_AT = {
    f: FieldPath.of(f)
    for f in (*_SPECIAL_FIELDS, "env_list", "secret_env", "shm_size", "script", "work_dir")
}


def _program(spec: JobSpec, command: list[str] | None) -> Iterator[Entry]:
    """The launcher's command (each target builds its own), or command and args as written."""
    if command is not None:
        yield Entry("launcher", "container.command", command, at=_AT["launcher"])
    elif spec.command:
        yield Entry("command", "container.command", list(spec.command), at=_AT["command"])
        if spec.args:
            yield Entry("args", "container.args", list(spec.args), at=_AT["args"])


def _nprocs(spec: JobSpec, _: list[str] | None) -> Iterator[Entry]:
    at = _AT["nprocs_per_node"]
    yield Entry("nprocs_per_node", "scale.nprocPerNode", spec.nprocs, at=at)  # derived


def _env(spec: JobSpec, _: list[str] | None) -> Iterator[Entry]:
    """One env list, in this order: ``env``, ``env_list``, ``secret_env``."""
    env, listed, secret = _AT["env"], _AT["env_list"], _AT["secret_env"]
    for k, v in spec.env.items():
        yield Entry(f"env{key(k)}", "container.env", env_var(k, v), select("name", k), at=env)
    for i, item in enumerate(spec.env_list):
        sub = select("name", item["name"])
        yield Entry(f"env_list[{i}]", "container.env", copied(item), sub, at=listed)
    for i, name in enumerate(spec.secret_env):
        value = secret_env_var(name, spec.secret_name)
        yield Entry(f"secret_env[{i}]", "container.env", value, select("name", name), at=secret)


def _gpus(spec: JobSpec, _: list[str] | None) -> Iterator[Entry]:
    """GPUs cannot be overcommitted: the limit is required, the request must equal it."""
    if spec.gpus_per_node:
        gpu, at = key(spec.gpu_resource), _AT["gpus_per_node"]
        for group in ("requests", "limits"):
            count = str(spec.gpus_per_node)
            yield Entry("gpus_per_node", "container.resources", count, f".{group}{gpu}", at=at)


def script_configmap_name(spec: JobSpec) -> str:
    return f"{spec.name}-script"


def companion_volumes(spec: JobSpec) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """The volumes kfcompile adds itself: (spec field, volume name, mount, volume source)."""
    if spec.shm_size:
        shm = {"emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}}
        yield "shm_size", SHM_VOLUME, {"mountPath": SHM_DIR}, shm
    if spec.script is not None:
        script = {"configMap": {"name": script_configmap_name(spec)}}
        yield "script", SCRIPT_VOLUME, {"mountPath": SCRIPT_DIR, "readOnly": True}, script
    if spec.work_dir is not None:
        claim = {"persistentVolumeClaim": {"claimName": spec.work_dir.pvc}}
        yield "work_dir", WORKDIR_VOLUME, {"mountPath": spec.work_dir.mount_path}, claim


def _mounts(spec: JobSpec, _: list[str] | None) -> Iterator[Entry]:
    for source, name, mount, _source in companion_volumes(spec):
        sub = select("mountPath", mount["mountPath"])
        value = {"name": name, **mount}
        yield Entry(source, "container.volumeMounts", value, sub, at=_AT[source])


def _volumes(spec: JobSpec, _: list[str] | None) -> Iterator[Entry]:
    for source, name, _mount, volume in companion_volumes(spec):
        value = {"name": name, **volume}
        yield Entry(source, "pod.volumes", value, select("name", name), at=_AT[source])


COMPANIONS = ("shm_size", "script", "work_dir")
COMMAND = "container.command"
PROGRAM = Special(
    "program", (("launcher", COMMAND), ("command", COMMAND), ("args", "container.args")), _program
)
NPROCS = Special("nprocs", (("nprocs_per_node", "scale.nprocPerNode"),), _nprocs)
ENV = Special(
    "env",
    (("env", "container.env"), ("env_list", "container.env"), ("secret_env", "container.env")),
    _env,
)
GPUS = Special("gpus", (("gpus_per_node", "container.resources"),), _gpus)
MOUNTS = Special("mounts", tuple((f, "container.volumeMounts") for f in COMPANIONS), _mounts)
VOLUMES = Special("volumes", tuple((f, "pod.volumes") for f in COMPANIONS), _volumes)


def _part(name: str, slot: str, rows: tuple[tuple[str, str], ...], **codecs: Codec) -> list[Field]:
    return [Field(f"{name}.{f}", slot, sub, codecs.get(f, VALUE)) for f, sub in rows]


def _initializer(kind: str) -> list[Field]:
    rows = (("storage_uri", ".storageUri"), ("env", ".env"), ("secret_ref", ".secretRef.name"))
    return [
        Field(f"initializer.{kind}.{f}", "run.initializer", f".{kind}{sub}", codec)
        for f, sub in rows
        for codec in [EnvPairs() if f == "env" else VALUE]
    ]


# --- the table, in output order -------------------------------------------------------------------

Step = Field | Special

FIELDS: tuple[Step, ...] = (
    Field("name", "job.name"),
    Field("namespace", "job.namespace", codec=NONEMPTY),
    Field("labels", "job.labels", codec=KEYED),
    Field("queue", "job.labels", key(QUEUE_LABEL), NONEMPTY),
    Field("priority_class", "job.labels", key(PRIORITY_LABEL), NONEMPTY),
    Field("annotations", "job.annotations", codec=KEYED),
    *_part(
        "runtime_ref",
        "run.runtimeRef",
        (("name", ".name"), ("api_group", ".apiGroup"), ("kind", ".kind")),
    ),
    *_initializer("dataset"),
    *_initializer("model"),
    Field("image", "container.image"),
    Field("image_pull_policy", "container.imagePullPolicy", codec=NONEMPTY),
    PROGRAM,
    Field("num_nodes", "scale.numNodes"),
    NPROCS,
    ENV,
    Field("cpu_request", "container.resources", ".requests.cpu"),
    Field("memory_request", "container.resources", ".requests.memory"),
    Field("cpu_limit", "container.resources", ".limits.cpu"),
    Field("memory_limit", "container.resources", ".limits.memory"),
    GPUS,
    Field("extra_resource_requests", "container.resources", ".requests", KEYED),
    Field("extra_resource_limits", "container.resources", ".limits", KEYED),
    Field("runtime_labels", "runtime.labels", codec=KEYED),
    Field("runtime_annotations", "runtime.annotations", codec=KEYED),
    Field("pod_labels", "pod.labels", codec=KEYED),
    Field("pod_annotations", "pod.annotations", codec=KEYED),
    Field("volume_mounts", "container.volumeMounts", codec=Items("mountPath")),
    MOUNTS,
    Field("service_account_name", "pod.serviceAccountName", codec=NONEMPTY),
    Field("node_selector", "pod.nodeSelector", codec=KEYED),
    Field("tolerations", "pod.tolerations", codec=NONEMPTY),
    Field("affinity", "pod.affinity"),
    Field("scheduling_gates", "pod.schedulingGates", codec=NAMES),
    Field("image_pull_secrets", "pod.imagePullSecrets", codec=NAMES),
    Field("termination_grace_period_seconds", "pod.terminationGracePeriodSeconds"),
    Field("volumes", "pod.volumes", codec=Items("name")),
    VOLUMES,
    Field("suspend", "run.suspend"),
    Field("managed_by", "run.managedBy"),
    Field("active_deadline_seconds", "run.activeDeadlineSeconds"),
    Field("backoff_limit", "run.backoffLimit"),
    Field("ttl_seconds_after_finished", "run.ttlSecondsAfterFinished"),
    Field("clean_pod_policy", "run.cleanPodPolicy"),
    Field("restart_policy", "run.restartPolicy"),
    *_part(
        "elastic",
        "run.elastic",
        (
            ("min_nodes", ".minReplicas"),
            ("max_nodes", ".maxReplicas"),
            ("rdzv_backend", ".rdzvBackend"),
            ("rdzv_port", ".rdzvPort"),
            ("max_restarts", ".maxRestarts"),
        ),
    ),
    *_part(
        "scheduling_policy",
        "run.schedulingPolicy",
        (
            ("min_available", ".minAvailable"),
            ("queue", ".queue"),
            ("min_resources", ".minResources"),
            ("priority_class", ".priorityClass"),
            ("schedule_timeout_seconds", ".scheduleTimeoutSeconds"),
        ),
        min_resources=NONEMPTY,
    ),
    Field("container_overrides", "container.*", codec=HATCH),
    Field("pod_spec_overrides", "pod.*", codec=HATCH),
)
ROWS: tuple[Field, ...] = tuple(s for s in FIELDS if isinstance(s, Field))
SPECIALS: tuple[Special, ...] = tuple(s for s in FIELDS if isinstance(s, Special))


class Feed(NamedTuple):
    source: str  # spec field path
    slot: str
    sub: str  # below the slot ("" for a special: its code says)
    field: str  # the top-level spec field


def feeds() -> Iterator[Feed]:
    """Every (spec field path, slot, sub-path) the table fills, in table order."""
    for step in FIELDS:
        if isinstance(step, Field):
            yield Feed(step.source, step.slot, step.sub, step.at.top)
        else:
            yield from (Feed(source, slot, "", source) for source, slot in step.feeds)


def slots() -> tuple[str, ...]:
    """Every slot the table fills (``pod.*``, ``container.*``: the escape hatches' groups)."""
    return tuple(dict.fromkeys(f.slot for f in feeds()))


def hatches() -> dict[str, Field]:
    """The escape hatches' rows, by spec field."""
    return {row.source: row for row in ROWS if isinstance(row.codec, Hatch)}


# --- walking it forward -------------------------------------------------------------------------


@frozen
class _Part:
    """The rows of one part (``elastic``), walked on the part's object when the spec has one."""

    name: str
    rows: tuple[Field, ...]

    def encode(self, obj: Any, out: list[Entry]) -> None:
        before = len(out)
        for row in self.rows:
            value = obj
            for name in row.chain[1:]:
                value = getattr(value, name)
                if value is None:
                    break
            else:
                row.codec.encode(row, value, out)
        if len(out) == before:  # an empty part is still one the target must be able to hold
            row = self.rows[0]
            out.append(Entry(self.name, row.slot, {}, "", False, row.at))


# A step: how it writes (a row's codec, a part's rows, or a special's code), whether it is a
# special (it reads the spec itself), and whether an empty value writes nothing.
Plan = tuple[tuple[Callable[..., Any], bool, bool], ...]


def _plan() -> tuple[Plan, tuple[str, ...]]:
    """The table as steps (a part's rows as one step), and the spec attribute each reads."""
    steps: list[Field | _Part | Special] = []
    for step in FIELDS:
        last = steps[-1] if steps else None
        if isinstance(step, Field) and step.part is not None:
            if isinstance(last, _Part) and last.name == step.part:
                steps[-1] = _Part(last.name, (*last.rows, step))
            else:
                steps.append(_Part(step.part, (step,)))
        else:
            steps.append(step)
    plan: list[tuple[Callable[..., Any], bool, bool]] = []
    names = []
    for s in steps:
        if isinstance(s, Field):
            skip = not isinstance(s.codec, Value) or s.codec.empty
            plan.append((functools.partial(s.codec.encode, s), False, skip))
            names.append(s.source)
        elif isinstance(s, _Part):
            plan.append((s.encode, False, False))
            names.append(s.name)
        else:
            plan.append((s.render, True, False))
            names.append("name")  # a special reads the spec itself; ``name`` is always set
    return tuple(plan), tuple(names)


_PLAN, _ATTRIBUTES = _plan()
_READ = operator.attrgetter(*_ATTRIBUTES)  # every attribute the steps read, in one call


def entries(spec: JobSpec, command: list[str] | None) -> list[Entry]:
    """The spec as neutral entries, in the order they should appear in the output.

    ``command`` is the target's launcher command (it differs by kind), or None.
    """
    out: list[Entry] = []
    for (write, special, skip_empty), value in zip(_PLAN, _READ(spec), strict=True):
        if value is None or (skip_empty and not value):
            continue
        if special:
            out.extend(write(spec, command))
        else:
            write(value, out)
    return out

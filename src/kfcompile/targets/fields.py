"""The one field table: each spec field, the neutral slot it fills, and how its value is written.

``render`` walks ``FIELDS`` forward (``entries``: the spec as ``Entry`` values, in output order);
the importer walks it backward (each row's ``codec.decode``); ``reference`` and the docs read
it directly. A target's own table (``targets/<target>.py``) says where each slot lands; the two
together, resolved when the target is built, are ``Target.fields``.

A row is a spec field path (``runtime_ref.name``), a slot (``run.runtimeRef``), a sub-path below
the slot (``.name``) and a codec. Rows whose field is inside a part (``elastic.*``) render the
part as ``{}`` when the part is set but none of its rows wrote anything. The few parts of a spec
that are no row (the program, processes per node, the environment, GPUs, and the volumes
kfcompile adds itself) are ``Special`` steps: plain code that renders and reads back, placed in
the table where they render.
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
import functools
import operator
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from attrs import frozen

from kfcompile.spec.additions import PRIORITY_LABEL, QUEUE_LABEL, TOPOLOGY_ANNOTATIONS
from kfcompile.spec.model import JobSpec, RuntimeRef
from kfcompile.spec.object_paths import key
from kfcompile.targets.codecs import (
    COUNT_TEXT,
    HATCH,
    KEYED,
    NAMES,
    NONEMPTY,
    SWITCH_TEXT,
    VALUE,
    Entry,
    EnvPairs,
    Field,
    Hatch,
    Items,
    Value,
)
from kfcompile.targets.special import (
    ENV,
    GPUS,
    MOUNTS,
    NPROCS,
    PROGRAM,
    PROVISIONING,
    VOLUMES,
    Special,
)

__all__ = ["FIELDS", "Entry", "Field", "Special", "entries", "feeds", "hatches", "slots"]


def _topology() -> tuple[Field, ...]:
    """The rows of ``topology``: each field one of Kueue's PodSet annotations."""
    codecs = {"unconstrained": SWITCH_TEXT, "slice_size": COUNT_TEXT}
    return tuple(
        Field(f"topology.{name}", "pod.annotations", key(annotation), codecs.get(name, VALUE))
        for name, annotation in TOPOLOGY_ANNOTATIONS.items()
    )


def _initializer(kind: str) -> tuple[Field, ...]:
    """The rows of ``initializer.dataset`` or ``initializer.model`` (the same shape)."""
    return (
        Field(f"initializer.{kind}.storage_uri", "run.initializer", f".{kind}.storageUri"),
        Field(f"initializer.{kind}.env", "run.initializer", f".{kind}.env", EnvPairs()),
        Field(f"initializer.{kind}.secret_ref", "run.initializer", f".{kind}.secretRef.name"),
    )


# --- the table, in output order -------------------------------------------------------------------

Step = Field | Special

FIELDS: tuple[Step, ...] = (
    Field("name", "job.name"),
    Field("namespace", "job.namespace", codec=NONEMPTY),
    Field("labels", "job.labels", codec=KEYED),
    Field("queue", "job.labels", key(QUEUE_LABEL), NONEMPTY),
    Field("priority_class", "job.labels", key(PRIORITY_LABEL), NONEMPTY),
    Field("annotations", "job.annotations", codec=KEYED),
    PROVISIONING,
    Field("runtime_ref.name", "run.runtimeRef", ".name"),
    Field("runtime_ref.api_group", "run.runtimeRef", ".apiGroup"),
    Field("runtime_ref.kind", "run.runtimeRef", ".kind"),
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
    *_topology(),
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
    Field("elastic.min_nodes", "run.elastic", ".minReplicas"),
    Field("elastic.max_nodes", "run.elastic", ".maxReplicas"),
    Field("elastic.rdzv_backend", "run.elastic", ".rdzvBackend"),
    Field("elastic.rdzv_port", "run.elastic", ".rdzvPort"),
    Field("elastic.max_restarts", "run.elastic", ".maxRestarts"),
    Field("scheduling_policy.min_available", "run.schedulingPolicy", ".minAvailable"),
    Field("scheduling_policy.queue", "run.schedulingPolicy", ".queue"),
    Field("scheduling_policy.min_resources", "run.schedulingPolicy", ".minResources", NONEMPTY),
    Field("scheduling_policy.priority_class", "run.schedulingPolicy", ".priorityClass"),
    Field(
        "scheduling_policy.schedule_timeout_seconds",
        "run.schedulingPolicy",
        ".scheduleTimeoutSeconds",
    ),
    Field("container_overrides", "container.*", codec=HATCH),
    Field("pod_spec_overrides", "pod.*", codec=HATCH),
)
ROWS: tuple[Field, ...] = tuple(s for s in FIELDS if isinstance(s, Field))
_RUNTIME_REF = tuple((row.sub[1:], row.chain[1]) for row in ROWS if row.slot == "run.runtimeRef")
SPECIALS: tuple[Special, ...] = tuple(s for s in FIELDS if isinstance(s, Special))


class Feed(NamedTuple):
    source: str  # spec field path
    slot: str
    sub: str  # below the slot ("" for a special: its code says)
    field: str  # the top-level spec field


def _feeds() -> Iterator[Feed]:
    for step in FIELDS:
        if isinstance(step, Field):
            yield Feed(step.source, step.slot, step.sub, step.at.top)
        else:
            yield from (Feed(source, slot, "", source) for source, slot in step.feeds)


FEEDS: tuple[Feed, ...] = tuple(_feeds())
SLOTS: tuple[str, ...] = tuple(dict.fromkeys(f.slot for f in FEEDS))


def feeds() -> tuple[Feed, ...]:
    """Every (spec field path, slot, sub-path) the table fills, in table order."""
    return FEEDS


def slots() -> tuple[str, ...]:
    """Every slot the table fills (``pod.*``, ``container.*``: the escape hatches' groups)."""
    return SLOTS


def runtime_ref(runtime: RuntimeRef) -> dict[str, str]:
    """The ``runtimeRef`` that names ``runtime``, written as its rows write it (the default
    runtime's too, which no row writes: ``runtime_ref`` is None)."""
    return {k: getattr(runtime, attribute) for k, attribute in _RUNTIME_REF}


def hatches() -> dict[str, Field]:
    """The escape hatches' rows, by spec field."""
    return {row.source: row for row in ROWS if isinstance(row.codec, Hatch)}


# --- walking it forward -------------------------------------------------------------------------


@frozen(repr=False, eq=False, slots=False)
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


class Write(NamedTuple):
    """One step of render's walk over the table."""

    write: Callable[..., Any]  # a row's codec, a part's rows, or a special's code
    reads_spec: bool  # a special: it is given the whole spec, not one attribute's value
    skips_empty: bool  # an empty value writes nothing


Plan = tuple[Write, ...]


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
    plan: list[Write] = []
    names = []
    for s in steps:
        if isinstance(s, Field):
            skip = not isinstance(s.codec, Value) or s.codec.empty
            plan.append(
                Write(functools.partial(s.codec.encode, s), reads_spec=False, skips_empty=skip)
            )
            names.append(s.source)
        elif isinstance(s, _Part):
            plan.append(Write(s.encode, reads_spec=False, skips_empty=False))
            names.append(s.name)
        else:
            plan.append(Write(s.render, reads_spec=True, skips_empty=False))
            names.append("name")  # a special reads the spec itself; ``name`` is always set
    return tuple(plan), tuple(names)


_PLAN, _ATTRIBUTES = _plan()
_READ = operator.attrgetter(*_ATTRIBUTES)  # every attribute the steps read, in one call


def entries(spec: JobSpec, command: list[str] | None) -> list[Entry]:
    """The spec as neutral entries, in the order they should appear in the output.

    ``command`` is the target's launcher command (it differs by kind), or None.
    """
    out: list[Entry] = []
    for (write, reads_spec, skips_empty), value in zip(_PLAN, _READ(spec), strict=True):
        if value is None or (skips_empty and not value):
            continue
        if reads_spec:
            write(spec, command, out)
        else:
            write(value, out)
    return out

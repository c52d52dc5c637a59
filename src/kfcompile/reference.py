"""The spec reference and the target support table, generated from the classes and the tables.

The README embeds both (between ``<!-- reference:... -->`` markers) and a test fails when they
are stale, so the documentation cannot drift from what ``render`` does.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from types import NoneType, UnionType
from typing import Any, Literal

import attrs

from kfcompile import k8s_schema, rules
from kfcompile.load import structure
from kfcompile.schema import shown_default
from kfcompile.spec import JobSpec
from kfcompile.targets import TARGETS, base

# Two specs that together set every field (launcher and command exclude each other), used to
# learn which neutral slots each spec field feeds.
KITCHEN_SINK: tuple[dict[str, Any], ...] = (
    {
        "name": "k",
        "namespace": "ns",
        "labels": {"a": "b"},
        "annotations": {"a": "b"},
        "runtime_labels": {"a": "b"},
        "runtime_annotations": {"a": "b"},
        "pod_labels": {"a": "b"},
        "pod_annotations": {"a": "b"},
        "image": "i",
        "image_pull_policy": "Always",
        "image_pull_secrets": ["s"],
        "launcher": {"kind": "torchrun", "entrypoint": "t.py"},
        "script": "print()",
        "num_nodes": 2,
        "gpus_per_node": 1,
        "nprocs_per_node": 1,
        "gpu_resource": "x.io/gpu",
        "cpu_request": "1",
        "cpu_limit": "1",
        "memory_request": "1Gi",
        "memory_limit": "1Gi",
        "extra_resource_requests": {"x.io/efa": "1"},
        "extra_resource_limits": {"x.io/efa": "1"},
        "shm_size": "1Gi",
        "env": {"A": "1"},
        "env_list": [{"name": "B", "value": "2"}],
        "secret_env": ["C"],
        "tolerations": [{"operator": "Exists"}],
        "affinity": {"nodeAffinity": {}},
        "node_selector": {"a": "b"},
        "scheduling_gates": ["g"],
        "service_account_name": "sa",
        "termination_grace_period_seconds": 30,
        "volumes": [{"name": "v", "emptyDir": {}}],
        "volume_mounts": [{"name": "v", "mountPath": "/v"}],
        "work_dir": {"local": ".", "pvc": "p", "mount_path": "/w"},
        "runtime_ref": {"name": "r"},
        "initializer": {"dataset": {"storage_uri": "hf://d"}, "model": {"storage_uri": "hf://m"}},
        "suspend": True,
        "managed_by": "kueue.x-k8s.io/multikueue",
        "active_deadline_seconds": 1,
        "backoff_limit": 1,
        "ttl_seconds_after_finished": 1,
        "clean_pod_policy": "All",
        "restart_policy": "Never",
        "elastic": {"min_nodes": 1, "max_nodes": 2},
        "queue": "q",
        "priority_class": "p",
        "scheduling_policy": {"min_available": 1},
        "pod_spec_overrides": {"volumes": []},
        "container_overrides": {"volumeMounts": []},
    },
    {"name": "k", "image": "i", "command": ["c"], "args": ["a"]},
)


def field_slots() -> dict[str, list[str]]:
    """Each top-level spec field -> the neutral slots it feeds, in declaration order."""
    found: dict[str, list[str]] = {a.name: [] for a in attrs.fields(JobSpec)}
    for data in KITCHEN_SINK:
        spec = structure(data)
        for entry in base.entries(spec, [] if spec.launcher else None):
            name = entry.source.split(".")[0].split("[")[0]
            name = "launcher" if entry.source == "launcher" else name
            if entry.slot not in found[name]:
                found[name].append(entry.slot)
    return found


def _type_name(t: Any) -> str:
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (UnionType, typing.Union):
        return " \\| ".join(_type_name(a) for a in args if a is not NoneType)
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin is not None and args:  # Mapping
        return "map" if args[1] is Any else f"map of {_type_name(args[1])}"
    if t is Any:
        return "object"
    return t.__name__ if isinstance(t, type) else str(t)


def _fields(cls: type, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    hints = typing.get_type_hints(cls)
    for a in attrs.fields(cls):
        t = hints[a.name]
        shown = shown_default(a)
        default = (
            "required" if a.default is attrs.NOTHING else "" if shown is None else f"`{shown}`"
        )
        yield f"{prefix}{a.name}", _type_name(t), default, a.metadata.get("doc", "")
        nested = [x for x in (t, *typing.get_args(t)) if isinstance(x, type) and attrs.has(x)]
        for inner in nested:
            yield from _fields(inner, f"{prefix}{a.name}.")


def spec_reference() -> str:
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{n}` | {t} | {d} | {doc} |" for n, t, d, doc in _fields(JobSpec)]
    return "\n".join(lines) + "\n"


Mark = bool | Literal["partial"]
MARKS: dict[Mark, str] = {True: "✓", False: "—", "partial": "partial"}


def override_slots() -> dict[str, dict[str, str]]:
    """Each escape hatch -> every key of its core/v1 object -> the slot render gives it."""
    found: dict[str, dict[str, str]] = {}
    for field, (definition, fixed) in rules.ESCAPE_HATCHES.items():
        keys = sorted(k8s_schema.fields(definition) - fixed)
        spec = structure({"name": "k", "image": "i", field: dict.fromkeys(keys)})
        prefix = f"{field}."
        found[field] = {
            e.source.removeprefix(prefix): e.slot
            for e in base.entries(spec, None)
            if e.source.startswith(prefix)
        }
    return found


def override_support() -> dict[str, dict[str, dict[str, bool]]]:
    """Escape hatch -> key -> target -> whether the target places that key."""
    return {
        field: {
            k: {name: base.lookup(t.table, slot) is not None for name, t in TARGETS.items()}
            for k, slot in slots.items()
        }
        for field, slots in override_slots().items()
    }


def support() -> dict[str, dict[str, Mark]]:
    """Spec field -> target -> True (expressed), False (an error) or "partial" (an escape
    hatch that takes some of its keys there)."""
    hatches = override_support()
    found: dict[str, dict[str, Mark]] = {}
    for field, slots in field_slots().items():
        marks: dict[str, Mark] = {}
        for name, t in TARGETS.items():
            if field in hatches:
                placed = [by_target[name] for by_target in hatches[field].values()]
                marks[name] = True if all(placed) else "partial" if any(placed) else False
            else:
                marks[name] = all(base.lookup(t.table, s) is not None for s in slots)
        found[field] = marks
    return found


def _row(label: str, marks: dict[str, Mark]) -> str:
    return f"| {label} | " + " | ".join(MARKS[marks[name]] for name in TARGETS) + " |"


def support_table() -> str:
    """Spec field x target (✓ expressed, — an error, partial: some keys only), then which keys
    of each escape hatch each target places, keys with the same answers on one row."""
    names = list(TARGETS)
    head = "|---|" + "---|" * len(names)
    lines = ["| field | " + " | ".join(names) + " |", head]
    lines += [_row(f"`{field}`", marks) for field, marks in support().items()]
    lines += [
        "",
        "*partial*: the target places some keys of that escape hatch and refuses the others;",
        "the tables below list every key of the core/v1 object, keys with the same answers on",
        "one row.",
    ]
    for field, keys in override_support().items():
        groups: dict[tuple[bool, ...], list[str]] = {}
        for k, marks in keys.items():
            groups.setdefault(tuple(marks[name] for name in names), []).append(k)
        ordered = sorted(groups.items(), key=lambda g: (-sum(g[0]), g[0][::-1], g[1]))
        lines += ["", f"| `{field}` keys | " + " | ".join(names) + " |", head]
        for signature, members in ordered:
            label = ", ".join(f"`{k}`" for k in members)
            lines.append(_row(label, dict(zip(names, signature, strict=True))))
    return "\n".join(lines) + "\n"

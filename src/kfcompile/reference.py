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


def support_table() -> str:
    """Spec field x target: ✓ where the target expresses it, — where it is an error."""
    names = list(TARGETS)
    lines = ["| field | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for field, slots in field_slots().items():
        marks = []
        for name in names:
            ok = all(base.lookup(TARGETS[name].table, s) is not None for s in slots)
            marks.append("✓" if ok else "—")
        lines.append(f"| `{field}` | " + " | ".join(marks) + " |")
    return "\n".join(lines) + "\n"

"""The spec reference, the target support table and the slot matrix, generated from the spec
classes, the field table (``targets/fields.py``) and each target's table.

The README embeds them (between ``<!-- reference:... -->`` markers) and a test fails when they
are stale, so the documentation cannot drift from what ``render`` does: render walks the same
tables these read.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from types import NoneType, UnionType
from typing import Any, Literal

import attrs

from kfcompile.spec import k8s_schema, rules
from kfcompile.spec.json_schema import shown_default
from kfcompile.spec.model import JobSpec
from kfcompile.targets import TARGETS, fields
from kfcompile.targets.codecs import Hatch


def field_slots() -> dict[str, list[str]]:
    """Each top-level spec field -> the neutral slots it feeds (the field table), in declaration
    order."""
    found: dict[str, list[str]] = {a.name: [] for a in attrs.fields(JobSpec)}
    for feed in fields.feeds():
        if feed.slot not in found[feed.field]:
            found[feed.field].append(feed.slot)
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
    hatches = fields.hatches()
    for field, (definition, fixed) in rules.ESCAPE_HATCHES.items():
        row = hatches[field]
        found[field] = {
            k: Hatch.slot(row, k) for k in sorted(k8s_schema.fields(definition) - fixed)
        }
    return found


def override_support() -> dict[str, dict[str, dict[str, bool]]]:
    """Escape hatch -> key -> target -> whether the target places that key."""
    return {
        field: {
            k: {name: t.layout.get(slot) is not None for name, t in TARGETS.items()}
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
                marks[name] = all(t.layout.get(s) is not None for s in slots)
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


def _cell(slot: Any, name: str) -> str:
    if slot is None:
        return "per key" if name.endswith(".*") else "—"
    if not slot.paths:
        return "(its own code)"
    return "<br>".join(f"`{p}`" for p in slot.paths)


def slot_table() -> str:
    """Slot x target: where each neutral slot lands in each target (``Target.fields`` holds it
    per spec field), with the spec fields that fill it and where below the slot."""
    names = list(TARGETS)
    feeding: dict[str, list[str]] = {}
    for feed in fields.feeds():
        below = f" → `{feed.sub}`" if feed.sub else ""
        feeding.setdefault(feed.slot, []).append(f"`{feed.source}`{below}")
    lines = [
        "| slot | spec fields | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for slot, by in feeding.items():
        cells = [_cell(t.layout.get(slot), slot) for t in TARGETS.values()]
        lines.append(f"| `{slot}` | {', '.join(by)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "—: the target cannot hold it (an error naming the field); *per key*: only the keys the",
        "escape-hatch tables above mark; *(its own code)*: the target writes it itself (the",
        "PyTorchJob replica counts).",
    ]
    return "\n".join(lines) + "\n"

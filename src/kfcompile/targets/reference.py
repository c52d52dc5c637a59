"""The spec reference, the target support table and the slot matrix, generated from the spec
classes, the field table (``targets/fields.py``) and each target's table; and one field of
them, described (``describe``: ``kfcompile explain FIELD``).

The documentation's pages embed the tables (between ``<!-- generated:... -->`` markers, from
``docs/hooks/generated.py``) and a test fails when they are stale, so the documentation cannot
drift from what ``render`` does: render walks the same tables these read.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable, Iterator
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


# --- one field: `kfcompile explain FIELD` -------------------------------------------------------

# The spec fields written in a Kubernetes object's shape, and that object's core/v1 definition
# (what the spec's rules check them against).
KUBERNETES_SHAPED: dict[str, str] = {
    "volumes": "Volume",
    "volume_mounts": "VolumeMount",
    "tolerations": "Toleration",
    "affinity": "Affinity",
    "env_list": "EnvVar",
    **{field: definition for field, (definition, _) in rules.ESCAPE_HATCHES.items()},
}

# What each rule of the spec's fields (``metadata["rule"]``, by function name) requires, in
# words. A test holds every rule a spec class uses to having a line here.
RULES: dict[str, str] = {
    "job_name": "an RFC 1035 label (lower case, digits, '-'; starts with a letter), short "
    "enough that every pod name the target makes from it is a DNS label",
    "dns1123_label": "a DNS-1123 label: at most 63 lower-case letters, digits and '-'",
    "dns1123_subdomain": "a DNS-1123 subdomain: at most 253 characters of lower-case labels "
    "joined by '.'",
    "label_value": "a label value: at most 63 characters, alphanumeric at both ends, '-', '_', "
    "'.' inside",
    "label_map": "label keys (an optional DNS prefix and '/', then a name) and label values",
    "annotation_map": "annotation keys (as label keys); 256 KiB of annotations at most",
    "_job_annotations": "annotation keys (as label keys); 256 KiB of annotations at most; no "
    "`provreq.kueue.x-k8s.io/` key (set it in `provisioning_parameters`)",
    "_pod_annotations": "annotation keys (as label keys); 256 KiB of annotations at most; no "
    "Kueue topology key (set it in `topology`)",
    "_provisioning_parameters": "names that make valid annotation keys after "
    "`provreq.kueue.x-k8s.io/`",
    "label_name": "a label key: an optional DNS prefix and '/', then a name of at most 63 "
    "characters (`cloud.provider.com/topology-block`)",
    "_group_name": "a name, not empty and not a number",
    "image": "a container image reference, without spaces or upper case in its name",
    "name_list": "names of objects (DNS-1123 subdomains), each once",
    "entrypoint": "a path: no NUL, not empty",
    "python_module": "dotted identifiers, as `python -m` imports them (`pkg.sub.train`)",
    "absolute_path": "an absolute path",
    "storage_uri": "a URI with a scheme (`hf://`, `s3://`, ...)",
    "positive": "a whole number of at least 1",
    "non_negative": "a whole number of at least 0",
    "port": "a port number, 1 to 65535",
    "nprocs": "a whole number of at least 1, or `auto`",
    "extended_resource": "a resource name a device plugin advertises (`vendor.com/name`)",
    "quantity": "a Kubernetes quantity (`500m`, `2`, `64Gi`)",
    "resource_map": "resource names and quantities; an extended resource in whole units",
    "container_resource_map": "resource names and quantities a container may ask for: a "
    "standard resource (`cpu`, `memory`, `ephemeral-storage`, `hugepages-<size>`) or a "
    "prefixed one (`vendor.com/name`) in whole units; hugepages beside cpu or memory",
    "env_map": "environment variable names (C identifiers, or as Kubernetes allows) and "
    "string values; not the names the target's launcher sets",
    "env_list": "core/v1 EnvVar entries, each name once; not the names the target's launcher sets",
    "env_names": "environment variable names, each once",
    "tolerations": "core/v1 Toleration entries",
    "affinity": "a core/v1 Affinity",
    "gate_list": "scheduling gate names (qualified names), each once",
    "volumes": "core/v1 Volume entries, one source each, names unique; not kfcompile's own "
    "volume names",
    "volume_mounts": "core/v1 VolumeMount entries of the spec's volumes, one mount per place; "
    "not kfcompile's own mount points",
    "managed_by": "a controller the job's kind accepts (its operator, or "
    "`kueue.x-k8s.io/multikueue`)",
    "pod_overrides": "a partial core/v1 PodSpec; what it gives may add to what the spec "
    "generates, never replace it",
    "container_overrides": "a partial core/v1 Container; what it gives may add to what the "
    "spec generates, never replace it",
}


@attrs.frozen(repr=False, eq=False)
class FieldDoc:
    """What ``kfcompile explain FIELD`` prints about one spec field."""

    path: str  # as asked, e.g. volumes.persistentVolumeClaim
    type: str
    default: str  # "required", "" (none) or the default shown as code
    doc: str
    rules: tuple[str, ...]
    lands: dict[str, tuple[str, ...] | None]  # target -> paths; None: it cannot hold it
    fields: tuple[tuple[str, str, str, str], ...]  # below it: name, type, default, doc


class UnknownField(ValueError):
    """No spec field at this path; the message names the fields there are."""


def _hint(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (it has: {', '.join(known)})"


def _segments(path: str) -> list[str]:
    return [s for s in (part.split("[")[0] for part in path.strip().split(".")) if s]


def _k8s_type(t: Any) -> str:
    if isinstance(t, str):
        return t
    if "ref" in t:
        return str(t["ref"])
    if "list" in t:
        return f"list of {_k8s_type(t['list'])}"
    return f"map of {_k8s_type(t['map'])}"


def _k8s_definition(t: Any) -> str | None:
    """The definition a core/v1 property holds (through lists and maps), if any."""
    if isinstance(t, str):
        return None
    return t.get("ref") or _k8s_definition(t.get("list") or t.get("map"))


def _k8s_fields(definition: str | None) -> tuple[tuple[str, str, str, str], ...]:
    if definition is None:
        return ()
    props = k8s_schema.properties(definition)
    required = set(k8s_schema.required(definition))
    return tuple(
        (name, _k8s_type(t), "required" if name in required else "", "")
        for name, t in sorted(props.items())
    )


def _spec_rules(a: attrs.Attribute[Any], type_: Any) -> tuple[str, ...]:
    found = []
    if typing.get_origin(type_) is Literal or any(
        typing.get_origin(t) is Literal for t in typing.get_args(type_)
    ):
        choices = _type_name(type_).replace(" \\| ", ", ")
        found.append(f"one of: {choices}")
    rule = a.metadata.get("rule")
    if rule is not None:
        found.append(RULES[rule.__name__])
    if a.metadata.get("load") is not None:
        found.append("a YAML number is read as its text")
    return tuple(found)


def _lands(path: str) -> dict[str, tuple[str, ...] | None]:
    """Target -> where the spec field at ``path`` (or the fields below it) lands."""
    found: dict[str, tuple[str, ...] | None] = {}
    for name, t in TARGETS.items():
        rows = [r for r in t.fields if r.source == path or r.source.startswith(f"{path}.")]
        if not rows:
            found[name] = ()
        elif path in rules.ESCAPE_HATCHES and rows[0].paths is None:
            found[name] = (f"(each key its own place: kfcompile explain {path}.KEY)",)
        elif any(r.paths is None for r in rows):
            found[name] = None
        else:
            found[name] = tuple(dict.fromkeys(p for r in rows for p in (r.paths or ())))
    return found


def _hatch_lands(field: str, key_: str) -> dict[str, tuple[str, ...] | None]:
    slot = override_slots()[field].get(key_)
    found: dict[str, tuple[str, ...] | None] = {}
    for name, t in TARGETS.items():
        placed = t.layout.get(slot) if slot is not None else None
        found[name] = None if placed is None else placed.paths
    return found


def describe(path: str) -> FieldDoc:
    """The spec field at ``path`` (``launcher``, ``elastic.min_nodes``,
    ``volumes.persistentVolumeClaim``: through a Kubernetes object into its core/v1 fields);
    ``UnknownField`` when there is none."""
    names = _segments(path)
    if not names:
        raise UnknownField(f"{path!r}: give a spec field, e.g. launcher")
    cls: type = JobSpec
    walked: list[str] = []
    for i, name in enumerate(names):
        by_name = attrs.fields_dict(cls)
        if name not in by_name:
            where = ".".join(walked) or "a spec"
            raise UnknownField(f"{where} has no field {name!r}{_hint(name, by_name)}")
        a = by_name[name]
        walked.append(name)
        t = typing.get_type_hints(cls)[name]
        nested = [x for x in (t, *typing.get_args(t)) if isinstance(x, type) and attrs.has(x)]
        rest = names[i + 1 :]
        shown = shown_default(a)
        default = (
            "required" if a.default is attrs.NOTHING else "" if shown is None else f"`{shown}`"
        )
        here = ".".join(walked)
        if not rest:
            definition = KUBERNETES_SHAPED.get(here)
            ruled = _spec_rules(a, t)
            if definition:
                ruled += (f"checked against the core/v1 {definition} schema at every depth",)
            below = [f for f in _fields(nested[0]) if "." not in f[0]] if nested else []
            return FieldDoc(
                here,
                _type_name(t),
                default,
                a.metadata.get("doc", ""),
                ruled,
                _lands(here),
                tuple(below) or _k8s_fields(definition),
            )
        if nested:
            cls = nested[0]
            continue
        if here in KUBERNETES_SHAPED:
            return _describe_k8s(here, KUBERNETES_SHAPED[here], rest)
        raise UnknownField(f"{here} has no fields (it is {_type_name(t)})")
    raise AssertionError("unreachable")


def _describe_k8s(field: str, definition: str, rest: list[str]) -> FieldDoc:
    """A field inside a Kubernetes object a spec field holds."""
    prop: Any = {"ref": definition}
    current: str | None = definition
    required = False
    for i, name in enumerate(rest):
        props = k8s_schema.properties(current or "")
        if name not in props:
            at = ".".join([field, *rest[:i]])
            raise UnknownField(f"{at} ({current}) has no field {name!r}{_hint(name, props)}")
        required = name in k8s_schema.required(current or "")
        prop, current = props[name], _k8s_definition(props[name])
    if field in rules.ESCAPE_HATCHES:  # each key of an escape hatch has its own place
        lands, below = _hatch_lands(field, rest[0]), "".join(f".{n}" for n in rest[1:])
    else:  # inside the object (or each item) the field writes
        lands = _lands(field)
        below = ("" if field == "affinity" else "[*]") + "".join(f".{n}" for n in rest)
    where = {n: None if ps is None else tuple(p + below for p in ps) for n, ps in lands.items()}
    return FieldDoc(
        ".".join([field, *rest]),
        _k8s_type(prop),
        "required" if required else "",
        f"The {definition} field `{'.'.join(rest)}`, as Kubernetes has it "
        f"(`kubectl explain pod.spec` tells its meaning).",
        (f"checked against the core/v1 schema ({current or _k8s_type(prop)})",),
        where,
        _k8s_fields(current),
    )

"""How a spec value becomes a slot value and back: the field table's row (``Field``, whose
table is ``fields.FIELDS``) and its codecs, and the values they give (``Entry`` to place,
``Placement`` as placed).

``encode`` appends the ``Entry`` values a row writes (render walks the table forward); ``decode``
reads a slot value back into the spec value (the importer walks it backward), saying what of
the input it cannot hold. The special cases (``special.py``) read through ``Reader``: what the
importer's reading of one manifest gives them.
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from attrs import field, frozen

from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.object_paths import Path, copied, item_segment, key, select

if TYPE_CHECKING:
    from kfcompile.spec.model import JobSpec


class Placement(NamedTuple):
    """One value as it landed: the explain row and what the property tests read back."""

    source: str
    doc: int  # index into the rendered object list
    path: str
    value: Any
    merge: bool = False


class Entry(NamedTuple):
    source: str  # spec field path, as a user writes it
    slot: str  # neutral slot name, looked up in a target's table
    value: Any
    sub: str = ""  # path below the slot, e.g. '[name=FOO]' or '.requests.cpu'
    merge: bool = False  # deep-merge into what is there (the escape hatches)
    at: FieldPath = FieldPath()  # the spec field a target that cannot hold it names


@frozen(repr=False, eq=False, slots=False)
class Decoded:
    """A slot value read back: the spec value (or ``SKIP`` / ``LEAVE``), the parts of the input
    that are lost (a path below the value, why), and finer sources (spec parts below the field,
    input parts below the value)."""

    value: Any
    losses: tuple[tuple[Path, str], ...] = ()
    sources: tuple[tuple[Path, Path], ...] = ()


SKIP = object()  # decoded: the value is read, the spec gets nothing from it
LEAVE = object()  # decoded: not this field's (another row takes it, or it is reported as lost)
MISSING = object()  # read: nothing at that path
GONE = object()  # read: a list item taken out (kept in place so later indices stay right)


def present(value: Any) -> Any:
    """A value without the placeholders of list items taken from it earlier."""
    return [v for v in value if v is not GONE] if isinstance(value, list) else value


class Part(Protocol):
    """A slot's value being read (``importer.document.Doc``): what is taken is the spec's."""

    root: Any

    def get(self, path: Path) -> Any: ...

    def take(self, path: Path) -> Any: ...


Values = Mapping[str, tuple[FieldPath, Part]]  # slot -> where it was read, its working copy


class Reader(Protocol):
    """One manifest being read (``importer.state.Reading``), as the special cases see it."""

    kind: str
    data: dict[str, Any]  # the spec read so far
    found: dict[str, list[tuple[FieldPath, Any]]]  # each slot's values, where they were found
    companions: list[dict[str, Any]]

    def lose(self, where: FieldPath | Path | str, what: str) -> None: ...

    def put(self, spec: FieldPath | str, value: Any, where: FieldPath | str) -> None: ...

    def note(self, spec: FieldPath, where: FieldPath | str) -> None: ...

    def one(self, slot: str) -> tuple[FieldPath, Any] | None: ...

    def command(self, spec: "JobSpec") -> list[str] | None:
        """The launcher command the manifest's target writes for ``spec``."""
        ...


class Codec(Protocol):
    def encode(self, row: "Field", value: Any, out: list[Entry]) -> None: ...

    def decode(self, row: "Field", value: Any) -> Decoded: ...


_SCALARS = frozenset({str, int, bool, float})


def _is_empty(value: Any) -> bool:
    return isinstance(value, str | tuple | list | Mapping) and not value


@frozen(repr=False, eq=False, slots=False)
class Value:
    """The value as it stands; ``empty``: an empty one renders nothing (and reads as nothing)."""

    empty: bool = False

    def encode(self, row: "Field", value: Any, out: list[Entry]) -> None:
        if not (self.empty and _is_empty(value)):
            value = value if type(value) in _SCALARS else copied(value)
            out.append(Entry(row.source, row.slot, value, row.sub, False, row.at))

    def decode(self, row: "Field", value: Any) -> Decoded:
        return Decoded(LEAVE if self.empty and (value is None or _is_empty(value)) else value)


@frozen(repr=False, eq=False, slots=False)
class Keyed:
    """A map: one entry per key, each at its own key below the slot."""

    def encode(self, row: "Field", value: Mapping[str, Any], out: list[Entry]) -> None:
        source, slot, sub, at = row.source, row.slot, row.sub, row.at
        for k, v in value.items():
            out.append(Entry(source + key(k), slot, v, sub + key(k), False, at))

    def decode(self, row: "Field", value: Any) -> Decoded:
        if not isinstance(value, dict):
            return Decoded(LEAVE)
        return Decoded(dict(value) if value else SKIP)


@frozen(repr=False, eq=False, slots=False)
class Text:
    """A number or a switch written as annotation text (``"4"``; ``"true"`` when set, nothing
    when not) and read back from it: Kueue parses its PodSet annotations with
    ``strconv.ParseInt`` / ``ParseBool`` (pkg/controller/jobframework/tas.go)."""

    switch: bool = False
    TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})

    def encode(self, row: "Field", value: Any, out: list[Entry]) -> None:
        if value is not False:
            text = "true" if self.switch else str(value)
            out.append(Entry(row.source, row.slot, text, row.sub, False, row.at))

    def decode(self, row: "Field", value: Any) -> Decoded:
        if self.switch and value in self.TRUE:
            return Decoded(True)
        if not self.switch and isinstance(value, str) and value.isascii() and value.isdigit():
            return Decoded(int(value))
        what = "true" if self.switch else "a number"
        return Decoded(SKIP, (((), f"{row.source} is written as {what} only: dropped"),))


@frozen(repr=False, eq=False, slots=False)
class Names:
    """A list of names as the list of ``{name: ...}`` Kubernetes writes (gates, pull secrets)."""

    def encode(self, row: "Field", value: tuple[str, ...], out: list[Entry]) -> None:
        if value:
            names = [{"name": n} for n in value]
            out.append(Entry(row.source, row.slot, names, row.sub, False, row.at))

    def decode(self, row: "Field", value: Any) -> Decoded:
        names, losses = [], []
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(item, dict) and set(item) == {"name"}:
                names.append(item["name"])
            else:
                losses.append(((i,), f"{row.at.top} holds names only: dropped"))
        return Decoded(names or SKIP, tuple(losses))


@frozen(repr=False, eq=False, slots=False)
class Items:
    """A list of Kubernetes objects, each the list item whose ``by`` is its own."""

    by: str

    def encode(self, row: "Field", value: tuple[Mapping[str, Any], ...], out: list[Entry]) -> None:
        for i, item in enumerate(value):
            sub = row.sub + select(self.by, item[self.by])
            out.append(Entry(f"{row.source}[{i}]", row.slot, copied(item), sub, False, row.at))

    def decode(self, row: "Field", value: Any) -> Decoded:
        if not isinstance(value, list):
            return Decoded(SKIP, (((), "must be a list: dropped"),))
        found = tuple(((i,), (item_segment(item, i),)) for i, item in enumerate(value))
        return Decoded(value or SKIP, sources=found)


@frozen(repr=False, eq=False, slots=False)
class EnvPairs:
    """A map of environment variables as the ``{name, value}`` list of a container's env."""

    def encode(self, row: "Field", value: Mapping[str, str], out: list[Entry]) -> None:
        for k, v in value.items():
            sub = row.sub + select("name", k)
            out.append(Entry(row.source + key(k), row.slot, env_var(k, v), sub, False, row.at))

    def decode(self, row: "Field", value: Any) -> Decoded:
        if not isinstance(value, list):
            return Decoded(LEAVE)
        env, losses = {}, []
        for i, item in enumerate(value):
            if plain_env(item):
                env[item["name"]] = item["value"]
            else:
                losses.append(((item_segment(item, i),), "plain values only here: dropped"))
        return Decoded(env or SKIP, tuple(losses))


@frozen(repr=False, eq=False, slots=False)
class Hatch:
    """An escape hatch: each key deep-merged into the slot of that name in its group (``pod.*``);
    read back from what the typed slots leave in the pod and the container."""

    def encode(self, row: "Field", value: Mapping[str, Any], out: list[Entry]) -> None:
        for k, v in value.items():
            at = row.at / k
            out.append(Entry(str(at), self.slot(row, k), copied(v), "", True, at))

    @staticmethod
    def slot(row: "Field", key: str) -> str:
        """The slot a key lands in: ``pod_spec_overrides.hostNetwork`` -> ``pod.hostNetwork``."""
        return f"{row.slot.removesuffix('.*')}.{key}"

    def decode(self, row: "Field", value: Any) -> Decoded:
        return Decoded(LEAVE)  # the importer's escape hatches read what is left over


VALUE = Value()
NONEMPTY = Value(empty=True)
KEYED = Keyed()
NAMES = Names()
COUNT_TEXT = Text()
SWITCH_TEXT = Text(switch=True)
HATCH = Hatch()


@frozen(repr=False, eq=False, slots=False)
class Field:
    """One row: the spec field at ``source`` fills ``slot`` at ``sub``, written by ``codec``."""

    source: str
    slot: str
    sub: str = ""
    codec: Codec = VALUE
    # the spec attributes (plain identifiers), e.g. (runtime_ref, name)
    chain: tuple[str, ...] = field(init=False)
    at: FieldPath = field(init=False)  # the top-level field: what an error names
    part: str | None = field(init=False)  # the part the row is inside (``elastic``), if any

    def __attrs_post_init__(self) -> None:
        chain = tuple(self.source.split("."))
        for name, value in (
            ("chain", chain),
            ("at", FieldPath.of(chain[0])),
            ("part", chain[0] if len(chain) > 1 else None),
        ):
            object.__setattr__(self, name, value)


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


def secret_env_var(name: str, secret: str) -> dict[str, Any]:
    """A ``secret_env`` entry: the value of key ``name`` in the job's Secret."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": name}}}

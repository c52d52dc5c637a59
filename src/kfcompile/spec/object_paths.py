"""Field paths into rendered objects: ``spec.trainer.env[name=FOO].value``.

The placement tables in ``targets/`` are written in this notation, ``explain`` prints it, and the
property tests read values back with ``get``. Segments:

- ``key`` or ``["key.with/dots"]``: a mapping key;
- ``[3]``: a list index;
- ``[name=node]``: the list item whose ``name`` is ``node`` (created when absent);
- ``*``: every value of a mapping (each replica of a PyTorchJob).
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kfcompile.spec.frozen import FrozenList, FrozenMap


class Select(NamedTuple):
    """A list item chosen by one of its keys, e.g. the container named ``node``."""

    key: str
    value: str


class Each:
    """Every value of a mapping (``*``); use the ``EACH`` singleton."""

    def __repr__(self) -> str:
        return "EACH"


EACH = Each()

Segment = str | int | Select | Each
Path = tuple[Segment, ...]

_TOKEN = re.compile(
    r"""\.?(?:
        (?P<key>[A-Za-z_$][\w$-]*)
      | \[(?P<index>\d+)\]
      | \[(?P<quoted>"(?:[^"\\]|\\.)*")\]
      | \[(?P<skey>[\w-]+)=(?:(?P<svalue>[^\]"]+)|(?P<squoted>"(?:[^"\\]|\\.)*"))\]
      | (?P<each>\*)
    )""",
    re.VERBOSE,
)


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Path:
    out: list[Segment] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"bad path {text!r} at {pos}")
        if m["key"] is not None:
            out.append(m["key"])
        elif m["index"] is not None:
            out.append(int(m["index"]))
        elif m["quoted"] is not None:
            out.append(_unquote(m["quoted"]))
        elif m["skey"] is not None:
            value = m["svalue"] if m["svalue"] is not None else _unquote(m["squoted"])
            out.append(Select(m["skey"], value))
        else:
            out.append(EACH)
        pos = m.end()
    return tuple(out)


_PLAIN = re.compile(r"[A-Za-z_$][\w$-]*")
_BARE_VALUE = re.compile(r'[^\]"\\\x00-\x1f\x7f]+')


def _quote(text: str) -> str:
    """JSON string syntax, so a path is one line: quotes and every character a terminal would
    not show as itself (controls, and spaces other than " " such as U+00A0) escaped; any
    script's letters kept."""
    quoted = json.dumps(text, ensure_ascii=False)
    if quoted.isprintable():
        return quoted
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in quoted)


def _unquote(text: str) -> str:
    return str(json.loads(text, strict=False))


@functools.lru_cache(maxsize=4096)
def key(k: str) -> str:
    """A mapping key as a path segment, quoted when it is not a plain identifier."""
    return f".{k}" if _PLAIN.fullmatch(k) else f"[{_quote(k)}]"


@functools.lru_cache(maxsize=4096)
def select(k: str, v: str) -> str:
    """The list item whose ``k`` is ``v``, quoted when ``v`` could be misread."""
    return f"[{k}={v}]" if _BARE_VALUE.fullmatch(v) else f"[{k}={_quote(v)}]"


def format(path: Path) -> str:
    text = ""
    for seg in path:
        if isinstance(seg, Select):
            text += select(seg.key, seg.value)
        elif isinstance(seg, Each):
            text += ".*"
        elif isinstance(seg, int):
            text += f"[{seg}]"
        else:
            text += key(seg)
    return text.lstrip(".")


def put(doc: Any, path: Path, value: Any, merge: "Merge | None" = None) -> list[Path]:
    """Set a copy of ``value`` at ``path``; with ``merge``, merge it into what is there
    (``merged``), and return where it replaced something else.

    Missing containers on the way are created: a list where the next segment selects an item,
    a mapping otherwise.
    """
    return Builder(doc).put(path, copied(value), merge)


class Builder:
    """Puts many values into one document, remembering the containers it walked through and
    where the named items of each list are.

    A render places dozens of values under the same deep prefixes (a runtime patch's pod spec
    is twelve segments down); each prefix is walked once instead of once per value. An item
    chosen by ``[name=X]`` is found through an index of its list, which the builder keeps true
    as it changes the list: scanning the list for each of 10,000 env entries made rendering
    quadratic.
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self._at: dict[Path, list[Any]] = {(): [doc]}
        self._below: dict[Path, list[Path]] = {}  # remembered prefixes one segment down
        # id of a list -> (the list, kept so the id stays its own; key -> value -> first position)
        self._lists: dict[int, tuple[list[Any], dict[str, dict[str, int]]]] = {}

    def put(self, path: Path, value: Any, merge: "Merge | None" = None) -> list[Path]:
        """Store ``value`` (which the caller hands over) at ``path``; copies for every further
        place a ``*`` reaches, so no two places share a container. With ``merge``, returns the
        paths below ``path`` where the merge replaced something else (``merged``)."""
        leaf, above = path[-1], path[:-1]
        # A key of a list item changes in place: what selected the item by that key may differ.
        item_key = (
            leaf if type(leaf) is str and above and isinstance(above[-1], int | Select) else None
        )
        stale: list[Segment] = []
        replaced: list[Path] = []
        for n, parent in enumerate(self._containers(above, leaf)):
            before = _named_by(parent, item_key) if item_key else None
            stale += self._put_leaf(parent, leaf, copied(value) if n else value, merge, replaced)
            if item_key and before != (after := _named_by(parent, item_key)):
                self._renamed(above[:-1], item_key, before, after)
        for seg in stale:  # containers remembered below a replaced value are gone
            self._forget((*above, seg))
        return list(dict.fromkeys(replaced))  # each replica's merge finds the same places

    def _containers(self, prefix: Path, below: Segment) -> list[Any]:
        found = self._at.get(prefix)
        if found is not None:
            return found
        seg = prefix[-1]
        up = self._containers(prefix[:-1], seg)
        if isinstance(seg, Each):
            found = [child for node in up for child in node.values()]
        else:
            make = list if isinstance(below, int | Select) else dict
            found = [self._child(node, seg, make()) for node in up]
        self._at[prefix] = found
        self._below.setdefault(prefix[:-1], []).append(prefix)
        return found

    def _forget(self, path: Path) -> None:
        """Drop the containers remembered at and below ``path``: the value there was replaced."""
        stale = [path]
        while stale:
            prefix = stale.pop()
            self._at.pop(prefix, None)
            stale += self._below.pop(prefix, ())

    def _child(self, node: Any, seg: Segment, create: Any) -> Any:
        if isinstance(seg, str):
            return node.setdefault(seg, create)
        if isinstance(seg, int):
            if seg == len(node):
                self._store(node, seg, create)
            return node[seg]
        if isinstance(seg, Select):
            i = self._find(node, seg)
            if i is None:
                i = len(node)
                self._store(node, i, {seg.key: seg.value})
            return node[i]
        raise ValueError("'*' cannot be the last segment")

    def _put_leaf(
        self, parent: Any, leaf: Segment, value: Any, merge: "Merge | None", replaced: list[Path]
    ) -> list[Segment]:
        """Store ``value`` under ``parent``; with ``merge``, merge it into what is there (adding
        to ``replaced`` where it replaced something else). Returns the segments below
        ``parent`` that may have led to a replaced container."""

        def into(old: Any) -> Any:
            assert merge is not None
            new, found = merged(old, value, merge)
            replaced.extend(found)
            return new

        if type(leaf) is str:
            old = parent.get(leaf)
            parent[leaf] = into(old) if merge and leaf in parent else value
            return [leaf] if type(old) is dict or type(old) is list else []
        if isinstance(leaf, Select):
            i = self._find(parent, leaf)
            if i is None:
                self._store(parent, len(parent), {**value, leaf.key: leaf.value})
                return []
            item = parent[i]
            self._store(parent, i, into(item) if merge else {**item, **value})
            return _leading_to(i, item, parent[i])
        if isinstance(leaf, int):
            if leaf == len(parent):
                self._store(parent, leaf, into(None) if merge else value)
                return []
            item = parent[leaf]
            self._store(parent, leaf, into(item) if merge else value)
            return _leading_to(leaf, item, parent[leaf])
        raise ValueError("'*' cannot be the last segment")

    def _renamed(self, at: Path, key: str, *names: str | None) -> None:
        """An item of the lists at ``at`` changed its ``key`` in place."""
        for items in self._at.get(at, ()):
            indexed = self._lists.get(id(items))
            if indexed is not None:
                indexed[1].pop(key, None)  # index again when next asked (rare)
        for name in names:
            if name is not None:
                self._forget((*at, Select(key, name)))

    def _find(self, items: list[Any], seg: Select) -> int | None:
        """Where the first item whose ``seg.key`` is ``seg.value`` is, if any."""
        _, by_key = self._lists.setdefault(id(items), (items, {}))
        positions = by_key.get(seg.key)
        if positions is None:  # the first look-up by this key: index the list once
            positions = by_key[seg.key] = {}
            for i, item in enumerate(items):
                _note(positions, _named_by(item, seg.key), i)
        return positions.get(seg.value)

    def _store(self, items: list[Any], i: int, item: Any) -> None:
        """``items[i] = item`` (``i`` at the end appends), keeping the list's indexes true."""
        old = items[i] if i < len(items) else _NOTHING
        if old is _NOTHING:
            items.append(item)
        else:
            items[i] = item
        indexed = self._lists.get(id(items))
        if indexed is None:
            return
        by_key = indexed[1]
        for key in list(by_key):
            name = _named_by(item, key)
            if old is _NOTHING:
                _note(by_key[key], name, i)
            elif _named_by(old, key) != name:  # renamed (rare): index again when next asked
                del by_key[key]


_NOTHING = object()


def _leading_to(i: int, old: Any, new: Any) -> list[Segment]:
    """The segments that may have led to item ``i`` of a list, before or after it was replaced."""
    return [
        i,
        *(
            Select(k, v)
            for item in (old, new)
            if isinstance(item, dict)
            for k, v in item.items()
            if isinstance(v, str)
        ),
    ]


def _named_by(item: Any, key: str) -> str | None:
    """The value a ``[key=value]`` segment would match ``item`` on: ``paths.parse`` gives only
    strings."""
    name = item.get(key) if isinstance(item, dict) else None
    return name if isinstance(name, str) else None


def _note(positions: dict[str, int], name: str | None, i: int) -> None:
    if name is not None:
        positions.setdefault(name, i)  # the first item of that name is the one selected


def copied(value: Any) -> Any:
    """A deep copy of plain data (dicts, lists, scalars): outputs never alias the spec."""
    kind = type(value)
    if kind is dict or kind is FrozenMap:
        return {k: copied(v) for k, v in value.items()}
    if kind is list or kind is tuple or kind is FrozenList:
        return [copied(v) for v in value]
    return value


def get(doc: Any, path: Path) -> Any:
    """The value at ``path``; a ``*`` yields the list of values found under each key."""
    node = doc
    for i, seg in enumerate(path):
        if isinstance(seg, Each):
            return [get(child, path[i + 1 :]) for child in node.values()]
        if isinstance(seg, Select):
            matches = [item for item in node if item.get(seg.key) == seg.value]
            if not matches:
                raise KeyError(format(path[: i + 1]))
            node = matches[0]
        else:
            node = node[seg]
    return node


class MergeConflict(TypeError):
    """An override whose shape cannot merge with what was generated there."""


Kind = Any  # a core/v1 field type in ``k8s_core_v1.json``'s notation ("string", {"ref": ...})
FREE: Kind = "object"  # a free-form mapping: merged key by key, its lists replaced


# Fields of a core/v1 object that a strategic merge patch keeps side by side but of which the
# object takes only one (validateEnvVarValueFrom: a value or a valueFrom): an override giving
# one where the generated object has another replaces it.
ONE_OF: Mapping[str, frozenset[str]] = {"EnvVar": frozenset({"value", "valueFrom"})}


class Merge(NamedTuple):
    """How an override merges into what was generated: the value's core/v1 type, and the
    properties of each core/v1 object by name (``k8s_schema.properties``)."""

    kind: Kind
    schema: Callable[[str], Mapping[str, Kind]]


def _no_schema(definition: str) -> Mapping[str, Kind]:
    return {}


ANY = Merge(FREE, _no_schema)  # what a value of unknown type merges as


def merged(base: Any, over: Any, how: Merge = ANY) -> tuple[Any, list[Path]]:
    """``over`` merged into ``base`` as a Kubernetes strategic merge patch would, by the type
    ``how`` gives; and the paths (below the value) where ``over`` replaced something else.

    Per core/v1 type (``x-kubernetes-patch-strategy`` in the OpenAPI schema, which
    ``k8s_core_v1.json`` carries as ``merge``): mappings and objects merge key by key; a list
    with a merge key (containers, volumes and env by ``name``, volumeMounts by ``mountPath``,
    ports by ``containerPort``...) merges item by item on that key, new items appended, and an
    item of a ``retainKeys`` list (volumes) keeps only the keys ``over`` gives it; every other
    list (command, args, tolerations...) is atomic and scalars too: ``over`` replaces them.
    Raises ``MergeConflict`` where ``over`` would replace a mapping or list with something else.
    """
    replaced: list[Path] = []
    return _merge(base, over, how.kind, how.schema, (), replaced), replaced


def _merge(
    base: Any,
    over: Any,
    kind: Kind,
    schema: Callable[[str], Mapping[str, Kind]],
    at: Path,
    replaced: list[Path],
) -> Any:
    if isinstance(base, dict | list) and type(over) is not type(base):
        what = "a mapping" if isinstance(base, dict) else "a list"
        raise MergeConflict(f"must be {what}: it merges into the generated one")
    if isinstance(base, dict):
        ref = kind["ref"] if isinstance(kind, dict) and "ref" in kind else None
        props = None if ref is None else schema(ref)
        inner = kind.get("map", FREE) if isinstance(kind, dict) else FREE
        one_of = ONE_OF.get(ref, frozenset()) if ref is not None else frozenset()
        had = [k for k in one_of if base.get(k) is not None]
        out = dict(base)
        for k, v in over.items():
            if k in out:
                below = inner if props is None else props.get(k, FREE)
                out[k] = _merge(out[k], v, below, schema, (*at, k), replaced)
            else:
                out[k] = copied(v)
                if k in one_of and v is not None and had:
                    replaced.append(at)  # the object's value comes from elsewhere now
        return out
    merge_key = kind.get("merge") if isinstance(kind, dict) and "list" in kind else None
    if isinstance(base, list) and merge_key:
        return _merge_by_key(base, over, kind, schema, at, replaced)
    if isinstance(base, list) and merge_key == "":  # a set of scalars: their union
        have = {_frozen(v) for v in base}
        return base + [copied(v) for v in over if _frozen(v) not in have]
    if base is not None and base != over:
        replaced.append(at)
    return copied(over)


def _merge_by_key(
    base: list[Any],
    over: list[Any],
    kind: Kind,
    schema: Callable[[str], Mapping[str, Kind]],
    at: Path,
    replaced: list[Path],
) -> list[Any]:
    """A list whose items are merged on their ``kind["merge"]`` key (strategic merge patch)."""
    key, item_kind = kind["merge"], kind["list"]

    def key_of(item: Any) -> Any:
        value = item.get(key) if isinstance(item, dict) else None
        return value if isinstance(value, str | int) and not isinstance(value, bool) else None

    first: dict[Any, Any] = {}
    for item in over:
        if key_of(item) is not None:
            first.setdefault(key_of(item), item)
    out: list[Any] = []
    for item in base:
        name = key_of(item)
        if name is None or name not in first:
            out.append(item)
            continue
        here = (*at, Select(key, str(name)))
        patch = first[name]
        if kind.get("retainKeys"):  # the item keeps only the keys the patch gives it
            replaced += [(*here, k) for k in item if k not in patch]
            item = {k: v for k, v in item.items() if k in patch}
        out.append(_merge(item, patch, item_kind, schema, here, replaced))
    have = {key_of(item) for item in base} - {None}
    out += [copied(item) for item in over if key_of(item) is None or key_of(item) not in have]
    return out


def all_named(items: list[Any]) -> bool:
    """Whether every item is a mapping with a string ``name`` (containers, volumes, env)."""
    return all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


def find_named(items: list[Any], name: str) -> dict[str, Any] | None:
    """The first item named ``name``, if any."""
    return next((i for i in items if isinstance(i, dict) and i.get("name") == name), None)


def item_segment(item: Any, index: int) -> Select | int:
    """How a list item is named in a path: by its ``name`` when it has one, else its index."""
    name = _named_by(item, "name")
    return index if name is None else Select("name", name)


def _frozen(value: Any) -> Any:
    """A hashable twin of plain data, equal where the data is equal: ``item in base`` for
    every item was quadratic."""
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value

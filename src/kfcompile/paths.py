"""Field paths into rendered objects: ``spec.trainer.env[name=FOO].value``.

The placement tables in ``targets/`` are written in this notation, ``explain`` prints it, and the
property tests read values back with ``get``. Segments:

- ``key`` or ``["key.with/dots"]``: a mapping key;
- ``[3]``: a list index;
- ``[name=node]``: the list item whose ``name`` is ``node`` (created when absent);
- ``*``: every value of a mapping (each replica of a PyTorchJob).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, NamedTuple

from kfcompile.frozen import FrozenList, FrozenMap


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
    """JSON string syntax: quotes and control characters escaped, so a path is one line."""
    return json.dumps(text, ensure_ascii=False)


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


def parents(doc: Any, path: Path) -> list[Any]:
    """The containers that hold the last segment of ``path`` (one per ``*`` match).

    Missing containers on the way are created: a list where the next segment selects an item,
    a mapping otherwise.
    """
    nodes = [doc]
    for i, seg in enumerate(path[:-1]):
        if isinstance(seg, Each):
            nodes = [child for node in nodes for child in node.values()]
            continue
        make = list if isinstance(path[i + 1], int | Select) else dict
        nodes = [_child(node, seg, make()) for node in nodes]
    return nodes


def _child(node: Any, seg: Segment, create: Any) -> Any:
    if isinstance(seg, str):
        return node.setdefault(seg, create)
    if isinstance(seg, int):
        if seg == len(node):
            node.append(create)
        return node[seg]
    if isinstance(seg, Select):
        for item in node:
            if item.get(seg.key) == seg.value:
                return item
        item = {seg.key: seg.value}
        node.append(item)
        return item
    raise ValueError("'*' cannot be the last segment")


def put_leaf(parent: Any, leaf: Segment, value: Any, merge: bool = False) -> bool:
    """Store ``value`` itself under ``parent`` (the caller owns it); with ``merge``, deep-merge it
    into what is there. Returns whether a container that was already there got replaced."""
    if type(leaf) is str:
        old = parent.get(leaf)
        parent[leaf] = merged(old, value) if merge and leaf in parent else value
        return type(old) is dict or type(old) is list
    if isinstance(leaf, Select):
        for i, item in enumerate(parent):
            if item.get(leaf.key) == leaf.value:
                parent[i] = merged(item, value) if merge else {**item, **value}
                return True
        parent.append({**value, leaf.key: leaf.value})
        return False
    if isinstance(leaf, int):
        had = leaf < len(parent)
        _child(parent, leaf, None)
        parent[leaf] = merged(parent[leaf], value) if merge else value
        return had
    raise ValueError("'*' cannot be the last segment")


def put(doc: Any, path: Path, value: Any, merge: bool = False) -> None:
    """Set a copy of ``value`` at ``path``; with ``merge``, deep-merge it into what is there."""
    for parent in parents(doc, path):
        put_leaf(parent, path[-1], copied(value), merge)


class Builder:
    """Puts many values into one document, remembering the containers it walked through.

    A render places dozens of values under the same deep prefixes (a runtime patch's pod spec
    is twelve segments down); each prefix is walked once instead of once per value.
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self._at: dict[Path, list[Any]] = {(): [doc]}

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
            found = [_child(node, seg, make()) for node in up]
        self._at[prefix] = found
        return found

    def put(self, path: Path, value: Any, merge: bool = False) -> None:
        """Store ``value`` (which the caller hands over) at ``path``; copies for every further
        place a ``*`` reaches, so no two places share a container."""
        leaf = path[-1]
        first, *others = self._containers(path[:-1], leaf)
        replaced = put_leaf(first, leaf, value, merge)
        for parent in others:
            replaced |= put_leaf(parent, leaf, copied(value), merge)
        if replaced:  # containers remembered below the old value are gone
            for stale in [p for p in self._at if p[: len(path)] == path]:
                del self._at[stale]


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


def merged(base: Any, over: Any) -> Any:
    """Deep-merge ``over`` into ``base`` without dropping anything ``base`` has.

    Mappings merge key by key; lists of named items (containers, volumes, env) merge by
    ``name``; other lists gain the items they lack; a scalar in ``over`` replaces one in ``base``.
    Raises ``MergeConflict`` where ``over`` would replace a mapping or list with something else.
    """
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merged(out[k], v) if k in out else copied(v)
        return out
    if isinstance(base, dict | list) and type(over) is not type(base):
        kind = "a mapping" if isinstance(base, dict) else "a list"
        raise MergeConflict(f"must be {kind}: it merges into the generated one")
    if isinstance(base, list) and isinstance(over, list):
        if _named(base) and _named(over):
            by_name = {item["name"]: item for item in base}
            out_list = [merged(item, _find(over, item["name"]) or {}) for item in base]
            out_list += [copied(item) for item in over if item["name"] not in by_name]
            return out_list
        return base + [copied(item) for item in over if item not in base]
    return copied(over)


def _named(items: list[Any]) -> bool:
    return all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


def _find(items: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((i for i in items if i["name"] == name), None)

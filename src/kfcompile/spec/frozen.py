"""Deeply immutable plain data: what a spec's maps and lists become when it is built.

``FrozenMap`` and ``FrozenList`` are a ``dict`` and a ``list`` that refuse every change and can
be hashed, so a ``JobSpec`` is a value all the way down (hashable, safe to share) while code
reading it, ``json.dumps`` and comparisons with plain data keep working as with any dict/list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} cannot be changed: a spec is immutable")


class FrozenMap(dict[K, V]):
    """A ``dict`` that cannot change after it is made."""

    __slots__ = ("_hash",)

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        dict.__init__(self, items)
        self._hash: int | None = None

    def __hash__(self) -> int:  # type: ignore[override]
        if self._hash is None:
            self._hash = hash(frozenset(self.items()))
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle without calling __setitem__
        return (type(self), (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse


class FrozenList(list[V]):
    """A ``list`` that cannot change after it is made."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _refuse
    sort = reverse = _refuse
    __iadd__ = __imul__ = _refuse


def plain(value: Any) -> Any:
    """A scalar of a subclass of str, int or float (a ``str`` Enum, an IntEnum) as the plain
    value it stands for, which is what YAML and JSON can write: a spec built in Python may hold
    one where a YAML spec holds its value."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return value


def freeze(value: Any) -> Any:
    """``value`` with every dict and list in it (at any depth) made immutable, and every scalar
    and key plain (``plain``)."""
    kind = type(value)
    if kind is FrozenMap or kind is FrozenList:
        return value  # frozen all the way down when it was made
    if isinstance(value, Mapping):
        return FrozenMap({plain(k): freeze(v) for k, v in value.items()})
    if kind is list or kind is tuple:
        return FrozenList([freeze(v) for v in value])
    return plain(value)


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of frozen (or plain) data, or of any mappings and sequences a
    parser hands over."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value

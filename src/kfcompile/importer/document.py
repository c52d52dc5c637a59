"""The manifest being read, as a working copy: values are taken out as they are understood, so
what is left at the end is exactly what no spec field holds.

The same working copy holds a slot's value while the field table's rows take their parts of it
(``runtime_ref.name`` takes ``.name`` of ``spec.runtimeRef``): what they leave is lost there too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from kfcompile.spec.frozen import thaw
from kfcompile.spec.object_paths import Path, Segment, Select, all_named, find_named, item_segment
from kfcompile.targets.codecs import GONE, MISSING, present

# Set by the API server or a controller: a new object must not carry them (dropped silently).
SERVER_METADATA: Final = (
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
    "ownerReferences",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


def strip_server_fields(obj: dict[str, Any]) -> None:
    obj.pop("status", None)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for k in SERVER_METADATA:
            meta.pop(k, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)


def child(node: Any, seg: Segment) -> Any:
    """``node``'s child at ``seg``, or ``MISSING``."""
    if isinstance(seg, str):
        return node.get(seg, MISSING) if isinstance(node, dict) else MISSING
    if not isinstance(node, list):
        return MISSING
    if isinstance(seg, int):
        return node[seg] if seg < len(node) and node[seg] is not GONE else MISSING
    if isinstance(seg, Select):
        for item in node:
            if isinstance(item, dict) and item.get(seg.key) == seg.value:
                return item
    return MISSING


def empty(value: Any) -> bool:
    """Nothing to carry: null, ``{}``, or a list whose items were all taken."""
    if isinstance(value, list):
        return all(v is GONE for v in value)
    return value is GONE or value is None or value == {}


class Doc:
    """A value being read. Every container passed on the way to a value taken counts as read,
    so ``leftovers`` names exactly what was not taken, at the shallowest path that holds it."""

    def __init__(self, value: Any) -> None:
        self.root: Any = thaw(value)  # plain dicts and lists, whatever a parser gave
        self.touched: set[Path] = {()}

    def get(self, path: Path) -> Any:
        node: Any = self.root
        for seg in path:
            node = child(node, seg)
            if node is MISSING:
                return MISSING
        return node

    def take(self, path: Path) -> Any:
        """The value at ``path``, removed from the document (``MISSING`` when absent). A list
        item leaves a placeholder: the paths of the items after it stay right."""
        if not path:
            value, self.root = self.root, GONE
            return present(value)
        parent: Any = self.root
        for i, seg in enumerate(path[:-1]):
            node = child(parent, seg)
            if node is MISSING:
                return MISSING
            self.touched.add(path[: i + 1])
            parent = node
        value = child(parent, path[-1])
        if value is MISSING:
            return MISSING
        self.touched.add(path)
        if isinstance(path[-1], str):
            del parent[path[-1]]
        else:
            parent[next(i for i, v in enumerate(parent) if v is value)] = GONE
        return present(value)

    def leftovers(self) -> Iterator[Path]:
        def walk(node: Any, path: Path) -> Iterator[Path]:
            if empty(node):
                return
            if path in self.touched and isinstance(node, dict):
                # The key a table path selected this item by (``[name=node]``) names it.
                chosen = path[-1].key if path and isinstance(path[-1], Select) else None
                for k, v in node.items():
                    if k != chosen:
                        yield from walk(v, (*path, k))
            elif path in self.touched and isinstance(node, list):
                for i, item in enumerate(node):
                    yield from walk(item, (*path, item_segment(item, i)))
            else:
                yield path

        yield from walk(self.root, ())


# --- comparing and merging trees of plain data ------------------------------------------------


def differences(a: Any, b: Any, at: Path) -> Iterator[Path]:
    """Paths (under ``at``) where ``b`` differs from ``a``; named list items matched by name."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if k in a and k in b:
                yield from differences(a[k], b[k], (*at, k))
            else:
                yield (*at, k)
    elif isinstance(a, list) and isinstance(b, list) and all_named(a) and all_named(b):
        for name in dict.fromkeys([i["name"] for i in a] + [i["name"] for i in b]):
            x, y = find_named(a, name), find_named(b, name)
            if x is None or y is None:
                yield (*at, Select("name", name))
            else:
                yield from differences(x, y, (*at, Select("name", name)))
    elif a != b:
        yield at


def merge_into(target: dict[str, Any], extra: dict[str, Any], at: Path) -> Iterator[Path]:
    """Merge ``extra`` into ``target`` in place (maps by key, named lists by name); yields the
    paths below ``at`` where ``extra`` had another value (``target`` keeps its own)."""
    for k, v in extra.items():
        mine = target.get(k, MISSING)
        if mine is MISSING:
            target[k] = v
        elif isinstance(mine, dict) and isinstance(v, dict):
            yield from merge_into(mine, v, (*at, k))
        elif isinstance(mine, list) and isinstance(v, list) and all_named(mine) and all_named(v):
            for item in v:
                same = find_named(mine, item["name"])
                if same is None:
                    mine.append(item)
                else:
                    yield from merge_into(same, item, (*at, k, Select("name", item["name"])))
        elif mine != v:
            yield (*at, k)

"""The rendered objects, checked before render hands them out: the target CRD's limits
(``output_limits``) and the API server's pod rules (``pod_rules``), on the merged result, so
that what overrides bring in is checked like what the spec's own fields write.

Each problem is told at the spec field that wrote the value: the placement (``explain``'s row)
whose value is the one found wrong, with the path below it (``container_overrides.env[1]``);
else the field that wrote the object around it, or the fields that wrote into it, naming the
output path too; else, for what kfcompile generates itself, the output path alone.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kfcompile.output import limits as output_limits
from kfcompile.output.limits import Places
from kfcompile.spec import object_paths, pod_rules
from kfcompile.spec.errors import Problem
from kfcompile.spec.fieldpath import FieldPath, field_path

if TYPE_CHECKING:
    from kfcompile.targets.codecs import Placement

Path = tuple[str | int, ...]
_parse = object_paths.parse.__wrapped__


@functools.cache
def _tree(limits: tuple[output_limits.Limit, ...], places: Places) -> output_limits.Branch:
    """A target's CRD limits (tagged True), the pod rules and the annotation budget at its
    ``places``, as one tree."""
    pod = functools.partial(pod_rules.pod_spec, whole=places.whole)
    found: list[tuple[str, output_limits.Check, bool]] = [
        (path, check, True) for path, check in output_limits.checks(limits)
    ]
    found += [(path, pod, False) for path in places.pods]
    found += [(path, pod_rules.resources, False) for path in places.resources]
    found += [(path, output_limits.annotation_budget, False) for path in places.annotations]
    return output_limits.tree(found)


def _found(doc: Mapping[str, Any], checks: output_limits.Branch) -> list[tuple[Path, str]]:
    """What the checks find, but no pod rule's problem where the CRD's limits already found
    one (a duplicate volume is a duplicate list-map key first)."""
    found = list(output_limits.walk(doc, checks))
    limited = {at for at, _, limit in found if limit}
    return [
        (at, message)
        for at, message, limit in found
        if limit or (at not in limited and at[:-1] not in limited)
    ]


def problems(
    objects: Sequence[Mapping[str, Any]],
    placements: Sequence[Placement],
    kind: str,
    limits: tuple[output_limits.Limit, ...],
    places: Places,
) -> list[Problem]:
    """Every problem of the rendered ``objects`` (the job of ``kind`` and its companions), told
    at the spec field that wrote it; empty when the API server would take them: the target's
    CRD ``limits``, and the core/v1 rules at its ``places``."""
    checks = _tree(limits, places)
    found: dict[tuple[FieldPath, str], str] = {}  # one line per spec field and message
    for index, doc in enumerate(objects):
        if doc.get("kind") != kind:
            continue
        placed: list[tuple[Placement, object_paths.Path]] | None = (
            None  # read once something is wrong
        )
        for at, message in _found(doc, checks):
            if placed is None:  # uncached: thousands of placements would only evict the cache
                placed = [(p, _parse(p.path)) for p in placements if p.doc == index]
            shown = f"{_name(doc)} {object_paths.format(at)}" if at else _name(doc)
            where, note = _blame(doc, placed, at, shown)
            found.setdefault((where, message), note)
    return [
        Problem(FieldPath((), note), message)
        if at == FieldPath()
        else Problem(at, f"{message} ({note})" if note else message)
        for (at, message), note in found.items()
    ]


def _name(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{doc.get('kind')}/{name}"


# --- which spec field wrote a value ------------------------------------------------------------


_FIELD = re.compile(r"\w+")


def _top(source: str) -> str:
    """The top-level spec field of a placement's source (``env`` of ``env.A``), read without
    the cache of field paths, which thousands of sources would only churn."""
    found = _FIELD.match(source)
    return found[0] if found else source


def _chain(doc: Any, at: Path) -> list[Any]:
    """The rendered nodes from ``doc`` down to ``at``, ``doc`` first; shorter where ``at`` names
    what is missing (``values`` a selector lacks)."""
    out = [doc]
    for seg in at:
        try:
            doc = doc[seg]
        except (KeyError, IndexError, TypeError):
            break
        out.append(doc)
    return out


def _covers(pattern: object_paths.Path, chain: list[Any], at: Path) -> bool:
    """Whether a placement path (``env[name=A]``, ``*``) reaches the first segments of ``at``."""
    for depth, (seg, step) in enumerate(zip(pattern, at, strict=False)):
        if isinstance(seg, object_paths.Each):
            ok = isinstance(step, str)
        elif isinstance(seg, object_paths.Select):
            item = chain[depth + 1]
            ok = isinstance(step, int) and isinstance(item, Mapping)
            ok = ok and item.get(seg.key) == seg.value
        else:
            ok = seg == step
        if not ok:
            return False
    return True


def _inside(value: Any, chain: list[Any], at: Path, depth: int) -> Path | None:
    """The path below a placement to the rendered value, if the placed value holds it as it is
    (a list item is found by value: a merge may have moved it)."""
    below: list[str | int] = []
    for d, (step, rendered) in enumerate(zip(at[depth:], chain[depth + 1 :], strict=True)):
        if isinstance(step, int):
            if not isinstance(value, list):
                return None
            # the same occurrence of an equal item: the second of two duplicates is the second
            rank = sum(1 for v in chain[depth + d][:step] if v == rendered)
            equal = [i for i, v in enumerate(value) if v == rendered]
            if not equal:
                return None
            index = equal[min(rank, len(equal) - 1)]
            below.append(index)
            value = value[index]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return None
            below.append(step)
            value = value[step]
    return tuple(below) if value == chain[-1] else None


def _blame(
    doc: Mapping[str, Any], placed: list[tuple[Placement, object_paths.Path]], at: Path, shown: str
) -> tuple[FieldPath, str]:
    """The spec field path that wrote the value at ``at`` (``shown`` in the output), and a note
    to show with it, empty when the path says it all."""
    chain = _chain(doc, at)
    at = at[: len(chain) - 1]  # blamed on what is there
    exact: tuple[int, FieldPath] | None = None
    around: tuple[int, str] | None = None
    into: list[str] = []
    for p, pattern in placed:
        if len(pattern) > len(at):
            if _covers(pattern[: len(at)], chain, at):
                top = _top(p.source)
                into += [top] if top not in into else []
            continue
        if not _covers(pattern, chain, at):
            continue
        if p.merge and len(pattern) == len(at):  # merged into what others wrote there too
            top = _top(p.source)
            into += [top] if top not in into else []
        below = _inside(p.value, chain, at, len(pattern))
        if below is not None and (exact is None or len(pattern) >= exact[0]):
            exact = (len(pattern), field_path(p.source).join(FieldPath(below)))
        if around is None or len(pattern) >= around[0]:
            around = (len(pattern), p.source)
    if exact is not None:
        return exact[1], ""
    if len(into) > 1 or (into and around is None):
        return FieldPath.of(into[0]), f"in {shown}, written by {', '.join(into)}"
    if around is not None:
        return field_path(around[1]), f"in {shown}"
    return FieldPath(), shown

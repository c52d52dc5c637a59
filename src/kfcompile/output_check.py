"""The rendered objects, checked before render hands them out: the target CRD's limits
(``output_limits``) and the API server's pod rules (``pod_rules``), on the merged result, so
that what overrides bring in is checked like what the spec's own fields write.

Each problem is told at the spec field that wrote the value: the placement (``explain``'s row)
whose value is the one found wrong, with the path below it (``container_overrides.env[1]``);
else the field that wrote the object around it, or the fields that wrote into it, naming the
output path too; else, for what kfcompile generates itself, the output path alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kfcompile import output_limits, paths, pod_rules
from kfcompile.errors import Problem
from kfcompile.fieldpath import FieldPath, field_path

if TYPE_CHECKING:
    from kfcompile.targets.base import Placement

Path = tuple[str | int, ...]
_parse = paths.parse.__wrapped__


class Pods(NamedTuple):
    """Where a target's rendered job holds pod specs, and the trainer's resources."""

    specs: tuple[str, ...]  # paths (output_limits notation) of PodSpecs
    whole: bool  # whole pod specs (PyTorchJob), or patches of a runtime's pod (TrainJob)
    resources: tuple[str, ...] = ()  # ResourceRequirements outside any pod spec


_TRAINER = ("spec.trainer.resourcesPerNode",)
PODS: Mapping[str, Pods] = {
    "pytorchjob/v1": Pods(("spec.pytorchReplicaSpecs*.template.spec",), whole=True),
    "trainjob/v2.0": Pods(("spec.podSpecOverrides[]",), False, _TRAINER),
    "trainjob/v2.1": Pods(("spec.podTemplateOverrides[].spec",), False, _TRAINER),
    "trainjob/v2.2": Pods((output_limits.TRAINJOB_POD,), False, _TRAINER),
    "trainjob/v2.3": Pods((output_limits.TRAINJOB_POD,), False, _TRAINER),
}


def _found(doc: Mapping[str, Any], target: str) -> Iterator[tuple[Path, str]]:
    """The CRD's limits, then the pod rules, but not where the CRD's already found the same
    (a duplicate volume is a duplicate list-map key first)."""
    limited: set[Path] = set()
    for at, message in output_limits.problems(doc, target):
        limited.add(at)
        yield at, message
    pods = PODS.get(target)
    if pods is None:
        return
    found: list[tuple[Path, str]] = []
    for where in pods.specs:
        for at, spec in output_limits.nodes(doc, where):
            found += [((*at, *sub), m) for sub, m in pod_rules.pod_spec(spec, pods.whole)]
    for where in pods.resources:
        for at, r in output_limits.nodes(doc, where):
            found += [((*at, *sub), m) for sub, m in pod_rules.resources(r)]
    yield from ((at, m) for at, m in found if at not in limited and at[:-1] not in limited)


def problems(
    objects: Sequence[Mapping[str, Any]], placements: Sequence[Placement], target: str, kind: str
) -> list[Problem]:
    """Every problem of the rendered ``objects`` (the job of ``kind`` and its companions), told
    at the spec field that wrote it; empty when the API server would take them."""
    found: dict[tuple[FieldPath, str], str] = {}  # one line per spec field and message
    for index, doc in enumerate(objects):
        if doc.get("kind") != kind:
            continue
        placed: list[tuple[Placement, paths.Path]] | None = None  # read once something is wrong
        for at, message in _found(doc, target):
            if placed is None:  # uncached: thousands of placements would only evict the cache
                placed = [(p, _parse(p.path)) for p in placements if p.doc == index]
            shown = f"{_name(doc)} {paths.format(at)}" if at else _name(doc)
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


def _covers(pattern: paths.Path, chain: list[Any], at: Path) -> bool:
    """Whether a placement path (``env[name=A]``, ``*``) reaches the first segments of ``at``."""
    for depth, (seg, step) in enumerate(zip(pattern, at, strict=False)):
        if isinstance(seg, paths.Each):
            ok = isinstance(step, str)
        elif isinstance(seg, paths.Select):
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
    doc: Mapping[str, Any], placed: list[tuple[Placement, paths.Path]], at: Path, shown: str
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
                top = field_path(p.source).top or p.source
                into += [top] if top not in into else []
            continue
        if not _covers(pattern, chain, at):
            continue
        if p.merge and len(pattern) == len(at):  # merged into what others wrote there too
            top = field_path(p.source).top or p.source
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

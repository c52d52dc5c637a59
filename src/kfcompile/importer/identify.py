"""What a manifest is, from the manifest alone: which documents are jobs (and which ConfigMaps
go with them), the kind, and for a TrainJob the Trainer releases whose shape it has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kfcompile.kinds import KINDS
from kfcompile.spec.additions import script_configmap_name
from kfcompile.spec.errors import Problem
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.targets import trainer_releases
from kfcompile.targets.trainjob import Mark

# The Trainer releases (major, minor) whose TrainJob has every release-specific field a
# manifest uses (the releases' marks, `kfcompile.targets.RELEASES`), and the fields that told.
Releases = frozenset[tuple[int, int]]
Features = list[tuple[str, Releases]]


def meta(obj: Any) -> Mapping[str, Any]:
    found = obj.get("metadata") if isinstance(obj, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def describe(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return "a document that is no mapping"
    return f"{obj.get('kind', 'an object without kind')} {meta(obj).get('name', '')}".rstrip()


def job_kind(obj: Any) -> str | None:
    """The kind of a job kfcompile reads (``PyTorchJob``, ``TrainJob``), or None."""
    if not isinstance(obj, Mapping):
        return None
    shape = (obj.get("apiVersion"), obj.get("kind"))
    return next((k.name for k in KINDS.values() if shape == (k.api_version, k.name)), None)


Job = tuple[Mapping[str, Any], list[Mapping[str, Any]]]  # a job and the ConfigMaps it uses


def jobs_in(documents: Iterable[Any]) -> tuple[list[Job], list[Problem]]:
    """The jobs among parsed YAML documents (``kind: List`` items included), each with the
    ConfigMaps that belong to it (its inline script), and a problem for every other document."""
    flat: list[tuple[FieldPath, Any]] = []
    for i, doc in enumerate(documents):
        if doc is None:
            continue
        at = FieldPath.of("documents", i)
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            items = doc.get("items")
            for j, item in enumerate(items if isinstance(items, list) else []):
                flat.append((at / "items" / j, item))
        else:
            flat.append((at, doc))
    jobs = [d for _, d in flat if job_kind(d) is not None]
    wanted = {_script_key(d) for d in jobs}
    claimed: dict[tuple[Any, Any], Mapping[str, Any]] = {}
    others: list[Problem] = []
    for at, d in flat:
        if job_kind(d) is not None:
            continue
        if isinstance(d, Mapping) and d.get("kind") == "ConfigMap" and d.get("apiVersion") == "v1":
            key = (meta(d).get("namespace"), meta(d).get("name"))
            if key in wanted and key not in claimed:
                claimed[key] = d
                continue
        others.append(Problem(at, f"{describe(d)} is not a PyTorchJob or TrainJob: not converted"))
    return [(d, [claimed[k]] if (k := _script_key(d)) in claimed else []) for d in jobs], others


def _script_key(job: Any) -> tuple[Any, str]:
    """Namespace and name of the ConfigMap of the job's inline script."""
    return meta(job).get("namespace"), script_configmap_name(str(meta(job).get("name")))


# --- TrainJob releases --------------------------------------------------------------------------


def trainjob_releases(spec: Mapping[str, Any]) -> tuple[Releases, Features]:
    """The Trainer releases whose TrainJob has every field ``spec`` uses, and the fields that
    told (those of the newest releases last)."""
    having: dict[Mark, Releases] = {}
    for release in reversed(trainer_releases()):
        for mark in release.marks:  # moved to the end: a mark sits at its newest release
            having[mark] = having.pop(mark, frozenset()) | {release.version}
    job = {"spec": spec}
    features = [(mark.label, r) for mark, r in having.items() if mark.found_in(job)]
    fitting = frozenset(r.version for r in trainer_releases())
    for _, releases in features:
        fitting &= releases
    return fitting, features


def version_text(version: tuple[int, int]) -> str:
    return "v{}.{}".format(*version)


def releases_text(releases: Iterable[tuple[int, int]]) -> str:
    names = [version_text(r) for r in sorted(releases)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def detected(releases: Releases, features: Features) -> str:
    if not features:
        known = [r.version for r in trainer_releases()]
        span = f"{version_text(min(known))}-{version_text(max(known))}"
        return f"TrainJob for any Trainer release {span} (no release-specific field)"
    told = ", ".join(f for f, _ in features)
    if releases:
        return f"TrainJob for Trainer {releases_text(releases)} ({told})"
    parts = "; ".join(f"{f}: {releases_text(r)}" for f, r in features)
    return f"TrainJob mixing Trainer releases ({parts})"

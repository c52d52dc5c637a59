"""What a manifest is, from the manifest alone: which documents are jobs (and which ConfigMaps
go with them), the kind, and for a TrainJob the Trainer releases whose shape it has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kfcompile import paths
from kfcompile.errors import Problem
from kfcompile.fieldpath import FieldPath
from kfcompile.kinds import KINDS

# The fields only some Trainer releases (minor versions) have: (key of spec, label, releases).
RELEASE_FIELDS: tuple[tuple[str, str, frozenset[int]], ...] = (
    ("podSpecOverrides", "podSpecOverrides", frozenset({0})),
    ("podTemplateOverrides", "podTemplateOverrides", frozenset({1})),
    ("runtimePatches", "runtimePatches", frozenset({2, 3})),
    ("activeDeadlineSeconds", "activeDeadlineSeconds", frozenset({2, 3})),
    ("labels", "spec.labels", frozenset({0, 1})),
    ("annotations", "spec.annotations", frozenset({0, 1})),
)
RELEASES = frozenset({0, 1, 2, 3})
Features = list[tuple[str, frozenset[int]]]


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
    return meta(job).get("namespace"), f"{meta(job).get('name')}-script"


# --- TrainJob releases --------------------------------------------------------------------------


def trainjob_releases(spec: Mapping[str, Any]) -> tuple[frozenset[int], Features]:
    """The Trainer releases (minor versions) whose TrainJob has every field ``spec`` uses, and
    the fields that told."""
    features: Features = [(label, r) for key, label, r in RELEASE_FIELDS if key in spec]
    if _patch_has(spec, "terminationGracePeriodSeconds"):
        features.append(("terminationGracePeriodSeconds", frozenset({3})))
    trainer = spec.get("trainer")
    if isinstance(trainer, Mapping) and isinstance(trainer.get("numProcPerNode"), str):
        features.append(("string numProcPerNode", frozenset({0, 1})))
    fitting = RELEASES
    for _, releases in features:
        fitting &= releases
    return fitting, features


_JOBS = paths.parse("trainingRuntimeSpec.template.spec.replicatedJobs")
_POD = paths.parse("template.spec.template.spec")


def _patch_has(spec: Mapping[str, Any], key: str) -> bool:
    for patch in spec.get("runtimePatches") or []:
        try:
            jobs = paths.get(patch, _JOBS)
        except (KeyError, TypeError, AttributeError):
            continue
        for job in jobs if isinstance(jobs, list) else []:
            try:
                pod = paths.get(job, _POD)
            except (KeyError, TypeError, AttributeError):
                continue
            if isinstance(pod, Mapping) and key in pod:
                return True
    return False


def releases_text(releases: Iterable[int]) -> str:
    names = [f"v2.{r}" for r in sorted(releases)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def detected(releases: frozenset[int], features: Features) -> str:
    if not features:
        return "TrainJob for any Trainer release v2.0-v2.3 (no release-specific field)"
    told = ", ".join(dict.fromkeys(f for f, _ in features))
    if releases:
        return f"TrainJob for Trainer {releases_text(releases)} ({told})"
    parts = "; ".join(f"{f}: {releases_text(r)}" for f, r in features)
    return f"TrainJob mixing Trainer releases ({parts})"

"""Kueue's API in the fake cluster, as a Kueue release serves it: the real CRDs (v0.15.8, in
``../shared/crds/kueue``) with the versions that release serves (``SERVES``), installed by
``install``, and the objects stored once and served through each version (``CONVERSIONS``, as
Kueue's conversion webhook converts them: ``apis/kueue/v1beta1/*_conversion.go``).

Stored as ``v1beta2`` (the storage version from Kueue v0.16); what differs in ``v1beta1`` among
the fields anything here writes or reads: a ClusterQueue's ``spec.admissionChecks`` (v1beta1
only: v1beta2 has ``admissionChecksStrategy.admissionChecks[].name``, which v1beta1 also serves,
so a v1beta1 read of a converted ClusterQueue has only the strategy) and ``spec.cohort``
(v1beta2 ``cohortName``), a Workload's ``status.accumulatedPastExexcutionTimeSeconds``
(v1beta2 fixes the spelling).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Final, Protocol

import yaml

from .events import Conversion
from .resources import clone

Obj = dict[str, Any]

GROUP: Final = "kueue.x-k8s.io"
V1BETA1: Final = f"{GROUP}/v1beta1"
V1BETA2: Final = f"{GROUP}/v1beta2"
# What each kind of Kueue release serves: v0.20 on only v1beta2, v0.15 to v0.19 both, v0.13
# and v0.14 only v1beta1 (KUBEFLOW.md, Kueue).
SERVES: Final[dict[str, tuple[str, ...]]] = {
    "v1beta2": ("v1beta2",),
    "both": ("v1beta2", "v1beta1"),
    "v1beta1": ("v1beta1",),
}
KINDS: Final = {"LocalQueue": "localqueues", "ClusterQueue": "clusterqueues",
                "Workload": "workloads", "AdmissionCheck": "admissionchecks"}  # fmt: skip
RELEASE: Final = "v0.15.8"  # the CRD files'
CLUSTER_QUEUE: Final = "cluster-queue"  # the ClusterQueue of the LocalQueue ``cluster.QUEUE``


@functools.cache
def crd(shared: Path, kind: str, serves: str) -> Obj:
    """The CRD of ``kind`` serving exactly the versions of ``SERVES[serves]`` (one object per
    arguments: a CRD must not change once installed)."""
    versions = SERVES[serves]
    suffix = "-v1beta2only" if versions == ("v1beta2",) else ""
    path = shared / "crds" / "kueue" / f"{KINDS[kind]}-{RELEASE}{suffix}.yaml"
    found: Obj = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    kept = [v for v in found["spec"]["versions"] if v["name"] in versions]
    storage = "v1beta2" if "v1beta2" in versions else "v1beta1"
    kept = [{**v, "served": True, "storage": v["name"] == storage} for v in kept]
    return {**found, "spec": {**found["spec"], "versions": kept}}


class Seeded(Protocol):
    def create(self, obj: Obj) -> object: ...


def install(store: Seeded, shared: Path, serves: str) -> None:
    """Kueue's CRDs, serving the versions of ``SERVES[serves]``."""
    for kind in KINDS:
        store.create(crd(shared, kind, serves))


class Served(Protocol):
    def served(self, api_version: str, kind: str) -> object: ...


def api(store: Served, kind: str = "Workload") -> str:
    """The version Kueue's controllers write ``kind`` through: v1beta2 where it is served."""
    return V1BETA2 if store.served(V1BETA2, kind) else V1BETA1


# --- v1beta1 <-> v1beta2 (stored) ---------------------------------------------------------------


def _renamed(node: Obj, old: str, new: str) -> Obj:
    return {(new if k == old else k): v for k, v in node.items()}


def _at(obj: Obj, part: str, change: Any) -> Obj:
    return {**obj, part: change(obj[part])} if isinstance(obj.get(part), dict) else obj


def _cq_to_v1beta2(spec: Obj) -> Obj:
    spec = _renamed(spec, "cohort", "cohortName")
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": n} for n in checks]}
    return spec


def _as(api_version: str, obj: Obj) -> Obj:
    return {**clone(obj), "apiVersion": api_version}


def _cq_write(obj: Obj) -> Obj:
    return _at(_as(V1BETA2, obj), "spec", _cq_to_v1beta2)


def _cq_read(obj: Obj) -> Obj:
    return _at(_as(V1BETA1, obj), "spec", lambda s: _renamed(s, "cohortName", "cohort"))


_TYPO = ("accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")


def _wl_write(obj: Obj) -> Obj:
    return _at(_as(V1BETA2, obj), "status", lambda s: _renamed(s, *_TYPO))


def _wl_read(obj: Obj) -> Obj:
    return _at(_as(V1BETA1, obj), "status", lambda s: _renamed(s, _TYPO[1], _TYPO[0]))


_SAME: Final = {"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}
_CHANGES: Final = {"ClusterQueue": (_cq_read, _cq_write), "Workload": (_wl_read, _wl_write)}


def _plain(api_version: str) -> Any:
    return lambda obj: _as(api_version, obj)


# Each v1beta1 kind, served from the v1beta2 storage (``fakekube.port.Objects``).
CONVERSIONS: Final[dict[tuple[str, str], Conversion]] = {
    (V1BETA1, kind): Conversion(
        (V1BETA2, kind), *_CHANGES.get(kind, (_plain(V1BETA1), _plain(V1BETA2))), _SAME
    )
    for kind in KINDS
}

"""Which target a cluster runs, from what it serves (KUBEFLOW.md, "Telling the release from a
cluster"). Pure: the lifecycle reads the cluster and hands the answers in.

Evidence, strongest first:

1. From Trainer v2.2 the ConfigMap ``kubeflow-trainer-public`` (in the Trainer's namespace,
   readable by every authenticated user) holds ``kubeflow_trainer_version``. A release newer
   than any kfcompile knows gets the newest known shape, flagged ``newer`` so that the job is
   checked against the CRD the cluster serves before it is sent.
2. Otherwise the served TrainJob CRD's schema tells the shapes apart: each release's
   ``crd_mark`` (``kfcompile.targets.RELEASES``), newest first.
3. Only ``kubeflow.org/v1`` PyTorchJobs served: ``pytorchjob/v1``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from attrs import frozen

from kfcompile.targets import trainer_releases

TRAINER_CONFIGMAP: Final = "kubeflow-trainer-public"
TRAINER_NAMESPACE: Final = "kubeflow-system"  # the Helm release namespace when installed so
VERSION_KEY: Final = "kubeflow_trainer_version"
TRAINJOB_CRD: Final = "trainjobs.trainer.kubeflow.org"

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?")


@frozen(repr=False)
class Detected:
    """The target to use, and how it was found (said to the user)."""

    target: str
    evidence: str
    newer: bool = False  # the cluster runs a release newer than any kfcompile knows


class NotDetected(ValueError):
    """The cluster serves no job kind kfcompile can render, or it cannot be told which."""


def from_version(version: str) -> Detected | None:
    """The target of a Trainer release number such as ``v2.2.1`` (None when not one)."""
    m = _VERSION.fullmatch(version.strip())
    if m is None:
        return None
    line = (int(m[1]), int(m[2]))
    known = {r.version: r.name for r in trainer_releases()}
    where = f"ConfigMap {TRAINER_CONFIGMAP} says {VERSION_KEY}: {version.strip()}"
    if line in known:
        return Detected(known[line], where)
    newest = max(known)
    if line > newest and line[0] == newest[0]:
        return Detected(known[newest], where, newer=True)
    return None


def from_crd(crd: Mapping[str, Any], holder: str = "the served TrainJob CRD") -> Detected | None:
    """The TrainJob shape of a served CRD (or a CRD file: ``holder`` names it in the
    evidence), from the fields its schema has."""
    for version in _list(_dig(crd, ("spec", "versions"))):
        if not isinstance(version, Mapping) or version.get("served") is False:
            continue
        schema = _dig(version, ("schema", "openAPIV3Schema"))
        for release in trainer_releases():
            mark = release.crd_mark
            if _has(schema, mark.keys):
                return Detected(release.name, f"{holder} has {mark.path.replace('[]', '')}")
    return None


def _has(schema: Any, keys: tuple[str, ...]) -> bool:
    node = schema
    for key in keys:
        node = _dig(node, ("items",) if key == "[]" else ("properties", key))
        if node is None:
            return False
    return True


def _dig(node: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def detect(
    *,
    trainjob_served: bool,
    pytorchjob_served: bool,
    trainer_version: str | None = None,
    trainjob_crd: Mapping[str, Any] | None = None,
) -> Detected:
    """The target for a cluster, from what it serves; ``NotDetected`` says what to do instead."""
    if trainjob_served:
        found = from_version(trainer_version) if trainer_version else None
        if found is None and trainjob_crd is not None:
            found = from_crd(trainjob_crd)
        if found is not None:
            return found
        raise NotDetected(
            "TrainJobs are served, but which Trainer release runs cannot be told (no "
            f"{TRAINER_CONFIGMAP} ConfigMap and the TrainJob CRD could not be read): give "
            f"--target ({', '.join(r.name for r in reversed(trainer_releases()))})"
        )
    if pytorchjob_served:
        return Detected("pytorchjob/v1", "only PyTorchJob (kubeflow.org/v1) is served")
    raise NotDetected(
        "this cluster serves neither TrainJob (Kubeflow Trainer v2) nor PyTorchJob (Training "
        "Operator v1): install one, or give --target to render for another cluster"
    )

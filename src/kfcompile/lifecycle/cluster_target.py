"""Which target a cluster runs, read from it, and the CRD it serves for a kind: the reads behind
``submit`` without ``--target`` and ``validate --cluster``. What the answers mean is
``kfcompile.lifecycle.target_evidence`` (pure); here are only the reads, in the order that needs
the fewest
permissions: discovery, then the Trainer's public ConfigMap (readable by every authenticated
user), and the TrainJob CRD (a cluster-wide read) only when the ConfigMap does not settle it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attrs import frozen

from kfcompile.kinds import PYTORCHJOB, TRAINJOB, Kind
from kfcompile.lifecycle.objects import get, served
from kfcompile.lifecycle.ports import ApiError, Forbidden, Obj, Ref
from kfcompile.lifecycle.session import ClusterError, Session
from kfcompile.lifecycle.target_evidence import (
    TRAINER_CONFIGMAP,
    TRAINER_NAMESPACE,
    TRAINJOB_CRD,
    VERSION_KEY,
    Detected,
    NotDetected,
    detect,
    from_version,
)

CRD_API: Final = "apiextensions.k8s.io/v1"


@frozen
class Found:
    """The target to use, how it was found, and for a release newer than kfcompile knows the
    served CRD that the job must fit before it is sent (``Found.crd``)."""

    target: str
    evidence: str
    crd: Obj | None = None

    @property
    def newer(self) -> bool:
        return self.crd is not None


def crd_name(kind: Kind) -> str:
    group = kind.api_version.split("/")[0]
    return f"{kind.plural}.{group}"


def crd_ref(kind: Kind) -> Ref:
    return Ref(CRD_API, "CustomResourceDefinition", None, crd_name(kind))


def served_crd(session: Session, kind: Kind) -> Obj | None:
    """The CustomResourceDefinition the cluster serves ``kind`` by (None when not installed);
    ``Forbidden`` passes through: the caller says which permission is missing."""
    return get(session, crd_ref(kind))


def _served(session: Session, kind: Kind) -> bool:
    return served(session, kind.api_version, kind.name)


def _trainer_version(session: Session, namespace: str, tried: list[str]) -> str | None:
    ref = Ref("v1", "ConfigMap", namespace, TRAINER_CONFIGMAP)
    try:
        found = get(session, ref)
    except Forbidden as exc:
        tried.append(f"ConfigMap {namespace}/{TRAINER_CONFIGMAP}: {exc.line}")
        return None
    data = (found or {}).get("data")
    value = data.get(VERSION_KEY) if isinstance(data, Mapping) else None
    return value if isinstance(value, str) else None


def _trainjob_crd(session: Session, tried: list[str]) -> Obj | None:
    try:
        return served_crd(session, TRAINJOB)
    except Forbidden as exc:
        tried.append(f"CustomResourceDefinition {TRAINJOB_CRD}: {exc.line}")
        return None


def detect_target(session: Session, trainer_namespace: str = TRAINER_NAMESPACE) -> Found:
    """The target of the cluster behind ``session``, from what it serves. ``ClusterError``
    when it cannot be told, saying what was tried and to give ``--target``."""
    trainjob, pytorchjob = _served(session, TRAINJOB), _served(session, PYTORCHJOB)
    tried: list[str] = []
    version = _trainer_version(session, trainer_namespace, tried) if trainjob else None
    by_version = from_version(version) if version else None
    crd = None
    if trainjob and (by_version is None or by_version.newer):
        crd = _trainjob_crd(session, tried)
        if crd is None and not tried and version is None:
            # Served, yet no CRD: discovery answered from a cache the cluster has outlived
            # (a CRD removed, a cluster re-created); asked again, it asks the server.
            trainjob = _served(session, TRAINJOB)
    try:
        found: Detected = detect(
            trainjob_served=trainjob,
            pytorchjob_served=pytorchjob,
            trainer_version=version,
            trainjob_crd=crd,
        )
    except NotDetected as exc:
        raise ClusterError(_with_tried(str(exc), tried)) from None
    if not found.newer:
        return Found(found.target, found.evidence)
    if crd is None:
        raise ClusterError(
            _with_tried(
                f"{found.evidence}, newer than any Trainer release kfcompile knows; its "
                f"TrainJob CRD could not be read to check the job against it: give --target "
                f"{found.target} to send the newest shape kfcompile knows unchecked",
                tried,
            )
        )
    return Found(found.target, found.evidence, crd)


def _with_tried(message: str, tried: list[str]) -> str:
    return message + "".join(f"\n  {line}" for line in tried)


def crd_problems(obj: Mapping[str, Any], crd: Mapping[str, Any]) -> list[str]:
    """What in ``obj`` the served ``crd`` refuses, one line each (schema only: the CEL rules
    and webhooks are the server's, which ``submit --dry-run=server`` asks)."""
    from kfcompile.output import crd as schema  # jsonschema, only when a CRD is checked

    kind = obj.get("kind")
    name = (obj.get("metadata") or {}).get("name")
    return [f"{kind}/{name}: {line}" for line in schema.errors(obj, crd)]


def unreadable(what: str, exc: ApiError) -> str:
    """Why ``what`` could not be read, and for a 403 the permission that grants it."""
    if isinstance(exc, Forbidden):
        return (
            f"cannot read {what}: {exc.line} (needs get on customresourcedefinitions: "
            "`kfcompile rbac --cluster-reads` prints the ClusterRole)"
        )
    return f"cannot read {what}: {exc.line}"

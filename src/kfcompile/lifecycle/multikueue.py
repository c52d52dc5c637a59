"""Jobs that Kueue's MultiKueue dispatches: on the manager cluster the job is held (its
``managedBy`` is ``kueue.x-k8s.io/multikueue``, so no pods run there) and Kueue mirrors it, same
namespace and name, to the worker cluster that admits it. Which worker that is, Kueue says in
the job's Workload on the manager; this module finds that Workload and reads it.

Fields read (Kueue ``apis/kueue/v1beta2/workload_types.go``, ``WorkloadStatus``, the same in
v1beta1; read through the version the cluster serves, ``kueue.served_api``):
``status.clusterName`` (the worker the workload was dispatched to; Kueue v0.13+, with
``status.nominatedClusterNames`` for the candidates while it dispatches) and
``status.admissionChecks[]`` (``AdmissionCheckState``: ``name``, ``state`` one of Pending,
Ready, Retry, Rejected, ``message``). Before v0.13 the worker is only in the MultiKueue check's
message, ``The workload got reservation on "worker1"``
(``pkg/controller/admissionchecks/multikueue/workload.go``), read as a fallback.

The Workload is found as ``kueue.workload_of`` finds it. A queue is a MultiKueue queue when
its ClusterQueue names an AdmissionCheck whose ``spec.controllerName`` is
``kueue.x-k8s.io/multikueue`` (``spec.admissionChecksStrategy.admissionChecks[].name``, or
v1beta1's ``spec.admissionChecks``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from kfcompile.kinds import MULTIKUEUE
from kfcompile.lifecycle.kueue import NOT_SERVED, pick_workload, served_api, workload_of
from kfcompile.lifecycle.objects import get, list_all, meta
from kfcompile.lifecycle.observe import printable
from kfcompile.lifecycle.ports import ApiError, Forbidden, NotFound, Obj, Ref
from kfcompile.lifecycle.session import Session

# Kueue's message on the MultiKueue check once a worker has reserved quota (before v0.13 the
# only place that names the worker).
_RESERVED_ON: Final = re.compile(r'got reservation on "([^"]+)"')
_MAX_NAME: Final = 253
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@frozen
class Check:
    """One of the workload's admission checks (``status.admissionChecks[]``)."""

    name: str
    state: str  # Pending, Ready, Retry, Rejected
    message: str

    def __str__(self) -> str:
        return f"{self.name}: {self.state}" + (f": {self.message}" if self.message else "")


@frozen
class Dispatch:
    """Where MultiKueue runs a job: its Workload on the manager, the worker cluster it was
    dispatched to (None: not yet), the Workload's admission checks, and the Kueue API it was
    read through (None: the manager serves none)."""

    workload: str  # "" while Kueue has made no Workload yet
    cluster: str | None
    checks: tuple[Check, ...] = ()
    api: str | None = None

    def __str__(self) -> str:
        where = (
            f"dispatched to worker cluster {self.cluster}"
            if self.cluster
            else "not dispatched to a worker cluster yet"
        )
        told = [f"Workload {self.workload}"] if self.workload else ["no Workload yet"]
        if self.api is None:
            told = [f"no Workload: {NOT_SERVED}"]
        told += [f"admission check {c}" for c in self.checks]
        return f"{where} ({'; '.join(told)})"


def _text(value: object, limit: int = 1024) -> str:
    """A string the server sent, bounded and printable (it reaches a terminal)."""
    return printable(value[:limit]) if isinstance(value, str) else ""


def _cluster_name(value: object) -> str | None:
    """A worker cluster's name as Kueue has it (a MultiKueueCluster's ``metadata.name``: a
    DNS-1123 subdomain, apimachinery ``IsDNS1123Subdomain``); anything else is not one."""
    if isinstance(value, str) and len(value) <= _MAX_NAME and _SUBDOMAIN.fullmatch(value):
        return value
    return None


def read_workload(workload: Mapping[str, Any], api: str | None = None) -> Dispatch:
    """The dispatch a Workload (read through ``api``) says, from its status only; a hostile
    shape reads as nothing."""
    status = workload.get("status")
    status = status if isinstance(status, Mapping) else {}
    raw = status.get("admissionChecks")
    checks = tuple(
        Check(_text(c.get("name")), _text(c.get("state")), _text(c.get("message")))
        for c in (raw if isinstance(raw, list) else [])[:8]  # MaxItems=8
        if isinstance(c, Mapping) and _text(c.get("name"))
    )
    cluster = _cluster_name(status.get("clusterName"))
    if cluster is None:
        for check in checks:
            found = _RESERVED_ON.search(check.message)
            if check.state == "Ready" and found:
                cluster = _cluster_name(found[1])
    return Dispatch(_text(meta(workload).get("name")), cluster, checks, api)


def multikueue_managed(job: Mapping[str, Any]) -> bool:
    """Whether MultiKueue manages the job (TrainJob ``spec.managedBy``, PyTorchJob
    ``spec.runPolicy.managedBy``)."""
    spec = job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    run = spec.get("runPolicy")
    run = run if isinstance(run, Mapping) else {}
    return MULTIKUEUE in (spec.get("managedBy"), run.get("managedBy"))


def dispatch(session: Session, job: Obj) -> Dispatch | None:
    """Where MultiKueue runs ``job`` (read on the manager), or None when MultiKueue does not
    manage it."""
    if not multikueue_managed(job):
        return None
    api = served_api(session, "Workload")
    try:
        found = None if api is None else workload_of(session, api, job)
    except NotFound:  # Kueue's CRDs went meanwhile
        found = None
    return Dispatch("", None, api=api) if found is None else read_workload(found, api)


def dispatches(session: Session, jobs: Sequence[Obj], namespace: str | None) -> dict[str, Dispatch]:
    """Where MultiKueue runs each of ``jobs`` it manages, by job uid: one list of the Workloads
    of ``namespace`` (None: every namespace), and none at all when it manages none of them;
    nothing is known when the Workloads may not be read."""
    managed = [job for job in jobs if multikueue_managed(job)]
    if not managed:
        return {}
    api = served_api(session, "Workload")
    try:
        workloads = [] if api is None else list_all(session, api, "Workload", namespace)
    except NotFound:  # Kueue's CRDs went meanwhile
        workloads = []
    except Forbidden:  # may not read them: where each runs is not known (None)
        return {}
    found: dict[str, Dispatch] = {}
    for job in managed:
        uid = str(meta(job).get("uid", ""))
        workload = pick_workload(workloads, uid)
        found[uid] = read_workload(workload, api) if workload else Dispatch("", None, api=api)
    return found


def multikueue_check(session: Session, namespace: str, queue: str) -> str | None:
    """The MultiKueue AdmissionCheck of the LocalQueue ``queue``'s ClusterQueue, if it has one
    (None too when what it takes to know may not be read: a preflight hint, never a failure)."""
    try:
        api = served_api(session, "LocalQueue")
        if api is None:
            return None
        local = get(session, Ref(api, "LocalQueue", namespace, queue))
        cq_name = _text(((local or {}).get("spec") or {}).get("clusterQueue"))
        if not cq_name:
            return None
        cq = get(session, Ref(api, "ClusterQueue", None, cq_name)) or {}
        for name in check_names(cq):
            check = get(session, Ref(api, "AdmissionCheck", None, name)) or {}
            if (check.get("spec") or {}).get("controllerName") == MULTIKUEUE:
                return name
    except (ApiError, AttributeError):
        return None
    return None


def check_names(cluster_queue: Mapping[str, Any]) -> list[str]:
    """The AdmissionChecks a ClusterQueue names: ``spec.admissionChecks`` or
    ``spec.admissionChecksStrategy.admissionChecks[].name``."""
    spec = cluster_queue.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    plain = spec.get("admissionChecks")
    names = [n for n in plain if isinstance(n, str)] if isinstance(plain, list) else []
    strategy = spec.get("admissionChecksStrategy")
    rules = strategy.get("admissionChecks") if isinstance(strategy, Mapping) else None
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, Mapping) and isinstance(rule.get("name"), str):
            names.append(rule["name"])
    return names


def running_on(session: Session, job: Obj, reach: Callable[[str], Session]) -> Session:
    """The session whose cluster has the job's pods and logs: for a job MultiKueue dispatched,
    the worker's (``reach(cluster name)``, which raises what it raises when it cannot reach
    it), else ``session`` (the job runs here, or is not dispatched yet). How the launchers'
    log and describe calls follow a job from a manager."""
    found = dispatch(session, job)
    if found is None or found.cluster is None:
        return session
    return reach(found.cluster)


def unreachable(ref: Ref, cluster: str, why: str) -> str:
    """Why the pods and logs of a dispatched job cannot be read from here, in one line."""
    return (
        f"{ref} runs on worker cluster {cluster}, which this kubeconfig does not reach ({why}): "
        f"give it a context named {cluster}"
    )

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

from attrs import evolve, field, frozen

from kfcompile.kinds import MULTIKUEUE
from kfcompile.lifecycle.kueue import (
    NOT_SERVED,
    Workloads,
    multikueue_managed,
    served_api,
    workload_of,
    workloads_of,
)
from kfcompile.lifecycle.objects import get, meta
from kfcompile.lifecycle.observe import (
    TROUBLED_PODS,
    Observation,
    events,
    node_pods,
    observation,
)
from kfcompile.lifecycle.ports import ApiError, Forbidden, NotFound, Obj, Ref
from kfcompile.lifecycle.session import ClusterError, Session
from kfcompile.terminal import printable

# What MultiKueue puts on the mirror of a job it creates on a worker (jobframework
# ``SetMultiKueueMeta``): the origin label, and the manager's Workload as the mirror's prebuilt
# one (an annotation; a label before Kueue's WorkloadIdentifierAnnotations feature).
ORIGIN_LABEL: Final = "kueue.x-k8s.io/multikueue-origin"
PREBUILT: Final = "kueue.x-k8s.io/prebuilt-workload-name"
# Kueue's message on the MultiKueue check once a worker has reserved quota (before v0.13 the
# only place that names the worker).
_RESERVED_ON: Final = re.compile(r'got reservation on "([^"]+)"')
_MAX_NAME: Final = 253
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@frozen(repr=False, eq=False)
class Check:
    """One of the workload's admission checks (``status.admissionChecks[]``)."""

    name: str
    state: str  # Pending, Ready, Retry, Rejected
    message: str

    def __str__(self) -> str:
        return f"{self.name}: {self.state}" + (f": {self.message}" if self.message else "")


@frozen(repr=False, eq=False)
class Dispatch:
    """Where MultiKueue runs a job: its Workload on the manager, the worker cluster it was
    dispatched to (None: not yet), the Workload's admission checks, and the Kueue API it was
    read through (None: the manager serves none)."""

    workload: str  # "" while Kueue has made no Workload yet
    cluster: str | None
    checks: tuple[Check, ...] = ()
    api: str | None = None
    nominated: tuple[str, ...] = ()  # the workers it may go to, while it dispatches

    def __str__(self) -> str:
        where = (
            f"dispatched to worker cluster {self.cluster}"
            if self.cluster
            else "not dispatched to a worker cluster yet"
        )
        told = [f"nominated: {', '.join(self.nominated)}"] if self.nominated else []
        told += [f"Workload {self.workload}"] if self.workload else ["no Workload yet"]
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
    named = status.get("nominatedClusterNames")
    nominated = tuple(
        n for n in (named if isinstance(named, list) else [])[:10] if _cluster_name(n)
    )  # maxItems 10
    cluster = _cluster_name(status.get("clusterName"))
    if cluster is None:
        for check in checks:
            found = _RESERVED_ON.search(check.message)
            if check.state == "Ready" and found:
                cluster = _cluster_name(found[1])
    return Dispatch(_text(meta(workload).get("name")), cluster, checks, api, nominated)


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


def dispatches(
    session: Session, jobs: Sequence[Obj], namespace: str | None, read: Workloads | None = None
) -> dict[str, Dispatch]:
    """Where MultiKueue runs each of ``jobs`` it manages, by job uid: from the Workloads
    ``read`` already (``kueue.workloads_of``), else one list of ``namespace``'s (None: every
    namespace), none at all when it manages none of them; nothing is known when the Workloads
    may not be read."""
    managed = [job for job in jobs if multikueue_managed(job)]
    if not managed:
        return {}
    found = read if read is not None else workloads_of(session, managed, namespace)
    if not found.readable:  # where each runs is not known (None)
        return {}
    where: dict[str, Dispatch] = {}
    for job in managed:
        uid = str(meta(job).get("uid", ""))
        workload = found.by_uid.get(uid)
        where[uid] = (
            read_workload(workload, found.api) if workload else Dispatch("", None, api=found.api)
        )
    return where


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


def is_mirror(obj: Mapping[str, Any], ref: Ref, workload: str) -> bool:
    """Whether ``obj``, read on a worker, is MultiKueue's mirror of the manager's job ``ref``
    whose Workload is ``workload``: its name and namespace, the origin label, and ``workload``
    as its prebuilt Workload. Anything else there (a job of that name someone else made) is
    never waited on or deleted on the manager's account."""
    about = meta(obj)
    labels = about.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    notes = about.get("annotations")
    notes = notes if isinstance(notes, Mapping) else {}
    prebuilt = notes.get(PREBUILT) or labels.get(PREBUILT)
    return (
        bool(workload)
        and (about.get("name"), about.get("namespace")) == (ref.name, ref.namespace)
        and isinstance(labels.get(ORIGIN_LABEL), str)
        and prebuilt == workload
    )


def on_worker(job: Obj, worker: Session, mirror: Obj) -> Observation:
    """The manager's ``job`` judged as on one cluster, by the pods of its ``mirror`` on the
    ``worker``: its state from its own status (Kueue copies the mirror's back) and those pods,
    the pods as its nodes, the mirror's events and those of its pods in trouble."""
    pods = node_pods(worker, mirror)
    judged = observation(job, pods)
    # the pods whose events are worth reading, as ``observe.status`` has them
    troubled = [n.pod for n in judged.nodes if n.reason or (not n.ready and n.phase != "Succeeded")]
    return evolve(judged, events=events(worker, mirror, pods, troubled[:TROUBLED_PODS]))


# --- the worker clusters the user mapped -----------------------------------------------------


@frozen(repr=False, eq=False)
class Workers:
    """The worker clusters the user mapped for one manager cluster: each worker's name (a
    MultiKueueCluster's, as a Workload's ``status.clusterName`` gives it) -> the kubeconfig
    context that reaches it. A Workload names the cluster the manager chose: a name it could
    pick must never select an unrelated context, whose objects would then be read, waited on or
    deleted on the manager's say-so, so only these are ever followed.

    ``manager``: the manager's kubeconfig context (None: not known, e.g. in-cluster), the key
    of the mapping ``file`` (``CLUSTERS_FILE``); ``how``: how the caller's user maps one besides
    the file (``--cluster NAME=CONTEXT``), both said when a worker is unmapped."""

    manager: str | None
    contexts: Mapping[str, str] = field(factory=dict)
    how: str = ""
    file: str = "~/.config/kfcompile/clusters.yaml"
    # Why the mapping file could not be read ("": it was, or there is none): said for a worker
    # it might have mapped.
    problem: str = ""

    def unmapped(self, ref: Ref, cluster: str) -> str:
        """Why the job is not followed to ``cluster``, and how to map it, in one line."""
        if self.problem:
            return f"{ref} runs on worker cluster {cluster}, not followed: {self.problem}"
        ways = [self.how.replace("NAME", cluster)] if self.how else []
        if self.manager is not None:
            ways.append(f"managers.{self.manager}.{cluster}: CONTEXT in {self.file}")
        else:  # the file is keyed by the manager's context, and this session has none
            ways.append(f"{self.file}, from a kubeconfig context for the manager")
        return (
            f"{ref} runs on worker cluster {cluster}, which is not mapped to a kubeconfig "
            f"context for {_managed(self.manager)}: map it with {' or '.join(ways)}; a cluster "
            "not mapped is never read"
        )


def _managed(manager: str | None) -> str:
    return f"manager context {manager}" if manager else "this manager"


# The mapping file (``Workers.file``: ``$KFCOMPILE_CLUSTERS``, else
# ``$XDG_CONFIG_HOME/kfcompile/clusters.yaml``, ``~/.config`` by default), keyed by the
# manager's kubeconfig context, each worker cluster's name (as Kueue names it) -> the
# kubeconfig context that reaches it:
#
#   managers:
#     prod-manager:          # the manager's kubeconfig context
#       worker-1: prod-w1    # the worker cluster worker-1 is reached through context prod-w1
#       worker-2: prod-w2


def _context_name(value: object) -> bool:
    """A kubeconfig context's name: any non-empty line of printable text."""
    return isinstance(value, str) and 0 < len(value) <= _MAX_NAME and value.isprintable()


def read_clusters(text: str, source: str) -> dict[str, dict[str, str]]:
    """The mapping file's text (its shape above; ``source``: its path, for messages) as
    manager context -> worker cluster -> context; ``ClusterError`` with one line per problem,
    each naming its path in the file."""
    from kfcompile.spec import yamlio
    from kfcompile.spec.errors import SpecError
    from kfcompile.spec.object_paths import key

    try:
        data = yamlio.parse(text)
    except SpecError as exc:
        raise ClusterError(
            "\n".join(f"{source}: {p.path or 'YAML'}: {p.message}" for p in exc.problems)
        ) from None
    problems: list[str] = []
    found: dict[str, dict[str, str]] = {}
    if data is None:
        return found
    if not isinstance(data, Mapping) or set(data) - {"managers"}:
        problems.append("expected a mapping with one key, managers")
    managers = data.get("managers") if isinstance(data, Mapping) else None
    if managers is not None and not isinstance(managers, Mapping):
        problems.append("managers: expected a mapping of manager contexts")
    for manager, workers in (managers if isinstance(managers, Mapping) else {}).items():
        at = "managers" + key(str(manager))
        if not _context_name(manager):
            problems.append(f"{at}: a manager's key must be its kubeconfig context's name")
            continue
        if not isinstance(workers, Mapping):
            problems.append(f"{at}: expected a mapping of worker cluster -> context")
            continue
        found[manager] = {}
        for worker, context in workers.items():
            if _cluster_name(worker) is None:
                problems.append(
                    f"{at}{key(str(worker))}: not a worker cluster name (a MultiKueueCluster's: a "
                    "lowercase RFC 1123 subdomain)"
                )
            elif not _context_name(context):
                problems.append(f"{at}{key(str(worker))}: expected a kubeconfig context's name")
            else:
                found[manager][worker] = context
    if problems:
        raise ClusterError("\n".join(f"{source}: {printable(p)}" for p in problems))
    return found


def running_on(
    session: Session, job: Obj, workers: Workers, reach: Callable[[str, str], Session]
) -> Session:
    """The session whose cluster has the job's pods and logs: for a job MultiKueue dispatched,
    the worker's, through the context ``workers`` maps it to (``reach(cluster, context)``,
    which raises what it raises when it cannot reach it), else ``session`` (the job runs
    here, or is not dispatched yet). A worker ``workers`` does not map is ``Unmapped``:
    nothing is asked of any other cluster. How the launchers' log and describe calls follow a
    job from a manager."""
    found = dispatch(session, job)
    if found is None or found.cluster is None:
        return session
    context = workers.contexts.get(found.cluster)
    if context is None:
        raise Unmapped(workers.unmapped(Ref.of(job), found.cluster))
    return reach(found.cluster, context)


class Unmapped(ClusterError):
    """A job runs on a worker cluster the user has not mapped to a kubeconfig context."""


def not_mirror(ref: Ref, cluster: str, workload: str) -> str:
    """Why a job named like ``ref`` on worker ``cluster`` is left alone, in one line."""
    return (
        f"{ref} on worker cluster {cluster} is not MultiKueue's mirror of this job (not "
        f"labelled {ORIGIN_LABEL} with Workload {workload or '?'} as its {PREBUILT}): left "
        "alone, not read"
    )


def cannot_read_dispatch(ref: Ref, why: object) -> str:
    """Why where a MultiKueue job runs is not known (its Workloads may not be read)."""
    return (
        f"{ref} is MultiKueue's, but which worker cluster runs it cannot be read: {why}; "
        "it needs list of workloads.kueue.x-k8s.io (see kfcompile rbac)"
    )


# --- cancelling a job a worker runs ----------------------------------------------------------


@frozen(repr=False, eq=False)
class Mirror:
    """Where MultiKueue runs a job (``find_mirror``): its ``dispatch`` (None: it could not be
    read) to the worker ``cluster`` (None: not dispatched to one), the worker's ``session``
    when it was reached, and the job's mirror there as read (``obj``; None: not there, or not
    this job's, and ``problem`` says why)."""

    ref: Ref
    cluster: str | None
    dispatch: Dispatch | None = None
    session: Session | None = None
    obj: Obj | None = None
    problem: str = ""

    @property
    def uid(self) -> str | None:
        """The mirror's uid: what a wait for it to be gone follows (None: no mirror to wait on)."""
        return None if self.obj is None else str(meta(self.obj).get("uid") or "") or None


def find_mirror(
    session: Session,
    job: Obj,
    workers: Workers | None,
    reach: Callable[[str, str], Session] | None,
) -> Mirror | None:
    """Where MultiKueue runs ``job`` and its mirror there (read before the job is deleted: its
    Workload goes with it); None when MultiKueue does not manage it. The worker is read only
    through the context ``workers`` maps it to (``reach(cluster, context)``, which raises
    ``ClusterError`` when it cannot reach it: its words are the problem), and what is there is
    the mirror only if ``is_mirror`` says so; anything else there is left alone, its session
    not given. What keeps the mirror from being read is the ``problem``, never an error."""
    ref = Ref.of(job)
    try:
        found = dispatch(session, job)
    except Forbidden as exc:
        return Mirror(ref, None, problem=cannot_read_dispatch(ref, exc))
    except (ClusterError, ApiError) as exc:
        problem = f"where MultiKueue runs {ref} could not be read: {exc}"
        return Mirror(ref, None, problem=problem) if multikueue_managed(job) else None
    if found is None:
        return None
    cluster = found.cluster
    if cluster is None:
        return Mirror(ref, None, found)
    if workers is None or reach is None:
        problem = f"{ref} runs on worker cluster {cluster}: no worker clusters were mapped"
        return Mirror(ref, cluster, found, problem=problem)
    context = workers.contexts.get(cluster)
    if context is None:
        return Mirror(ref, cluster, found, problem=workers.unmapped(ref, cluster))
    try:
        worker = reach(cluster, context)
    except ClusterError as exc:
        return Mirror(ref, cluster, found, problem=str(exc))
    try:
        there = get(worker, ref)
    except (ClusterError, ApiError) as exc:
        return Mirror(ref, cluster, found, problem=f"worker cluster {cluster}: {exc}")
    if there is None:
        problem = f"{ref} is not on worker cluster {cluster} (not yet, or not any more)"
        return Mirror(ref, cluster, found, worker, problem=problem)
    if not is_mirror(there, ref, found.workload):
        return Mirror(ref, cluster, found, problem=not_mirror(ref, cluster, found.workload))
    return Mirror(ref, cluster, found, worker, there)


def unreachable(ref: Ref, cluster: str, context: str, why: str) -> str:
    """Why the pods and logs of a dispatched job cannot be read from here, in one line."""
    return (
        f"{ref} runs on worker cluster {cluster}, mapped to kubeconfig context {context!r}, "
        f"which cannot be reached: {why}"
    )

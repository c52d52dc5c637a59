"""Map a Kubeflow job's status (and optionally its pods) to one normalized :class:`JobState`.

Everything that decides a job's state lives in this file, and as much of it as possible lives in
the tables below, which read like the "TrainJob status", "PyTorchJob kubeflow.org/v1" and "Kueue"
sections of KUBEFLOW.md. The functions after the tables only walk them. Nothing here does I/O:
the caller passes the custom resource and, if it has them, the job's pods, as plain dicts.

How a state is decided, for both kinds:

1. The first row of the kind's condition table that has a condition with status ``"True"`` wins,
   wherever that condition sits in the list (so SUCCEEDED/FAILED always beat everything else).
   Conditions with status ``"False"`` or ``"Unknown"`` never decide: operators keep them as
   history. A row mapping to PENDING (PyTorchJob ``Created``) only describes the wait. The
   reason is the condition type, except that FAILED keeps the reason the operator reports
   (``PyTorchJobFailed`` stays as it is) unless its message names a cause in
   ``FAILURE_MESSAGES``.
2. Otherwise the job is waiting or running, and the counts in its status decide which
   (``COUNTS``): RUNNING when they say its pods are up (TrainJob: a child Job in
   ``jobsStatus`` is ready, i.e. all its pods are ready or done; PyTorchJob: a replica in
   ``replicaStatuses`` is active, i.e. has a Running pod). The job object alone decides, so
   ``status`` (which has the pods), ``list`` and ``watch_jobs`` (which read only the jobs
   here) say the same state of the same object. Pods only tell why a job waits: a stuck pod
   (``STUCK_POD_REASONS``) is the reason; then counts of Jobs active but not ready (their pods
   exist and have not all started, as the real Trainer reports a job whose pods are Pending:
   ``active: 1, ready: 0``) mean PENDING, ``PodsPending``. Only where the status has no counts
   at all (Trainer v2.0 writes no ``jobsStatus``; the Training Operator has not written
   ``replicaStatuses`` yet) do running pods mean RUNNING: ``decided_by_pods`` says when, and
   ``list`` and ``watch_jobs`` read the pods of those jobs alone, to say what ``status`` says.
3. Otherwise PENDING, described by the PENDING row from step 1, else by the latest non-True
   condition of a known type (e.g. TrainJob ``Suspended=False``, reason ``Resumed``), else
   SUSPENDED if the job's suspend flag is set (created suspended, not yet reported on), else
   ``NoStatus``.
4. A job with ``metadata.deletionTimestamp`` is being deleted: unless it finished, it is
   DELETING, its reason what holds it (``held by foregroundDeletion: waiting for the garbage
   collector``, from ``DELETION_HOLDS``); a finished job keeps its state, the deletion said in
   its message.
5. A job that waits (SUSPENDED or PENDING) and that Kueue holds is described by its Workload
   when the caller has it (``kueue_says``): ``Queued``, Kueue's own reason (``Inadmissible``),
   ``AdmissionCheck<State>``, ``Evicted`` or ``Deactivated``, with Kueue's message; a job that
   only seems to wait is described by the Trainer's refusal among its Warning events when the
   caller has them (``trainer_refused``).

Pods and counters can only ever yield PENDING or RUNNING: a finished state comes from a
condition alone. Input is read defensively: a field of the wrong shape counts as absent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from kfcompile.kinds import (
    FINISHED_STATES,
    KINDS,
    PYTORCHJOB,
    ConditionTable,
    JobState,
    Kind,
    State,
)

__all__ = [
    "DELETION_HOLDS",
    "FINISHED_STATES",
    "JobState",
    "State",
    "decided_by_pods",
    "deletion_hold",
    "job_state",
    "kueue_says",
    "stuck_pod",
    "terminating",
    "trainer_refused",
]


# --- Tables -------------------------------------------------------------------------------------

# The condition tables of each kind are its row in `kfcompile.kinds`.

# The Training Operator writes every Failed condition with the generic reason `PyTorchJobFailed`
# (kind + "Failed") and tells backoff limit and deadline apart only in the message.
FAILURE_MESSAGES: Final[tuple[tuple[str, str], ...]] = (
    ("reached the specified backoff limit", "BackoffLimitExceeded"),
    ("active longer than specified deadline", "DeadlineExceeded"),
)

# A pod that waits for one of these will not start without someone fixing something: container
# `state.waiting.reason`s, and the reason of a PodScheduled=False pod condition.
STUCK_POD_REASONS: Final = (
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
    "Unschedulable",
)


# What keeps an object being deleted: its finalizers, each with who removes it and what happens
# meanwhile. The object goes when the last is removed. Any other finalizer is its controller's.
DELETION_HOLDS: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "foregroundDeletion",
        "waiting for the garbage collector",
        "it deletes the job's pods and other dependents first; on a real cluster it notices a "
        "newly installed kind only after up to 30 s, and without one the job stays",
    ),
    (
        "orphan",
        "waiting for the garbage collector",
        "it first takes the job off its dependents as their owner",
    ),
)
OTHER_HOLD: Final = ("waiting for the controller that added it", "")
TERMINATING_NAMED: Final = 3  # Terminating pods a DELETING job's message names


# --- Reading plain dicts defensively ------------------------------------------------------------


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(value: object) -> list[Mapping[str, Any]]:
    """The dict items of a list; anything else (None, a string, a dict) is no items at all."""
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@attrs.frozen(repr=False, eq=False)
class _Condition:
    type: str
    status: str
    reason: str
    message: str


def _conditions(status: Mapping[str, Any]) -> list[_Condition]:
    conditions = []
    for raw in _mappings(status.get("conditions")):
        cond = _Condition(*(_text(raw.get(k)) for k in ("type", "status", "reason", "message")))
        if cond.type:
            conditions.append(cond)
    return conditions


# --- What is active, per kind -------------------------------------------------------------------


def _child_jobs(status: Mapping[str, Any], counted: Callable[[Mapping[str, Any]], bool]) -> str:
    """The names of the child Jobs in TrainJob `status.jobsStatus[]` that ``counted`` holds
    for, joined ("" when none)."""
    jobs = _mappings(status.get("jobsStatus"))
    return ", ".join(_text(job.get("name")) or "?" for job in jobs if counted(job))


def _ready_child_jobs(status: Mapping[str, Any]) -> str:
    """JobSet's `ready` counts the child Jobs whose pods are all ready or done: running."""
    names = _child_jobs(status, lambda job: _count(job.get("ready")) > 0)
    return f"active child Jobs: {names}" if names else ""


def _starting_child_jobs(status: Mapping[str, Any]) -> str:
    """`active` counts a Job with a pod Running *or Pending*: active, none ready, is starting."""
    names = _child_jobs(status, lambda job: _count(job.get("active")) > 0)
    return f"child Jobs active, their pods not all ready yet: {names}" if names else ""


def _active_replicas(status: Mapping[str, Any]) -> str:
    """PyTorchJob `status.replicaStatuses.{Master,Worker}.active` counts running pods (of
    its replica types only)."""
    replicas = _mapping(status.get("replicaStatuses"))
    active = [
        (name, _count(_mapping(replicas.get(name)).get("active")))
        for name in PYTORCHJOB.replica_types
    ]
    parts = [f"{name}={n}" for name, n in active if n > 0]
    return f"active replicas: {', '.join(parts)}" if parts else ""


def _nothing(status: Mapping[str, Any]) -> str:
    return ""


Counts = Callable[[Mapping[str, Any]], str]  # a message naming what is counted, "" if nothing

# Where each kind's status counts (``Kind.active_counts``): what says its pods are up
# (RUNNING), and what says they exist but are not all up yet (PENDING, ``PodsPending``).
# PyTorchJob's `active` counts only Running pods, so it has no such second count.
COUNTS: Final[Mapping[str, tuple[Counts, Counts]]] = {
    "jobsStatus": (_ready_child_jobs, _starting_child_jobs),
    "replicaStatuses": (_active_replicas, _nothing),
}


# --- Deciding -----------------------------------------------------------------------------------


def _reason(kind: str, cond: _Condition, state: State) -> str:
    """The condition type names the state, except that a failure keeps the cause it reports.

    A failure's reason is the operator's own, verbatim (``PyTorchJobFailed``, ``FailedJobs``),
    unless it is the generic one and the message names a more specific cause.
    """
    if state is not State.FAILED:
        return cond.type
    reason = cond.reason or cond.type
    # Training Operator reasons are kind + reason ("PyTorchJobFailed"); TrainJob's are bare.
    if reason.removeprefix(kind) == "Failed":
        for fragment, specific in FAILURE_MESSAGES:
            if fragment in cond.message:
                return specific
    return reason


def _from_table(kind: str, table: ConditionTable, conditions: list[_Condition]) -> JobState | None:
    for cond_type, state in table:
        for cond in conditions:
            if cond.type == cond_type and cond.status == "True":
                message = cond.message or f"{kind} condition {cond_type} is True"
                return JobState(state, _reason(kind, cond, state), message)
    return None


def _waiting(kind_name: str, kind: Kind, conditions: list[_Condition]) -> JobState:
    waiting_types = {t for t, state in kind.conditions if state not in FINISHED_STATES}
    known = [c for c in conditions if c.type in waiting_types and c.status != "True"]
    if known:
        last = known[-1]
        reason = last.reason.removeprefix(kind_name) or last.type
        return JobState(State.PENDING, reason, last.message or f"{kind_name} is waiting")
    return JobState(
        State.PENDING,
        "NoStatus",
        f"{kind_name} reports no condition and nothing active yet; if this lasts, look at its "
        f"events and check that {kind.suspects} exist",
    )


def stuck_pod(pods: Sequence[Mapping[str, Any]]) -> JobState | None:
    """PENDING with the reason of the first pod that cannot start without help, else None."""
    for pod in pods:
        name = _text(_mapping(pod.get("metadata")).get("name")) or "?"
        status = _mapping(pod.get("status"))
        for cond in _mappings(status.get("conditions")):
            reason = _text(cond.get("reason"))
            unscheduled = cond.get("type") == "PodScheduled" and cond.get("status") == "False"
            if unscheduled and reason in STUCK_POD_REASONS:
                detail = _text(cond.get("message")) or reason
                return JobState(State.PENDING, reason, f"pod {name}: {detail}")
        containers = _mappings(status.get("initContainerStatuses"))
        containers += _mappings(status.get("containerStatuses"))
        for container in containers:
            waiting = _mapping(_mapping(container.get("state")).get("waiting"))
            reason = _text(waiting.get("reason"))
            if reason in STUCK_POD_REASONS:
                detail = _text(waiting.get("message")) or reason
                where = f"pod {name}, container {_text(container.get('name')) or '?'}"
                return JobState(State.PENDING, reason, f"{where}: {detail}")
    return None


def _pod_up(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is up as a Job counts it: done, or Running with every container ready
    (a pod being deleted is neither: it is going away)."""
    if _text(_mapping(pod.get("metadata")).get("deletionTimestamp")):
        return False
    status = _mapping(pod.get("status"))
    phase = _text(status.get("phase"))
    containers = _mappings(status.get("containerStatuses"))
    running = phase == "Running" and bool(containers)
    return phase == "Succeeded" or (running and all(c.get("ready") is True for c in containers))


def _pods_starting(pods: Sequence[Mapping[str, Any]], counted: str) -> JobState:
    """The counts say pods exist and are not all up: how many are, when the pods are given."""
    ready = sum(_pod_up(p) for p in pods)
    message = f"{ready} of {len(pods)} pods ready" if pods else counted
    return JobState(State.PENDING, "PodsPending", message)


def _running_pods(pods: Sequence[Mapping[str, Any]]) -> JobState | None:
    running = [p for p in pods if _mapping(p.get("status")).get("phase") == "Running"]
    if not running:
        return None
    return JobState(State.RUNNING, "PodsRunning", f"{len(running)} of {len(pods)} pods running")


def _holds(meta: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(finalizer, what it waits for, what happens meanwhile) of each finalizer, in order."""
    table = {name: (name, waits, detail) for name, waits, detail in DELETION_HOLDS}
    names = [f for f in (meta.get("finalizers") or []) if isinstance(f, str)]
    return [table.get(name, (name, *OTHER_HOLD)) for name in names]


def deletion_hold(obj: Mapping[str, Any]) -> str:
    """What an object being deleted waits for (``held by foregroundDeletion: waiting for the
    garbage collector``); "" when it is not being deleted."""
    meta = _mapping(obj.get("metadata"))
    if not _text(meta.get("deletionTimestamp")):
        return ""
    holds = [f"{name}: {waits}" for name, waits, _ in _holds(meta)]
    return f"held by {'; '.join(holds)}" if holds else "being removed"


def terminating(pod: Mapping[str, Any]) -> str:
    """``Terminating on node N: waiting for its kubelet ...`` for a pod being deleted, else
    ""."""
    meta = _mapping(pod.get("metadata"))
    if not _text(meta.get("deletionTimestamp")):
        return ""
    node = _text(_mapping(pod.get("spec")).get("nodeName"))
    hold = deletion_hold(pod)
    if hold == "being removed" and node:
        hold = "waiting for its kubelet to confirm it stopped"
    return f"Terminating{f' on node {node}' if node else ''}: {hold}"


def _deleting(cr: Mapping[str, Any], decided: JobState, pods: list[Mapping[str, Any]]) -> JobState:
    meta = _mapping(cr.get("metadata"))
    since = _text(meta.get("deletionTimestamp"))
    hold = deletion_hold(cr)
    if decided.finished:
        return attrs.evolve(decided, message=f"{decided.message}; being deleted ({hold})")
    parts = [f"deletion requested at {since}"]
    parts += [detail for _, _, detail in _holds(meta) if detail]
    names = [_text(_mapping(p.get("metadata")).get("name")) or "?" for p in pods]
    stuck = [f"pod {n} is {t}" for n, p in zip(names, pods, strict=True) if (t := terminating(p))]
    if pods:
        parts.append(
            f"{len(pods)} pod{'s' * (len(pods) != 1)} left"
            + "".join(f"; {s}" for s in stuck[:TERMINATING_NAMED])
        )
    return JobState(State.DELETING, hold, "; ".join(parts))


def job_state(
    cr: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]] | None = None,
    workload: Mapping[str, Any] | None = None,
) -> JobState:
    """The normalized state of a TrainJob or PyTorchJob, refined by its pods when given, and,
    while it waits, by what its Kueue ``workload`` says of why (``kueue_says``).

    Raises ValueError for a kind this module does not know; never raises for a malformed status.
    """
    kind_name = cr.get("kind")
    if not isinstance(kind_name, str) or kind_name not in KINDS:
        raise ValueError(f"unknown kind {kind_name!r}: expected one of {', '.join(KINDS)}")
    decided = _decide(cr, kind_name, _mappings(pods))
    if _text(_mapping(cr.get("metadata")).get("deletionTimestamp")):
        return _deleting(cr, decided, _mappings(pods))
    return kueue_held(decided, None if workload is None else kueue_says(workload))


def kueue_held(state: JobState, said: tuple[str, str] | None) -> JobState:
    """``state`` as Kueue's word on the job (``kueue_says``: its reason and message) tells it
    while the job waits (SUSPENDED or PENDING); ``said`` None: Kueue says nothing."""
    if said is None or state.state not in (State.SUSPENDED, State.PENDING):
        return state
    return attrs.evolve(state, reason=said[0], message=said[1])


def _decide(cr: Mapping[str, Any], kind_name: str, pod_list: list[Mapping[str, Any]]) -> JobState:
    kind = KINDS[kind_name]
    status = _mapping(cr.get("status"))
    conditions = _conditions(status)
    decided = _from_table(kind_name, kind.conditions, conditions)
    if decided is not None and decided.state is not State.PENDING:
        return decided
    up, starting = COUNTS[kind.active_counts]
    if running := up(status):
        return JobState(State.RUNNING, kind.active_reason, running)
    if counted := starting(status):
        waiting = _pods_starting(pod_list, counted)
    else:
        waiting = _uncounted_wait(cr, kind_name, decided, conditions)
    if waiting.state is not State.PENDING:
        return waiting  # suspended by its spec: the job says so, whatever its pods
    if stuck := stuck_pod(pod_list):
        return stuck
    if not _counted(status, kind) and (running_pods := _running_pods(pod_list)):
        return running_pods  # a controller that writes no counts (Trainer v2.0): pods alone
    return waiting


def _counted(status: Mapping[str, Any], kind: Kind) -> bool:
    """Whether the status has the kind's counts at all (even of nothing active yet)."""
    return status.get(kind.active_counts) is not None


def decided_by_pods(cr: Mapping[str, Any]) -> bool:
    """Whether only the job's pods can tell whether it runs (``job_state`` with them may say
    RUNNING, without them PENDING): its status has no counts (Trainer v2.0 never writes
    ``jobsStatus``; the Training Operator has not written ``replicaStatuses`` yet), no True
    condition decides its state, it is not being deleted, and it waits PENDING without its pods
    (``_uncounted_wait``: not suspended by its spec where no condition says why it waits).
    For every other job the object alone decides, so ``list`` and ``watch_jobs`` read pods for
    these jobs only: a cluster whose controller writes counts costs them no pod request.
    A kind this module does not know: False."""
    kind_name = cr.get("kind")
    if not isinstance(kind_name, str) or kind_name not in KINDS:
        return False
    kind = KINDS[kind_name]
    if _text(_mapping(cr.get("metadata")).get("deletionTimestamp")):
        return False  # DELETING whatever its pods
    status = _mapping(cr.get("status"))
    if _counted(status, kind):
        return False
    conditions = _conditions(status)
    decided = _from_table(kind_name, kind.conditions, conditions)
    if decided is not None and decided.state is not State.PENDING:
        return False
    return _uncounted_wait(cr, kind_name, decided, conditions).state is State.PENDING


def _uncounted_wait(
    cr: Mapping[str, Any], kind_name: str, decided: JobState | None, conditions: list[_Condition]
) -> JobState:
    """How a job whose status counts nothing waits, before its pods are looked at: as its
    PENDING row says (PyTorchJob ``Created``), else suspended by its spec, else as its other
    conditions say. Only a PENDING one can be changed by its pods (``_decide``)."""
    kind = KINDS[kind_name]
    return decided or _suspended_by_spec(cr, kind) or _waiting(kind_name, kind, conditions)


def _suspended_by_spec(cr: Mapping[str, Any], kind: Kind) -> JobState | None:
    """A job created suspended (Kueue queues it so) that its controller has not reported on yet
    is already waiting to be resumed: SUSPENDED from the start, as the controller will say."""
    node: object = cr
    for key in kind.suspend:
        node = _mapping(node).get(key)
    if node is not True:
        return None
    return JobState(State.SUSPENDED, "Suspended", f"{'.'.join(kind.suspend)} is true")


# --- Kueue's word on a job it holds: the job's Workload (KUBEFLOW.md, Kueue) ---------------------

# Workload ``QuotaReserved=False`` reasons (Kueue ``apis/kueue/v1beta2/workload_types.go``) of a
# workload that waits its turn in the queue: the job is ``Queued``. Any other reason
# (``Inadmissible``: its LocalQueue or ClusterQueue is missing or stopped; ``ExceedsMaxQuota``,
# ``NoMatchingFlavor``...) is said as Kueue says it.
QUEUED_REASONS: Final = frozenset(
    {"Pending", "WaitingForQuota", "PendingEvaluation", "WaitingForPreemptedWorkloads"}
)
# ``Evicted`` reasons of a workload deactivated (``spec.active: false``): it stays so until
# someone activates it again.
DEACTIVATED_REASONS: Final = frozenset({"Deactivated", "InactiveWorkload"})
KUEUE_TEXT: Final = 1024  # characters of a Workload's message kept (the CRD allows 32,768)


def _kueue_text(value: object) -> str:
    return " ".join(_text(value)[:KUEUE_TEXT].split())


def kueue_says(workload: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of why Kueue holds the job whose Workload this is, or None when it
    does not (admitted, or nothing said yet). First that holds: evicted or deactivated
    (``Evicted=True``; the wait in the queue that follows said too), waiting in the queue
    (``QuotaReserved=False``), waiting for an admission check (one not ``Ready``)."""
    status, spec = _mapping(workload.get("status")), _mapping(workload.get("spec"))
    held = {c.type: c for c in _conditions(status)}
    if (admitted := held.get("Admitted")) is not None and admitted.status == "True":
        return None
    waiting, why = "", "Queued"
    if (quota := held.get("QuotaReserved")) is not None and quota.status == "False":
        queue = _kueue_text(spec.get("queueName")) or "?"
        waiting = f"waiting in queue {queue}: {_kueue_text(quota.message) or quota.reason}"
        if quota.reason not in QUEUED_REASONS:
            why = _kueue_text(quota.reason) or why  # Inadmissible, ExceedsMaxQuota...
    if (evicted := held.get("Evicted")) is not None and evicted.status == "True":
        inactive = spec.get("active") is False or evicted.reason in DEACTIVATED_REASONS
        said = f"Kueue evicted it ({_kueue_text(evicted.reason) or '?'})"
        said += f": {_kueue_text(evicted.message)}" if evicted.message else ""
        return ("Deactivated" if inactive else "Evicted"), "; ".join(filter(None, (said, waiting)))
    if waiting:
        return why, f"Kueue: {waiting}"
    for check in _mappings(status.get("admissionChecks"))[:8]:  # maxItems 8
        state = _kueue_text(check.get("state"))
        if state and state != "Ready":
            said = f"Kueue admission check {_kueue_text(check.get('name')) or '?'} is {state}"
            message = _kueue_text(check.get("message"))
            return f"AdmissionCheck{state}", f"{said}: {message}" if message else said
    return None


# --- what only the Trainer's events say --------------------------------------------------------

# A Trainer that cannot create or update the job's JobSet says so only in a Warning event about
# the TrainJob (trainer ``pkg/controller/trainjob_controller.go``); its status keeps saying
# ``Suspended=False`` (``Resumed``), or nothing: the reasons of a job that then only seems to wait.
TRAINER_REFUSALS: Final = ("TrainJobResourcesCreationFailed",)
SEEMS_WAITING: Final = ("Resumed", "NoStatus")


def trainer_refused(state: JobState, warnings: Sequence[tuple[str, str]]) -> JobState:
    """``state``, or, for a job that seems only to wait (``SEEMS_WAITING``), the last of the
    Trainer's refusals among the job's own ``warnings`` ((reason, message) of its Warning
    events, oldest first): what keeps it from running."""
    if state.reason not in SEEMS_WAITING:
        return state
    for reason, message in reversed(warnings):
        if reason in TRAINER_REFUSALS:
            return attrs.evolve(state, reason=reason, message=message[:KUEUE_TEXT])
    return state

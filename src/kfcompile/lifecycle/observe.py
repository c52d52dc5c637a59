"""A job as it stands: its normalized state, its training nodes (pods by rank) and the events
that tell why. ``observation`` is a pure function of one snapshot (the job and its pods):
Kubernetes is level-triggered, so there is no machine here, only the reading of evidence."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.kinds import COMPLETION_INDEX, KINDS, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB
from kfcompile.lifecycle.kueue import waiting_workload
from kfcompile.lifecycle.objects import get, job_kind, list_all, list_at, meta
from kfcompile.lifecycle.ports import ApiError, Forbidden, NotFound, Obj, Ref
from kfcompile.lifecycle.session import ClusterError, JobNotFound, Session
from kfcompile.progress import Progress, read_progress
from kfcompile.status import JobState
from kfcompile.terminal import printable

TROUBLED_PODS: Final = 5  # pods whose events `status` shows
# The ranks without a pod that are read, shown or followed (a thread and a connection each) go
# up to this; numNodes comes from the server (up to the CRD's int32), so past it only the ranks
# whose pods exist count, the others said in one line. A rank with a pod always counts.
MAX_RANKS: Final = 1024


def some_ranks(total: int, present: Iterable[int]) -> list[int]:
    """The ranks of a job of ``total`` nodes worth a look: those of its pods (``present``)
    below ``total``, and the others up to ``MAX_RANKS``."""
    return sorted({*range(min(total, MAX_RANKS)), *(r for r in present if 0 <= r < total)})


@frozen
class Node:
    """One training node (pod) of a job as ``status`` shows it: its rank (the node's index;
    None when its labels do not say), pod name, phase, readiness, restarts and why it waits."""

    rank: int | None
    pod: str
    phase: str
    ready: bool
    restarts: int
    reason: str = ""


@frozen
class Observation:
    """The job as last seen: its normalized state and its training nodes."""

    ref: Ref
    state: JobState
    nodes: tuple[Node, ...]
    nodes_total: int
    events: tuple[Event, ...] = ()
    progress: Progress | None = None  # what the training process last reported (TrainJob)

    @property
    def nodes_ready(self) -> int:
        return sum(n.ready for n in self.nodes)

    @property
    def ranks(self) -> list[int]:
        """The ranks to show, one each (``some_ranks``: never all of a numNodes of 10^8)."""
        return some_ranks(self.nodes_total, (n.rank for n in self.nodes if n.rank is not None))

    @property
    def summary(self) -> tuple[object, ...]:
        """What a progress line shows: a change in it is worth a line."""
        shown = None if self.progress is None else self.progress.shown
        return (self.state.state, self.state.reason, self.nodes_ready, self.nodes_total, shown)


class TimedOut(ClusterError):
    """A wait ran out of time; ``last`` is the job as last seen (None if never)."""

    def __init__(self, message: str, last: Observation | None = None) -> None:
        super().__init__(message)
        self.last = last


@frozen(repr=False)
class ListPods:
    """A machine's request: the training pods of ``job`` (one paginated list)."""

    job: Obj


@frozen(repr=False)
class PodsListed:
    pods: list[Obj]
    version: str = ""  # the list's resourceVersion: a watch from it misses no change since
    workload: Obj | None = None  # the job's Kueue Workload, while Kueue holds it


def as_int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def rank_of(job: Mapping[str, Any], pod: Mapping[str, Any]) -> int | None:
    """A pod's rank: TrainJob completion index; PyTorchJob from its replica type and index
    (``Kind.replica_rank``)."""
    kind = KINDS[str(job.get("kind"))]
    labels = meta(pod).get("labels") or {}
    if kind.rank == "completion-index":
        return as_int(labels.get(COMPLETION_INDEX))
    index = as_int(labels.get(REPLICA_INDEX))
    if index is None:
        return None
    return kind.replica_rank(job, str(labels.get(REPLICA_TYPE)), index)


def rank_selector(job: Mapping[str, Any], rank: int) -> str:
    """The label selector of rank ``rank``'s pods (``rank_of`` backwards)."""
    ref = Ref.of(job)
    nodes = job_kind(ref).nodes.format(name=ref.name)
    if KINDS[ref.kind].rank == "completion-index":
        return f"{nodes},{COMPLETION_INDEX}={rank}"
    replicas = _at(job, "spec", "pytorchReplicaSpecs")
    has_master = isinstance(replicas, Mapping) and "Master" in replicas
    if has_master and rank == 0:
        return f"{nodes},{REPLICA_TYPE}=master,{REPLICA_INDEX}=0"
    return f"{nodes},{REPLICA_TYPE}=worker,{REPLICA_INDEX}={rank - 1 if has_master else rank}"


def newest_by_rank(job: Mapping[str, Any], pods: Sequence[Obj]) -> dict[int, Obj]:
    """The newest pod of each rank (a replaced pod's successor, not the one going away)."""
    found: dict[int, Obj] = {}
    for pod in pods:
        rank = rank_of(job, pod)
        if rank is None:
            continue
        old = found.get(rank)
        stamp = str(meta(pod).get("creationTimestamp", ""))
        if old is None or str(meta(old).get("creationTimestamp", "")) <= stamp:
            found[rank] = pod
    return found


# TrainJob ``spec.trainer.numNodes`` and PyTorchJob ``pytorchReplicaSpecs.*.replicas`` are
# ``format: int32`` in the CRDs (/work/shared/crds), with no minimum.
INT32_MAX: Final = 2**31 - 1


def _nodes(value: object) -> int:
    """A count of nodes from the server: 1 when absent or not a number, within 1..INT32_MAX."""
    return min(max(as_int(value) or 1, 1), INT32_MAX)


def nodes_total(job: Mapping[str, Any]) -> int:
    """The job's training nodes as its spec says (the server's number, bounded by the CRD's
    type; how many pods exist is another matter: ``pod_logs.chosen_ranks``)."""
    spec = _at(job, "spec")
    if job.get("kind") == TRAINJOB.name:
        return _nodes(_at(spec, "trainer", "numNodes"))
    replicas = _at(spec, "pytorchReplicaSpecs")
    specs = replicas.values() if isinstance(replicas, Mapping) else ()
    return sum(_nodes(_at(r, "replicas")) for r in specs)


def _node(job: Mapping[str, Any], pod: Mapping[str, Any]) -> Node:
    status = pod.get("status") or {}
    listed = _at(pod, "status", "containerStatuses")
    containers = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    stuck = job_status.stuck_pod([pod])
    # A pod being deleted (evicted, preempted) is not ready, whatever its containers last said:
    # its kubelet has yet to stop them, or to say so.
    going = bool(meta(pod).get("deletionTimestamp"))
    return Node(
        rank=rank_of(job, pod),
        pod=str(meta(pod).get("name", "?")),
        phase=str(status.get("phase", "Pending")),
        ready=not going and bool(containers) and all(c.get("ready") for c in containers),
        restarts=sum(as_int(c.get("restartCount")) or 0 for c in containers),
        # a pod being deleted: what its deletion waits for (before why it would not start)
        reason=job_status.terminating(pod) or (stuck.reason if stuck else ""),
    )


def is_ref(obj: Mapping[str, Any], ref: Ref) -> bool:
    """Whether the server's ``obj`` is the object ``ref`` names (its name and namespace, and its
    kind when it says one): a watch or list by name that delivers another is not believed."""
    m = meta(obj)
    kind = obj.get("kind")
    return (
        m.get("name") == ref.name
        and m.get("namespace") == ref.namespace
        and kind in (None, ref.kind)
    )


def foreign(obj: Mapping[str, Any], namespace: str | None, selector: str = "") -> bool:
    """Whether the server's ``obj`` says it is not what a list or watch in ``namespace`` (None:
    any) with the equality ``selector`` (``a=b,c=d``, as ``kinds`` writes them) asked for: it
    names another namespace, or another value for one of the selector's labels."""
    m = meta(obj)
    if namespace is not None and m.get("namespace", namespace) != namespace:
        return True
    labels = m.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    wanted = (_EQUALS.fullmatch(term.strip()) for term in selector.split(","))
    return any(labels.get(w[1], w[2]) != w[2] for w in wanted if w)


# An equality term of a label selector (``key=value``, ``key==value``); set-based terms are
# left to the server.
_EQUALS: Final = re.compile(r"([\w./-]+)==?([\w.-]*)")


def node_pods(session: Session, job: Obj) -> list[Obj]:
    """The job's training pods; a pod the server sends that is not one of them is left out."""
    return list_pods(session, job).pods


def list_pods(session: Session, job: Obj) -> PodsListed:
    """``node_pods``, with the list's resourceVersion."""
    ref = Ref.of(job)
    selector = job_kind(ref).nodes.format(name=ref.name)
    pods, version = list_at(session, "v1", "Pod", ref.namespace, label_selector=selector)
    return PodsListed([pod for pod in pods if not foreign(pod, ref.namespace, selector)], version)


# Job names one pod list asks for at most (``key in (a,b,...)``): a label value is up to 63
# characters, so the selector stays within a few KiB of URL however many jobs need their pods.
NAMES_PER_POD_LIST: Final = 100


def pods_of_jobs(session: Session, jobs: Sequence[Obj]) -> dict[tuple[str, str], list[Obj]]:
    """The training pods (``Kind.nodes``, as ``status`` reads them) of each of ``jobs``, by
    (namespace, name): one list per namespace and kind (per ``NAMES_PER_POD_LIST`` jobs) with
    a set-based selector over their names, none for no jobs. Pods that may not be listed (403)
    are none: the jobs' states are then their objects' alone, as before pods were read."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for job in jobs:
        kind, m = job.get("kind"), meta(job)
        namespace, name = m.get("namespace"), m.get("name")
        if kind in KINDS and isinstance(namespace, str) and isinstance(name, str) and name:
            wanted.setdefault((namespace, str(kind)), []).append(name)
    found: dict[tuple[str, str], list[Obj]] = {}
    for (namespace, kind), names in sorted(wanted.items()):
        unique = sorted(set(names))
        for start in range(0, len(unique), NAMES_PER_POD_LIST):
            chunk = unique[start : start + NAMES_PER_POD_LIST]
            try:
                found.update(_pods_named(session, KINDS[kind].nodes, namespace, chunk))
            except Forbidden:
                return {}
    return found


def _pods_named(
    session: Session, nodes: str, namespace: str, names: Sequence[str]
) -> dict[tuple[str, str], list[Obj]]:
    """One list of the training pods of the jobs ``names`` in ``namespace``: the term of the
    kind's ``nodes`` selector that names the job (``key={name}``) asked for as ``key in
    (names)``, its other terms as they are; each pod to the job its label names."""
    terms = nodes.split(",")
    [named] = [term for term in terms if "{name}" in term]
    key = named.split("=", 1)[0]
    fixed = ",".join(term for term in terms if term is not named)
    selector = ",".join(filter(None, (f"{key} in ({','.join(names)})", fixed)))
    pods = list_all(session, "v1", "Pod", namespace, label_selector=selector)
    by_job: dict[tuple[str, str], list[Obj]] = {(namespace, name): [] for name in names}
    for pod in pods:
        labels = meta(pod).get("labels")
        job = labels.get(key) if isinstance(labels, Mapping) else None
        if (namespace, job) in by_job and not foreign(pod, namespace, fixed):
            by_job[namespace, str(job)].append(pod)
    return by_job


def observation(job: Obj, pods: Sequence[Obj], workload: Obj | None = None) -> Observation:
    """The job's state from its status and its pods (and, while Kueue holds it, its
    ``workload``: why)."""
    nodes = sorted(
        (_node(job, p) for p in pods),
        key=lambda n: (n.rank is None, n.rank or 0, n.pod),
    )
    return Observation(
        Ref.of(job),
        job_status.job_state(job, list(pods), workload),
        tuple(nodes),
        nodes_total(job),
        progress=read_progress(job),
    )


def observe(session: Session, job: Obj) -> Observation:
    """The job's state from its status and its pods (one paginated list, whatever their number),
    and while Kueue holds it, from its Workload (``kueue.waiting_workload``)."""
    return observation(job, node_pods(session, job), waiting_workload(session, job))


# --- why a rank's log cannot be read ------------------------------------------------------------


@frozen
class Waiting:
    """Why a rank's log cannot be read (yet), told instead of its lines (or why a pod has not
    started: ``rank`` None). ``stuck``: it will not start without someone fixing something, or
    never will (its job ended without it)."""

    rank: int | None
    reason: str  # NoPod, NotScheduled, Unschedulable, NodeGone, KubeletUnreachable, PodGone, ...
    message: str  # one line; what the cluster said is quoted as the cluster's
    stuck: bool = False

    def __str__(self) -> str:
        return self.message if self.rank is None else f"rank {self.rank}: {self.message}"


def _answered(error: ApiError) -> str:
    """What the API server answered, quoted as its words, never as ours."""
    return f"(the API server answered {printable(str(error))[:300]})"


def _node_gone(pod: Mapping[str, Any], refused: ApiError | None) -> str:
    """The pod's node when the 404 for its log names that node: the node is gone (a real server
    answers ``pods "<node>" not found``, naming the node as if it were a pod)."""
    node, name = _at(pod, "spec", "nodeName"), meta(pod).get("name")
    if not (isinstance(refused, NotFound) and isinstance(node, str) and node and node != name):
        return ""
    return node if f'"{node}"' in refused.message else ""


# A log read the API server could not pass on to the pod's kubelet is answered 500 with its dial
# error (KUBEFLOW.md, "Talking to the API"): ``dial tcp <node>:10250: connect: connection
# refused``, after the kubelet URL it tried.
_KUBELET_DIAL: Final = re.compile(r'dial tcp [^\s"]+:\d+: [^"]+')


def kubelet_unreachable(error: ApiError | None) -> str:
    """The dial error, when ``error`` is the API server saying it cannot reach the pod's
    kubelet; "" otherwise. That is the node: asking again soon does not help (kubectl fails at
    once)."""
    if error is None or error.status != 500:
        return ""
    found = _KUBELET_DIAL.search(error.message)
    return found[0] if found else ""


def _status_says(pod: Mapping[str, Any], reason: str) -> str:
    """What the pod's status says along with ``reason`` (the scheduler's or kubelet's words)."""
    status = _at(pod, "status")
    for cond in _items(_at(status, "conditions")):
        if _at(cond, "type") == "PodScheduled" and _at(cond, "reason") == reason:
            return _first(cond, ("message",))
    for container in _items(_at(status, "initContainerStatuses")) + _items(
        _at(status, "containerStatuses")
    ):
        if _at(container, "state", "waiting", "reason") == reason:
            return _first(container, ("state", "waiting", "message"))
    return ""


def _items(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _starting(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, what the pod is doing) for a pod that has not started but is not stuck."""
    for cond in _items(_at(pod, "status", "conditions")):
        if _at(cond, "type") == "PodScheduled" and _at(cond, "status") == "False":
            reason = _first(cond, ("reason",)) or "NotScheduled"
            return reason, f"is not scheduled yet ({reason})"
    if not _at(pod, "spec", "nodeName"):
        return "NotScheduled", "is not scheduled yet"
    for container in _items(_at(pod, "status", "containerStatuses")):
        reason = _first(container, ("state", "waiting", "reason"))
        if reason:
            return reason, f"is starting ({reason})"
    return "ContainerCreating", "is starting"


def waiting(
    job: Obj, rank: int, pod: Mapping[str, Any] | None, refused: ApiError | None = None
) -> Waiting | None:
    """Why rank ``rank`` shows no log: ``pod`` is its newest pod (None: it has none), ``refused``
    what the API server answered a read of its log (None: an empty answer). None when nothing
    stands in the way (a started container whose log is empty)."""
    if pod is not None:
        return pod_waiting(pod, refused, rank)
    state = job_status.job_state(job)
    if state.finished:
        said = f"no pod: the job has ended ({state.state.value}) and its pod is gone"
        return Waiting(rank, "PodGone", said, stuck=True)
    return Waiting(rank, "NoPod", f"no pod yet: the job is {state.state.value} ({state.reason})")


def pod_waiting(
    pod: Mapping[str, Any], refused: ApiError | None = None, rank: int | None = None
) -> Waiting | None:
    """Why ``pod`` has not started or cannot be reached, from its status (and ``refused``, the
    API server's answer to a read of its log); None when it has started."""
    name = printable(str(meta(pod).get("name", "?")))
    if node := _node_gone(pod, refused):
        assert refused is not None
        said = (
            f"pod {name} is bound to node {printable(node)}, which is gone: its log cannot be read"
        )
        return Waiting(rank, "NodeGone", f"{said} {_answered(refused)}", stuck=True)
    if dial := kubelet_unreachable(refused):
        bound = _at(pod, "spec", "nodeName")
        on = f"node {printable(bound)}," if isinstance(bound, str) and bound else "a node"
        said = f"pod {name} is on {on} whose kubelet is unreachable: its log cannot be read"
        return Waiting(rank, "KubeletUnreachable", f"{said} ({printable(dial)[:300]})", stuck=True)
    if stuck := job_status.stuck_pod([pod]):
        said = f"pod {name} cannot start ({stuck.reason})"
        if detail := _status_says(pod, stuck.reason):
            said += f"; its status says: {printable(detail)}"
        return Waiting(rank, stuck.reason, said, stuck=True)
    if _at(pod, "status", "phase") in (None, "Pending"):
        reason, doing = _starting(pod)
        return Waiting(rank, reason, f"pod {name} {doing}")
    if refused is not None:
        said = f"pod {name}: its log cannot be read {_answered(refused)}"
        return Waiting(rank, "LogRefused", said)
    return None


# --- events ---------------------------------------------------------------------------------------

# The two APIs that serve Events, in the order they are tried, and the field selector of each
# for the object an event is about. A real server serves every event through both (one
# resource, two versions: a core/v1 event read through events.k8s.io/v1 has
# `deprecatedLastTimestamp`, an events/v1 one read through core/v1 has `eventTime` and
# `series`, no `lastTimestamp`), so one is read: events.k8s.io/v1, or core/v1 where that is not
# served or the Role does not grant it (a Role granting either one shows every event).
EVENT_APIS: Final = (("events.k8s.io/v1", "regarding.name"), ("v1", "involvedObject.name"))


def _at(node: object, *path: str) -> object:
    """``node[path[0]][path[1]]...``, or None where a step is missing or not a mapping."""
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _first(event: object, *paths: tuple[str, ...]) -> str:
    """The first of these fields that holds text: how the two shapes name the same thing."""
    for path in paths:
        value = _at(event, *path)
        if isinstance(value, str) and value:
            return value
    return ""


def sortable_time(stamp: str) -> str:
    """An RFC 3339 time (as the server writes them: UTC, ``Z``) with its fraction padded to
    nanoseconds, so times with and without a fraction sort as text on one clock."""
    whole, dot, fraction = stamp.rstrip("Z").partition(".")
    return f"{whole}.{fraction.ljust(9, '0')}" if dot else f"{whole}.000000000"


@frozen
class Event:
    """A Kubernetes event about the job or one of its objects, in either shape: when it last
    happened (``series.lastObservedTime`` of an events/v1 event, ``lastTimestamp`` of a core/v1
    one), how often, and what it said (``note`` or ``message``)."""

    when: str
    type: str
    reason: str
    about: str  # kind/name, e.g. pod/demo-node-0-1-x7k2p
    message: str
    count: int = 1

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> Event:
        kind, name, _ = _regarding(event)
        about = f"{kind.lower()}/{name}"
        count = _at(event, "series", "count") or _at(event, "count")
        count = count or _at(event, "deprecatedCount")
        return cls(
            when=_first(
                event,
                ("series", "lastObservedTime"),
                ("lastTimestamp",),
                ("deprecatedLastTimestamp",),
                ("eventTime",),
                ("firstTimestamp",),
                ("deprecatedFirstTimestamp",),
                ("metadata", "creationTimestamp"),
            ),
            type=_first(event, ("type",)) or "Normal",
            reason=_first(event, ("reason",)),
            about=about,
            message=_first(event, ("note",), ("message",)),
            count=max(1, as_int(count) or 1),
        )

    def __str__(self) -> str:
        times = f" \u00d7{self.count}" if self.count > 1 else ""  # the multiplication sign: "x3"
        text = f"{self.when} {self.type} {self.reason} {self.about}: {self.message}{times}"
        return printable(text)


def _regarding(event: Mapping[str, Any]) -> tuple[str, str, str]:
    """The kind, name and uid of the object an event is about, in either shape."""
    regarding = _at(event, "regarding") or _at(event, "involvedObject") or {}
    return _first(regarding, ("kind",)), _first(regarding, ("name",)), _first(regarding, ("uid",))


def _event_list(
    session: Session, api_version: str, namespace: str | None, selector: str
) -> list[Obj]:
    return list_all(session, api_version, "Event", namespace, field_selector=selector)


def events_about(
    session: Session,
    namespace: str | None,
    names: Sequence[str],
    recent: int = 10,
    ours: Callable[[Mapping[str, Any]], bool] = lambda event: True,
) -> tuple[Event, ...]:
    """The latest events about the objects so named that are ``ours`` (one list per name,
    through the first of ``EVENT_APIS`` that answers), oldest first by when each last happened
    (``_order``). An API that refuses (forbidden, not served) gives way to the next; when every
    one does, the first refusal is raised."""
    refused: ApiError | None = None
    for api_version, field in EVENT_APIS:
        try:
            found: dict[str, Obj] = {}
            for name in names:
                for event in _event_list(session, api_version, namespace, f"{field}={name}"):
                    if not ours(event):
                        continue
                    meta_ = meta(event)
                    key = str(meta_.get("uid") or f"{meta_.get('namespace')}/{meta_.get('name')}")
                    found.setdefault(key, event)
        except (Forbidden, NotFound) as exc:
            refused = refused or exc
            continue
        read = [(Event.of(e), e) for e in found.values()]
        return tuple(event for event, _ in sorted(read, key=_order)[-recent:])
    assert refused is not None
    raise refused


def _order(read: tuple[Event, Obj]) -> tuple[str, int]:
    """When the event last happened, to the second (core/v1 times have no finer grain), then
    the order the server wrote it in (its resourceVersion): one clock for both shapes."""
    event, raw = read
    return sortable_time(event.when)[:19], as_int(meta(raw).get("resourceVersion")) or 0


# The labels by which a Job's pods name their owners and their uids (batch/v1 Job, JobSet): how
# the uids of a TrainJob's children are known without reading them (../shared/observed).
OWNER_LABELS: Final = (
    ("Job", "batch.kubernetes.io/job-name", "batch.kubernetes.io/controller-uid"),
    ("JobSet", "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/jobset-uid"),
)


def _uids(job: Obj, pods: Sequence[Obj]) -> dict[tuple[str, str], str]:
    """The uid of each object of the job whose uid is known, by (kind, name): the job's, its
    pods', and its children's as its pods' labels name them (not those of pods going away)."""
    known = {(str(job.get("kind")), str(meta(job).get("name"))): str(meta(job).get("uid") or "")}
    for pod in pods:
        known[("Pod", str(meta(pod).get("name")))] = str(meta(pod).get("uid") or "")
        labels = meta(pod).get("labels")
        if meta(pod).get("deletionTimestamp") or not isinstance(labels, Mapping):
            continue
        for kind, name, uid in OWNER_LABELS:
            if isinstance(labels.get(name), str) and isinstance(labels.get(uid), str):
                known[(kind, labels[name])] = labels[uid]
    return {key: uid for key, uid in known.items() if uid}


def _of_this_job(
    job: Obj, known: Mapping[tuple[str, str], str]
) -> Callable[[Mapping[str, Any]], bool]:
    """Whether an event (listed by an object's name) is about this job's objects and not about
    others that had their names (a job deleted and submitted again, a pod recreated): its
    object's uid is the one ``known`` for that kind and name; where none is known (a child
    before any pod says its uid), it happened since the job was created."""
    created = sortable_time(str(meta(job).get("creationTimestamp") or ""))[:19]

    def ours(event: Mapping[str, Any]) -> bool:
        kind, name, uid = _regarding(event)
        if uid and (kind, name) in known:
            return uid == known[kind, name]
        return sortable_time(Event.of(event).when)[:19] >= created

    return ours


def events(
    session: Session, job: Obj, pods: Sequence[Obj], troubled: Sequence[str], recent: int = 10
) -> tuple[Event, ...]:
    """The latest events of the job, its children and the ``troubled`` of its ``pods``."""
    ref = Ref.of(job)
    children = [c.format(name=ref.name) for c in job_kind(ref).children]
    names = [ref.name, *children, *troubled]
    return events_about(session, ref.namespace, names, recent, _of_this_job(job, _uids(job, pods)))


def status(session: Session, job: Ref | Obj) -> Observation:
    """State, reason, per-node pod phases and recent events: the job's, and those of the first
    few pods in trouble (a healthy 1,000-pod job costs no per-pod request). ``job``: its
    ``Ref``, or the job as just read (``find``), which is then not read again."""
    if isinstance(job, Ref):
        found = get(session, job)
        if found is None:
            raise JobNotFound(f"{job} does not exist")
        job = found
    pods = node_pods(session, job)
    obs = observation(job, pods, waiting_workload(session, job))
    troubled = [n.pod for n in obs.nodes if n.reason or (not n.ready and n.phase != "Succeeded")]
    said = events(session, job, pods, troubled[:TROUBLED_PODS])
    own = f"{obs.ref.kind.lower()}/{obs.ref.name}"  # the Trainer's word on the job itself
    warnings = [(e.reason, e.message) for e in said if e.type == "Warning" and e.about == own]
    return evolve(obs, state=job_status.trainer_refused(obs.state, warnings), events=said)

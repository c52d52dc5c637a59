"""A job as it stands: its normalized state, its training nodes (pods by rank) and the events
that tell why. ``observation`` is a pure function of one snapshot (the job and its pods):
Kubernetes is level-triggered, so there is no machine here, only the reading of evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.kinds import COMPLETION_INDEX, KINDS, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB
from kfcompile.lifecycle.session import JobNotFound, Session, get, job_kind, list_all, meta
from kfcompile.ports import Obj, Ref
from kfcompile.status import JobState, State

TROUBLED_PODS: Final = 5  # pods whose events `status` shows


@frozen
class Node:
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

    @property
    def nodes_ready(self) -> int:
        return sum(n.ready for n in self.nodes)

    @property
    def summary(self) -> tuple[State, str, int, int]:
        """What a progress line shows: a change in it is worth a line."""
        return (self.state.state, self.state.reason, self.nodes_ready, self.nodes_total)


@frozen
class ListPods:
    """A machine's request: the training pods of ``job`` (one paginated list)."""

    job: Obj


@frozen
class PodsListed:
    pods: list[Obj]


def as_int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def rank_of(job: Mapping[str, Any], pod: Mapping[str, Any]) -> int | None:
    """A pod's rank: TrainJob completion index; PyTorchJob master 0, worker i -> i+1 (or i
    without a master, as elastic jobs have)."""
    labels = meta(pod).get("labels") or {}
    if KINDS[str(job.get("kind"))].rank == "completion-index":
        return as_int(labels.get(COMPLETION_INDEX))
    index = as_int(labels.get(REPLICA_INDEX))
    if index is None:
        return None
    if labels.get(REPLICA_TYPE) == "master":
        return index
    has_master = "Master" in (job.get("spec", {}).get("pytorchReplicaSpecs") or {})
    return index + 1 if has_master else index


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


def nodes_total(job: Mapping[str, Any]) -> int:
    spec = job.get("spec") or {}
    if job.get("kind") == TRAINJOB.name:
        return as_int((spec.get("trainer") or {}).get("numNodes")) or 1
    replicas = spec.get("pytorchReplicaSpecs") or {}
    return sum(as_int(r.get("replicas")) or 1 for r in replicas.values())


def _node(job: Mapping[str, Any], pod: Mapping[str, Any]) -> Node:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    stuck = job_status.stuck_pod([pod])
    return Node(
        rank=rank_of(job, pod),
        pod=str(meta(pod).get("name", "?")),
        phase=str(status.get("phase", "Pending")),
        ready=bool(containers) and all(c.get("ready") for c in containers),
        restarts=sum(as_int(c.get("restartCount")) or 0 for c in containers),
        # a pod being deleted: what its deletion waits for (before why it would not start)
        reason=job_status.terminating(pod) or (stuck.reason if stuck else ""),
    )


def node_pods(session: Session, job: Obj) -> list[Obj]:
    ref = Ref.of(job)
    selector = job_kind(ref).nodes.format(name=ref.name)
    return list_all(session, "v1", "Pod", ref.namespace, label_selector=selector)


def observation(job: Obj, pods: Sequence[Obj]) -> Observation:
    """The job's state from its status and its pods."""
    nodes = sorted(
        (_node(job, p) for p in pods),
        key=lambda n: (n.rank is None, n.rank or 0, n.pod),
    )
    return Observation(
        Ref.of(job), job_status.job_state(job, list(pods)), tuple(nodes), nodes_total(job)
    )


def observe(session: Session, job: Obj) -> Observation:
    """The job's state from its status and its pods (one paginated list, whatever their number)."""
    return observation(job, node_pods(session, job))


@frozen(order=True)
class Event:
    """A Kubernetes event about the job or one of its objects, oldest first when sorted."""

    when: str
    type: str
    reason: str
    about: str  # kind/name, e.g. pod/demo-node-0-1-x7k2p
    message: str
    count: int = 1

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> Event:
        involved = event.get("involvedObject") or {}
        return cls(
            when=str(event.get("lastTimestamp") or event.get("eventTime") or ""),
            type=str(event.get("type", "Normal")),
            reason=str(event.get("reason", "")),
            about=f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            message=str(event.get("message", "")),
            count=as_int(event.get("count")) or 1,
        )

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.when} {self.type} {self.reason} {self.about}: {self.message}{times}"


def events(session: Session, job: Obj, pods: Sequence[str], recent: int = 10) -> tuple[Event, ...]:
    """The latest events of the job, its children and ``pods`` (one list each, by name)."""
    ref = Ref.of(job)
    children = [c.format(name=ref.name) for c in job_kind(ref).children]
    found: list[Obj] = []
    for name in [ref.name, *children, *pods]:
        by_name = f"involvedObject.name={name}"
        found += list_all(session, "v1", "Event", ref.namespace, field_selector=by_name)
    return tuple(sorted(Event.of(e) for e in found)[-recent:])


def status(session: Session, ref: Ref) -> Observation:
    """State, reason, per-node pod phases and recent events: the job's, and those of the first
    few pods in trouble (a healthy 1,000-pod job costs no per-pod request)."""
    job = get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    obs = observe(session, job)
    troubled = [n.pod for n in obs.nodes if n.reason or (not n.ready and n.phase != "Succeeded")]
    return evolve(obs, events=events(session, job, troubled[:TROUBLED_PODS]))

"""A job's life on a cluster (submit, status, wait, logs, cancel, suspend, list, work-dir sync),
written against the ports in ``kfcompile.ports`` only.

Nothing here opens a socket, reads a clock or draws a random number: the ``Session`` carries the
``Cluster`` port, the ``Clock`` port and the jitter source, so tests drive all three. What is
decided by data lives in the tables at the top (where each kind keeps its pods, its rank and its
suspend flag); the functions below walk them.

Two rules hold everywhere:

- Trouble on the way to the API server (``Transient``: 429, 5xx, dropped connections, timeouts)
  is retried with capped exponential backoff and jitter, and is never reported as the job's
  state. When it lasts longer than ``Session.retry_for`` it ends the command as ``Unavailable``.
- A job is found again by its name and the spec-hash annotation, never by guessing: submitting
  the same spec twice creates nothing, and a different job holding the name is never touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import posixpath
import queue
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Final, Literal, TypeVar

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.kinds import COMPLETION_INDEX, KINDS, REPLICA_INDEX, REPLICA_TYPE, TRAINJOB, Kind
from kfcompile.ports import (
    ApiError,
    Clock,
    Cluster,
    ExecOutput,
    ExecResult,
    Forbidden,
    Gone,
    Invalid,
    LocalFiles,
    NotFound,
    Obj,
    Packed,
    Ref,
    Transient,
)
from kfcompile.spec import QUEUE_LABEL, JobSpec
from kfcompile.status import JobState, State
from kfcompile.targets import target

T = TypeVar("T")

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGER: Final = "kfcompile"
SPEC_HASH: Final = "kfcompile.dev/spec-hash"
TARGET_ANNOTATION: Final = "kfcompile.dev/target"
LIST_PAGE: Final = 500
LIST_RESTARTS: Final = 3  # times a paginated list starts over after its continue token expired

RUNTIME_API: Final = TRAINJOB.api_version
LOCAL_QUEUE_API: Final = "kueue.x-k8s.io/v1beta1"

# Backoff for retries and polls: doubling from BACKOFF_START, capped at BACKOFF_CAP, with half
# of each delay drawn at random ("equal jitter") so many clients do not retry in step.
BACKOFF_START: Final = 0.1
BACKOFF_CAP: Final = 5.0
WATCH_SEGMENT: Final = 5  # seconds; pods can get stuck without the job changing, so look again
TROUBLED_PODS: Final = 5  # pods whose events `status` shows
POLL_INTERVAL: Final = 2.0  # only when the API refuses to watch

SYNC_IMAGE: Final = "busybox:1.36"  # has tar; the helper pod runs nothing else
SYNC_ROOT: Final = "/mnt/pvc"

# --- errors -------------------------------------------------------------------------------------


class ClusterError(Exception):
    """A lifecycle step could not be done; ``str()`` is one or more lines for the user."""


class PreflightFailed(ClusterError):
    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


class NameTaken(ClusterError):
    """A different object already holds the name: kfcompile never replaces it."""


class JobNotFound(ClusterError):
    pass


class JobDeleted(ClusterError):
    """The job went away while we watched it: someone else deleted it."""


class Unavailable(ClusterError):
    """The API server kept failing with transient errors longer than we retry."""


class TimedOut(ClusterError):
    def __init__(self, message: str, last: Observation | None = None) -> None:
        super().__init__(message)
        self.last = last


# --- the session and retries --------------------------------------------------------------------


def _half() -> float:
    return 0.5


@frozen
class Session:
    """What every lifecycle call needs: the ports, and how long to ride out API trouble."""

    cluster: Cluster
    clock: Clock
    jitter: Callable[[], float] = _half  # uniform in [0, 1); the adapters pass random.random
    retry_for: float = 60.0
    # Told (what, error) when a call first fails with transient trouble and will be retried.
    on_retry: Callable[[str, Transient], None] | None = None


def backoff(session: Session, attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based)."""
    delay: float = min(BACKOFF_CAP, BACKOFF_START * 2**attempt)
    return delay / 2 + delay / 2 * session.jitter()


def call(session: Session, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, retried while it fails with ``Transient`` for up to ``session.retry_for`` s."""
    start = session.clock.monotonic()
    attempt = 0
    while True:
        try:
            return fn()
        except Transient as exc:
            delay = backoff(session, attempt)
            waited = session.clock.monotonic() - start
            if waited + delay > session.retry_for:
                raise Unavailable(
                    f"{what}: the API server kept failing for {waited:.0f}s ({exc})"
                ) from None
            if attempt == 0 and session.on_retry is not None:
                session.on_retry(what, exc)
            session.clock.sleep(delay)
            attempt += 1


def _get(session: Session, ref: Ref) -> Obj | None:
    try:
        return call(session, f"read {ref}", lambda: session.cluster.get(ref))
    except NotFound:
        return None


def _list_all(
    session: Session, api_version: str, kind: str, namespace: str | None, **selectors: str
) -> list[Obj]:
    """Every page of a list: one request per LIST_PAGE objects, never one per object.

    A continue token the server has forgotten (410) starts the list over, as the API asks."""
    items: list[Obj] = []
    token: str | None = None
    restarts = 0
    while True:
        try:
            page = call(
                session,
                f"list {kind}",
                partial(
                    session.cluster.list,
                    api_version,
                    kind,
                    namespace,
                    limit=LIST_PAGE,
                    continue_token=token,
                    **selectors,
                ),
            )
        except Gone:
            if token is None or restarts >= LIST_RESTARTS:
                raise
            items, token, restarts = [], None, restarts + 1
            continue
        items.extend(page.items)
        token = page.continue_token
        if not token:
            return items


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotation(obj: Mapping[str, Any], key: str) -> str | None:
    value = (_meta(obj).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def job_kind(ref: Ref) -> Kind:
    return KINDS[ref.kind]


def find(session: Session, namespace: str, name: str, kind: str | None = None) -> Obj:
    """The job called ``name`` as it is now: a TrainJob, else a PyTorchJob (or only ``kind``)."""
    for k in [kind] if kind else list(KINDS):
        job = _get(session, Ref(KINDS[k].api_version, k, namespace, name))
        if job is not None:
            return job
    kinds = kind or " or ".join(KINDS)
    raise JobNotFound(f"no {kinds} named {name} in namespace {namespace}")


def locate(session: Session, namespace: str, name: str, kind: str | None = None) -> Ref:
    """The job called ``name``: a TrainJob, else a PyTorchJob (or only ``kind``)."""
    return Ref.of(find(session, namespace, name, kind))


# --- submit -------------------------------------------------------------------------------------


@frozen
class Prepared:
    """The objects ``submit`` creates, in order (companions first, the job last)."""

    objects: tuple[Obj, ...]
    spec_hash: str

    @property
    def job(self) -> Obj:
        return self.objects[-1]

    @property
    def ref(self) -> Ref:
        return Ref.of(self.job)


def spec_hash(objects: Sequence[Obj]) -> str:
    """A short digest of exactly what would be created (Secret values never take part)."""
    text = json.dumps(objects, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def secret(spec: JobSpec, environ: Mapping[str, str], namespace: str | None) -> Obj:
    """The Secret holding ``secret_env`` values, taken from ``environ`` (never printed)."""
    missing = [name for name in spec.secret_env if name not in environ]
    if missing:
        raise ClusterError(
            "\n".join(f"secret_env: {n} is not set in your environment" for n in missing)
        )
    meta: dict[str, Any] = {"name": spec.secret_name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "stringData": {name: environ[name] for name in spec.secret_env},
    }


def prepare(
    spec: JobSpec, target_name: str, namespace: str, environ: Mapping[str, str]
) -> Prepared:
    """Render ``spec`` for the cluster: namespaced, labelled as ours, with the spec hash."""
    chosen = target(target_name)
    target_name = chosen.name  # the registered name, also for a patch release like v2.3.1
    objects = [dict(obj) for obj in chosen.render(spec).objects]
    digest = spec_hash(objects)
    if spec.secret_env:
        objects.insert(-1, secret(spec, environ, namespace))
    for obj in objects:
        meta = obj["metadata"] = dict(obj["metadata"], namespace=namespace)
        meta["labels"] = {**meta.get("labels", {}), MANAGED_BY_LABEL: MANAGER}
        meta["annotations"] = {
            **meta.get("annotations", {}),
            SPEC_HASH: digest,
            TARGET_ANNOTATION: target_name,
        }
    return Prepared(tuple(objects), digest)


def preflight(session: Session, spec: JobSpec, prepared: Prepared) -> list[str]:
    """What is missing on the cluster for this job, one line each with how to fix it."""
    cluster, job = session.cluster, prepared.job
    kind = KINDS[job["kind"]]
    namespace = prepared.ref.namespace or "default"
    problems: list[str] = []

    def served(api_version: str, kind_name: str) -> bool:
        return call(session, "discovery", lambda: cluster.served(api_version, kind_name))

    def missing(ref: Ref) -> bool:
        try:
            return _get(session, ref) is None
        except Forbidden:
            return False  # we may not read it; the create will tell

    if not served(kind.api_version, kind.name):
        problems.append(
            f"{kind.name} ({kind.api_version}) is not served by this cluster: its CRD is "
            f"missing; {kind.install}"
        )
    if missing(Ref("v1", "Namespace", None, namespace)):
        problems.append(
            f"namespace {namespace} does not exist: create it (kubectl create namespace "
            f"{namespace}) or choose another with -n"
        )
    if kind is TRAINJOB and not problems:
        ref = job["spec"]["runtimeRef"]
        runtime_kind = ref.get("kind", "ClusterTrainingRuntime")
        scope = None if runtime_kind == "ClusterTrainingRuntime" else namespace
        if missing(Ref(RUNTIME_API, runtime_kind, scope, ref["name"])):
            where = f" in namespace {namespace}" if scope else ""
            plural = runtime_kind.lower() + "s"
            problems.append(
                f"{runtime_kind} {ref['name']} does not exist{where}: install the Trainer "
                f"runtimes or set runtime_ref to one listed by `kubectl get {plural}`"
            )
    queue_name = (_meta(job).get("labels") or {}).get(QUEUE_LABEL)
    if queue_name:
        if not served(LOCAL_QUEUE_API, "LocalQueue"):
            problems.append(
                f"the job names Kueue queue {queue_name} but Kueue is not installed "
                "(LocalQueue is not served): install Kueue or remove `queue`"
            )
        elif missing(Ref(LOCAL_QUEUE_API, "LocalQueue", namespace, queue_name)):
            problems.append(
                f"Kueue LocalQueue {queue_name} does not exist in namespace {namespace}: "
                f"create it or fix `queue` (kubectl get localqueues -n {namespace})"
            )
    if spec.work_dir is not None and missing(
        Ref("v1", "PersistentVolumeClaim", namespace, spec.work_dir.pvc)
    ):
        problems.append(
            f"PersistentVolumeClaim {spec.work_dir.pvc} does not exist in namespace "
            f"{namespace}: create it before submitting (work_dir.pvc)"
        )
    return problems


@frozen
class Submitted:
    ref: Ref
    created: bool  # False: this very spec was already submitted
    uploaded: Synced | None = None
    # What a resubmit had to mend on the job's companions, one line each ("Secret x ...: ...").
    repaired: tuple[str, ...] = ()


@frozen
class Left:
    """An object a failed submit could not remove, and why."""

    ref: Ref
    why: str  # "delete failed: 403 Forbidden: ...", "not deleted: interrupted", ...
    owned: bool = False  # its ownerReference to the job was set (the garbage collector follows)


class LeftBehind(ClusterError):
    """A submit failed and could not remove everything it had created. ``str()`` is the cause,
    then one line per object left: what it is, why it is still there and how to remove it."""

    def __init__(self, cause: BaseException, left: Sequence[Left], job: Ref) -> None:
        interrupted = isinstance(cause, KeyboardInterrupt)
        lines = [str(cause) or ("interrupted" if interrupted else type(cause).__name__)]
        lines.append(
            f"the submit failed and could not remove all it had created; "
            f"{len(left)} object{'s' * (len(left) != 1)} left on the cluster:"
        )
        job_left = any(item.ref == job for item in left)
        lines += [_left_line(item, job, job_left) for item in left]
        super().__init__("\n".join(lines))
        self.left = tuple(left)


def removal(ref: Ref) -> str:
    """The command that removes ``ref``: ``kfcompile cancel`` for a job, else ``kubectl``."""
    namespace = f" -n {ref.namespace}" if ref.namespace else ""
    if ref.kind in KINDS:
        return f"kfcompile cancel {ref.name}{namespace} --kind {ref.kind}"
    return f"kubectl delete {ref.kind.lower()} {ref.name}{namespace}"


def _left_line(item: Left, job: Ref, job_left: bool) -> str:
    about = [item.why]
    if item.ref.kind == "Secret":
        about.append("it holds the values of secret_env")
    if item.ref != job:
        if not item.owned:
            about.append("it has no owner, so nothing will ever delete it")
        elif not job_left:
            about.append("the garbage collector should delete it with the job")
    return f"  {item.ref} ({'; '.join(about)}): remove it with: {removal(item.ref)}"


def _owner(job: Obj) -> dict[str, Any]:
    meta = _meta(job)
    return {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": False,
        "blockOwnerDeletion": True,
    }


def _owned_by(obj: Obj, job: Obj) -> bool:
    refs = _meta(obj).get("ownerReferences")
    uid = _meta(job).get("uid")
    return isinstance(refs, list) and any(
        isinstance(r, Mapping) and r.get("uid") == uid for r in refs
    )


def _own(session: Session, companion: Obj, job: Obj) -> None:
    """Make ``job`` the owner of ``companion``, so deleting the job deletes it."""
    ref = Ref.of(companion)
    owner = {"metadata": {"ownerReferences": [_owner(job)]}}
    call(session, f"own {ref}", partial(session.cluster.patch, ref, owner))


def _create(session: Session, obj: Obj, digest: str) -> Obj:
    """Create ``obj``; a name already holding our own spec hash counts as created (a retried
    create whose first answer was lost). Anything else holding the name is ``NameTaken``."""
    ref = Ref.of(obj)
    try:
        return call(session, f"create {ref}", lambda: session.cluster.create(obj))
    except ApiError as exc:
        if exc.status != 409:
            raise
    existing = _get(session, ref)
    if existing is not None and _annotation(existing, SPEC_HASH) == digest:
        return existing
    raise NameTaken(
        f"{ref} already exists and is not this job: rename the job; kfcompile never "
        "replaces an object it did not create for this spec"
    )


def submit(
    session: Session,
    spec: JobSpec,
    target_name: str,
    *,
    namespace: str,
    environ: Mapping[str, str],
    files: LocalFiles | None = None,
    sync_image: str = SYNC_IMAGE,
) -> Submitted:
    """Check the cluster, upload the work dir, then create companions and the job.

    Companions (script ConfigMap, Secret) are created first and then owned by the job, so
    deleting the job removes them. A failure part-way deletes what this call created; what it
    cannot delete ends the call as ``LeftBehind``, naming each object and how to remove it.
    Submitting a spec whose job exists makes the job whole again: a missing companion is
    created anew and a companion without its owner gets it back (``Submitted.repaired``).
    """
    prepared = prepare(spec, target_name, namespace, environ)
    problems = preflight(session, spec, prepared)
    if problems:
        raise PreflightFailed(problems)
    ref = prepared.ref
    existing = _get(session, ref)
    if existing is not None:
        if _annotation(existing, SPEC_HASH) == prepared.spec_hash:
            return Submitted(ref, created=False, repaired=_repair(session, prepared, existing))
        raise NameTaken(
            f"{ref} already exists and is a different job (spec hash "
            f"{_annotation(existing, SPEC_HASH) or 'none'}, this spec {prepared.spec_hash}): "
            f"rename the job, or cancel the old one first (kfcompile cancel {ref.name})"
        )
    uploaded = None
    if spec.work_dir is not None and files is not None:
        uploaded = sync_up(
            session,
            files,
            namespace=namespace,
            pvc=spec.work_dir.pvc,
            path="/",
            local=spec.work_dir.local,
            image=sync_image,
        )
    created: list[Obj] = []
    owned: set[Ref] = set()
    pending: Obj | None = None  # being created: it may exist though no answer said so
    try:
        for obj in prepared.objects:
            pending = obj
            created.append(_create(session, obj, prepared.spec_hash))
            pending = None
        for companion in created[:-1]:
            _own(session, companion, created[-1])
            owned.add(Ref.of(companion))
    except BaseException as exc:
        # A refusal (an ApiError, a taken name) created nothing; anything else may have.
        unsure = None if isinstance(exc, ApiError | NameTaken) else pending
        left = _roll_back(session, created, unsure, prepared.spec_hash, owned)
        if left:
            raise LeftBehind(exc, left, ref) from exc
        raise
    return Submitted(ref, created=True, uploaded=uploaded)


def _roll_back(
    session: Session, created: Sequence[Obj], unsure: Obj | None, digest: str, owned: set[Ref]
) -> list[Left]:
    """Delete what a failed submit created, the job first; what stays is returned, never
    hidden. ``unsure`` was being created when the failure came: deleted if it is ours. Once the
    API server is found unavailable, the rest is reported without waiting for it again."""
    todo = list(reversed(created))
    left: list[Left] = []
    down: Unavailable | None = None
    try:
        if unsure is not None:
            try:
                found = _get(session, Ref.of(unsure))
            except (ApiError, ClusterError) as exc:
                down = exc if isinstance(exc, Unavailable) else down
                why = (
                    f"may have been created (its create got no answer) and could not be read: {exc}"
                )
                left.append(Left(Ref.of(unsure), why))
            else:
                if found is not None and _annotation(found, SPEC_HASH) == digest:
                    todo.insert(0, found)
            unsure = None
        while todo:
            ref = Ref.of(todo[0])
            if down is not None:
                why = "not deleted: the API server was unavailable"
                left.append(Left(ref, why, ref in owned))
                todo.pop(0)
                continue
            try:
                call(session, f"delete {ref}", partial(session.cluster.delete, ref, "Background"))
            except NotFound:
                pass
            except (ApiError, ClusterError) as exc:
                down = exc if isinstance(exc, Unavailable) else None
                left.append(Left(ref, f"delete failed: {exc}", ref in owned))
            todo.pop(0)
    except KeyboardInterrupt:  # a second Ctrl-C: say what was not deleted yet
        if unsure is not None:
            left.append(Left(Ref.of(unsure), "may have been created: not checked (interrupted)"))
        for i, obj in enumerate(todo):
            why = "delete interrupted: it may still be there" if i == 0 else "not deleted"
            left.append(Left(Ref.of(obj), why, Ref.of(obj) in owned))
    return left


def _repair(session: Session, prepared: Prepared, job: Obj) -> tuple[str, ...]:
    """Make the companions of ``job`` (on the cluster, with this spec's hash) what a submit
    leaves: present and owned by it. One line per thing mended."""
    repaired = []
    for obj in prepared.objects[:-1]:
        ref = Ref.of(obj)
        try:
            current = _get(session, ref)
            if current is None:
                current = _create(session, obj, prepared.spec_hash)
                what = "was missing: created again"
            elif _annotation(current, SPEC_HASH) != prepared.spec_hash:
                raise NameTaken(
                    f"{ref} is not the one this job was submitted with: the job reads it, so "
                    f"remove or rename it and submit again ({removal(ref)})"
                )
            elif _owned_by(current, job):
                continue
            else:
                what = "had lost its owner: owned by the job again"
            _own(session, current, job)
        except NameTaken:
            raise
        except (ApiError, ClusterError) as exc:
            raise ClusterError(
                f"{prepared.ref} exists, but {ref} could not be mended ({exc}); the job may not "
                f"start without it, and deleting the job will not delete it: submit again, or "
                f"remove both ({removal(prepared.ref)}; {removal(ref)})"
            ) from None
        repaired.append(f"{ref} {what}")
    return tuple(repaired)


# --- observing ----------------------------------------------------------------------------------


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


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def rank_of(job: Mapping[str, Any], pod: Mapping[str, Any]) -> int | None:
    """A pod's rank: TrainJob completion index; PyTorchJob master 0, worker i -> i+1 (or i
    without a master, as elastic jobs have)."""
    labels = _meta(pod).get("labels") or {}
    if KINDS[str(job.get("kind"))].rank == "completion-index":
        return _int(labels.get(COMPLETION_INDEX))
    index = _int(labels.get(REPLICA_INDEX))
    if index is None:
        return None
    if labels.get(REPLICA_TYPE) == "master":
        return index
    has_master = "Master" in (job.get("spec", {}).get("pytorchReplicaSpecs") or {})
    return index + 1 if has_master else index


def nodes_total(job: Mapping[str, Any]) -> int:
    spec = job.get("spec") or {}
    if job.get("kind") == TRAINJOB.name:
        return _int((spec.get("trainer") or {}).get("numNodes")) or 1
    replicas = spec.get("pytorchReplicaSpecs") or {}
    return sum(_int(r.get("replicas")) or 1 for r in replicas.values())


def _node(job: Mapping[str, Any], pod: Mapping[str, Any]) -> Node:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    stuck = job_status.stuck_pod([pod])
    return Node(
        rank=rank_of(job, pod),
        pod=str(_meta(pod).get("name", "?")),
        phase=str(status.get("phase", "Pending")),
        ready=bool(containers) and all(c.get("ready") for c in containers),
        restarts=sum(_int(c.get("restartCount")) or 0 for c in containers),
        reason=stuck.reason if stuck else "",
    )


def _node_pods(session: Session, job: Obj) -> list[Obj]:
    ref = Ref.of(job)
    selector = job_kind(ref).nodes.format(name=ref.name)
    return _list_all(session, "v1", "Pod", ref.namespace, label_selector=selector)


def observe(session: Session, job: Obj) -> Observation:
    """The job's state from its status and its pods (one paginated list, whatever their number)."""
    pods = _node_pods(session, job)
    nodes = sorted(
        (_node(job, p) for p in pods),
        key=lambda n: (n.rank is None, n.rank or 0, n.pod),
    )
    return Observation(
        Ref.of(job),
        job_status.job_state(job, pods),
        tuple(nodes),
        nodes_total(job),
    )


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
            count=_int(event.get("count")) or 1,
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
        found += _list_all(session, "v1", "Event", ref.namespace, field_selector=by_name)
    return tuple(sorted(Event.of(e) for e in found)[-recent:])


def status(session: Session, ref: Ref) -> Observation:
    """State, reason, per-node pod phases and recent events: the job's, and those of the first
    few pods in trouble (a healthy 1,000-pod job costs no per-pod request)."""
    job = _get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    obs = observe(session, job)
    troubled = [n.pod for n in obs.nodes if n.reason or (not n.ready and n.phase != "Succeeded")]
    return evolve(obs, events=events(session, job, troubled[:TROUBLED_PODS]))


# --- waiting ------------------------------------------------------------------------------------

Until = Literal["running", "done"]


def reached(obs: Observation, until: Until) -> bool:
    if obs.state.finished:
        return True
    return until == "running" and obs.state.state is State.RUNNING


def wait(
    session: Session,
    ref: Ref,
    until: Until,
    *,
    timeout: float | None = None,
    on_change: Callable[[Observation, float], None] | None = None,
) -> Observation:
    """Watch the job until it is running (or finished) or finished; report each change.

    One list gives the object and a resourceVersion; a watch from there delivers changes as
    they happen. A closed stream is resumed from the last version seen, ``410 Gone`` starts
    over from a fresh list, and transient errors back off and retry. Only when the API server
    refuses to watch does this poll.
    """
    cluster, clock = session.cluster, session.clock
    kind = job_kind(ref)
    by_name = f"metadata.name={ref.name}"
    start = clock.monotonic()
    shown: tuple[State, str, int, int] | None = None
    last: Observation | None = None
    polling = False
    attempt = 0

    def remaining() -> float:
        return math.inf if timeout is None else timeout - (clock.monotonic() - start)

    def seen(job: Obj) -> Observation | None:
        nonlocal shown, last
        last = observe(session, job)
        if on_change is not None and last.summary != shown:
            on_change(last, clock.monotonic() - start)
        shown = last.summary
        return last if reached(last, until) else None

    while True:
        if remaining() <= 0 and last is not None:
            last = status(session, ref)  # how things stand now, with the events that say why
            warnings = [f"  {e}" for e in last.events if e.type == "Warning"][-3:]
            raise TimedOut(
                "\n".join(
                    [
                        f"{ref} did not become {until} within {timeout:g}s: "
                        f"{last.state.state.value} ({last.state.reason}) "
                        f"{last.state.message}".rstrip(),
                        *warnings,
                    ]
                ),
                last,
            )
        page = call(
            session,
            f"read {ref}",
            lambda: cluster.list(
                kind.api_version, kind.name, ref.namespace, field_selector=by_name
            ),
        )
        if not page.items:
            if last is None:
                raise JobNotFound(f"{ref} does not exist")
            raise JobDeleted(f"{ref} was deleted (by someone else) while waiting")
        if done := seen(page.items[0]):
            return done
        if polling:
            clock.sleep(min(POLL_INTERVAL, max(remaining(), 0)))
            continue
        version = page.resource_version
        try:
            stream = cluster.watch(
                kind.api_version,
                kind.name,
                ref.namespace,
                resource_version=version,
                field_selector=by_name,
                timeout_seconds=max(1, math.ceil(min(WATCH_SEGMENT, remaining()))),
            )
            for event in stream:
                attempt = 0
                if event.type == "DELETED":
                    raise JobDeleted(f"{ref} was deleted (by someone else) while waiting")
                if event.type in ("ADDED", "MODIFIED") and (done := seen(event.object)):
                    return done
        except Gone:
            continue  # our version is too old: list again
        except Transient:
            clock.sleep(backoff(session, attempt))
            attempt += 1
        except (Forbidden, NotFound):
            polling = True  # the API refuses to watch: the only time we poll


# --- logs ---------------------------------------------------------------------------------------


@frozen
class LogLine:
    rank: int | None
    text: str


def _pods_by_rank(session: Session, job: Obj) -> dict[int, Obj]:
    """The newest pod of each rank."""
    found: dict[int, Obj] = {}
    for pod in _node_pods(session, job):
        rank = rank_of(job, pod)
        if rank is None:
            continue
        old = found.get(rank)
        stamp = str(_meta(pod).get("creationTimestamp", ""))
        if old is None or str(_meta(old).get("creationTimestamp", "")) <= stamp:
            found[rank] = pod
    return found


def ranks(session: Session, ref: Ref) -> list[int]:
    job = _get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    return list(range(nodes_total(job)))


def _restarts(pod: Obj, container: str) -> int:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container:
            return _int(c.get("restartCount")) or 0
    return 0


def read_logs(
    session: Session,
    ref: Ref,
    rank: int,
    *,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> list[str]:
    """One rank's log as it is now (empty when its pod does not exist yet)."""
    job = _get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    pod = _pods_by_rank(session, job).get(rank)
    if pod is None:
        return []
    name = str(_meta(pod)["name"])
    return call(
        session,
        f"read logs of {name}",
        lambda: list(
            session.cluster.pod_log(
                ref.namespace or "default",
                name,
                container=job_kind(ref).container,
                since_seconds=since_seconds,
                tail_lines=tail_lines,
            )
        ),
    )


def follow_logs(
    session: Session,
    ref: Ref,
    rank: int,
    *,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> Iterator[str]:
    """One rank's log as it grows, across dropped connections, container restarts and pod
    replacements; ends when the job has finished (or is deleted) and the log is drained.

    ``since_seconds``/``tail_lines`` shape the first container's log only. Lines are read with
    their server timestamps: after a dropped connection the log is read again from a little
    before the last line shown, and the lines up to it are skipped, so none repeats."""
    cluster, clock = session.cluster, session.clock
    container = job_kind(ref).container
    # (pod uid, restarts) -> the last line shown: (its time, lines shown with that time, when)
    last: dict[tuple[str, int], tuple[str, int, float]] = {}
    first = True
    attempt = 0
    while True:
        job = _get(session, ref)
        if job is None:
            return
        finished = job_status.job_state(job).finished
        pod = _pods_by_rank(session, job).get(rank)
        if pod is None:
            if finished:
                return
            clock.sleep(backoff(session, attempt))
            attempt = min(attempt + 1, 5)
            continue
        name = str(_meta(pod)["name"])
        key = (str(_meta(pod).get("uid", name)), _restarts(pod, container))
        since, tail = (since_seconds, tail_lines) if first else (None, None)
        if key in last:
            since = math.ceil(clock.monotonic() - last[key][2]) + 2
        first = False
        shown = False
        base_stamp, base_seen, _ = last.get(key, ("", 0, 0.0))
        same = 0  # lines read at base_stamp: the first base_seen of them were shown
        try:
            for line in cluster.pod_log(
                ref.namespace or "default",
                name,
                container=container,
                follow=not finished,
                since_seconds=since,
                tail_lines=tail,
                timestamps=True,
            ):
                stamp, _, text = line.partition(" ")
                stamp = _sortable(stamp)
                if stamp < base_stamp:
                    continue
                if stamp == base_stamp:
                    same += 1
                    if same <= base_seen:
                        continue
                prev_stamp, prev_count, _ = last.get(key, ("", 0, 0.0))
                count = prev_count + 1 if stamp == prev_stamp else 1
                last[key] = (stamp, count, clock.monotonic())
                shown, attempt = True, 0
                yield text
        except Transient:  # dropped: read again (finished or not), skipping what was shown
            clock.sleep(backoff(session, attempt))
            attempt = min(attempt + 1, 5)
            continue
        except (NotFound, Invalid):
            pass  # the pod went away, or its container has not started (400): look again
        if finished:
            return
        if not shown:  # nothing new: the container is starting, restarting, or unreachable
            clock.sleep(backoff(session, attempt))
            attempt = min(attempt + 1, 5)


def _sortable(stamp: str) -> str:
    """An RFC 3339 time with its fraction padded to nanoseconds, so times sort as text."""
    whole, dot, fraction = stamp.rstrip("Z").partition(".")
    return f"{whole}.{fraction.ljust(9, '0')}" if dot else f"{whole}.000000000"


def merge(streams: Mapping[int, Iterator[str]]) -> Iterator[LogLine]:
    """Lines of several ranks as they arrive, each tagged with its rank (one thread a rank)."""
    lines: queue.Queue[LogLine | BaseException | None] = queue.Queue()

    def pump(rank: int, stream: Iterator[str]) -> None:
        try:
            for text in stream:
                lines.put(LogLine(rank, text))
            lines.put(None)
        except BaseException as exc:  # handed to the reader, who raises it
            lines.put(exc)

    for rank, stream in streams.items():
        threading.Thread(target=pump, args=(rank, stream), daemon=True).start()
    open_streams = len(streams)
    while open_streams:
        item = lines.get()
        if item is None:
            open_streams -= 1
        elif isinstance(item, BaseException):
            raise item
        else:
            yield item


def logs(
    session: Session,
    ref: Ref,
    *,
    rank: int | None = None,
    follow: bool = False,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> Iterator[LogLine]:
    """One rank's log (``rank``), or every rank's, interleaved as the lines come."""
    chosen = [rank] if rank is not None else ranks(session, ref)
    options = {"since_seconds": since_seconds, "tail_lines": tail_lines}
    if not follow:
        for r in chosen:
            for text in read_logs(session, ref, r, **options):
                yield LogLine(r, text)
        return
    if len(chosen) == 1:
        for text in follow_logs(session, ref, chosen[0], **options):
            yield LogLine(chosen[0], text)
        return
    yield from merge({r: follow_logs(session, ref, r, **options) for r in chosen})


# --- cancel, suspend, list ----------------------------------------------------------------------


@frozen
class Cancelled:
    ref: Ref
    existed: bool


def cancel(
    session: Session, ref: Ref, *, wait_gone: bool = False, timeout: float | None = None
) -> Cancelled:
    """Delete the job (foreground: its pods go first); with ``wait_gone``, return when the job
    and every pod of it are gone, or raise ``TimedOut`` naming what is still there."""
    try:
        call(session, f"delete {ref}", lambda: session.cluster.delete(ref, "Foreground"))
        existed = True
    except NotFound:
        existed = False
    if not wait_gone:
        return Cancelled(ref, existed)
    clock = session.clock
    start = clock.monotonic()
    selector = job_kind(ref).pods.format(name=ref.name)
    attempt = 0
    while True:
        job = _get(session, ref)
        pods = call(
            session,
            f"list pods of {ref}",
            lambda: session.cluster.list(
                "v1", "Pod", ref.namespace, label_selector=selector, limit=1
            ),
        )
        if job is None and not pods.items:
            return Cancelled(ref, existed)
        if timeout is not None and clock.monotonic() - start >= timeout:
            left = [str(ref)] if job is not None else []
            names = _list_all(session, "v1", "Pod", ref.namespace, label_selector=selector)
            left += [f"pod {_meta(p).get('name')}" for p in names]
            raise TimedOut(f"{ref} not gone after {timeout:g}s; still there: {', '.join(left)}")
        clock.sleep(backoff(session, attempt))
        attempt = min(attempt + 1, 4)


def set_suspended(session: Session, ref: Ref, suspended: bool) -> None:
    """Suspend (pods deleted, job kept) or resume the job."""
    patch: dict[str, Any] = {}
    inner = patch
    *parents, leaf = job_kind(ref).suspend
    for part in parents:
        inner = inner.setdefault(part, {})
    inner[leaf] = suspended
    try:
        call(session, f"patch {ref}", lambda: session.cluster.patch(ref, patch))
    except NotFound:
        raise JobNotFound(f"{ref} does not exist") from None


@frozen
class Listed:
    ref: Ref
    state: JobState
    target: str
    created: str


def list_jobs(session: Session, namespace: str | None) -> list[Listed]:
    """Jobs kfcompile created (by label), of every kind the cluster serves, with their states
    from their status alone (no per-job pod lists)."""
    found: list[Listed] = []
    for kind in KINDS.values():
        served = partial(session.cluster.served, kind.api_version, kind.name)
        if not call(session, "discovery", served):
            continue
        for job in _list_all(
            session,
            kind.api_version,
            kind.name,
            namespace,
            label_selector=f"{MANAGED_BY_LABEL}={MANAGER}",
        ):
            found.append(
                Listed(
                    Ref.of(job),
                    job_status.job_state(job),
                    _annotation(job, TARGET_ANNOTATION) or "",
                    str(_meta(job).get("creationTimestamp", "")),
                )
            )
    return sorted(found, key=lambda j: (j.ref.namespace or "", j.ref.name, j.ref.kind))


# --- work-dir sync ------------------------------------------------------------------------------


@frozen
class Synced:
    files: int
    size: int


def claim_dir(path: str) -> str:
    """``path`` inside the claim, as the helper pod sees it; it may not leave the claim."""
    if not path.startswith("/"):
        raise ClusterError(f"--path {path}: must be absolute (a directory inside the claim)")
    inside = posixpath.normpath(path).lstrip("/")  # "/.." is "/": never above the claim
    return posixpath.join(SYNC_ROOT, inside).rstrip("/")


def _helper_pod(namespace: str, pvc: str, image: str, token: str) -> Obj:
    # Named by us, not by generateName: a create retried after a lost answer then finds its
    # own pod (same token) instead of leaving a second one behind.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"kfcompile-sync-{token[:10]}",
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGER, "kfcompile.dev/role": "sync"},
            "annotations": {SPEC_HASH: token},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "activeDeadlineSeconds": 3600,  # gone within the hour even if we are killed
            "containers": [
                {
                    "name": "sync",
                    "image": image,
                    "command": ["sleep", "3600"],
                    "volumeMounts": [{"name": "data", "mountPath": SYNC_ROOT}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}],
        },
    }


def _await_running(session: Session, ref: Ref, timeout: float) -> None:
    clock = session.clock
    start = clock.monotonic()
    attempt = 0
    while True:
        pod = _get(session, ref)
        if pod is None:
            raise ClusterError(f"sync helper {ref} disappeared before it started")
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            return
        if phase in ("Succeeded", "Failed"):
            raise ClusterError(f"sync helper {ref} ended ({phase}) before it started")
        stuck = job_status.stuck_pod([pod])
        if stuck is not None:
            raise ClusterError(f"sync helper cannot start: {stuck.reason}: {stuck.message}")
        if clock.monotonic() - start >= timeout:
            raise TimedOut(f"sync helper {ref} not running after {timeout:g}s")
        clock.sleep(backoff(session, attempt))
        attempt = min(attempt + 1, 4)


def _with_helper(
    session: Session,
    namespace: str,
    pvc: str,
    image: str,
    timeout: float,
    work: Callable[[Ref], T],
) -> T:
    """Run ``work`` with a short-lived pod that mounts ``pvc``; the pod is deleted on every
    path out, errors and Ctrl-C included."""
    token = "".join(f"{int(session.jitter() * 2**32):08x}" for _ in range(2))
    pod = _create(session, _helper_pod(namespace, pvc, image, token), token)
    ref = Ref.of(pod)
    try:
        _await_running(session, ref, timeout)
        return work(ref)
    finally:
        with contextlib.suppress(NotFound):
            call(session, f"delete {ref}", lambda: session.cluster.delete(ref, "Background"))


def _exec(
    session: Session,
    pod: Ref,
    command: list[str],
    stdin: bytes | Iterable[bytes] = b"",
    stdout: Callable[[ExecOutput], object] | None = None,
) -> ExecResult:
    """One command in the helper pod (retried whole on transient trouble); ``stdin`` and
    ``stdout`` as the port takes them."""
    return call(
        session,
        f"exec in {pod}",
        lambda: session.cluster.exec(
            pod.namespace or "default", pod.name, "sync", command, stdin, stdout=stdout
        ),
    )


def _succeeded(command: list[str], result: ExecResult, doing: str = "") -> None:
    if result.exit_code != 0:
        err = result.stderr.decode("utf-8", "replace").strip()[-500:]
        raise ClusterError(
            f"{doing}{' '.join(command[:2])} failed (exit {result.exit_code}): {err}"
        )


def _packed(
    chunks: Generator[bytes, None, Packed], local: str, into: list[Packed]
) -> Iterator[bytes]:
    """The chunks of ``local``'s tar stream; what it held goes to ``into`` at its end."""
    try:
        into.append((yield from chunks))
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot pack {local}: {exc}") from None


def _ended_well(output: ExecOutput, command: list[str]) -> Iterator[bytes]:
    """The command's output, failing at its end if the command failed: the unpacking reads to
    the end before it keeps anything, so a failed command leaves nothing behind."""
    _succeeded(command, (yield from output))


def sync_up(
    session: Session,
    files: LocalFiles,
    *,
    namespace: str,
    pvc: str,
    path: str,
    local: str,
    image: str = SYNC_IMAGE,
    timeout: float = 300.0,
) -> Synced:
    """Copy the local directory into ``path`` of the claim: a tar stream over exec, read from
    disk as it is sent (and read again if the stream has to start over)."""
    target_dir = claim_dir(path)
    command = ["tar", "-xf", "-", "-C", target_dir]
    try:
        first = files.pack(local)  # checks the directory before any pod is made
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot pack {local}: {exc}") from None
    streams = iter([first])
    doing = f"uploading {local} to {pvc}:{path}: "

    def attempt(pod: Ref) -> Synced:
        held: list[Packed] = []
        stream = next(streams, None) or files.pack(local)  # a fresh read on each attempt
        result = session.cluster.exec(
            pod.namespace or "default", pod.name, "sync", command, _packed(stream, local, held)
        )
        _succeeded(command, result, doing)
        if not held:
            raise ClusterError(f"{doing}the helper pod stopped reading before the end")
        return Synced(held[0].files, held[0].size)

    def upload(pod: Ref) -> Synced:
        mkdir = ["mkdir", "-p", target_dir]
        _succeeded(mkdir, _exec(session, pod, mkdir), doing)
        return call(session, f"exec in {pod}", partial(attempt, pod))

    return _with_helper(session, namespace, pvc, image, timeout, upload)


def sync_down(
    session: Session,
    files: LocalFiles,
    *,
    namespace: str,
    pvc: str,
    path: str,
    local: str,
    image: str = SYNC_IMAGE,
    timeout: float = 300.0,
) -> Synced:
    """Copy ``path`` of the claim into the local directory: the tar stream goes to disk as it
    arrives, and only a whole, safe stream from a command that succeeded is kept."""
    source = claim_dir(path)
    command = ["tar", "-cf", "-", "-C", source, "."]

    def download(pod: Ref) -> Synced:
        got: list[Packed] = []

        def unpack(output: ExecOutput) -> None:
            try:
                got.append(files.unpack(_ended_well(output, command), local))
            except (OSError, ValueError) as exc:
                raise ClusterError(f"cannot unpack into {local}: {exc}") from None

        _succeeded(command, _exec(session, pod, command, stdout=unpack))
        return Synced(got[0].files, got[0].size)

    return _with_helper(session, namespace, pvc, image, timeout, download)

"""Finding, cancelling, suspending and listing jobs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.kinds import KINDS
from kfcompile.lifecycle import deleting
from kfcompile.lifecycle.deleting import Remaining, StillDeleting
from kfcompile.lifecycle.kueue import multikueue_managed, workloads_of
from kfcompile.lifecycle.multikueue import Dispatch, Mirror, Workers, dispatches, find_mirror
from kfcompile.lifecycle.objects import annotation, get, job_kind, list_all, meta, served
from kfcompile.lifecycle.observe import pods_of_jobs
from kfcompile.lifecycle.ports import Conflict, NotFound, Obj, Ref
from kfcompile.lifecycle.session import (
    MANAGED_BY_LABEL,
    MANAGER,
    TARGET_ANNOTATION,
    JobNotFound,
    Session,
    call,
    named,
)
from kfcompile.progress import Progress, read_progress
from kfcompile.status import JobState


def find(session: Session, namespace: str, name: str, kind: str | None = None) -> Obj:
    """The job called ``name`` as it is now: a TrainJob, else a PyTorchJob (or only ``kind``)."""
    for k in [kind] if kind else list(KINDS):
        job = get(session, Ref(KINDS[k].api_version, k, namespace, name))
        if job is not None:
            return job
    kinds = kind or " or ".join(KINDS)
    raise JobNotFound(f"no {kinds} named {name} in namespace {namespace}")


def locate(session: Session, namespace: str, name: str, kind: str | None = None) -> Ref:
    """The job called ``name``: a TrainJob, else a PyTorchJob (or only ``kind``)."""
    return Ref.of(find(session, namespace, name, kind))


@frozen
class Cancelled:
    """What ``cancel`` did: the job it deleted, and whether there was one (cancelling a job
    that is not there succeeds); with ``wait_gone``, for a job MultiKueue dispatched from this
    manager, what was made sure of on the worker that ran it (``mirror``)."""

    ref: Ref
    existed: bool  # False: there was no such job to delete
    mirror: MirrorGone | None = None  # None: not MultiKueue's, or not waited for

    @property
    def all_gone(self) -> bool:
        """Whether all the job made was seen gone, on the worker too (after ``wait_gone``)."""
        return self.mirror is None or self.mirror.checked


@frozen(repr=False, eq=False)
class MirrorGone:
    """What ``cancel`` with ``wait_gone`` made sure of on the worker cluster a MultiKueue job
    was dispatched to: the worker (None: the job was never dispatched to one) and, when its
    mirror there was not waited on, why (``problem``; "": the mirror and its pods are gone)."""

    cluster: str | None
    problem: str = ""

    @property
    def checked(self) -> bool:
        return not self.problem


def cancel(
    session: Session,
    ref: Ref,
    *,
    wait_gone: bool = False,
    timeout: float | None = None,
    on_change: Callable[[Remaining, float], None] | None = None,
    job: Obj | None = None,
    workers: Workers | None = None,
    reach: Callable[[str, str], Session] | None = None,
) -> Cancelled:
    """Delete the job (Background propagation: the job goes at once, the garbage collector
    deletes its JobSet, Jobs and pods after); with ``wait_gone``, return when the job and each
    of those are gone, or raise ``StillDeleting`` (a ``TimedOut``) naming what is still there
    and what holds it. ``on_change`` is told what the wait waits on. The wait is for the job
    deleted (its uid, read first unless ``job``, the job as just read, is given): a job of that
    name submitted meanwhile, and what it makes, is not waited on.

    On a MultiKueue manager, what the job made runs on the worker cluster it was dispatched
    to, in Kueue's mirror of it: with ``wait_gone`` the wait goes on there, within the same
    ``timeout``, until the mirror (verified as this job's: ``is_mirror``) and its JobSet, Jobs
    and pods are gone (``on_change`` is told with ``Remaining.cluster`` set). The worker is
    reached as ``running_on`` reaches it: only through the context ``workers`` maps it to,
    ``reach(cluster, context)`` giving its session (raising ``ClusterError`` when it cannot);
    nothing is deleted there (Kueue deletes the mirror). A mirror that could not be waited on
    (no mapping, an unreachable worker, a job there that is not the mirror) is said in
    ``Cancelled.mirror`` (``all_gone`` is then False), never an error: the job is deleted.

    Not Foreground: while a Foreground-deleted TrainJob that Kueue manages waits for its
    dependents, the Trainer (v2.3.0) re-creates its JobSet again and again, and the job never
    goes (KUBEFLOW.md, Kueue). A 404 answering a DELETE sent again after one whose answer never
    came is not "there was no job": the first may well have deleted it. The job read is the
    one deleted (its uid a precondition of the DELETE): one submitted under its name between
    the read and the delete, or while a DELETE is sent again, is left running."""
    start = session.clock.monotonic()
    seen = job if job is not None or not wait_gone else get(session, ref)
    uid = None if seen is None else str(meta(seen).get("uid") or "") or None
    # where it runs, read before the delete: the job's Workload on the manager goes with it
    far = find_mirror(session, seen, workers, reach) if wait_gone and seen is not None else None
    sent = 0

    def delete() -> None:
        nonlocal sent
        sent += 1
        session.cluster.delete(ref, "Background", uid=uid)

    try:
        call(session, named("delete", ref), delete)
        existed = True
    except NotFound:
        existed = sent > 1
    except Conflict:
        if uid is None:
            raise
        existed = True  # the name is another job's now: the one read is gone, and that one stays
    if not wait_gone:
        return Cancelled(ref, existed)
    deleting.wait_gone(session, ref, uid=uid, dependents=True, timeout=timeout, on_change=on_change)
    if far is None:
        return Cancelled(ref, existed)
    if far.session is None or far.cluster is None or far.uid is None:
        return Cancelled(ref, existed, MirrorGone(far.cluster, far.problem))
    waited = session.clock.monotonic() - start
    left = None if timeout is None else max(0.0, timeout - waited)
    _mirror_gone(far.session, far.cluster, far, left, waited, on_change)
    return Cancelled(ref, existed, MirrorGone(far.cluster))


def _mirror_gone(
    worker: Session,
    cluster: str,
    far: Mirror,
    timeout: float | None,
    waited: float,
    on_change: Callable[[Remaining, float], None] | None,
) -> None:
    """Wait until the mirror ``far`` found, and what it made, are gone from the ``worker``
    (``timeout``: what is left of the cancel's; ``waited``: the seconds it took so far)."""

    def told(left: Remaining, seconds: float) -> None:
        if on_change is not None:
            on_change(evolve(left, cluster=cluster), waited + seconds)

    try:
        deleting.wait_gone(
            worker, far.ref, uid=far.uid, dependents=True, timeout=timeout, on_change=told
        )
    except StillDeleting as exc:
        left = evolve(exc.left, cluster=cluster) if exc.left is not None else None
        raise StillDeleting(
            f"{far.ref} is gone from this manager cluster, but its mirror on worker cluster "
            f"{cluster} is not, after {waited + (timeout or 0):.1f}s: still there: {left}",
            left,
        ) from None


def set_suspended(session: Session, ref: Ref, suspended: bool) -> None:
    """Suspend (pods deleted, job kept) or resume the job."""
    patch: dict[str, Any] = {}
    inner = patch
    *parents, leaf = job_kind(ref).suspend
    for part in parents:
        inner = inner.setdefault(part, {})
    inner[leaf] = suspended
    try:
        call(session, named("patch", ref), lambda: session.cluster.patch(ref, patch))
    except NotFound:
        raise JobNotFound(f"{ref} does not exist") from None


@frozen
class Listed:
    """One job of ``list_jobs``: its state, target, creation time, reported progress and, on a
    MultiKueue manager, where it was dispatched."""

    ref: Ref
    state: JobState
    target: str
    created: str
    progress: Progress | None = None
    # Where MultiKueue runs it (None: MultiKueue does not manage it; this is not a manager).
    dispatch: Dispatch | None = None


def list_jobs(session: Session, namespace: str | None) -> list[Listed]:
    """Jobs kfcompile created (by label), of every kind the cluster serves, with their states
    as ``status`` says them and, for those Kueue holds, why (their Workloads); for jobs
    MultiKueue manages, the worker cluster each was dispatched to (one list of Workloads for
    them all).

    A state comes from the job's status, and from its pods only where they alone can tell
    (``status.decided_by_pods``: a Trainer v2.0 TrainJob, which has no ``jobsStatus``): those
    jobs' pods are read in one list per namespace and kind (``observe.pods_of_jobs``), so a
    cluster whose controller counts the pods in the job's status costs no pod request. A job
    MultiKueue dispatched has its pods on the worker: its state is its object's alone."""
    jobs: list[Obj] = []
    for kind in KINDS.values():
        if not served(session, kind.api_version, kind.name):
            continue
        try:
            jobs += list_all(
                session,
                kind.api_version,
                kind.name,
                namespace,
                label_selector=f"{MANAGED_BY_LABEL}={MANAGER}",
            )
        except NotFound:  # served no more: its CRD removed since discovery said it was
            continue
    held = workloads_of(session, jobs, namespace)  # one list: why Kueue holds each, and where
    where = dispatches(session, jobs, namespace, held)
    pods = pods_of_jobs(
        session,
        [j for j in jobs if job_status.decided_by_pods(j) and not multikueue_managed(j)],
    )
    found = [
        Listed(
            Ref.of(job),
            job_status.job_state(
                job,
                pods.get((str(meta(job).get("namespace")), str(meta(job).get("name")))),
                workload=held.by_uid.get(str(meta(job).get("uid", ""))),
            ),
            annotation(job, TARGET_ANNOTATION) or "",
            str(meta(job).get("creationTimestamp", "")),
            read_progress(job),
            where.get(str(meta(job).get("uid", ""))),
        )
        for job in jobs
    ]
    return sorted(found, key=lambda j: (j.ref.namespace or "", j.ref.name, j.ref.kind))

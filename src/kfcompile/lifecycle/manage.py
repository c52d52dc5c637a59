"""Finding, cancelling, suspending and listing jobs."""

from __future__ import annotations

from functools import partial
from typing import Any

from attrs import frozen

from kfcompile import status as job_status
from kfcompile.kinds import KINDS
from kfcompile.lifecycle.session import (
    MANAGED_BY_LABEL,
    MANAGER,
    TARGET_ANNOTATION,
    JobNotFound,
    Session,
    TimedOut,
    annotation,
    call,
    get,
    job_kind,
    list_all,
    meta,
    poll,
)
from kfcompile.ports import NotFound, Obj, Ref
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
    selector = job_kind(ref).pods.format(name=ref.name)

    def gone() -> bool:
        if get(session, ref) is not None:
            return False
        pods = call(
            session,
            f"list pods of {ref}",
            lambda: session.cluster.list(
                "v1", "Pod", ref.namespace, label_selector=selector, limit=1
            ),
        )
        return not pods.items

    if poll(session, gone, timeout):
        return Cancelled(ref, existed)
    left = [str(ref)] if get(session, ref) is not None else []
    pods = list_all(session, "v1", "Pod", ref.namespace, label_selector=selector)
    left += [f"pod {meta(p).get('name')}" for p in pods]
    raise TimedOut(f"{ref} not gone after {timeout:g}s; still there: {', '.join(left)}")


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
        for job in list_all(
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
                    annotation(job, TARGET_ANNOTATION) or "",
                    str(meta(job).get("creationTimestamp", "")),
                )
            )
    return sorted(found, key=lambda j: (j.ref.namespace or "", j.ref.name, j.ref.kind))

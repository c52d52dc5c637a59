"""Waiting for a deleted job to be gone (``wait_gone``): a look at the job (and what its
controllers made of it), a pause, and a look again.

A deletion can take long: a finalizer keeps the job until whoever added it lets go (the
``foregroundDeletion`` one until the garbage collector has deleted its dependents: on a real
cluster it notices a newly installed kind only after up to 30 s, and without one it never
does), the collector deletes a job's JobSet, Jobs and pods only after the job, and a pod on a
node whose kubelet does not answer stays Terminating. So ``wait_gone`` looks, pauses with the
session's one backoff, and looks again, for ``timeout`` seconds at most; what is still there at
each look (``Remaining``) is what it waits on, said when it changes and named when the time is
up.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from functools import partial
from typing import Final

from attrs import frozen

from kfcompile import status as job_status
from kfcompile.kinds import PYTORCHJOB, TRAINJOB
from kfcompile.lifecycle.objects import get, meta
from kfcompile.lifecycle.observe import TimedOut
from kfcompile.lifecycle.ports import Obj, Ref
from kfcompile.lifecycle.session import (
    Pause,
    Session,
    call,
    named,
    pause,
)
from kfcompile.status import JobState

NAMED: Final = 5  # objects of a kind a look reads (one page), and a message names

# What each kind's controllers make of a job, in the order they go once it is deleted: (API
# version, kind, label selector of job {name}; None: the one object named like the job). A
# TrainJob's JobSet has no label of its own (observed/trainer-v2.3.0); its Jobs and pods carry
# JobSet's; a PyTorchJob's pods the Training Operator's (KUBEFLOW.md).
DEPENDENTS: Final[dict[str, tuple[tuple[str, str, str | None], ...]]] = {
    TRAINJOB.name: (
        ("jobset.x-k8s.io/v1alpha2", "JobSet", None),
        ("batch/v1", "Job", TRAINJOB.pods),
        ("v1", "Pod", TRAINJOB.pods),
    ),
    PYTORCHJOB.name: (("v1", "Pod", PYTORCHJOB.pods),),
}


@frozen(repr=False)
class Remaining:
    """What a deletion still waits on: the job (its state says what holds it; None: gone) and
    the first few of what its controllers made (``JobSet demo``, ``pod demo-node-0-0-x
    (Terminating ...)``, ``more pods``); ``cluster``: the MultiKueue worker cluster it is on
    (a job's mirror there: ``manage.cancel``), None for the session's own."""

    ref: Ref
    job: JobState | None
    dependents: tuple[str, ...] = ()
    cluster: str | None = None

    def __str__(self) -> str:
        parts = [f"{self.ref.kind} {self.ref.name} ({self.job.reason})"] if self.job else []
        return ", ".join([*parts, *self.dependents])


class StillDeleting(TimedOut):
    """The job (or its pods) was still there when the time was up."""

    def __init__(self, message: str, left: Remaining | None) -> None:
        super().__init__(message)
        self.left = left


# The label by which JobSet marks each Job and pod it makes with its own uid (observed; also
# ``observe.OWNER_LABELS``): what tells them from those of another JobSet of the same name.
JOBSET_UID: Final = "jobset.sigs.k8s.io/jobset-uid"
_UID_LABELS: Final = (JOBSET_UID, "batch.kubernetes.io/controller-uid")
_LABEL_VALUE: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _uids_of_owners(obj: Obj) -> set[str]:
    """The uids ``obj`` names as its owners': its owner references' and its controllers' uid
    labels (JobSet's, the Job controller's)."""
    about = meta(obj)
    refs = about.get("ownerReferences")
    found = {
        str(r.get("uid"))
        for r in (refs if isinstance(refs, list) else [])
        if isinstance(r, dict) and r.get("uid")
    }
    labels = about.get("labels")
    labels = labels if isinstance(labels, dict) else {}
    return found | {str(labels[k]) for k in _UID_LABELS if labels.get(k)}


def remaining(session: Session, ref: Ref, uid: str | None, dependents: bool) -> Remaining | None:
    """What is left of the job (None: nothing): read by name (one of that name with another uid
    is a new one: the deleted job is gone) and, with ``dependents``, what its controllers made
    (``DEPENDENTS``: one page of each kind, the first few named). Given ``uid``, what another
    job of that name made (a job submitted again meanwhile: its JobSet owned by another uid,
    and the Jobs and pods that name that JobSet or those Jobs as theirs) is not waited on."""
    job = get(session, ref)
    theirs: set[str] = set()  # uids of another job of this name and of what it made
    if job is not None and uid is not None and meta(job).get("uid") != uid:
        theirs.add(str(meta(job).get("uid")))
        job = None
    found: list[Obj] = []
    more: list[str] = []
    unlike = ""  # label selector terms leaving out the Jobs and pods of another's JobSet
    for api_version, kind, selector in DEPENDENTS[ref.kind] if dependents else ():
        if selector is None:
            one = get(session, Ref(api_version, kind, ref.namespace, ref.name))
            owners = set() if one is None else _uids_of_owners(one)
            if one is not None and uid is not None and owners and uid not in owners:
                other = str(meta(one).get("uid"))
                theirs.add(other)
                if _LABEL_VALUE.fullmatch(other):  # (else left out of the page, below)
                    unlike += f",{JOBSET_UID}!={other}"
            elif one is not None:
                found.append(one)
            continue
        read = partial(
            session.cluster.list,
            api_version,
            kind,
            ref.namespace,
            label_selector=selector.format(name=ref.name) + unlike,
            limit=NAMED,
        )
        page = call(session, named(f"list {kind}s of", ref), read)
        for obj in page.items:
            if _uids_of_owners(obj) & theirs:  # and what it makes in turn is theirs too
                theirs.add(str(meta(obj).get("uid")))
            else:
                found.append(obj)
        more += [kind] if page.continue_token else []
    if job is None and not found:
        return None
    said = []
    for obj in found:
        note = job_status.terminating(obj)
        kind = "pod" if obj.get("kind") == "Pod" else obj.get("kind", "?")
        said.append(f"{kind} {meta(obj).get('name', '?')}" + (f" ({note})" if note else ""))
    said += [f"more {'pod' if kind == 'Pod' else kind}s" for kind in more]
    state = job_status.job_state(job) if job is not None else None
    return Remaining(ref, state, tuple(said))


def wait_gone(
    session: Session,
    ref: Ref,
    *,
    uid: str | None = None,
    dependents: bool = False,
    timeout: float | None = None,
    on_change: Callable[[Remaining, float], None] | None = None,
) -> None:
    """Return once the job (``uid``'s, if given; with ``dependents``, and its JobSet, Jobs and
    pods: ``DEPENDENTS``, not those of another job of that name: ``remaining``) is gone, or
    raise ``StillDeleting`` naming what is left after ``timeout`` seconds from the first look.
    Between looks it pauses with the session's one backoff. ``on_change(left, seconds
    waited)`` is told what it waits on from the second look on (a deletion done by then says
    nothing), whenever that changes."""
    clock = session.clock
    start = since = clock.monotonic()
    told: Remaining | None = None
    for pauses in itertools.count():
        left = remaining(session, ref, uid, dependents)
        now = clock.monotonic()
        if left is None:
            return
        if pauses == 0:
            since = now
        elif (
            left != told
        ):  # what the first look finds is often gone by the next (the collector's lag)
            if on_change is not None:
                on_change(left, now - start)
            told = left
        waited = now - since
        if timeout is not None and waited >= timeout:
            raise StillDeleting(f"{ref} not gone after {waited:.1f}s: still there: {left}", left)
        pause(session, Pause(pauses, at_most=math.inf if timeout is None else timeout - waited))


def make_way(
    session: Session,
    job: Obj,
    timeout: float,
    on_change: Callable[[Remaining, float], None] | None = None,
) -> None:
    """Wait for ``job``, being deleted, to be gone so that a new one can take its name; still
    there after ``timeout`` seconds, ``StillDeleting`` says so and what holds it."""
    ref = Ref.of(job)
    try:
        wait_gone(session, ref, uid=meta(job).get("uid"), timeout=timeout, on_change=on_change)
    except StillDeleting as exc:
        held = f" ({exc.left.job.reason})" if exc.left and exc.left.job else ""
        namespace = f" -n {ref.namespace}" if ref.namespace else ""
        raise StillDeleting(
            f"{ref} is still being deleted after {timeout:g}s{held}: nothing was created; "
            f"submit again once it is gone (kfcompile status {ref.name}{namespace} shows what "
            "holds it)",
            exc.left,
        ) from None

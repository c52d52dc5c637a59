"""Waiting for a deleted job to be gone: the ``Vanishing`` machine, fed what a look at the job
(and what its controllers made of it) found, and ``wait_gone``, its driver.

A deletion can take long: a finalizer keeps the job until whoever added it lets go (the
``foregroundDeletion`` one until the garbage collector has deleted its dependents: on a real
cluster it notices a newly installed kind only after up to 30 s, and without one it never
does), the collector deletes a job's JobSet, Jobs and pods only after the job, and a pod on a
node whose kubelet does not answer stays Terminating. So the machine looks, pauses with the
session's one backoff, and looks again, for ``timeout`` seconds at most; what is still there at
each look (``Remaining``) is what it waits on, said when it changes and named when the time is
up.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from functools import partial
from typing import Final

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.kinds import PYTORCHJOB, TRAINJOB
from kfcompile.lifecycle.objects import get, meta
from kfcompile.lifecycle.ports import Obj, Ref
from kfcompile.lifecycle.session import (
    Pause,
    Perform,
    Session,
    Slept,
    Table,
    TimedOut,
    call,
    drive,
    ended,
    named,
    pause,
    row,
    told,
    transition,
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
    (Terminating ...)``, ``more pods``)."""

    ref: Ref
    job: JobState | None
    dependents: tuple[str, ...] = ()

    def __str__(self) -> str:
        parts = [f"{self.ref.kind} {self.ref.name} ({self.job.reason})"] if self.job else []
        return ", ".join([*parts, *self.dependents])


class StillDeleting(TimedOut):
    """The job (or its pods) was still there when the time was up."""

    def __init__(self, message: str, left: Remaining | None) -> None:
        super().__init__(message)
        self.left = left


# --- what the machine asks, and is answered -----------------------------------------------------


@frozen(repr=False)
class Look:
    """Read the job by name (and, when what it made must go too, a first page of each kind)."""


@frozen(repr=False, eq=False)
class Looked:
    job: Obj | None  # None: no job of that name
    dependents: tuple[Obj, ...] = ()  # in DEPENDENTS' order
    more: tuple[str, ...] = ()  # kinds with more objects than read


@frozen(repr=False)
class Vanished:
    """Nothing is left."""


@frozen(repr=False, eq=False)
class TimeUp:
    waited: float
    left: Remaining | None


class GonePhase(enum.Enum):
    LOOK = "look"
    PAUSE = "pause"
    GONE = "gone"


LOOK, PAUSE, GONE = GonePhase.LOOK, GonePhase.PAUSE, GonePhase.GONE  # the table's words


def remaining(ref: Ref, uid: str | None, answer: Looked) -> Remaining | None:
    """What ``answer`` shows is left (None: nothing). A job of that name with another uid is
    a new one: the deleted job is gone."""
    job = answer.job
    if job is not None and uid is not None and meta(job).get("uid") != uid:
        job = None
    if job is None and not answer.dependents:
        return None
    named = []
    for obj in answer.dependents:
        note = job_status.terminating(obj)
        kind = "pod" if obj.get("kind") == "Pod" else obj.get("kind", "?")
        named.append(f"{kind} {meta(obj).get('name', '?')}" + (f" ({note})" if note else ""))
    named += [f"more {'pod' if kind == 'Pod' else kind}s" for kind in answer.more]
    state = job_status.job_state(job) if job is not None else None
    return Remaining(ref, state, tuple(named))


@frozen(repr=False, eq=False)
class Vanishing:
    """Waiting for the job ``ref`` (the one with ``uid``, if given) to be gone, and with
    ``dependents`` what its controllers made too, for ``timeout`` seconds at most (None: as
    long as it takes)."""

    ref: Ref
    uid: str | None = None
    dependents: bool = False
    timeout: float | None = None
    phase: GonePhase = GonePhase.LOOK
    since: float | None = None  # the first look
    pauses: int = 0
    left: Remaining | None = None  # what the last look found

    def next_request(self, now: float) -> Look | Pause | Vanished | TimeUp:
        if self.phase is GonePhase.GONE:
            return Vanished()
        if self.phase is GonePhase.LOOK:
            return Look()
        assert self.since is not None
        waited = now - self.since
        if self.timeout is not None and waited >= self.timeout:
            return TimeUp(waited, self.left)
        at_most = math.inf if self.timeout is None else self.timeout - waited
        return Pause(self.pauses, at_most=at_most)

    def receive(self, answer: Looked | Slept, now: float) -> Vanishing:
        return transition(VANISH_TABLE, self, self.phase, answer, now)

    def _looked(self, answer: Looked, now: float) -> Vanishing:
        since = now if self.since is None else self.since
        left = remaining(self.ref, self.uid, answer)
        phase = GonePhase.GONE if left is None else GonePhase.PAUSE
        return evolve(self, phase=phase, since=since, left=left)

    def _slept(self, answer: Slept, now: float) -> Vanishing:
        return evolve(self, phase=GonePhase.LOOK, pauses=self.pauses + 1)


VANISH_TABLE: Final[Table[Vanishing]] = {
    (LOOK, Looked): row(Vanishing._looked, GONE, PAUSE),  # PAUSE: what is left
    (PAUSE, Slept): row(Vanishing._slept, LOOK),  # again (or out of time)
}


# --- the driver ---------------------------------------------------------------------------------


def look(session: Session, ref: Ref, dependents: bool) -> Looked:
    job = get(session, ref)
    if not dependents:
        return Looked(job)
    found: list[Obj] = []
    more: list[str] = []
    for api_version, kind, selector in DEPENDENTS[ref.kind]:
        if selector is None:
            one = get(session, Ref(api_version, kind, ref.namespace, ref.name))
            found += [one] if one is not None else []
            continue
        labels = selector.format(name=ref.name)
        read = partial(
            session.cluster.list,
            api_version,
            kind,
            ref.namespace,
            label_selector=labels,
            limit=NAMED,
        )
        page = call(session, named(f"list {kind}s of", ref), read)
        found += page.items
        more += [kind] if page.continue_token else []
    return Looked(job, tuple(found), tuple(more))


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
    pods: ``DEPENDENTS``) is gone, or raise ``StillDeleting`` naming what is left after
    ``timeout`` seconds. ``on_change(left, seconds waited)`` is told what it waits on from the
    second look on (a deletion done by then says nothing), whenever that changes."""
    clock = session.clock
    start = clock.monotonic()
    seen: Remaining | None = None

    def each(after: Vanishing, answer: Looked | Slept) -> None:
        nonlocal seen
        if after.pauses == 0 or not isinstance(answer, Looked):
            return  # what the first look finds is often gone by the next (the collector's lag)
        if on_change is not None and after.left is not None and after.left != seen:
            on_change(after.left, clock.monotonic() - start)
        seen = after.left

    perform: Perform = {
        Look: lambda _: look(session, ref, dependents),
        Pause: partial(pause, session),
    }
    machine = Vanishing(ref, uid, dependents, timeout)
    _, end = ended(told(drive(machine, clock, perform), each))
    if isinstance(end, TimeUp):
        what = f": still there: {end.left}" if end.left else ""
        raise StillDeleting(f"{ref} not gone after {end.waited:.1f}s{what}", end.left)
    assert isinstance(end, Vanished), end


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

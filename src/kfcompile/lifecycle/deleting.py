"""Waiting for a deleted job to be gone: the ``Vanishing`` machine, fed what a look at the job
(and its pods) found, and ``wait_gone``, its driver.

A deletion can take long: the ``foregroundDeletion`` finalizer keeps the job until the garbage
collector has deleted its dependents (on a real cluster it notices a newly installed kind only
after up to 30 s, and without one it never does), and a pod on a node whose kubelet does not
answer stays Terminating. So the machine looks, pauses with the session's one backoff, and
looks again, for ``timeout`` seconds at most; what is still there at each look (``Remaining``)
is what it waits on, said when it changes and named when the time is up.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from functools import partial
from typing import Final

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.lifecycle.objects import get, job_kind, meta
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

PODS_NAMED: Final = 5  # pods a look reads (one page), and a message names


@frozen(repr=False)
class Remaining:
    """What a deletion still waits on: the job (its state says what holds it; None: gone) and
    the first few of its pods (each with what its own deletion waits for)."""

    ref: Ref
    job: JobState | None
    pods: tuple[str, ...] = ()
    more_pods: bool = False  # more pods than named

    def __str__(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"{self.ref.kind} {self.ref.name} ({self.job.reason})")
        parts += [f"pod {pod}" for pod in self.pods]
        if self.more_pods:
            parts.append("more pods")
        return ", ".join(parts)


class StillDeleting(TimedOut):
    """The job (or its pods) was still there when the time was up."""

    def __init__(self, message: str, left: Remaining | None) -> None:
        super().__init__(message)
        self.left = left


# --- what the machine asks, and is answered -----------------------------------------------------


@frozen(repr=False)
class Look:
    """Read the job by name (and, when its pods must go too, a first page of them)."""


@frozen(repr=False, eq=False)
class Looked:
    job: Obj | None  # None: no job of that name
    pods: tuple[Obj, ...] = ()
    more_pods: bool = False


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
    if job is None and not answer.pods:
        return None
    pods = tuple(
        f"{meta(p).get('name', '?')}"
        + (f" ({note})" if (note := job_status.terminating(p)) else "")
        for p in answer.pods
    )
    state = job_status.job_state(job) if job is not None else None
    return Remaining(ref, state, pods, answer.more_pods)


@frozen(repr=False, eq=False)
class Vanishing:
    """Waiting for the job ``ref`` (the one with ``uid``, if given) to be gone, and with
    ``pods`` its pods too, for ``timeout`` seconds at most (None: as long as it takes)."""

    ref: Ref
    uid: str | None = None
    pods: bool = False
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


def look(session: Session, ref: Ref, pods: bool) -> Looked:
    job = get(session, ref)
    if not pods:
        return Looked(job)
    selector = job_kind(ref).pods.format(name=ref.name)
    page = call(
        session,
        named("list pods of", ref),
        lambda: session.cluster.list(
            "v1", "Pod", ref.namespace, label_selector=selector, limit=PODS_NAMED
        ),
    )
    return Looked(job, tuple(page.items), bool(page.continue_token))


def wait_gone(
    session: Session,
    ref: Ref,
    *,
    uid: str | None = None,
    pods: bool = False,
    timeout: float | None = None,
    on_change: Callable[[Remaining, float], None] | None = None,
) -> None:
    """Return once the job (``uid``'s, if given; with ``pods``, and its pods) is gone, or
    raise ``StillDeleting`` naming what is left after ``timeout`` seconds. ``on_change(left,
    seconds waited)`` is told what it waits on whenever that changes."""
    clock = session.clock
    start = clock.monotonic()
    seen: Remaining | None = None

    def each(after: Vanishing, answer: Looked | Slept) -> None:
        nonlocal seen
        if on_change is not None and after.left is not None and after.left != seen:
            on_change(after.left, clock.monotonic() - start)
        seen = after.left

    perform: Perform = {Look: lambda _: look(session, ref, pods), Pause: partial(pause, session)}
    _, end = ended(told(drive(Vanishing(ref, uid, pods, timeout), clock, perform), each))
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

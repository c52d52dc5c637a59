"""The ``Watcher``: every job of one kind watched at once, as a machine fed what the API
answered, saying what to ask next (``watch.watch_jobs`` is the driver that asks the ports).

What a service needs is each managed job's state without a request per job: one list (in pages
of ``LIST_PAGE``), then one watch from the list's resourceVersion, resumed from the last version
seen (events and bookmarks move it) each time the server closes it. A job's state is decided
by the job object alone (``status.job_state`` without pods: a pod list per job would make the
requests grow with the jobs), and an event (``JobEvent``) is made only when a job appears,
disappears, its normalized state (state and reason) changes, or the progress its training
process reports does (``PROGRESSED``); a message alone is no event.

Row by row of ``WATCH_TABLE``, it goes as ``waiter`` does: ``410 Gone`` on the watch lists
again (after a pause when it keeps expiring: ``waiter.Relists``), and that relist reports only
what really changed meanwhile (a job gone from it was
deleted; one under the same name with another uid was deleted and created again); a continue
token that expired starts the list over (``LIST_RESTARTS`` times, then it is trouble).
Transient trouble, on a list page or on the watch, pauses with the session's backoff and asks
again, for ``Session.retry_for`` seconds at most (then ``GiveUp``). Only when the API refuses
to watch (403, 404) does it poll: list, pause, list again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
from attrs import evolve, frozen

from kfcompile.kinds import Kind
from kfcompile.lifecycle.objects import meta
from kfcompile.lifecycle.ports import ApiError, Obj, Ref, Transient
from kfcompile.lifecycle.session import (
    LIST_RESTARTS,
    Failed,
    GiveUp,
    Pause,
    Retry,
    Slept,
    Step,
    Table,
    row,
    transition,
)
from kfcompile.lifecycle.waiter import (
    SHORT_WATCH,
    Bookmark,
    Changed,
    Expired,
    ReadEvent,
    Refused,
    Relists,
    StreamEnded,
    Trouble,
)
from kfcompile.progress import Progress, read_progress
from kfcompile.status import JobState, State, job_state

# Seconds a watch of every job lasts before it is opened again from the last version seen: as
# long as client-go's reflectors (5 to 10 minutes), since nothing needs a second look between.
JOBS_SEGMENT: Final = 300


class Happened(enum.Enum):
    """What a ``JobEvent`` reports (``JobEvent.what``)."""

    LISTED = "listed"
    """There when the watch began (a job that ended before comes so, already finished)."""
    CREATED = "created"
    """Appeared since the watch began."""
    SUSPENDED = "suspended"
    """Became SUSPENDED: queued by Kueue, preempted, or suspended."""
    ADMITTED = "admitted"
    """Was SUSPENDED and is no longer: admitted by Kueue, or resumed."""
    RUNNING = "running"
    """Became RUNNING."""
    FINISHED = "finished"
    """Became SUCCEEDED or FAILED (``event.state.finished``)."""
    DELETING = "deleting"
    """Became DELETING: being deleted before it finished, still there, held by a finalizer
    until its dependents are gone (a finished job being deleted keeps its state: no event)."""
    CHANGED = "changed"
    """Another change of state or reason (e.g. PENDING, now ``Unschedulable``)."""
    PROGRESSED = "progressed"
    """Same state; the training process reported new progress (``event.progress``)."""
    DISPATCHED = "dispatched"
    """MultiKueue dispatched it to the worker cluster ``event.cluster``."""
    DELETED = "deleted"
    """Gone (or no longer matches the selector); ``event.state`` is its last."""


@frozen
class JobEvent:
    """A managed job appeared, disappeared or changed state. ``state`` is the job's state as
    last seen (a deleted job's last); ``previous`` is the state reported before (``None`` when
    the job appears)."""

    kind: Kind
    ref: Ref
    what: Happened
    state: JobState
    previous: JobState | None = None
    progress: Progress | None = None  # what the training process last reported (TrainJob)
    cluster: str | None = None  # DISPATCHED: the worker cluster that runs it


def _finished(new: JobState, old: JobState) -> bool:
    return new.finished and not old.finished


def _entered(state: State) -> Callable[[JobState, JobState], bool]:
    return lambda new, old: new.state is state and old.state is not state


def _left_suspension(new: JobState, old: JobState) -> bool:
    return old.state is State.SUSPENDED


# What a change of state is called: the first row whose test holds for (new, old), else
# CHANGED. A job admitted and already running when next seen is RUNNING (the stronger news).
HAPPENINGS: Final[tuple[tuple[Happened, Callable[[JobState, JobState], bool]], ...]] = (
    (Happened.FINISHED, _finished),
    (Happened.DELETING, _entered(State.DELETING)),
    (Happened.RUNNING, _entered(State.RUNNING)),
    (Happened.SUSPENDED, _entered(State.SUSPENDED)),
    (Happened.ADMITTED, _left_suspension),
)


def happened(new: JobState, old: JobState) -> Happened:
    return next((what for what, test in HAPPENINGS if test(new, old)), Happened.CHANGED)


@frozen(repr=False, eq=False)
class Seen:
    """A job as last reported: its uid (a job deleted and created again has another) and state."""

    uid: str
    state: JobState
    progress: Progress | None = None

    @property
    def normalized(self) -> tuple[State, str]:
        return self.state.state, self.state.reason

    @property
    def progress_shown(self) -> object:
        return None if self.progress is None else self.progress.shown


def seen(kind: Kind, obj: Mapping[str, Any]) -> tuple[Ref, Seen] | None:
    """The job's ref and what it says, from the object alone; ``None`` for an object without a
    name (the stream is hostile input: it is skipped, never trusted)."""
    m = meta(obj)
    name, namespace, uid = m.get("name"), m.get("namespace"), m.get("uid")
    if not isinstance(name, str) or not name:
        return None
    ref = Ref(kind.api_version, kind.name, namespace if isinstance(namespace, str) else None, name)
    cr = obj if obj.get("kind") == kind.name else {**obj, "kind": kind.name}
    return ref, Seen(uid if isinstance(uid, str) else "", job_state(cr), read_progress(cr))


def deleted(kind: Kind, ref: Ref, last: JobState, before: JobState) -> JobEvent:
    return JobEvent(kind, ref, Happened.DELETED, last, before)


def compare(
    kind: Kind, ref: Ref, before: Seen | None, now: Seen, appeared: Happened
) -> tuple[JobEvent, ...]:
    """The events that take a job from ``before`` to ``now`` (none when nothing that counts
    changed); a job new to us ``appeared`` (LISTED or CREATED)."""
    if before is None:
        return (JobEvent(kind, ref, appeared, now.state, progress=now.progress),)
    if before.uid and now.uid and before.uid != now.uid:
        gone = deleted(kind, ref, before.state, before.state)
        return gone, JobEvent(kind, ref, Happened.CREATED, now.state, progress=now.progress)
    if before.normalized != now.normalized:
        what = happened(now.state, before.state)
    elif before.progress_shown != now.progress_shown and now.progress is not None:
        what = Happened.PROGRESSED
    else:
        return ()
    return (JobEvent(kind, ref, what, now.state, before.state, now.progress),)


# --- what the watcher asks ----------------------------------------------------------------------


@frozen(repr=False)
class ListJobs:
    """One page of the jobs (by the selector), after ``continue_token`` when given."""

    continue_token: str | None = None


@frozen(repr=False)
class WatchJobs:
    """Watch the jobs from ``from_version`` for ``timeout`` seconds; answer its first event."""

    from_version: str
    timeout: int


WatchRequest = ListJobs | WatchJobs | ReadEvent | Pause | GiveUp

# --- what the API answered (and the answers shared with the waiter) -----------------------------


@frozen(repr=False, eq=False)
class PageListed:
    items: list[Obj]
    version: str
    continue_token: str | None = None


@frozen(repr=False, eq=False)
class Removed:
    """The watch delivered a DELETED event (the job was deleted or left the selection)."""

    job: Obj


WatchAnswer = (
    PageListed | Changed | Removed | Bookmark | StreamEnded | Expired | Refused | Trouble | Slept
)


class WatchPhase(enum.Enum):
    LIST = "list"  # a page of the list, the first or the next
    WATCH = "watch"  # open a watch, or read the next event of the open one
    SLEEP = "sleep"  # pause: after trouble, or between polls


LIST, WATCH, SLEEP = WatchPhase.LIST, WatchPhase.WATCH, WatchPhase.SLEEP  # the table's words


@frozen(repr=False, eq=False)
class Watcher:
    """The state of one kind's watch. ``events`` are what the last answer made worth telling.

    ``known`` and ``listing`` are this watch's own maps, changed in place by the answers, so
    that an event costs the same with 10 jobs as with 10,000 (a copy per event grew with the
    jobs): a Watcher is fed once, and the one ``receive`` returns replaces it."""

    kind: Kind
    retry: Retry
    phase: WatchPhase = WatchPhase.LIST
    entered: float = 0.0  # when this phase began, or this watch was asked for
    resume: WatchPhase = WatchPhase.LIST  # where a pause goes back to
    version: str = ""  # the last resourceVersion seen, to watch from
    streaming: bool = False  # a watch is open and has delivered an event
    polling: bool = False  # the API refused to watch
    polls: int = 0  # polls in a row without news
    listed: bool = False  # the first list is done: a job that appears now was created
    token: str | None = None  # the continue token of the list under way
    listing: dict[Ref, Seen] = attrs.field(factory=dict)  # its pages so far
    list_version: str = ""  # its resourceVersion (its first page's)
    restarts: int = 0  # times it started over after its continue token expired
    known: dict[Ref, Seen] = attrs.field(factory=dict)  # every job, as last reported
    relists: Relists = attrs.field(factory=Relists)  # 410s in a row on the watch
    events: tuple[JobEvent, ...] = ()
    notice: ApiError | None = None  # set by the answer that made something worth saying

    @classmethod
    def start(cls, kind: Kind, now: float, retry_for: float) -> Watcher:
        return cls(kind, Retry(retry_for), entered=now)

    def next_request(self, now: float) -> WatchRequest:
        if self.phase is WatchPhase.LIST:
            return self.relists.pause() or ListJobs(self.token)
        if self.phase is WatchPhase.WATCH:
            return ReadEvent() if self.streaming else WatchJobs(self.version, JOBS_SEGMENT)
        if self.retry.step is Step.PAUSE:  # trouble: the retry machine says how long, or no more
            request = self.retry.next_request(now)
            assert isinstance(request, Pause | GiveUp), request
            return request
        return Pause(self.polls)  # between polls

    def receive(self, answer: WatchAnswer, now: float) -> Watcher:
        before = evolve(self, events=(), notice=None)
        after = transition(WATCH_TABLE, before, self.phase, answer, now)
        opens = after.phase is WatchPhase.WATCH and not after.streaming  # a new watch is asked for
        return evolve(after, entered=now) if after.phase is not self.phase or opens else after

    # --- the rows

    def _answered(self) -> Watcher:
        """The API answered: trouble, if there was any, is over."""
        return evolve(self, retry=Retry(self.retry.retry_for))

    def _page(self, answer: PageListed, now: float) -> Watcher:
        for item in answer.items:
            found = seen(self.kind, item)
            if found is not None:
                self.listing[found[0]] = found[1]
        version = self.list_version if self.token else answer.version
        page = evolve(self, list_version=version)._answered()
        if answer.continue_token:
            return evolve(page, token=answer.continue_token)
        return page._listed()

    def _listed(self) -> Watcher:
        """The last page: what changed since the jobs were last seen, and go on from here."""
        appeared = Happened.CREATED if self.listed else Happened.LISTED
        events: list[JobEvent] = []
        for ref, now in self.listing.items():
            events += compare(self.kind, ref, self.known.get(ref), now, appeared)
        for ref, before in self.known.items():
            if ref not in self.listing:  # deleted while we were not watching
                events.append(deleted(self.kind, ref, before.state, before.state))
        done = evolve(
            self,
            known=self.listing,
            listing={},
            token=None,
            restarts=0,
            listed=True,
            version=self.list_version or self.version,
            events=tuple(events),
        )
        if self.polling:
            polls = 0 if events else self.polls + 1
            return evolve(done, phase=WatchPhase.SLEEP, resume=WatchPhase.LIST, polls=polls)
        return evolve(done, phase=WatchPhase.WATCH, streaming=False)

    def _list_expired(self, answer: Expired, now: float) -> Watcher:
        if self.restarts >= LIST_RESTARTS:
            gone = Transient(410, "Expired", "the list's continue token kept expiring")
            return self._trouble(Trouble(gone), now)
        return evolve(self, token=None, listing={}, restarts=self.restarts + 1)

    def _changed(self, answer: Changed, now: float) -> Watcher:
        moved = self._moved(answer.job)
        found = seen(self.kind, answer.job)
        if found is None:
            return moved
        ref, now_seen = found
        events = compare(self.kind, ref, self.known.get(ref), now_seen, Happened.CREATED)
        if not events:
            return moved
        self.known[ref] = now_seen
        return evolve(moved, events=events)

    def _removed(self, answer: Removed, now: float) -> Watcher:
        moved = self._moved(answer.job)
        found = seen(self.kind, answer.job)
        before = None if found is None else self.known.get(found[0])
        if found is None or before is None:
            return moved
        ref, last = found
        del self.known[ref]
        return evolve(moved, events=(deleted(self.kind, ref, last.state, before.state),))

    def _moved(self, job: Obj) -> Watcher:
        """An event arrived: the stream is open, and the version moves to the event's."""
        version = meta(job).get("resourceVersion")
        version = version if isinstance(version, str) and version else self.version
        return evolve(self, version=version, streaming=True)._delivered()

    def _bookmark(self, answer: Bookmark, now: float) -> Watcher:
        return evolve(self, version=answer.version or self.version, streaming=True)._delivered()

    def _delivered(self) -> Watcher:
        """The watch delivered an event: it works."""
        return evolve(self, relists=self.relists.progress())._answered()

    def _ended(self, answer: StreamEnded, now: float) -> Watcher:
        if not self.streaming and now - self.entered < SHORT_WATCH:
            cut = Transient(0, "StreamEnded", "the watch ended as soon as it started")
            return self._trouble(Trouble(cut), now)
        return evolve(self, streaming=False)._delivered()

    def _expired(self, answer: Expired, now: float) -> Watcher:
        relists = self.relists.expired()
        expired = evolve(
            self,
            phase=WatchPhase.LIST,
            streaming=False,
            token=None,
            listing={},
            relists=relists,
            notice=relists.notice(self.relists),
        )
        return expired._answered()

    def _relist_slept(self, answer: Slept, now: float) -> Watcher:
        return evolve(self, relists=self.relists.slept())

    def _refused(self, answer: Refused, now: float) -> Watcher:
        polling = evolve(
            self, phase=WatchPhase.SLEEP, resume=WatchPhase.LIST, streaming=False, polling=True
        )
        return polling._answered()

    def _trouble(self, answer: Trouble, now: float) -> Watcher:
        retry = self.retry.receive(Failed(answer.error), now)
        resume = WatchPhase.LIST if self.phase is WatchPhase.LIST else WatchPhase.WATCH
        return evolve(self, phase=WatchPhase.SLEEP, resume=resume, streaming=False, retry=retry)

    def _slept(self, answer: Slept, now: float) -> Watcher:
        if self.retry.step is Step.PAUSE:
            return evolve(self, phase=self.resume, retry=self.retry.receive(answer, now))
        return evolve(self, phase=self.resume)


WATCH_TABLE: Final[Table[Watcher]] = {
    # (phase, answer): the row, and the phases it may lead to
    # LIST for the next page; the last: WATCH (or SLEEP when polling)
    (LIST, PageListed): row(Watcher._page, LIST, WATCH, SLEEP),
    (LIST, Expired): row(Watcher._list_expired, LIST, SLEEP),  # too often: SLEEP
    (LIST, Trouble): row(Watcher._trouble, SLEEP),  # backoff, then the same page
    (LIST, Slept): row(Watcher._relist_slept, LIST),  # after the pause a 410 owed
    (WATCH, Changed): row(Watcher._changed, WATCH),  # the stream still open
    (WATCH, Removed): row(Watcher._removed, WATCH),  # the stream still open
    (WATCH, Bookmark): row(Watcher._bookmark, WATCH),  # from the bookmark's version
    # WATCH again from the last version seen; SLEEP when it ended as soon as it started
    (WATCH, StreamEnded): row(Watcher._ended, WATCH, SLEEP),
    (WATCH, Expired): row(Watcher._expired, LIST),  # too old (a pause when 410 again)
    (WATCH, Refused): row(Watcher._refused, SLEEP),  # then LIST: polling from now on
    (WATCH, Trouble): row(Watcher._trouble, SLEEP),  # backoff, then WATCH again
    (SLEEP, Slept): row(Watcher._slept, LIST, WATCH),  # back where it paused
}

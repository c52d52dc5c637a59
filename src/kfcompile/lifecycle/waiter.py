"""The ``Waiter``: waiting for a job as a machine, fed what the API answered, saying what to
ask next (``wait.wait`` is the driver that asks the ports).

How it watches, row by row of ``WAIT_TABLE``: one list gives the job and a resourceVersion; the
job's pods are listed with every version of the job seen; a watch from the last version seen
delivers changes, in segments of ``WATCH_SEGMENT`` seconds so that pods which change while the
job does not (stuck, or becoming ready) are looked at again. A stream the server closes is
resumed from the last version seen (events and bookmarks move it); one that ends at once,
without an event, is trouble. ``410 Gone`` lists again, after a pause when the watch before
expired too with nothing delivered between (``Relists``, shared with ``watcher``). Transient
trouble on the watch pauses with the session's backoff and resumes the watch, for
``Session.retry_for`` seconds at most (then ``Unavailable``); trouble on a list is the retry
machine's (``session.call``). Only when the API refuses to watch (403, 404) does this poll:
list, pause, list again.
"""

from __future__ import annotations

import enum
import math
from typing import Final, Literal

from attrs import evolve, frozen

from kfcompile.lifecycle.objects import meta
from kfcompile.lifecycle.observe import ListPods, Observation, PodsListed, observation
from kfcompile.lifecycle.ports import ApiError, Gone, Obj, Transient
from kfcompile.lifecycle.session import Failed, GiveUp, Pause, Retry, Slept, Table, row, transition
from kfcompile.status import State

Until = Literal["running", "done"]
"""What ``wait`` waits for: ``"running"`` (or finished), or ``"done"`` (finished)."""

WATCH_SEGMENT: Final = 5  # seconds; pods can get stuck without the job changing, so look again
SHORT_WATCH: Final = 1.0  # seconds; a watch that ends sooner, without an event, was cut short


def reached(obs: Observation, until: Until) -> bool:
    if obs.state.finished:
        return True
    return until == "running" and obs.state.state is State.RUNNING


# --- what the waiter asks -----------------------------------------------------------------------


@frozen(repr=False)
class ListJob:
    """List the job by name: the object (or none) and the list's resourceVersion."""


@frozen(repr=False)
class WatchJob:
    """Watch the job from ``from_version`` for ``timeout`` seconds; answer its first event."""

    from_version: str
    timeout: int


@frozen(repr=False)
class ReadEvent:
    """The next event of the watch that is open."""


@frozen(repr=False)
class Done:
    observation: Observation


@frozen(repr=False)
class Missing:
    """The job is not there: it never was, or it was deleted while we waited."""

    deleted: bool


@frozen(repr=False)
class OutOfTime:
    """The timeout has passed; ``last`` is how the job was last seen."""

    last: Observation


WaitRequest = (
    ListJob | ListPods | WatchJob | ReadEvent | Pause | Done | Missing | OutOfTime | GiveUp
)

# --- what the API answered ----------------------------------------------------------------------


@frozen(repr=False, eq=False)
class Listed:
    job: Obj
    version: str


@frozen(repr=False, eq=False)
class NoJob:
    """The list by name came back empty."""


@frozen(repr=False, eq=False)
class Changed:
    """The watch delivered the job (ADDED, MODIFIED)."""

    job: Obj


@frozen(repr=False, eq=False)
class Bookmark:
    version: str


@frozen(repr=False, eq=False)
class Deleted:
    pass


@frozen(repr=False, eq=False)
class StreamEnded:
    """The server closed the watch (its timeout, or it restarted)."""


@frozen(repr=False, eq=False)
class Expired:
    """410 Gone: the version we watch from is older than the server keeps."""


@frozen(repr=False, eq=False)
class Refused:
    """The API refuses to watch (403 Forbidden, 404): from now on we poll."""


@frozen(repr=False, eq=False)
class Trouble:
    """Transient trouble on the watch (a dropped connection, 429, 5xx)."""

    error: Transient


# --- a watch that keeps expiring (shared with ``watcher``) --------------------------------------


def keeps_expiring() -> Gone:
    """What is said, once, about a watch answered 410 again and again."""
    return Gone(
        410,
        "Expired",
        "the watch keeps expiring as soon as it starts (the server no longer has the version "
        "just listed): listing again, with backoff",
    )


@frozen(repr=False, eq=False)
class Relists:
    """How often in a row the watch was answered ``410 Gone`` with nothing delivered between
    (``streak``). The first lists again at once: the version watched from was compacted away,
    as happens. From the second on, a pause comes before the list (the one backoff, longer with
    each), and that the watch keeps expiring is said once (``told``): a server that compacts
    faster than we list and watch, or a proxy that sends the watch to a server behind the one
    that answered the list, would otherwise get a list and a watch as fast as they go."""

    streak: int = 0
    owed: bool = False  # a pause before the next list
    told: bool = False

    def expired(self) -> Relists:
        streak = self.streak + 1
        return Relists(streak, owed=streak > 1, told=self.told or streak > 1)

    def pause(self, at_most: float = math.inf) -> Pause | None:
        """The pause owed before the next list, if any."""
        return Pause(self.streak - 2, at_most=at_most) if self.owed else None

    def slept(self) -> Relists:
        return evolve(self, owed=False)

    def progress(self) -> Relists:
        """The watch delivered something: it works, and the next 410 is a first again."""
        return evolve(self, streak=0, owed=False)

    def notice(self, before: Relists) -> ApiError | None:
        """What to say once this has become a watch that keeps expiring."""
        return keeps_expiring() if self.told and not before.told else None


WaitAnswer = (
    Listed
    | NoJob
    | PodsListed
    | Changed
    | Bookmark
    | Deleted
    | StreamEnded
    | Expired
    | Refused
    | Trouble
    | Slept
)


class WaitPhase(enum.Enum):
    LIST = "list"  # list the job
    PODS = "pods"  # list its pods, then decide
    WATCH = "watch"  # open a watch, or read the next event of the open one
    SLEEP = "sleep"  # pause: a poll, or after trouble
    END = "end"


# the table's words
LIST, PODS, WATCH, SLEEP, END = (
    WaitPhase.LIST,
    WaitPhase.PODS,
    WaitPhase.WATCH,
    WaitPhase.SLEEP,
    WaitPhase.END,
)


@frozen(repr=False, eq=False)
class Waiter:
    """The state of one wait. ``news`` is set by the answer that made a progress line worth
    showing (the observation's summary changed)."""

    until: Until
    started: float
    deadline: float | None
    retry: Retry
    phase: WaitPhase = WaitPhase.LIST
    entered: float = 0.0  # when this phase began
    job: Obj | None = None  # the job as last seen
    version: str = ""  # the last resourceVersion seen, to watch from
    streaming: bool = False  # a watch is open and has delivered an event
    polling: bool = False  # the API refused to watch
    polls: int = 0  # polls in a row without news
    last: Observation | None = None
    shown: tuple[object, ...] | None = None
    news: Observation | None = None
    relists: Relists = Relists()
    notice: ApiError | None = None  # set by the answer that made something worth saying
    outcome: Done | Missing | None = None

    @classmethod
    def start(cls, until: Until, now: float, timeout: float | None, retry_for: float) -> Waiter:
        deadline = None if timeout is None else now + timeout
        return cls(until, now, deadline, Retry(retry_for), entered=now)

    def remaining(self, now: float) -> float:
        return math.inf if self.deadline is None else self.deadline - now

    def next_request(self, now: float) -> WaitRequest:
        if self.outcome is not None:
            return self.outcome
        if self.last is not None and self.remaining(now) <= 0:
            return OutOfTime(self.last)
        if self.phase is WaitPhase.LIST:
            return self.relists.pause(self.remaining(now)) or ListJob()
        if self.phase is WaitPhase.PODS:
            assert self.job is not None
            return ListPods(self.job)
        if self.phase is WaitPhase.WATCH:
            if self.streaming:
                return ReadEvent()
            seconds = min(WATCH_SEGMENT, self.remaining(now))
            return WatchJob(self.version, max(1, math.ceil(seconds)))
        if self.polling:
            return Pause(self.polls, at_most=self.remaining(now))
        request = self.retry.next_request(now)
        if isinstance(request, Pause):
            return evolve(request, at_most=min(request.at_most, self.remaining(now)))
        assert isinstance(request, GiveUp), request
        return request

    def receive(self, answer: WaitAnswer, now: float) -> Waiter:
        before = evolve(self, news=None, notice=None)
        after = transition(WAIT_TABLE, before, self.phase, answer, now)
        return after if after.phase is self.phase else evolve(after, entered=now)

    # --- the rows

    def _answered(self) -> Waiter:
        """The API answered: trouble, if there was any, is over."""
        return evolve(self, retry=Retry(self.retry.retry_for))

    def _listed(self, answer: Listed, now: float) -> Waiter:
        return evolve(self, phase=WaitPhase.PODS, job=answer.job, version=answer.version)

    def _no_job(self, answer: NoJob, now: float) -> Waiter:
        return evolve(self, phase=WaitPhase.END, outcome=Missing(deleted=self.last is not None))

    def _observed(self, answer: PodsListed, now: float) -> Waiter:
        assert self.job is not None
        obs = observation(self.job, answer.pods, answer.workload)
        news = obs if obs.summary != self.shown else None
        seen = evolve(self, last=obs, shown=obs.summary, news=news)
        if reached(obs, self.until):
            return evolve(seen, phase=WaitPhase.END, outcome=Done(obs))
        if self.polling:
            return evolve(seen, phase=WaitPhase.SLEEP, polls=0 if news else self.polls + 1)
        return evolve(seen, phase=WaitPhase.WATCH)

    def _changed(self, answer: Changed, now: float) -> Waiter:
        version = str(meta(answer.job).get("resourceVersion") or self.version)
        changed = evolve(
            self, phase=WaitPhase.PODS, job=answer.job, version=version, streaming=True
        )
        return changed._delivered()

    def _bookmark(self, answer: Bookmark, now: float) -> Waiter:
        return evolve(self, version=answer.version or self.version, streaming=True)._delivered()

    def _delivered(self) -> Waiter:
        """The watch delivered an event: it works."""
        return evolve(self, relists=self.relists.progress())._answered()

    def _deleted(self, answer: Deleted, now: float) -> Waiter:
        return evolve(self, phase=WaitPhase.END, outcome=Missing(deleted=True))

    def _ended(self, answer: StreamEnded, now: float) -> Waiter:
        if not self.streaming and now - self.entered < SHORT_WATCH:
            cut = Transient(0, "StreamEnded", "the watch ended as soon as it started")
            return self._trouble(Trouble(cut), now)
        return evolve(self, phase=WaitPhase.PODS, streaming=False)._delivered()

    def _expired(self, answer: Expired, now: float) -> Waiter:
        relists = self.relists.expired()
        notice = relists.notice(self.relists)
        expired = evolve(
            self, phase=WaitPhase.LIST, streaming=False, relists=relists, notice=notice
        )
        return expired._answered()

    def _relist_slept(self, answer: Slept, now: float) -> Waiter:
        return evolve(self, relists=self.relists.slept())

    def _refused(self, answer: Refused, now: float) -> Waiter:
        return evolve(self, phase=WaitPhase.SLEEP, streaming=False, polling=True)._answered()

    def _trouble(self, answer: Trouble, now: float) -> Waiter:
        retry = self.retry.receive(Failed(answer.error), now)
        return evolve(self, phase=WaitPhase.SLEEP, streaming=False, retry=retry)

    def _slept(self, answer: Slept, now: float) -> Waiter:
        if self.polling:
            return evolve(self, phase=WaitPhase.LIST)
        return evolve(self, phase=WaitPhase.WATCH, retry=self.retry.receive(answer, now))


WAIT_TABLE: Final[Table[Waiter]] = {
    # (phase, answer): the row, and the phases it may lead to
    (LIST, Listed): row(Waiter._listed, PODS),
    (LIST, NoJob): row(Waiter._no_job, END),  # never there (JobNotFound), or deleted
    (LIST, Slept): row(Waiter._relist_slept, LIST),  # after the pause a 410 owed
    (PODS, PodsListed): row(Waiter._observed, END, WATCH, SLEEP),  # SLEEP: poll
    (WATCH, Changed): row(Waiter._changed, PODS),  # the stream still open
    (WATCH, Bookmark): row(Waiter._bookmark, WATCH),  # from the bookmark's version
    (WATCH, Deleted): row(Waiter._deleted, END),
    # PODS, then WATCH from the last version; SLEEP when it ended as soon as it started
    (WATCH, StreamEnded): row(Waiter._ended, PODS, SLEEP),
    (WATCH, Expired): row(Waiter._expired, LIST),  # too old (a pause when 410 again)
    (WATCH, Refused): row(Waiter._refused, SLEEP),  # then LIST: polling from now on
    (WATCH, Trouble): row(Waiter._trouble, SLEEP),  # backoff, then WATCH again
    (SLEEP, Slept): row(Waiter._slept, LIST, WATCH),  # LIST when polling
}

"""``wait``: waiting for a job, as the ``Waiter`` machine, fed what the API answered, saying
what to ask next, and the few lines that ask the ports for it (``wait``).

How it watches, row by row of ``WAIT_TABLE``: one list gives the job and a resourceVersion; the
job's pods are listed with every version of the job seen; a watch from the last version seen
delivers changes, in segments of ``WATCH_SEGMENT`` seconds so that pods which change while the
job does not (stuck, or becoming ready) are looked at again. A stream the server closes is
resumed from the last version seen (events and bookmarks move it); one that ends at once,
without an event, is trouble (``cut_short``). ``410 Gone`` lists again, after a pause when the
watch before expired too with nothing delivered between (``Relists``). Transient trouble on the
watch pauses with the session's backoff and resumes the watch, for ``Session.retry_for``
seconds at most (then ``Unavailable``); trouble on a list is the retry machine's
(``session.call``). Only when the API refuses to watch (403, 404) does this poll: list, pause,
list again.

While Kueue holds the job (suspended, its Workload saying why, ``kueue_says``) and it has no
pod, nothing is there to look at again but Kueue's word, which changes only with the Workload:
so the job's Workload is watched instead (``HELD``), by name from its state now, in segments of
``HELD_SEGMENT``, and each change of it (Kueue's reason, its admission, its deletion with the
job), and each segment's end, lists the job again. A job held by Kueue changes only through
Kueue, which writes the Workload first (admission: the Workload is admitted, then the job
unsuspended), or by its deletion, which takes its Workload (owned by it) too; a change of the
job alone is seen at the segment's end. The API refusing to watch Workloads (403; 404: Kueue
went) ends this for the wait: the job is watched as before.

What a watch answers (its events, its end, its errors: ``next_answer``, ``only``, the answers
themselves) and how it is listed again (``Relists``) are shared with ``job_events`` and
``pod_logs``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Final, Literal, TypeVar

from attrs import evolve, frozen

from kfcompile.lifecycle.kueue import NOT_SERVED, served_api, waiting_workload
from kfcompile.lifecycle.objects import job_kind, meta
from kfcompile.lifecycle.observe import (
    ListPods,
    Observation,
    PodsListed,
    TimedOut,
    is_ref,
    node_pods,
    observation,
    status,
)
from kfcompile.lifecycle.ports import (
    ApiError,
    Forbidden,
    Gone,
    NotFound,
    Obj,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile.lifecycle.session import (
    Failed,
    GiveUp,
    JobDeleted,
    JobNotFound,
    Opened,
    Pause,
    Perform,
    Retry,
    Session,
    Slept,
    Table,
    call,
    close,
    drive,
    ended,
    ending_named,
    named,
    pause,
    retrying,
    row,
    told,
    transition,
    unavailable,
    when,
)
from kfcompile.status import State, kueue_says
from kfcompile.terminal import printable

Until = Literal["running", "done"]
"""What ``wait`` waits for: ``"running"`` (or finished), or ``"done"`` (finished)."""

WATCH_SEGMENT: Final = 5  # seconds; pods can get stuck without the job changing, so look again
# Seconds the Workload of a job Kueue holds (no pod) is watched before the job is listed again:
# as long as client-go's reflectors (and ``job_events.JOBS_SEGMENT``), Kueue's word being all
# that can change meanwhile.
HELD_SEGMENT: Final = 300
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
class WatchWorkload:
    """Watch the job's Workload ``workload`` (as last read) from its state now for
    ``timeout`` seconds; answer its first change."""

    workload: Obj
    timeout: int


@frozen(repr=False)
class ReadWorkload:
    """The next event of the Workload's watch that is open."""


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
    ListJob
    | ListPods
    | WatchJob
    | ReadEvent
    | WatchWorkload
    | ReadWorkload
    | Pause
    | Done
    | Missing
    | OutOfTime
    | GiveUp
)

# --- what the API answered ----------------------------------------------------------------------


@frozen
class Listed:
    job: Obj
    version: str


@frozen(repr=False)
class NoJob:
    """The list by name came back empty."""


@frozen(repr=False)
class Changed:
    """The watch delivered the job (ADDED, MODIFIED)."""

    job: Obj


@frozen(repr=False)
class KueueMoved:
    """The job's Workload changed, or went: Kueue's word may be another, the job too."""

    workload: Obj


@frozen(repr=False)
class Bookmark:
    version: str


@frozen(repr=False)
class Deleted:
    pass


@frozen(repr=False)
class StreamEnded:
    """The server closed the watch (its timeout, or it restarted)."""


@frozen(repr=False)
class Expired:
    """410 Gone: the version we watch from is older than the server keeps."""


@frozen(repr=False)
class Refused:
    """The API refuses to watch (403 Forbidden, 404): from now on we poll."""


@frozen(repr=False)
class Trouble:
    """Transient trouble on the watch (a dropped connection, 429, 5xx)."""

    error: Transient


A = TypeVar("A")


def cut_short(
    answer: A, delivered: bool, since: float, now: float, ends: tuple[type, ...] = (StreamEnded,)
) -> A | Trouble:
    """``answer``; but a watch that ended (one of ``ends``) as soon as it started (``since``),
    with nothing ``delivered``, was cut short: that is trouble, paused for, not its end (a server
    or a proxy that ends every watch at once would otherwise be watched again at once, for
    ever)."""
    if not isinstance(answer, ends) or delivered or now - since >= SHORT_WATCH:
        return answer
    return Trouble(Transient(0, "StreamEnded", "the watch ended as soon as it started"))


# --- a watch that keeps expiring (shared with ``job_events``) -----------------------------------


def keeps_expiring() -> Gone:
    """What is said, once, about a watch answered 410 again and again."""
    return Gone(
        410,
        "Expired",
        "the watch keeps expiring as soon as it starts (the server no longer has the version "
        "just listed): listing again, with backoff",
    )


@frozen(repr=False)
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
    | KueueMoved
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
    SLEEP = "sleep"  # pause after trouble on the watch, then watch again
    POLL = "poll"  # the API refused to watch: pause, then list again
    HELD = "held"  # Kueue holds the job, which has no pod: watch its Workload, then list again
    END = "end"


# the table's words
LIST, PODS, WATCH, SLEEP, POLL, HELD, END = (
    WaitPhase.LIST,
    WaitPhase.PODS,
    WaitPhase.WATCH,
    WaitPhase.SLEEP,
    WaitPhase.POLL,
    WaitPhase.HELD,
    WaitPhase.END,
)


@frozen(repr=False)
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
    held: Obj | None = None  # the Workload saying why Kueue holds the job, with no pod
    workloads_watched: bool = True  # False once the API refused to watch it: the job as before
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
        if self.phase is LIST:
            return self.relists.pause(self.remaining(now)) or ListJob()
        if self.phase is PODS:
            assert self.job is not None
            return ListPods(self.job)
        if self.phase is WATCH:
            if self.streaming:
                return ReadEvent()
            seconds = min(WATCH_SEGMENT, self.remaining(now))
            return WatchJob(self.version, max(1, math.ceil(seconds)))
        if self.phase is HELD:
            assert self.held is not None
            if self.streaming:
                return ReadWorkload()
            seconds = min(HELD_SEGMENT, self.remaining(now))
            return WatchWorkload(self.held, max(1, math.ceil(seconds)))
        if self.phase is POLL:
            return Pause(self.polls, at_most=self.remaining(now))
        request = self.retry.next_request(now)
        if isinstance(request, Pause):
            return evolve(request, at_most=min(request.at_most, self.remaining(now)))
        assert isinstance(request, GiveUp), request
        return request

    def receive(self, answer: WaitAnswer, now: float) -> Waiter:
        before = evolve(self, news=None, notice=None)
        answer = cut_short(answer, self.streaming, self.entered, now)
        after = transition(WAIT_TABLE, before, answer, now)
        return after if after.phase is self.phase else evolve(after, entered=now)

    # --- the rows

    def _answered(self) -> Waiter:
        """The API answered: trouble, if there was any, is over."""
        return evolve(self, retry=Retry(self.retry.retry_for))

    def _listed(self, answer: Listed, now: float) -> Waiter:
        return evolve(self, job=answer.job, version=answer.version)

    def _no_job(self, answer: NoJob, now: float) -> Waiter:
        return evolve(self, outcome=Missing(deleted=self.last is not None))

    def _observed(self, answer: PodsListed, now: float) -> Waiter:
        assert self.job is not None
        obs = observation(self.job, answer.pods, answer.workload)
        news = obs if obs.summary != self.shown else None
        workload = answer.workload
        held = (
            workload is not None
            and self.workloads_watched
            and not answer.pods  # a pod, even one going, may change alone
            and obs.state.state is State.SUSPENDED
            and kueue_says(workload) is not None
        )
        seen = evolve(self, last=obs, shown=obs.summary, news=news, held=workload if held else None)
        if reached(obs, self.until):
            return evolve(seen, outcome=Done(obs))
        return evolve(seen, polls=0 if news else self.polls + 1) if self.polling else seen

    def _changed(self, answer: Changed, now: float) -> Waiter:
        version = str(meta(answer.job).get("resourceVersion") or self.version)
        return evolve(self, job=answer.job, version=version, streaming=True)._delivered()

    def _bookmark(self, answer: Bookmark, now: float) -> Waiter:
        return evolve(self, version=answer.version or self.version, streaming=True)._delivered()

    def _delivered(self) -> Waiter:
        """The watch delivered an event: it works."""
        return evolve(self, relists=self.relists.progress())._answered()

    def _deleted(self, answer: Deleted, now: float) -> Waiter:
        return evolve(self, outcome=Missing(deleted=True))

    def _ended(self, answer: StreamEnded, now: float) -> Waiter:
        return evolve(self, streaming=False)._delivered()

    def _expired(self, answer: Expired, now: float) -> Waiter:
        relists = self.relists.expired()
        notice = relists.notice(self.relists)
        return evolve(self, streaming=False, relists=relists, notice=notice)._answered()

    def _relist_slept(self, answer: Slept, now: float) -> Waiter:
        return evolve(self, relists=self.relists.slept())

    def _refused(self, answer: Refused, now: float) -> Waiter:
        return evolve(self, streaming=False, polling=True)._answered()

    def _trouble(self, answer: Trouble, now: float) -> Waiter:
        retry = self.retry.receive(Failed(answer.error), now)
        return evolve(self, streaming=False, retry=retry)

    def _slept(self, answer: Slept, now: float) -> Waiter:
        return evolve(self, retry=self.retry.receive(answer, now))

    def _polled(self, answer: Slept, now: float) -> Waiter:
        return self

    def _kueue_moved(self, answer: KueueMoved, now: float) -> Waiter:
        return evolve(self, streaming=False)._delivered()

    def _workload_bookmark(self, answer: Bookmark, now: float) -> Waiter:
        return evolve(self, streaming=True)._delivered()  # a Workload's version: not the job's

    def _workloads_refused(self, answer: Refused | Expired, now: float) -> Waiter:
        return evolve(self, streaming=False, workloads_watched=False)._answered()


def _reached(waiter: Waiter) -> bool:
    return waiter.outcome is not None


def _polling(waiter: Waiter) -> bool:
    return waiter.polling


def _held(waiter: Waiter) -> bool:
    return waiter.held is not None


WAIT_TABLE: Final[Table[Waiter]] = {
    # (phase, answer): the row, the phase it leads to, and when elsewhere
    (LIST, Listed): row(Waiter._listed, PODS),
    (LIST, NoJob): row(Waiter._no_job, END),  # never there (JobNotFound), or deleted
    (LIST, Slept): row(Waiter._relist_slept, LIST),  # after the pause a 410 owed
    (PODS, PodsListed): row(
        Waiter._observed,
        WATCH,
        when("reached", _reached, END),
        when("polling", _polling, POLL),
        when("held", _held, HELD),  # by Kueue, with no pod: its Workload is watched
    ),
    (WATCH, Changed): row(Waiter._changed, PODS),  # the stream still open
    (WATCH, Bookmark): row(Waiter._bookmark, WATCH),  # from the bookmark's version
    (WATCH, Deleted): row(Waiter._deleted, END),
    # then WATCH from the last version (one that ended as soon as it started is Trouble)
    (WATCH, StreamEnded): row(Waiter._ended, PODS),
    (WATCH, Expired): row(Waiter._expired, LIST),  # too old (a pause when 410 again)
    (WATCH, Refused): row(Waiter._refused, POLL),  # polling from now on
    (WATCH, Trouble): row(Waiter._trouble, SLEEP),  # backoff
    (SLEEP, Slept): row(Waiter._slept, WATCH, when("held", _held, HELD)),  # that watch again
    (POLL, Slept): row(Waiter._polled, LIST),
    # the job's Workload (Kueue's word changed, or the job was admitted, or deleted): the job
    (HELD, KueueMoved): row(Waiter._kueue_moved, LIST),
    (HELD, Bookmark): row(Waiter._workload_bookmark, HELD),
    (HELD, StreamEnded): row(Waiter._ended, LIST),  # the segment's end: the job again
    (HELD, Expired): row(Waiter._workloads_refused, LIST),  # (watched from now: not expected)
    (HELD, Refused): row(Waiter._workloads_refused, LIST),  # the job watched as before
    (HELD, Trouble): row(Waiter._trouble, SLEEP),  # backoff
}


# --- the driver: ``wait``, and a watch's events as answers ----------------------------------------


def _bookmark(obj: Obj) -> WaitAnswer:
    return Bookmark(str(meta(obj).get("resourceVersion") or ""))


def _deleted(obj: Obj) -> WaitAnswer:
    return Deleted()


# A watch event's type -> the answer, for an event about the job watched.
_EVENTS: Final[dict[str, Callable[[Obj], WaitAnswer]]] = {
    "ADDED": Changed,
    "MODIFIED": Changed,
    "DELETED": _deleted,
    "BOOKMARK": _bookmark,
}


# A watch event's type -> the answer, for an event about the job's Workload.
_WORKLOAD_EVENTS: Final[dict[str, Callable[[Obj], WaitAnswer]]] = {
    "ADDED": KueueMoved,
    "MODIFIED": KueueMoved,
    "DELETED": KueueMoved,
    "BOOKMARK": lambda _: Bookmark(""),
}


def next_answer(
    stream: Iterator[WatchEvent], answers: Mapping[str, Callable[[Obj], A]], what: str
) -> A | Expired | Trouble | Refused | StreamEnded:
    """The next event of a watch as the machine's answer, by the event's type (``answers``;
    another type, none is defined, is taken for a ``BOOKMARK``), or what its end or error means;
    any other error ends the watch, named as the call ``what``."""
    try:
        event = next(stream, None)
    except Gone:
        return Expired()
    except Transient as exc:
        return Trouble(exc)
    except (Forbidden, NotFound):
        return Refused()
    except ApiError as exc:
        exc.named(what)
        raise
    if event is None:
        return StreamEnded()
    return answers.get(event.type, answers["BOOKMARK"])(event.object)


def _next_event(stream: Iterator[WatchEvent], ref: Ref) -> WaitAnswer:
    return next_answer(stream, _EVENTS, named("watch", ref))


def _watching_workload(ref: Ref) -> str:
    return f"watch the Workload of {ref}"


def _next_said(stream: Iterator[WatchEvent], ref: Ref) -> WaitAnswer:
    return next_answer(stream, _WORKLOAD_EVENTS, _watching_workload(ref))


def _list_job(session: Session, ref: Ref) -> WaitAnswer:
    kind = job_kind(ref)
    by_name = f"metadata.name={ref.name}"
    page = call(
        session,
        named("read", ref),
        lambda: session.cluster.list(
            kind.api_version, kind.name, ref.namespace, field_selector=by_name
        ),
    )
    mine = [item for item in page.items if is_ref(item, ref)]  # never another job as this one
    return Listed(mine[0], page.resource_version) if mine else NoJob()


def _watch(session: Session, ref: Ref, request: WatchJob) -> Iterator[WatchEvent]:
    """The watch, as a generator: what the port raises comes with the first event; events
    about another object are passed over (``only``)."""
    kind = job_kind(ref)
    with ending_named(named("watch", ref)):
        events = session.cluster.watch(
            kind.api_version,
            kind.name,
            ref.namespace,
            resource_version=request.from_version,
            field_selector=f"metadata.name={ref.name}",
            timeout_seconds=request.timeout,
        )
        yield from only(events, partial(is_ref, ref=ref))


def _watch_workload(session: Session, ref: Ref, request: WatchWorkload) -> Iterator[WatchEvent]:
    """The watch of the job's Workload, by name, from its state now (no resourceVersion: a
    Workload unchanged for long is older than the server keeps, and the first event is the
    Workload as it is), through the Kueue API served; the Workload as ``request`` has it is
    passed over, never taken for a change."""
    name, seen = meta(request.workload).get("name"), meta(request.workload).get("resourceVersion")
    with ending_named(_watching_workload(ref)):
        api = served_api(session, "Workload")
        if api is None:
            raise NotFound(404, "NotFound", NOT_SERVED)  # Kueue went
        events = session.cluster.watch(
            api,
            "Workload",
            ref.namespace,
            resource_version="",
            field_selector=f"metadata.name={name}",
            timeout_seconds=request.timeout,
        )
        yield from only(
            events,
            lambda obj: meta(obj).get("name") == name and meta(obj).get("resourceVersion") != seen,
        )


def only(events: Iterator[WatchEvent], asked: Callable[[Obj], bool]) -> Iterator[WatchEvent]:
    """The events whose object is one ``asked`` for (and every BOOKMARK, which carries none):
    an event about another object, a broken or hostile server's, is passed over, never taken
    for what is watched. Closing this closes ``events``."""
    try:
        for event in events:
            if event.type == "BOOKMARK" or asked(event.object):
                yield event
    finally:
        close(events)


def wait(
    session: Session,
    ref: Ref,
    until: Until,
    *,
    timeout: float | None = None,
    on_change: Callable[[Observation, float], None] | None = None,
    pods_on: Callable[[Obj], Session] | None = None,
) -> Observation:
    """Watch the job until it is running (or finished) or finished; report each change.

    One list, then a watch resumed from the last version seen (while Kueue holds the job and
    it has no pod, a watch of its Workload instead); ``410 Gone`` lists again; transient
    trouble pauses and retries; the API refusing to watch is the only case that polls
    (``WAIT_TABLE`` has the whole of it). ``TimedOut`` says where the job stands
    and the warnings that say why; ``JobNotFound`` and ``JobDeleted`` say it is not there.
    ``pods_on``: the session whose pods judge the job as last seen (by default ``session``'s;
    on a MultiKueue manager, the worker's it was dispatched to).
    """
    clock = session.clock
    waiter = Waiter.start(until, clock.monotonic(), timeout, session.retry_for)
    opened = Opened()
    here: Callable[[Obj], Session] = pods_on or (lambda _: session)
    perform: Perform = {
        ListJob: lambda _: _list_job(session, ref),
        ListPods: lambda request: PodsListed(
            node_pods(here(request.job), request.job),
            workload=waiting_workload(session, request.job),
        ),
        WatchJob: lambda request: _next_event(opened.start(_watch(session, ref, request)), ref),
        ReadEvent: lambda _: _next_event(opened.current(), ref),
        WatchWorkload: lambda request: _next_said(
            opened.start(_watch_workload(session, ref, request)), ref
        ),
        ReadWorkload: lambda _: _next_said(opened.current(), ref),
        Pause: partial(pause, session),
    }

    def each(after: Waiter, answer: WaitAnswer) -> None:
        if after.notice is not None:
            retrying(session, named("watch", ref), after.notice)
        if after.news is not None and on_change is not None:
            on_change(after.news, clock.monotonic() - after.started)

    steps = drive(waiter, clock, perform, opened, lambda machine: machine.streaming)
    _, end = ended(told(steps, each))
    return _ended(session, ref, until, timeout, end, judged=pods_on is not None)


def _ended(
    session: Session,
    ref: Ref,
    until: Until,
    timeout: float | None,
    end: object,
    *,
    judged: bool = False,
) -> Observation:
    """The observation a wait returns, or the error it ends with."""
    if isinstance(end, Done):
        return end.observation
    if isinstance(end, Missing):
        if end.deleted:
            raise JobDeleted(f"{ref} was deleted (by someone else) while waiting")
        raise JobNotFound(f"{ref} does not exist")
    if isinstance(end, GiveUp):
        raise unavailable(named("watch", ref), end)
    assert isinstance(end, OutOfTime), end
    last = status(session, ref)  # how things stand now, with the events that say why
    if judged:  # by pods on another cluster: as the wait saw them last
        last = evolve(last, state=end.last.state, nodes=end.last.nodes)
    warnings = [f"  {e}" for e in last.events if e.type == "Warning"][-3:]
    state = last.state
    head = f"{ref} did not become {until} within {timeout:g}s: "
    # one line, whatever the message holds (the lines below are the warnings)
    head += printable(f"{state.state.value} ({state.reason}) {state.message}".rstrip())
    raise TimedOut("\n".join([head, *warnings]), last)

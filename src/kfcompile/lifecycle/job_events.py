"""``watch_jobs``: every managed job's state from one list and one watch per kind, for services
that run many jobs. Each kind is a ``Watcher`` machine, fed what the API answered, saying what
to ask next, with the few lines that ask the ports for it (``watch_kind``); several kinds (and
Kueue's Workloads, ``watch_workloads``) are read at once by the session's ``Merge`` port (as
the followed logs of several ranks are), so the caller needs no thread.

What a service needs is each managed job's state without a request per job: one list (in pages
of ``LIST_PAGE``), then one watch from the list's resourceVersion, resumed from the last version
seen (events and bookmarks move it) each time the server closes it. A job's state is what
``status`` says of it: decided by the job object alone wherever its status counts its pods (a
pod list per job would make the requests grow with the jobs), and an event (``JobEvent``) is
made only when a job appears, disappears, its normalized state (state and reason) changes, or
the progress its training process reports does (``PROGRESSED``); a message alone is no event.

Only where a job's pods alone can tell whether it runs (``status.decided_by_pods``: a Trainer
v2.0 TrainJob, which never writes ``jobsStatus``, or a PyTorchJob whose ``replicaStatuses`` are
not written yet) are its pods read (``JobPods``): with each page of the list, one pod list per
namespace for the jobs of the page that need them, and with each change or deletion of such a
job, one pod list for it (a job just created has no pods that run yet: none then). A cluster
whose controller counts the pods in the job's status (Trainer v2.1 on) costs no pod request.
Trainer v2.0 writes nothing to a TrainJob when its pods start, so its start is seen on the
job's next event (or the next list), not when it happens.

Kueue's reason for holding a job is its Workload's (``status.kueue_says``), and a Workload
can change while its job does not (waiting for quota, then an admission check Pending, then
Retry): so where Kueue is served, its Workloads are watched too, one list and one watch through
the Kueue API served (``Workloads``, read by the same ``Watcher``), and ``Held`` gives Kueue's
last word to the events of the jobs it holds, and makes a ``CHANGED`` event when only that
word changes.

Row by row of ``WATCH_TABLE``, it goes as ``waiting`` does: ``410 Gone`` on the watch lists
again (after a pause when it keeps expiring: ``waiting.Relists``), and that relist reports only
what really changed meanwhile (a job gone from it was deleted; one under the same name with
another uid was deleted and created again); a continue token that expired starts the list over
(``LIST_RESTARTS`` times, then it is trouble). Transient trouble, on a list page or on the
watch, pauses with the session's backoff and asks again, for ``Session.retry_for`` seconds at
most (then ``Unavailable``). Only when the API refuses to watch (403, 404) does it poll: list,
pause, list again.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import closing, suppress
from functools import partial
from typing import Any, Final, Generic, Protocol, TypeVar, overload

import attrs
from attrs import define, evolve, frozen

from kfcompile.kinds import KINDS, Kind
from kfcompile.lifecycle.kueue import held_job, multikueue_managed, served_api
from kfcompile.lifecycle.multikueue import dispatches
from kfcompile.lifecycle.objects import Paging, meta, served
from kfcompile.lifecycle.observe import foreign, pods_of_jobs
from kfcompile.lifecycle.pod_logs import merger
from kfcompile.lifecycle.ports import (
    ApiError,
    Clock,
    Forbidden,
    Gone,
    NotFound,
    Obj,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile.lifecycle.session import (
    LIST_PAGE,
    LIST_RESTARTS,
    MANAGED_BY_LABEL,
    MANAGER,
    ClusterError,
    Failed,
    GiveUp,
    Opened,
    Pause,
    Perform,
    Retry,
    Session,
    Slept,
    Step,
    Table,
    close,
    drive,
    ending_named,
    listing,
    pause,
    retrying,
    row,
    told,
    transition,
    unavailable,
    when,
)
from kfcompile.lifecycle.waiting import (
    Bookmark,
    Changed,
    Expired,
    ReadEvent,
    Refused,
    Relists,
    StreamEnded,
    Trouble,
    cut_short,
    next_answer,
    only,
)
from kfcompile.progress import Progress, read_progress
from kfcompile.status import (
    JobState,
    State,
    decided_by_pods,
    job_state,
    kueue_held,
    kueue_says,
)

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
    """Another change of state or reason (e.g. PENDING, now ``Unschedulable``; or SUSPENDED,
    Kueue's reason now ``AdmissionCheckPending``: its Workload changed, the job did not)."""
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
    return old.state is State.SUSPENDED and new.state is not State.SUSPENDED


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


@frozen(repr=False)
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


def seen(
    kind: Kind, obj: Mapping[str, Any], pods: Sequence[Obj] | None = None
) -> tuple[Ref, Seen] | None:
    """The job's ref and what it says, from the object (and the job's ``pods`` when they were
    read: ``JobPods``); ``None`` for an object without a name (the stream is hostile input: it
    is skipped, never trusted)."""
    m = meta(obj)
    name, namespace, uid = m.get("name"), m.get("namespace"), m.get("uid")
    if not isinstance(name, str) or not name:
        return None
    ref = Ref(kind.api_version, kind.name, namespace if isinstance(namespace, str) else None, name)
    cr = obj if obj.get("kind") == kind.name else {**obj, "kind": kind.name}
    state = job_state(cr, pods)
    return ref, Seen(uid if isinstance(uid, str) else "", state, read_progress(cr))


def deleted(kind: Kind, ref: Ref, last: JobState, before: JobState) -> JobEvent:
    return JobEvent(kind, ref, Happened.DELETED, last, before)


S = TypeVar("S")
E = TypeVar("E", covariant=True)


class Reading(Protocol[S, E]):
    """How a watch reads what it watches: an object as its key and what it says (``seen``;
    None: passed over), and the events of a change (``compare``) and of a deletion (``gone``)."""

    def seen(self, obj: Mapping[str, Any]) -> tuple[Ref, S] | None: ...

    def compare(self, ref: Ref, before: S | None, now: S, appeared: Happened) -> tuple[E, ...]: ...

    def gone(self, ref: Ref, last: S, before: S) -> E: ...


@define(repr=False, eq=False)
class JobPods:
    """The pods of the jobs whose pods alone can tell whether they run
    (``status.decided_by_pods``), read by the driver for the jobs an answer of the API brings,
    before the ``Watcher`` is fed it, and kept here for it by (namespace, name) until the next
    answer: never a request for a job whose status counts its pods."""

    session: Session
    kind: Kind
    read: dict[tuple[str, str], list[Obj]] = attrs.field(factory=dict)

    def listed(self, jobs: Sequence[Obj]) -> None:
        """A page of the list: one pod list per namespace for the jobs that need theirs."""
        needing = [job for job in map(self._as_job, jobs) if _needs_pods(job)]
        self.read = pods_of_jobs(self.session, needing)

    def event(self, event: WatchEvent) -> None:
        """An event of the watch: a job that changed or went, its pods if it needs them (a job
        just created, ADDED, has none that run yet)."""
        job = self._as_job(event.object)
        needs = event.type in ("MODIFIED", "DELETED") and _needs_pods(job)
        self.read = pods_of_jobs(self.session, [job]) if needs else {}

    def _as_job(self, obj: Obj) -> Obj:
        """The object as a job of the kind watched (a list's items may not say their kind)."""
        return obj if obj.get("kind") == self.kind.name else {**obj, "kind": self.kind.name}

    def of(self, obj: Mapping[str, Any]) -> list[Obj] | None:
        m = meta(obj)
        return self.read.get((str(m.get("namespace")), str(m.get("name"))))


def _needs_pods(job: Obj) -> bool:
    """Whether only the job's pods can tell its state, and they are on this cluster (those of a
    job MultiKueue dispatched run on a worker)."""
    return decided_by_pods(job) and not multikueue_managed(job)


@frozen(repr=False, eq=False)
class Jobs:
    """A watch of the jobs of ``kind``: what each says is its state (``Seen``), with its pods
    when the driver read them (``pods``; None: a watch that reads none)."""

    kind: Kind
    pods: JobPods | None = None

    def seen(self, obj: Mapping[str, Any]) -> tuple[Ref, Seen] | None:
        return seen(self.kind, obj, None if self.pods is None else self.pods.of(obj))

    def compare(
        self, ref: Ref, before: Seen | None, now: Seen, appeared: Happened
    ) -> tuple[JobEvent, ...]:
        return compare(self.kind, ref, before, now, appeared)

    def gone(self, ref: Ref, last: Seen, before: Seen) -> JobEvent:
        return deleted(self.kind, ref, last.state, before.state)


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

# --- what the API answered (and the answers shared with ``wait``) -------------------------------


@frozen(repr=False)
class PageListed:
    items: list[Obj]
    version: str
    continue_token: str | None = None


@frozen(repr=False)
class Removed:
    """The watch delivered a DELETED event (the job was deleted or left the selection)."""

    job: Obj


WatchAnswer = (
    PageListed | Changed | Removed | Bookmark | StreamEnded | Expired | Refused | Trouble | Slept
)


class WatchPhase(enum.Enum):
    LIST = "list"  # a page of the list, the first or the next (or a pause before it)
    WATCH = "watch"  # open a watch, or read the next event of the open one
    SLEEP = "sleep"  # pause after trouble on the watch, then watch again
    POLL = "poll"  # the API refused to watch: pause, then list again


# the table's words
LIST, WATCH, SLEEP, POLL = WatchPhase.LIST, WatchPhase.WATCH, WatchPhase.SLEEP, WatchPhase.POLL


@frozen(repr=False)
class Watcher(Generic[S, E]):
    """The state of one watch (of a job kind; or of Kueue's Workloads), read as ``reads``
    says. ``events`` are what the last answer made worth telling.

    ``known`` and ``listing`` are this watch's own maps, changed in place by the answers, so
    that an event costs the same with 10 jobs as with 10,000 (a copy per event grew with the
    jobs): a Watcher is fed once, and the one ``receive`` returns replaces it."""

    reads: Reading[S, E]
    retry: Retry
    phase: WatchPhase = WatchPhase.LIST
    entered: float = 0.0  # when this phase began, or this watch was asked for
    version: str = ""  # the last resourceVersion seen, to watch from
    streaming: bool = False  # a watch is open and has delivered an event
    polling: bool = False  # the API refused to watch
    polls: int = 0  # polls in a row without news
    listed: bool = False  # the first list is done: a job that appears now was created
    token: str | None = None  # the continue token of the list under way
    listing: dict[Ref, S] = attrs.field(factory=dict)  # its pages so far
    list_version: str = ""  # its resourceVersion (its first page's)
    restarts: int = 0  # times it started over after its continue token expired
    known: dict[Ref, S] = attrs.field(factory=dict)  # every object, as last reported
    relists: Relists = attrs.field(factory=Relists)  # 410s in a row on the watch
    events: tuple[E, ...] = ()
    notice: ApiError | None = None  # set by the answer that made something worth saying

    @overload
    @classmethod
    def start(cls, reads: Kind, now: float, retry_for: float) -> Watcher[Seen, JobEvent]: ...

    @overload
    @classmethod
    def start(cls, reads: Reading[S, E], now: float, retry_for: float) -> Watcher[S, E]: ...

    @classmethod
    def start(cls, reads: Kind | Reading[Any, Any], now: float, retry_for: float) -> Any:
        """A watch of ``reads``: the jobs of a kind (``Jobs``), or what another ``Reading``
        reads."""
        reading: Reading[Any, Any] = Jobs(reads) if isinstance(reads, Kind) else reads
        return cls(reading, Retry(retry_for), entered=now)

    def next_request(self, now: float) -> WatchRequest:
        if self.phase is WATCH:
            return ReadEvent() if self.streaming else WatchJobs(self.version, JOBS_SEGMENT)
        if self.phase is POLL:
            return Pause(self.polls)  # between polls
        if self.retry.phase is Step.PAUSE:  # trouble, on the watch (SLEEP) or on a page (LIST):
            request = self.retry.next_request(now)  # the retry machine says how long, or no more
            assert isinstance(request, Pause | GiveUp), request
            return request
        return self.relists.pause() or ListJobs(self.token)

    def receive(self, answer: WatchAnswer, now: float) -> Watcher[S, E]:
        before = evolve(self, events=(), notice=None)
        answer = cut_short(answer, self.streaming, self.entered, now)
        after = transition(WATCH_TABLE, before, answer, now)
        opens = after.phase is WATCH and not after.streaming  # a new watch is asked for
        return evolve(after, entered=now) if after.phase is not self.phase or opens else after

    # --- the rows

    def _answered(self) -> Watcher[S, E]:
        """The API answered: trouble, if there was any, is over."""
        return evolve(self, retry=Retry(self.retry.retry_for))

    def _page(self, answer: PageListed, now: float) -> Watcher[S, E]:
        for item in answer.items:
            found = self.reads.seen(item)
            if found is not None:
                self.listing[found[0]] = found[1]
        version = self.list_version if self.token else answer.version
        page = evolve(self, list_version=version)._answered()
        if answer.continue_token:
            return evolve(page, token=answer.continue_token)
        return page._listed()

    def _listed(self) -> Watcher[S, E]:
        """The last page: what changed since the jobs were last seen, and go on from here."""
        appeared = Happened.CREATED if self.listed else Happened.LISTED
        events: list[E] = []
        for ref, now in self.listing.items():
            events += self.reads.compare(ref, self.known.get(ref), now, appeared)
        for ref, before in self.known.items():
            if ref not in self.listing:  # deleted while we were not watching
                events.append(self.reads.gone(ref, before, before))
        done = evolve(
            self,
            known=self.listing,
            listing={},
            token=None,
            restarts=0,
            listed=True,
            version=self.list_version or self.version,
            events=tuple(events),
            streaming=False,
        )
        return evolve(done, polls=0 if events else self.polls + 1) if self.polling else done

    def _list_expired(self, answer: Expired, now: float) -> Watcher[S, E]:
        if self.restarts >= LIST_RESTARTS:
            gone = Transient(410, "Expired", "the list's continue token kept expiring")
            return self._trouble(Trouble(gone), now)
        return evolve(self, token=None, listing={}, restarts=self.restarts + 1)

    def _changed(self, answer: Changed, now: float) -> Watcher[S, E]:
        moved = self._moved(answer.job)
        found = self.reads.seen(answer.job)
        if found is None:
            return moved
        ref, now_seen = found
        events = self.reads.compare(ref, self.known.get(ref), now_seen, Happened.CREATED)
        if not events:
            return moved
        self.known[ref] = now_seen
        return evolve(moved, events=events)

    def _removed(self, answer: Removed, now: float) -> Watcher[S, E]:
        moved = self._moved(answer.job)
        found = self.reads.seen(answer.job)
        before = None if found is None else self.known.get(found[0])
        if found is None or before is None:
            return moved
        ref, last = found
        del self.known[ref]
        return evolve(moved, events=(self.reads.gone(ref, last, before),))

    def _moved(self, job: Obj) -> Watcher[S, E]:
        """An event arrived: the stream is open, and the version moves to the event's."""
        version = meta(job).get("resourceVersion")
        version = version if isinstance(version, str) and version else self.version
        return evolve(self, version=version, streaming=True)._delivered()

    def _bookmark(self, answer: Bookmark, now: float) -> Watcher[S, E]:
        return evolve(self, version=answer.version or self.version, streaming=True)._delivered()

    def _delivered(self) -> Watcher[S, E]:
        """The watch delivered an event: it works."""
        return evolve(self, relists=self.relists.progress())._answered()

    def _ended(self, answer: StreamEnded, now: float) -> Watcher[S, E]:
        return evolve(self, streaming=False)._delivered()

    def _expired(self, answer: Expired, now: float) -> Watcher[S, E]:
        relists = self.relists.expired()
        expired = evolve(
            self,
            streaming=False,
            token=None,
            listing={},
            relists=relists,
            notice=relists.notice(self.relists),
        )
        return expired._answered()

    def _list_slept(self, answer: Slept, now: float) -> Watcher[S, E]:
        if self.retry.phase is Step.PAUSE:  # after trouble on a page: that page again
            return evolve(self, retry=self.retry.receive(answer, now))
        return evolve(self, relists=self.relists.slept())  # the pause a 410 owed

    def _refused(self, answer: Refused, now: float) -> Watcher[S, E]:
        return evolve(self, streaming=False, polling=True)._answered()

    def _trouble(self, answer: Trouble, now: float) -> Watcher[S, E]:
        retry = self.retry.receive(Failed(answer.error), now)
        return evolve(self, streaming=False, retry=retry)

    def _slept(self, answer: Slept, now: float) -> Watcher[S, E]:
        return evolve(self, retry=self.retry.receive(answer, now))

    def _polled(self, answer: Slept, now: float) -> Watcher[S, E]:
        return self


def _last(watcher: Watcher[Any, Any]) -> bool:
    """The list's last page was read (no token of a page to come)."""
    return watcher.token is None


def _last_polling(watcher: Watcher[Any, Any]) -> bool:
    return watcher.token is None and watcher.polling


WATCH_TABLE: Final[Table[Watcher[Any, Any]]] = {
    # (phase, answer): the row, the phase it leads to, and when elsewhere
    (LIST, PageListed): row(
        Watcher._page,
        LIST,  # the next page
        when("the last, polling", _last_polling, POLL),
        when("the last", _last, WATCH),
    ),
    (LIST, Expired): row(Watcher._list_expired, LIST),  # over again (too often: trouble)
    (LIST, Trouble): row(Watcher._trouble, LIST),  # the same page, after the retry's pause
    (LIST, Slept): row(Watcher._list_slept, LIST),  # after the pause trouble or a 410 owed
    (WATCH, Changed): row(Watcher._changed, WATCH),  # the stream still open
    (WATCH, Removed): row(Watcher._removed, WATCH),  # the stream still open
    (WATCH, Bookmark): row(Watcher._bookmark, WATCH),  # from the bookmark's version
    # again from the last version seen (one that ended as soon as it started is Trouble)
    (WATCH, StreamEnded): row(Watcher._ended, WATCH),
    (WATCH, Expired): row(Watcher._expired, LIST),  # too old (a pause when 410 again)
    (WATCH, Refused): row(Watcher._refused, POLL),  # polling from now on
    (WATCH, Trouble): row(Watcher._trouble, SLEEP),  # backoff
    (SLEEP, Slept): row(Watcher._slept, WATCH),  # again, from the last version seen
    (POLL, Slept): row(Watcher._polled, LIST),
}


# --- the driver: ``watch_jobs`` -------------------------------------------------------------------

MANAGED: Final = f"{MANAGED_BY_LABEL}={MANAGER}"  # the jobs kfcompile created
WAITING: Final = (State.SUSPENDED, State.PENDING)  # states Kueue may say why a job is in


@frozen(repr=False, eq=False)
class Watched:
    """What one watch lists and watches: ``kind`` through ``api_version``, in ``namespace``
    (None: all), with the label ``selector``."""

    api_version: str
    kind: str
    namespace: str | None
    selector: str = ""

    def foreign(self, obj: Obj) -> bool:
        """An object the server sent that is not what was asked for (another kind, namespace
        or label value): passed over, never reported."""
        return obj.get("kind") not in (None, self.kind) or foreign(
            obj, self.namespace, self.selector
        )

    def called(self, verb: str = "list") -> str:
        return listing(self.kind, self.namespace, verb)


def _bookmark(obj: Obj) -> WatchAnswer:
    return Bookmark(str(meta(obj).get("resourceVersion") or ""))


# A watch event's type -> the answer (a deletion with the job: which one it was).
_EVENTS: Final[dict[str, Callable[[Obj], WatchAnswer]]] = {
    "ADDED": Changed,
    "MODIFIED": Changed,
    "DELETED": Removed,
    "BOOKMARK": _bookmark,
}


def _next_event(stream: Iterator[WatchEvent], what: str) -> WatchAnswer:
    return next_answer(stream, _EVENTS, what)


def _page(
    session: Session, watched: Watched, request: ListJobs, paging: Paging
) -> tuple[WatchAnswer, Paging]:
    """One page, and this list's pages so far (``paging`` before it); what the API refuses
    (403: no right to list) ends the watch with it, named as ``call`` names what it raises (the
    machine rides out the rest itself), and so does a list that would page for ever."""
    try:
        page = session.cluster.list(
            watched.api_version,
            watched.kind,
            watched.namespace,
            label_selector=watched.selector,
            limit=LIST_PAGE,
            continue_token=request.continue_token,
        )
    except Gone:
        return Expired(), paging
    except Transient as exc:
        return Trouble(exc), paging
    except ApiError as exc:
        exc.named(watched.called())
        raise
    after = paging.after(page)
    if isinstance(after, str):
        raise ClusterError(f"{watched.called()}: {after}")
    items = [item for item in page.items if not watched.foreign(item)]
    return PageListed(items, page.resource_version, page.continue_token or None), after


def _watch(
    session: Session, watched: Watched, request: WatchJobs, pods: JobPods | None = None
) -> Iterator[WatchEvent]:
    """The watch, as a generator: what the port raises comes with the first event; an event
    about an object not asked for is passed over (``Watched.foreign``); before each event is
    passed on, the ``pods`` of its job read if it needs them (``JobPods.event``)."""
    with ending_named(watched.called("watch")):
        events = session.cluster.watch(
            watched.api_version,
            watched.kind,
            watched.namespace,
            resource_version=request.from_version,
            label_selector=watched.selector,
            timeout_seconds=request.timeout,
        )
        asked = only(events, lambda obj: not watched.foreign(obj))
        try:
            for event in asked:
                if pods is not None:
                    pods.event(event)
                yield event
        finally:
            close(asked)  # closing this watch closes the server's stream


def _steps(
    session: Session, watcher: Watcher[S, E], watched: Watched, pods: JobPods | None = None
) -> Generator[tuple[Watcher[S, E], WatchAnswer], None, None]:
    """Run one watch (its lists, watches and pauses): after each answer of the API, the
    watcher then and the answer; the jobs' ``pods`` read, where they alone tell a job's state,
    before the watcher is fed the answer that brought the job. Closing it closes its watch."""
    clock, what = session.clock, watched.called("watch")
    opened = Opened()
    paging = Paging()

    def page(request: ListJobs) -> WatchAnswer:
        nonlocal paging
        if request.continue_token is None:  # a list begins
            paging = Paging()
        answer, paging = _page(session, watched, request, paging)
        if pods is not None and isinstance(answer, PageListed):
            pods.listed(answer.items)
        return answer

    def watch(request: WatchJobs) -> WatchAnswer:
        return _next_event(opened.start(_watch(session, watched, request, pods)), what)

    perform: Perform = {
        ListJobs: page,
        WatchJobs: watch,
        ReadEvent: lambda _: _next_event(opened.current(), what),
        Pause: partial(pause, session),
    }

    def each(after: Watcher[S, E], answer: WatchAnswer) -> tuple[tuple[Watcher[S, E], Any]]:
        if after.notice is not None:
            retrying(session, what, after.notice)
        return ((after, answer),)

    steps = drive(watcher, clock, perform, opened, lambda machine: machine.streaming)
    _, end = yield from told(steps, each)
    assert isinstance(end, GiveUp), end
    raise unavailable(what, end)


def _jobs(answer: WatchAnswer) -> list[Obj]:
    """The jobs the API just answered with."""
    if isinstance(answer, PageListed):
        return answer.items
    return [answer.job] if isinstance(answer, Changed) else []


def dispatch_events(
    session: Session, kind: Kind, jobs: Sequence[Obj], namespace: str | None, told: set[str]
) -> tuple[JobEvent, ...]:
    """A ``DISPATCHED`` event for each of ``jobs`` (as a watch of the manager delivers them)
    that MultiKueue has dispatched since: one list of Workloads for those not told yet, none
    when there are none. ``told``: the uids reported so far, kept by the driver. A manager
    whose Workloads may not be read reports no dispatch (the watch goes on)."""
    waiting = [
        job
        for job in jobs
        if multikueue_managed(job)
        and str(meta(job).get("uid", "")) not in told
        and not meta(job).get("deletionTimestamp")
    ]
    if not waiting:
        return ()
    where = dispatches(session, waiting, namespace)
    events: list[JobEvent] = []
    for job in waiting:
        uid = str(meta(job).get("uid", ""))
        cluster = where[uid].cluster if uid in where else None
        found = seen(kind, job)
        if cluster and found is not None:
            told.add(uid)
            ref, now = found
            events.append(
                JobEvent(
                    kind,
                    ref,
                    Happened.DISPATCHED,
                    now.state,
                    progress=now.progress,
                    cluster=cluster,
                )
            )
    return tuple(events)


def watch_kind(
    session: Session, kind: Kind, namespace: str | None, selector: str = MANAGED
) -> Generator[tuple[JobEvent, ...], None, None]:
    """The jobs of one kind: after each answer of the API, the events it made (often none), so
    that a merge reading several kinds in turn moves each on. Closing it closes its watch."""
    watched = Watched(kind.api_version, kind.name, namespace, selector)
    pods = JobPods(session, kind)
    watcher = Watcher.start(Jobs(kind, pods), session.clock.monotonic(), session.retry_for)
    reported: set[str] = set()  # the MultiKueue jobs whose dispatch was reported
    with closing(_steps(session, watcher, watched, pods)) as steps:
        for after, answer in steps:
            dispatched = dispatch_events(session, kind, _jobs(answer), namespace, reported)
            yield after.events + dispatched


# --- Kueue's word: a watch of its Workloads beside the jobs' -------------------------------------


@frozen(repr=False)
class Said:
    """What a Workload says of its job (``job``, of uid ``uid``): Kueue's reason and message
    while it holds the job (``kueue_says``), None when it says nothing (admitted; or the
    Workload is being deleted, or gone)."""

    job: Ref
    uid: str
    word: tuple[str, str] | None


@frozen(repr=False, eq=False)
class Workloads:
    """A watch of Kueue's Workloads (read through ``api_version``): each as what it says of
    its job, an event when that changes. A Workload of no job of ours is passed over."""

    api_version: str

    def seen(self, obj: Mapping[str, Any]) -> tuple[Ref, Said] | None:
        m = meta(obj)
        name, namespace, job = m.get("name"), m.get("namespace"), held_job(obj)
        if not isinstance(name, str) or not isinstance(namespace, str) or job is None:
            return None
        kind, job_name, uid = job
        word = None if m.get("deletionTimestamp") else kueue_says(obj)
        ref = Ref(self.api_version, "Workload", namespace, name)
        return ref, Said(Ref(KINDS[kind].api_version, kind, namespace, job_name), uid, word)

    def compare(
        self, ref: Ref, before: Said | None, now: Said, appeared: Happened
    ) -> tuple[Said, ...]:
        return () if now == before else (now,)

    def gone(self, ref: Ref, last: Said, before: Said) -> Said:
        return evolve(before, word=None)


@frozen(repr=False)
class KueueNews:
    """What the watch of Workloads just told: what changed in what they say; ``ready`` once
    they have been listed (or cannot be read: the jobs' own states then stand)."""

    said: tuple[Said, ...]
    ready: bool


def watch_workloads(
    session: Session, api_version: str, namespace: str | None
) -> Generator[KueueNews, None, None]:
    """Kueue's Workloads in ``namespace``, from one list and one watch as ``watch_kind``'s:
    after each answer, what changed in what they say. Workloads that may not be read (403;
    404: Kueue's CRDs went), or watched (a Role that grants only ``list``: no polling for
    this), end it, ready: nothing more comes from Kueue."""
    watched = Watched(api_version, "Workload", namespace)
    watcher = Watcher.start(Workloads(api_version), session.clock.monotonic(), session.retry_for)
    with suppress(Forbidden, NotFound), closing(_steps(session, watcher, watched)) as steps:
        for after, _ in steps:
            yield KueueNews(after.events, after.listed)
            if after.polling:
                break
    yield KueueNews((), ready=True)


@define(repr=False, eq=False)
class Held:
    """Kueue's word on each job (what its Workload says, as the watch of Workloads last told
    it), given to the events of a job it holds (suspended: Kueue holds a job by suspending it);
    and each suspended job as last reported (its own state, and as shown), so that Kueue's word
    changing alone, the job unchanged, is an event too: ``CHANGED``, with the reason and
    message the Workload now gives. Kueue's word dropping (it admitted the job) is no event:
    the job's own change, ``admitted``, follows. Until the Workloads are listed (``ready``),
    the jobs' events are held back, so that the first come with Kueue's word."""

    ready: bool
    words: dict[Ref, Said] = attrs.field(factory=dict)
    suspended: dict[Ref, tuple[JobState, JobEvent]] = attrs.field(factory=dict)
    held_back: list[JobEvent] = attrs.field(factory=list)

    def jobs(self, events: Sequence[JobEvent]) -> list[JobEvent]:
        """The events of the jobs' watches as shown: a suspended job's with Kueue's word."""
        if not self.ready:
            self.held_back += events
            return []
        return [self._shown(event) for event in events]

    def workloads(self, news: KueueNews) -> list[JobEvent]:
        """A ``CHANGED`` event for each suspended job whose Workload now gives another reason;
        once the Workloads are listed, the events held back till then."""
        told: list[JobEvent] = []
        for said in news.said:
            known = self.words.get(said.job)
            if said.word is not None:
                self.words[said.job] = said
                if said.job in self.suspended:
                    told += self._changed(said.job)
            elif known is not None and known.uid == said.uid:  # (not a Workload of before's)
                del self.words[said.job]
        if news.ready and not self.ready:
            self.ready = True
            told += self.jobs(self.held_back)
            self.held_back = []
        return told

    def _said(self, job: Ref, own: JobState) -> JobState:
        said = self.words.get(job)
        if said is None or own.state is not State.SUSPENDED:
            return own
        return kueue_held(own, said.word)

    def _shown(self, event: JobEvent) -> JobEvent:
        before = self.suspended.pop(event.ref, None)
        state = self._said(event.ref, event.state)
        previous = event.previous if before is None or event.previous is None else before[1].state
        shown = evolve(event, state=state, previous=previous)
        if state.state is State.SUSPENDED and event.what is not Happened.DELETED:
            self.suspended[event.ref] = (event.state, shown)
        return shown

    def _changed(self, job: Ref) -> list[JobEvent]:
        own, shown = self.suspended[job]
        state = self._said(job, own)
        if (state.state, state.reason) == (shown.state.state, shown.state.reason):
            return []
        event = JobEvent(
            shown.kind, shown.ref, Happened.CHANGED, state, shown.state, shown.progress
        )
        self.suspended[job] = (own, event)
        return [event]


def _watch_on(
    session: Session, kind: Kind, namespace: str | None, selector: str, clock: Clock
) -> Iterator[tuple[JobEvent, ...]]:
    return watch_kind(evolve(session, clock=clock), kind, namespace, selector)


def _workloads_on(
    session: Session, api_version: str, namespace: str | None, clock: Clock
) -> Iterator[KueueNews]:
    return watch_workloads(evolve(session, clock=clock), api_version, namespace)


def watch_jobs(
    session: Session,
    namespace: str | None = None,
    selector: str = MANAGED,
    *,
    on_skipped: Callable[[Kind], None] | None = None,
) -> Generator[JobEvent, None, None]:
    """An event whenever a job matching ``selector`` (default: every job kfcompile created) in
    ``namespace`` (``None``: all) appears, changes state or disappears, for every kind; and
    whenever Kueue gives another reason for holding a job (its Workload changed, the job not).

    The jobs there at the start come first, as ``LISTED``; then each change as it happens, from
    one list and one watch per kind, and of Kueue's Workloads where Kueue is served, resumed
    and listed again as ``wait`` does (``WATCH_TABLE`` has all of it), never a request per job
    whose status counts its pods. A job only its pods can tell the state of
    (``status.decided_by_pods``: Trainer v2.0 writes no ``jobsStatus``) has them read with the
    page that lists it and with each change of it: as Trainer v2.0 writes nothing to the job
    when its pods start, its start is told with the job's next event, not when it happens.
    A kind the cluster does not serve is skipped, told once to ``on_skipped``. Runs until
    closed (closing it ends every watch) or until API trouble lasts longer than
    ``Session.retry_for`` (``Unavailable``).
    """
    streams: dict[str, Callable[[Clock], Iterator[tuple[JobEvent, ...] | KueueNews]]] = {}
    for kind in KINDS.values():
        if served(session, kind.api_version, kind.name):
            streams[kind.name] = partial(_watch_on, session, kind, namespace, selector)
        elif on_skipped is not None:
            on_skipped(kind)
    if not streams:
        return
    kueue = served_api(session, "Workload")
    if kueue is not None:
        streams["Workload"] = partial(_workloads_on, session, kueue, namespace)
    held = Held(ready=kueue is None)
    with closing(merger(session).merge(streams, session.clock)) as merged:
        for _, told in merged:
            yield from held.workloads(told) if isinstance(told, KueueNews) else held.jobs(told)

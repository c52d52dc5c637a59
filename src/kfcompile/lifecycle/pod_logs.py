"""The logs of a job's ranks: read as they are, or followed as they grow.

Following one rank is the ``Follower`` machine, fed what the API answered, saying what to ask
next, and ``follow_logs``, the few lines that ask the ports for it. It holds a ``Cursor``, which
knows how far the current container's log has been shown: lines are read with their server
timestamps, and a read that starts again (after a dropped connection) asks from a little before
the last line shown (``resume_since``) and passes over the lines up to it (``accept``), so none
repeats. A restarted container or a replaced pod is read from its start. While the rank has no
log to show, it says why once (``notice``, a ``Waiting``: no pod yet, not scheduled, its image
not pulled, its node gone), and again only when the why changes.

Following several is merging blocking streams, which takes threads: that is a port
(``Session.merge``, else the cluster's own, as ``KubeCluster`` has), never done here;
``InTurn`` is the merge for ports whose streams do not block. Why a rank's log cannot be read
goes to the caller's ``on_waiting``, in the caller's thread.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import closing
from functools import partial
from typing import Final, TypeVar

from attrs import evolve, field, frozen

from kfcompile import status as job_status
from kfcompile.lifecycle.objects import get, job_kind, meta
from kfcompile.lifecycle.observe import (
    MAX_RANKS,
    ListPods,
    PodsListed,
    Waiting,
    as_int,
    foreign,
    kubelet_unreachable,
    list_pods,
    newest_by_rank,
    node_pods,
    nodes_total,
    pod_waiting,
    rank_selector,
    some_ranks,
    sortable_time,
    waiting,
)
from kfcompile.lifecycle.ports import (
    ApiError,
    Clock,
    Invalid,
    Merge,
    NotFound,
    Obj,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile.lifecycle.session import (
    ClusterError,
    Failed,
    GiveUp,
    JobNotFound,
    Opened,
    Pause,
    Perform,
    Retry,
    Session,
    Slept,
    Step,
    Table,
    Unavailable,
    call,
    close,
    drive,
    ending_named,
    listing,
    named,
    pause,
    row,
    told,
    transition,
    unavailable,
    when,
)
from kfcompile.lifecycle.waiting import (
    Bookmark,
    Expired,
    Refused,
    StreamEnded,
    Trouble,
    cut_short,
    next_answer,
    only,
)

RESUME_MARGIN: Final = 2  # seconds before the last line shown that a resumed read starts
# Seconds a watch of a rank's pod lasts before the job is read again (it may end, or be
# deleted, without its pods changing).
POD_WATCH: Final = 30

# How long a rank's pod may stay unable to start (``Waiting.stuck``) before a follow gives up,
# by the reason it gives; any other reason: ``STUCK_FOR``. The kubelet retries image pulls and
# container starts with a back-off that doubles from 10 s up to its cap of 300 s
# (MaxContainerBackOff, pkg/kubelet/kubelet.go): past that, it has tried five times at growing
# intervals and will only go on trying every 5 minutes.
STUCK_FOR: Final = 300.0
GIVE_UP_AFTER: Final[dict[str, float]] = {
    # The image reference cannot be parsed: no retry of the kubelet ever pulls it.
    "InvalidImageName": 0.0,
    # The cluster-autoscaler gives up on a node it asked for after --max-node-provision-time,
    # 15 minutes by default: a pod unschedulable that long waits for a person.
    "Unschedulable": 900.0,
    # The API server cannot reach the node's kubelet: kubectl fails at once, and so do we.
    "KubeletUnreachable": 0.0,
}


@frozen(repr=False)
class Cursor:
    """How far one container's log has been shown: the server time of the last line shown,
    how many lines shown had that time, and when (on our clock) it was shown. ``skip`` counts
    the lines at that time a read still has to pass over (they were shown before)."""

    stamp: str = ""
    seen: int = 0
    shown_at: float | None = None
    skip: int = 0

    def resume(self) -> Cursor:
        """A new read of the container starts: its lines up to ``stamp`` come again."""
        return evolve(self, skip=self.seen)

    def resume_since(self, now: float) -> int | None:
        """``sinceSeconds`` for a read that goes on from here (None: nothing shown yet)."""
        if self.shown_at is None:
            return None
        return math.ceil(now - self.shown_at) + RESUME_MARGIN

    def accept(self, line: str, now: float) -> tuple[Cursor, str | None]:
        """A line as read (``<RFC 3339 time> <text>``): the cursor after it, and its text when
        it is new (None when it was shown before)."""
        raw, _, text = line.partition(" ")
        stamp = sortable_time(raw)
        if stamp < self.stamp:
            return self, None
        if stamp == self.stamp and self.skip:
            return evolve(self, skip=self.skip - 1), None
        seen = self.seen + 1 if stamp == self.stamp else 1
        return Cursor(stamp, seen, now), text


# --- the follower: what it asks, what it is told ------------------------------------------------


@frozen(repr=False)
class ReadJob:
    pass


@frozen(repr=False)
class OpenLog:
    """Read the log of ``pod`` (following it while the job runs); answer its first line."""

    pod: str
    follow: bool
    since_seconds: int | None
    tail_lines: int | None


@frozen(repr=False)
class NextLine:
    pass


@frozen(repr=False)
class WatchPod:
    """Watch the rank's pod (``selector``) for ``timeout`` seconds from ``from_version`` (the
    pods' list: every change since it, none before); answer the first event."""

    selector: str
    timeout: int
    from_version: str


@frozen(repr=False)
class NextEvent:
    pass


@frozen(repr=False)
class End:
    """Nothing more to follow; ``gave_up``: why the rank will not start, after ``waited``
    seconds of it."""

    gave_up: Waiting | None = None
    waited: float = 0.0


@frozen(repr=False)
class JobRead:
    job: Obj


@frozen(repr=False)
class JobGone:
    """Reading the job found none: it was deleted, and there is nothing more to follow."""


@frozen(repr=False)
class Line:
    text: str


@frozen(repr=False)
class LogEnded:
    """The log stream ended: the container stopped, or the server closed a finished read."""


@frozen(repr=False)
class LogRefused:
    """404 or 400: the pod went away, its container has not started, or its node is gone; or
    500 with the dial error: the API server cannot reach its node's kubelet."""

    error: ApiError | None = None


@frozen(repr=False)
class Dropped:
    """Transient trouble on the way (a dropped connection, 5xx)."""

    error: Transient


@frozen(repr=False)
class PodSeen:
    """The pod watch delivered the pod (ADDED, MODIFIED; ``gone``: DELETED)."""

    pod: Obj
    gone: bool = False


FollowRequest = (
    ReadJob | ListPods | OpenLog | NextLine | WatchPod | NextEvent | Pause | GiveUp | End
)
FollowAnswer = (
    JobRead
    | JobGone
    | PodsListed
    | Line
    | LogEnded
    | LogRefused
    | Dropped
    | PodSeen
    | Bookmark
    | StreamEnded
    | Expired
    | Refused
    | Trouble
    | Slept
)

Container = tuple[str, int]  # pod uid, restarts of the training container


class FollowPhase(enum.Enum):
    JOB = "job"  # read the job (it may have finished or gone)
    PODS = "pods"  # find the rank's newest pod
    LOG = "log"  # open its log, or read the next line of the open one
    WATCH = "watch"  # its pod has not started (or there is none): watch it until it changes
    PAUSE = "pause"  # nothing new: the pod is restarting or unreachable, or trouble
    END = "end"


# the table's words
JOB, PODS, LOG, WATCH, PAUSE, END = (
    FollowPhase.JOB,
    FollowPhase.PODS,
    FollowPhase.LOG,
    FollowPhase.WATCH,
    FollowPhase.PAUSE,
    FollowPhase.END,
)


@frozen(repr=False)
class Follower:
    """One rank's log as it grows. ``shown`` is the text the last answer made worth showing.

    ``since_seconds``/``tail_lines`` shape the first container's read until a line of it is
    shown; after that a read resumes from the cursor, and later containers come whole."""

    rank: int
    since_seconds: int | None = None
    tail_lines: int | None = None
    phase: FollowPhase = FollowPhase.JOB
    finished: bool = False
    job: Obj | None = None
    pod: str = ""
    container: Container | None = None
    first: Container | None = None
    cursor: Cursor = Cursor()
    streaming: bool = False  # a log is open and has given a line
    fresh: bool = False  # this read has shown a line
    pauses: int = 0  # pauses since a line was last shown
    found: Obj | None = None  # the rank's pod as last listed
    pods_version: str = ""  # the resourceVersion of that list
    told: Waiting | None = None  # why there is nothing to show, as last told
    # The log's transient trouble, ridden out for its retry_for (the session's).
    retry: Retry = field(factory=lambda: Retry(60.0))
    watching: bool = False  # a pod watch is open and has delivered an event
    watch_since: float = 0.0  # when the pod watch was asked for
    polling: bool = False  # the API refused to watch pods: pause and look again instead
    stuck_since: float | None = None  # since when the rank's pod cannot start
    end: End | None = None  # nothing more to follow: the job gone or done, or given up on
    # Set by the answer that left nothing to show: the follow waits, for ``why`` (if known).
    idle: bool = False
    why: Waiting | None = None
    shown: str | None = None
    notice: Waiting | None = None  # why there is nothing to show, when newly worth telling

    def next_request(self, now: float) -> FollowRequest:
        if self.phase is FollowPhase.JOB:
            return ReadJob()
        if self.phase is FollowPhase.PODS:
            assert self.job is not None
            return ListPods(self.job)
        if self.phase is FollowPhase.WATCH:
            if self.watching:
                return NextEvent()
            assert self.job is not None
            selector = rank_selector(self.job, self.rank)
            return WatchPod(selector, self._segment(now), self.pods_version)
        if self.phase is FollowPhase.PAUSE:
            if self.retry.phase is Step.PAUSE:  # trouble reading the log
                request = self.retry.next_request(now)
                assert isinstance(request, Pause | GiveUp), request
                return request
            return Pause(self.pauses)
        if self.phase is FollowPhase.END:
            assert self.end is not None
            return self.end
        if self.streaming:
            return NextLine()
        since, tail = self.cursor.resume_since(now), None
        if self.cursor.shown_at is None and self.container == self.first:
            since, tail = self.since_seconds, self.tail_lines
        return OpenLog(self.pod, not self.finished, since, tail)

    def receive(self, answer: FollowAnswer, now: float) -> Follower:
        fresh = evolve(self, shown=None, notice=None, idle=False, why=None)
        kinds = (StreamEnded, Expired)  # a pod watch that ends at once, even with a 410
        answer = cut_short(answer, self.watching, self.watch_since, now, kinds)
        return transition(FOLLOW_TABLE, fresh, answer, now)

    def _tell(self, notice: Waiting | None) -> Follower:
        if notice is None or notice == self.told:
            return self
        return evolve(self, notice=notice, told=notice)

    def _waiting(self, notice: Waiting | None, now: float) -> Follower:
        """Nothing to show, and why (``notice``): it waits (``idle``), unless its pod has been
        unable to start for too long: then it ends, giving up."""
        told = self._tell(notice)
        if notice is None or not notice.stuck:
            told = evolve(told, stuck_since=None)
        elif told.stuck_since is None:
            told = evolve(told, stuck_since=now)
        since = told.stuck_since
        if notice is not None and since is not None and now - since >= _patience(notice):
            return evolve(told, end=End(notice, now - since))
        return evolve(told, idle=True, why=notice, watching=False, watch_since=now)

    def _segment(self, now: float) -> int:
        """How long the next pod watch lasts: ``POD_WATCH``, or until it is time to give up."""
        if self.stuck_since is None or self.told is None:
            return POD_WATCH
        left = self.stuck_since + _patience(self.told) - now
        return max(1, min(POD_WATCH, math.ceil(left)))

    # --- the rows

    def _read(self, answer: JobRead, now: float) -> Follower:
        finished = job_status.job_state(answer.job).finished
        return evolve(self, job=answer.job, finished=finished)

    def _found(self, answer: PodsListed, now: float) -> Follower:
        assert self.job is not None
        pod = newest_by_rank(self.job, answer.pods).get(self.rank)
        if pod is None:
            notice = waiting(self.job, self.rank, None)
            if self.finished:
                return evolve(self, found=None, end=End())._tell(notice)
            return evolve(self, found=None, pods_version=answer.version)._waiting(notice, now)
        name = str(meta(pod).get("name", ""))
        container = (str(meta(pod).get("uid", name)), _restarts(pod, self._container_name()))
        cursor = self.cursor if container == self.container else Cursor()
        found = evolve(
            self,
            pod=name,
            container=container,
            first=self.first or container,
            cursor=cursor.resume(),
            fresh=False,
            found=pod,
            pods_version=answer.version,
        )
        why = pod_waiting(pod, rank=self.rank)
        if why is not None and self.told is not None and why.reason == self.told.reason:
            return found._waiting(why, now)  # not started, as when its log was last read
        return found

    def _line(self, answer: Line, now: float) -> Follower:
        cursor, text = self.cursor.accept(answer.text, now)
        read = evolve(self, cursor=cursor, streaming=True)._answered()
        if text is None:
            return read
        return evolve(read, fresh=True, pauses=0, told=None, stuck_since=None, shown=text)

    def _gone(self, answer: JobGone, now: float) -> Follower:
        return evolve(self, end=End())

    def _answered(self) -> Follower:
        """The log answered: trouble reading it, if there was any, is over."""
        return evolve(self, retry=Retry(self.retry.retry_for))

    def _ended(self, answer: LogEnded | LogRefused, now: float) -> Follower:
        ended = evolve(self, streaming=False)._answered()
        refused = answer.error if isinstance(answer, LogRefused) else None
        if self.finished:
            notice = None if self.fresh or self.job is None else self._why(refused)
            return evolve(ended, end=End())._tell(notice)
        if self.fresh or self.job is None:
            return ended  # something was read: the job again, then its log
        return ended._waiting(self._why(refused), now)

    def _why(self, refused: ApiError | None) -> Waiting | None:
        assert self.job is not None
        return waiting(self.job, self.rank, self.found, refused)

    def _dropped(self, answer: Dropped, now: float) -> Follower:
        """Read again, finished or not, as the retry machine says; said once per trouble."""
        first = self.retry.phase is Step.ATTEMPT and self.retry.since is None
        retry = self.retry.receive(Failed(answer.error), now)
        dropped = evolve(self, streaming=False, retry=retry)
        if not first:
            return dropped
        said = (
            f"reading the log of pod {self.pod}: {answer.error.line}; retrying for up to "
            f"{self.retry.retry_for:g}s"
        )
        return evolve(dropped, notice=Waiting(self.rank, "Retrying", said))

    def _slept(self, answer: Slept, now: float) -> Follower:
        if self.retry.phase is Step.PAUSE:
            return evolve(self, retry=self.retry.receive(answer, now))
        return evolve(self, pauses=self.pauses + 1)

    # --- the pod watch

    def _pod_seen(self, answer: PodSeen, now: float) -> Follower:
        """The pod as it is: when it stands as it did (a message rewritten, a label added, or
        its ADDED from a watch begun without a version), watch on; when it was scheduled, a
        container started or restarted, or the pod went or is another, look again at the job
        and its pods (and read its log)."""
        container = self._container_name()
        if not answer.gone and _standing(answer.pod, container) == _standing(self.found, container):
            return evolve(self, watching=True, found=answer.pod)
        return evolve(self, watching=False)

    def _bookmark(self, answer: Bookmark, now: float) -> Follower:
        return evolve(self, watching=True)

    def _watch_ended(self, answer: StreamEnded | Expired, now: float) -> Follower:
        """The segment is over: look at the job and its pods again."""
        return evolve(self, watching=False)

    def _watch_trouble(self, answer: Trouble, now: float) -> Follower:
        """The pod watch failed (or ended as soon as it started): pause (longer each time),
        then look again."""
        return evolve(self, watching=False)

    def _watch_refused(self, answer: Refused, now: float) -> Follower:
        """No right to watch pods: poll, as before there was a watch."""
        return evolve(self, watching=False, polling=True)

    def _container_name(self) -> str:
        assert self.job is not None
        return job_kind(Ref.of(self.job)).container


def _over(follower: Follower) -> bool:
    return follower.end is not None


def _pod_not_started(follower: Follower) -> bool:
    """Nothing to show because its pod has not started (or there is none): watched until it
    changes, unless the API refuses to watch pods."""
    why = follower.why
    return follower.idle and why is not None and why.reason != "LogRefused" and not follower.polling


def _idle(follower: Follower) -> bool:
    return follower.idle


def _as_it_stood(follower: Follower) -> bool:
    return follower.watching


# The job gone, or finished and its log drained; or its pod unable to start for too long.
OVER: Final = when("over", _over, END)
# Nothing to show (``_waiting``): its pod watched until it changes, else a pause.
IDLE: Final = (
    when("its pod not started", _pod_not_started, WATCH),
    when("nothing to read", _idle, PAUSE),
)

FOLLOW_TABLE: Final[Table[Follower]] = {
    # (phase, answer): the row, the phase it leads to, and when elsewhere
    (JOB, JobRead): row(Follower._read, PODS),
    (JOB, JobGone): row(Follower._gone, END),
    (PODS, PodsListed): row(Follower._found, LOG, OVER, *IDLE),  # listed again as it was: idle
    (LOG, Line): row(Follower._line, LOG),  # the line shown when it is new
    # JOB when something was read. A row that shows nothing says why (``notice``) when the why
    # is new: no pod, a pod that cannot be scheduled or pull its image, a node that is gone or
    # whose kubelet is out of reach (END: kubectl too fails at once).
    (LOG, LogEnded): row(Follower._ended, JOB, OVER, *IDLE),
    (LOG, LogRefused): row(Follower._ended, JOB, OVER, *IDLE),
    (LOG, Dropped): row(Follower._dropped, PAUSE),  # then read again from the cursor
    # Its pod has not started, or there is none: watched from the pods' list until it is
    # scheduled, a container starts or the pod goes; stuck past GIVE_UP_AFTER: over.
    (WATCH, PodSeen): row(Follower._pod_seen, JOB, when("as it stood", _as_it_stood, WATCH)),
    (WATCH, Bookmark): row(Follower._bookmark, WATCH),
    # the segment is over (one that ended as soon as it started is Trouble)
    (WATCH, StreamEnded): row(Follower._watch_ended, JOB),
    (WATCH, Expired): row(Follower._watch_ended, JOB),
    (WATCH, Trouble): row(Follower._watch_trouble, PAUSE),  # then JOB
    (WATCH, Refused): row(Follower._watch_refused, PAUSE),  # polling from now on
    (PAUSE, Slept): row(Follower._slept, JOB),
}


def _patience(notice: Waiting) -> float:
    """Seconds a rank's pod may stay unable to start for this reason."""
    return GIVE_UP_AFTER.get(notice.reason, STUCK_FOR)


def _standing(pod: Obj | None, container: str) -> tuple[object, ...] | None:
    """What of a rank's pod decides whether its log can be read: which pod it is, where it
    runs, its phase, why it has not started, its training container's restarts."""
    if pod is None:
        return None
    spec, status, why = pod.get("spec"), pod.get("status"), pod_waiting(pod)
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    reason = None if why is None else why.reason
    return meta(pod).get("uid"), node, phase, reason, _restarts(pod, container)


def _restarts(pod: Obj, container: str) -> int:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container:
            return as_int(c.get("restartCount")) or 0
    return 0


# --- the drivers: one rank followed, or read as it is ---------------------------------------------

K = TypeVar("K")
T = TypeVar("T")
OnWaiting = Callable[[Waiting], object]


class NoSuchRank(ClusterError):
    """The rank asked for is not one of the job's (a usage error: the CLI exits 2)."""


class CannotStart(ClusterError):
    """A followed rank's pod has been unable to start for longer than it is waited for
    (``GIVE_UP_AFTER``)."""


class CannotRead(ClusterError):
    """A followed rank's log cannot be read, and waiting does not help: the API server cannot
    reach the kubelet of its pod's node (kubectl fails at once too)."""


@frozen
class LogLine:
    """One line of a job's log: the rank (node index) it came from, and its text (no line
    end; at most 64 KiB, the rest said at its end)."""

    rank: int | None
    text: str


def _log(session: Session, ref: Ref, request: OpenLog) -> Iterator[str]:
    """The log, as a generator: what the port raises comes with the first line."""
    yield from session.cluster.pod_log(
        ref.namespace or "default",
        request.pod,
        container=job_kind(ref).container,
        follow=request.follow,
        since_seconds=request.since_seconds,
        tail_lines=request.tail_lines,
        timestamps=True,
    )


def _next_line(stream: Iterator[str]) -> FollowAnswer:
    try:
        line = next(stream, None)
    except Transient as exc:
        return LogRefused(exc) if kubelet_unreachable(exc) else Dropped(exc)
    except (NotFound, Invalid) as exc:
        return LogRefused(exc)
    return LogEnded() if line is None else Line(line)


def _pod_watch(session: Session, ref: Ref, request: WatchPod) -> Iterator[WatchEvent]:
    """The watch of the rank's pod, as a generator: what the port raises comes with the first
    event; a pod the server sends that is not the rank's is passed over."""
    events = session.cluster.watch(
        "v1",
        "Pod",
        ref.namespace,
        resource_version=request.from_version,
        label_selector=request.selector,
        timeout_seconds=request.timeout,
    )
    yield from only(events, lambda pod: not foreign(pod, ref.namespace, request.selector))


# A pod watch's event type -> the Follower's answer.
_POD_EVENTS: Final[dict[str, Callable[[Obj], FollowAnswer]]] = {
    "ADDED": PodSeen,
    "MODIFIED": PodSeen,
    "DELETED": lambda pod: PodSeen(pod, gone=True),
    "BOOKMARK": lambda obj: Bookmark(""),
}


def _follow(
    session: Session, ref: Ref, rank: int, since_seconds: int | None, tail_lines: int | None
) -> Generator[str | Waiting, None, None]:
    """The ``Follower``'s driver: the lines it shows, and why there are none when it says so."""
    clock = session.clock
    follower = Follower(rank, since_seconds, tail_lines, retry=Retry(session.retry_for))
    opened = Opened()  # the log, or the pod watch, that is open
    watching = listing("Pod", ref.namespace, "watch")
    perform: Perform = {
        ReadJob: lambda _: _read_job(session, ref),
        ListPods: lambda request: list_pods(session, request.job),
        OpenLog: lambda request: _next_line(opened.start(_log(session, ref, request))),
        NextLine: lambda _: _next_line(opened.current()),
        WatchPod: lambda request: next_answer(
            opened.start(_pod_watch(session, ref, request)), _POD_EVENTS, watching
        ),
        NextEvent: lambda _: next_answer(opened.current(), _POD_EVENTS, watching),
        Pause: partial(pause, session),
    }

    def each(after: Follower, answer: FollowAnswer) -> list[str | Waiting]:
        return [item for item in (after.notice, after.shown) if item is not None]

    steps = drive(follower, clock, perform, opened, lambda f: f.streaming or f.watching)
    follower, end = yield from told(steps, each)
    match end:
        case GiveUp():
            pod = Ref("v1", "Pod", ref.namespace, follower.pod)
            raise unavailable(named("read logs of", pod), end)
        case End(gave_up=Waiting(reason="KubeletUnreachable") as why):
            raise CannotRead(str(why))
        case End(gave_up=Waiting() as why, waited=waited):
            raise CannotStart(f"{why}; giving up: it has not started for {waited:.0f}s")


def _read_job(session: Session, ref: Ref) -> FollowAnswer:
    job = get(session, ref)
    return JobGone() if job is None else JobRead(job)


def _tell(on_waiting: OnWaiting | None, notice: Waiting) -> None:
    if on_waiting is not None:
        on_waiting(notice)


def _told(items: Iterator[str | Waiting], on_waiting: OnWaiting | None) -> Iterator[str]:
    """The lines; each ``Waiting`` goes to ``on_waiting``."""
    for item in items:
        if isinstance(item, Waiting):
            _tell(on_waiting, item)
        else:
            yield item


def follow_logs(
    session: Session,
    ref: Ref,
    rank: int,
    *,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
    on_waiting: OnWaiting | None = None,
) -> Generator[str, None, None]:
    """One rank's log as it grows, across dropped connections, container restarts and pod
    replacements; ends when the job has finished (or is deleted) and the log is drained.
    While there is nothing to read, ``on_waiting`` is told why, once per change of why.
    Closing the generator closes the stream it reads. ``NoSuchRank`` when the job has no rank
    ``rank``; ``CannotStart`` when its pod stays unable to start (``GIVE_UP_AFTER``)."""
    _checked(_job(session, ref), rank)
    with closing(_follow(session, ref, rank, since_seconds, tail_lines)) as items:
        yield from _told(items, on_waiting)


def _job(session: Session, ref: Ref) -> Obj:
    job = get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    return job


def chosen_ranks(job: Obj, pods: Mapping[int, Obj]) -> tuple[list[int], Waiting | None]:
    """The ranks to read (``pods``: the newest pod of each rank): those below numNodes whose
    pod exists, and those without one up to ``MAX_RANKS``; with why the rest are not read,
    said once for all of them (None when every rank is read)."""
    total = nodes_total(job)
    found = some_ranks(total, pods)
    left = total - len(found)
    if left <= 0:
        return found, None
    said = (
        f"{left} more ranks (up to rank {total - 1}) have no pod: not read (only ranks with a "
        f"pod are read past rank {MAX_RANKS - 1})"
    )
    return found, Waiting(None, "NoPod", said)


def _checked(job: Obj, rank: int) -> int:
    """``rank``, when the job has it; ``NoSuchRank`` otherwise."""
    total = nodes_total(job)
    if not 0 <= rank < total:
        has = "rank 0" if total == 1 else f"ranks 0 to {total - 1}"
        raise NoSuchRank(f"{Ref.of(job)} has {has}: there is no rank {rank}")
    return rank


def ranks(session: Session, ref: Ref) -> list[int]:
    """The ranks a command reads (``chosen_ranks``)."""
    job = _job(session, ref)
    return chosen_ranks(job, newest_by_rank(job, node_pods(session, job)))[0]


def _read(
    session: Session,
    job: Obj,
    rank: int,
    pod: Obj | None,
    since_seconds: int | None,
    tail_lines: int | None,
) -> Iterator[str] | Waiting:
    """One rank's log as it is now, its lines as they arrive (a log of any size is never held
    whole), or why there is none (an empty answer from a pod that has not started, a refused
    read, no pod). The read is retried as any call is until its first line has come; lines
    given cannot be taken back, so a read that breaks after them ends in ``Unavailable``."""
    if pod is None:
        return waiting(job, rank, None) or iter(())
    ref, name = Ref.of(job), str(meta(pod)["name"])
    what = named("read logs of", Ref("v1", "Pod", ref.namespace, name))

    def first_line() -> tuple[str | None, Iterator[str]] | Transient:
        stream = session.cluster.pod_log(
            ref.namespace or "default",
            name,
            container=job_kind(ref).container,
            since_seconds=since_seconds,
            tail_lines=tail_lines,
        )
        try:
            return next(stream, None), stream
        except Transient as exc:
            if kubelet_unreachable(exc):
                return exc  # the node's kubelet, not the API server: asking again won't help
            raise

    try:
        opened = call(session, what, first_line)
    except (NotFound, Invalid) as exc:
        return waiting(job, rank, pod, exc) or iter(())
    if isinstance(opened, Transient):
        return waiting(job, rank, pod, opened) or iter(())
    first, stream = opened
    if first is None:
        return waiting(job, rank, pod) or iter(())
    return _rest(what, first, stream)


def _rest(what: str, first: str, stream: Iterator[str]) -> Generator[str, None, None]:
    """``first``, then the rest of the log ``stream`` (closed when this is)."""
    given = 1
    try:
        with ending_named(what):
            yield first
            for line in stream:
                yield line
                given += 1
    except Transient as exc:
        raise Unavailable(f"{what}: the log broke off after {given} lines ({exc})") from None
    finally:
        close(stream)


def read_logs(
    session: Session,
    ref: Ref,
    rank: int,
    *,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> list[str]:
    """One rank's log as it is now, whole (empty when it cannot be read: ``logs`` says why, and
    reads it line by line); ``NoSuchRank`` when the job has no such rank."""
    job = _job(session, ref)
    pod = newest_by_rank(job, node_pods(session, job)).get(_checked(job, rank))
    read = _read(session, job, rank, pod, since_seconds, tail_lines)
    return [] if isinstance(read, Waiting) else list(read)


# --- several ranks ------------------------------------------------------------------------------


@frozen(repr=False, eq=False)
class InTurn:
    """``Merge`` without threads, for streams that do not block (an in-memory cluster driven
    by a fake clock): one item of each stream in turn. A stream that blocks holds back the
    others, so a cluster whose streams block brings its own merge (``KubeCluster`` does)."""

    def merge(
        self, streams: Mapping[K, Callable[[Clock], Iterator[T]]], clock: Clock
    ) -> Generator[tuple[K, T], None, None]:
        live = {key: start(clock) for key, start in streams.items()}
        try:
            while live:
                for key, stream in list(live.items()):
                    try:
                        item = next(stream)
                    except StopIteration:
                        del live[key]
                    else:
                        yield key, item
        finally:
            for stream in live.values():
                close(stream)


def merger(session: Session) -> Merge:
    """How this session reads several followed logs at once."""
    if session.merge is not None:
        return session.merge
    if isinstance(session.cluster, Merge):
        return session.cluster
    return InTurn()


def _follow_on(
    session: Session, ref: Ref, rank: int, options: dict[str, int | None], clock: Clock
) -> Iterator[str | Waiting]:
    since, tail = options["since_seconds"], options["tail_lines"]
    return _follow(evolve(session, clock=clock), ref, rank, since, tail)


def logs(
    session: Session,
    ref: Ref,
    *,
    rank: int | None = None,
    follow: bool = False,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
    on_waiting: OnWaiting | None = None,
) -> Generator[LogLine, None, None]:
    """One rank's log (``rank``), or every rank's, interleaved as the lines come. Followed,
    several ranks are read at once by the session's merge; closing the generator stops them.
    A rank with nothing to read is told to ``on_waiting`` with why (followed: once per change
    of why, and the follow goes on). ``NoSuchRank`` when the job has no rank ``rank``; of
    every rank, those ``chosen_ranks`` picks."""
    options = {"since_seconds": since_seconds, "tail_lines": tail_lines}
    job = _job(session, ref)
    pods = newest_by_rank(job, node_pods(session, job))  # one list for every rank
    chosen, rest = ([_checked(job, rank)], None) if rank is not None else chosen_ranks(job, pods)
    if rest is not None:
        _tell(on_waiting, rest)
    if not follow:
        for r in chosen:
            read = _read(session, job, r, pods.get(r), since_seconds, tail_lines)
            if isinstance(read, Waiting):
                _tell(on_waiting, read)
                continue
            try:
                for text in read:
                    yield LogLine(r, text)
            finally:
                close(read)  # the rest of its answer unread: its connection dropped
        return
    if len(chosen) == 1:
        with closing(_follow(session, ref, chosen[0], since_seconds, tail_lines)) as items:
            for text in _told(items, on_waiting):
                yield LogLine(chosen[0], text)
        return
    streams = {r: partial(_follow_on, session, ref, r, options) for r in chosen}
    with closing(merger(session).merge(streams, session.clock)) as merged:
        for r, item in merged:
            if isinstance(item, Waiting):
                _tell(on_waiting, item)
            else:
                yield LogLine(r, item)

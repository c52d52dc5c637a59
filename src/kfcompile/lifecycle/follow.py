"""The ``Follower``: one rank's log followed as it grows, as a machine fed what the API
answered that says what to ask next (``logs.follow_logs`` is the driver that asks the ports).

It holds a ``Cursor``, which knows how far the current container's log has been shown: lines
are read with their server timestamps, and a read that starts again (after a dropped
connection) asks from a little before the last line shown (``resume_since``) and passes over
the lines up to it (``accept``), so none repeats. A restarted container or a replaced pod is
read from its start. While the rank has no log to show, it says why once (``notice``, a
``Waiting``), and again only when the why changes.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Final

from attrs import evolve, field, frozen

from kfcompile import status as job_status
from kfcompile.lifecycle.objects import job_kind, meta
from kfcompile.lifecycle.observe import (
    ListPods,
    PodsListed,
    Waiting,
    as_int,
    newest_by_rank,
    pod_waiting,
    rank_selector,
    sortable_time,
    waiting,
)
from kfcompile.lifecycle.ports import ApiError, Obj, Ref, Transient
from kfcompile.lifecycle.session import (
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
    Expired,
    Refused,
    StreamEnded,
    Trouble,
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


@frozen(repr=False, eq=False)
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


@frozen(repr=False, eq=False)
class JobRead:
    job: Obj | None


@frozen(repr=False, eq=False)
class Line:
    text: str


@frozen(repr=False, eq=False)
class LogEnded:
    """The log stream ended: the container stopped, or the server closed a finished read."""


@frozen(repr=False, eq=False)
class LogRefused:
    """404 or 400: the pod went away, its container has not started, or its node is gone; or
    500 with the dial error: the API server cannot reach its node's kubelet."""

    error: ApiError | None = None


@frozen(repr=False, eq=False)
class Dropped:
    """Transient trouble on the way (a dropped connection, 5xx)."""

    error: Transient


@frozen(repr=False, eq=False)
class PodSeen:
    """The pod watch delivered the pod (ADDED, MODIFIED; ``gone``: DELETED)."""

    pod: Obj
    gone: bool = False


FollowRequest = (
    ReadJob | ListPods | OpenLog | NextLine | WatchPod | NextEvent | Pause | GiveUp | End
)
FollowAnswer = (
    JobRead
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


@frozen(repr=False, eq=False)
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
    entered: float = 0.0  # when it gave up
    polling: bool = False  # the API refused to watch pods: pause and look again instead
    stuck_since: float | None = None  # since when the rank's pod cannot start
    gave_up: Waiting | None = None
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
            if self.retry.step is Step.PAUSE:  # trouble reading the log
                request = self.retry.next_request(now)
                assert isinstance(request, Pause | GiveUp), request
                return request
            return Pause(self.pauses)
        if self.phase is FollowPhase.END:
            waited = 0.0 if self.stuck_since is None else self.entered - self.stuck_since
            return End(self.gave_up, waited) if self.gave_up else End()
        if self.streaming:
            return NextLine()
        since, tail = self.cursor.resume_since(now), None
        if self.cursor.shown_at is None and self.container == self.first:
            since, tail = self.since_seconds, self.tail_lines
        return OpenLog(self.pod, not self.finished, since, tail)

    def receive(self, answer: FollowAnswer, now: float) -> Follower:
        fresh = evolve(self, shown=None, notice=None)
        return transition(FOLLOW_TABLE, fresh, self.phase, answer, now)

    def _tell(self, notice: Waiting | None) -> Follower:
        if notice is None or notice == self.told:
            return self
        return evolve(self, notice=notice, told=notice)

    def _waiting(self, notice: Waiting | None, now: float) -> Follower:
        """Nothing to show, and why (``notice``): watch the pod when it has not started (or
        there is none), else pause; give up once it has been unable to start for too long."""
        told = self._tell(notice)
        if notice is None or not notice.stuck:
            told = evolve(told, stuck_since=None)
        elif told.stuck_since is None:
            told = evolve(told, stuck_since=now)
        since = told.stuck_since
        if notice is not None and since is not None and now - since >= _patience(notice):
            return evolve(told, phase=FollowPhase.END, gave_up=notice, entered=now)
        watch = notice is not None and notice.reason != "LogRefused" and not self.polling
        phase = FollowPhase.WATCH if watch else FollowPhase.PAUSE
        return evolve(told, phase=phase, watching=False, watch_since=now)

    def _segment(self, now: float) -> int:
        """How long the next pod watch lasts: ``POD_WATCH``, or until it is time to give up."""
        if self.stuck_since is None or self.told is None:
            return POD_WATCH
        left = self.stuck_since + _patience(self.told) - now
        return max(1, min(POD_WATCH, math.ceil(left)))

    # --- the rows

    def _read(self, answer: JobRead, now: float) -> Follower:
        if answer.job is None:
            return evolve(self, phase=FollowPhase.END)  # deleted: nothing more to follow
        finished = job_status.job_state(answer.job).finished
        return evolve(self, phase=FollowPhase.PODS, job=answer.job, finished=finished)

    def _found(self, answer: PodsListed, now: float) -> Follower:
        assert self.job is not None
        pod = newest_by_rank(self.job, answer.pods).get(self.rank)
        if pod is None:
            notice = waiting(self.job, self.rank, None)
            if self.finished:
                return evolve(self, phase=FollowPhase.END, found=None)._tell(notice)
            return evolve(self, found=None, pods_version=answer.version)._waiting(notice, now)
        name = str(meta(pod).get("name", ""))
        container = (str(meta(pod).get("uid", name)), _restarts(pod, self._container_name()))
        cursor = self.cursor if container == self.container else Cursor()
        found = evolve(
            self,
            phase=FollowPhase.LOG,
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

    def _answered(self) -> Follower:
        """The log answered: trouble reading it, if there was any, is over."""
        return evolve(self, retry=Retry(self.retry.retry_for))

    def _ended(self, answer: LogEnded | LogRefused, now: float) -> Follower:
        ended = evolve(self, streaming=False)._answered()
        if self.finished:
            refused = answer.error if isinstance(answer, LogRefused) else None
            notice = None if self.fresh or self.job is None else self._why(refused)
            return evolve(ended, phase=FollowPhase.END)._tell(notice)
        if self.fresh or self.job is None:
            return evolve(ended, phase=FollowPhase.JOB)
        refused = answer.error if isinstance(answer, LogRefused) else None
        return ended._waiting(self._why(refused), now)

    def _why(self, refused: ApiError | None) -> Waiting | None:
        assert self.job is not None
        return waiting(self.job, self.rank, self.found, refused)

    def _dropped(self, answer: Dropped, now: float) -> Follower:
        """Read again, finished or not, as the retry machine says; said once per trouble."""
        first = self.retry.step is Step.ATTEMPT and self.retry.since is None
        retry = self.retry.receive(Failed(answer.error), now)
        dropped = evolve(self, phase=FollowPhase.PAUSE, streaming=False, retry=retry)
        if not first:
            return dropped
        said = (
            f"reading the log of pod {self.pod}: {answer.error.line}; retrying for up to "
            f"{self.retry.retry_for:g}s"
        )
        return evolve(dropped, notice=Waiting(self.rank, "Retrying", said))

    def _slept(self, answer: Slept, now: float) -> Follower:
        if self.retry.step is Step.PAUSE:
            return evolve(self, phase=FollowPhase.JOB, retry=self.retry.receive(answer, now))
        return evolve(self, phase=FollowPhase.JOB, pauses=self.pauses + 1)

    # --- the pod watch

    def _pod_seen(self, answer: PodSeen, now: float) -> Follower:
        """The pod as it is: when it stands as it did (a message rewritten, a label added, or
        its ADDED from a watch begun without a version), watch on; when it was scheduled, a
        container started or restarted, or the pod went or is another, look again at the job
        and its pods (and read its log)."""
        container = self._container_name()
        if not answer.gone and _standing(answer.pod, container) == _standing(self.found, container):
            return evolve(self, watching=True, found=answer.pod)
        return evolve(self, phase=FollowPhase.JOB, watching=False)

    def _bookmark(self, answer: Bookmark, now: float) -> Follower:
        return evolve(self, watching=True)

    def _watch_ended(self, answer: StreamEnded | Expired, now: float) -> Follower:
        """The segment is over: look at the job and its pods again. A watch that ended as soon
        as it started, with nothing delivered, is trouble."""
        if not self.watching and now - self.watch_since < SHORT_WATCH:
            return self._watch_trouble(Trouble(Transient(0, "StreamEnded", "")), now)
        return evolve(self, phase=FollowPhase.JOB, watching=False)

    def _watch_trouble(self, answer: Trouble, now: float) -> Follower:
        """The pod watch failed: pause (longer each time), then look again."""
        return evolve(self, phase=FollowPhase.PAUSE, watching=False)

    def _watch_refused(self, answer: Refused, now: float) -> Follower:
        """No right to watch pods: poll, as before there was a watch."""
        return evolve(self, phase=FollowPhase.PAUSE, watching=False, polling=True)

    def _container_name(self) -> str:
        assert self.job is not None
        return job_kind(Ref.of(self.job)).container


FOLLOW_TABLE: Final[Table[Follower]] = {
    # (phase, answer): the row, and the phases it may lead to
    (JOB, JobRead): row(Follower._read, PODS, END),  # END: the job is gone
    # LOG; no pod yet: WATCH or PAUSE (``_waiting``), or END when finished
    (PODS, PodsListed): row(Follower._found, LOG, WATCH, PAUSE, END),
    (LOG, Line): row(Follower._line, LOG),  # the line shown when it is new
    # END when finished; JOB when something was read; else WATCH or PAUSE (``_waiting``)
    (LOG, LogEnded): row(Follower._ended, END, JOB, WATCH, PAUSE),
    (LOG, LogRefused): row(Follower._ended, END, JOB, WATCH, PAUSE),
    # A row that shows nothing says why (``notice``) when the why is new: no pod, a pod that
    # cannot be scheduled or pull its image, a node that is gone or whose kubelet is out of
    # reach (END: kubectl too fails at once).
    (LOG, Dropped): row(Follower._dropped, PAUSE),  # then read again from the cursor
    # Its pod has not started, or there is none: watch it (WATCH) from the pods' list, unless
    # the API refuses to, until it is scheduled, a container starts or the pod goes; stuck
    # past GIVE_UP_AFTER: END, giving up. Listed again as it was, its log is not read again.
    (WATCH, PodSeen): row(Follower._pod_seen, JOB, WATCH),  # JOB: it changed
    (WATCH, Bookmark): row(Follower._bookmark, WATCH),
    # JOB; PAUSE when the watch ended as soon as it started
    (WATCH, StreamEnded): row(Follower._watch_ended, JOB, PAUSE),
    (WATCH, Expired): row(Follower._watch_ended, JOB, PAUSE),
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

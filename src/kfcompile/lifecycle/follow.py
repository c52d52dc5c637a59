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
from typing import Final

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.lifecycle.objects import job_kind, meta
from kfcompile.lifecycle.observe import (
    ListPods,
    PodsListed,
    Waiting,
    as_int,
    newest_by_rank,
    sortable_time,
    waiting,
)
from kfcompile.lifecycle.session import Pause, Slept, Table, transition
from kfcompile.ports import ApiError, Obj, Ref, Transient

RESUME_MARGIN: Final = 2  # seconds before the last line shown that a resumed read starts


@frozen
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


@frozen
class ReadJob:
    pass


@frozen
class OpenLog:
    """Read the log of ``pod`` (following it while the job runs); answer its first line."""

    pod: str
    follow: bool
    since_seconds: int | None
    tail_lines: int | None


@frozen
class NextLine:
    pass


@frozen
class End:
    pass


@frozen
class JobRead:
    job: Obj | None


@frozen
class Line:
    text: str


@frozen
class LogEnded:
    """The log stream ended: the container stopped, or the server closed a finished read."""


@frozen
class LogRefused:
    """404 or 400: the pod went away, its container has not started, or its node is gone."""

    error: ApiError | None = None


@frozen
class Dropped:
    """Transient trouble on the way (a dropped connection, 5xx)."""

    error: Transient


FollowRequest = ReadJob | ListPods | OpenLog | NextLine | Pause | End
FollowAnswer = JobRead | PodsListed | Line | LogEnded | LogRefused | Dropped | Slept

Container = tuple[str, int]  # pod uid, restarts of the training container


class Phase(enum.Enum):
    JOB = "job"  # read the job (it may have finished or gone)
    PODS = "pods"  # find the rank's newest pod
    LOG = "log"  # open its log, or read the next line of the open one
    PAUSE = "pause"  # nothing new: the pod is coming, restarting or unreachable
    END = "end"


@frozen
class Follower:
    """One rank's log as it grows. ``shown`` is the text the last answer made worth showing.

    ``since_seconds``/``tail_lines`` shape the first container's read until a line of it is
    shown; after that a read resumes from the cursor, and later containers come whole."""

    rank: int
    since_seconds: int | None = None
    tail_lines: int | None = None
    phase: Phase = Phase.JOB
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
    told: Waiting | None = None  # why there is nothing to show, as last told
    shown: str | None = None
    notice: Waiting | None = None  # why there is nothing to show, when newly worth telling

    def next_request(self, now: float) -> FollowRequest:
        if self.phase is Phase.JOB:
            return ReadJob()
        if self.phase is Phase.PODS:
            assert self.job is not None
            return ListPods(self.job)
        if self.phase is Phase.PAUSE:
            return Pause(self.pauses)
        if self.phase is Phase.END:
            return End()
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

    # --- the rows

    def _read(self, answer: JobRead, now: float) -> Follower:
        if answer.job is None:
            return evolve(self, phase=Phase.END)  # deleted: nothing more to follow
        finished = job_status.job_state(answer.job).finished
        return evolve(self, phase=Phase.PODS, job=answer.job, finished=finished)

    def _found(self, answer: PodsListed, now: float) -> Follower:
        assert self.job is not None
        pod = newest_by_rank(self.job, answer.pods).get(self.rank)
        if pod is None:
            ahead = evolve(self, phase=Phase.END if self.finished else Phase.PAUSE, found=None)
            return ahead._tell(waiting(self.job, self.rank, None))
        name = str(meta(pod).get("name", ""))
        container = (str(meta(pod).get("uid", name)), _restarts(pod, self._container_name()))
        cursor = self.cursor if container == self.container else Cursor()
        return evolve(
            self,
            phase=Phase.LOG,
            pod=name,
            container=container,
            first=self.first or container,
            cursor=cursor.resume(),
            fresh=False,
            found=pod,
        )

    def _line(self, answer: Line, now: float) -> Follower:
        cursor, text = self.cursor.accept(answer.text, now)
        if text is None:
            return evolve(self, cursor=cursor, streaming=True)
        return evolve(
            self, cursor=cursor, streaming=True, fresh=True, pauses=0, told=None, shown=text
        )

    def _ended(self, answer: LogEnded | LogRefused, now: float) -> Follower:
        phase = Phase.JOB if self.fresh else Phase.PAUSE
        ahead = evolve(self, phase=Phase.END if self.finished else phase, streaming=False)
        if self.fresh or self.job is None:
            return ahead
        refused = answer.error if isinstance(answer, LogRefused) else None
        return ahead._tell(waiting(self.job, self.rank, self.found, refused))

    def _dropped(self, answer: Dropped, now: float) -> Follower:
        return evolve(self, phase=Phase.PAUSE, streaming=False)  # read again, finished or not

    def _slept(self, answer: Slept, now: float) -> Follower:
        return evolve(self, phase=Phase.JOB, pauses=self.pauses + 1)

    def _container_name(self) -> str:
        assert self.job is not None
        return job_kind(Ref.of(self.job)).container


FOLLOW_TABLE: Final[Table[Follower]] = {
    # (phase, answer): the row, and where it goes
    (Phase.JOB, JobRead): Follower._read,  # PODS; END when the job is gone
    (Phase.PODS, PodsListed): Follower._found,  # LOG; no pod yet: PAUSE, or END when finished
    (Phase.LOG, Line): Follower._line,  # LOG (the line shown when it is new)
    (Phase.LOG, LogEnded): Follower._ended,  # END when finished; JOB; PAUSE if nothing new
    (Phase.LOG, LogRefused): Follower._ended,  # the same: look at the pod again
    # A row that shows nothing says why (``notice``) when the why is new: no pod, a pod that
    # cannot be scheduled or pull its image, a node that is gone.
    (Phase.LOG, Dropped): Follower._dropped,  # PAUSE, then read again from the cursor
    (Phase.PAUSE, Slept): Follower._slept,  # JOB
}


def _restarts(pod: Obj, container: str) -> int:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container:
            return as_int(c.get("restartCount")) or 0
    return 0

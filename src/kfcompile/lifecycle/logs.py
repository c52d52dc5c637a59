"""Logs of a job's ranks: read as they are, or followed as they grow.

Following one rank is the ``Follower`` machine (fed what the API answered, it says what to ask
next) around a ``Cursor``, which knows how far the current container's log has been shown: its
lines are read with their server timestamps, and a read that starts again (after a dropped
connection) asks from a little before the last line shown (``resume_since``) and passes over
the lines up to it (``accept``), so none repeats. A restarted container or a replaced pod is
read from its start. Following several ranks is merging blocking streams, which takes threads:
that is a port (``Session.merge``, else the cluster's own), never done here; ``InTurn`` is the
merge for ports whose streams do not block.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import closing
from functools import partial
from typing import Final, TypeVar

from attrs import evolve, frozen

from kfcompile import status as job_status
from kfcompile.lifecycle.observe import (
    ListPods,
    PodsListed,
    as_int,
    newest_by_rank,
    node_pods,
    nodes_total,
)
from kfcompile.lifecycle.session import (
    JobNotFound,
    Pause,
    Session,
    Slept,
    Table,
    call,
    close,
    get,
    job_kind,
    meta,
    no_row,
    pause,
)
from kfcompile.ports import Clock, Invalid, Merge, NotFound, Obj, Ref, Transient

K = TypeVar("K")
T = TypeVar("T")

RESUME_MARGIN: Final = 2  # seconds before the last line shown that a resumed read starts


@frozen
class LogLine:
    rank: int | None
    text: str


def _sortable(stamp: str) -> str:
    """An RFC 3339 time with its fraction padded to nanoseconds, so times sort as text."""
    whole, dot, fraction = stamp.rstrip("Z").partition(".")
    return f"{whole}.{fraction.ljust(9, '0')}" if dot else f"{whole}.000000000"


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
        stamp = _sortable(raw)
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
    """404 or 400: the pod went away, or its container has not started."""


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
    shown: str | None = None

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
        row = FOLLOW_TABLE.get((self.phase, type(answer)))
        if row is None:
            raise no_row(self, self.phase, answer)
        followed: Follower = row(evolve(self, shown=None), answer, now)
        return followed

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
            return evolve(self, phase=Phase.END if self.finished else Phase.PAUSE)
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
        )

    def _line(self, answer: Line, now: float) -> Follower:
        cursor, text = self.cursor.accept(answer.text, now)
        if text is None:
            return evolve(self, cursor=cursor, streaming=True)
        return evolve(self, cursor=cursor, streaming=True, fresh=True, pauses=0, shown=text)

    def _ended(self, answer: LogEnded | LogRefused, now: float) -> Follower:
        if self.finished:
            return evolve(self, phase=Phase.END, streaming=False)
        return evolve(self, phase=Phase.JOB if self.fresh else Phase.PAUSE, streaming=False)

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
    (Phase.LOG, Dropped): Follower._dropped,  # PAUSE, then read again from the cursor
    (Phase.PAUSE, Slept): Follower._slept,  # JOB
}


def _restarts(pod: Obj, container: str) -> int:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == container:
            return as_int(c.get("restartCount")) or 0
    return 0


# --- the drivers --------------------------------------------------------------------------------


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
        return Dropped(exc)
    except (NotFound, Invalid):
        return LogRefused()
    return LogEnded() if line is None else Line(line)


def follow_logs(
    session: Session,
    ref: Ref,
    rank: int,
    *,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> Generator[str, None, None]:
    """One rank's log as it grows, across dropped connections, container restarts and pod
    replacements; ends when the job has finished (or is deleted) and the log is drained.
    Closing the generator closes the stream it reads."""
    clock = session.clock
    follower = Follower(rank, since_seconds, tail_lines)
    stream: Iterator[str] | None = None
    try:
        while True:
            request = follower.next_request(clock.monotonic())
            if stream is not None and not follower.streaming:
                close(stream)  # the machine has done with it
                stream = None
            answer: FollowAnswer
            match request:
                case ReadJob():
                    answer = JobRead(get(session, ref))
                case ListPods(job=job):
                    answer = PodsListed(node_pods(session, job))
                case OpenLog():
                    stream = _log(session, ref, request)
                    answer = _next_line(stream)
                case NextLine() if stream is not None:
                    answer = _next_line(stream)
                case Pause():
                    answer = pause(session, request)
                case _:
                    return
            follower = follower.receive(answer, clock.monotonic())
            if follower.shown is not None:
                yield follower.shown
    finally:
        close(stream)


def ranks(session: Session, ref: Ref) -> list[int]:
    job = get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    return list(range(nodes_total(job)))


def read_logs(
    session: Session,
    ref: Ref,
    rank: int,
    *,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> list[str]:
    """One rank's log as it is now (empty when its pod does not exist yet)."""
    job = get(session, ref)
    if job is None:
        raise JobNotFound(f"{ref} does not exist")
    pod = newest_by_rank(job, node_pods(session, job)).get(rank)
    if pod is None:
        return []
    name = str(meta(pod)["name"])
    return call(
        session,
        f"read logs of {name}",
        lambda: list(
            session.cluster.pod_log(
                ref.namespace or "default",
                name,
                container=job_kind(ref).container,
                since_seconds=since_seconds,
                tail_lines=tail_lines,
            )
        ),
    )


# --- several ranks ------------------------------------------------------------------------------


@frozen
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
) -> Iterator[str]:
    return follow_logs(
        evolve(session, clock=clock),
        ref,
        rank,
        since_seconds=options["since_seconds"],
        tail_lines=options["tail_lines"],
    )


def logs(
    session: Session,
    ref: Ref,
    *,
    rank: int | None = None,
    follow: bool = False,
    since_seconds: int | None = None,
    tail_lines: int | None = None,
) -> Generator[LogLine, None, None]:
    """One rank's log (``rank``), or every rank's, interleaved as the lines come. Followed,
    several ranks are read at once by the session's merge; closing the generator stops them."""
    chosen = [rank] if rank is not None else ranks(session, ref)
    options = {"since_seconds": since_seconds, "tail_lines": tail_lines}
    if not follow:
        for r in chosen:
            for text in read_logs(session, ref, r, **options):
                yield LogLine(r, text)
        return
    if len(chosen) == 1:
        with closing(follow_logs(session, ref, chosen[0], **options)) as lines:
            for text in lines:
                yield LogLine(chosen[0], text)
        return
    streams = {r: partial(_follow_on, session, ref, r, options) for r in chosen}
    with closing(merger(session).merge(streams, session.clock)) as merged:
        for r, text in merged:
            yield LogLine(r, text)

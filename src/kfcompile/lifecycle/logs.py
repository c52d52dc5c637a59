"""Logs of a job's ranks: read as they are, or followed as they grow.

Following one rank is ``follow_logs``, the driver of the ``Follower`` machine (``follow``).
Following several is merging blocking streams, which takes threads: that is a port
(``Session.merge``, else the cluster's own, as ``KubeCluster`` has), never done here;
``InTurn`` is the merge for ports whose streams do not block.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import closing
from functools import partial
from typing import TypeVar

from attrs import evolve, frozen

from kfcompile.lifecycle.follow import (
    Dropped,
    FollowAnswer,
    Follower,
    JobRead,
    Line,
    LogEnded,
    LogRefused,
    NextLine,
    OpenLog,
    ReadJob,
)
from kfcompile.lifecycle.observe import ListPods, PodsListed, newest_by_rank, node_pods, nodes_total
from kfcompile.lifecycle.session import (
    JobNotFound,
    Pause,
    Session,
    call,
    close,
    get,
    job_kind,
    meta,
    pause,
)
from kfcompile.ports import Clock, Invalid, Merge, NotFound, Ref, Transient

K = TypeVar("K")
T = TypeVar("T")


@frozen
class LogLine:
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

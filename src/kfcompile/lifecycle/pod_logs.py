"""Logs of a job's ranks: read as they are, or followed as they grow.

Following one rank is ``follow_logs``, the driver of the ``Follower`` machine (``follow``).
Following several is merging blocking streams, which takes threads: that is a port
(``Session.merge``, else the cluster's own, as ``KubeCluster`` has), never done here;
``InTurn`` is the merge for ports whose streams do not block. A rank whose log cannot be read
says why (``Waiting``: no pod yet, not scheduled, its image not pulled, its node gone) to the
caller's ``on_waiting``, in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import closing
from functools import partial
from typing import Final, TypeVar

from attrs import evolve, frozen

from kfcompile.lifecycle.follow import (
    Dropped,
    End,
    FollowAnswer,
    Follower,
    JobRead,
    Line,
    LogEnded,
    LogRefused,
    NextEvent,
    NextLine,
    OpenLog,
    PodSeen,
    ReadJob,
    WatchPod,
)
from kfcompile.lifecycle.objects import get, job_kind, meta
from kfcompile.lifecycle.observe import (
    MAX_RANKS,
    ListPods,
    Waiting,
    foreign,
    kubelet_unreachable,
    list_pods,
    newest_by_rank,
    node_pods,
    nodes_total,
    some_ranks,
    waiting,
)
from kfcompile.lifecycle.ports import (
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
    GiveUp,
    JobNotFound,
    Opened,
    Pause,
    Perform,
    Retry,
    Session,
    Unavailable,
    call,
    close,
    drive,
    ending_named,
    listing,
    named,
    pause,
    told,
    unavailable,
)
from kfcompile.lifecycle.waiter import Bookmark
from kfcompile.lifecycle.waiting import next_answer, only

K = TypeVar("K")
T = TypeVar("T")
OnWaiting = Callable[[Waiting], object]


class NoSuchRank(ClusterError):
    """The rank asked for is not one of the job's (a usage error: the CLI exits 2)."""


class CannotStart(ClusterError):
    """A followed rank's pod has been unable to start for longer than it is waited for
    (``follow.GIVE_UP_AFTER``)."""


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
        ReadJob: lambda _: JobRead(get(session, ref)),
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
    ``rank``; ``CannotStart`` when its pod stays unable to start (``follow.GIVE_UP_AFTER``)."""
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

"""``wait``: the few lines that ask the ports what the ``Waiter`` machine (``waiter``) asks,
and tell it what the API answered."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Final, TypeVar

from attrs import evolve

from kfcompile.lifecycle.kueue import waiting_workload
from kfcompile.lifecycle.objects import job_kind, meta
from kfcompile.lifecycle.observe import (
    ListPods,
    Observation,
    PodsListed,
    is_ref,
    node_pods,
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
    GiveUp,
    JobDeleted,
    JobNotFound,
    Opened,
    Pause,
    Perform,
    Session,
    TimedOut,
    call,
    close,
    drive,
    ended,
    ending_named,
    named,
    pause,
    retrying,
    told,
    unavailable,
)
from kfcompile.lifecycle.waiter import (
    Bookmark,
    Changed,
    Deleted,
    Done,
    Expired,
    Listed,
    ListJob,
    Missing,
    NoJob,
    OutOfTime,
    ReadEvent,
    Refused,
    StreamEnded,
    Trouble,
    Until,
    WaitAnswer,
    Waiter,
    WatchJob,
)
from kfcompile.terminal import printable

A = TypeVar("A")


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

    One list, then a watch resumed from the last version seen; ``410 Gone`` lists again;
    transient trouble pauses and retries; the API refusing to watch is the only case that
    polls (``waiter`` has the whole table). ``TimedOut`` says where the job stands
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

"""``watch_jobs``: every managed job's state from one list and one watch per kind, for services
that run many jobs. Each kind is a ``Watcher`` machine (``watcher``) with the few lines below
that ask the ports for it; several kinds are read at once by the session's ``Merge`` port (as
the followed logs of several ranks are), so the caller needs no thread."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing
from functools import partial
from typing import Final

from attrs import evolve

from kfcompile.kinds import KINDS, Kind
from kfcompile.lifecycle.kueue import multikueue_managed, workloads_of
from kfcompile.lifecycle.multikueue import dispatches
from kfcompile.lifecycle.objects import Paging, meta, served
from kfcompile.lifecycle.observe import foreign
from kfcompile.lifecycle.pod_logs import merger
from kfcompile.lifecycle.ports import ApiError, Clock, Gone, Obj, Transient, WatchEvent
from kfcompile.lifecycle.session import (
    LIST_PAGE,
    MANAGED_BY_LABEL,
    MANAGER,
    ClusterError,
    GiveUp,
    Opened,
    Pause,
    Perform,
    Session,
    drive,
    ending_named,
    listing,
    pause,
    retrying,
    told,
    unavailable,
)
from kfcompile.lifecycle.waiter import Bookmark, Changed, Expired, ReadEvent, Trouble
from kfcompile.lifecycle.waiting import next_answer, only
from kfcompile.lifecycle.watcher import (
    Happened,
    JobEvent,
    ListJobs,
    PageListed,
    Removed,
    WatchAnswer,
    Watcher,
    WatchJobs,
    seen,
)
from kfcompile.status import State, job_state

MANAGED: Final = f"{MANAGED_BY_LABEL}={MANAGER}"  # the jobs kfcompile created
WAITING: Final = (State.SUSPENDED, State.PENDING)  # states Kueue may say why a job is in


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
    session: Session,
    kind: Kind,
    namespace: str | None,
    selector: str,
    request: ListJobs,
    paging: Paging,
) -> tuple[WatchAnswer, Paging]:
    """One page, and this list's pages so far (``paging`` before it); what the API refuses
    (403: no right to list) ends the watch with it, named as ``call`` names what it raises (the
    machine rides out the rest itself), and so does a list that would page for ever."""
    try:
        page = session.cluster.list(
            kind.api_version,
            kind.name,
            namespace,
            label_selector=selector,
            limit=LIST_PAGE,
            continue_token=request.continue_token,
        )
    except Gone:
        return Expired(), paging
    except Transient as exc:
        return Trouble(exc), paging
    except ApiError as exc:
        exc.named(listing(kind.name, namespace))
        raise
    after = paging.after(page)
    if isinstance(after, str):
        raise ClusterError(f"{listing(kind.name, namespace)}: {after}")
    items = [item for item in page.items if not _foreign(item, kind, namespace, selector)]
    return PageListed(items, page.resource_version, page.continue_token or None), after


def _foreign(obj: Obj, kind: Kind, namespace: str | None, selector: str) -> bool:
    """An object the server sent that is not what was asked for (another kind, namespace or
    label value): passed over, never reported as one of the jobs."""
    return obj.get("kind") not in (None, kind.name) or foreign(obj, namespace, selector)


def _watch(
    session: Session, kind: Kind, namespace: str | None, selector: str, request: WatchJobs
) -> Iterator[WatchEvent]:
    """The watch, as a generator: what the port raises comes with the first event; an event
    about an object not asked for is passed over (``_foreign``)."""
    with ending_named(listing(kind.name, namespace, "watch")):
        events = session.cluster.watch(
            kind.api_version,
            kind.name,
            namespace,
            resource_version=request.from_version,
            label_selector=selector,
            timeout_seconds=request.timeout,
        )
        yield from only(events, lambda obj: not _foreign(obj, kind, namespace, selector))


def _jobs(answer: WatchAnswer) -> list[Obj]:
    """The jobs the API just answered with."""
    if isinstance(answer, PageListed):
        return answer.items
    return [answer.job] if isinstance(answer, Changed) else []


def _dispatched(
    session: Session, kind: Kind, namespace: str | None, answer: WatchAnswer, told: set[str]
) -> tuple[JobEvent, ...]:
    """On a MultiKueue manager, where the jobs the API just answered with were dispatched."""
    return dispatch_events(session, kind, _jobs(answer), namespace, told)


def kueue_reasons(
    session: Session, events: tuple[JobEvent, ...], jobs: Sequence[Obj], namespace: str | None
) -> tuple[JobEvent, ...]:
    """``events`` with the reason Kueue gives for each job it holds (its Workload, as
    ``status`` says it): one list of Workloads for the waiting jobs among ``jobs``, none when
    none waits."""
    waits = {(e.ref.namespace, e.ref.name) for e in events if e.state.state in WAITING}
    told = {(meta(j).get("namespace"), meta(j).get("name")): j for j in jobs}
    held = workloads_of(session, [j for at, j in told.items() if at in waits], namespace)
    if not held.by_uid:
        return events

    def refined(event: JobEvent) -> JobEvent:
        job = told.get((event.ref.namespace, event.ref.name))
        workload = held.by_uid.get(str(meta(job).get("uid", ""))) if job else None
        if job is None or workload is None or event.state.state not in WAITING:
            return event
        return evolve(event, state=job_state({**job, "kind": event.kind.name}, workload=workload))

    return tuple(map(refined, events))


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
    clock, what = session.clock, listing(kind.name, namespace, "watch")
    watcher = Watcher.start(kind, clock.monotonic(), session.retry_for)
    opened = Opened()
    paging = Paging()
    reported: set[str] = set()  # the MultiKueue jobs whose dispatch was reported

    def page(request: ListJobs) -> WatchAnswer:
        nonlocal paging
        if request.continue_token is None:  # a list begins
            paging = Paging()
        answer, paging = _page(session, kind, namespace, selector, request, paging)
        return answer

    def watch(request: WatchJobs) -> WatchAnswer:
        return _next_event(opened.start(_watch(session, kind, namespace, selector, request)), what)

    perform: Perform = {
        ListJobs: page,
        WatchJobs: watch,
        ReadEvent: lambda _: _next_event(opened.current(), what),
        Pause: partial(pause, session),
    }

    def each(after: Watcher, answer: WatchAnswer) -> tuple[tuple[JobEvent, ...]]:
        if after.notice is not None:
            retrying(session, what, after.notice)
        events = kueue_reasons(session, after.events, _jobs(answer), namespace)
        return (events + _dispatched(session, kind, namespace, answer, reported),)

    steps = drive(watcher, clock, perform, opened, lambda machine: machine.streaming)
    _, end = yield from told(steps, each)
    assert isinstance(end, GiveUp), end
    raise unavailable(what, end)


def _watch_on(
    session: Session, kind: Kind, namespace: str | None, selector: str, clock: Clock
) -> Iterator[tuple[JobEvent, ...]]:
    return watch_kind(evolve(session, clock=clock), kind, namespace, selector)


def watch_jobs(
    session: Session,
    namespace: str | None = None,
    selector: str = MANAGED,
    *,
    on_skipped: Callable[[Kind], None] | None = None,
) -> Generator[JobEvent, None, None]:
    """An event whenever a job matching ``selector`` (default: every job kfcompile created) in
    ``namespace`` (``None``: all) appears, changes state or disappears, for every kind.

    The jobs there at the start come first, as ``LISTED``; then each change as it happens, from
    one list and one watch per kind, resumed and listed again as ``wait`` does (``watcher`` has
    the whole table), never a request per job. A kind the cluster does not serve is skipped,
    told once to ``on_skipped``. Runs until closed (closing it ends every watch) or until API
    trouble lasts longer than ``Session.retry_for`` (``Unavailable``).
    """
    kinds: list[Kind] = []
    for kind in KINDS.values():
        if served(session, kind.api_version, kind.name):
            kinds.append(kind)
        elif on_skipped is not None:
            on_skipped(kind)
    if len(kinds) == 1:
        with closing(watch_kind(session, kinds[0], namespace, selector)) as one:
            for events in one:
                yield from events
        return
    streams = {k.name: partial(_watch_on, session, k, namespace, selector) for k in kinds}
    with closing(merger(session).merge(streams, session.clock)) as merged:
        for _, events in merged:
            yield from events

"""``lifecycle.watch_jobs``: every managed job's state from one list and one watch per kind.

First the ``Watcher`` machine row by row (what it asks next, what events each answer makes: no
server, no clock), then the driver at the port, against the in-memory cluster on a fake clock:
resuming, relisting after 410 without reporting anything twice, a deletion seen only by the
relist, a kind the cluster does not serve, closing, and the requests it makes for 10 and for
1,000 jobs. ``kfcompile list -w`` runs over HTTP at the end.
"""

from __future__ import annotations

import functools
import inspect
import io
import math
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, LocalCluster, PortCluster, cli, install
from test_lifecycle import Hostile, impostor

from kfcompile import lifecycle, structure
from kfcompile.cli import main
from kfcompile.kinds import PYTORCHJOB, TRAINJOB
from kfcompile.lifecycle import Happened, JobEvent
from kfcompile.lifecycle.job_events import (
    JOBS_SEGMENT,
    ListJobs,
    PageListed,
    Removed,
    Watcher,
    WatchJobs,
    happened,
)
from kfcompile.lifecycle.pod_logs import InTurn
from kfcompile.lifecycle.ports import Clock, Transient
from kfcompile.lifecycle.session import LIST_PAGE, GiveUp, Pause, Slept, Unexpected
from kfcompile.lifecycle.waiting import (
    Bookmark,
    Changed,
    Expired,
    ReadEvent,
    Refused,
    StreamEnded,
    Trouble,
)
from kfcompile.status import JobState, State
from kfcompile.testing import FakeClock, FakeCluster, courses, fixed_jitter

Obj = dict[str, Any]
API = TRAINJOB.api_version
LOST = Transient(0, "ConnectionError", "connection reset by peer")
MANAGED = {"app.kubernetes.io/managed-by": "kfcompile"}

# TrainJob statuses along a Kueue-queued life
QUEUED = {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended"}]}
ADMITTED = {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed"}]}
RUNNING = {"jobsStatus": [{"name": "node", "active": 1, "ready": 1}]}  # its pods all ready
DONE = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
# What Trainer v2.1 on says of a job from its first report: its JobSet's Job, counted (nothing
# active yet). With counts in its status, a job's state is its object's alone: no pod is read.
COUNTED = {"jobsStatus": [{"name": "node", "active": 0, "ready": 0}]}
# Kueue holds it: the Trainer made its JobSet suspended, whose Job is counted so.
HELD = {"jobsStatus": [{"name": "node", "active": 0, "ready": 0, "suspended": 1}]}


def tj(name: str = "a", version: str = "10", status: Obj | None = None, uid: str = "") -> Obj:
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid or f"uid-{name}",
            "resourceVersion": version,
        },
        "status": status or {},
    }


def fed(answers: Sequence[Any]) -> Watcher:
    """A fresh watcher (started at t=1, riding out 20 s of trouble) fed each answer at t=1, or
    at the time given with it as (answer, t)."""
    watcher = Watcher.start(TRAINJOB, 1.0, retry_for=20.0)
    for one in answers:
        answer, at = one if isinstance(one, tuple) else (one, 1.0)
        watcher = watcher.receive(answer, at)
    return watcher


def said(events: Sequence[JobEvent]) -> list[tuple[str, str, str, str | None]]:
    """Each event as (job, what happened, state now, reason before)."""
    return [
        (e.ref.name, e.what.value, e.state.state.value, e.previous and e.previous.reason)
        for e in events
    ]


LISTED = PageListed([tj("a"), tj("b", "9", QUEUED)], "10")
WATCHING = [LISTED]


# --- the machine: what it asks next -------------------------------------------------------------

# (answers fed) -> the next request at t=1 (or at the time given with it).
ASK_ROWS: list[tuple[str, list[Any], Any]] = [
    ("it lists first", [], ListJobs()),
    ("a page with more asks for the next", [PageListed([tj()], "10", "t1")], ListJobs("t1")),
    (
        "after the last page it watches from the list's version (its first page's)",
        [PageListed([tj("a")], "10", "t1"), PageListed([tj("b", "12")], "12")],
        WatchJobs("10", JOBS_SEGMENT),
    ),
    ("an event keeps the stream open", [*WATCHING, Changed(tj("a", "11"))], ReadEvent()),
    (
        "a closed stream is watched again from the last event's version",
        [*WATCHING, Changed(tj("a", "11", RUNNING)), (StreamEnded(), 300)],
        (WatchJobs("11", JOBS_SEGMENT), 300),
    ),
    (
        "a deletion moves the version too",
        [*WATCHING, Removed(tj("a", "13")), (StreamEnded(), 300)],
        (WatchJobs("13", JOBS_SEGMENT), 300),
    ),
    (
        "and so does a bookmark",
        [*WATCHING, (Bookmark("15"), 300), (StreamEnded(), 300)],
        (WatchJobs("15", JOBS_SEGMENT), 300),
    ),
    (
        "a watch that ends at once without an event is trouble",
        [*WATCHING, StreamEnded()],
        Pause(0, at_most=20.0),
    ),
    (
        "even the second one, after a long first",
        [*WATCHING, (Bookmark("15"), 300), (StreamEnded(), 300), (StreamEnded(), 300.5)],
        (Pause(0, at_most=20.0), 300.5),
    ),
    ("410 on the watch lists again", [*WATCHING, Expired()], ListJobs()),
    ("a second 410 in a row pauses before it lists", [*WATCHING, Expired()] * 2, Pause(0)),
    ("then lists from the start", [*[*WATCHING, Expired()] * 2, Slept()], ListJobs()),
    (
        "and pauses longer at the third",
        [*[*WATCHING, Expired()] * 2, Slept(), *WATCHING, Expired()],
        Pause(1),
    ),
    (
        "an event between two 410s makes the second a first",
        [*WATCHING, Expired(), *WATCHING, Changed(tj("a", "11")), Expired()],
        ListJobs(),
    ),
    (
        "410 on a continue token lists from the start",
        [PageListed([tj()], "10", "t1"), Expired()],
        ListJobs(),
    ),
    (
        "a continue token expiring again and again is trouble",
        [PageListed([tj()], "10", "t1"), Expired()] * 4,
        Pause(0, at_most=20.0),
    ),
    ("trouble on a page pauses", [PageListed([tj()], "10", "t1"), Trouble(LOST)], Pause(0, 20.0)),
    (
        "and then asks for the same page",
        [PageListed([tj()], "10", "t1"), Trouble(LOST), Slept()],
        ListJobs("t1"),
    ),
    ("trouble on the watch pauses", [*WATCHING, Trouble(LOST)], Pause(0, at_most=20.0)),
    (
        "and then watches from the same version",
        [*WATCHING, Trouble(LOST), Slept()],
        WatchJobs("10", JOBS_SEGMENT),
    ),
    (
        "trouble in a row pauses longer",
        [*WATCHING, Trouble(LOST), Slept(), (Trouble(LOST), 2)],
        (Pause(1, at_most=19.0), 2),
    ),
    (
        "an answer ends the trouble",
        [*WATCHING, Trouble(LOST), Slept(), Bookmark("11"), (Trouble(LOST), 2)],
        (Pause(0, at_most=20.0), 2),
    ),
    (
        "trouble past the retry window gives up",
        [*WATCHING, Trouble(LOST), Slept(), (Trouble(LOST), 22)],
        (GiveUp(21.0, LOST), 22),
    ),
    ("a refused watch polls", [*WATCHING, Refused()], Pause(0)),
    ("by listing", [*WATCHING, Refused(), Slept()], ListJobs()),
    (
        "pausing longer while nothing changes",
        [*WATCHING, Refused(), Slept(), LISTED],
        Pause(1),
    ),
    (
        "and less once something does",
        [*WATCHING, Refused(), Slept(), LISTED, Slept(), PageListed([tj("a", "20", DONE)], "20")],
        Pause(0),
    ),
    (
        "trouble while polling is the retry's pause, then the same list",
        [*WATCHING, Refused(), Slept(), Trouble(LOST), Slept()],
        ListJobs(),
    ),
]


@pytest.mark.parametrize(
    ("answers", "expected"), [r[1:] for r in ASK_ROWS], ids=[r[0] for r in ASK_ROWS]
)
def test_the_watcher_asks(answers: list[Any], expected: Any) -> None:
    request, now = expected if isinstance(expected, tuple) else (expected, 1.0)
    assert fed(answers).next_request(now) == request


# --- the machine: what each answer reports ------------------------------------------------------

# (answers fed) -> the events the last one made, as ``said`` puts them.
EVENT_ROWS: list[tuple[str, list[Any], list[tuple[str, str, str, str | None]]]] = [
    (
        "the first list reports every job as listed",
        [LISTED],
        [("a", "listed", "PENDING", None), ("b", "listed", "SUSPENDED", None)],
    ),
    ("a page that is not the last reports nothing yet", [PageListed([tj()], "10", "t1")], []),
    (
        "jobs from every page",
        [PageListed([tj("a")], "10", "t1"), PageListed([tj("b")], "12")],
        [("a", "listed", "PENDING", None), ("b", "listed", "PENDING", None)],
    ),
    (
        "Kueue queues a job",
        [*WATCHING, Changed(tj("a", "11", QUEUED))],
        [("a", "suspended", "SUSPENDED", "NoStatus")],
    ),
    (
        "and admits it",
        [*WATCHING, Changed(tj("b", "11", ADMITTED))],
        [("b", "admitted", "PENDING", "Suspended")],
    ),
    (
        "admitted and running when next seen is running",
        [*WATCHING, Changed(tj("b", "11", RUNNING))],
        [("b", "running", "RUNNING", "Suspended")],
    ),
    (
        "it finishes",
        [*WATCHING, Changed(tj("a", "11", RUNNING)), Changed(tj("a", "12", DONE))],
        [("a", "finished", "SUCCEEDED", "JobsActive")],
    ),
    (
        "a new version in the same state is no event",
        [*WATCHING, Changed(tj("b", "11", QUEUED))],
        [],
    ),
    ("nor is a bookmark", [*WATCHING, Bookmark("11")], []),
    (
        "a job created since",
        [*WATCHING, Changed(tj("c", "11"))],
        [("c", "created", "PENDING", None)],
    ),
    (
        "a job deleted, with its last state",
        [*WATCHING, Removed(tj("b", "11", QUEUED))],
        [("b", "deleted", "SUSPENDED", "Suspended")],
    ),
    ("a deletion of a job never reported is no event", [*WATCHING, Removed(tj("z", "11"))], []),
    (
        "the same name with another uid was deleted and created again",
        [*WATCHING, Changed(tj("a", "11", uid="other"))],
        [("a", "deleted", "PENDING", "NoStatus"), ("a", "created", "PENDING", None)],
    ),
    ("an object without a name is skipped", [*WATCHING, Changed({"kind": "TrainJob"})], []),
    (
        "and so is a listed one whose metadata is no mapping",
        [PageListed([tj("a"), {"kind": "TrainJob", "metadata": "x"}], "10")],
        [("a", "listed", "PENDING", None)],
    ),
    (
        "a relist after 410 reports only what changed meanwhile",
        [
            *WATCHING,
            Changed(tj("a", "11", QUEUED)),
            Expired(),
            PageListed([tj("a", "30", QUEUED), tj("b", "29", RUNNING), tj("c", "28")], "30"),
        ],
        [("b", "running", "RUNNING", "Suspended"), ("c", "created", "PENDING", None)],
    ),
    (
        "and the jobs gone from it as deleted",
        [*WATCHING, Expired(), PageListed([tj("b", "9", QUEUED)], "30")],
        [("a", "deleted", "PENDING", "NoStatus")],
    ),
    (
        "a relist over pages compares once every page is in",
        [*WATCHING, Expired(), PageListed([tj("b", "9", QUEUED)], "30", "t1")],
        [],
    ),
    (
        "while polling, each list reports what changed",
        [*WATCHING, Refused(), Slept(), PageListed([tj("a", "20", DONE)], "20")],
        [("a", "finished", "SUCCEEDED", "NoStatus"), ("b", "deleted", "SUSPENDED", "Suspended")],
    ),
]


@pytest.mark.parametrize(
    ("answers", "expected"), [r[1:] for r in EVENT_ROWS], ids=[r[0] for r in EVENT_ROWS]
)
def test_the_watcher_reports(answers: list[Any], expected: list[Any]) -> None:
    assert said(fed(answers).events) == expected


def test_events_are_only_the_last_answers() -> None:
    watcher = fed([*WATCHING, Changed(tj("a", "11", QUEUED))])
    assert watcher.events
    assert watcher.receive(Bookmark("12"), 1.0).events == ()


@pytest.mark.parametrize(
    ("answers", "wrong"),
    [
        ([], Changed(tj())),  # an event before any watch
        (WATCHING, PageListed([], "10")),  # a page while watching
        (WATCHING, Slept()),  # waking with no pause
    ],
)
def test_a_watcher_fed_out_of_turn_is_a_bug(answers: list[Any], wrong: Any) -> None:
    with pytest.raises(Unexpected, match="Watcher in"):
        fed(answers).receive(wrong, 1.0)


def state(s: State, reason: str) -> JobState:
    return JobState(s, reason, "")


# (state before, state now) -> what happened
HAPPENED_ROWS = [
    (state(State.PENDING, "NoStatus"), state(State.SUSPENDED, "Suspended"), Happened.SUSPENDED),
    (state(State.RUNNING, "JobsActive"), state(State.SUSPENDED, "Suspended"), Happened.SUSPENDED),
    (state(State.SUSPENDED, "Suspended"), state(State.PENDING, "Resumed"), Happened.ADMITTED),
    (state(State.SUSPENDED, "Suspended"), state(State.RUNNING, "JobsActive"), Happened.RUNNING),
    (state(State.PENDING, "Created"), state(State.RUNNING, "Running"), Happened.RUNNING),
    (state(State.RUNNING, "JobsActive"), state(State.SUCCEEDED, "Complete"), Happened.FINISHED),
    (
        state(State.SUSPENDED, "Suspended"),
        state(State.FAILED, "DeadlineExceeded"),
        Happened.FINISHED,
    ),
    (state(State.PENDING, "NoStatus"), state(State.PENDING, "Unschedulable"), Happened.CHANGED),
    (state(State.RUNNING, "Running"), state(State.RUNNING, "Restarting"), Happened.CHANGED),
    (state(State.FAILED, "FailedJobs"), state(State.FAILED, "Failed"), Happened.CHANGED),
    (state(State.RUNNING, "JobsActive"), state(State.DELETING, "Foreground"), Happened.DELETING),
    (state(State.DELETING, "Foreground"), state(State.DELETING, "Pods"), Happened.CHANGED),
]


@pytest.mark.parametrize(("old", "new", "expected"), HAPPENED_ROWS)
def test_what_a_change_of_state_is_called(old: JobState, new: JobState, expected: Any) -> None:
    assert happened(new, old) is expected


# --- the driver at the port ---------------------------------------------------------------------


class Bare:
    """The small fake with the Kubeflow CRDs and no controller (nor Kueue): the test writes
    every status, at the ticks it chooses (``at``), on a fake clock of one-second ticks."""

    def __init__(self, crds: tuple[str, ...] = ("trainjobs-v2.3.0.yaml",)) -> None:
        self.clock = FakeClock(step=1.0)
        self.cluster = FakeCluster(self.clock)
        self.store, self.at = self.cluster.store, self.cluster.at
        install(self.store, schema_check.require_shared(), crds, runtime=False, serves=None)

    def session(self, **extra: Any) -> lifecycle.Session:
        return lifecycle.Session(
            self.cluster, self.clock, jitter=fixed_jitter, retry_for=5.0, **extra
        )

    def create(self, *names: str, labels: Mapping[str, str] = MANAGED) -> None:
        """Jobs as Trainer v2.1 on has reported on them (``COUNTED``)."""
        for name in names:
            meta = {"name": name, "namespace": NAMESPACE, "labels": dict(labels)}
            job = {"apiVersion": API, "kind": "TrainJob", "metadata": meta, "status": COUNTED}
            self.store.put(job)

    def status(self, status: Obj, *names: str) -> None:
        for name in names:
            self.store.change(API, "TrainJob", NAMESPACE, name, {"status": status})

    def delete(self, name: str) -> None:
        self.store.remove((API, "TrainJob", NAMESPACE, name))


def collect(events: Iterator[JobEvent], count: int) -> list[JobEvent]:
    """The first ``count`` events, then the watch is closed."""
    got = []
    try:
        for event in events:
            got.append(event)
            if len(got) == count:
                break
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return got


def lives(bare: Bare, names: Sequence[str], start: float = 1.0, *, create: bool = True) -> None:
    """Each job created at ``start`` (or already there), then queued, admitted and finished, a
    second apart."""
    if create:
        bare.at(start, lambda: bare.create(*names))
    for offset, status in enumerate((QUEUED, ADMITTED, DONE), start=1):
        bare.at(start + offset, lambda s=status: bare.status(s, *names))  # type: ignore[misc]


# What ``lives(bare, ["a", "b"])`` reports.
LIVES = [
    ("a", "created", "PENDING", None),
    ("b", "created", "PENDING", None),
    ("a", "suspended", "SUSPENDED", "NoStatus"),
    ("b", "suspended", "SUSPENDED", "NoStatus"),
    ("a", "admitted", "PENDING", "Suspended"),
    ("b", "admitted", "PENDING", "Suspended"),
    ("a", "finished", "SUCCEEDED", "Resumed"),
    ("b", "finished", "SUCCEEDED", "Resumed"),
]


def test_every_change_of_every_job_from_one_list_and_one_watch() -> None:
    bare = Bare()
    bare.create("early")
    lives(bare, ["a", "b"])
    skipped: list[str] = []
    events = lifecycle.watch_jobs(
        bare.session(), NAMESPACE, on_skipped=lambda k: skipped.append(k.name)
    )
    got = said(collect(events, 9))
    assert got == [("early", "listed", "PENDING", None), *LIVES]
    assert skipped == ["PyTorchJob"]  # said once; never listed or watched
    asked = [(c.method, c.kind) for c in bare.cluster.calls]
    assert asked == [
        ("served", "TrainJob"),
        ("served", "PyTorchJob"),
        ("served", "Workload"),  # no Kueue: neither version (v1beta2, v1beta1) served
        ("served", "Workload"),
        ("list", "TrainJob"),
        ("watch", "TrainJob"),
    ]
    [listed] = bare.cluster.calls.matching("list")
    assert listed.namespace == NAMESPACE
    assert listed.query["label_selector"] == "app.kubernetes.io/managed-by=kfcompile"


def test_jobs_outside_the_selector_are_not_reported() -> None:
    bare = Bare()
    bare.at(1, lambda: bare.create("theirs", labels={"team": "x"}))
    bare.at(1, lambda: bare.create("ours"))
    bare.at(2, lambda: bare.status(DONE, "theirs", "ours"))
    got = said(collect(lifecycle.watch_jobs(bare.session()), 2))
    assert got == [
        ("ours", "created", "PENDING", None),
        ("ours", "finished", "SUCCEEDED", "NoStatus"),
    ]
    got = said(collect(lifecycle.watch_jobs(bare.session(), selector="team=x"), 1))
    assert got == [("theirs", "listed", "SUCCEEDED", None)]


def test_a_watch_the_server_closes_resumes_from_the_last_version_seen() -> None:
    bare = Bare()
    bare.create("a")
    other = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "default"},
    }
    bare.at(10, lambda: bare.store.create(other))  # moves the version the server ends with
    bare.at(JOBS_SEGMENT + 50, lambda: bare.status(QUEUED, "a"))  # after the first watch ended
    got = said(collect(lifecycle.watch_jobs(bare.session()), 2))
    assert got == [("a", "listed", "PENDING", None), ("a", "suspended", "SUSPENDED", "NoStatus")]
    first, second = bare.cluster.calls.matching("watch")
    assert bare.cluster.calls.count("list") == 1  # resumed, never listed again
    configmap = bare.store.get("v1", "ConfigMap", NAMESPACE, "x")
    assert configmap is not None
    assert (
        int(first.query["rv"])
        < int(second.query["rv"])
        == int(configmap["metadata"]["resourceVersion"])
    )


def test_a_dropped_watch_resumes_without_reporting_anything_twice() -> None:
    bare = Bare()
    lives(bare, ["a", "b"])
    bare.cluster.faults.add("watch", "TrainJob", drop_after=3)  # cut after three events
    got = said(collect(lifecycle.watch_jobs(bare.session()), 8))
    assert got == LIVES  # nothing twice, nothing missed
    first, second = bare.cluster.calls.matching("watch")
    assert int(second.query["rv"]) > int(first.query["rv"])  # from the last event seen
    assert bare.cluster.calls.count("list") == 1


def test_a_relist_after_410_reports_only_real_changes() -> None:
    bare = Bare()
    lives(bare, ["a", "b"])
    # History compacted under the open watch between admission and the end: 410 mid-stream.
    bare.at(3.5, bare.store.compact)
    got = said(collect(lifecycle.watch_jobs(bare.session()), 8))
    assert got == LIVES
    assert bare.cluster.calls.count("list") == 2  # listed again, and said nothing for it


def test_a_deletion_seen_only_by_the_relist_is_reported() -> None:
    bare = Bare()
    bare.create("a", "b")

    def delete_unseen() -> None:  # deleted, and the history of it compacted away at once
        bare.delete("a")
        bare.store.compact()

    bare.at(2, delete_unseen)
    bare.at(3, lambda: bare.status(DONE, "b"))
    got = said(collect(lifecycle.watch_jobs(bare.session()), 4))
    assert got == [
        ("a", "listed", "PENDING", None),
        ("b", "listed", "PENDING", None),
        ("a", "deleted", "PENDING", "NoStatus"),
        ("b", "finished", "SUCCEEDED", "NoStatus"),
    ]
    assert bare.cluster.calls.count("list") == 2


def test_a_job_deleted_while_watched() -> None:
    bare = Bare()
    bare.create("a")
    bare.at(1, lambda: bare.status(QUEUED, "a"))
    bare.at(2, lambda: bare.delete("a"))
    got = said(collect(lifecycle.watch_jobs(bare.session()), 3))
    assert got[-1] == ("a", "deleted", "SUSPENDED", "Suspended")


def test_a_watch_refused_polls_by_listing() -> None:
    bare = Bare()
    lives(bare, ["a"])
    bare.cluster.faults.add("watch", "TrainJob", status=403, times=100)
    got = said(collect(lifecycle.watch_jobs(bare.session()), 4))
    assert [g[1] for g in got] == ["created", "suspended", "admitted", "finished"]
    assert bare.cluster.calls.count("watch") == 1
    assert bare.cluster.calls.count("list") > 1


@pytest.mark.parametrize(
    "fault",
    [
        {"method": "list", "status": 503, "times": 2},
        {"method": "list", "drop": True},
        {"method": "watch", "status": 500, "times": 3},
        {"method": "watch", "drop_after": 0},
        {"method": "watch", "status": 410},
    ],
)
def test_api_trouble_is_ridden_out(fault: dict[str, Any]) -> None:
    bare = Bare()
    lives(bare, ["a"])
    bare.cluster.faults.add(path="TrainJob", **fault)
    got = said(collect(lifecycle.watch_jobs(bare.session()), 4))
    assert [g[1] for g in got] == ["created", "suspended", "admitted", "finished"]
    assert bare.cluster.faults.fired, "the fault never hit a call"


def test_trouble_longer_than_the_session_rides_out_is_unavailable() -> None:
    bare = Bare()
    bare.cluster.faults.add("watch", "TrainJob", status=503, times=1000)
    with pytest.raises(
        lifecycle.Unavailable, match=r"watch TrainJob in all namespaces: .* kept failing"
    ):
        collect(lifecycle.watch_jobs(bare.session()), 1)


def test_a_list_refused_is_the_callers_error() -> None:
    bare = Bare()
    bare.cluster.faults.add("list", "TrainJob", status=403)
    with pytest.raises(lifecycle.ports.Forbidden):
        collect(lifecycle.watch_jobs(bare.session()), 1)


def test_no_kind_served_ends_at_once_saying_so() -> None:
    bare = Bare(crds=())
    skipped: list[str] = []
    events = list(lifecycle.watch_jobs(bare.session(), on_skipped=lambda k: skipped.append(k.name)))
    assert events == [] and skipped == ["TrainJob", "PyTorchJob"]


class Recorded:
    """A ``Merge`` that says what it was given and reads in turn."""

    def __init__(self) -> None:
        self.keys: list[Any] = []

    def merge(self, streams: Mapping[Any, Callable[[Clock], Iterator[Any]]], clock: Clock) -> Any:
        self.keys = list(streams)
        return InTurn().merge(streams, clock)


class Streams:
    """The small fake, keeping every watch stream it hands out."""

    def __init__(self, inner: FakeCluster) -> None:
        self.inner = inner
        self.watches: list[Iterator[Any]] = []

    def watch(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        stream = self.inner.watch(*args, **kwargs)
        self.watches.append(stream)
        return stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_several_kinds_through_the_sessions_merge_and_closing_ends_every_watch() -> None:
    with PortCluster(schema_check.require_shared(), kueue=None) as local:
        local.store.on_create.append(courses.runs(local.fake))
        for name, target in (("tj", "trainjob/v2.3"), ("pt", "pytorchjob/v1")):
            job = structure({"name": name, "image": "python:3", "command": ["python"]})
            lifecycle.submit(local.session(), job, target, namespace=NAMESPACE, environ={})
        merge, port = Recorded(), Streams(local.fake)
        session = lifecycle.Session(port, local.clock, jitter=fixed_jitter, merge=merge)  # type: ignore[arg-type]
        events = lifecycle.watch_jobs(session)
        seen: dict[str, list[str]] = {"TrainJob": [], "PyTorchJob": []}
        for event in events:
            seen[event.ref.kind].append(event.what.value)
            if all(len(whats) >= 3 for whats in seen.values()):
                break
        assert merge.keys == ["TrainJob", "PyTorchJob"]
        assert {k: w[0] for k, w in seen.items()} == {"TrainJob": "listed", "PyTorchJob": "listed"}
        assert len(port.watches) == 2
        events.close()
        assert all(inspect.getgeneratorstate(w) == inspect.GEN_CLOSED for w in port.watches)  # type: ignore[arg-type]


def test_a_kueue_queued_job_as_kueue_and_the_trainer_write_it() -> None:
    with PortCluster(schema_check.require_shared(), crds=("trainjobs-v2.3.0.yaml",)) as local:
        fake = local.fake

        def queued(obj: Obj) -> None:  # Kueue's webhook suspends it; admitted, it runs
            change = functools.partial(local.store.change, API, "TrainJob", NAMESPACE)
            name = obj["metadata"]["name"]
            change(name, {"spec": {"suspend": True}, "status": {**QUEUED, **HELD}})
            fake.at(0.5, lambda: change(name, {"spec": {"suspend": False}, "status": ADMITTED}))

        fake.store.on_create += [queued, courses.runs(fake, starts=1.0, ends=1.5)]
        job = structure({"name": "q", "image": "python:3", "command": ["python"], "queue": QUEUE})
        lifecycle.submit(local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        got = collect(lifecycle.watch_jobs(local.session()), 4)
        assert [(e.what.value, e.state.state.value) for e in got] == [
            ("listed", "SUSPENDED"),  # created suspended by Kueue's webhook: queued from the start
            ("admitted", "PENDING"),
            ("running", "RUNNING"),
            ("finished", "SUCCEEDED"),
        ]
        assert local.calls.count("list", "Pod") == 0  # from the job objects alone


# --- requests: the same for 10 jobs and for 1,000 -----------------------------------------------


def requests_for(jobs: int, *, before: bool) -> dict[str, int]:
    """Requests made by ``watch_jobs`` while ``jobs`` jobs are created (before it starts, or
    while it watches) and go through three changes of state each."""
    bare = Bare()
    names = [f"job-{i:04d}" for i in range(jobs)]
    if before:
        bare.create(*names)
    lives(bare, names, create=not before)
    expected = jobs * 4
    got = collect(lifecycle.watch_jobs(bare.session()), expected)
    assert len(got) == expected
    counts: dict[str, int] = {}
    for call in bare.cluster.calls:
        counts[call.method] = counts.get(call.method, 0) + 1
    return counts


def test_the_requests_do_not_grow_with_the_jobs() -> None:
    assert requests_for(10, before=False) == requests_for(1000, before=False)


@pytest.mark.parametrize("jobs", [10, 1000])
def test_jobs_there_before_cost_only_their_list_pages(jobs: int) -> None:
    counts = requests_for(jobs, before=True)
    # served: the two kinds, and Kueue's Workloads in v1beta2 and v1beta1 (no Kueue here)
    assert counts == {"served": 4, "list": math.ceil(jobs / LIST_PAGE), "watch": 1}


# --- kfcompile list -w, over HTTP ---------------------------------------------------------------


class Output(io.StringIO):
    """stdout that another thread may read while the command writes."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def text(self) -> str:
        with self.lock:
            return self.getvalue()


def _list_watch(local: LocalCluster, out: Output, *flags: str) -> int:
    """``kfcompile list -w`` with ``flags`` on a submitted job: once both kinds are watched,
    the job's life, then Ctrl-C (never after the command has ended on its own)."""
    main_thread = threading.main_thread().ident
    assert main_thread is not None
    ended, lock = threading.Event(), threading.Lock()

    def drive() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not ended.is_set():
            watched = [local.kube.requests.count("GET", f"/{p}", watch=True) for p in PLURALS]
            if all(watched):
                break
            time.sleep(0.02)
        local.clock.advance(5.0)
        while time.monotonic() < deadline and " finished " not in out.text():
            if ended.wait(0.02):
                return
        with lock:
            if not ended.is_set():
                signal.pthread_kill(main_thread, signal.SIGINT)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        return main(["list", "-w", *flags, "--kubeconfig", str(local.kubeconfig)])
    finally:
        with lock:
            ended.set()
        driver.join(30)


def _submitted(local: LocalCluster | PortCluster, *steps: tuple[int, int, str]) -> None:
    """A Kueue-queued job (admitted 0.5 s after its create, running 0.2 s later, done 1.1 s after
    it is admitted), reporting ``steps`` (percent, seconds remaining, loss) 0.2 s apart."""
    fake = local.fake

    def reports(_: object) -> None:
        for i, (percent, remaining, loss) in enumerate(steps):
            report = functools.partial(courses.progress, fake, NAMESPACE, "demo", percent)
            fake.at(1.0 + 0.2 * i, functools.partial(report, remaining=remaining, loss=loss))

    fake.store.on_create += [courses.queued(fake, ends=1.1), reports]
    job = structure({"name": "demo", "image": "python:3", "command": ["python"], "queue": QUEUE})
    lifecycle.submit(local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={})


def test_list_watch_prints_the_table_then_a_line_per_change_until_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = Output()
    with LocalCluster(schema_check.require_shared(), auto=False, scenario=None) as local:
        # its steps reported in status.trainerStatus
        _submitted(local, (30, 120, "0.9"), (60, 60, "0.81"), (90, 0, "0.729"))
        monkeypatch.setattr("sys.stdout", out)
        code = _list_watch(local, out)
    assert code == 130
    lines = [" ".join(line.split()) for line in out.text().splitlines()]
    assert lines[0] == "NAMESPACE NAME KIND TARGET STATE PROGRESS CREATED"
    # Kueue's: its Workload says why it waits
    assert lines[1].startswith("default demo TrainJob trainjob/v2.3 SUSPENDED (Queued) - ")
    # Each step the training process reports, with how old the report is (written just now)
    reported = [
        "default demo TrainJob progressed RUNNING (JobsActive) 30% ETA 2m00s · loss 0.9",
        "default demo TrainJob progressed RUNNING (JobsActive) 60% ETA 1m00s · loss 0.81",
        "default demo TrainJob progressed RUNNING (JobsActive) 90% ETA 0s · loss 0.729",
        "default demo TrainJob finished SUCCEEDED (Complete) 90% ETA 0s · loss 0.729",
    ]
    assert lines[2:4] == [
        "default demo TrainJob admitted PENDING (Resumed)",
        "default demo TrainJob running RUNNING (JobsActive)",
    ]
    assert len(lines[4:]) == len(reported), lines
    for got, want in zip(lines[4:], reported, strict=True):
        assert re.fullmatch(re.escape(want) + r" · \d+s ago", got), (got, want)
    # Ctrl-C closed the watches: no thread of the merge is left reading one.
    assert not [t for t in threading.enumerate() if t.name.startswith("kfcompile-merge-")]
    assert "Traceback" not in capsys.readouterr().err


def test_list_all_namespaces_watch_without_the_right_falls_back_to_the_namespace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Role, no ClusterRole: the table and the watch both fall back to the namespace, said
    once; nothing is asked at the cluster scope after the table's refused list."""
    out = Output()
    local = cli(monkeypatch, scenario=None)
    _submitted(local)
    local.store.namespaces_allowed = {NAMESPACE}  # alice's Role
    monkeypatch.setattr("sys.stdout", out)
    sent: list[bool] = []

    def ctrl_c_once_finished() -> None:
        if " finished " in out.text() and not sent:
            sent.append(True)
            signal.raise_signal(signal.SIGINT)

    local.clock.on_tick(ctrl_c_once_finished)
    before = len(local.calls)
    code = main(["list", "-w", "-A"])
    jobs = [c for c in local.calls[before:] if c.kind in ("TrainJob", "PyTorchJob")
            and c.method in ("list", "watch")]  # fmt: skip
    err = capsys.readouterr().err
    assert code == 130, err
    assert err.count("\n") == 1 and err.endswith(
        "it needs list at the cluster scope (a ClusterRole); listing and watching namespace "
        "default instead\n"
    )
    lines = [" ".join(line.split()) for line in out.text().splitlines()]
    assert lines[1].split()[:3] == ["default", "demo", "TrainJob"]
    assert lines[-1] == "default demo TrainJob finished SUCCEEDED (Complete)"  # watched
    everywhere = [(c.method, c.kind) for c in jobs if c.namespace is None]
    assert everywhere == [("list", "TrainJob")]  # the table's first, refused
    assert all(c.namespace == NAMESPACE for c in jobs[1:])


PLURALS = (TRAINJOB.plural, PYTORCHJOB.plural)


def test_watch_jobs_reports_no_job_from_outside_what_it_watches() -> None:
    with PortCluster(schema_check.require_shared()) as local:
        local.store.on_create.append(courses.runs(local.fake))
        job = structure({"name": "demo", "image": "python:3", "command": ["python"]})
        ref = lifecycle.submit(
            local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={}
        ).ref
        stored = local.store.get(API, "TrainJob", NAMESPACE, "demo")
        assert stored is not None
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NAMESPACE}}
        sent = [("ADDED", impostor(stored, "intruder", "team-b")), ("ADDED", pod)]
        port = Hostile(local.fake, "TrainJob", sent)
        session = lifecycle.Session(port, local.clock, jitter=fixed_jitter)  # type: ignore[arg-type]
        seen = []
        for event in lifecycle.watch_jobs(session, NAMESPACE):
            seen.append(event)
            if event.ref == ref and event.what is Happened.FINISHED:
                break
    assert {e.ref for e in seen} == {ref}, [str(e.ref) for e in seen]

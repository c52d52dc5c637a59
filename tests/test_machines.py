"""The lifecycle's loops as machines (kfcompile.lifecycle: ``Retry``, ``Waiter``, ``Lister``,
``Follower`` and its ``Cursor``): each row feeds what the API answered and asserts what the
machine asks next. No server, no clock: times are numbers given with the answers.

What runs once is straight-line code over the ports (``wait_gone``, the sync helper's
``await_running``, ``submit``'s ``create_all``, ``repair`` and ``roll_back``): each row sets a
small scripted port (a dict of objects, calls that fail) and asserts what the code returns or
raises, the calls it made and what stays on the cluster; a Ctrl-C is sent at every line.

At the end, the drivers (``wait``, ``logs``) against a scripted port and a fake clock, for what
the machines change in the requests that reach the API.
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import math
import sys
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any, TypeVar

import pytest

from kfcompile import lifecycle, structure
from kfcompile.lifecycle.deleting import Remaining, StillDeleting
from kfcompile.lifecycle.objects import (
    AllRead,
    Endless,
    Forgotten,
    Lister,
    ListPage,
    PageRead,
    TokenExpired,
)
from kfcompile.lifecycle.observe import ListPods, PodsListed, observation, pod_waiting
from kfcompile.lifecycle.pod_logs import (
    Cursor,
    Dropped,
    End,
    Follower,
    InTurn,
    JobGone,
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
from kfcompile.lifecycle.ports import (
    Clock,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    Page,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile.lifecycle.session import (
    LIST_RESTARTS,
    SPEC_HASH,
    Attempt,
    Backoff,
    ClusterError,
    Failed,
    GiveUp,
    Machine,
    Pause,
    Retry,
    Slept,
    Unexpected,
)
from kfcompile.lifecycle.submitting import Left, create_all, prepare, removal, repair, roll_back
from kfcompile.lifecycle.sync import await_running
from kfcompile.lifecycle.waiting import (
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
    Waiter,
    WatchJob,
)
from kfcompile.status import JobState, State

Obj = dict[str, Any]
API = "trainer.kubeflow.org/v1alpha1"
REF = Ref(API, "TrainJob", "default", "demo")
LOST = Transient(0, "ConnectionError", "connection reset by peer")
BUSY = Transient(503, "ServiceUnavailable", "try later")
ASKS_3 = Transient(429, "TooManyRequests", "slow down", retry_after=3.0)
ASKS_30 = Transient(503, "ServiceUnavailable", "come back later", retry_after=30.0)


def job(version: str = "10", *, done: bool = False, nodes: int = 1) -> Obj:
    status = {"conditions": [{"type": "Complete", "status": "True"}]} if done else {}
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": "demo", "namespace": "default", "resourceVersion": version},
        "spec": {"trainer": {"numNodes": nodes}},
        "status": status,
    }


def pod(rank: int = 0, *, uid: str = "u0", restarts: int = 0, ready: bool = True) -> Obj:
    state = {"running": {}} if ready else {"waiting": {"reason": "ContainerCreating"}}
    return {
        "metadata": {
            "name": f"demo-node-0-{rank}-{uid}",
            "uid": uid,
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"batch.kubernetes.io/job-completion-index": str(rank)},
        },
        "status": {
            "phase": "Running" if ready else "Pending",
            "containerStatuses": [
                {"name": "node", "ready": ready, "restartCount": restarts, "state": state}
            ],
        },
    }


RUNNING = [pod()]
STARTING = [pod(ready=False)]
STUCK = [
    {
        **pod(ready=False),
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {"name": "node", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
            ],
        },
    }
]
NOT_SCHEDULED = [{**pod(ready=False), "status": {"phase": "Pending"}}]  # no node, no container
REWRITTEN = {  # the same pod, its status rewritten: not scheduled still
    **NOT_SCHEDULED[0],
    "metadata": {**NOT_SCHEDULED[0]["metadata"], "resourceVersion": "8"},
    "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]},
}
STARTING[0]["spec"] = {"nodeName": "gpu-node-0"}  # scheduled, its container being created
KUBELET_DOWN = Transient(
    500,
    "InternalError",
    'Get "https://10.0.0.5:10250/containerLogs/default/demo-node-0-0-u0/node?follow=true": '
    "dial tcp 10.0.0.5:10250: connect: connection refused",
)
RANK_0 = (
    "jobset.sigs.k8s.io/jobset-name=demo,jobset.sigs.k8s.io/replicatedjob-name=node,"
    "batch.kubernetes.io/job-completion-index=0"
)
EXPIRING = [Listed(job(), "10"), PodsListed(STARTING), Expired()]  # a list, its pods, then 410


# --- retry --------------------------------------------------------------------------------------

# (what happened, at what time) from a fresh Retry(retry_for=10) -> what it asks next, at `now`.
RETRY_ROWS: list[tuple[str, list[tuple[Any, float]], float, Any]] = [
    ("a call is made first", [], 0.0, Attempt()),
    ("a failure pauses, within the window", [(Failed(LOST), 0.0)], 0.0, Pause(0, at_most=10.0)),
    ("after the pause, the call again", [(Failed(LOST), 0.0), (Slept(), 0.1)], 0.1, Attempt()),
    (
        "the second failure pauses longer",
        [(Failed(LOST), 0.0), (Slept(), 0.1), (Failed(LOST), 0.2)],
        0.2,
        Pause(1, at_most=9.8),
    ),
    (
        "the window counts from the first failure",
        [(Failed(LOST), 3.0), (Slept(), 4.0), (Failed(LOST), 13.5)],
        13.5,
        GiveUp(10.5, LOST),
    ),
    ("trouble longer than the window gives up", [(Failed(LOST), 0.0)], 10.0, GiveUp(10.0, LOST)),
    (
        "a Retry-After is the least pause",
        [(Failed(ASKS_3), 0.0)],
        0.0,
        Pause(0, at_most=10.0, at_least=3.0),
    ),
    (
        "within what is left of the window",
        [(Failed(ASKS_30), 2.0)],
        4.0,
        Pause(0, at_most=8.0, at_least=8.0),
    ),
    (
        "before the API ever answered, a call that got no answer gives up at once",
        [(Failed(LOST, first_contact=True), 0.0)],
        0.0,
        GiveUp(0.0, LOST, unanswered=True),
    ),
    (
        "but an error status is an answer, even the first",
        [(Failed(BUSY, first_contact=True), 0.0)],
        0.0,
        Pause(0, at_most=10.0),
    ),
]


@pytest.mark.parametrize(
    ("fed", "now", "expected"), [r[1:] for r in RETRY_ROWS], ids=[r[0] for r in RETRY_ROWS]
)
def test_retry(fed: list[tuple[Any, float]], now: float, expected: Any) -> None:
    retry = Retry(10.0)
    for answer, at in fed:
        retry = retry.receive(answer, at)
    assert retry.next_request(now) == expected


def test_a_retry_fed_out_of_turn_is_a_bug() -> None:
    with pytest.raises(Unexpected, match="Retry in ATTEMPT got Slept"):
        Retry(10.0).receive(Slept(), 0.0)
    with pytest.raises(Unexpected, match="Retry in PAUSE got Failed"):
        Retry(10.0).receive(Failed(LOST), 0.0).receive(Failed(LOST), 0.0)


@pytest.mark.parametrize(
    ("attempt", "jitter", "at_most", "seconds"),
    [
        (0, 0.0, math.inf, 0.05),  # half of the first delay is fixed, half drawn
        (0, 1.0, math.inf, 0.1),
        (3, 0.5, math.inf, 0.6),  # 0.8, three quarters of it
        (6, 0.0, math.inf, 2.5),  # 6.4 capped at 5
        (10**6, 0.0, math.inf, 2.5),  # no overflow however long the trouble
        (6, 1.0, 1.25, 1.25),  # never past what is left of a timeout
        (0, 0.5, -1.0, 0.0),  # nor below nothing
    ],
)
def test_one_backoff(attempt: int, jitter: float, at_most: float, seconds: float) -> None:
    assert Backoff().seconds(Pause(attempt, at_most), jitter) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("attempt", "at_most", "at_least", "seconds"),
    [
        (0, math.inf, 3.0, 3.0),  # what Retry-After asks, over the backoff's 0.075
        (6, math.inf, 1.0, 3.75),  # the backoff, when it is longer
        (0, 2.0, 3.0, 2.0),  # never past what is left
    ],
)
def test_the_least_pause(attempt: int, at_most: float, at_least: float, seconds: float) -> None:
    assert Backoff().seconds(Pause(attempt, at_most, at_least), 0.5) == pytest.approx(seconds)


# --- wait ---------------------------------------------------------------------------------------

# (answers fed, each at t=1 unless given as (answer, t)) -> the next request at t=1 (or given);
# the wait started at t=1 with a timeout of 30 s and rides out 20 s of trouble.
WAIT_ROWS: list[tuple[str, str, list[Any], Any]] = [
    ("it lists first", "done", [], ListJob()),
    ("a listed job has its pods listed", "done", [Listed(job(), "10")], ListPods(job())),
    (
        "then it watches from the list's version",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING)],
        WatchJob("10", 5),
    ),
    (
        "each version of the job has its pods listed",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Changed(job("12"))],
        ListPods(job("12")),
    ),
    (
        "and the open watch is read on",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Changed(job("12")), PodsListed(RUNNING)],
        ReadEvent(),
    ),
    (
        "a closed stream looks at the pods again",
        "done",
        [
            Listed(job(), "10"),
            PodsListed(STARTING),
            Changed(job("12")),
            PodsListed(STARTING),
            (StreamEnded(), 6),
        ],
        ListPods(job("12")),
    ),
    (
        "and resumes from the last version seen",
        "done",
        [
            Listed(job(), "10"),
            PodsListed(STARTING),
            Changed(job("12")),
            PodsListed(STARTING),
            (StreamEnded(), 6),
            (PodsListed(RUNNING), 6),
        ],
        WatchJob("12", 5),
    ),
    (
        "a bookmark moves the version",
        "done",
        [
            Listed(job(), "10"),
            PodsListed(STARTING),
            (Bookmark("15"), 3),
            (StreamEnded(), 6),
            (PodsListed(STARTING), 6),
        ],
        WatchJob("15", 5),
    ),
    (
        "a watch that ends at once without an event is trouble",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), StreamEnded()],
        Pause(0, at_most=20.0),
    ),
    (
        "410 lists again",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Expired()],
        ListJob(),
    ),
    (
        "trouble on the watch pauses",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Trouble(LOST)],
        Pause(0, at_most=20.0),  # the retry window (20 s) is shorter than the timeout (30 s)
    ),
    (
        "and then watches again from the same version",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Trouble(LOST), Slept()],
        WatchJob("10", 5),
    ),
    (
        "trouble in a row pauses longer",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Trouble(LOST), Slept(), (Trouble(LOST), 2)],
        (Pause(1, at_most=19.0), 2),
    ),
    (
        "trouble past the retry window gives up",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Trouble(LOST), Slept(), (Trouble(LOST), 22)],
        (GiveUp(21.0, LOST), 22),
    ),
    (
        "a refused watch polls",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Refused()],
        Pause(0, at_most=30.0),  # never past the timeout
    ),
    (
        "by listing",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Refused(), Slept()],
        ListJob(),
    ),
    (
        "and pauses longer while nothing changes",
        "done",
        [
            Listed(job(), "10"),
            PodsListed(STARTING),
            Refused(),
            Slept(),
            Listed(job(), "10"),
            PodsListed(STARTING),
        ],
        Pause(1, at_most=30.0),
    ),
    (
        "a second 410 in a row pauses before it lists",
        "done",
        [*EXPIRING, *EXPIRING],
        Pause(0, at_most=30.0),
    ),
    (
        "then lists",
        "done",
        [*EXPIRING, *EXPIRING, Slept()],
        ListJob(),
    ),
    (
        "and pauses longer at the third",
        "done",
        [*EXPIRING, *EXPIRING, Slept(), *EXPIRING],
        Pause(1, at_most=30.0),
    ),
    (
        "an event between two 410s makes the second a first",
        "done",
        [
            *EXPIRING,
            Listed(job(), "10"),
            PodsListed(STARTING),
            Changed(job("12")),
            PodsListed(STARTING),
            Expired(),
        ],
        ListJob(),
    ),
    (
        "a job never there is missing",
        "done",
        [NoJob()],
        Missing(deleted=False),
    ),
    (
        "a job gone from a later list was deleted",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Expired(), NoJob()],
        Missing(deleted=True),
    ),
    (
        "a deleted event ends it",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING), Deleted()],
        Missing(deleted=True),
    ),
    (
        "running is reached by running pods",
        "running",
        [Listed(job(), "10"), PodsListed(RUNNING)],
        Done(observation(job(), RUNNING)),
    ),
    (
        "done is not",
        "done",
        [Listed(job(), "10"), PodsListed(RUNNING)],
        WatchJob("10", 5),
    ),
    (
        "done is reached by a finished job, on the watch too",
        "done",
        [Listed(job(), "10"), PodsListed(RUNNING), Changed(job("11", done=True)), PodsListed([])],
        Done(observation(job("11", done=True), [])),
    ),
    (
        "the timeout ends it, saying how the job was last seen",
        "done",
        [Listed(job(), "10"), PodsListed(STARTING)],
        (OutOfTime(observation(job(), STARTING)), 31),
    ),
    (
        "a watch near the timeout lasts what is left",
        "done",
        [Listed(job(), "10"), (PodsListed(STARTING), 28.5)],
        (WatchJob("10", 3), 28.5),
    ),
]


def _fed_waiter(until: Any, answers: Sequence[Any], timeout: float = 30.0) -> Waiter:
    waiter = Waiter.start(until, 1.0, timeout, retry_for=20.0)
    for fed in answers:
        answer, at = fed if isinstance(fed, tuple) else (fed, 1.0)
        waiter = waiter.receive(answer, at)
    return waiter


@pytest.mark.parametrize(
    ("until", "answers", "expected"), [r[1:] for r in WAIT_ROWS], ids=[r[0] for r in WAIT_ROWS]
)
def test_wait(until: Any, answers: list[Any], expected: Any) -> None:
    request, now = expected if isinstance(expected, tuple) else (expected, 1.0)
    assert _fed_waiter(until, answers).next_request(now) == request


def test_a_watch_that_keeps_expiring_is_said_once() -> None:
    assert _fed_waiter("done", EXPIRING).notice is None  # a first 410 happens
    waiter = _fed_waiter("done", [*EXPIRING, *EXPIRING])
    assert isinstance(waiter.notice, Gone) and "keeps expiring" in str(waiter.notice)
    later = waiter.receive(Slept(), 1.0)
    for answer in EXPIRING:
        later = later.receive(answer, 1.0)
    assert later.notice is None and later.next_request(1.0) == Pause(1, at_most=30.0)


def test_each_change_worth_a_line_is_news_once() -> None:
    waiter = _fed_waiter("done", [Listed(job(), "10"), PodsListed(STARTING)])
    assert waiter.news == observation(job(), STARTING)
    waiter = waiter.receive(Changed(job("11")), 1.0).receive(PodsListed(STARTING), 1.0)
    assert waiter.news is None  # the same summary: no second line
    waiter = waiter.receive(Changed(job("12")), 1.0).receive(PodsListed(RUNNING), 1.0)
    assert waiter.news == observation(job("12"), RUNNING)


@pytest.mark.parametrize(
    ("answers", "wrong"),
    [
        ([], Changed(job())),  # an event before any watch
        ([Listed(job(), "10")], Listed(job(), "10")),  # a list answering a pod list
        ([Listed(job(), "10"), PodsListed(STARTING)], Slept()),  # waking with no pause
    ],
)
def test_an_answer_without_a_row_is_a_bug(answers: list[Any], wrong: Any) -> None:
    with pytest.raises(Unexpected, match="Waiter in"):
        _fed_waiter("done", answers).receive(wrong, 1.0)


# --- waiting for a deleted job to be gone -------------------------------------------------------


def deleting(uid: str = "u1", finalizers: tuple[str, ...] = ("foregroundDeletion",)) -> Obj:
    obj = job()
    obj["metadata"].update(uid=uid, deletionTimestamp="2025-01-01T00:00:00Z")
    obj["metadata"]["finalizers"] = list(finalizers)
    return obj


def terminating_pod() -> Obj:
    obj = {"apiVersion": "v1", "kind": "Pod", **pod()}  # as a list's items come from the port
    obj["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:30Z"
    obj["spec"] = {"nodeName": "gpu-node-1"}
    return obj


HELD = "held by foregroundDeletion: waiting for the garbage collector"
TERMINATING = (
    "demo-node-0-0-u0 (Terminating on node gpu-node-1: waiting for its kubelet to confirm it "
    "stopped)"
)
NOT_GONE = "TrainJob demo in namespace default not gone after 10.0s: still there: "


class Going:
    """A ``Cluster`` port on which, at each look, the job is the next of ``jobs`` (None: there
    is none) and its pods the next of ``pods`` (the last of each stays), with a continue token
    when ``more``; it has no JobSet and no Job."""

    def __init__(
        self, jobs: list[Obj | None], pods: list[list[Obj]] | None = None, more: bool = False
    ) -> None:
        self.jobs, self.pods, self.more = jobs, pods or [[]], more

    @staticmethod
    def _next(items: list[Any]) -> Any:
        return items.pop(0) if len(items) > 1 else items[0]

    def get(self, ref: Ref) -> Obj:
        found = self._next(self.jobs) if ref.kind == "TrainJob" else None
        if found is None:
            raise NotFound(404, "NotFound", f"{ref.name} not found")
        return found  # type: ignore[no-any-return]

    def list(self, api_version: str, kind: str, namespace: str | None, **query: Any) -> Page:
        if kind != "Pod":
            return Page([], "1")
        return Page(self._next(self.pods), "1", "t" if self.more else None)


# (the job at each look, its pods at each look and whether there are more, waiting for them
# too, the timeout) -> what waiting for it to be gone raises (None: it is gone), and its pauses
GONE_ROWS: list[tuple[str, list[Obj | None], list[list[Obj]], bool, float | None, Any, Any]] = [
    ("no job: gone", [None], [], False, 10.0, None, []),
    (
        "another job of that name is not the one deleted",
        [deleting(uid="u2")],
        [],
        False,
        10.0,
        None,
        [],
    ),
    (
        "held: it pauses with the one backoff, and looks again",
        [deleting(), deleting(), None],
        [],
        False,
        10.0,
        None,
        [0.075, 0.15],
    ),
    (
        "out of time from the first look, naming what holds it",
        [deleting()],
        [],
        False,
        10.0,
        f"{NOT_GONE}TrainJob demo ({HELD})",
        10.0,
    ),
    (
        "with its pods: the job gone, a pod left is waited for",
        [None],
        [[terminating_pod()], []],
        False,
        10.0,
        None,
        [0.075],
    ),
    (
        "with its pods: what is left names them",
        [None],
        [[terminating_pod()]],
        True,
        10.0,
        f"{NOT_GONE}pod {TERMINATING}, more pods",
        10.0,
    ),
    (
        "no timeout: it waits as long as it takes",
        [*[deleting()] * 40, None],
        [],
        False,
        None,
        None,
        132.225,
    ),
]


@pytest.mark.parametrize(
    ("jobs", "pods", "more", "timeout", "expected", "pauses"),
    [r[1:] for r in GONE_ROWS],
    ids=[r[0] for r in GONE_ROWS],
)
def test_wait_gone(
    jobs: list[Obj | None],
    pods: list[list[Obj]],
    more: bool,
    timeout: float | None,
    expected: str | None,
    pauses: list[float] | float,
) -> None:
    clock = FakeClock()
    session = lifecycle.Session(Going(jobs, pods, more), clock, jitter=lambda: 0.5)  # type: ignore[arg-type]

    def gone() -> None:
        lifecycle.wait_gone(session, REF, uid="u1", dependents=bool(pods), timeout=timeout)

    if expected is None:
        gone()
    else:
        with pytest.raises(StillDeleting) as info:
            gone()
        assert str(info.value) == expected
    if isinstance(pauses, list):
        assert clock.slept == pytest.approx(pauses)
    else:  # seconds in all (the last pause cut to what was left of the timeout)
        assert sum(clock.slept) == pytest.approx(pauses)


def test_what_is_left_is_told_from_the_second_look_on_when_it_changes() -> None:
    clock, told = FakeClock(), []
    port = Going([deleting(), deleting(), deleting(), None], [[], [], [], [terminating_pod()], []])
    session = lifecycle.Session(port, clock, jitter=lambda: 0.5)  # type: ignore[arg-type]
    lifecycle.wait_gone(
        session,
        REF,
        uid="u1",
        dependents=True,
        timeout=60.0,
        on_change=lambda left, waited: told.append((str(left), waited)),
    )
    assert told == [
        (f"TrainJob demo ({HELD})", pytest.approx(0.075)),
        (f"pod {TERMINATING}", pytest.approx(0.525)),
    ]
    assert len(clock.slept) == 4  # gone at the fifth look


def test_what_is_left_reads_as_a_list() -> None:
    left = Remaining(REF, JobState(State.DELETING, HELD, ""), (f"pod {TERMINATING}", "more pods"))
    assert str(left) == f"TrainJob demo ({HELD}), pod {TERMINATING}, more pods"


M = TypeVar("M", bound=Machine)


def after(machine: M, answers: Sequence[Any], at: float = 0.0) -> M:
    """``machine`` after ``answers``, each told at ``at``."""
    for answer in answers:
        machine = machine.receive(answer, at)
    return machine


# --- every page of a list ----------------------------------------------------------------------

EXPIRED_TOKEN = Gone(410, "Expired", "the continue token has expired")


def page(
    *names: str, token: str | None = None, remaining: int | None = None, version: str = "10"
) -> PageRead:
    return PageRead(Page([{"metadata": {"name": n}} for n in names], version, token, remaining))


def named_items(*names: str, version: str = "10") -> AllRead:
    return AllRead(tuple({"metadata": {"name": n}} for n in names), version)


SECOND_EXPIRES = [page("a", token="t1"), TokenExpired(EXPIRED_TOKEN)]
ENDLESS_COUNT = "more pages than the items the server said were left (remainingItemCount)"

# what it was told -> what it asks next
LIST_ROWS: list[tuple[str, list[Any], Any]] = [
    ("the first page first", [], ListPage(None)),
    ("then the page after the token", [page("a", token="t1")], ListPage("t1")),
    (
        "the last page: every item of every page",
        [page("a", token="t1"), page("b")],
        named_items("a", "b"),
    ),
    ("an empty token is the last page", [page("a", token="")], named_items("a")),
    (
        "its version is the first page's (every page is of that snapshot)",
        [page("a", token="t1", version="7"), page("b", version="9")],
        named_items("a", "b", version="7"),
    ),
    (
        "a token handed out twice would page for ever",
        [page("a", token="t1"), page("b", token="t1")],
        Endless("the server gave the same continue token twice"),
    ),
    ("one item left: one more page", [page("a", token="t1", remaining=1)], ListPage("t1")),
    (
        "a page more than the count said were left",
        [page("a", token="t1", remaining=1), page("b", token="t2")],
        Endless(ENDLESS_COUNT),
    ),
    ("a token with none left", [page("a", token="t1", remaining=0)], Endless(ENDLESS_COUNT)),
    ("a 410 on the first page ends it", [TokenExpired(EXPIRED_TOKEN)], Forgotten(EXPIRED_TOKEN)),
    ("a 410 on a later page starts it over", SECOND_EXPIRES, ListPage(None)),
    (
        "started over, what was read before is dropped",
        [*SECOND_EXPIRES, page("b")],
        named_items("b"),
    ),
    (
        "started over, the tokens seen before count for nothing",
        [*SECOND_EXPIRES, page("a", token="t1"), page("b")],
        named_items("a", "b"),
    ),
    (
        f"started over {LIST_RESTARTS} times, it still starts over",
        SECOND_EXPIRES * LIST_RESTARTS,
        ListPage(None),
    ),
    ("then a 410 ends it", SECOND_EXPIRES * (LIST_RESTARTS + 1), Forgotten(EXPIRED_TOKEN)),
]


@pytest.mark.parametrize(
    ("fed", "expected"), [r[1:] for r in LIST_ROWS], ids=[r[0] for r in LIST_ROWS]
)
def test_lister(fed: list[Any], expected: Any) -> None:
    machine = after(Lister(), fed)
    assert machine.next_request(0.0) == expected


@pytest.mark.parametrize(
    ("fed", "wrong"),
    [([], Slept()), ([page("a")], page("b")), ([TokenExpired(EXPIRED_TOKEN)], page("b"))],
)
def test_a_lister_fed_out_of_turn_is_a_bug(fed: list[Any], wrong: Any) -> None:
    machine = after(Lister(), fed)
    with pytest.raises(Unexpected, match="Lister in"):
        machine.receive(wrong, 0.0)


# --- the sync helper pod starting ---------------------------------------------------------------


def helper(phase: str, **status: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kfcompile-sync-0", "namespace": "default"},
        "status": {"phase": phase, **status},
    }


PENDING_HELPER = helper("Pending")
STUCK_HELPER = helper(
    "Pending",
    containerStatuses=[{"name": "sync", "state": {"waiting": {"reason": "ImagePullBackOff"}}}],
)
HELPER = Ref("v1", "Pod", "default", "kfcompile-sync-0")
STARTED = "pod kfcompile-sync-0 is not scheduled yet"


class Helper:
    """A ``Cluster`` port whose helper pod is, at each read, the next of ``pods`` (the last
    stays; None: there is none), with no events."""

    def __init__(self, *pods: Obj | None) -> None:
        self.pods = list(pods)

    def get(self, ref: Ref) -> Obj:
        pod = self.pods.pop(0) if len(self.pods) > 1 else self.pods[0]
        if pod is None:
            raise NotFound(404, "NotFound", f'pods "{ref.name}" not found')
        return pod

    def list(self, api_version: str, kind: str, namespace: str | None, **query: Any) -> Page:
        return Page([], "1")


# (the helper pod at each look, the timeout) -> what waiting for it to run raises (None: it
# runs), and the pauses it made (the one backoff: 0.075 s, doubling, with the jitter 0.5)
START_ROWS: list[tuple[str, list[Obj | None], float, Any, list[float]]] = [
    ("running: started", [helper("Running")], 10.0, None, []),
    (
        "no pod: it never will",
        [None],
        10.0,
        f"sync helper {HELPER} disappeared before it started",
        [],
    ),
    (
        "ended: it never will",
        [helper("Failed")],
        10.0,
        f"sync helper {HELPER} ended (Failed) before it started",
        [],
    ),
    (
        "succeeded is ended too",
        [helper("Succeeded")],
        10.0,
        f"sync helper {HELPER} ended (Succeeded) before it started",
        [],
    ),
    (
        "stuck: its status says why",
        [STUCK_HELPER],
        10.0,
        "sync helper: pod kfcompile-sync-0 cannot start (ImagePullBackOff)",
        [],
    ),
    (
        "pending: looked at again after each pause of the one backoff",
        [PENDING_HELPER, PENDING_HELPER, PENDING_HELPER, helper("Running")],
        10.0,
        None,
        [0.075, 0.15, 0.3],
    ),
    (
        "out of time from the start, the last pause cut to what was left",
        [PENDING_HELPER],
        1.0,
        f"sync helper not running after 1s (--timeout): {STARTED}",
        [0.075, 0.15, 0.3, 0.475],
    ),
]


@pytest.mark.parametrize(
    ("pods", "timeout", "expected", "pauses"),
    [r[1:] for r in START_ROWS],
    ids=[r[0] for r in START_ROWS],
)
def test_await_running(
    pods: list[Obj | None], timeout: float, expected: str | None, pauses: list[float]
) -> None:
    clock = FakeClock()
    session = lifecycle.Session(Helper(*pods), clock, jitter=lambda: 0.5)  # type: ignore[arg-type]
    if expected is None:
        await_running(session, HELPER, timeout)
    else:
        error = lifecycle.TimedOut if "--timeout" in expected else ClusterError
        with pytest.raises(error) as info:
            await_running(session, HELPER, timeout)
        assert str(info.value) == expected
    assert clock.slept == pytest.approx(pauses)


# --- submit: creating, repairing, rolling back -------------------------------------------------

DIGEST = "0123456789abcdef"


def companion(kind: str, name: str, *, digest: str = DIGEST, owner: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "annotations": {SPEC_HASH: digest}}
    if owner is not None:
        meta["ownerReferences"] = [{"uid": owner}]
    return {"apiVersion": "v1", "kind": kind, "metadata": meta}


CM, SECRET = companion("ConfigMap", "demo-script"), companion("Secret", "demo-env")
JOB = {**job(), "metadata": {**job()["metadata"], "annotations": {SPEC_HASH: DIGEST}}}
MADE_JOB = {**JOB, "metadata": {**JOB["metadata"], "uid": "j1"}}  # as the server answers
OBJECTS = (CM, SECRET, JOB)
FORBIDDEN = Forbidden(403, "Forbidden", "no right")
DOWN = lifecycle.Unavailable("create TrainJob default/demo: the API server kept failing for 60s")
TAKEN = lifecycle.NameTaken("ConfigMap demo-script in namespace default already exists")
CTRL_C = KeyboardInterrupt()


class Store:
    """A ``Cluster`` port over a dict of objects, recording each call as (verb, kind) in
    ``asked``. ``fail``: (verb, kind) -> what that call raises the next time, before it is done;
    ``lose``: after it is done (it reached the server, its answer never came)."""

    def __init__(self, *objects: Obj) -> None:
        self.objects = {Ref.of(obj): obj for obj in objects}
        self.asked: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], BaseException] = {}
        self.lose: dict[tuple[str, str], BaseException] = {}
        self.going: set[Ref] = set()  # their deletion ends once they have been read
        self.uids = 0

    def _ask(self, verb: str, ref: Ref) -> BaseException | None:
        """Record the call; raise its failure, or return what it raises once done."""
        self.asked.append((verb, ref.kind))
        error = self.fail.pop((verb, ref.kind), None)
        if error is not None:
            raise error
        return self.lose.pop((verb, ref.kind), None)

    def served(self, api_version: str, kind: str) -> bool:
        return True

    def _have(self, ref: Ref) -> Obj:
        if ref not in self.objects:
            raise NotFound(404, "NotFound", f"{ref.kind.lower()}s {ref.name!r} not found")
        return self.objects[ref]

    def get(self, ref: Ref) -> Obj:
        self._ask("get", ref)
        found = self._have(ref)
        if ref in self.going:
            del self.objects[ref]
        return found

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        ref = Ref.of(obj)
        lost = self._ask("create", ref)
        if ref in self.objects:
            raise Conflict(409, "AlreadyExists", f"{ref.kind.lower()}s {ref.name!r} exists")
        self.uids += 1
        made = {**obj, "metadata": {**obj["metadata"], "uid": f"u{self.uids}"}}
        if not dry_run:
            self.objects[ref] = made
        if lost is not None:
            raise lost
        return made

    def patch(self, ref: Ref, patch: Obj) -> Obj:
        lost = self._ask("patch", ref)
        obj = self._have(ref)
        self.objects[ref] = {**obj, "metadata": {**obj["metadata"], **patch["metadata"]}}
        if lost is not None:
            raise lost
        return self.objects[ref]

    def delete(self, ref: Ref, propagation: str = "Foreground", *, uid: str | None = None) -> None:
        lost = self._ask("delete", ref)
        self._have(ref)
        del self.objects[ref]
        if lost is not None:
            raise lost

    def owners(self, obj: Obj) -> list[str]:
        refs = self.objects[Ref.of(obj)]["metadata"].get("ownerReferences", [])
        return [r["uid"] for r in refs]


Fails = dict[tuple[str, str], BaseException]  # (verb, kind) -> what the call raises


def on(store: Store) -> lifecycle.Session:
    return lifecycle.Session(store, FakeClock(), jitter=lambda: 0.5)  # type: ignore[arg-type]


def forbidden() -> Forbidden:
    return Forbidden(403, "Forbidden", "no right")


NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
SPEC = structure(
    {
        "name": "demo",
        "image": "python:3.11-slim",
        "launcher": {"kind": "torchrun", "entrypoint": "train.py"},
        "script": "print(1)",
        "secret_env": ["HF_TOKEN"],
    }
)
ENV = {"HF_TOKEN": "hf_s3cr3t"}
PREPARED = prepare(SPEC, "pytorchjob/v1", "default", ENV)
P_CM, P_SECRET, P_JOB = PREPARED.objects
P_MADE = {**P_JOB, "metadata": {**P_JOB["metadata"], "uid": "p1"}}
P_GOING = {
    **P_MADE,
    "metadata": {**P_MADE["metadata"], "deletionTimestamp": "2025-01-01T00:00:00Z"},
}
P_OTHER = {**P_MADE, "metadata": {**P_MADE["metadata"], "annotations": {SPEC_HASH: "another"}}}
P_REF = Ref.of(P_JOB)
MADE_IN_ORDER = [("create", "ConfigMap"), ("create", "Secret"), ("create", "PyTorchJob")]
OWNED_IN_ORDER = [("patch", "ConfigMap"), ("patch", "Secret")]
LOOK = [("get", "PyTorchJob")]  # the job's name, read first

# (on the cluster besides its namespace, submit's options, a call that fails) -> what submit
# returns or raises, and the calls it makes once preflight has passed. A job being deleted
# (P_GOING) is gone once read, unless submit waits for it no time.
SUBMIT_ROWS: list[
    tuple[str, tuple[Obj, ...], dict[str, Any], dict[tuple[str, str], Any], Any, Any]
] = [
    (
        "free: created in order, companions first, then the job owns each",
        (),
        {},
        {},
        lifecycle.Submitted(P_REF, created=True),
        [*LOOK, *MADE_IN_ORDER, *OWNED_IN_ORDER],
    ),
    (
        "a job of this spec there: made whole again",
        (P_MADE, {**P_CM, "metadata": {**P_CM["metadata"], "ownerReferences": [{"uid": "p1"}]}}),
        {},
        {},
        lifecycle.Submitted(
            P_REF, created=False, repaired=(f"{Ref.of(P_SECRET)} was missing: created again",)
        ),
        [*LOOK, ("get", "ConfigMap"), ("get", "Secret"), ("create", "Secret"), ("patch", "Secret")],
    ),
    (
        "another job there: never touched",
        (P_OTHER,),
        {},
        {},
        lifecycle.NameTaken(
            f"{P_REF} already exists and is a different job (spec hash another, this spec "
            f"{PREPARED.spec_hash}): rename the job, or cancel the old one first (kfcompile "
            "cancel demo)"
        ),
        LOOK,
    ),
    (
        "a job being deleted, even ours: waited for, then created anew",
        (P_GOING,),
        {},
        {},
        lifecycle.Submitted(P_REF, created=True),
        [*LOOK, *LOOK, *MADE_IN_ORDER, *OWNED_IN_ORDER],
    ),
    (
        "still there after the wait: nothing is created",
        (P_GOING,),
        {"deleting_wait": 0.0},
        {},
        StillDeleting,
        [*LOOK, *LOOK],
    ),
    (
        "the read failing: nothing is created",
        (),
        {},
        {("get", "PyTorchJob"): forbidden()},
        Forbidden,
        LOOK,
    ),
    (
        "a dry run sends each object with dryRun=All, and owns nothing",
        (),
        {"dry_run": True},
        {},
        lifecycle.Submitted(P_REF, created=True, dry_run=True),
        [*LOOK, *MADE_IN_ORDER],
    ),
    (
        "a dry run of a job there: checked, not new",
        (P_MADE,),
        {"dry_run": True},
        {},
        lifecycle.Submitted(P_REF, created=False, dry_run=True),
        LOOK,
    ),
    (
        "a dry run refused: nothing to roll back",
        (),
        {"dry_run": True},
        {("create", "Secret"): forbidden()},
        Forbidden,
        [*LOOK, *MADE_IN_ORDER[:2]],
    ),
]


@pytest.mark.parametrize(
    ("there", "options", "fail", "expected", "calls"),
    [r[1:] for r in SUBMIT_ROWS],
    ids=[r[0] for r in SUBMIT_ROWS],
)
def test_submit(
    there: tuple[Obj, ...],
    options: dict[str, Any],
    fail: dict[tuple[str, str], Any],
    expected: Any,
    calls: list[tuple[str, str]],
) -> None:
    store = Store(NAMESPACE, *there)
    store.fail.update(fail)
    if options.get("deleting_wait") != 0.0:
        store.going.add(P_REF)
    before = dict(store.objects)

    def submitted() -> lifecycle.Submitted:
        return lifecycle.submit(
            on(store), SPEC, "pytorchjob/v1", namespace="default", environ=ENV, **options
        )

    if isinstance(expected, lifecycle.Submitted):
        assert submitted() == expected
    else:
        with pytest.raises(expected if isinstance(expected, type) else type(expected)) as info:
            submitted()
        assert isinstance(expected, type) or str(info.value) == str(expected)
    assert store.asked[store.asked.index(LOOK[0]) :] == calls
    if options.get("dry_run") or not isinstance(expected, lifecycle.Submitted):
        assert {ref: obj for ref, obj in store.objects.items() if ref != P_REF} == {
            ref: obj for ref, obj in before.items() if ref != P_REF
        }  # nothing stored


# (the call that fails before it is done, or after: its answer lost) -> what create_all raises,
# and the calls it makes; whatever fails, nothing it created stays
CREATE_ROWS: list[tuple[str, Fails, Fails, Any, Any]] = [
    (
        "a refusal created nothing: only what was made is deleted",
        {("create", "Secret"): forbidden()},
        {},
        Forbidden,
        [("create", "ConfigMap"), ("create", "Secret"), ("delete", "ConfigMap")],
    ),
    (
        "a taken name created nothing",
        {("create", "ConfigMap"): TAKEN},
        {},
        TAKEN,
        [("create", "ConfigMap")],
    ),
    (
        "trouble that outlasted the retries may have created it: read, and deleted first",
        {},
        {("create", "TrainJob"): DOWN},
        DOWN,
        [
            ("create", "ConfigMap"),
            ("create", "Secret"),
            ("create", "TrainJob"),
            ("get", "TrainJob"),
            ("delete", "TrainJob"),
            ("delete", "Secret"),
            ("delete", "ConfigMap"),
        ],
    ),
    (
        "so may a Ctrl-C",
        {},
        {("create", "ConfigMap"): CTRL_C},
        CTRL_C,
        [("create", "ConfigMap"), ("get", "ConfigMap"), ("delete", "ConfigMap")],
    ),
    (
        "an owner patch that fails: the job first, then its companions",
        {("patch", "Secret"): forbidden()},
        {},
        Forbidden,
        [
            ("create", "ConfigMap"),
            ("create", "Secret"),
            ("create", "TrainJob"),
            ("patch", "ConfigMap"),
            ("patch", "Secret"),
            ("delete", "TrainJob"),
            ("delete", "Secret"),
            ("delete", "ConfigMap"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("fail", "lose", "expected", "calls"),
    [r[1:] for r in CREATE_ROWS],
    ids=[r[0] for r in CREATE_ROWS],
)
def test_a_create_that_fails_deletes_what_was_created(
    fail: dict[tuple[str, str], Any], lose: dict[tuple[str, str], Any], expected: Any, calls: Any
) -> None:
    store = Store()
    store.fail.update(fail)
    store.lose.update(lose)
    with pytest.raises(expected if isinstance(expected, type) else type(expected)) as info:
        create_all(on(store), OBJECTS, DIGEST)
    assert isinstance(expected, type) or info.value is expected
    assert store.asked == calls
    assert store.objects == {}


def test_every_object_is_created_then_owned_by_the_job() -> None:
    store = Store()
    made = create_all(on(store), OBJECTS, DIGEST)
    assert [Ref.of(obj) for obj in made] == [Ref.of(obj) for obj in OBJECTS]
    assert store.owners(CM) == store.owners(SECRET) == [made[-1]["metadata"]["uid"]]


@contextmanager
def ctrl_c_at(line: int, code: CodeType) -> Iterator[list[int]]:
    """A Ctrl-C (``KeyboardInterrupt``) as the ``line``-th line run of ``code`` begins, as a
    signal raises it between two statements; yields the lines run so far."""
    run: list[int] = []

    def each_line(frame: FrameType, event: str, arg: object) -> Any:
        # A ``try:`` line runs a NOP no handler covers (CPython 3.11), where a real signal is
        # never raised (only where the interpreter checks for one: calls, loops' jumps back).
        if (
            event == "line"
            and linecache.getline(code.co_filename, frame.f_lineno).strip() != "try:"
        ):
            run.append(frame.f_lineno)
            if len(run) == line:
                raise KeyboardInterrupt  # the trace is unset with it: one Ctrl-C
        return each_line

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        return each_line if frame.f_code is code else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        yield run
    finally:
        sys.settrace(before)


def test_a_ctrl_c_between_any_two_steps_of_a_create_leaves_nothing_or_everything() -> None:
    """Each line of ``create_all`` in turn gets the Ctrl-C: before the first create and after
    the last owner patch it stands as it is; anywhere between, what was created is deleted."""
    outcomes = set()
    for line in itertools.count(1):
        store = Store()
        with ctrl_c_at(line, create_all.__code__) as run:
            try:
                create_all(on(store), OBJECTS, DIGEST)
            except KeyboardInterrupt:
                pass
            else:  # it returned before that line: every line has had its Ctrl-C
                assert len(run) < line
                break
        if not store.objects:
            outcomes.add("rolled back")
        else:
            assert list(store.objects) == [Ref.of(obj) for obj in OBJECTS], (line, run)
            assert store.owners(CM) == store.owners(SECRET) == ["u3"], (line, run)
            outcomes.add("done")
    assert outcomes == {"rolled back", "done"}


OURS_OWNED = companion("ConfigMap", "demo-script", owner="j1")
SECRET_OWNED = companion("Secret", "demo-env", owner="j1")
SOMEONE_ELSES = companion("ConfigMap", "demo-script", digest="fedcba9876543210", owner="j1")
MISSING = f"{Ref.of(CM)} was missing: created again"
ORPHAN = f"{Ref.of(SECRET)} had lost its owner: owned by the job again"


def unmended(ref: Ref, why: object) -> ClusterError:
    return ClusterError(
        f"TrainJob demo in namespace default exists, but {ref} could not be mended ({why}); the "
        "job may not start without it, and deleting the job will not delete it: submit again, "
        f"or remove both (kfcompile cancel demo -n default --kind TrainJob; {removal(ref)})"
    )


# (on the cluster besides the job MADE_JOB, the calls that fail) -> what repairing its
# companions CM and SECRET says, or the error it ends with
REPAIR_ROWS: list[tuple[str, tuple[Obj, ...], dict[tuple[str, str], BaseException], Any]] = [
    ("missing: created again, owned by the job", (SECRET_OWNED,), {}, (MISSING,)),
    ("ours without its owner: owned again", (OURS_OWNED, SECRET), {}, (ORPHAN,)),
    ("each thing mended, one line each", (SECRET,), {}, (MISSING, ORPHAN)),
    ("whole: nothing mended", (OURS_OWNED, SECRET_OWNED), {}, ()),
    (
        "not ours: it is never adopted",
        (SOMEONE_ELSES, SECRET),
        {},
        lifecycle.NameTaken(
            f"{Ref.of(CM)} is not the one this job was submitted with: the job reads it, so "
            "remove or rename it and submit again (kubectl delete configmap demo-script -n "
            "default)"
        ),
    ),
    (
        "a read refused",
        (OURS_OWNED,),
        {("get", "Secret"): forbidden()},
        unmended(Ref.of(SECRET), "read Secret default/demo-env: 403 Forbidden: no right"),
    ),
    (
        "a create that outlasted the retries",
        (SECRET_OWNED,),
        {("create", "ConfigMap"): DOWN},
        unmended(Ref.of(CM), DOWN),
    ),
    ("a name taken meanwhile: as it is", (SECRET_OWNED,), {("create", "ConfigMap"): TAKEN}, TAKEN),
    ("a Ctrl-C: as it is", (SECRET_OWNED,), {("patch", "ConfigMap"): CTRL_C}, CTRL_C),
]


@pytest.mark.parametrize(
    ("there", "fail", "expected"), [r[1:] for r in REPAIR_ROWS], ids=[r[0] for r in REPAIR_ROWS]
)
def test_repair(
    there: tuple[Obj, ...], fail: dict[tuple[str, str], BaseException], expected: Any
) -> None:
    store = Store(MADE_JOB, *there)
    store.fail.update(fail)
    if isinstance(expected, tuple):
        assert repair(on(store), (CM, SECRET), MADE_JOB, DIGEST) == expected
        assert store.owners(CM) == store.owners(SECRET) == ["j1"]  # whole again
        return
    with pytest.raises(type(expected)) as info:
        repair(on(store), (CM, SECRET), MADE_JOB, DIGEST)
    assert info.value is expected or str(info.value) == str(expected)
    assert ("patch", "Secret") not in store.asked  # it stops at the first it cannot mend


def test_a_job_without_companions_has_nothing_to_repair() -> None:
    store = Store(MADE_JOB)
    assert repair(on(store), (), MADE_JOB, DIGEST) == ()
    assert store.asked == []


CREATED = (CM, SECRET, MADE_JOB)
OWNED = frozenset({Ref.of(CM)})
JOB_REF, SECRET_REF, CM_REF = Ref.of(JOB), Ref.of(SECRET), Ref.of(CM)
UNAVAILABLE = "not deleted: the API server was unavailable"
UNREAD = "may have been created (its create got no answer) and could not be read: "
READ_JOB = "read TrainJob default/demo: "
THEIRS = companion("Secret", "demo-env", digest="other")
DELETES = [("delete", "TrainJob"), ("delete", "Secret"), ("delete", "ConfigMap")]
UNDONE: list[Left] = []

# (on the cluster, what was created, the one whose create got no answer, the calls that fail)
# -> what stays, and the calls made; the ConfigMap is owned by the job
UNDO_ROWS: list[tuple[str, tuple[Obj, ...], tuple[Obj, ...], Obj | None, Fails, Any, Any]] = [
    (
        "the job first, then its companions, last created first",
        CREATED,
        CREATED,
        None,
        {},
        UNDONE,
        DELETES,
    ),
    ("nothing created: nothing to do", (), (), None, {}, UNDONE, []),
    ("one already gone is not left", (CM, SECRET), CREATED, None, {}, UNDONE, DELETES),
    (
        "an unanswered create, there and ours: read, and deleted first",
        CREATED,
        (CM, SECRET),
        JOB,
        {},
        UNDONE,
        [("get", "TrainJob"), *DELETES],
    ),
    (
        "an unanswered create not there: the rest",
        (CM, SECRET),
        (CM, SECRET),
        JOB,
        {},
        UNDONE,
        [("get", "TrainJob"), *DELETES[1:]],
    ),
    (
        "someone else's: never deleted",
        (CM, THEIRS),
        (CM,),
        SECRET,
        {},
        UNDONE,
        [("get", "Secret"), ("delete", "ConfigMap")],
    ),
    ("nothing made, the unanswered one not there", (), (), CM, {}, UNDONE, [("get", "ConfigMap")]),
    (
        "the unanswered one unreadable: left, and the rest deleted",
        CREATED,
        (CM, SECRET),
        JOB,
        {("get", "TrainJob"): forbidden()},
        [Left(JOB_REF, f"{UNREAD}{READ_JOB}403 Forbidden: no right")],
        [("get", "TrainJob"), *DELETES[1:]],
    ),
    (
        "unreadable as the API server is down: the rest is left without asking it",
        CREATED,
        (CM, SECRET),
        JOB,
        {("get", "TrainJob"): DOWN},
        [
            Left(JOB_REF, UNREAD + str(DOWN)),
            Left(SECRET_REF, UNAVAILABLE),
            Left(CM_REF, UNAVAILABLE, owned=True),
        ],
        [("get", "TrainJob")],
    ),
    (
        "a delete refused: left, the status line said, and the rest deleted",
        CREATED,
        CREATED,
        None,
        {("delete", "TrainJob"): forbidden()},
        [Left(JOB_REF, "delete failed: 403 Forbidden: no right")],
        DELETES,
    ),
    (
        "a delete that outlasted the retries: the rest is left without asking",
        CREATED,
        CREATED,
        None,
        {("delete", "TrainJob"): DOWN},
        [
            Left(JOB_REF, f"delete failed: {DOWN}"),
            Left(SECRET_REF, UNAVAILABLE),
            Left(CM_REF, UNAVAILABLE, owned=True),
        ],
        DELETES[:1],
    ),
    (
        "a Ctrl-C while deleting: what was not deleted yet",
        CREATED,
        CREATED,
        None,
        {("delete", "Secret"): CTRL_C},
        [
            Left(SECRET_REF, "delete interrupted: it may still be there"),
            Left(CM_REF, "not deleted", owned=True),
        ],
        DELETES[:2],
    ),
    (
        "a Ctrl-C while reading the unanswered one: it too",
        CREATED,
        (CM, SECRET),
        JOB,
        {("get", "TrainJob"): CTRL_C},
        [
            Left(JOB_REF, "may have been created: not checked (interrupted)"),
            Left(SECRET_REF, "delete interrupted: it may still be there"),
            Left(CM_REF, "not deleted", owned=True),
        ],
        [("get", "TrainJob")],
    ),
]


@pytest.mark.parametrize(
    ("there", "created", "unsure", "fail", "expected", "calls"),
    [r[1:] for r in UNDO_ROWS],
    ids=[r[0] for r in UNDO_ROWS],
)
def test_roll_back(
    there: tuple[Obj, ...],
    created: tuple[Obj, ...],
    unsure: Obj | None,
    fail: Fails,
    expected: list[Left],
    calls: list[tuple[str, str]],
) -> None:
    store = Store(*there)
    store.fail.update(fail)
    assert roll_back(on(store), created, unsure, DIGEST, OWNED) == expected
    assert store.asked == calls
    assert {Ref.of(obj) for obj in store.objects.values()} - {THEIRS_REF} <= {
        left.ref for left in expected
    }  # whatever stays is said


THEIRS_REF = Ref.of(THEIRS)


def test_a_ctrl_c_between_any_two_steps_of_a_roll_back_says_each_object_left_once() -> None:
    """Each line of ``roll_back`` in turn gets the Ctrl-C (during a roll-back, a second one):
    what was not deleted is said, each object once."""
    for line in itertools.count(1):
        store = Store(*CREATED)
        with ctrl_c_at(line, roll_back.__code__) as run:
            try:
                left = roll_back(on(store), (CM, SECRET), JOB, DIGEST, OWNED)
            except KeyboardInterrupt:  # before it began, or once all was deleted: it stands
                assert store.asked == [] or store.objects == {}, (line, run)
                continue
        if len(run) < line:  # it returned before that line: every line has had its Ctrl-C
            assert left == []
            break
        said = [item.ref for item in left]
        assert len(said) == len(set(said)), (line, run, left)
        assert set(store.objects) <= set(said), (line, run, left)


# --- log follow ---------------------------------------------------------------------------------


def test_the_cursor_shows_each_line_once_across_reads() -> None:
    cursor, shown = Cursor(), []
    for line in ["T1 a", "T2 b", "T2 c"]:  # two lines at the same time
        cursor, text = cursor.accept(line, 5.0)
        shown.append(text)
    assert shown == ["a", "b", "c"]
    assert cursor.resume_since(9.2) == 7  # ceil(9.2 - 5.0) + 2 seconds of margin
    cursor = cursor.resume()  # the read starts again from before T1
    again = []
    for line in ["T1 a", "T2 b", "T2 c", "T2 d", "T3 e"]:
        cursor, text = cursor.accept(line, 6.0)
        again.append(text)
    assert again == [None, None, None, "d", "e"]


def test_a_cursor_with_nothing_shown_reads_from_the_start() -> None:
    assert Cursor().resume_since(100.0) is None


FINISHED = job("20", done=True)
READING = [JobRead(job()), PodsListed(RUNNING)]  # a running job's pod found

# (answers fed at t=10 unless given) -> what the follower of rank 0 (tail 5) asks next.
FOLLOW_ROWS: list[tuple[str, list[Any], Any]] = [
    ("it reads the job first", [], ReadJob()),
    ("a job gone ends it", [JobGone()], End()),
    ("then the rank's pods", [JobRead(job())], ListPods(job())),
    # the pod watch starts from the pods' list: a change since it comes, no ADDED of what was
    ("no pod yet watches for it", [JobRead(job()), PodsListed([], "7")], WatchPod(RANK_0, 30, "7")),
    ("a pod that comes wakes it", [JobRead(job()), PodsListed([]), PodSeen(pod())], ReadJob()),
    ("as does the watch's end", [JobRead(job()), PodsListed([]), (StreamEnded(), 40)], ReadJob()),
    ("unless it ended at once", [JobRead(job()), PodsListed([]), StreamEnded()], Pause(0)),
    ("a watch refused polls", [JobRead(job()), PodsListed([]), Refused()], Pause(0)),
    (
        "a pod not started is watched",
        [JobRead(job()), PodsListed(STARTING, "7"), LogRefused()],
        WatchPod(RANK_0, 30, "7"),
    ),
    (
        "as is one whose log is empty (204: not scheduled)",
        [JobRead(job()), PodsListed(NOT_SCHEDULED, "7"), LogEnded()],
        WatchPod(RANK_0, 30, "7"),
    ),
    (
        "and read on while its status says the same (a message rewritten)",
        [JobRead(job()), PodsListed(NOT_SCHEDULED, "7"), LogEnded(), PodSeen(REWRITTEN)],
        NextEvent(),
    ),
    (
        "until it is scheduled",
        [JobRead(job()), PodsListed(NOT_SCHEDULED, "7"), LogEnded(), PodSeen(STARTING[0])],
        ReadJob(),
    ),
    (
        "or deleted",
        [JobRead(job()), PodsListed(STARTING), LogEnded(), PodSeen(STARTING[0], gone=True)],
        ReadJob(),
    ),
    (
        "as it was when the watch ends: watched again, its log not read again",
        [
            *(JobRead(job()), PodsListed(NOT_SCHEDULED, "7"), LogEnded(), (StreamEnded(), 40)),
            *(JobRead(job()), (PodsListed(NOT_SCHEDULED, "9"), 40)),
        ],
        (WatchPod(RANK_0, 30, "9"), 40),
    ),
    (
        "a node whose kubelet cannot be reached ends it at once",
        [*READING, LogRefused(KUBELET_DOWN)],
        End(pod_waiting(RUNNING[0], KUBELET_DOWN, 0), 0.0),
    ),
    (
        "and read on while it is as it was (its ADDED, from a watch without a version)",
        [JobRead(job()), PodsListed(STARTING), LogRefused(), PodSeen(STARTING[0])],
        NextEvent(),
    ),
    (
        "a pod stuck is watched until it is time to give up",
        [JobRead(job()), PodsListed(STUCK), LogRefused()],
        (WatchPod(RANK_0, 20, ""), 290),
    ),
    (
        "then it gives up",
        [
            *(JobRead(job()), PodsListed(STUCK), LogRefused(), (StreamEnded(), 300)),
            *(JobRead(job()), (PodsListed(STUCK), 310)),  # as it was: no read, then the end
        ],
        End(pod_waiting(STUCK[0], None, 0), 300),
    ),
    ("no pod of a finished job ends it", [JobRead(FINISHED), PodsListed([])], End()),
    (
        "the first read is the one asked for",
        [JobRead(job()), PodsListed(RUNNING)],
        OpenLog("demo-node-0-0-u0", True, None, 5),
    ),
    (
        "a finished job's log is read, not followed",
        [JobRead(FINISHED), PodsListed(RUNNING)],
        OpenLog("demo-node-0-0-u0", False, None, 5),
    ),
    ("a line read, the next", [JobRead(job()), PodsListed(RUNNING), Line("T1 a")], NextLine()),
    (
        "a drop pauses",
        [JobRead(job()), PodsListed(RUNNING), Line("T1 a"), Dropped(LOST)],
        Pause(0, at_most=60.0),
    ),
    (
        "while the retry lasts",
        [JobRead(job()), PodsListed(RUNNING), Dropped(BUSY), (Slept(), 71)],
        (ReadJob(), 71),
    ),
    (
        "then gives up",
        [
            *(JobRead(job()), PodsListed(RUNNING), Dropped(BUSY), Slept()),
            *(JobRead(job()), PodsListed(RUNNING), (Dropped(BUSY), 71)),
        ],
        (GiveUp(61, BUSY), 71),
    ),
    (
        "then resumes from the last line shown",
        [
            JobRead(job()),
            PodsListed(RUNNING),
            (Line("T1 a"), 10),
            Dropped(LOST),
            Slept(),
            JobRead(job()),
            (PodsListed(RUNNING), 13.5),
        ],
        (OpenLog("demo-node-0-0-u0", True, 6, None), 13.5),
    ),
    (
        "a drop before any line keeps the read asked for",
        [*READING, Dropped(LOST), Slept(), *READING],
        OpenLog("demo-node-0-0-u0", True, None, 5),
    ),
    (
        "a restarted container is read whole",
        [*READING, Line("T1 a"), LogEnded(), JobRead(job()), PodsListed([pod(restarts=1)])],
        OpenLog("demo-node-0-0-u0", True, None, None),
    ),
    (
        "and so is a replacing pod",
        [*READING, Line("T1 a"), LogEnded(), JobRead(job()), PodsListed([pod(uid="u1")])],
        OpenLog("demo-node-0-0-u1", True, None, None),
    ),
    (
        "an ended log that showed lines looks again at once",
        [JobRead(job()), PodsListed(RUNNING), Line("T1 a"), LogEnded()],
        ReadJob(),
    ),
    (
        "one that showed nothing pauses first",
        [JobRead(job()), PodsListed(RUNNING), LogEnded()],
        Pause(0),
    ),
    (
        "a container not started yet too",
        [JobRead(job()), PodsListed(RUNNING), LogRefused()],
        Pause(0),
    ),
    (
        "the log of a finished job, drained, ends it",
        [JobRead(FINISHED), PodsListed(RUNNING), Line("T1 a"), LogEnded()],
        End(),
    ),
    (
        "a drop on a finished job reads again",
        [JobRead(FINISHED), PodsListed(RUNNING), Line("T1 a"), Dropped(LOST), Slept()],
        ReadJob(),
    ),
]


def _fed_follower(answers: Sequence[Any]) -> Follower:
    follower = Follower(0, tail_lines=5)
    for fed in answers:
        answer, at = fed if isinstance(fed, tuple) else (fed, 10.0)
        follower = follower.receive(answer, at)
    return follower


@pytest.mark.parametrize(
    ("answers", "expected"), [r[1:] for r in FOLLOW_ROWS], ids=[r[0] for r in FOLLOW_ROWS]
)
def test_follow(answers: list[Any], expected: Any) -> None:
    request, now = expected if isinstance(expected, tuple) else (expected, 10.0)
    assert _fed_follower(answers).next_request(now) == request


def test_the_follower_shows_new_lines_only() -> None:
    follower = _fed_follower([JobRead(job()), PodsListed(RUNNING)])
    shown = []
    for line in ["T1 a", "T2 b"]:
        follower = follower.receive(Line(line), 10.0)
        shown.append(follower.shown)
    follower = follower.receive(Dropped(LOST), 10.0).receive(Slept(), 10.0)
    follower = follower.receive(JobRead(job()), 10.0).receive(PodsListed(RUNNING), 10.0)
    for line in ["T1 a", "T2 b", "T3 c"]:
        follower = follower.receive(Line(line), 11.0)
        shown.append(follower.shown)
    assert shown == ["a", "b", None, None, "c"]


def test_a_follower_fed_out_of_turn_is_a_bug() -> None:
    with pytest.raises(Unexpected, match="Follower in JOB got Line"):
        Follower(0).receive(Line("T1 a"), 0.0)


# --- the drivers, against a scripted port -------------------------------------------------------


class FakeClock:
    """Time that passes only when slept (``slept``: each pause, in seconds)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Script:
    """A ``Cluster`` port answering from scripts, recording what was asked and on which thread.

    ``jobs``: what reading the job gives, in turn (the last one stays); ``watches``: one list
    of events (or an error to raise) per watch; ``logs``: per pod, one list of lines (or an
    error) per read."""

    def __init__(
        self,
        jobs: list[Obj],
        pods: list[Obj] | None = None,
        watches: list[list[WatchEvent] | Exception] | None = None,
        logs: Mapping[str, list[list[str] | Exception]] | None = None,
    ) -> None:
        self.jobs, self.pods = jobs, pods or []
        self.watches = list(watches or [])
        self.logs = {name: list(reads) for name, reads in (logs or {}).items()}
        self.asked: list[tuple[Any, ...]] = []
        self.threads: set[str] = set()
        self.streams: list[Generator[str, None, None]] = []

    def _job(self) -> Obj:
        return self.jobs.pop(0) if len(self.jobs) > 1 else self.jobs[0]

    def get(self, ref: Ref) -> Obj:
        self.asked.append(("get", ref.kind))
        return self._job()

    def list(self, api_version: str, kind: str, namespace: str | None, **query: Any) -> Page:
        self.asked.append(("list", kind))
        return Page(self.pods if kind == "Pod" else [self._job()], "10")

    def watch(self, api_version: str, kind: str, namespace: str | None, **query: Any) -> Any:
        self.asked.append(("watch", query["resource_version"]))
        answer = self.watches.pop(0) if self.watches else []
        if isinstance(answer, Exception):
            raise answer
        return iter(answer)

    def pod_log(self, namespace: str, pod: str, **query: Any) -> Iterator[str]:
        self.asked.append(("log", pod, query.get("tail_lines"), query.get("since_seconds")))
        self.threads.add(threading.current_thread().name)
        reads = self.logs.get(pod, [])
        answer = reads.pop(0) if len(reads) > 1 else (reads[0] if reads else [])
        stream = self._lines(answer)
        self.streams.append(stream)
        return stream

    @staticmethod
    def _lines(answer: list[str] | Exception) -> Generator[str, None, None]:
        if isinstance(answer, Exception):
            raise answer
        yield from answer


def session(port: Script, **extra: Any) -> lifecycle.Session:
    extra.setdefault("jitter", lambda: 0.5)  # a fixed one: the same pauses on every run
    return lifecycle.Session(port, FakeClock(), **extra)  # type: ignore[arg-type]


def test_wait_resumes_a_closed_stream_from_the_last_version_seen() -> None:
    port = Script(
        [job("10")],
        pods=STARTING,
        watches=[
            [WatchEvent("MODIFIED", job("11"))],  # then the server closes the stream
            [WatchEvent("MODIFIED", job("12", done=True))],
        ],
    )
    obs = lifecycle.wait(session(port), REF, "done", timeout=60)
    assert obs.state.finished
    # One list of the job, ever; the second watch goes on from the version the first one saw.
    assert [a for a in port.asked if a[0] == "watch" or a == ("list", "TrainJob")] == [
        ("list", "TrainJob"),
        ("watch", "10"),
        ("watch", "11"),
    ]


def test_wait_gives_up_on_a_watch_that_keeps_failing() -> None:
    port = Script([job("10")], pods=STARTING, watches=[LOST] * 1000)
    with pytest.raises(
        lifecycle.Unavailable, match=r"watch TrainJob default/demo: .* kept failing for 5s"
    ):
        lifecycle.wait(session(port, retry_for=5.0), REF, "done", timeout=600)


def test_a_followed_read_dropped_before_its_first_line_keeps_its_tail() -> None:
    name = "demo-node-0-0-u0"
    port = Script(
        [job(), job(), job(done=True)],
        pods=RUNNING,
        logs={name: [LOST, ["T1 a", "T2 b"], ["T1 a", "T2 b"]]},
    )
    lines = list(lifecycle.logs(session(port), REF, rank=0, follow=True, tail_lines=1))
    assert [line.text for line in lines] == ["a", "b"]
    reads = [a for a in port.asked if a[0] == "log"]
    assert reads[:2] == [("log", name, 1, None), ("log", name, 1, None)]


def _two_ranks(done: bool) -> Script:
    logs = {f"demo-node-0-{r}-u0": [[f"T1 rank {r}", f"T2 rank {r}"]] for r in (0, 1)}
    return Script([job(done=done, nodes=2)], pods=[pod(0), pod(1)], logs=logs)


def test_following_several_ranks_without_a_merge_port_starts_no_thread() -> None:
    port = _two_ranks(done=True)
    lines = list(lifecycle.logs(session(port), REF, follow=True))
    assert sorted((x.rank, x.text) for x in lines) == [
        (0, "rank 0"),
        (0, "rank 0"),
        (1, "rank 1"),
        (1, "rank 1"),
    ]
    assert port.threads == {threading.current_thread().name}


class Recorded:
    """A ``Merge`` that says what it was given and reads in turn."""

    def __init__(self) -> None:
        self.keys: list[Any] = []

    def merge(
        self, streams: Mapping[Any, Callable[[Clock], Iterator[Any]]], clock: Clock
    ) -> Generator[tuple[Any, Any], None, None]:
        self.keys = list(streams)
        return InTurn().merge(streams, clock)


def test_the_sessions_merge_reads_several_ranks() -> None:
    merge = Recorded()
    lines = list(lifecycle.logs(session(_two_ranks(done=True), merge=merge), REF, follow=True))
    assert merge.keys == [0, 1]
    assert {x.rank for x in lines} == {0, 1}


def test_closing_a_followed_log_closes_every_stream_it_reads() -> None:
    port = _two_ranks(done=False)  # running: the follow never ends by itself
    lines = lifecycle.logs(session(port), REF, follow=True)
    assert {next(lines).rank, next(lines).rank} == {0, 1}
    lines.close()
    assert port.streams and all(
        inspect.getgeneratorstate(s) == inspect.GEN_CLOSED for s in port.streams
    )


def test_a_session_takes_its_jitter_explicitly() -> None:
    """No default that silently spreads no retry: the adapters pass ``random.random``."""
    with pytest.raises(TypeError, match="jitter"):
        lifecycle.Session(object(), FakeClock())  # type: ignore[call-arg, arg-type]

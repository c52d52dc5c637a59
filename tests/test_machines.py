"""The lifecycle's loops as machines (kfcompile.lifecycle: ``Retry``, ``Waiter``, ``Follower``
and its ``Cursor``): each row feeds what the API answered and asserts what the machine asks
next. No server, no clock: times are numbers given with the answers.

At the end, the drivers (``wait``, ``logs``) against a scripted port and a fake clock, for what
the machines change in the requests that reach the API.
"""

from __future__ import annotations

import inspect
import math
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pytest

from kfcompile import lifecycle
from kfcompile.lifecycle.deleting import (
    Look,
    Looked,
    Remaining,
    StillDeleting,
    TimeUp,
    Vanished,
    Vanishing,
)
from kfcompile.lifecycle.follow import (
    Cursor,
    Dropped,
    End,
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
from kfcompile.lifecycle.pod_logs import InTurn
from kfcompile.lifecycle.ports import Clock, Forbidden, Gone, Page, Ref, Transient, WatchEvent
from kfcompile.lifecycle.repairing import Mended, NotOurs, Repairing, Unmendable
from kfcompile.lifecycle.rollback import (
    CheckUnsure,
    Delete,
    Found,
    Interrupted,
    Left,
    NotRemoved,
    Removed,
    RolledBack,
    RollingBack,
    Unreadable,
)
from kfcompile.lifecycle.session import (
    LIST_RESTARTS,
    SPEC_HASH,
    Attempt,
    Backoff,
    Failed,
    GiveUp,
    Machine,
    Pause,
    Retry,
    Slept,
    Unexpected,
    finished,
)
from kfcompile.lifecycle.submitting import (
    AllMade,
    Checked,
    Create,
    Failure,
    Made,
    MakeWay,
    Own,
    Owned,
    Raised,
    Read,
    Repair,
    Submitting,
    Taken,
    Upload,
    Uploaded,
    WayMade,
)
from kfcompile.lifecycle.sync import (
    HelperRead,
    NotYet,
    ReadHelper,
    Started,
    Starting,
    Stuck,
    Synced,
    WontStart,
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
GONE_WAIT = Vanishing(REF, uid="u1", timeout=10.0)
WITH_PODS = Vanishing(REF, uid="u1", dependents=True, timeout=10.0)
TERMINATING = (
    "demo-node-0-0-u0 (Terminating on node gpu-node-1: waiting for its kubelet to confirm it "
    "stopped)"
)

# (machine, what it was told at what time, now) -> what it asks next
VANISH_ROWS: list[tuple[str, Vanishing, list[tuple[Any, float]], float, Any]] = [
    ("it looks first", GONE_WAIT, [], 0.0, Look()),
    ("no job: gone", GONE_WAIT, [(Looked(None), 0.0)], 0.0, Vanished()),
    (
        "another job of that name is not the one deleted",
        GONE_WAIT,
        [(Looked(deleting(uid="u2")), 0.0)],
        0.0,
        Vanished(),
    ),
    ("held: it pauses", GONE_WAIT, [(Looked(deleting()), 0.0)], 0.0, Pause(0, at_most=10.0)),
    (
        "then looks again",
        GONE_WAIT,
        [(Looked(deleting()), 0.0), (Slept(), 0.1)],
        0.1,
        Look(),
    ),
    (
        "each pause the next of the one backoff, within what is left",
        GONE_WAIT,
        [(Looked(deleting()), 1.0), (Slept(), 1.1), (Looked(deleting()), 2.0)],
        2.0,
        Pause(1, at_most=9.0),
    ),
    (
        "out of time from the first look, naming what holds it",
        GONE_WAIT,
        [(Looked(deleting()), 1.0), (Slept(), 6.0), (Looked(deleting()), 11.0)],
        11.0,
        TimeUp(10.0, Remaining(REF, JobState(State.DELETING, HELD, ""))),
    ),
    (
        "with its pods: the job gone, a pod left is waited for",
        WITH_PODS,
        [(Looked(None, (terminating_pod(),)), 0.0), (Slept(), 10.0)],
        10.0,
        Look(),
    ),
    (
        "with its pods: what is left names them",
        WITH_PODS,
        [(Looked(None, (terminating_pod(),), more=("Pod",)), 0.0)],
        10.0,
        TimeUp(10.0, Remaining(REF, None, (f"pod {TERMINATING}", "more pods"))),
    ),
    (
        "no timeout: it waits as long as it takes",
        Vanishing(REF),
        [(Looked(deleting()), 0.0)],
        1e6,
        Pause(0, at_most=math.inf),
    ),
]


def _same(got: Any, expected: Any) -> bool:
    """Rows compare a Remaining's job by its state and reason (its message is status's)."""
    if isinstance(got, TimeUp) and isinstance(expected, TimeUp):
        left, want = got.left, expected.left
        assert left is not None and want is not None
        states = [(j.state, j.reason) if j else None for j in (left.job, want.job)]
        return (
            got.waited == expected.waited
            and states[0] == states[1]
            and left.dependents == want.dependents
        )
    return bool(got == expected)


@pytest.mark.parametrize(
    ("machine", "fed", "now", "expected"),
    [r[1:] for r in VANISH_ROWS],
    ids=[r[0] for r in VANISH_ROWS],
)
def test_vanishing(
    machine: Vanishing, fed: list[tuple[Any, float]], now: float, expected: Any
) -> None:
    for answer, at in fed:
        machine = machine.receive(answer, at)
    assert _same(machine.next_request(now), expected), machine.next_request(now)


def test_a_vanishing_fed_out_of_turn_is_a_bug() -> None:
    with pytest.raises(Unexpected, match="Vanishing in LOOK got Slept"):
        GONE_WAIT.receive(Slept(), 0.0)


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
    return {"metadata": {"name": "kfcompile-sync-0"}, "status": {"phase": phase, **status}}


PENDING_HELPER = helper("Pending")
STUCK_HELPER = helper(
    "Pending",
    containerStatuses=[{"name": "sync", "state": {"waiting": {"reason": "ImagePullBackOff"}}}],
)
HELPER_START = Starting(timeout=10.0, since=1.0)

# (what it was told at what time, now) -> what it asks next
START_ROWS: list[tuple[str, list[tuple[Any, float]], float, Any]] = [
    ("it looks first", [], 1.0, ReadHelper()),
    ("running: started", [(HelperRead(helper("Running")), 1.0)], 1.0, Started()),
    ("no pod: it never will", [(HelperRead(None), 1.0)], 1.0, WontStart("disappeared")),
    (
        "ended: it never will",
        [(HelperRead(helper("Failed")), 1.0)],
        1.0,
        WontStart("ended (Failed)"),
    ),
    (
        "succeeded is ended too",
        [(HelperRead(helper("Succeeded")), 1.0)],
        1.0,
        WontStart("ended (Succeeded)"),
    ),
    ("stuck: its status says why", [(HelperRead(STUCK_HELPER), 1.0)], 1.0, Stuck(STUCK_HELPER)),
    (
        "pending: it pauses, within the timeout",
        [(HelperRead(PENDING_HELPER), 3.0)],
        3.0,
        Pause(0, at_most=8.0),
    ),
    ("then looks again", [(HelperRead(PENDING_HELPER), 3.0), (Slept(), 3.1)], 3.1, ReadHelper()),
    (
        "each pause the next of the one backoff",
        [(HelperRead(PENDING_HELPER), 2.0), (Slept(), 2.1), (HelperRead(PENDING_HELPER), 6.0)],
        6.0,
        Pause(1, at_most=5.0),
    ),
    (
        "out of time from the start (not from the first look), with the pod last read",
        [
            (HelperRead(PENDING_HELPER), 5.0),
            (Slept(), 10.0),
            (HelperRead(helper("Pending", x=1)), 11.0),
        ],
        11.0,
        NotYet(helper("Pending", x=1)),
    ),
]


@pytest.mark.parametrize(
    ("fed", "now", "expected"), [r[1:] for r in START_ROWS], ids=[r[0] for r in START_ROWS]
)
def test_starting(fed: list[tuple[Any, float]], now: float, expected: Any) -> None:
    machine = HELPER_START
    for answer, at in fed:
        machine = machine.receive(answer, at)
    assert machine.next_request(now) == expected


@pytest.mark.parametrize(
    ("fed", "wrong"),
    [
        ([], Slept()),
        ([HelperRead(PENDING_HELPER)], HelperRead(PENDING_HELPER)),
        ([HelperRead(helper("Running"))], Slept()),
    ],
)
def test_a_starting_fed_out_of_turn_is_a_bug(fed: list[Any], wrong: Any) -> None:
    machine = after(HELPER_START, fed, 1.0)
    with pytest.raises(Unexpected, match="Starting in"):
        machine.receive(wrong, 1.0)


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
ALL_MADE = [Made(CM), Made(SECRET), Made(MADE_JOB)]
FREE = [Found(None)]
NEW = Submitting(OBJECTS, DIGEST)
DRY = Submitting(OBJECTS, DIGEST, dry_run=True)
UPLOADS = Submitting(OBJECTS, DIGEST, uploads=True)
SYNCED = Synced(files=3, size=1024)
OTHER_JOB = {**JOB, "metadata": {**JOB["metadata"], "annotations": {SPEC_HASH: "another"}}}
GOING = {
    **MADE_JOB,
    "metadata": {**MADE_JOB["metadata"], "deletionTimestamp": "2025-01-01T00:00:00Z"},
}
STILL_DELETING = StillDeleting("TrainJob demo in namespace default is still being deleted", None)

# (machine, what it was told) -> what it asks next
SUBMIT_ROWS: list[tuple[str, Submitting, list[Any], Any]] = [
    ("the job's name is read first", NEW, [], Read(Ref.of(JOB))),
    ("free: the first object first", NEW, FREE, Create(CM)),
    ("then the next, in order", NEW, [*FREE, Made(CM)], Create(SECRET)),
    ("the job last", NEW, [*FREE, Made(CM), Made(SECRET)], Create(JOB)),
    (
        "then the job, as created, owns the first companion",
        NEW,
        [*FREE, *ALL_MADE],
        Own(CM, MADE_JOB),
    ),
    ("and the next", NEW, [*FREE, *ALL_MADE, Owned()], Own(SECRET, MADE_JOB)),
    (
        "all owned: done",
        NEW,
        [*FREE, *ALL_MADE, Owned(), Owned()],
        AllMade((CM, SECRET, MADE_JOB), None),
    ),
    (
        "a job alone owns nothing",
        Submitting((JOB,), DIGEST),
        [*FREE, Made(MADE_JOB)],
        AllMade((MADE_JOB,), None),
    ),
    ("a job of this spec there: repaired", NEW, [Found(MADE_JOB)], Repair(MADE_JOB)),
    ("another job there: never touched", NEW, [Found(OTHER_JOB)], Taken(OTHER_JOB)),
    ("a job being deleted, even ours: waited for", NEW, [Found(GOING)], MakeWay(GOING)),
    ("once it is gone, created anew", NEW, [Found(GOING), WayMade()], Create(CM)),
    (
        "still there: nothing is created",
        NEW,
        [Found(GOING), Raised(STILL_DELETING)],
        Raised(STILL_DELETING),
    ),
    ("the read failing: nothing is created", NEW, [Raised(FORBIDDEN)], Raised(FORBIDDEN)),
    ("a work dir: uploaded before anything is created", UPLOADS, FREE, Upload()),
    ("then the objects", UPLOADS, [*FREE, Uploaded(SYNCED)], Create(CM)),
    (
        "and what was uploaded is said at the end",
        UPLOADS,
        [*FREE, Uploaded(SYNCED), *ALL_MADE, Owned(), Owned()],
        AllMade((CM, SECRET, MADE_JOB), SYNCED),
    ),
    ("an upload failing: nothing is created", UPLOADS, [*FREE, Raised(DOWN)], Raised(DOWN)),
    ("a dry run sends each object with dryRun=All", DRY, FREE, Create(CM, dry_run=True)),
    (
        "and never uploads",
        Submitting(OBJECTS, DIGEST, dry_run=True, uploads=True),
        FREE,
        Create(CM, dry_run=True),
    ),
    ("each in order", DRY, [*FREE, Made(CM)], Create(SECRET, dry_run=True)),
    (
        "all checked: they would be new, and nothing is owned",
        DRY,
        [*FREE, *ALL_MADE],
        Checked(created=True),
    ),
    ("a dry run of a job there: checked, not new", DRY, [Found(MADE_JOB)], Checked(created=False)),
    (
        "a dry run waits for a job being deleted too",
        DRY,
        [Found(GOING), WayMade()],
        Create(CM, dry_run=True),
    ),
    (
        "a dry run refused: nothing to roll back",
        DRY,
        [*FREE, Made(CM), Raised(FORBIDDEN)],
        Raised(FORBIDDEN),
    ),
    (
        "a refusal created nothing: only what was made is rolled back",
        NEW,
        [*FREE, Made(CM), Raised(FORBIDDEN)],
        Failure(FORBIDDEN, (CM,), None, frozenset()),
    ),
    (
        "a taken name created nothing",
        NEW,
        [*FREE, Raised(TAKEN)],
        Failure(TAKEN, (), None, frozenset()),
    ),
    (
        "trouble that outlasted the retries may have created it",
        NEW,
        [*FREE, Made(CM), Made(SECRET), Raised(DOWN)],
        Failure(DOWN, (CM, SECRET), JOB, frozenset()),
    ),
    ("so may a Ctrl-C", NEW, [*FREE, Raised(CTRL_C)], Failure(CTRL_C, (), CM, frozenset())),
    (
        "an owner patch that fails: rolled back with what is owned",
        NEW,
        [*FREE, *ALL_MADE, Owned(), Raised(FORBIDDEN)],
        Failure(FORBIDDEN, (CM, SECRET, MADE_JOB), None, frozenset({Ref.of(CM)})),
    ),
]


@pytest.mark.parametrize(
    ("machine", "fed", "expected"), [r[1:] for r in SUBMIT_ROWS], ids=[r[0] for r in SUBMIT_ROWS]
)
def test_submitting(machine: Submitting, fed: list[Any], expected: Any) -> None:
    assert after(machine, fed).next_request(0.0) == expected


@pytest.mark.parametrize(
    ("machine", "fed", "wrong"),
    [
        (NEW, [], Made(CM)),
        (NEW, [Found(GOING)], Found(None)),
        (UPLOADS, FREE, Made(CM)),
        (DRY, FREE, Owned()),
        (NEW, FREE, Owned()),
        (NEW, [*FREE, *ALL_MADE], Made(CM)),
        (NEW, [Found(MADE_JOB)], Found(None)),
    ],
)
def test_a_submitting_fed_out_of_turn_is_a_bug(
    machine: Submitting, fed: list[Any], wrong: Any
) -> None:
    with pytest.raises(Unexpected, match="Submitting in"):
        after(machine, fed).receive(wrong, 0.0)


OURS_OWNED = companion("ConfigMap", "demo-script", owner="j1")
SECRET_OWNED = companion("Secret", "demo-env", owner="j1")
SOMEONE_ELSES = companion("ConfigMap", "demo-script", digest="fedcba9876543210", owner="j1")
MISSING = f"{Ref.of(CM)} was missing: created again"
ORPHAN = f"{Ref.of(SECRET)} had lost its owner: owned by the job again"

# (what it was told) -> what it asks next; the companions CM and SECRET of MADE_JOB
REPAIR_ROWS: list[tuple[str, list[Any], Any]] = [
    ("the first companion is read first", [], Read(Ref.of(CM))),
    ("missing: created again", [Found(None)], Create(CM)),
    ("then owned by the job", [Found(None), Made(CM)], Own(CM, MADE_JOB)),
    ("ours and owned: the next", [Found(OURS_OWNED)], Read(Ref.of(SECRET))),
    (
        "ours without its owner: owned again",
        [Found(OURS_OWNED), Found(SECRET)],
        Own(SECRET, MADE_JOB),
    ),
    ("not ours: it is never adopted", [Found(SOMEONE_ELSES)], NotOurs(Ref.of(CM))),
    (
        "each thing mended, one line each",
        [Found(None), Made(CM), Owned(), Found(SECRET), Owned()],
        Mended((MISSING, ORPHAN)),
    ),
    ("whole: nothing mended", [Found(OURS_OWNED), Found(SECRET_OWNED)], Mended(())),
    (
        "a read refused",
        [Found(OURS_OWNED), Raised(FORBIDDEN)],
        Unmendable(Ref.of(SECRET), FORBIDDEN),
    ),
    (
        "a create that outlasted the retries",
        [Found(None), Raised(DOWN)],
        Unmendable(Ref.of(CM), DOWN),
    ),
    ("a name taken meanwhile: as it is", [Found(None), Raised(TAKEN)], Raised(TAKEN)),
    ("a Ctrl-C: as it is", [Found(None), Made(CM), Raised(CTRL_C)], Raised(CTRL_C)),
]


@pytest.mark.parametrize(
    ("fed", "expected"), [r[1:] for r in REPAIR_ROWS], ids=[r[0] for r in REPAIR_ROWS]
)
def test_repairing(fed: list[Any], expected: Any) -> None:
    machine = after(Repairing.start((CM, SECRET), MADE_JOB, DIGEST), fed)
    assert machine.next_request(0.0) == expected


def test_a_job_without_companions_has_nothing_to_repair() -> None:
    assert Repairing.start((), MADE_JOB, DIGEST).next_request(0.0) == Mended(())


@pytest.mark.parametrize(
    ("fed", "wrong"),
    [
        ([], Made(CM)),
        ([Found(None)], Found(None)),
        ([Found(SECRET)], Found(None)),
        ([Found(SOMEONE_ELSES)], Owned()),
    ],
)
def test_a_repairing_fed_out_of_turn_is_a_bug(fed: list[Any], wrong: Any) -> None:
    machine = after(Repairing.start((CM, SECRET), MADE_JOB, DIGEST), fed)
    with pytest.raises(Unexpected, match="Repairing in"):
        machine.receive(wrong, 0.0)


CREATED = (CM, SECRET, MADE_JOB)
OWNED = frozenset({Ref.of(CM)})
JOB_REF, SECRET_REF, CM_REF = Ref.of(JOB), Ref.of(SECRET), Ref.of(CM)
UNAVAILABLE = "not deleted: the API server was unavailable"
UNREAD = "may have been created (its create got no answer) and could not be read: "

# (created, the one whose create got no answer, what it was told) -> what it asks next
UNDO_ROWS: list[tuple[str, tuple[Obj, ...], Obj | None, list[Any], Any]] = [
    ("the job is deleted first", CREATED, None, [], Delete(JOB_REF)),
    ("then its companions, last created first", CREATED, None, [Removed()], Delete(SECRET_REF)),
    ("all deleted: nothing left", CREATED, None, [Removed()] * 3, RolledBack(())),
    ("nothing created: nothing to do", (), None, [], RolledBack(())),
    ("an unanswered create is read first", (CM, SECRET), JOB, [], CheckUnsure(JOB)),
    ("there and ours: deleted first", (CM, SECRET), JOB, [Found(MADE_JOB)], Delete(JOB_REF)),
    ("not there: the rest", (CM, SECRET), JOB, [Found(None)], Delete(SECRET_REF)),
    (
        "someone else's: never deleted",
        (CM,),
        SECRET,
        [Found(companion("Secret", "demo-env", digest="other"))],
        Delete(CM_REF),
    ),
    ("nothing made, the unanswered one not there", (), CM, [Found(None)], RolledBack(())),
    (
        "the unanswered one unreadable: left, and the rest deleted",
        (CM, SECRET),
        JOB,
        [Unreadable(FORBIDDEN), Removed(), Removed()],
        RolledBack((Left(JOB_REF, UNREAD + str(FORBIDDEN)),)),
    ),
    (
        "unreadable as the API server is down: the rest is left without asking it",
        (CM, SECRET),
        JOB,
        [Unreadable(DOWN)],
        RolledBack(
            (
                Left(JOB_REF, UNREAD + str(DOWN)),
                Left(SECRET_REF, UNAVAILABLE),
                Left(CM_REF, UNAVAILABLE, owned=True),
            )
        ),
    ),
    (
        "a delete refused: left, the status line said, and the rest deleted",
        CREATED,
        None,
        [NotRemoved(FORBIDDEN), Removed(), Removed()],
        RolledBack((Left(JOB_REF, "delete failed: 403 Forbidden: no right"),)),
    ),
    (
        "a delete that outlasted the retries: the rest is left without asking",
        CREATED,
        None,
        [NotRemoved(DOWN)],
        RolledBack(
            (
                Left(JOB_REF, f"delete failed: {DOWN}"),
                Left(SECRET_REF, UNAVAILABLE),
                Left(CM_REF, UNAVAILABLE, owned=True),
            )
        ),
    ),
    (
        "a Ctrl-C while deleting: what was not deleted yet",
        CREATED,
        None,
        [Removed(), Interrupted()],
        RolledBack(
            (
                Left(SECRET_REF, "delete interrupted: it may still be there"),
                Left(CM_REF, "not deleted", owned=True),
            )
        ),
    ),
    (
        "a Ctrl-C while reading the unanswered one: it too",
        (CM, SECRET),
        JOB,
        [Interrupted()],
        RolledBack(
            (
                Left(JOB_REF, "may have been created: not checked (interrupted)"),
                Left(SECRET_REF, "delete interrupted: it may still be there"),
                Left(CM_REF, "not deleted", owned=True),
            )
        ),
    ),
]


@pytest.mark.parametrize(
    ("created", "unsure", "fed", "expected"),
    [r[1:] for r in UNDO_ROWS],
    ids=[r[0] for r in UNDO_ROWS],
)
def test_rolling_back(
    created: tuple[Obj, ...], unsure: Obj | None, fed: list[Any], expected: Any
) -> None:
    machine = after(RollingBack.start(created, unsure, DIGEST, OWNED), fed)
    assert machine.next_request(0.0) == expected


@pytest.mark.parametrize(
    ("unsure", "fed", "wrong"),
    [(JOB, [], Removed()), (None, [], Found(None)), (None, [Removed()] * 3, Removed())],
)
def test_a_rolling_back_fed_out_of_turn_is_a_bug(
    unsure: Obj | None, fed: list[Any], wrong: Any
) -> None:
    machine = after(RollingBack.start(CREATED, unsure, DIGEST, OWNED), fed)
    with pytest.raises(Unexpected, match="RollingBack in"):
        machine.receive(wrong, 0.0)


class CtrlCAt:
    """A clock that raises a Ctrl-C at its ``at``-th reading: a drive reads it before each
    request and after each answer, so the Ctrl-C comes between two calls."""

    def __init__(self, at: int) -> None:
        self.readings, self.at, self.error = 0, at, KeyboardInterrupt()

    def monotonic(self) -> float:
        self.readings += 1
        if self.readings == self.at:
            raise self.error
        return 0.0

    def sleep(self, seconds: float) -> None:
        raise AssertionError("no pause here")


CREATES: Mapping[type[Any], Callable[[Any], object]] = {
    Read: lambda _: Found(None),
    Create: lambda r: Made(r.obj),
    Own: lambda _: Owned(),
}


def test_a_ctrl_c_between_two_creates_rolls_back_as_one_in_a_create() -> None:
    clock = CtrlCAt(5)  # read the name (1, 2), create CM (3, 4): before the Secret's create
    end = finished(NEW, clock, CREATES, Raised)
    assert end == Failure(clock.error, (CM,), SECRET, frozenset())


def test_a_ctrl_c_once_the_submit_has_ended_stands() -> None:
    clock = CtrlCAt(2 * (1 + 3 + 2) + 1)  # after the read, 3 creates, 2 owner patches
    with pytest.raises(KeyboardInterrupt) as info:
        finished(NEW, clock, CREATES, Raised)
    assert info.value is clock.error


def test_a_ctrl_c_between_two_deletes_says_what_was_not_deleted() -> None:
    machine = RollingBack.start(CREATED, None, DIGEST, OWNED)
    end = finished(machine, CtrlCAt(3), {Delete: lambda _: Removed()}, lambda _: Interrupted())
    assert end == RolledBack(
        (
            Left(SECRET_REF, "delete interrupted: it may still be there"),
            Left(CM_REF, "not deleted", owned=True),
        )
    )


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
    ("a job gone ends it", [JobRead(None)], End()),
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
    """Time that passes only when slept."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
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

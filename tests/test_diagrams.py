"""The lifecycle's machines: one driver runs them all, and their tables say where each row goes,
so their state diagrams are drawn from the tables (ARCHITECTURE.md shows them, checked here)."""

from __future__ import annotations

import ast
import enum
import inspect
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_machines import FakeClock

from kfcompile.lifecycle import job_events, objects, pod_logs, waiting
from kfcompile.lifecycle.ports import Transient
from kfcompile.lifecycle.session import (
    RETRY_TABLE,
    Attempt,
    Failed,
    GiveUp,
    Opened,
    Pause,
    Retry,
    Slept,
    Step,
    Table,
    Unexpected,
    drive,
    ended,
    row,
    told,
    transition,
    when,
)

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
BUSY = Transient(503, "ServiceUnavailable", "try later")

# name in ARCHITECTURE.md -> (the machine's class, its table)
MACHINES: dict[str, tuple[type[Any], Table[Any]]] = {
    "wait": (waiting.Waiter, waiting.WAIT_TABLE),
    "watch_jobs": (job_events.Watcher, job_events.WATCH_TABLE),
    "follow": (pod_logs.Follower, pod_logs.FOLLOW_TABLE),
    "retry": (Retry, RETRY_TABLE),
    "list_all": (objects.Lister, objects.LIST_TABLE),
}


def start(name: str) -> enum.Enum:
    """The phase a machine starts in: its class's default."""
    cls, _ = MACHINES[name]
    default = attrs.fields_dict(cls)["phase"].default
    assert isinstance(default, enum.Enum)
    return default


def edges(table: Table[Any]) -> Iterator[tuple[str, str, str]]:
    """(from, answer, to) for the phase each row leads to, then each of its cases (the answer
    "if" the case's name), in the table's order."""
    for (phase, answer), r in table.items():
        yield phase.name, answer.__name__, r.to.name
        for case in r.cases:
            yield phase.name, f"{answer.__name__} if {case.name}", case.to.name


def mermaid(name: str) -> str:
    """The machine's state diagram, as a mermaid block drawn from its table."""
    lines = ["```mermaid", "stateDiagram-v2", f"    [*] --> {start(name).name}"]
    lines += [f"    {a} --> {b}: {answer}" for a, answer, b in edges(MACHINES[name][1])]
    return "\n".join([*lines, "```", ""])


@pytest.mark.parametrize(
    ("name", "edge"),
    [
        ("wait", ("LIST", "Listed", "PODS")),
        ("wait", ("WATCH", "Expired", "LIST")),
        ("wait", ("PODS", "PodsListed if reached", "END")),
        ("wait", ("PODS", "PodsListed if polling", "POLL")),
        ("wait", ("POLL", "Slept", "LIST")),
        ("watch_jobs", ("SLEEP", "Slept", "WATCH")),
        ("watch_jobs", ("LIST", "PageListed if the last", "WATCH")),
        ("follow", ("WATCH", "PodSeen", "JOB")),
        ("follow", ("WATCH", "PodSeen if as it stood", "WATCH")),
        ("follow", ("LOG", "LogEnded if over", "END")),
        ("retry", ("ATTEMPT", "Failed", "PAUSE")),
        ("retry", ("ATTEMPT", "Returned", "DONE")),
        ("list_all", ("PAGE", "TokenExpired", "PAGE")),
        ("list_all", ("PAGE", "PageRead if the last, or endless", "END")),
    ],
)
def test_the_diagram_has_the_known_edges(name: str, edge: tuple[str, str, str]) -> None:
    assert edge in set(edges(MACHINES[name][1]))


@pytest.mark.parametrize("name", MACHINES)
def test_every_phase_is_reachable_from_the_start(name: str) -> None:
    table = MACHINES[name][1]
    phases = type(start(name))
    reached, todo = {start(name).name}, [start(name).name]
    while todo:
        here = todo.pop()
        for a, _, b in edges(table):
            if a == here and b not in reached:
                reached.add(b)
                todo.append(b)
    assert reached == {p.name for p in phases}
    # and only the ends have no row
    ends = {p.name for p in phases} - {a for a, _, _ in edges(table)}
    assert ends <= {"END", "DONE"}


@pytest.mark.parametrize("name", MACHINES)
def test_architecture_shows_the_diagram(name: str, request: pytest.FixtureRequest) -> None:
    """Regenerate with `pytest tests/test_diagrams.py --update-golden` and review the diff."""
    start_mark, end_mark = f"<!-- diagram:{name} -->\n", f"<!-- /diagram:{name} -->"
    text = ARCHITECTURE.read_text(encoding="utf-8")
    if request.config.getoption("--update-golden"):
        head, rest = text.split(start_mark)
        ARCHITECTURE.write_text(
            head + start_mark + mermaid(name) + end_mark + rest.split(end_mark)[1]
        )
        return
    found = re.search(re.escape(start_mark) + "(.*?)" + re.escape(end_mark), text, re.S)
    assert found, f"ARCHITECTURE.md lacks the {name} diagram"
    assert found.group(1) == mermaid(name), (
        "stale: run pytest tests/test_diagrams.py --update-golden"
    )


def test_the_row_not_its_method_says_where_the_machine_goes() -> None:
    def elsewhere(retry: Retry, answer: Failed, now: float) -> Retry:
        return attrs.evolve(retry, phase=Step.DONE)

    table = {**RETRY_TABLE, (Step.ATTEMPT, Failed): row(elsewhere, Step.PAUSE)}
    assert transition(table, Retry(60.0), Failed(BUSY), 0.0).phase is Step.PAUSE


def test_the_first_case_that_holds_says_where_instead() -> None:
    never = when("never", lambda retry: False, Step.ATTEMPT)
    failed = when("failed", lambda retry: retry.error is not None, Step.DONE)
    always = when("always", lambda retry: True, Step.ATTEMPT)
    table = {(Step.ATTEMPT, Failed): row(Retry._failed, Step.PAUSE, never, failed, always)}
    assert transition(table, Retry(60.0), Failed(BUSY), 0.0).phase is Step.DONE
    assert ("ATTEMPT", "Failed if failed", "DONE") in set(edges(table))


@pytest.mark.parametrize("name", MACHINES)
def test_no_method_of_a_machine_sets_its_phase(name: str) -> None:
    """Only the table says where a machine goes: no method of its class evolves its phase."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(MACHINES[name][0])))
    setting = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and any(k.arg == "phase" for k in node.keywords)
    ]
    assert setting == [], f"{name}: lines {setting} of its class set the phase"


def test_an_answer_with_no_row_is_a_bug() -> None:
    with pytest.raises(Unexpected, match="Retry in ATTEMPT got Slept"):
        Retry(60.0).receive(Slept(), 0.0)


def test_drive_performs_each_request_by_its_row_until_one_has_none() -> None:
    clock, asked = FakeClock(), []

    def sleep(request: Pause) -> Slept:
        asked.append(request)
        clock.sleep(request.at_most if request.at_most < 1.0 else 1.0)
        return Slept()

    steps = drive(Retry(3.0), clock, {Attempt: lambda _: Failed(BUSY), Pause: sleep})
    seen: list[tuple[Step, str]] = []
    machine, end = ended(told(steps, lambda m, a: seen.append((m.phase, type(a).__name__))))
    assert isinstance(end, GiveUp) and end.waited == 3.0 and end.error is BUSY
    assert [p.attempt for p in asked] == [0, 1, 2]
    assert seen[:2] == [(Step.PAUSE, "Failed"), (Step.ATTEMPT, "Slept")]
    assert machine.pauses == 3


def test_drive_closes_the_stream_once_the_machine_is_done_with_it() -> None:
    opened, closed = Opened(), []

    def lines(n: int) -> Iterator[str]:
        try:
            yield "a"
        finally:
            closed.append(n)

    def attempt(_: Attempt) -> Failed:
        next(opened.start(lines(len(closed))))
        return Failed(BUSY)

    steps = drive(
        Retry(60.0),
        FakeClock(),
        {Attempt: attempt, Pause: lambda _: Slept()},
        opened,
        streaming=lambda m: m.phase is Step.PAUSE,
    )
    assert next(steps)[0].phase is Step.PAUSE and closed == []  # read on while it pauses
    next(steps)  # slept: ATTEMPT again, done with the stream
    next(steps)  # it was closed before the next attempt opened another
    assert closed == [0]
    steps.close()
    assert closed == [0, 1]

"""Live training progress: ``status.trainerStatus`` (Trainer v2.2+, the TrainJobStatus feature
gate) read as hostile input, and shown by ``status``, ``list``, ``list -w``, ``wait`` (a bar on
a terminal) and ``lifecycle.watch_jobs``."""

from __future__ import annotations

import functools
import json
import os
import pty
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, LocalCluster, PortCluster, cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli_cluster import write_spec

from kfcompile import lifecycle
from kfcompile.cli import main
from kfcompile.lifecycle import Happened
from kfcompile.progress import (
    MAX_METRICS,
    MAX_TEXT,
    NONE_REPORTED,
    NOT_REPORTED_BY,
    STALE_AFTER,
    Progress,
    bar,
    duration,
    read_progress,
)
from kfcompile.spec.load import structure
from kfcompile.testing import FakeCluster, courses

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


def trainjob(trainer_status: Any) -> dict[str, Any]:
    return {"kind": "TrainJob", "status": {"trainerStatus": trainer_status}}


# --- reading ------------------------------------------------------------------------------------


def test_what_the_training_process_reported_is_read() -> None:
    got = read_progress(
        trainjob(
            {
                "progressPercentage": 42,
                "estimatedRemainingSeconds": 3725,
                "metrics": [{"name": "loss", "value": "0.31"}, {"name": "lr", "value": "1e-4"}],
                "lastUpdatedTime": "2026-12-01T09:59:48Z",
            }
        )
    )
    assert got == Progress(
        42, 3725, (("loss", "0.31"), ("lr", "1e-4")), NOW - timedelta(seconds=12)
    )
    assert got.cell() == "42% ETA 1h02m"
    assert got.line(NOW) == "42% ETA 1h02m · loss 0.31, lr 1e-4 · 12s ago"
    assert got.as_json(NOW) == {
        "percent": 42,
        "remainingSeconds": 3725,
        "metrics": {"loss": "0.31", "lr": "1e-4"},
        "lastUpdatedTime": "2026-12-01T09:59:48Z",
        "ageSeconds": 12.0,
        "stale": False,
    }


@pytest.mark.parametrize(
    "cr",
    [
        {"kind": "PyTorchJob", "status": {"conditions": []}},  # no such field
        {"kind": "TrainJob"},  # nothing reported yet, or the gate is off
        {"kind": "TrainJob", "status": "x"},
        trainjob(None),
        trainjob(["a"]),
    ],
)
def test_no_report_is_none(cr: dict[str, Any]) -> None:
    assert read_progress(cr) is None


def test_values_outside_the_crd_are_not_believed() -> None:
    # trainjobs-v2.2.1.yaml: progressPercentage 0..100, estimatedRemainingSeconds int32 >= 0,
    # metrics maxItems 256, name and value maxLength 64
    got = read_progress(
        trainjob(
            {
                "progressPercentage": 1e8,
                "estimatedRemainingSeconds": -5,
                "metrics": [{"name": "x" * 1000, "value": "\x1b[2J1"}, {"name": 3}, "s"]
                + [{"name": f"m{i}", "value": "1"} for i in range(2 * MAX_METRICS)],
                "lastUpdatedTime": "yesterday",
            }
        )
    )
    assert got is not None
    assert (got.percent, got.remaining_seconds, got.updated) == (None, None, None)
    assert got.metrics[0] == ("x" * MAX_TEXT, "\x1b[2J1")  # cut, and kept as the server said
    assert f"{'x' * MAX_TEXT} \\x1b[2J1" in got.line(NOW)  # shown escaped
    # the first MAX_METRICS items are read, of which two are no metric
    assert len(got.metrics) == MAX_METRICS - 2
    as_bool = read_progress(trainjob({"progressPercentage": True}))
    assert as_bool is not None and as_bool.percent is None  # a bool is no number


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,  # a status of any shape, drawn fast: 100 leaves failed `too_slow` loaded
    )
)
def test_any_status_reads_without_error(value: Any) -> None:
    got = read_progress(trainjob(value))
    if got is not None:
        assert got.percent is None or 0 <= got.percent <= 100
        assert all(len(k) <= MAX_TEXT and len(v) <= MAX_TEXT for k, v in got.metrics)
        assert not any(re.search(r"[\x00-\x1f]", k + v) for k, v in got.metrics)
        got.line(NOW)


def test_a_report_not_updated_for_long_is_said_stale() -> None:
    old = Progress(60, None, (), NOW - timedelta(seconds=STALE_AFTER + 1))
    assert old.stale(NOW) and old.line(NOW) == "60% · stale: last update 10m01s ago"
    assert not Progress(60, None, (), NOW).stale(NOW)
    assert not Progress(60, None, (), None).stale(NOW)  # no time: nothing to judge


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (725, "12m05s"), (3725, "1h02m"), (3 * 86400 + 4 * 3600, "3d04h")],
)
def test_durations(seconds: int, text: str) -> None:
    assert duration(seconds) == text


def test_bars() -> None:
    assert bar(0, 10) == "[----------]"
    assert bar(42, 10) == "[####------]"
    assert bar(100, 10) == "[##########]"
    assert bar(None, 4) == "[    ]"


# --- the lifecycle: watch_jobs and wait ----------------------------------------------------------


def reports(local: PortCluster, *percents: int) -> None:
    """Each TrainJob runs, reports ``percents`` (the Trainer's trainerStatus, with its feature
    gate on), one every 0.2 s, then succeeds."""
    fake = local.fake

    def script(_: object) -> None:
        for i, percent in enumerate(percents):
            fake.at(
                0.4 + 0.2 * i, functools.partial(courses.progress, fake, NAMESPACE, "p", percent)
            )

    fake.store.on_create += [courses.runs(fake, ends=0.4 + 0.2 * len(percents)), script]


def test_watch_jobs_reports_each_new_report_as_progressed() -> None:
    with PortCluster(schema_check.require_shared(), crds=("trainjobs-v2.3.0.yaml",)) as local:
        reports(local, 30, 60, 90)
        job = structure({"name": "p", "image": "python:3", "command": ["python"]})
        lifecycle.submit(local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        got = []
        events = lifecycle.watch_jobs(local.session())
        try:
            for event in events:
                got.append(event)
                if event.state.finished:
                    break
        finally:
            events.close()
    progressed = [e for e in got if e.what is Happened.PROGRESSED]
    assert [e.progress.percent for e in progressed if e.progress] == [30, 60, 90]
    assert all(e.state.state.value == "RUNNING" for e in progressed)
    assert got[-1].what is Happened.FINISHED and got[-1].progress is not None


def test_without_the_feature_gate_nothing_is_progressed() -> None:
    with PortCluster(schema_check.require_shared(), crds=("trainjobs-v2.3.0.yaml",)) as local:
        reports(local)
        job = structure({"name": "p", "image": "python:3", "command": ["python"]})
        lifecycle.submit(local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={})
        obs = lifecycle.wait(
            local.session(), lifecycle.locate(local.session(), NAMESPACE, "p", "TrainJob"), "done"
        )
    assert obs.state.finished and obs.progress is None


# --- the CLI ------------------------------------------------------------------------------------


def first_step(fake: FakeCluster) -> None:
    """Each job runs (a TrainJob reports its first training step, 30 %) and then hangs."""

    def report(job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        fake.at(0.4, lambda: courses.progress(fake, NAMESPACE, name, 30, remaining=120))

    fake.store.on_create += [courses.runs(fake, ends=None), report]


@pytest.fixture
def local() -> Iterator[LocalCluster]:
    """Over HTTP (the CLI in a process of its own), its clock moved by the test."""
    with LocalCluster(schema_check.require_shared(), auto=False, scenario=None) as cluster:
        first_step(cluster.fake)
        yield cluster


@pytest.fixture
def wired(monkeypatch: pytest.MonkeyPatch) -> PortCluster:
    """The CLI's (in this process)."""
    cluster = cli(monkeypatch, scenario=None)
    first_step(cluster.fake)
    return cluster


def test_status_shows_progress_and_its_age(
    wired: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kubeconfig: list[str] = []
    assert main(["submit", str(write_spec(tmp_path, "hang")), *kubeconfig]) == 0
    assert main(["status", "demo", *kubeconfig]) == 0
    out = capsys.readouterr().out
    assert f"progress: {NONE_REPORTED}" in out  # the process has reported nothing yet
    wired.clock.advance(1.0)  # running; a training step, reported; then it hangs
    assert main(["status", "demo", *kubeconfig]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^progress: 30% ETA 2m00s · loss 0\.9 · \d+s ago$", out, re.M), out
    assert main(["status", "demo", "-o", "json", *kubeconfig]) == 0
    doc = json.loads(capsys.readouterr().out)["progress"]
    assert (doc["percent"], doc["remainingSeconds"], doc["metrics"]) == (30, 120, {"loss": "0.9"})
    assert doc["stale"] is False and doc["ageSeconds"] >= 0
    assert main(["list", *kubeconfig]) == 0
    [row] = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert row[4:7] == ["RUNNING", "30%", "ETA"]


def test_a_pytorchjob_says_it_reports_no_progress(
    wired: PortCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kubeconfig: list[str] = []
    assert (
        main(["submit", str(write_spec(tmp_path, "hang")), "-t", "pytorchjob/v1", *kubeconfig]) == 0
    )
    assert main(["status", "demo", *kubeconfig]) == 0
    assert f"progress: {NOT_REPORTED_BY}" in capsys.readouterr().out


def _job(local: LocalCluster) -> dict[str, Any]:
    [job] = local.store.list("trainer.kubeflow.org/v1alpha1", "TrainJob", NAMESPACE)
    return job


class Output:
    """What a process writes to ``fd``, read as it comes."""

    def __init__(self, fd: int) -> None:
        self.fd, self.text = fd, ""

    def until(self, needle: str, seconds: float = 30) -> None:
        while needle not in self.text:
            ready, _, _ = select.select([self.fd], [], [], seconds)
            assert ready, f"{needle!r} not written in {seconds}s: {self.text!r}"
            self.read()

    def read(self) -> bool:
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # a terminal whose process closed it
            chunk = b""
        self.text += chunk.decode()
        return bool(chunk)


def _wait_output(local: LocalCluster, tmp_path: Path, *, tty: bool) -> str:
    """``kfcompile submit --wait done`` in a new process, its stderr a terminal or a pipe, while
    the job runs a step at a time (each training step reported), the next step once the last
    one is shown."""
    env = {**os.environ, "KUBECONFIG": str(local.kubeconfig)}
    argv = [sys.executable, "-m", "kfcompile", "submit", str(write_spec(tmp_path, "succeeds"))]
    primary, secondary = pty.openpty() if tty else os.pipe()
    proc = subprocess.Popen(
        [*argv, "--wait", "done"], env=env, stdout=subprocess.DEVNULL, stderr=secondary
    )
    os.close(secondary)
    out = Output(primary)
    try:
        out.until("demo: PENDING")
        local.clock.advance(1.0)  # running, up to its first step
        assert "trainerStatus" in _job(local)["status"]
        out.until("30%")
        for percent in (60, 90):
            courses.progress(local.fake, NAMESPACE, "demo", percent, remaining=(100 - percent) * 2)
            out.until(f"{percent}%")
        courses.finish(local.fake, NAMESPACE, "demo")  # succeeded
        assert proc.wait(timeout=30) == 0
        while out.read():
            pass
        return out.text
    finally:
        proc.kill()
        os.close(primary)


def test_wait_draws_a_bar_on_a_terminal(local: LocalCluster, tmp_path: Path) -> None:
    out = _wait_output(local, tmp_path, tty=True)
    lines = out.replace("\r\n", "\n").split("\n")  # the terminal ends lines with \r\n
    [redrawn] = [line for line in lines if "%" in line and "RUNNING" in line]
    # each report's bar drawn over the last one, on one line: \r, the line, erase to its end
    parts = redrawn.split("\r")
    assert [re.search(r" (\[[#-]+\]) (\d+)% ETA", p).groups() for p in parts] == [  # type: ignore[union-attr]
        ("[######--------------]", "30"),
        ("[############--------]", "60"),
        ("[##################--]", "90"),
    ], out
    assert all(p.endswith("\x1b[K") for p in parts[1:]), parts
    assert all(
        re.match(r"\[ *[\d.]+s\] demo: RUNNING \(JobsActive\) nodes \d/2 ready", p) for p in parts
    )
    assert any(line.startswith("[") and "SUCCEEDED (Complete)" in line for line in lines)


def test_wait_writes_a_plain_line_per_change_elsewhere(local: LocalCluster, tmp_path: Path) -> None:
    err = _wait_output(local, tmp_path, tty=False)
    assert "\r" not in err and "\x1b" not in err
    lines = [line for line in err.splitlines() if "RUNNING" in line]
    assert [re.search(r"(\d+)% ETA", line)[1] for line in lines if "%" in line] == [
        "30",
        "60",
        "90",
    ]  # type: ignore[index]


def test_no_property_is_timed(request: pytest.FixtureRequest) -> None:
    """Issue 24, item 15: on a loaded machine drawing and running examples is slow, which is no
    failure of the code under test; `too_slow` failed a property that the suite's profile did
    not exempt. Every property collected with this test runs untimed: no deadline, no
    `too_slow` (the profile's, or the test's own settings)."""
    checked = []
    for item in request.session.items:
        test = getattr(item, "obj", None)
        if not getattr(test, "is_hypothesis_test", False):
            continue
        chosen = getattr(test, "_hypothesis_internal_use_settings", settings.default)
        checked.append(item.nodeid)
        assert chosen.deadline is None, item.nodeid
        assert HealthCheck.too_slow in chosen.suppress_health_check, item.nodeid
    assert any("test_any_status_reads_without_error" in n for n in checked)

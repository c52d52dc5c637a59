"""``logs`` and ``--save-logs`` stream a log of any size to the terminal and to disk: what the
command holds stays bounded, whatever the log's size (issue 24, item 10). In-process against
the local API server, which makes the log up as it sends it (nothing of it held there); the
memory is Python's own, as tracemalloc counts it, while the command runs.

``bench/logs.py`` measures the whole command process's peak RSS for a 1 GiB log."""

from __future__ import annotations

import os
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
from fakekube import Body
from fakekube.cluster import NAMESPACE, LocalCluster, with_demo

from kfcompile import lifecycle
from kfcompile.cli import main
from kfcompile.lifecycle.ports import Ref

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
MiB = 1 << 20
LOG = 12 * MiB  # three times what the command may hold
HELD = 4 * MiB  # what it may hold (it holds under 1): a line's bound, buffers, the client's
LINE = b"step 4200 loss 0.4213 lr 3.0e-04 grad_norm 1.02 tokens/s 51234 mem 71.3GiB".ljust(99)


class Log:
    """``size`` bytes of 100-byte lines in 64 KiB chunks, made as they are sent."""

    def __init__(self, size: int) -> None:
        self.size, self.sent = size, 0

    def __iter__(self) -> Iterator[bytes]:
        chunk = (LINE + b"\n") * (64 * 1024 // 100)
        while self.sent < self.size:
            self.sent += len(chunk)
            yield chunk

    @property
    def lines(self) -> int:
        return self.sent // (len(LINE) + 1)


@pytest.fixture(scope="module")
def local() -> Iterator[LocalCluster]:
    with with_demo(schema_check.require_shared(), running=True) as cluster:
        yield cluster


def _serve(local: LocalCluster, size: int = LOG) -> Log:
    """The next read of demo's pod's log answers ``size`` bytes of lines."""
    [pod] = [p["metadata"]["name"] for p in local.objects("Pod")]
    log = Log(size)
    answer = Body(log, content_type="text/plain", length=None)
    local.kube.faults.add("GET", f"/pods/{pod}/log", answer=answer)
    return log


def _held_by(local: LocalCluster, *args: str) -> int:
    """The peak of Python's memory while the command runs (less what it held before)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert main([*args, "--kubeconfig", str(local.kubeconfig)]) == 0
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_logs_prints_a_log_as_it_reads_it(
    local: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    printed = tmp_path / "printed"
    with printed.open("w", encoding="utf-8") as out:
        monkeypatch.setattr(sys, "stdout", out)
        log = _serve(local)
        held = _held_by(local, "logs", "demo")
    assert os.path.getsize(printed) == log.sent  # every line, as sent
    assert held < HELD, f"{held / MiB:.1f} MiB held for a {LOG / MiB:.0f} MiB log"


def test_save_logs_writes_a_log_as_it_reads_it(local: LocalCluster, tmp_path: Path) -> None:
    complete = {"type": "Complete", "status": "True", "reason": "JobsCompleted", "message": "ok"}
    local.store.patch_status(TRAINJOB, "TrainJob", NAMESPACE, "demo", {"conditions": [complete]})
    log = _serve(local)
    held = _held_by(local, "wait", "demo", "--save-logs", str(tmp_path / "logs"))
    assert [p.name for p in (tmp_path / "logs").iterdir()] == ["rank-0.log"]
    assert (tmp_path / "logs" / "rank-0.log").stat().st_size == log.sent
    assert held < HELD, f"{held / MiB:.1f} MiB held for a {LOG / MiB:.0f} MiB log"


def test_the_first_line_comes_before_the_log_is_read_whole(local: LocalCluster) -> None:
    """The library's read, too: its first line while most of the log is still unsent; once
    the reader stops, the server stops sending."""
    log = _serve(local, size=256 * MiB)
    lines = lifecycle.logs(local.session(), Ref(TRAINJOB, "TrainJob", NAMESPACE, "demo"))
    first = next(lines)
    assert first.rank == 0 and first.text == LINE.decode()
    lines.close()
    assert log.sent < 64 * MiB, f"{log.sent / MiB:.0f} MiB sent before the first line"


class Broken(Log):
    """A log whose connection breaks after its first two chunks, with no end."""

    def __iter__(self) -> Iterator[bytes]:
        for number, chunk in enumerate(super().__iter__()):
            if number == 2:
                raise RuntimeError("the kubelet went away")  # the server aborts mid-answer
            yield chunk

    @property
    def lines(self) -> int:
        return 2 * (64 * 1024 // 100)


def test_a_log_that_breaks_after_lines_were_printed_says_so(
    local: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """Printed lines cannot be taken back: no read again (that would print them twice), but
    one line naming how many came, and exit status 1. A break before the first line is
    retried as any call is."""
    [pod] = [p["metadata"]["name"] for p in local.objects("Pod")]
    local.kube.faults.add("GET", f"/pods/{pod}/log", drop=True)  # no answer: retried
    log = Broken(LOG)
    local.kube.faults.add("GET", f"/pods/{pod}/log", answer=Body(log, "text/plain", None))
    code = main(["logs", "demo", "--kubeconfig", str(local.kubeconfig)])
    out, err = capsys.readouterr()
    assert code == 1 and out == f"{LINE.decode()}\n" * log.lines
    said = err.strip().splitlines()
    assert said[-1].startswith(
        f"kfcompile: read logs of Pod default/{pod}: the log broke off after {log.lines} lines ("
    )
    assert "retrying" in said[0] and len(said) == 2

"""A 1 GiB answer refused within bounded memory: wall time and peak RSS of the real CLI (a new
process each, ``python -m kfcompile ...``) against the local API server of the tests answering
one request with 1 GiB, drawn as it is sent (never held by the server).

    python bench/huge_answer.py

Cases: ``status demo`` whose TrainJob answer is 1 GiB with a ``Content-Length`` (refused on
the header), the same chunked (refused once past the 3 MiB object limit), and ``list`` whose
TrainJob list is 1 GiB chunked (refused past the 64 MiB list limit). Printed per case: time,
the child's peak RSS (``wait4``), exit status, how much the server sent before the client hung
up, and the CLI's last line. Target: exit 1 in about the CLI's start-up time, with a peak RSS
near a plain ``status``'s (the limit plus the start-up's own).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import schema_check  # noqa: E402
from fakekube import Body  # noqa: E402
from fakekube.cluster import LocalCluster  # noqa: E402

GiB = 1 << 30
PIECE = 1 << 20
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


class Huge:
    """``total`` bytes of JSON-looking padding in 1 MiB pieces, made as they are sent."""

    def __init__(self, total: int) -> None:
        self.total, self.sent = total, 0

    def __iter__(self) -> Iterator[bytes]:
        piece = b" " * PIECE
        for _ in range(self.total // PIECE):
            self.sent += PIECE
            yield piece


def run(kubeconfig: Path, *argv: str) -> tuple[float, float, int, str]:
    """Seconds, peak RSS in MiB, exit status and last stderr line of the CLI."""
    command = [sys.executable, "-m", "kfcompile", *argv, "--kubeconfig", str(kubeconfig)]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    assert child.stderr is not None
    err = child.stderr.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    took = time.perf_counter() - start
    lines = err.strip().splitlines()
    return took, usage.ru_maxrss / 1024, child.returncode, lines[-1] if lines else ""


def main() -> None:
    with LocalCluster(schema_check.require_shared()) as cluster:
        kc = cluster.kubeconfig
        took, rss, code, _ = run(kc, "status", "nothing-there")
        print(
            f"baseline: status of a job that is not there: {took:.2f} s, {rss:.0f} MiB, exit {code}"
        )
        cases = [
            (
                "status, 1 GiB object, Content-Length",
                "/trainjobs/nothing",
                False,
                ("status", "nothing"),
            ),
            ("status, 1 GiB object, chunked", "/trainjobs/nothing", True, ("status", "nothing")),
            ("list, 1 GiB list, chunked", "/trainjobs", True, ("list",)),
        ]
        for name, path, chunked, argv in cases:
            body = Huge(GiB)
            answer = Body(body, length=None if chunked else GiB)
            cluster.kube.faults.add("GET", path, watch=False, answer=answer)
            took, rss, code, last = run(kc, *argv)
            cluster.kube.faults.clear()
            sent = body.sent / PIECE
            print(f"{name}: {took:.2f} s, peak RSS {rss:.0f} MiB, exit {code}, {sent:.0f} MiB sent")
            print(f"    {last}")


if __name__ == "__main__":
    main()

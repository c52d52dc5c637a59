"""A pod's log of 1 GiB read by the real CLI, and through the real adapter: wall time and the
peak RSS of the process that reads it.

    python bench/logs.py [MiB]      # default 1024

The log is the local API server's answer (tests/fakekube, in this process) to the log read: made
up as it is sent, 64 KiB at a time, chunked, so the server holds none of it. Each case is a new
process of its own, its peak RSS read by ``wait4``:

- ``kfcompile logs demo``, its stdout a pipe read to the end (``| wc -c``);
- ``kfcompile wait demo --save-logs DIR`` of the job once it has finished: the log to
  ``DIR/rank-0.log``;
- the adapter alone (``KubeCluster.pod_log``): one line of 32 and 64 MiB with no newline (a tqdm
  bar redrawn after ``\\r``, again and again), and the log of 100-byte lines.

Next to each: the RSS of the CLI that reads nothing (``status`` of a job that is not there), or
the client's before it reads.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

MiB = 1 << 20
CHUNK = 64 * 1024
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TRAINJOB = "trainer.kubeflow.org/v1alpha1"
DRAWING = (
    b"\r 42%|####################                            | 4200/10000 [01:02<01:26, 67.1it/s]"
)
LINE = b"step 4200 loss 0.4213 lr 3.0e-04 grad_norm 1.02 tokens/s 51234 mem 71.3GiB" + b" " * 24


class Log:
    """``size`` bytes of a log in 64 KiB chunks, made as they are sent: the progress bar's
    drawings (``line``), or 100-byte lines."""

    def __init__(self, case: str, size: int) -> None:
        self.case, self.size, self.sent = case, size, 0

    def __iter__(self) -> Iterator[bytes]:
        unit = DRAWING if self.case == "line" else LINE[:99] + b"\n"
        body = unit * (CHUNK // len(unit))
        while self.sent < self.size:
            self.sent += len(body)  # whole drawings or lines: the last may go past ``size``
            yield body
        if self.case == "line":
            yield b"\n"


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB -> MiB


def client(kubeconfig: str, pod: str) -> None:
    """Read one log whole through the adapter; print what it took as JSON."""
    from kfcompile_kube import KubeCluster, connect

    cluster = KubeCluster(connect(kubeconfig).api_client, request_timeout=600)
    before = _rss()
    start = time.perf_counter()
    lines = longest = 0
    for line in cluster.pod_log("default", pod):
        lines += 1
        longest = max(longest, len(line))
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "lines": lines, "longest": longest, "rss": before,
                      "peak": _rss()}))  # fmt: skip


class Ran(NamedTuple):
    """What a new process took: wall and CPU seconds, peak RSS (MiB), its exit status, the
    bytes of its stdout and its last line on stderr."""

    seconds: float
    cpu: float
    rss: float
    code: int
    out: int
    last: str

    def said(self, what: str, size_mib: float, done: str) -> str:
        return (
            f"{what}: {self.seconds:.2f} s ({size_mib / self.seconds:.0f} MiB/s; CPU "
            f"{self.cpu:.2f} s), peak RSS {self.rss:.0f} MiB, exit {self.code}, {done}"
        )


def run(*argv: str) -> Ran:
    """A new process, its stdout a pipe that ``wc -c`` reads to the end (so this process,
    which serves the log, is not the one reading it)."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert child.stdout is not None and child.stderr is not None
    counted = subprocess.Popen(["wc", "-c"], stdin=child.stdout, stdout=subprocess.PIPE)
    child.stdout.close()
    err = child.stderr.read().decode().strip().splitlines()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    took = time.perf_counter() - start
    return Ran(
        took,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,
        child.returncode,
        int(counted.communicate()[0]),
        err[-1] if err else "",
    )


def main(size_mib: int) -> None:
    import schema_check
    from fakekube import Body
    from fakekube.cluster import NAMESPACE, with_demo

    size = size_mib * MiB
    with with_demo(schema_check.require_shared(), running=True) as cluster:
        kc = str(cluster.kubeconfig)
        [pod] = [p["metadata"]["name"] for p in cluster.objects("Pod")]
        kfcompile = (sys.executable, "-m", "kfcompile")

        def serve(case: str, size: int) -> Log:
            log = Log(case, size)
            answer = Body(log, content_type="text/plain", length=None)
            cluster.kube.faults.add("GET", f"/pods/{pod}/log", answer=answer)
            return log

        idle = run(*kfcompile, "status", "nothing-there", "--kubeconfig", kc)
        print(
            f"the CLI reading nothing (status of a job that is not there): {idle.seconds:.2f} s "
            f"(CPU {idle.cpu:.2f} s), peak RSS {idle.rss:.0f} MiB, exit {idle.code}",
            flush=True,
        )

        log = serve("lines", size)
        ran = run(*kfcompile, "logs", "demo", "--kubeconfig", kc)
        done = f"{ran.out / MiB:.0f} MiB printed of {log.sent / MiB:.0f} MiB sent"
        what = f"kfcompile logs, {size_mib} MiB of 100-byte lines, to a pipe"
        print(ran.said(what, size_mib, done), flush=True)

        complete = {"type": "Complete", "status": "True", "reason": "JobsCompleted"}
        finished = {"conditions": [{**complete, "message": "done"}]}
        cluster.store.patch_status(TRAINJOB, "TrainJob", NAMESPACE, "demo", finished)
        with tempfile.TemporaryDirectory(prefix="kfcompile-bench-") as tmp:
            log = serve("lines", size)
            save = ("wait", "demo", "--save-logs", tmp, "--kubeconfig", kc)
            ran = run(*kfcompile, *save)
            saved = sum(f.stat().st_size for f in Path(tmp).iterdir())
            done = f"{saved / MiB:.0f} MiB saved of {log.sent / MiB:.0f} MiB sent"
            what = f"kfcompile wait --save-logs, {size_mib} MiB of 100-byte lines"
            print(ran.said(what, size_mib, done), flush=True)
            if ran.code:
                print(f"    {ran.last}")

        for case, mib in (("line", 32), ("line", 64), ("lines", size_mib)):
            serve(case, mib * MiB)
            reader = [sys.executable, __file__, "--client", kc, pod]
            read = subprocess.run(reader, check=True, capture_output=True, env=ENV)
            got = json.loads(read.stdout)
            what = "one line, no newline" if case == "line" else "100-byte lines"
            print(
                f"the adapter alone, {mib:>5} MiB {what:<22} {got['seconds']:7.2f} s "
                f"{mib / got['seconds']:7.1f} MiB/s  {got['lines']:>9} lines "
                f"(longest {got['longest']} chars)  peak RSS {got['peak']:.0f} MiB "
                f"(before reading: {got['rss']:.0f} MiB)",
                flush=True,
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--client"]:
        client(sys.argv[2], sys.argv[3])
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)

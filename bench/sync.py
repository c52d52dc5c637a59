"""Work-dir sync of one large file through the real adapter, against the local API server of
the tests (tests/fakekube) running in a second process: wall time and the client's memory.

    python bench/sync.py [MiB]          # default 1024 (1 GiB)

Down, then up: seconds (the helper pod's start included), throughput, the client process's
peak RSS after the run (next to its RSS before the first one), and, in a second run under
tracemalloc, the peak of the client's Python allocations during it. The fake server keeps the
claim's files in memory in its own process, so none of its memory is counted.

Needs ../shared/crds (the reference CRDs), as the tests do.
"""

from __future__ import annotations

import random
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

MiB = 1 << 20
BLOCK = (bytes(range(251)) * (MiB // 251 + 1))[:MiB]  # not all zeros, not random


def serve(size_mib: int) -> None:
    """The fake cluster, with the file to download in its claim, until stdin closes."""
    import schema_check
    from fakekube.cluster import LocalCluster

    with LocalCluster(schema_check.require_shared()) as local:
        local.sent["/mnt/pvc/bench"] = tar(BLOCK * size_mib)  # what the pod's tar answers
        print(local.kubeconfig, flush=True)
        sys.stdin.read()


def tar(blob: bytes) -> bytes:
    """A tar stream of one file, ``blob.bin``."""
    entry = tarfile.TarInfo("blob.bin")
    entry.size = len(blob)
    padding = bytes(-len(blob) % tarfile.BLOCKSIZE + 2 * tarfile.BLOCKSIZE)
    return entry.tobuf(tarfile.GNU_FORMAT) + blob + padding


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB -> MiB


def _traced(move: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        move()
        return (tracemalloc.get_traced_memory()[1] - base) / MiB
    finally:
        tracemalloc.stop()


def main(size_mib: int) -> None:
    from fakekube.cluster import CLAIM, NAMESPACE

    from kfcompile import lifecycle
    from kfcompile_kube import KubeCluster, connect
    from kfcompile_local import SystemClock, TarFiles

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(size_mib)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    work = Path(tempfile.mkdtemp(prefix="kfcompile-bench-sync-"))
    try:
        assert server.stdout is not None
        kubeconfig = server.stdout.readline().strip()
        conn = connect(kubeconfig)
        session = lifecycle.Session(
            KubeCluster(conn.api_client), SystemClock(), jitter=random.random
        )

        def sync(direction: str, where: Path, path: str = "/bench") -> lifecycle.Synced:
            move = lifecycle.sync_up if direction == "up" else lifecycle.sync_down
            return move(
                session, TarFiles(), namespace=NAMESPACE, pvc=CLAIM, path=path, local=str(where)
            )

        (work / "warm").mkdir()
        sync("up", work / "warm", "/warm")  # the first exec imports CoreV1Api (~1 s)
        up = work / "up"
        up.mkdir()
        with open(up / "blob.bin", "wb") as f:
            for _ in range(size_mib):
                f.write(BLOCK)
        print(f"sync of one {size_mib:,} MiB file through the real adapter (client RSS before:")
        print(f"{_rss():,.0f} MiB; the server runs in another process)")
        for direction in ("down", "up"):
            where = work / "down" if direction == "down" else up

            def once(direction: str = direction, where: Path = where) -> None:
                done = sync(direction, where)
                assert (done.files, done.size) == (1, size_mib * MiB), done
                if direction == "down":
                    assert (where / "blob.bin").stat().st_size == size_mib * MiB
                    shutil.rmtree(where)

            start = time.perf_counter()
            once()
            seconds = time.perf_counter() - start
            rss = _rss()
            traced = _traced(once)
            print(
                f"  {direction:>4}: {seconds:6.2f} s ({size_mib / seconds:4.0f} MiB/s), "
                f"client peak RSS {rss:,.0f} MiB, peak traced allocations {traced:,.1f} MiB"
            )
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=60)
        shutil.rmtree(work)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(int(sys.argv[2]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)

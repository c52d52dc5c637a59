"""How soon a cluster command fails when it cannot reach the API server, and how many requests
``wait`` makes when every watch it opens is answered ``410 Gone``.

    python bench/time_to_fail.py

1. Wall time of the real CLI (``python -m kfcompile status demo --kubeconfig ...``, a new
   process each, so the ~0.4 s start-up is in it) against a refused port (a closed localhost
   port) and a silent server (a socket that accepts and never answers; ``--request-timeout 2s``
   when the CLI has the flag, else its default), with the exit status, the last line of stderr
   and how many connections the silent server accepted. Targets: refused <= 2 s, silent <= the
   request timeout + 1 s.
2. Requests ``lifecycle.wait`` makes over 5 minutes of fake time (the small fake of the
   tests, on its fake clock) when every watch is answered 410, each request taking 1/23 s of
   fake time (the 23 requests a second the issue measured on a real server without backoff).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import schema_check  # noqa: E402
from fakekube.cluster import NAMESPACE, PortCluster  # noqa: E402

from kfcompile import lifecycle, structure  # noqa: E402
from kfcompile.cli.parser import build  # noqa: E402
from kfcompile.testing import fixed_jitter  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SILENT_TIMEOUT = "2s"
FAKE_MINUTES = 5
LATENCY = 1 / 23  # fake seconds per request


def _kubeconfig(directory: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path = directory / f"kubeconfig-{len(list(directory.iterdir()))}"
    path.write_text(json.dumps(config))
    return path


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()  # nothing listens there now: a connect is refused
    return port


class Silent:
    """Accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)


def _has_request_timeout() -> bool:
    """Whether this CLI has the flag (the figures before it existed were taken without)."""
    _, unknown = build().parse_known_args(["status", "demo", "--request-timeout", "1s"])
    return not unknown


def _cli(kubeconfig: Path, *extra: str) -> tuple[float, int, str]:
    command = [sys.executable, "-m", "kfcompile", "status", "demo", "--kubeconfig", str(kubeconfig)]
    start = time.perf_counter()
    done = subprocess.run([*command, *extra], capture_output=True, text=True, env=ENV, check=False)
    took = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    return took, done.returncode, lines[-1] if lines else ""


def time_to_fail() -> None:
    flag = _has_request_timeout()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        took, code, last = _cli(_kubeconfig(folder, f"https://127.0.0.1:{_closed_port()}"))
        print(f"refused port: {took:.2f} s, exit {code}: {last}")
        silent = Silent()
        extra = ("--request-timeout", SILENT_TIMEOUT) if flag else ()
        took, code, last = _cli(_kubeconfig(folder, f"http://127.0.0.1:{silent.port}"), *extra)
        how = f"--request-timeout {SILENT_TIMEOUT}" if flag else "no --request-timeout flag"
        print(
            f"silent server ({how}): {took:.2f} s, exit {code}, "
            f"{len(silent.accepted)} connection(s) accepted: {last}"
        )
        silent.sock.close()


def expiring_watch(shared: Path) -> None:
    spec = structure(
        {
            "name": "demo",
            "image": "python:3.11-slim",
            "command": ["python", "train.py"],
        }
    )
    with PortCluster(shared) as c:  # the job never moves
        session = c.session()
        ref = lifecycle.submit(session, spec, "trainjob/v2.3", namespace=NAMESPACE, environ={}).ref
        told: list[str] = []
        session = lifecycle.Session(
            c.fake,
            c.clock,
            jitter=fixed_jitter,
            retry_for=60.0,
            on_retry=lambda what, e: told.append(str(e)),
        )
        c.faults.add("watch", "TrainJob", status=410, times=10**9)
        c.calls.clear()
        c.calls.listeners.append(lambda _: c.clock.advance(LATENCY))
        start = c.clock.monotonic()
        with contextlib.suppress(lifecycle.TimedOut):
            lifecycle.wait(session, ref, "done", timeout=FAKE_MINUTES * 60)
        took = c.clock.monotonic() - start
        ops = collections.Counter(call.method for call in c.calls)
        detail = ", ".join(f"{n} {op}" for op, n in ops.most_common())
        print(
            f"wait, every watch answered 410, {took:.0f} s of fake time: {len(c.calls)} requests "
            f"({len(c.calls) / took:.1f}/s: {detail}); said {len(told)} time(s)"
            + (f": {told[0]}" if told else "")
        )


def main() -> None:
    time_to_fail()
    expiring_watch(schema_check.require_shared())


if __name__ == "__main__":
    main()

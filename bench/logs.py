"""A pod's log through the real adapter (``KubeCluster.pod_log``): one line of 32 and 64 MB
with no newline (a tqdm progress bar: ``\\r`` and a redrawing, again and again) and 1 GB of
ordinary 100-byte lines. Wall time, lines, and the client process's peak RSS.

    python bench/logs.py [MB of ordinary lines]      # default 1024

The log comes from a small HTTP server in its own process that makes it up as it sends it (a
chunked answer, 64 KiB at a time), so nothing of it is counted on the client's side; each case
is read by a client process of its own, so that its peak RSS is its own (next to the RSS it had
before reading).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

MB = 1_000_000
CHUNK = 64 * 1024
DRAWING = (
    b"\r 42%|####################                            | 4200/10000 [01:02<01:26, 67.1it/s]"
)
LINE = b"step 4200 loss 0.4213 lr 3.0e-04 grad_norm 1.02 tokens/s 51234 mem 71.3GiB" + b" " * 24


def _body(case: str, size: int) -> bytes:
    """64 KiB of the log: the progress bar's drawings, or ordinary lines."""
    unit = DRAWING if case == "line" else LINE[:99] + b"\n"
    return unit * (CHUNK // len(unit))


class _Log(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        case, size = urlsplit(self.path).path.split("/")[-2].split("-")
        total, body = int(size) * MB, _body(case, int(size))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        while sent < total:
            part = body  # whole drawings or lines: the last chunk may go past ``total``
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            sent += len(part)
        end = b"\n" if case == "line" else b""
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end) if end else b"0\r\n\r\n")

    def log_message(self, *args: object) -> None:
        pass


def serve() -> None:
    """The log server, until stdin closes: prints its URL."""
    import threading

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Log)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB -> MiB


def client(kubeconfig: str, case: str, size: int) -> None:
    """Read one log whole; print what it took as JSON."""
    from kfcompile_kube import KubeCluster, connect

    cluster = KubeCluster(connect(kubeconfig).api_client, request_timeout=600)
    before = _rss()
    start = time.perf_counter()
    lines = longest = 0
    for line in cluster.pod_log("bench", f"{case}-{size}"):
        lines += 1
        longest = max(longest, len(line))
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "lines": lines, "longest": longest, "rss": before,
                      "peak": _rss()}))  # fmt: skip


def main(ordinary_mb: int) -> None:
    from fakekube.unreachable import kubeconfig

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        url = server.stdout.readline().decode().strip()
        with tempfile.TemporaryDirectory() as tmp:
            kc = str(kubeconfig(Path(tmp) / "kubeconfig", url))
            cases = [
                ("line", 32),
                ("line", 64),
                ("lines", ordinary_mb // 2),
                ("lines", ordinary_mb),
            ]
            for case, size in cases:
                out = subprocess.run(
                    [sys.executable, __file__, "--client", kc, case, str(size)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                got = json.loads(out)
                what = "one line, no newline" if case == "line" else "100-byte lines"
                print(
                    f"{size:>5} MB {what:<22} {got['seconds']:7.2f} s "
                    f"{size / got['seconds']:7.1f} MB/s  {got['lines']:>9} lines "
                    f"(longest {got['longest']} chars)  peak RSS {got['peak']:.0f} MiB "
                    f"(before reading: {got['rss']:.0f} MiB)",
                    flush=True,
                )
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve()
    elif sys.argv[1:2] == ["--client"]:
        client(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)

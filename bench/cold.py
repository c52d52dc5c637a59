"""What a cold command costs: `kfcompile status` and `kfcompile list` against the local API server
(tests/fakekube), and `kfcompile render`, each beside kubectl doing the same where kubectl is
installed, and beside `python -c pass`.

    [KUBECTL=path] python bench/cold.py [RUNS] [--no-callgrind]

Each row: the API requests one run makes (counted at the server), and the median wall and CPU
time (user + system of the child) of RUNS new processes after one warm-up, so both tools find
their discovery cache on disk as a second command does (kubectl's in a `--cache-dir` of its own).
kubectl sends a bearer token only over TLS (client-go's clientcmd sets credentials for TLS
connections alone), so both reach the server through a TLS front in this process (the
self-signed certificate of tests/fakekube/tls, named as the kubeconfig's CA): same hops, same
handshakes. Cluster commands run as `python -m kfcompile` (the `kfcompile` command's entry
point, `kfcompile.cli.run`). The render row renders examples/llama-4x8-efa.yaml; kubectl's runs
`kubectl create --dry-run=client -o yaml -f` on that output (it reads the API's discovery, from
its cache, to know the kinds; `--validate=false`, as the local server serves no OpenAPI document
and render checks the objects itself). `kubectl` is $KUBECTL, else whichever is first on PATH
(a Google Cloud SDK install's is a dispatcher, a kubectl of its own that can run a versioned one,
such as `kubectl.1.32` beside it).

Then, where valgrind is installed, the instructions a cold run of each executes (callgrind,
``--trace-children=yes``: every process the command starts, each named by its command line), the
median of five runs, and each kfcompile row's ratio to the kubectl row after it. Instructions
are what time would be on an idle machine, and they change little from run to run (kubectl's by
a few percent, Python's by less than one), so they show what the times of a shared machine hide.
Where kubectl starts another process (a dispatcher running a versioned kubectl), each is shown
and the ratio is to the last, the kubectl that ran the command. ``--no-callgrind`` skips them.

Needs ../shared/crds (the reference CRDs), as the tests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import schema_check  # noqa: E402
from cli_startup import ENV, FULL, measure  # noqa: E402
from fakekube.cluster import NAMESPACE, LocalCluster  # noqa: E402

from kfcompile import lifecycle, structure  # noqa: E402

TLS = ROOT / "tests" / "fakekube" / "tls"
CERT, KEY = TLS / "untrusted-server.crt", TLS / "untrusted-server.key"


@contextlib.contextmanager
def tls_front(target: str) -> Iterator[str]:
    """An https:// address whose connections are passed on, bytes as they are, to ``target``
    (``http://host:port``)."""
    host, port = target.removeprefix("http://").rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT, KEY)
    loop = asyncio.new_event_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0, ssl=context))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def tls_kubeconfig(path: Path, url: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "fake", "cluster": {"server": url, "certificate-authority": str(CERT)}}
        ],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [
            {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": NAMESPACE}}
        ],
        "current-context": "fake",
    }
    path.write_text(json.dumps(config))
    return path


def _submit(local: LocalCluster) -> None:
    """A healthy 4-node TrainJob ``bench`` (its pods running)."""
    spec = structure(
        {"name": "bench", "image": "python:3.11-slim", "command": ["true"], "num_nodes": 4}
    )
    lifecycle.submit(local.session(), spec, "trainjob/v2.3", namespace=NAMESPACE, environ={})
    local.clock.advance(1.0)


def _row(
    label: str, argv: list[str], runs: int, local: LocalCluster | None, env: dict[str, str]
) -> None:
    wall, cpu = measure(argv, runs, env)
    asked = "-"
    if local is not None:
        local.kube.requests.clear()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
        asked = str(len(local.kube.requests))
    print(f"  {label:<56} {asked:>8} {wall:7.1f} ms {cpu:7.1f} ms")


CALLGRIND_RUNS = 5  # the median: kubectl's count varies by a few percent (Go's scheduler, GC)
_HEADER = {"pid:", "cmd:", "summ"}  # the lines of a callgrind file read: pid, cmd, summary


def instructions(argv: list[str], env: dict[str, str], tmp: str) -> list[tuple[str, int]]:
    """(command line, instructions) of every process one run of ``argv`` starts, in start
    order, counted by callgrind."""
    out = tempfile.mkdtemp(dir=tmp)
    callgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes"]
    subprocess.run(
        [*callgrind, f"--callgrind-out-file={out}/%p", *argv],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        # Go's preemption signals trip callgrind (threads.c: vgCallgrind_post_signal).
        env={**env, "GODEBUG": "asyncpreemptoff=1"},
    )
    found = []
    for path in Path(out).iterdir():
        fields = dict(
            line.split(":", 1) for line in path.read_text().splitlines() if line[:4] in _HEADER
        )
        found.append((int(fields["pid"]), fields["cmd"].strip(), int(fields["summary"])))
    return [(command, count) for _, command, count in sorted(found)]


def _instruction_rows(rows: Sequence[tuple[str, list[str]]], env: dict[str, str], tmp: str) -> None:
    """Each row's instructions; a kfcompile row's ratio to the kubectl row after it."""
    counted: list[tuple[str, list[tuple[str, int]]]] = []
    for label, argv in rows:
        if argv[0] != "kubectl":  # found on PATH
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)  # warm
            runs = [instructions(argv, env, tmp) for _ in range(CALLGRIND_RUNS)]
            counted.append((label, sorted(runs, key=lambda r: r[-1][1])[CALLGRIND_RUNS // 2]))
    title = f"median of {CALLGRIND_RUNS} cold runs, by callgrind"
    print(f"\n{title:<66}instructions   ratio to kubectl")
    for (label, processes), after in zip(counted, [*counted[1:], None], strict=True):
        # The last process started is the one measured: kfcompile, or the kubectl a
        # dispatcher runs.
        count = processes[-1][1]
        ratio = ""
        if label.startswith("kfcompile") and after and after[0].startswith("kubectl"):
            ratio = f"{count / after[1][-1][1]:.2f}x"
        print(f"  {label:<56} {count / 1e6:9.1f} M   {ratio}")
        if len(processes) > 1:
            ran = ", ".join(f"{Path(c.split()[0]).name} {n / 1e6:.1f} M" for c, n in processes)
            print(f"    (the binary measured is the last of: {ran})")


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--no-callgrind"]
    runs = int(args[0]) if args else 15
    callgrind = "--no-callgrind" not in sys.argv and shutil.which("valgrind") is not None
    kubectl = os.environ.get("KUBECTL") or shutil.which("kubectl")
    kfcompile = [sys.executable, "-m", "kfcompile"]
    with (
        LocalCluster(schema_check.require_shared(), scenario="hang", auto=False) as local,
        tls_front(local.kube.url) as url,
        tempfile.TemporaryDirectory() as tmp,
    ):
        _submit(local)
        config = str(tls_kubeconfig(Path(tmp) / "kubeconfig", url))
        env = {**ENV, "KFCOMPILE_CACHE_DIR": str(Path(tmp) / "kfcompile-cache")}
        kube = [kubectl or "kubectl", "--kubeconfig", config, "--cache-dir", f"{tmp}/kube-cache"]
        rendered = Path(tmp) / "rendered.yaml"
        render = [*kfcompile, "render", str(FULL)]
        rendered.write_text(
            subprocess.run(render, check=True, capture_output=True, text=True).stdout
        )
        create = ["create", "--dry-run=client", "--validate=false", "-o", "yaml", "-f"]
        rows = [
            ("kfcompile status bench", [*kfcompile, "status", "bench", "--kubeconfig", config]),
            (
                "kubectl get trainjob bench -o yaml",
                [*kube, "get", "trainjob", "bench", "-o", "yaml"],
            ),
            ("kfcompile list", [*kfcompile, "list", "--kubeconfig", config]),
            ("kubectl get trainjobs", [*kube, "get", "trainjobs"]),
            (f"kfcompile render {FULL.name}", render),
            (
                "kubectl create --dry-run=client -o yaml -f <its output>",
                [*kube, *create, str(rendered)],
            ),
        ]
        print(f"median of {runs} cold runs{'':>42}requests     wall        cpu")
        _row("python -c pass", [sys.executable, "-c", "pass"], runs, None, env)
        for label, argv in rows:
            if argv[0] == "kubectl":  # not found on PATH
                print(f"  {label:<56} skipped: kubectl is not installed")
            else:
                _row(label, argv, runs, None if argv is render else local, env)
        if callgrind:
            _instruction_rows([("python -c pass", [sys.executable, "-c", "pass"]), *rows], env, tmp)


if __name__ == "__main__":
    main()

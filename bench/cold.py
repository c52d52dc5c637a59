"""What a cold command costs: `kfcompile status` and `kfcompile list` against the local API server
(tests/fakekube), and `kfcompile render`, each beside kubectl doing the same where kubectl is
installed, and beside `python -c pass`.

    python bench/cold.py [RUNS]

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
and render checks the objects itself). `kubectl` is whichever is first on PATH (a Google Cloud SDK
install's is a dispatcher that runs a versioned kubectl, about twice the CPU of that binary).

Needs ../shared/crds (the reference CRDs), as the tests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
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
    local.advance(1.0)


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


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    kubectl = shutil.which("kubectl")
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


if __name__ == "__main__":
    main()

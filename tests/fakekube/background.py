"""Where the fake API server runs: an aiohttp app on 127.0.0.1 (an ephemeral port) served by an
event loop on a thread of its own, and the kubeconfig a client reaches it with."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterable
from pathlib import Path

from aiohttp import web


class Background:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def start(self, app: web.Application) -> str:
        """Serve ``app``; its URL."""
        self._loop = loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="fakekube", daemon=True)
        self._thread.start()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=0.2)  # fmt: skip
        asyncio.run_coroutine_threadsafe(self._serve(self._runner), loop).result(10)
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    @staticmethod
    async def _serve(runner: web.AppRunner) -> None:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()

    def stop(self, streams: Iterable[asyncio.Event]) -> None:
        """Stop serving, first ending open ``streams`` (setting their events)."""
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None or runner is None:
            return

        async def shutdown() -> None:
            for event in list(streams):
                event.set()
            await runner.cleanup()
            # A handler still hanging (a fault) is cancelled, not left to die with the loop.
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
            self._loop = self._thread = None


def write_kubeconfig(
    path: Path, url: str, *, token: str, namespace: str = "default", context: str = "fake",
    ca: Path | None = None,
) -> Path:  # fmt: skip
    """Write to ``path`` a kubeconfig for the server at ``url`` with a bearer ``token`` (and,
    for https, the CA ``ca``)."""
    cluster: dict[str, str] = {"server": url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    context_of = {"cluster": context, "user": context, "namespace": namespace}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
              "clusters": [{"name": context, "cluster": cluster}],
              "users": [{"name": context, "user": {"token": token}}],
              "contexts": [{"name": context, "context": context_of}]}  # fmt: skip
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path

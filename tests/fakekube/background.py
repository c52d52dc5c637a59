"""Where the fake API server runs: an aiohttp app on 127.0.0.1 (an ephemeral port) served by an
event loop on a thread of its own, and the kubeconfig a client reaches it with."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

__all__ = ["Background", "write_kubeconfig"]


class Background:
    def __init__(self) -> None:
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def start(self, app: web.Application) -> str:
        """Serve ``app``; its URL."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="fakekube", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(app), loop).result(10)
        return self.url

    async def _serve(self, app: web.Application) -> None:
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=0.2
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    def stop(self, first: Callable[[], None] = lambda: None) -> None:
        """Stop serving; ``first`` runs in the loop before (to end open streams)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            first()
            if self._runner is not None:
                await self._runner.cleanup()
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
    path: Path,
    url: str,
    *,
    token: str,
    namespace: str = "default",
    context: str = "fake",
    ca: Path | None = None,
) -> Path:
    """A kubeconfig for the server at ``url`` with a bearer ``token`` (and, for https, the CA
    ``ca``), written to ``path``."""
    cluster: dict[str, str] = {"server": url}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path

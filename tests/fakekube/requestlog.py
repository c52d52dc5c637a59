"""The record of every request the fake API server saw, for tests to count and inspect; the
in-memory fake behind the port records its calls here too, each as its method name (``get``,
``pod_log``...), the path ``Kind/name`` and its keyword arguments as ``query``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .faults import Fault

__all__ = ["RECORD", "RequestLog", "RequestRecord"]


@dataclass
class RequestRecord:
    """One HTTP request as the server saw it. ``status`` is 0 until answered (or if dropped)."""

    method: str
    path: str
    query: dict[str, Any]  # the last value of each parameter (a port call: its arguments)
    watch: bool
    status: int = 0
    verb: str = ""  # get list watch create patch delete log exec discovery
    fault: Fault | None = None
    time: float = field(default_factory=time.monotonic)
    # A port call's object (a pod's log and exec: v1 Pod), its namespace and name.
    api_version: str = ""
    kind: str = ""
    namespace: str | None = None
    name: str | None = None


RECORD = web.RequestKey("record", RequestRecord)


class RequestLog(list[RequestRecord]):
    """Every request of one FakeKube, oldest first (``clear()`` to start over); each of
    ``listeners`` is told of each request as it arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[Callable[[RequestRecord], None]] = []

    def append(self, record: RequestRecord) -> None:
        super().append(record)
        for listener in self.listeners:
            listener(record)

    def matching(self, method: str | None = None, path_contains: str | None = None, *,
                 verb: str | None = None, watch: bool | None = None,
    ) -> list[RequestRecord]:  # fmt: skip
        return [r for r in list(self)
                if (method is None or r.method.upper() == method.upper())
                and (path_contains is None or path_contains in r.path)
                and verb in (None, r.verb) and watch in (None, r.watch)]  # fmt: skip

    def count(  # type: ignore[override]
        self, method: str | None = None, path_contains: str | None = None, *,
        verb: str | None = None, watch: bool | None = None,
    ) -> int:  # fmt: skip
        """How many requests match (every argument optional)."""
        return len(self.matching(method, path_contains, verb=verb, watch=watch))

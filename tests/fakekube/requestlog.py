"""The record of every request the fake API server saw, for tests to count and inspect."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from .faults import Fault

__all__ = ["RECORD", "RequestLog", "RequestRecord"]


@dataclass
class RequestRecord:
    """One HTTP request as the server saw it. ``status`` is 0 until answered (or if dropped)."""

    method: str
    path: str
    query: dict[str, str]  # the last value of each parameter
    watch: bool
    status: int = 0
    verb: str = ""  # get list watch create patch delete log exec discovery
    fault: Fault | None = None
    time: float = field(default_factory=time.monotonic)


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

    def matching(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        *,
        verb: str | None = None,
        watch: bool | None = None,
    ) -> list[RequestRecord]:
        return [
            r
            for r in list(self)
            if (method is None or r.method == method.upper())
            and (path_contains is None or path_contains in r.path)
            and (verb is None or r.verb == verb)
            and (watch is None or r.watch == watch)
        ]

    def count(  # type: ignore[override]
        self,
        method: str | None = None,
        path_contains: str | None = None,
        *,
        verb: str | None = None,
        watch: bool | None = None,
    ) -> int:
        """How many requests match (every argument optional)."""
        return len(self.matching(method, path_contains, verb=verb, watch=watch))

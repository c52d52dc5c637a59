"""Trouble to inject at the ``Cluster`` port of the in-memory cluster, and the record of calls.

``faults.add(...)`` queues a fault; each port call takes the oldest queued fault that matches it
(operation, kind, name) and has uses left. A fault can answer an error (the port's ``ApiError``
for an HTTP status: 409, 410, 429, 500, 503...), ``drop`` the call (a reset connection: nothing
happened), lose the answer of a call that did happen (``lost``: a read timeout), cut a watch, a
log or an exec's output after ``drop_after`` events / lines / chunks, or answer an exec with
``exec_stdout`` instead of running its command.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kfcompile.lifecycle.ports import (
    ApiError,
    Transient,
    error_class,
)

from .faults import error_status, retry_after_of

__all__ = ["Call", "CallLog", "PortFault", "PortFaults", "port_error"]

OPERATIONS = ("served", "get", "create", "patch", "delete", "list", "watch", "pod_log", "exec")


def port_error(code: int, reason: str, message: str, retry_after: float | None = None) -> ApiError:
    """The ``ApiError`` the port raises for a ``Status`` with this code (and ``Retry-After``)."""
    cls = error_class(code)
    return cls(code, reason, message, retry_after=retry_after)


@dataclass
class PortFault:
    """One queued fault; ``remaining`` uses left, ``fired`` uses so far."""

    op: str | None
    kind: str | None
    name: str | None
    status: int | None = None
    drop: bool = False
    lost: bool = False
    drop_after: int | None = None
    exec_stdout: bytes | Iterable[bytes] | None = None
    message: str | None = None
    remaining: int = 1
    fired: int = 0
    retry_after: int | None = None  # what a 429 (1 by default) or a 503 asks to wait
    refused: bool = False  # nothing listens: as a refused connection, before any answer

    def matches(self, op: str, kind: str, name: str | None) -> bool:
        return (
            self.remaining > 0
            and self.op in (None, op)
            and self.kind in (None, kind)
            and self.name in (None, name)
        )

    def error(self) -> ApiError:
        """What the call raises at once: the status's error, a refused or a reset connection."""
        if self.refused:
            return Transient(0, "ConnectionRefused", "connection refused by fakekube (injected)")
        if self.status is None:
            return Transient(0, "ConnectionError", "connection reset by peer (injected)")
        wait = retry_after_of(self.status, self.retry_after)
        body = error_status(self.status, self.message, wait)
        return port_error(self.status, body["reason"], body["message"], wait)


class PortFaults:
    """The queue of injected faults of one in-memory cluster (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[PortFault] = []
        self.fired: list[tuple[PortFault, str, str, str | None]] = []

    def add(
        self,
        op: str | None = None,
        kind: str | None = None,
        name: str | None = None,
        *,
        status: int | None = None,
        drop: bool = False,
        lost: bool = False,
        drop_after: int | None = None,
        exec_stdout: bytes | Iterable[bytes] | None = None,
        message: str | None = None,
        times: int = 1,
        retry_after: int | None = None,
        refused: bool = False,
    ) -> PortFault:
        """Queue a fault for the next ``times`` calls of ``op`` (a ``Cluster`` method name) on
        ``kind`` (a pod's log and exec: ``Pod``) named ``name``; ``None`` matches any.
        ``retry_after``: the seconds a 429 or 503 asks to wait; ``refused``: the call fails as
        when nothing listens on the server's port."""
        if op is not None and op not in OPERATIONS:
            raise ValueError(f"unknown port operation {op!r}: one of {', '.join(OPERATIONS)}")
        if (
            status is None
            and not (drop or lost or refused)
            and drop_after is None
            and exec_stdout is None
        ):
            raise ValueError("a fault needs status, drop, lost, refused, drop_after or exec_stdout")
        if times < 1:
            raise ValueError("times must be at least 1")
        fault = PortFault(
            op,
            kind,
            name,
            status,
            drop,
            lost,
            drop_after,
            exec_stdout,
            message,
            times,
            retry_after=retry_after,
            refused=refused,
        )
        with self._lock:
            self._queue.append(fault)
        return fault

    def take(self, op: str, kind: str, name: str | None) -> PortFault | None:
        """The oldest matching fault, consumed once (None when none matches)."""
        with self._lock:
            for fault in self._queue:
                if fault.matches(op, kind, name):
                    fault.remaining -= 1
                    fault.fired += 1
                    self.fired.append((fault, op, kind, name))
                    return fault
        return None

    @property
    def pending(self) -> list[PortFault]:
        with self._lock:
            return [f for f in self._queue if f.remaining > 0]


@dataclass(frozen=True)
class Call:
    """One call of the port, as the in-memory cluster saw it."""

    op: str
    kind: str
    namespace: str | None
    name: str | None
    args: dict[str, Any] = field(default_factory=dict)  # the keyword arguments that shape it
    fault: PortFault | None = None
    api_version: str = ""  # of the kind (a pod's log and exec: v1)


class CallLog(list[Call]):
    """Every call of one in-memory cluster, oldest first (``clear()`` to start over); each
    of ``listeners`` is told of each call as it is appended."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[Callable[[Call], None]] = []

    def append(self, call: Call) -> None:
        super().append(call)
        for listener in self.listeners:
            listener(call)

    def matching(
        self, op: str | None = None, kind: str | None = None, name: str | None = None
    ) -> list[Call]:
        return [
            c
            for c in list(self)
            if op in (None, c.op) and kind in (None, c.kind) and name in (None, c.name)
        ]

    def count(  # type: ignore[override]
        self, op: str | None = None, kind: str | None = None, name: str | None = None
    ) -> int:
        return len(self.matching(op, kind, name))

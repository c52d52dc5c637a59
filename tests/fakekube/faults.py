"""Trouble to inject into requests of the fake API server.

``faults.add(...)`` queues a fault; each request takes the oldest queued fault that matches it
(method, path, watch or not) and has uses left. A fault can answer an error ``Status`` (409, 410,
429 with ``Retry-After``, 500, 503 with one when asked...), ``hang`` before answering, ``drop``
the connection without an answer, or let a watch or log stream start and drop it after
``drop_after`` events / lines (an exec stream: after that many stdout frames). An exec can also
be answered with ``exec_stdout`` instead of running its command: a pod whose ``tar`` sends
hostile bytes. A 3xx fault with a ``location`` redirects the request elsewhere (to a
``fakekube.unreachable.Elsewhere``, which records whatever reaches it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

__all__ = ["Fault", "Faults", "Fired", "error_status"]

_REASONS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "forbidden: fakekube injected fault"),
    404: ("NotFound", "the server could not find the requested resource"),
    409: (
        "Conflict",
        "Operation cannot be fulfilled: the object has been modified; please apply your changes "
        "to the latest version and try again",
    ),
    410: ("Expired", "The resourceVersion for the provided watch is too old."),
    422: ("Invalid", "the object is invalid (fakekube injected fault)"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: fakekube injected fault"),
    502: ("InternalError", "Bad gateway (fakekube injected fault)"),
    503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within requested timeout"),
}


# Answers that may ask the client to come back later (``Retry-After``, ``retryAfterSeconds``).
RETRY_AFTER_CODES = (429, 503)


def retry_after_of(code: int, asked: int | None) -> int | None:
    """The seconds an error answer asks to wait: ``asked``, and 1 for a 429 by default (as the
    API server's max-in-flight limit answers); None for any other code unless asked."""
    if code not in RETRY_AFTER_CODES:
        return None
    return asked if asked is not None else (1 if code == 429 else None)


def error_status(code: int, message: str | None = None, retry_after: int | None = None) -> Any:
    """A realistic ``Status`` body for an HTTP error ``code`` (``retry_after``: its
    ``details.retryAfterSeconds``, for the codes that carry one)."""
    reason, default = _REASONS.get(code, ("InternalError", f"fakekube injected fault {code}"))
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or default,
        "reason": reason,
        "code": code,
    }
    if code in RETRY_AFTER_CODES and retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    elif code == 500:
        body["details"] = {"causes": [{"message": message or default}]}
    return body


@dataclass
class Fault:
    """One queued fault; ``remaining`` uses left, ``fired`` uses so far."""

    method: str | None
    path: str | re.Pattern[str] | None
    watch: bool | None
    status: int | None
    hang: float | None
    drop: bool
    drop_after: int | None
    retry_after: int | None
    message: str | None
    remaining: int
    fired: int = 0
    exec_stdout: bytes | Iterable[bytes] | None = None
    location: str | None = None

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.remaining <= 0:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if self.watch is not None and self.watch != watch:
            return False
        if isinstance(self.path, re.Pattern):
            return self.path.search(path) is not None
        return self.path is None or self.path in path


@dataclass(frozen=True)
class Fired:
    """A fault that hit a request."""

    fault: Fault
    method: str
    path: str


class Faults:
    """The queue of injected faults of one FakeKube (thread-safe)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._queue: list[Fault] = []
        self.fired: list[Fired] = []

    def add(
        self,
        method: str | None = None,
        path: str | re.Pattern[str] | None = None,
        *,
        status: int | None = None,
        times: int = 1,
        hang: float | None = None,
        drop: bool = False,
        drop_after: int | None = None,
        watch: bool | None = None,
        retry_after: int | None = None,
        message: str | None = None,
        exec_stdout: bytes | Iterable[bytes] | None = None,
        location: str | None = None,
    ) -> Fault:
        """Queue a fault for the next ``times`` requests that match.

        ``path``: a substring of the request path, or a compiled regex searched in it.
        ``watch``: only watch requests (True) or only others (False).
        ``status``: answer this HTTP error with a realistic Status (after ``hang`` seconds);
        ``retry_after``: the seconds a 429 (1 by default) or 503 (none by default) asks for.
        ``hang`` alone: answer normally, late. ``drop``: close the connection unanswered.
        ``drop_after``: for watch and log streams, close the connection after that many
        events / lines (0: right after the headers); for an exec, after that many stdout frames.
        ``exec_stdout``: an exec sends this (bytes, or chunks drawn as they are sent) as its
        stdout and exits 0, without running its command.
        ``location``: with a 3xx ``status``, the URL (``scheme://host:port``) the answer's
        ``Location`` sends the request to, the request's path and query appended.
        """
        if (status, hang, drop_after, exec_stdout) == (None, None, None, None) and not drop:
            raise ValueError("a fault needs status, hang, drop, drop_after or exec_stdout")
        if times < 1:
            raise ValueError("times must be at least 1")
        if location is not None and not (status is not None and 300 <= status < 400):
            raise ValueError("a location needs a 3xx status")
        fault = Fault(
            method,
            path,
            watch,
            status,
            hang,
            drop,
            drop_after,
            retry_after,
            message,
            times,
            exec_stdout=exec_stdout,
            location=location,
        )
        with self._lock:
            self._queue.append(fault)
        return fault

    def clear(self) -> None:
        """Forget queued faults and the record of fired ones."""
        with self._lock:
            self._queue.clear()
            self.fired.clear()

    @property
    def pending(self) -> list[Fault]:
        """Queued faults with uses left."""
        with self._lock:
            return [f for f in self._queue if f.remaining > 0]

    def take(self, method: str, path: str, watch: bool) -> Fault | None:
        """The oldest matching fault, consumed once (None when none matches)."""
        with self._lock:
            for fault in self._queue:
                if fault.matches(method, path, watch):
                    fault.remaining -= 1
                    fault.fired += 1
                    self.fired.append(Fired(fault, method, path))
                    return fault
        return None

    def compact(self) -> None:
        """Compact the store's watch history: older resourceVersions now give 410."""
        self._store.compact()

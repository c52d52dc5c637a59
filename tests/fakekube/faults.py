"""Trouble to inject into requests of the fake API server, or calls of the port fake.

``faults.add(...)`` queues a fault; each request takes the oldest queued fault that matches it
(method, path, watch or not) with uses left. A fault answers an error ``Status`` (429 with
``Retry-After``...), ``hang``s, ``drop``s the connection, cuts a stream after ``drop_after``
events / lines / exec frames, answers an exec with ``exec_stdout`` instead of running it, or
answers a ``Body`` of the test's own (an auth proxy's page, a huge body, a drip); a 3xx with a
``location`` redirects (to a ``fakekube.unreachable.Elsewhere``). The port fake's queue
(``Faults(port=True)``) matches a call's method name and ``Kind/name``
(``faults.add("delete", "TrainJob/demo", lost=True)``) and has faults of its own: ``lost`` (the
call done, its answer never came) and ``refused`` (nothing listens).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kfcompile.lifecycle.ports import ApiError, Transient, error_class

if TYPE_CHECKING:
    from .port import Objects

__all__ = ["PORT_METHODS", "Body", "Fault", "Faults", "error_status", "port_error"]

# The methods of the ``Cluster`` port, as a port call's fault and record name them.
PORT_METHODS = ("served", "get", "create", "patch", "delete", "list", "watch", "pod_log", "exec")

_REASONS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "forbidden: fakekube injected fault"),
    404: ("NotFound", "the server could not find the requested resource"),
    409: ("Conflict", "Operation cannot be fulfilled: the object has been modified; please "
          "apply your changes to the latest version and try again"),
    410: ("Expired", "The resourceVersion for the provided watch is too old."),
    422: ("Invalid", "the object is invalid (fakekube injected fault)"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: fakekube injected fault"),
    502: ("InternalError", "Bad gateway (fakekube injected fault)"),
    503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within requested timeout"),
}  # fmt: skip


def retry_after_of(code: int, asked: int | None) -> int | None:
    """The seconds an error answer asks to wait (429 and 503 only): ``asked``, and 1 for a 429
    by default (as the API server's max-in-flight limit answers)."""
    if code not in (429, 503):
        return None
    return asked if asked is not None else (1 if code == 429 else None)


def error_status(code: int, message: str | None = None, retry_after: int | None = None) -> Any:
    """A realistic ``Status`` body for an HTTP error ``code`` (``retry_after``: its
    ``details.retryAfterSeconds``, for the codes that carry one)."""
    reason, default = _REASONS.get(code, ("InternalError", f"fakekube injected fault {code}"))
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message or default, "reason": reason,
                            "code": code}  # fmt: skip
    if code in (429, 503) and retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    elif code == 500:
        body["details"] = {"causes": [{"message": message or default}]}
    return body


def port_error(code: int, reason: str, message: str, retry_after: float | None = None) -> ApiError:
    """The ``ApiError`` the port raises for a ``Status`` with this code (and ``Retry-After``)."""
    return error_class(code)(code, reason, message, retry_after=retry_after)


@dataclass(frozen=True)
class Body:
    """An answer of the test's own, 200 unless ``status``: ``chunks`` (bytes, or pieces drawn
    only as they are sent, so a huge body is never held), with a ``Content-Length`` of
    ``length`` (None: chunked transfer encoding; default: ``len(chunks)`` for bytes), ``drip``
    seconds before each piece, and a ``Content-Encoding`` when ``encoding`` is given."""

    chunks: bytes | Iterable[bytes]
    content_type: str = "application/json"
    length: int | None = -1  # -1: the length of ``chunks`` when it is bytes, else chunked
    drip: float = 0.0
    encoding: str | None = None
    status: int = 200


@dataclass
class Fault:
    """One queued fault (``Faults.add``'s arguments); ``remaining`` uses left, ``fired`` so far."""

    method: str | None
    path: str | re.Pattern[str] | None  # a substring of the path, or a regex searched in it
    watch: bool | None  # only watch requests (True) or only others (False)
    status: int | None  # this error's realistic Status (after ``hang``)
    hang: float | None  # seconds before answering (alone: the real answer, late)
    drop: bool  # close the connection unanswered
    drop_after: int | None  # a stream's events / lines / exec stdout frames before its cut
    retry_after: int | None  # what a 429 (1 by default) or 503 (none) asks for
    message: str | None
    remaining: int
    fired: int = 0
    exec_stdout: bytes | Iterable[bytes] | None = None  # sent instead of running; exits 0
    answer: Body | None = None  # instead of what the server would have said
    location: str | None = None  # a 3xx's target (scheme://host:port), path and query appended
    lost: bool = False  # the port's: done, its answer lost
    refused: bool = False  # the port's: a refused connection, before any answer

    def port_error(self) -> ApiError | None:
        """What a port call this fault hits raises at once (None: it goes on): the status's
        error, or a refused or reset connection."""
        if self.refused:
            return Transient(0, "ConnectionRefused", "connection refused by fakekube (injected)")
        if self.drop:
            return Transient(0, "ConnectionError", "connection reset by peer (injected)")
        if self.status is None:
            return None
        wait = retry_after_of(self.status, self.retry_after)
        body = error_status(self.status, self.message, wait)
        return port_error(self.status, body["reason"], body["message"], wait)

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.remaining <= 0 or self.watch not in (None, watch):
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        if isinstance(self.path, re.Pattern):
            return self.path.search(path) is not None
        return self.path is None or self.path in path


class Faults:
    """The queue of injected faults of one FakeKube, or of one port fake (``port``);
    thread-safe. ``fired``: (fault, method, path) of each hit."""

    def __init__(self, store: Objects | None = None, *, port: bool = False) -> None:
        self._store = store
        self.port = port
        self._lock = threading.Lock()
        self._queue: list[Fault] = []
        self.fired: list[tuple[Fault, str, str]] = []

    def add(self, method: str | None = None, path: str | re.Pattern[str] | None = None, *,
            status: int | None = None, times: int = 1, hang: float | None = None,
            drop: bool = False, drop_after: int | None = None, watch: bool | None = None,
            retry_after: int | None = None, message: str | None = None,
            exec_stdout: bytes | Iterable[bytes] | None = None, answer: Body | None = None,
            location: str | None = None, lost: bool = False, refused: bool = False,
    ) -> Fault:  # fmt: skip
        """Queue a fault for the next ``times`` requests that match (the fields of ``Fault``;
        ``lost`` and ``refused`` are the port's only, ``hang``, ``answer``, ``location`` HTTP's)."""
        if (status, hang, drop_after, exec_stdout, answer) == (None,) * 5 and not (
            drop or lost or refused
        ):
            raise ValueError("a fault needs status, hang, drop, drop_after, exec_stdout or answer")
        wrong = (lost or refused) if not self.port else (hang, answer, location) != (None,) * 3
        if wrong:
            raise ValueError("lost and refused are the port's; hang, answer, location HTTP's")
        if self.port and method is not None and method not in PORT_METHODS:
            raise ValueError(f"unknown port method {method!r}: one of {', '.join(PORT_METHODS)}")
        if times < 1:
            raise ValueError("times must be at least 1")
        if location is not None and not (status is not None and 300 <= status < 400):
            raise ValueError("a location needs a 3xx status")
        fault = Fault(method, path, watch, status, hang, drop, drop_after, retry_after, message,
                      times, 0, exec_stdout, answer, location, lost, refused)  # fmt: skip
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
                    self.fired.append((fault, method, path))
                    return fault
        return None

    def compact(self) -> None:
        """Compact the store's watch history: older resourceVersions now give 410."""
        assert self._store is not None, "a port's faults: compact its store"
        self._store.compact()

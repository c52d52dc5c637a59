"""``FakeCluster``: the ``Cluster`` port over a ``Store`` on a ``FakeClock``, with what a test
needs around it: a script of changes at fake times (``at``), injected trouble (``faults``), the
record of every call (``calls``) and the answers of exec'd commands (``on_exec``)."""

from __future__ import annotations

import builtins
import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from typing import Any, Final, Protocol, TypeVar

from attrs import define, field, frozen

from kfcompile.lifecycle.ports import (
    ApiError,
    ExecOutput,
    ExecResult,
    NotFound,
    Obj,
    Page,
    Ref,
    Transient,
    WatchEvent,
    error_class,
)
from kfcompile.lifecycle.session import Session
from kfcompile.testing.clock import FakeClock, fixed_jitter
from kfcompile.testing.store import ResourceKind, Store, error, rfc3339, selector

__all__ = ["STATUSES", "Call", "Calls", "Exec", "ExecAnswer", "FakeCluster", "FakeConnection",
           "Fault", "Faults", "check_exec"]  # fmt: skip

T = TypeVar("T")
# An error Status's reason and words for each HTTP code, as the API server says them.
STATUSES: Final[dict[int, tuple[str, str]]] = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "Unauthorized"),
    403: ("Forbidden", "forbidden: injected fault"),
    404: ("NotFound", "the server could not find the requested resource"),
    409: ("Conflict", "Operation cannot be fulfilled: the object has been modified; please "
          "apply your changes to the latest version and try again"),
    410: ("Expired", "The resourceVersion for the provided watch is too old."),
    422: ("Invalid", "the object is invalid (injected fault)"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    502: ("InternalError", "Bad gateway (injected fault)"),
    503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within requested timeout"),
}  # fmt: skip


@define
class Call:
    """One call of the port: its method (``get``, ``pod_log``...), what it named, its other
    arguments (``query``) and the fault it met."""

    method: str
    api_version: str
    kind: str
    namespace: str | None
    name: str | None
    query: dict[str, Any] = field(factory=dict)
    fault: Fault | None = None

    @property
    def path(self) -> str:
        """``Kind/name``: what ``Faults.add`` and ``Calls.count`` match a call by."""
        return f"{self.kind}/{self.name or ''}"


class Named(Protocol):
    """What ``Faults`` and ``Calls`` match a call (or an HTTP request) by."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...


C = TypeVar("C", bound=Named)


class Calls(builtins.list[C]):
    """Every call of one fake, oldest first; each of ``listeners`` is told of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.listeners: builtins.list[Callable[[C], object]] = []

    def append(self, call: C) -> None:
        super().append(call)
        for listener in self.listeners:
            listener(call)

    def matching(self, method: str | None = None, path: str = "",
                 **fields: Any) -> builtins.list[C]:  # fmt: skip
        """The calls of ``method`` (None: any) whose ``path`` (``Kind/name``) holds ``path``,
        and whose ``fields`` are those given (None: any)."""
        return [c for c in builtins.list(self) if method in (None, c.method) and path in c.path
                and all(v in (None, getattr(c, k)) for k, v in fields.items())]  # fmt: skip

    def count(self, method: str | None = None, path: str = "",  # type: ignore[override]
              **fields: Any) -> int:  # fmt: skip
        """How many calls match."""
        return len(self.matching(method, path, **fields))


@define
class Fault:
    """Trouble for the calls that match (``Faults.add``); ``remaining``: uses left."""

    method: str | None
    path: str | re.Pattern[str] | None  # in the call's ``Kind/name`` (a request's path)
    status: int | None = None  # refused with this HTTP status
    lost: bool = False  # done, its answer never came
    refused: bool = False  # nothing listens: no answer, nothing done
    drop: bool = False  # the connection reset before any answer
    drop_after: int | None = None  # a watch cut after so many events (over HTTP: any stream)
    retry_after: float | None = None  # what a 429 (1 by default) or a 503 asks to wait
    message: str | None = None  # instead of the status's usual words
    remaining: int = 1

    def matches(self, call: Named) -> bool:
        if self.remaining <= 0 or self.method not in (None, call.method):
            return False
        if isinstance(self.path, re.Pattern):
            return self.path.search(call.path) is not None
        return self.path is None or self.path in call.path

    def raised(self) -> ApiError | None:
        """What a call it hits raises before anything is done (None: the call goes on)."""
        if self.refused:
            return Transient(0, "ConnectionRefused", "connection refused (injected)")
        if self.drop:
            return Transient(0, "ConnectionError", "connection reset by peer (injected)")
        if self.status is None:
            return None
        reason, said = STATUSES.get(self.status, ("InternalError", "injected fault"))
        wait = self.retry_after or (1 if self.status == 429 else None)
        wait = wait if self.status in (429, 503) else None
        return error_class(self.status)(self.status, reason, self.message or said, retry_after=wait)


class Faults:
    """Queued trouble: each call takes the oldest matching fault with uses left (``fired``:
    each hit, with its call)."""

    kind: type[Fault] = Fault

    def __init__(self) -> None:
        self.queue: list[Fault] = []
        self.fired: list[tuple[Fault, Named]] = []
        self._lock = threading.Lock()

    def add(self, method: str | None = None, path: str | re.Pattern[str] | None = None, *,
            times: int = 1, **trouble: Any) -> Fault:  # fmt: skip
        """Trouble (the fields of ``Fault``) for the next ``times`` calls of ``method`` (a port
        method's name; None: any) whose ``Kind/name`` holds ``path`` (or a regex found in it)."""
        fault = self.kind(method, path, remaining=times, **trouble)
        with self._lock:
            self.queue.append(fault)
        return fault

    @property
    def pending(self) -> list[Fault]:
        """The faults with uses left."""
        return [f for f in self.queue if f.remaining > 0]

    def take(self, call: Named) -> Fault | None:
        """The oldest fault that matches ``call``, one use taken."""
        with self._lock:
            found = next((f for f in self.queue if f.matches(call)), None)
            if found is not None:
                found.remaining -= 1
                self.fired.append((found, call))
        return found

    def clear(self) -> None:
        with self._lock:
            self.queue.clear()
            self.fired.clear()


@frozen
class Exec:
    """A command exec'd in a pod, as the fake received it (``stdin``: all it was sent)."""

    namespace: str
    pod: str
    container: str
    command: tuple[str, ...]
    stdin: bytes


@frozen
class ExecAnswer:
    """What an exec'd command answers: its output (bytes, or chunks drawn as they are sent),
    its stderr and its exit code."""

    stdout: bytes | Iterable[bytes] = b""
    stderr: bytes = b""
    exit_code: int = 0


@define
class FakeConnection:
    """What ``FakeCluster.connect`` gives besides the session, as ``kfcompile_kube.session``
    gives a ``Connection``: the namespace to work in and the kubeconfig context."""

    namespace: str = "default"
    context: str | None = "fake"

    def close(self) -> None:
        """Nothing to close."""


class FakeCluster:
    """A cluster behind the ``Cluster`` port, in memory, on a fake clock (``clock``). Each call
    is recorded in ``calls``, may meet a queued fault (``faults``), and is refused as the API
    server refuses it; an exec'd command is answered by ``on_exec`` (by default: nothing, exit
    0) and recorded in ``execs``."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.store = Store(self.clock)
        self.faults = Faults()
        self.calls: Calls[Call] = Calls()
        self.execs: list[Exec] = []
        self.on_exec: Callable[[Exec], ExecAnswer] = lambda _: ExecAnswer()
        self._script: list[tuple[float, Callable[[], object]]] = []
        self._lock = threading.Lock()
        self.clock.on_tick(self._tick)

    def session(self, *, retry_for: float = 5.0) -> Session:
        """A lifecycle session on this cluster and its clock (a fixed jitter)."""
        return self.connect(retry_for=retry_for)[0]

    def connect(self, kubeconfig: str | None = None, context: str | None = None, *,
                retry_for: float = 60.0, on_retry: Callable[[str, ApiError], None] | None = None,
                **options: object) -> tuple[Session, FakeConnection]:  # fmt: skip
        """Stands in for ``kfcompile_kube.session`` (its arguments; the kubeconfig and the
        timeouts are not read): a session on this cluster, and its connection."""
        session = Session(self, self.clock, jitter=fixed_jitter, retry_for=retry_for,
                          on_retry=on_retry)  # fmt: skip
        return session, FakeConnection(context=context or "fake")

    def at(self, seconds: float, change: Callable[[], object]) -> None:
        """Do ``change()`` at the first tick ``seconds`` of fake time from now."""
        with self._lock:
            self._script.append((self.clock.monotonic() + seconds, change))

    def log(self, namespace: str, pod: str, *lines: str) -> None:
        """The pod's first container writes ``lines`` now."""
        found = self.store.items.get(("v1", "Pod", namespace, pod)) or {}
        containers = (found.get("spec") or {}).get("containers") or [{"name": ""}]
        for line in lines:
            self.store.append_log(namespace, pod, containers[0]["name"], line + "\n")

    def _tick(self) -> None:
        with self._lock:  # (not held while a change runs: it may schedule more)
            now = self.clock.monotonic()
            due = [change for at, change in self._script if at <= now]
            self._script = [step for step in self._script if step[0] > now]
        for change in due:
            with suppress(KeyError, NotFound):  # its object deleted meanwhile
                change()
        self.store.collect()

    def served(self, api_version: str, kind: str) -> bool:
        self._enter(Call("served", api_version, kind, None, None))
        return self.store.served(api_version, kind) is not None

    def get(self, ref: Ref) -> Obj:
        rk, fault = self._call("get", ref.api_version, ref.kind, ref.namespace, ref.name)
        return _answer(fault, self.store.current(rk, ref.namespace, ref.name))

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        meta, asked = obj.get("metadata") or {}, {"dry_run": True} if dry_run else {}
        _, fault = self._call("create", obj["apiVersion"], obj["kind"], meta.get("namespace"),
                              meta.get("name"), **asked)  # fmt: skip
        return _answer(fault, self.store.create(obj, dry_run=dry_run))

    def patch(self, ref: Ref, patch: Obj) -> Obj:
        rk, fault = self._call("patch", ref.api_version, ref.kind, ref.namespace, ref.name)
        return _answer(fault, self.store.patch(rk, ref.namespace, ref.name, patch))

    def delete(self, ref: Ref, propagation: str = "Foreground", *, uid: str | None = None) -> None:
        _, fault = self._call("delete", ref.api_version, ref.kind, ref.namespace, ref.name,
                              propagation=propagation, uid=uid)  # fmt: skip
        self.store.delete(ref.api_version, ref.kind, ref.namespace, ref.name, propagation, uid)
        _answer(fault, None)

    def list(self, api_version: str, kind: str, namespace: str | None, *, label_selector: str = "",
             field_selector: str = "", limit: int = 500, continue_token: str | None = None,
    ) -> Page:  # fmt: skip
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        rk, fault = self._call("list", api_version, kind, namespace, None, limit=limit, **selectors)
        matches = selector(rk, namespace, label_selector, field_selector)
        count = not (label_selector or field_selector)
        return _answer(fault, self.store.page(matches, limit, continue_token, count))

    def watch(self, api_version: str, kind: str, namespace: str | None, *, resource_version: str,
              label_selector: str = "", field_selector: str = "", timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:  # fmt: skip
        """Events after ``resource_version`` (``""`` or ``"0"``: every object ADDED first), as
        the clock moves, then a BOOKMARK, ``timeout_seconds`` of fake time later."""
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        rk, fault = self._call("watch", api_version, kind, namespace, None, **selectors,
                               rv=resource_version)  # fmt: skip
        matches = selector(rk, namespace, label_selector, field_selector)
        _answer(fault, None)  # a lost answer: the stream never came

        def events() -> Iterator[WatchEvent]:
            deadline, cursor = self.clock.monotonic() + timeout_seconds, int(resource_version or 0)
            if resource_version in ("", "0"):
                with self.store.lock:
                    cursor, found = self.store.resource_version, self.store.matching(matches)
                yield from (WatchEvent("ADDED", obj) for obj in found)
            while True:
                seen, cursor = self.store.events(matches, cursor)
                yield from (WatchEvent(type_, obj) for type_, obj in seen)
                if self.clock.monotonic() >= deadline:
                    meta = {"resourceVersion": str(cursor)}
                    yield WatchEvent("BOOKMARK", {"apiVersion": api_version, "kind": kind,
                                                  "metadata": meta})  # fmt: skip
                    return
                self.clock.idle(until=deadline)

        yield from _cut(events(), fault)

    def pod_log(self, namespace: str, pod: str, *, container: str | None = None,
                follow: bool = False, since_seconds: int | None = None,
                tail_lines: int | None = None, timestamps: bool = False,
                ) -> Iterator[str]:  # fmt: skip
        """The log's lines (a last one without its newline once the run has ended)."""
        rest = ""
        for piece in self.log_text(namespace, pod, container=container, follow=follow,
                                   since_seconds=since_seconds, tail_lines=tail_lines,
                                   timestamps=timestamps) or ():  # fmt: skip
            *done, rest = (rest + piece).split("\n")
            yield from done
        if rest:
            yield rest

    def log_text(self, namespace: str, pod: str, *, container: str | None = None,
                 follow: bool = False, since_seconds: float | None = None,
                 tail_lines: int | None = None, timestamps: bool = False,
                 ) -> Iterator[str] | None:  # fmt: skip
        """The log as the kubelet sends it, line by line as it is written; None for a pod not
        scheduled yet (no kubelet to ask: a real API server answers 204 No Content)."""
        asked = {"container": container, "follow": follow, "since_seconds": since_seconds,
                 "tail_lines": tail_lines, "timestamps": timestamps}  # fmt: skip
        rk, fault = self._call("pod_log", "v1", "Pod", namespace, pod, **asked)
        found = self.store.current(rk, namespace, pod)
        chosen = _container(found, container)
        run = _run(found, chosen, self.store.kubelets_down)
        _answer(fault, None)
        if run is None:
            return None
        key, start = (namespace, pod, chosen), 0
        since = self.clock.time() - since_seconds if since_seconds is not None else -math.inf

        def read() -> builtins.list[str]:
            """The lines of the run written since the last read (one may be partial)."""
            nonlocal start
            with self.store.lock:
                chunks = self.store.logs.get(key, [])[start:]
            start += len(chunks)
            kept = [(at, text) for at, text, r in chunks if r == run and at >= since]
            lines = [(at, line) for at, text in kept for line in text.splitlines(keepends=True)]
            if not timestamps:
                return [line for _, line in lines]
            return [f"{rfc3339(at, nano=True)} {line}" for at, line in lines]

        def lines() -> Iterator[str]:
            first = "".join(read()).splitlines(keepends=True)
            yield from first if tail_lines is None else first[len(first) - tail_lines :]
            while follow:
                ended = self._ended(key, run)  # before reading: its last lines still come
                yield from read()
                if ended:
                    return
                self.clock.idle()

        return _cut(lines(), fault)

    def exec(self, namespace: str, pod: str, container: str, command: Sequence[str],
             stdin: bytes | Iterable[bytes] = b"", *,
             stdout: Callable[[ExecOutput], object] | None = None) -> ExecResult:  # fmt: skip
        """The command answered by ``on_exec`` once all of ``stdin`` was read, in a running
        container; recorded in ``execs``."""
        rk, fault = self._call("exec", "v1", "Pod", namespace, pod, command=list(command))
        if not command:
            raise error(400, "BadRequest", "you must specify at least 1 command")
        check_exec(self.store.current(rk, namespace, pod), container)
        data = stdin if isinstance(stdin, bytes) else b"".join(stdin)
        self.execs.append(call := Exec(namespace, pod, container, tuple(command), data))
        answer = self.on_exec(call)
        _answer(fault, None)  # a lost answer: the command ran, its end unheard
        ended = ExecResult(b"", answer.stderr, answer.exit_code)

        def output() -> ExecOutput:
            yield from [answer.stdout] if isinstance(answer.stdout, bytes) else answer.stdout
            return ended

        collected: builtins.list[bytes] = []
        consume = stdout if stdout is not None else collected.extend  # no consumer: collected
        stream = output()
        try:
            consume(stream)
            for _ in stream:
                pass  # what the consumer left unread
        finally:
            stream.close()
        return ExecResult(b"".join(collected), answer.stderr, answer.exit_code)

    def _enter(self, call: Call) -> Fault | None:
        """Record the call and take its fault: one that refuses it raises here."""
        call.fault = fault = self.faults.take(call)
        self.calls.append(call)
        if fault is not None and (raised := fault.raised()) is not None:
            raise raised
        return fault

    def _call(self, method: str, api_version: str, kind: str, namespace: str | None,
              name: str | None, **query: Any) -> tuple[ResourceKind, Fault | None]:  # fmt: skip
        """``_enter``, then what the API server checks first: the kind served, the namespace
        given, the user allowed (``store.namespaces_allowed``, in the RBAC authorizer's words)."""
        fault = self._enter(Call(method, api_version, kind, namespace, name, query))
        rk = self.store.kind(api_version, kind)
        if rk.namespaced and namespace is None and method not in ("list", "watch"):
            raise ValueError(f"{kind} is namespaced: the object needs a namespace")
        allowed = self.store.namespaces_allowed
        if allowed is not None and rk.namespaced and namespace not in allowed:
            verb = {"pod_log": "get", "exec": "create"}.get(method, method)
            what = f'{rk.resource} "{name}"' if name and method != "create" else rk.resource
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            said = f'User "alice" cannot {verb} resource "{rk.plural}" in API group "{rk.group}"'
            raise error(403, "Forbidden", f"{what} is forbidden: {said} {where}")
        return rk, fault

    def _ended(self, key: tuple[str, str, str], run: int) -> bool:
        """Whether that run has ended: its pod gone or done, its container ended or restarted."""
        pod = self.store.items.get(("v1", "Pod", key[0], key[1]))
        if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return True
        status = _status(pod, key[2])
        return "terminated" in (status.get("state") or {}) or status.get("restartCount", 0) != run


def check_exec(pod: Obj, container: str) -> None:
    """``BadRequest`` unless the container runs, as the API server refuses an exec."""
    phase = (pod.get("status") or {}).get("phase")
    chosen = _container(pod, container)
    if phase in ("Succeeded", "Failed"):
        raise error(400, "BadRequest", "cannot exec into a container in a completed pod; "
                    f"current phase is {phase}")  # fmt: skip
    state = _status(pod, chosen).get("state") or {}
    if phase != "Running" or ("running" not in state and state):
        raise error(400, "BadRequest",
                    f'unable to upgrade connection: container not found ("{chosen}")')  # fmt: skip


def _run(pod: Obj, container: str, kubelets_down: set[str]) -> int | None:
    """The container's run a log read is of (its restartCount); None: the pod is not scheduled
    yet. Refused in the kubelet's words while the container waits to start, and with the dial
    error when its node's kubelet is down."""
    status, name = _status(pod, container), pod["metadata"]["name"]
    pending = (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    node = (pod.get("spec") or {}).get("nodeName")
    if not node and not status and pending:
        return None
    if node in kubelets_down:
        where = f"https://{node}:10250/containerLogs/{pod['metadata']['namespace']}/{name}"
        raise error(500, "", f'Get "{where}/{container}": dial tcp {node}:10250: connect: '
                    "connection refused")  # fmt: skip
    waiting = (status.get("state") or {}).get("waiting")
    if waiting is not None or (not status and pending):
        reason = (waiting or {}).get("reason", "ContainerCreating")
        said = f'container "{container}" in pod "{name}" is waiting to start: {reason}'
        raise error(400, "BadRequest", said)
    return int(status.get("restartCount", 0))


def _status(pod: Obj, container: str) -> Obj:
    found = (pod.get("status") or {}).get("containerStatuses") or []
    return next((dict(e) for e in found if e.get("name") == container), {})


def _container(pod: Obj, container: str | None) -> str:
    """The container a request names, or the pod's only one."""
    name, names = pod["metadata"]["name"], [c["name"] for c in pod["spec"]["containers"]]
    if not container and len(names) != 1:
        raise error(400, "BadRequest", f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(names)}]")  # fmt: skip
    if container and container not in names:
        raise error(400, "BadRequest", f"container {container} is not valid for pod {name}")
    return container or str(names[0])


def _answer(fault: Fault | None, result: T) -> T:
    """``result``, unless a ``lost`` fault loses it after the call was done."""
    if fault is not None and fault.lost:
        raise Transient(0, "Timeout", "read timed out (injected: the call was done)")
    return result


def _cut(items: Iterator[T], fault: Fault | None) -> Iterator[T]:
    """``items``, the connection reset after a fault's ``drop_after`` of them."""
    cut = fault.drop_after if fault is not None else None
    for sent, item in enumerate(items):
        if sent == cut:
            break
        yield item
    else:
        if cut != 0:
            return
    raise Transient(0, "ConnectionError", "stream cut: connection reset (injected)")

"""``kfcompile.ports.Cluster`` in memory, over the same Store and the same answers
(``fakekube.api``) as the HTTP server, with no socket and no thread.

What the real adapter would raise, this raises: the port's ``ApiError`` family for each
``Status`` (strict field validation, selectors, pagination with continue tokens, 410 for a
watch or token too old), ``ValueError`` for a namespaced object without a namespace. Objects
cross as JSON would carry them (a copy, never shared with the store). A watch or a followed
log that would block on a real server waits on the fake clock instead (``FakeClock.idle``),
which moves the simulated cluster on; a watch ends after its ``timeout_seconds`` of fake time
with a BOOKMARK, as the server's does for the adapter. ``faults`` injects trouble at the port;
``calls`` records every call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

from kfcompile.ports import (
    ExecOutput,
    ExecResult,
    Invalid,
    Obj,
    Page,
    Ref,
    Transient,
    WatchEvent,
)

from . import api
from .clock import FakeClock
from .faults import Fault, Faults, port_error
from .requestlog import RequestLog, RequestRecord
from .resources import ResourceKind, StoreError, clone
from .shell import Filesystem, reads_stdin, run_command
from .store import Store

__all__ = ["MemoryCluster"]

T = TypeVar("T")
_FRAME = 1 << 20  # an exec's stdout comes in chunks of at most this (as over the wire)
_STDERR_KEPT = 64 * 1024  # the end of stderr, as the adapter keeps it


def _wire(obj: Any) -> Any:
    """What the other side would get: a JSON copy (a tuple arrives as a list)."""
    return json.loads(json.dumps(obj))


def _cut(items: Iterator[T], cut: int | None, *, before: bool) -> Iterator[T]:
    """``items``, the connection reset when the ``cut``-th would follow (``before``: before
    anything, as when the server drops the stream unanswered); ``None``: not cut."""
    if cut is not None and before:
        raise Transient(0, "ConnectionError", "connection reset by peer (injected)")
    for sent, item in enumerate(items):
        if cut is not None and sent >= cut:
            raise Transient(0, "ConnectionError", "stream cut: connection reset (injected)")
        yield item


def _lines(chunks: list[str]) -> Iterator[str]:
    """Lines without their newline, as the adapter yields them."""
    for line in chunks:
        yield line[:-1] if line.endswith("\n") else line


class MemoryCluster:
    def __init__(self, store: Store, clock: FakeClock) -> None:
        self.store = store
        self.clock = clock
        self.faults = Faults(store, port=True)
        self.calls = RequestLog()

    # --- the port --------------------------------------------------------------------------

    def served(self, api_version: str, kind: str) -> bool:
        self._enter("served", kind, None, None, api_version=api_version)
        try:
            self.store.kind(api_version, kind)
        except StoreError:
            return False
        return True

    def get(self, ref: Ref) -> Obj:
        fault = self._enter("get", ref.kind, ref.namespace, ref.name, api_version=ref.api_version)
        kind = self._kind(ref.api_version, ref.kind, ref.namespace)
        return self._answer(fault, lambda: api.current(self.store, kind, ref.namespace, ref.name))

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        api_version, kind_name = str(obj.get("apiVersion")), str(obj.get("kind"))
        shape = {"dry_run": dry_run} if dry_run else {}
        fault = self._enter("create", kind_name, namespace, name, api_version=api_version, **shape)
        kind = self._kind(api_version, kind_name, namespace)
        body = _wire(obj)
        return self._answer(
            fault, lambda: api.create(self.store, kind, body, strict=True, dry_run=dry_run)
        )

    def patch(self, ref: Ref, patch: Obj) -> Obj:
        fault = self._enter("patch", ref.kind, ref.namespace, ref.name, api_version=ref.api_version)
        kind = self._kind(ref.api_version, ref.kind, ref.namespace)
        change = _wire(patch)
        return self._answer(
            fault, lambda: api.patch(self.store, kind, ref.namespace, ref.name, change)
        )

    def delete(self, ref: Ref, propagation: str = "Foreground") -> None:
        fault = self._enter(
            "delete",
            ref.kind,
            ref.namespace,
            ref.name,
            api_version=ref.api_version,
            propagation=propagation,
        )
        kind = self._kind(ref.api_version, ref.kind, ref.namespace)
        self._answer(
            fault, lambda: api.delete(self.store, kind, ref.namespace, ref.name, propagation)
        )

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 500,
        continue_token: str | None = None,
    ) -> Page:
        shape = {"label_selector": label_selector, "field_selector": field_selector}
        fault = self._enter(
            "list", kind, namespace, None, api_version=api_version, **shape, limit=limit
        )
        rk = self._kind(api_version, kind)
        items, rv, token = self._answer(
            fault,
            lambda: api.list_page(
                self.store, rk, namespace, **shape, limit=limit, continue_token=continue_token
            ),
        )
        return Page(items, str(rv), token)

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:
        shape = {"label_selector": label_selector, "field_selector": field_selector}
        fault = self._enter(
            "watch", kind, namespace, None, api_version=api_version, **shape, rv=resource_version
        )
        rk = self._kind(api_version, kind)
        matches = self._store_call(
            lambda: api.watch_matcher(self.store, rk, namespace, label_selector, field_selector)
        )
        self._answer(fault, lambda: None)  # a lost answer: the stream never came
        events = self._events(rk, matches, resource_version, timeout_seconds)
        cut = fault.drop_after if fault is not None else None
        yield from _cut(events, cut, before=cut == 0)

    def _events(
        self, rk: ResourceKind, matches: Callable[[Obj], bool], version: str, timeout: int
    ) -> Iterator[WatchEvent]:
        """What the server streams: changes after ``version``, then a BOOKMARK at the end (the
        server's keep-alive BOOKMARKs in between mean nothing at the port); ``Gone`` when the
        version is too old."""
        clock = self.clock
        deadline = clock.monotonic() + timeout
        if version in ("", "0"):  # the current state first, then what changes
            objs, cursor = api.snapshot(self.store, rk, matches)
            for obj in objs:
                yield WatchEvent("ADDED", obj)
        else:
            cursor = int(version)
        while True:
            for change in self._store_call(partial(self.store.changes_after, cursor)):
                cursor = change.rv
                typed = api.watch_event(change, rk, matches)
                if typed is not None:
                    yield WatchEvent(typed[0], clone(typed[1]))
            if clock.monotonic() >= deadline:  # the server's last word, at the end of a segment
                meta = {"resourceVersion": str(cursor)}
                yield WatchEvent(
                    "BOOKMARK", {"kind": rk.kind, "apiVersion": rk.api_version, "metadata": meta}
                )
                return
            clock.idle(until=deadline)

    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        shape = {
            "container": container,
            "follow": follow,
            "since_seconds": since_seconds,
            "tail_lines": tail_lines,
            "timestamps": timestamps,
        }
        fault = self._enter("pod_log", "Pod", namespace, pod, api_version="v1", **shape)
        lines, reader = self._store_call(
            lambda: api.log_read(
                self.store,
                namespace,
                pod,
                container=container,
                since_seconds=since_seconds,
                tail_lines=tail_lines,
                stamps=timestamps,
            )
        )
        self._answer(fault, lambda: None)  # a lost answer: no line came

        def read() -> Iterator[str]:
            yield from _lines(lines)
            while follow:
                finished = reader.finished()  # before reading: its last lines still come
                yield from _lines(reader.more())
                if finished:
                    return
                self.clock.idle()

        # A log read whole is cut before it starts; a followed one after ``drop_after`` lines.
        yield from _cut(read(), fault.drop_after if fault else None, before=not follow)

    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: Sequence[str],
        stdin: bytes | Iterable[bytes] = b"",
        *,
        stdout: Callable[[ExecOutput], object] | None = None,
    ) -> ExecResult:
        fault = self._enter("exec", "Pod", namespace, pod, api_version="v1", command=list(command))
        if not command:
            raise Invalid(400, "BadRequest", "you must specify at least 1 command")
        target = self._store_call(lambda: api.exec_container(self.store, namespace, pod, container))
        argv = list(command)
        data = b""
        if reads_stdin(argv):  # drawn as the command reads it; what it raises passes through
            data = stdin if isinstance(stdin, bytes) else b"".join(stdin)
        if fault is not None and fault.exec_stdout is not None:
            answer = fault.exec_stdout
            chunks: Iterable[bytes | memoryview] = [answer] if isinstance(answer, bytes) else answer
            stderr, code = b"", 0
        else:
            fs = Filesystem(self.store, target, container)
            chunks, stderr, code = run_command(fs, argv, data)
        ended = ExecResult(b"", stderr[-_STDERR_KEPT:], code)
        self._answer(fault, lambda: None)  # a lost answer: the command ran, its end unheard
        cut = fault.drop_after if fault is not None else None

        def output() -> ExecOutput:
            sent = 0
            for chunk in chunks:
                view = memoryview(chunk)
                for start in range(0, len(view), _FRAME):
                    if sent == cut:
                        raise Transient(0, "StreamError", f"exec stream to pod {pod} broke")
                    sent += 1
                    yield bytes(view[start : start + _FRAME])
            return ended

        stream = output()
        if stdout is None:
            collected = bytearray()
            for part in stream:
                collected += part
            return ExecResult(bytes(collected), ended.stderr, ended.exit_code)
        try:
            stdout(stream)
            for _ in stream:
                pass  # what the consumer left unread
        except BaseException:
            stream.close()
            raise
        return ended

    # --- helpers ---------------------------------------------------------------------------

    def _enter(
        self,
        op: str,
        kind: str,
        namespace: str | None,
        name: str | None,
        *,
        api_version: str,
        **args: Any,
    ) -> Fault | None:
        """Record the call and take its fault: a status or a dropped call raises here."""
        path = f"{kind}/{name or ''}"
        fault = self.faults.take(op, path, op == "watch")
        self.calls.append(
            RequestRecord(
                op,
                path,
                args,
                op == "watch",
                verb=op,
                fault=fault,
                time=self.clock.monotonic(),
                api_version=api_version,
                kind=kind,
                namespace=namespace,
                name=name,
            )
        )
        error = fault.port_error() if fault is not None else None
        if error is not None:
            raise error
        return fault

    def _kind(self, api_version: str, kind: str, namespace: str | None = "") -> ResourceKind:
        """The served kind, as the adapter finds its path (``NotFound`` when not served)."""
        rk = self._store_call(lambda: self.store.kind(api_version, kind))
        if rk.namespaced and namespace is None:
            raise ValueError(f"{kind} is namespaced: the object needs a namespace")
        return rk

    def _answer(self, fault: Fault | None, call: Callable[[], T]) -> T:
        """``call()`` in the store, whose answer a ``lost`` fault loses after it happened."""
        result = self._store_call(call)
        if fault is not None and fault.lost:
            raise Transient(0, "Timeout", "read timed out (injected: the call was done)")
        return result

    @staticmethod
    def _store_call(call: Callable[[], T]) -> T:
        try:
            return call()
        except StoreError as err:
            wait = (err.details or {}).get("retryAfterSeconds")
            raise port_error(err.code, err.reason, err.message, wait) from None

"""The watch history of the Store and who is told of changes (a mixin of
:class:`fakekube.store.Store`): a bounded log of changes that watches resume from (410 once a
version has fallen out of it, or after ``compact``), subscribers, and the wakers of streams."""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .resources import Change, ResourceKind, StoreError, clone

Obj = dict[str, Any]


class History:
    _lock: threading.RLock
    _objects: dict[tuple[str, str], dict[tuple[str, str], Obj]]
    _rv: int

    def _init_history(self, size: int) -> None:
        self._history: deque[Change] = deque(maxlen=size)
        self._floor = 0  # a watch can resume from any resourceVersion >= this
        self._subscribers: builtins.list[Callable[[str, Obj], None]] = []
        self._wakers: builtins.list[Callable[[], None]] = []

    def subscribe(self, callback: Callable[[str, Obj], None]) -> None:
        """Call ``callback(type, obj)`` after every change, outside the lock, in the thread that
        made it. ``type`` is ADDED, MODIFIED or DELETED; ``obj`` is the stored object, shared
        with the watch history: read it, never change it."""
        with self._lock:
            self._subscribers.append(callback)

    def add_waker(self, waker: Callable[[], None]) -> None:
        """Call ``waker()`` after every change and every log append (for streaming readers)."""
        with self._lock:
            self._wakers.append(waker)

    def remove_waker(self, waker: Callable[[], None]) -> None:
        with self._lock:
            self._wakers.remove(waker)

    def changes_after(self, rv: int) -> builtins.list[Change]:
        """History entries newer than ``rv``; StoreError 410 Expired when it no longer reaches
        back that far."""
        with self._lock:
            if rv < self._floor:
                raise StoreError(
                    410, "Expired", f"too old resource version: {rv} ({self._floor + 1})"
                )
            out: builtins.list[Change] = []
            for change in reversed(self._history):
                if change.rv <= rv:
                    break
                out.append(change)
            return out[::-1]

    def snapshot(self, api_version: str, kind: str) -> tuple[builtins.list[Obj], int]:
        """Copies of all objects of a kind, in key order, with the current resourceVersion."""
        with self._lock:
            bucket = self._objects[(api_version, kind)]
            return [clone(bucket[k]) for k in sorted(bucket)], self._rv

    def compact(self) -> None:
        """Forget the watch history, as etcd compaction does: older versions now give 410."""
        with self._lock:
            self._history.clear()
            self._floor = self._rv

    def _record(
        self,
        changes: builtins.list[Change],
        type_: str,
        rk: ResourceKind,
        obj: Obj,
        old: Obj | None = None,
    ) -> None:
        # Stored objects are replaced, never changed in place, so the history may share them
        change = Change(self._rv, type_, rk.api_version, rk.kind, obj, old)
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        self._history.append(change)
        changes.append(change)

    def _notify(self, changes: Iterable[Change]) -> None:
        changes = list(changes)
        if not changes:
            return
        with self._lock:
            subscribers, wakers = list(self._subscribers), list(self._wakers)
        for change in changes:
            for callback in subscribers:
                callback(change.type, change.obj)
        for waker in wakers:
            waker()

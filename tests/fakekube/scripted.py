"""The scripts of ``fakekube.jobs`` over the HTTP server's store: what ``LocalCluster`` moves its
jobs by, as ``PortFake`` moves the lifecycle tests' (the same steps, the same objects).

``StoreJobs`` is the part of ``PortFake`` the scripts use (``objects``, ``at``, ``log``,
``new_log``, ``clock``, ``on_create`` and ``on_patch``: told of each object a request creates
or changes) over a ``Store``. Time is a ``FakeClock`` that the test advances
(``LocalCluster.advance``) or a ticker thread does in step with real time
(``LocalCluster(auto=True)``). The store calls ``on_create`` in the thread of the request that
created the object; a script only schedules there (``at``), and what it schedules runs when
the clock ticks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .clock import FakeClock
from .events import EVENTS_V1, EVENTS_V1_KEY
from .resources import StoreError
from .store import Store
from .validation import merge_patch

Obj = dict[str, Any]
Key = tuple[str, str, str | None, str]

__all__ = ["StoreJobs"]


class _Items:
    """``Objects.items`` read through the store (copies)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def get(self, key: Key) -> Obj | None:
        return self._store.get(*key)

    def __getitem__(self, key: Key) -> Obj:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and self.get(key) is not None  # type: ignore[arg-type]


class _Objects:
    """``port.Objects``' writes, as a controller's writes to the store (``writing`` while one
    is made in this thread: no request created what it creates)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.items = _Items(store)
        self.writing = threading.local()

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, selector: str = ""
    ) -> list[Obj]:
        return self._store.list(api_version, kind, namespace, selector)

    def put(self, obj: Obj) -> Obj:
        if (obj["apiVersion"], obj["kind"]) == EVENTS_V1_KEY:  # stored as core/v1, as served
            obj = EVENTS_V1.write(obj)
        meta = obj["metadata"]
        self.writing.now = True
        try:
            if self._store.get(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]):
                return self._store.update(obj)
            return self._store.create(obj)
        finally:
            self.writing.now = False

    def change(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: Obj
    ) -> Obj:
        return self.put(merge_patch(self.items[api_version, kind, namespace, name], patch))

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        self._store.delete(api_version, kind, namespace, name)


class StoreJobs:
    def __init__(self, store: Store, clock: FakeClock) -> None:
        self.store, self.clock = store, clock
        self.objects = _Objects(store)
        self.on_create: list[Callable[[Obj], object]] = []
        self.on_patch: list[Callable[[Obj], object]] = []  # told of each object a request changes
        self._script: list[tuple[float, Callable[[], object]]] = []
        self.errors: list[Exception] = []  # scripted changes a request's deletion made moot
        self._lock = threading.RLock()
        store.subscribe(self._changed)
        clock.drive(self._tick)

    def at(self, seconds: float, change: Callable[[], object]) -> None:
        """Do ``change()`` at the first tick ``seconds`` of fake time from now."""
        with self._lock:
            self._script.append((self.clock.monotonic() + seconds, change))

    def log(self, namespace: str, pod: str, *lines: str) -> None:
        """The pod's only container writes ``lines`` now."""
        obj = self.store.get("v1", "Pod", namespace, pod)
        container = obj["spec"]["containers"][0]["name"] if obj else ""
        for line in lines:
            self.store.append_log(namespace, pod, container, line + "\n", at=self.clock.time())

    def new_log(self, namespace: str, pod: str) -> None:
        """The container restarted: the store keeps a log per restartCount already."""

    def _changed(self, type_: str, obj: Obj) -> None:
        if getattr(self.objects.writing, "now", False) or obj["metadata"].get("deletionTimestamp"):
            return
        for script in {"ADDED": self.on_create, "MODIFIED": self.on_patch}.get(type_, []):
            script(obj)

    def _tick(self) -> None:
        with self._lock:
            now = self.clock.monotonic()
            due = [step for step in self._script if step[0] <= now]
            self._script = [step for step in self._script if step[0] > now]
            for _, change in due:
                try:
                    change()
                except (KeyError, StoreError) as exc:  # its object deleted meanwhile, by a request
                    self.errors.append(exc)

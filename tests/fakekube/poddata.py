"""What pods hold beyond their objects, for the Store (a mixin of :class:`fakekube.store.Store`):
container logs, kept per run, and the in-memory files of volumes."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable
from typing import Any

from .resources import LogChunk

Obj = dict[str, Any]
_ObjKey = tuple[str, str]  # (namespace, pod)


class PodData:
    _lock: threading.RLock
    _objects: dict[tuple[str, str], dict[_ObjKey, Obj]]
    _wakers: builtins.list[Callable[[], None]]
    clock: Callable[[], float]

    def _init_pod_data(self) -> None:
        # pod logs by (namespace, pod), then container; they go with the pod (Collector)
        self._logs: dict[_ObjKey, dict[str, builtins.list[LogChunk]]] = {}
        self._fs: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]] = {}

    def append_log(
        self, namespace: str, pod: str, container: str, text: str, *, at: float | None = None
    ) -> None:
        """Add ``text`` to the log of the container's current run (its restartCount)."""
        with self._lock:
            obj = self._objects[("v1", "Pod")].get((namespace, pod))
            statuses = ((obj or {}).get("status") or {}).get("containerStatuses") or []
            instance = next(
                (s.get("restartCount", 0) for s in statuses if s.get("name") == container), 0
            )
            chunk = LogChunk(self.clock() if at is None else at, text, instance)
            self._logs.setdefault((namespace, pod), {}).setdefault(container, []).append(chunk)
            wakers = list(self._wakers)
        for waker in wakers:
            waker()

    def log(self, namespace: str, pod: str, container: str) -> builtins.list[LogChunk]:
        """Everything the container logged so far, every run."""
        with self._lock:
            return list(self._logs.get((namespace, pod), {}).get(container, ()))

    def volume(self, namespace: str, claim: str) -> dict[str, bytes]:
        """The files of a PersistentVolumeClaim's volume (relative path -> content): mutable."""
        return self.filesystem(("pvc", namespace, claim))[0]

    def filesystem(self, key: tuple[str, ...]) -> tuple[dict[str, bytes], set[str]]:
        """``(files, directories made empty)`` of one volume, created on first use.

        Keys: ``("pvc", ns, claim)``, ``("pod", ns, pod, volume-or-container)``.
        """
        with self._lock:
            return self._fs.setdefault(key, ({}, set()))

"""A stand-in kubelet for pods no controller owns (the work-dir sync helper): it starts them.

A pod whose image contains ``does-not-exist`` gets stuck in ``ImagePullBackOff`` instead, as a
mistyped image would on a real node. The kubelet works on its own thread (``with Kubelet(...)``),
or, with ``threaded=False``, when :meth:`Kubelet.tick` is called (by a fake clock).
"""

from __future__ import annotations

import collections
import queue
import threading
from typing import Any

from .store import Store

BAD_IMAGE = "does-not-exist"


class Kubelet:
    def __init__(self, store: Store, *, threaded: bool = True) -> None:
        self._store = store
        self._threaded = threaded
        self._todo: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._ticked: collections.deque[tuple[str, str]] = collections.deque()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        store.subscribe(self._seen)

    def __enter__(self) -> Kubelet:
        if self._threaded:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._threaded:
            self._todo.put(None)
            self._thread.join(5)

    def _seen(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if event == "ADDED" and obj.get("kind") == "Pod" and not meta.get("ownerReferences"):
            item = (meta["namespace"], meta["name"])
            (self._todo.put if self._threaded else self._ticked.append)(item)

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            self._start(*item)

    def tick(self) -> bool:
        """Start the pods created since the last tick (``threaded=False``): whether any."""
        busy = bool(self._ticked)
        while self._ticked:
            self._start(*self._ticked.popleft())
        return busy

    def _start(self, namespace: str, name: str) -> None:
        pod = self._store.get("v1", "Pod", namespace, name)
        if pod is not None:
            pod["status"] = self._status(pod, self._store.now())
            self._store.update(pod)

    @staticmethod
    def _status(pod: dict[str, Any], now: str) -> dict[str, Any]:
        container = pod["spec"]["containers"][0]
        image = container["image"]
        base = {"name": container["name"], "image": image, "restartCount": 0}
        if BAD_IMAGE in image:
            waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
            return {
                "phase": "Pending",
                "startTime": now,
                "containerStatuses": [
                    {**base, "imageID": "", "ready": False, "state": {"waiting": waiting}}
                ],
            }
        return {
            "phase": "Running",
            "startTime": now,
            "podIP": "10.0.0.9",
            "hostIP": "192.168.0.9",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    **base,
                    "imageID": f"docker.io/library/{image}@sha256:{'0' * 64}",
                    "ready": True,
                    "started": True,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }

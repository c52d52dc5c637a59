"""A stand-in kubelet for pods no controller owns (the work-dir sync helper): it starts them.

A pod whose image contains ``does-not-exist`` gets stuck in ``ImagePullBackOff`` instead, as a
mistyped image would on a real node.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from .store import Store, now_rfc3339

BAD_IMAGE = "does-not-exist"


class Kubelet:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._todo: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        store.subscribe(self._seen)

    def __enter__(self) -> Kubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._todo.put(None)
        self._thread.join(5)

    def _seen(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if event == "ADDED" and obj.get("kind") == "Pod" and not meta.get("ownerReferences"):
            self._todo.put((meta["namespace"], meta["name"]))

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            pod = self._store.get("v1", "Pod", *item)
            if pod is not None:
                pod["status"] = self._status(pod)
                self._store.update(pod)

    @staticmethod
    def _status(pod: dict[str, Any]) -> dict[str, Any]:
        now = now_rfc3339()
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

"""A stand-in scheduler and kubelet for pods no controller owns (the work-dir sync helper): it
starts them, or leaves them waiting as a real cluster would, saying why in the pod's status and
in events (events/v1, as the scheduler writes them; the kubelet's image pulls likewise):

- an image containing ``does-not-exist``: ``ImagePullBackOff``, as a mistyped image would;
- an image containing ``slow-to-pull``: ``ContainerCreating`` for as long as anyone waits.

The kubelet works on its own thread (``with Kubelet(...)``), whose work the API server waits
for before it answers (``Store.caught_up``: a pod created is started, or stuck, by the next
request, whatever the machine's speed), or, with ``threaded=False``, when :meth:`Kubelet.tick`
is called (by a fake clock).
"""

from __future__ import annotations

import collections
import queue
import threading
from datetime import UTC, datetime
from typing import Any

from .events import Reporter
from .pods import pod_status
from .resources import StoreError
from .scenarios import PodRecord
from .store import Store

BAD_IMAGE = "does-not-exist"
SLOW_IMAGE = "slow-to-pull"
NODE = "gpu-node-0"

Obj = dict[str, Any]


class Kubelet:
    def __init__(self, store: Store, *, threaded: bool = True) -> None:
        self._store = store
        self._threaded = threaded
        self._todo: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._ticked: collections.deque[tuple[str, str]] = collections.deque()
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        self._scheduler = Reporter.of(store, "default-scheduler")
        self._kubelet = Reporter.of(store, "kubelet")
        self._done = threading.Condition()
        self._queued = 0  # pods queued for the thread and not started yet
        store.subscribe(self._seen)
        if threaded:
            store.also_catch_up(self.caught_up)

    def __enter__(self) -> Kubelet:
        if self._threaded:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._threaded:
            self._todo.put(None)
            self._thread.join(5)

    def _seen(self, event: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if event == "ADDED" and obj.get("kind") == "Pod" and not meta.get("ownerReferences"):
            item = (meta["namespace"], meta["name"])
            if not self._threaded:
                self._ticked.append(item)
                return
            with self._done:
                self._queued += 1
            self._todo.put(item)

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            try:
                self._start_if_there(*item)
            finally:
                with self._done:
                    self._queued -= 1
                    self._done.notify_all()

    def caught_up(self, timeout: float) -> None:
        """Wait until every pod queued has been started (TimeoutError if not in ``timeout``);
        a kubelet not running (not entered yet, or left) starts nothing, so nothing is awaited."""
        if not self._thread.is_alive():
            return
        with self._done:
            if not self._done.wait_for(lambda: self._queued == 0, timeout):
                raise TimeoutError("fakekube: kubelet: pods queued but not started")

    def tick(self) -> bool:
        """Start the pods created since the last tick (``threaded=False``): whether any."""
        busy = bool(self._ticked)
        while self._ticked:
            self._start_if_there(*self._ticked.popleft())
        return busy

    def _start_if_there(self, namespace: str, name: str) -> None:
        try:
            self._start(namespace, name)
        except StoreError as exc:
            if exc.code != 404:
                raise  # a 404: the pod was deleted while it was being started

    def _start(self, namespace: str, name: str) -> None:
        pod = self._store.get("v1", "Pod", namespace, name)
        if pod is None:
            return
        now = datetime.fromtimestamp(self._store.clock(), UTC)
        regarding = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": name,
            "namespace": namespace,
            "uid": pod["metadata"]["uid"],
        }
        pod["spec"]["nodeName"] = NODE
        first = pod["spec"]["containers"][0]
        image = first["image"]
        stage = "image_pull" if BAD_IMAGE in image else "creating" if SLOW_IMAGE in image else None
        at = self._store.now()  # the status as the kubelet reports a job's pods at that stage
        uid = pod["metadata"]["uid"]
        record = PodRecord(name, uid, 0, "", first["name"], image, NODE, "10.0.0.9")
        record.stage, record.scheduled_at, record.started_at = stage or "running", at, at
        pod["status"] = pod_status(record)
        self._store.update(pod)
        assigned = f"Successfully assigned {namespace}/{name} to {NODE}"
        self._scheduler.report(regarding, "Normal", "Scheduled", "Binding", assigned, now)
        container = {
            **regarding,
            "fieldPath": f"spec.containers{{{pod['spec']['containers'][0]['name']}}}",
        }
        if BAD_IMAGE in image or SLOW_IMAGE in image:
            pulling = f'Pulling image "{image}"'
            self._kubelet.report(
                container, "Normal", "Pulling", "Pulling", pulling, now, instance=NODE
            )
        if BAD_IMAGE in image:
            failed = (
                f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to '
                f'pull and unpack image "{image}": not found'
            )
            for type_, reason, note in (
                ("Warning", "Failed", failed),
                ("Warning", "Failed", "Error: ErrImagePull"),
                ("Normal", "BackOff", f'Back-off pulling image "{image}"'),
            ):
                self._kubelet.report(container, type_, reason, "Pulling", note, now, instance=NODE)

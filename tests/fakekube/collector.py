"""Deletion and garbage collection for the Store (a mixin of :class:`fakekube.store.Store`).

Propagation as the real server does it: ``Background`` removes the object at once and its
dependents shortly after; ``Foreground`` keeps the owner (with ``deletionTimestamp`` and the
``foregroundDeletion`` finalizer) until its dependents are gone, deepest first; ``Orphan`` drops
the owner reference from the dependents. An object with finalizers stays, being deleted, until
they are removed. A pod bound to a node stays ``Terminating`` until that node's kubelet confirms
it stopped: at once here, unless the test said the node has no kubelet (``kubelet_down``), as a
real one stays. A dependent that stays holds its foreground owners (and theirs) until it goes.

The "shortly after" work is the garbage collector's: it runs on a worker thread, or when
``run_pending`` is called (a fake clock calls it as time passes). Like a real one it can lag
(``gc(lag=30)``: it notices what there is to do only 30 s of the store's time from now, as a real
one notices a newly installed kind) or be absent (``gc(running=False)``: nothing it would do
happens until it runs again).

The worker never races a test: the API server answers each request only once the work that is
due is done (``caught_up``), as if the collector were instant, and so does the work of other
threads registered with ``also_catch_up`` (the kubelet's). The states in between are still
there for watches to see, and for any request while the collector lags or is absent.
"""

from __future__ import annotations

import builtins
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .resources import CRD_KEY, NAMESPACE_KEY, Change, ResourceKind, StoreError, clone, rfc3339

Obj = dict[str, Any]
_Bucket = tuple[str, str]  # (apiVersion, kind)
_ObjKey = tuple[str, str]  # (namespace or "", name)
PROPAGATIONS = ("Background", "Foreground", "Orphan")
FOREGROUND = "foregroundDeletion"  # the finalizer of an owner deleted in the foreground
# Seconds a wait for the background work gives it before it calls it stuck: it is done in
# milliseconds, but a machine under load may not run the worker for a while.
SETTLE_TIMEOUT = 30.0


def _owner_uids(obj: Obj) -> list[str]:
    return [r.get("uid", "") for r in (obj.get("metadata") or {}).get("ownerReferences") or []]


class Collector:
    """The deletion half of the Store: indexes by uid and owner, and the scheduled work."""

    _lock: threading.RLock
    _kinds: dict[_Bucket, ResourceKind]
    _objects: dict[_Bucket, dict[_ObjKey, Obj]]
    _rv: int
    _logs: dict[_ObjKey, dict[str, builtins.list[Any]]]
    _fs: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]]

    clock: Callable[[], float]

    if TYPE_CHECKING:  # provided by Store

        def kind(self, api_version: str, kind: str) -> ResourceKind: ...
        def now(self) -> str: ...
        def _key(self, rk: ResourceKind, namespace: str | None, name: str) -> _ObjKey: ...
        def _existing(self, rk: ResourceKind, key: _ObjKey) -> Obj: ...
        def _notify(self, changes: Iterable[Change]) -> None: ...
        def _record(
            self,
            changes: builtins.list[Change],
            type_: str,
            rk: ResourceKind,
            obj: Obj,
            old: Obj | None = None,
        ) -> None: ...
        def _replace(
            self, rk: ResourceKind, key: _ObjKey, new: Obj, changes: builtins.list[Change]
        ) -> Obj: ...

    def _init_collector(self, threaded: bool) -> None:
        self._threaded = threaded
        self._idle = threading.Condition(self._lock)
        self._pending = 0  # asynchronous deletion work not yet done
        # indexes, so that garbage collection of 1,000-pod jobs stays linear
        self._uids: dict[str, tuple[_Bucket, _ObjKey]] = {}
        self._children: dict[str, set[tuple[_Bucket, _ObjKey]]] = {}
        # (not before this store time, the work, its arguments)
        self._work: deque[tuple[float, Callable[..., None], tuple[Any, ...]]] = deque()
        self._worker: threading.Thread | None = None
        self._gc_from = -math.inf  # the garbage collector does nothing before this time
        self._gc_running = True
        self._no_kubelet: set[str] = set()  # nodes whose kubelet never confirms a pod stopped
        self._helpers: builtins.list[Callable[[float], None]] = []  # their caught_up waits

    # --- switches for tests ------------------------------------------------------------------

    def gc(self, *, lag: float | None = None, running: bool | None = None) -> None:
        """The garbage collector notices its work only ``lag`` seconds of the store's time from
        now (what is queued, and what comes meanwhile); ``running=False``: it is absent, its
        work waits until ``running=True``."""
        with self._idle:
            if lag is not None:
                self._gc_from = self.clock() + lag
            if running is not None:
                self._gc_running = running
            self._wake()

    def kubelet_down(self, node: str) -> None:
        """No kubelet on ``node`` from now on: its pods, once deleted, stay Terminating."""
        with self._lock:
            self._no_kubelet.add(node)

    def kubelet_up(self, node: str) -> None:
        """``node``'s kubelet is back: it confirms its Terminating pods stopped (they go)."""
        changes: builtins.list[Change] = []
        with self._lock:
            self._no_kubelet.discard(node)
            pods = self._kinds[("v1", "Pod")]
            for key, pod in sorted(self._objects[("v1", "Pod")].items()):
                meta, spec = pod["metadata"], pod.get("spec") or {}
                held = meta.get("deletionTimestamp") and not meta.get("finalizers")
                if held and spec.get("nodeName") == node:
                    self._remove(pods, key, changes)
        self._notify(changes)

    # --- deleting --------------------------------------------------------------------------

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
    ) -> tuple[Obj, bool]:
        """Delete with ``propagation`` (``Background``, ``Foreground`` or ``Orphan``):
        ``(last state, whether it is gone already)``. StoreError 404 when it does not exist."""
        if propagation not in PROPAGATIONS:
            raise StoreError(
                400,
                "BadRequest",
                f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                '"Foreground", "Background", "Orphan"',
            )
        rk = self.kind(api_version, kind)
        if (rk.api_version, rk.kind) in (NAMESPACE_KEY, CRD_KEY):
            # Nothing the fake serves deletes them; a half-done emptying would mislead.
            raise StoreError(405, "MethodNotAllowed", f"fakekube does not delete {rk.plural}")
        changes: builtins.list[Change] = []
        with self._lock:
            key = self._key(rk, namespace, name)
            self._existing(rk, key)
            out = self._delete(rk, key, propagation, changes)
        self._notify(changes)
        return out

    def _delete(
        self, rk: ResourceKind, key: _ObjKey, propagation: str, changes: builtins.list[Change]
    ) -> tuple[Obj, bool]:
        obj = self._objects[(rk.api_version, rk.kind)][key]
        meta = obj["metadata"]
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):  # already on its way out
            return clone(obj), False
        if propagation == "Orphan":
            for dep_kind, dep_key, dep in self._dependents(uid):
                self._drop_owner(dep_kind, dep_key, dep, uid, changes)
        if self._terminating(rk, obj):  # the API server waits for the node's kubelet
            grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            new = clone(obj)
            new["metadata"]["deletionTimestamp"] = rfc3339(self.clock() + grace)
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            self._replace_meta(rk, key, new, obj, changes)
            return clone(new), False
        if propagation == "Foreground" or meta.get("finalizers"):
            new = clone(obj)
            new["metadata"]["deletionTimestamp"] = self.now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if propagation == "Foreground":
                new["metadata"].setdefault("finalizers", []).append(FOREGROUND)
                self._schedule(self._finish_foreground, rk, key, uid)
            self._replace_meta(rk, key, new, obj, changes)
            return clone(new), False
        gone = self._remove(rk, key, changes)
        if propagation == "Background":
            self._schedule(self._collect, uid)
        return gone, True

    def _terminating(self, rk: ResourceKind, obj: Obj) -> bool:
        """Whether deleting ``obj`` leaves it Terminating: a pod that runs on a node whose
        kubelet will not confirm it stopped (the API server waits for the kubelet)."""
        if (rk.api_version, rk.kind) != ("v1", "Pod"):
            return False
        node = (obj.get("spec") or {}).get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        return node in self._no_kubelet and phase not in ("Succeeded", "Failed")

    def _remove(self, rk: ResourceKind, key: _ObjKey, changes: builtins.list[Change]) -> Obj:
        obj = self._pop((rk.api_version, rk.kind), key)
        for owner in _owner_uids(obj):  # a dependent gone: its foreground owner may go now
            ref = self._uids.get(owner)
            held = ref is not None and self._objects[ref[0]][ref[1]]["metadata"]
            if held and held.get("deletionTimestamp") and FOREGROUND in held.get("finalizers", []):
                assert ref is not None
                self._schedule(self._finish_foreground, self._kinds[ref[0]], ref[1], owner)
        self._rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
        self._record(changes, "DELETED", rk, obj)
        if rk.kind == "Pod" and not rk.group:
            self._logs.pop(key, None)
            for fs_key in [k for k in self._fs if k[0] == "pod" and k[1:3] == key]:
                del self._fs[fs_key]
        return clone(obj)

    # --- indexes ---------------------------------------------------------------------------

    def _put(self, bucket: _Bucket, key: _ObjKey, obj: Obj) -> None:
        """Store ``obj``, keeping the uid and owner indexes right."""
        self._unindex(bucket, key)
        self._objects[bucket][key] = obj
        self._uids[obj["metadata"]["uid"]] = (bucket, key)
        for owner in _owner_uids(obj):
            self._children.setdefault(owner, set()).add((bucket, key))

    def _pop(self, bucket: _Bucket, key: _ObjKey) -> Obj:
        self._unindex(bucket, key)
        return self._objects[bucket].pop(key)

    def _unindex(self, bucket: _Bucket, key: _ObjKey) -> None:
        old = self._objects[bucket].get(key)
        if old is None:
            return
        self._uids.pop(old["metadata"]["uid"], None)
        for owner in _owner_uids(old):
            refs = self._children.get(owner)
            if refs is not None:
                refs.discard((bucket, key))
                if not refs:
                    del self._children[owner]

    def _dependents(self, uid: str) -> builtins.list[tuple[ResourceKind, _ObjKey, Obj]]:
        return [
            (self._kinds[bucket], key, self._objects[bucket][key])
            for bucket, key in sorted(self._children.get(uid, ()))
        ]

    def _alive(self, uid: str) -> bool:
        ref = self._uids.get(uid)
        return ref is not None and not self._objects[ref[0]][ref[1]]["metadata"].get(
            "deletionTimestamp"
        )

    # --- collecting ------------------------------------------------------------------------

    def _drop_owner(
        self, rk: ResourceKind, key: _ObjKey, obj: Obj, uid: str, changes: builtins.list[Change]
    ) -> None:
        new = clone(obj)
        refs = [r for r in new["metadata"]["ownerReferences"] if r.get("uid") != uid]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            del new["metadata"]["ownerReferences"]
        self._replace(rk, key, new, changes)

    def _collect(self, uid: str) -> None:
        """Background GC of ``uid``'s dependents (and theirs, on further runs)."""
        changes: builtins.list[Change] = []
        with self._lock:
            for rk, key, obj in self._dependents(uid):
                others = [u for u in _owner_uids(obj) if u != uid and self._alive(u)]
                if others:
                    self._drop_owner(rk, key, obj, uid, changes)
                elif key in self._objects[(rk.api_version, rk.kind)]:
                    self._delete(rk, key, "Background", changes)
        self._notify(changes)

    def _reap(self, rk: ResourceKind, key: _ObjKey, changes: builtins.list[Change]) -> bool:
        """Delete a dependent of an owner deleted in the foreground, its own dependents first,
        as the garbage collector does (blocking its owner): whether it is gone. One that must
        wait for its dependents is itself held by ``foregroundDeletion`` meanwhile."""
        obj = self._objects[(rk.api_version, rk.kind)].get(key)
        if obj is None:
            return True
        uid = obj["metadata"]["uid"]
        if not self._reap_dependents(uid, changes):
            if not obj["metadata"].get("deletionTimestamp"):
                new = clone(obj)
                new["metadata"]["deletionTimestamp"] = self.now()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                new["metadata"].setdefault("finalizers", []).append(FOREGROUND)
                self._replace_meta(rk, key, new, obj, changes)
            return False
        if FOREGROUND in (obj["metadata"].get("finalizers") or []):
            self._drop_finalizer(rk, key, obj, changes)
        elif not obj["metadata"].get("deletionTimestamp"):
            self._delete(rk, key, "Background", changes)
        return self._uids.get(uid) is None

    def _reap_dependents(self, uid: str, changes: builtins.list[Change]) -> bool:
        """Reap ``uid``'s dependents (one with another live owner only loses this one):
        whether none is left."""
        done = True
        for rk, key, obj in self._dependents(uid):
            if any(u != uid and self._alive(u) for u in _owner_uids(obj)):
                self._drop_owner(rk, key, obj, uid, changes)
                continue
            done = self._reap(rk, key, changes) and done
        return done

    def _finish_foreground(self, rk: ResourceKind, key: _ObjKey, uid: str) -> None:
        """The garbage collector's turn at an owner deleted in the foreground: its dependents
        go; when none is left, so does its ``foregroundDeletion`` finalizer (and it, if that
        was the last). A dependent that stays brings it back here when it goes."""
        changes: builtins.list[Change] = []
        with self._lock:
            obj = self._objects.get((rk.api_version, rk.kind), {}).get(key)
            if obj is None or obj["metadata"]["uid"] != uid:
                return
            if FOREGROUND in (obj["metadata"].get("finalizers") or []) and self._reap_dependents(
                uid, changes
            ):
                self._drop_finalizer(rk, key, obj, changes)
        self._notify(changes)

    def _drop_finalizer(
        self, rk: ResourceKind, key: _ObjKey, obj: Obj, changes: builtins.list[Change]
    ) -> None:
        new = clone(obj)
        new["metadata"]["finalizers"] = [
            f for f in new["metadata"].get("finalizers", []) if f != FOREGROUND
        ]
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
        self._replace(rk, key, new, changes)

    def _replace_meta(
        self, rk: ResourceKind, key: _ObjKey, new: Obj, old: Obj, changes: builtins.list[Change]
    ) -> None:
        """Store ``new`` with server-owned metadata changed (``_replace`` keeps the old)."""
        self._rv += 1
        new["metadata"]["resourceVersion"] = str(self._rv)
        self._put((rk.api_version, rk.kind), key, new)
        self._record(changes, "MODIFIED", rk, new, old)

    # --- the work that follows a deletion ------------------------------------------------------

    def _schedule(self, work: Callable[..., None], *args: Any) -> None:
        """Have the garbage collector do ``work`` soon: on the store's worker thread (started
        on demand, gone when idle), or at a ``run_pending``; not before it notices (``gc``).
        Call with the lock held."""
        self._pending += 1
        self._work.append((max(self.clock(), self._gc_from), work, args))
        self._wake()

    def _wake(self) -> None:
        """Start the worker if there is work it may do (lock held)."""
        if self._threaded and self._gc_running and self._work:
            if self._worker is None:
                self._worker = threading.Thread(target=self._drain, name="fakekube-gc", daemon=True)
                self._worker.start()
            self._idle.notify_all()

    def _due(self) -> tuple[Callable[..., None], tuple[Any, ...]] | None:
        """The oldest work the garbage collector may do now, taken off the queue (lock held)."""
        if not self._gc_running:
            return None
        now = self.clock()
        for i, (when, work, args) in enumerate(self._work):
            if when <= now:
                del self._work[i]
                return work, args
        return None

    def _drain(self) -> int:
        """Do the work that is due (how many pieces); a worker thread also waits for what
        comes due."""
        ran = 0
        while True:
            with self._idle:
                due = self._due()
                if due is None:
                    later = [when for when, _, _ in self._work]
                    if not (self._threaded and self._gc_running and later):
                        if self._threaded:
                            self._worker = None
                        return ran
                    self._idle.wait(max(0.001, min(later) - self.clock()))
                    continue
            work, args = due
            ran += 1
            try:
                work(*args)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def run_pending(self) -> bool:
        """Do the work that is due now, in this thread (``threaded=False``): whether there was
        any. Work it schedules is done too, if due."""
        if self._threaded:
            raise RuntimeError("Store(threaded=True) does its work on its own thread")
        return self._drain() > 0

    def also_catch_up(self, wait: Callable[[float], None]) -> None:
        """Have ``caught_up`` call ``wait(timeout)`` too: a helper's own thread (the kubelet's),
        which raises TimeoutError if its work is not done by then."""
        with self._lock:
            self._helpers.append(wait)

    def caught_up(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Wait until the background work due now is done: the garbage collector's (what it
        will do later, lagging, or once it runs again, does not count) and each helper's; the
        API server calls this before it answers (TimeoutError if it is never done)."""
        if self._threaded:
            with self._idle:
                if not self._idle.wait_for(self._nothing_due, timeout):
                    raise TimeoutError("fakekube: garbage collection due but not done")
        for wait in list(self._helpers):
            wait(timeout)

    def _nothing_due(self) -> bool:
        """No work running, and none that may run now (lock held)."""
        if not self._gc_running:
            return True
        now = self.clock()
        running = self._pending - len(self._work)
        return running == 0 and all(when > now for when, _, _ in self._work)

    def settle(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Wait until the garbage collector has nothing left to do (TimeoutError otherwise);
        work of an absent one (``gc(running=False)``) does not count."""
        if not self._threaded:
            self._drain()
            return
        with self._idle:
            idle = lambda: self._pending == 0 or not self._gc_running  # noqa: E731
            if not self._idle.wait_for(idle, timeout):
                raise TimeoutError("fakekube: deletions still pending")

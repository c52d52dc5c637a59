"""Deletion and garbage collection for the Store (a mixin of :class:`fakekube.store.Store`).

Propagation as the real server does it: ``Background`` removes the object at once and its
dependents shortly after; ``Foreground`` keeps the owner (with ``deletionTimestamp`` and the
``foregroundDeletion`` finalizer) until its dependents are gone; ``Orphan`` drops the owner
reference from the dependents. An object with finalizers stays, being deleted, until they are
removed. The "shortly after" work runs on a worker thread, or when ``run_pending`` is called.
"""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .resources import CRD_KEY, NAMESPACE_KEY, Change, ResourceKind, StoreError, clone

Obj = dict[str, Any]
_Bucket = tuple[str, str]  # (apiVersion, kind)
_ObjKey = tuple[str, str]  # (namespace or "", name)
PROPAGATIONS = ("Background", "Foreground", "Orphan")


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
        self._work: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._worker: threading.Thread | None = None

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
        if propagation == "Foreground" or meta.get("finalizers"):
            new = clone(obj)
            new["metadata"]["deletionTimestamp"] = self.now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if propagation == "Foreground":
                new["metadata"].setdefault("finalizers", []).append("foregroundDeletion")
                self._schedule(self._finish_foreground, rk, key, uid)
            self._rv += 1
            new["metadata"]["resourceVersion"] = str(self._rv)
            self._put((rk.api_version, rk.kind), key, new)
            self._record(changes, "MODIFIED", rk, new, obj)
            return clone(new), False
        gone = self._remove(rk, key, changes)
        if propagation == "Background":
            self._schedule(self._collect, uid)
        return gone, True

    def _remove(self, rk: ResourceKind, key: _ObjKey, changes: builtins.list[Change]) -> Obj:
        obj = self._pop((rk.api_version, rk.kind), key)
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

    def _remove_tree(self, uid: str, changes: builtins.list[Change]) -> None:
        """Remove ``uid``'s dependents at once, deepest first (foreground cascade)."""
        for rk, key, obj in self._dependents(uid):
            if key not in self._objects[(rk.api_version, rk.kind)]:
                continue
            if any(u != uid and self._alive(u) for u in _owner_uids(obj)):
                self._drop_owner(rk, key, obj, uid, changes)
                continue
            self._remove_tree(obj["metadata"]["uid"], changes)
            if obj["metadata"].get("finalizers"):
                self._delete(rk, key, "Background", changes)  # waits for its finalizers
            else:
                self._remove(rk, key, changes)

    def _finish_foreground(self, rk: ResourceKind, key: _ObjKey, uid: str) -> None:
        changes: builtins.list[Change] = []
        with self._lock:
            obj = self._objects.get((rk.api_version, rk.kind), {}).get(key)
            if obj is None or obj["metadata"]["uid"] != uid:
                return
            self._remove_tree(uid, changes)
            new = clone(obj)
            new["metadata"]["finalizers"] = [
                f for f in new["metadata"].get("finalizers", []) if f != "foregroundDeletion"
            ]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]
            self._replace(rk, key, new, changes)
        self._notify(changes)

    # --- the work that follows a deletion ------------------------------------------------------

    def _schedule(self, work: Callable[..., None], *args: Any) -> None:
        """Run ``work`` soon: on the store's worker thread (started on demand, gone when idle),
        or at the next ``run_pending``. Call with the lock held."""
        self._pending += 1
        self._work.append((work, args))
        if self._threaded and self._worker is None:
            self._worker = threading.Thread(target=self._drain, name="fakekube-gc", daemon=True)
            self._worker.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._work:
                    self._worker = None
                    return
                work, args = self._work.popleft()
            try:
                work(*args)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def run_pending(self) -> bool:
        """Do the scheduled work now, in this thread (``threaded=False``): whether there was
        any. Work it schedules is done too."""
        if self._threaded:
            raise RuntimeError("Store(threaded=True) does its work on its own thread")
        with self._lock:
            busy = bool(self._work)
        self._drain()
        return busy

    def settle(self, timeout: float = 2.0) -> None:
        """Wait until no garbage collection or deletion is pending (TimeoutError otherwise)."""
        if not self._threaded:
            self._drain()
            return
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout):
                raise TimeoutError("fakekube: deletions still pending")

"""The object store behind the fake API server: thread-safe, usable directly by tests.

Objects are plain dicts exactly as the API server speaks them. The store assigns ``uid``,
``resourceVersion`` (one global counter), ``creationTimestamp`` and ``generation``, keeps a bounded
history of changes for watches, collects garbage by ``ownerReferences`` (see ``collector``), and
holds pod logs and the in-memory files of volumes.

Changes made with :meth:`Store.update` replace the whole object (status included) and are not
validated: validation belongs to the API layer (``fakekube.api``), which uses ``apply_update``
for subresource rules and optimistic concurrency. Stored objects are replaced, never changed in
place (the watch history shares them); a CRD's spec is shared with the dict it was created
from, which must not change afterwards.

Time is the store's ``clock`` (seconds since 1970; the real one by default). Asynchronous work
(background garbage collection, foreground deletion) runs on a short-lived thread, or, with
``threaded=False``, when :meth:`Store.run_pending` is called (a fake clock calls it as time
passes); :meth:`Store.settle` waits for it either way.
"""

from __future__ import annotations

import builtins
import secrets
import string
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .access import NamespaceAccess
from .collector import Collector
from .resources import (
    BUILTIN_KINDS,
    CRD_KEY,
    NAMESPACE_KEY,
    Change,
    LogChunk,
    ResourceKind,
    StoreError,
    check_name,
    clone,
    crd_kinds,
    rfc3339,
    server_defaults,
)
from .selectors import field_matcher, label_matcher

Obj = dict[str, Any]
_Bucket = tuple[str, str]  # (apiVersion, kind)
_ObjKey = tuple[str, str]  # (namespace or "", name)

__all__ = ["Store"]

SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")


def _random_suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))


class Store(Collector):
    """All objects of the fake cluster. Every public method is thread-safe."""

    def __init__(
        self,
        *,
        history: int = 1000,
        clock: Callable[[], float] = time.time,
        threaded: bool = True,
    ) -> None:
        self.clock = clock
        # RBAC the API answers with (``fakekube.access``); None: everything is allowed
        self.access: NamespaceAccess | None = None
        # Mutating admission webhooks: each changes a new object before it is validated and
        # stored (the controller installs Kueue's)
        self.admission: builtins.list[Callable[[Obj], None]] = []
        self._lock = threading.RLock()
        self._kinds: dict[_Bucket, ResourceKind] = {}
        self._warming: set[_Bucket] = set()  # kinds whose storage is (re)initializing
        self._objects: dict[_Bucket, dict[_ObjKey, Obj]] = {}
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=history)
        self._floor = 0  # a watch can resume from any resourceVersion >= this
        self._subscribers: builtins.list[Callable[[str, Obj], None]] = []
        self._wakers: builtins.list[Callable[[], None]] = []
        # pod logs by (namespace, pod), then container; they go with the pod (Collector)
        self._logs: dict[_ObjKey, dict[str, builtins.list[LogChunk]]] = {}
        self._fs: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]] = {}
        self._init_collector(threaded)
        for kind in BUILTIN_KINDS:
            self.register_kind(kind)
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})

    def now(self) -> str:
        """The store's time as the server writes it."""
        return rfc3339(self.clock())

    # --- kinds ----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion handed out."""
        with self._lock:
            return self._rv

    def register_kind(self, kind: ResourceKind) -> None:
        """Serve ``kind`` (installing a CRD does this for each of its served versions)."""
        with self._lock:
            self._kinds[(kind.api_version, kind.kind)] = kind
            self._objects.setdefault((kind.api_version, kind.kind), {})

    def kinds(self) -> builtins.list[ResourceKind]:
        with self._lock:
            return list(self._kinds.values())

    def kind(self, api_version: str, kind: str) -> ResourceKind:
        """The served kind; StoreError 404 when nothing serves it."""
        with self._lock:
            found = self._kinds.get((api_version, kind))
        if found is None:
            raise StoreError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({kind} {api_version})",
                {},
            )
        return found

    def kind_by_plural(self, group: str, version: str, plural: str) -> ResourceKind | None:
        with self._lock:
            for kind in self._kinds.values():
                if (kind.group, kind.version, kind.plural) == (group, version, plural):
                    return kind
        return None

    def register_crd(self, crd: Obj) -> None:
        """Serve each version the CRD serves (creating a CRD object does this)."""
        for kind in crd_kinds(crd):
            self.register_kind(kind)

    def warm_up(self, crd: Obj) -> None:
        """The CRD was just installed: the first list of each of its kinds finds the storage
        still (re)initializing (429), as on a real server."""
        with self._lock:
            self._warming.update((k.api_version, k.kind) for k in crd_kinds(crd))

    def initializing(self, api_version: str, kind: str) -> bool:
        """Whether this list finds the kind's storage initializing (only the first one does)."""
        with self._lock:
            found = (api_version, kind) in self._warming
            self._warming.discard((api_version, kind))
            return found

    # --- reading ---------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A copy of the object, or None."""
        rk = self.kind(api_version, kind)
        with self._lock:
            obj = self._objects[(api_version, kind)].get(self._key(rk, namespace, name))
            return clone(obj) if obj is not None else None

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
    ) -> builtins.list[Obj]:
        """Copies of the matching objects, ordered by namespace and name (all namespaces: None)."""
        items, _, _ = self.page(api_version, kind, namespace, label_selector, field_selector)
        return items

    def page(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        *,
        limit: int = 0,
        after: _ObjKey | None = None,
    ) -> tuple[builtins.list[Obj], int, _ObjKey | None]:
        """``(items, resourceVersion, last key when more remain)``: one page of a list.

        ``after`` is the last key of the previous page; items come in key order, so an unchanged
        set is never skipped or repeated across pages.
        """
        rk = self.kind(api_version, kind)
        labels = label_matcher(label_selector)
        fields = field_matcher(kind, field_selector)
        with self._lock:
            bucket = self._objects[(api_version, kind)]
            keys = sorted(k for k in bucket if after is None or k > after)
            out: builtins.list[Obj] = []
            last: _ObjKey | None = None
            for key in keys:
                if namespace is not None and rk.namespaced and key[0] != namespace:
                    continue
                obj = bucket[key]
                if not (labels(obj) and fields(obj)):
                    continue
                if limit and len(out) == limit:
                    return out, self._rv, last
                out.append(clone(obj))
                last = key
            return out, self._rv, None

    # --- writing ---------------------------------------------------------------------------

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        """Store a new object; returns it as stored.

        Fills uid, resourceVersion, creationTimestamp, generation, the namespace ("default");
        honours generateName. StoreError 409 AlreadyExists when the name is taken, 404 when the
        namespace does not exist, 422 for an invalid name. ``dry_run``: every check, nothing
        stored (the answer has no resourceVersion, as the server's to ``dryRun=All``).
        """
        changes: builtins.list[Change] = []
        with self._lock:
            out = self._create(obj, changes, dry_run)
        self._notify(changes)
        return out

    def _create(self, original: Obj, changes: builtins.list[Change], dry_run: bool) -> Obj:
        rk = self.kind(str(original.get("apiVersion")), str(original.get("kind")))
        is_crd = (rk.api_version, rk.kind) == CRD_KEY
        # CRDs are big and must not change once installed: share their spec rather than copy it
        obj = (
            {**original, "metadata": clone(original.get("metadata"))} if is_crd else clone(original)
        )
        for mutate in () if is_crd else self.admission:
            mutate(obj)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise StoreError(400, "BadRequest", "metadata must be an object")
        bucket = self._objects[(rk.api_version, rk.kind)]
        namespace = ""
        if rk.namespaced:
            namespace = meta["namespace"] = meta.get("namespace") or "default"
            if ("", namespace) not in self._objects[NAMESPACE_KEY]:
                raise StoreError(
                    404,
                    "NotFound",
                    f'namespaces "{namespace}" not found',
                    {"name": namespace, "kind": "namespaces"},
                )
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        if not name:
            name = meta["name"] = self._generated_name(rk, meta.get("generateName"), namespace)
        check_name(rk, name)
        if (namespace, name) in bucket:
            raise StoreError(
                409, "AlreadyExists", f'{rk.resource} "{name}" already exists', rk.details(name)
            )
        for key in (*SERVER_META, "resourceVersion", "selfLink", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        meta["generation"] = 1
        server_defaults(rk, obj, self.now())
        if dry_run:
            return clone(obj)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._put((rk.api_version, rk.kind), (namespace, name), obj)
        self._record(changes, "ADDED", rk, obj)
        if is_crd:
            self.register_crd(original)
            return {**obj}
        return clone(obj)

    def _generated_name(self, rk: ResourceKind, prefix: str | None, namespace: str) -> str:
        if not prefix:
            required = "Required value: name or generateName is required"
            raise StoreError(
                422,
                "Invalid",
                f'{rk.kind} "" is invalid: metadata.name: {required}',
                {
                    **rk.details(""),
                    "causes": [
                        {
                            "reason": "FieldValueRequired",
                            "message": required,
                            "field": "metadata.name",
                        }
                    ],
                },
            )
        bucket = self._objects[(rk.api_version, rk.kind)]
        name = prefix + _random_suffix()
        while (namespace, name) in bucket:
            name = prefix + _random_suffix()
        return name

    def update(self, obj: Obj) -> Obj:
        """Replace the stored object (metadata, spec and status); returns it as stored.

        Server-owned metadata (uid, creationTimestamp, deletionTimestamp) is kept; generation
        grows when anything outside metadata and status changes; an unchanged object is not
        written again. Removing the last finalizer of an object being deleted removes it.
        """
        return self.apply_update(obj)

    def apply_update(self, obj: Obj, *, keep_status: bool = False, check_rv: bool = False) -> Obj:
        """:meth:`update` with the API layer's options.

        ``keep_status``: the stored status stays (a write to a kind with a status subresource).
        ``check_rv``: 409 Conflict when ``obj`` carries a resourceVersion that is not the
        current one.
        """
        rk = self.kind(str(obj.get("apiVersion")), str(obj.get("kind")))
        meta = obj.get("metadata") or {}
        changes: builtins.list[Change] = []
        with self._lock:
            key = self._key(rk, meta.get("namespace"), str(meta.get("name")))
            existing = self._existing(rk, key)
            rv = meta.get("resourceVersion")
            if check_rv and rv and rv != existing["metadata"]["resourceVersion"]:
                raise StoreError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rk.resource} "{key[1]}": the object has '
                    "been modified; please apply your changes to the latest version and try again",
                    rk.details(key[1]),
                )
            new = clone(obj)
            if keep_status:
                new.pop("status", None)
                if "status" in existing:
                    new["status"] = clone(existing["status"])
            out = self._replace(rk, key, new, changes)
        self._notify(changes)
        return out

    def patch_status(
        self, api_version: str, kind: str, namespace: str | None, name: str, status: Obj
    ) -> Obj:
        """Replace ``.status``; returns the object as stored."""
        rk = self.kind(api_version, kind)
        changes: builtins.list[Change] = []
        with self._lock:
            key = self._key(rk, namespace, name)
            new = clone(self._existing(rk, key))
            new["status"] = clone(status)
            out = self._replace(rk, key, new, changes)
        self._notify(changes)
        return out

    def _replace(
        self, rk: ResourceKind, key: _ObjKey, new: Obj, changes: builtins.list[Change]
    ) -> Obj:
        existing = self._objects[(rk.api_version, rk.kind)][key]
        old_meta = existing["metadata"]
        meta = new.setdefault("metadata", {})
        meta["name"], meta["namespace"] = key[1], key[0]
        if not rk.namespaced:
            del meta["namespace"]
        for name in SERVER_META:
            if name in old_meta:
                meta[name] = old_meta[name]
            else:
                meta.pop(name, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        if "generation" in old_meta:
            outside = {k for k in (*new, *existing) if k not in ("metadata", "status")}
            changed = any(new.get(k) != existing.get(k) for k in outside)
            meta["generation"] = old_meta["generation"] + (1 if changed else 0)
        if rk.kind == "Secret" and not rk.group and "stringData" in new:
            server_defaults(rk, new, self.now())
        if new == existing:
            return clone(existing)
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._put((rk.api_version, rk.kind), key, new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rk, key, changes)
            self._schedule(self._collect, meta["uid"])
            return clone(new)
        self._record(changes, "MODIFIED", rk, new, existing)
        return clone(new)

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _key(rk: ResourceKind, namespace: str | None, name: str) -> _ObjKey:
        return ((namespace or "default") if rk.namespaced else "", name)

    def _existing(self, rk: ResourceKind, key: _ObjKey) -> Obj:
        obj = self._objects[(rk.api_version, rk.kind)].get(key)
        if obj is None:
            raise StoreError(
                404, "NotFound", f'{rk.resource} "{key[1]}" not found', rk.details(key[1])
            )
        return obj

    # --- the watch history and who is told of changes: a bounded log of changes that watches
    # resume from (410 once a version has fallen out of it, or after `compact`) -----------

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

    # --- what pods hold beyond their objects: container logs, kept per run, and the in-memory
    # files of volumes -----------------------------------------------------------------------

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

"""The object store behind the fake API server: thread-safe, usable directly by tests.

Objects are plain dicts exactly as the API server speaks them. The store assigns ``uid``,
``resourceVersion`` (one global counter), ``creationTimestamp`` and ``generation``, keeps a bounded
history of changes for watches, collects garbage by ``ownerReferences``, and holds pod logs and
the in-memory files of volumes.

Changes made with :meth:`Store.update` replace the whole object (status included) and are not
validated: validation belongs to the API layer (``fakekube.api``), which uses ``apply_update``
for subresource rules and optimistic concurrency. Stored objects are replaced, never changed in
place (the watch history shares them); a CRD's spec is shared with the dict it was created
from, which must not change afterwards.

Time is the store's ``clock`` (seconds since 1970; the real one by default).

Deletion propagates as the real server does it: ``Background`` removes the object at once and its
dependents shortly after; ``Foreground`` keeps the owner (with ``deletionTimestamp`` and the
``foregroundDeletion`` finalizer) until its dependents are gone, deepest first; ``Orphan`` drops
the owner reference from the dependents. An object with finalizers stays, being deleted, until
they are removed. A pod bound to a node stays ``Terminating`` until that node's kubelet confirms
it stopped: at once here, unless the test said the node has no kubelet (``kubelet_down``), as a
real one stays. A dependent that stays holds its foreground owners (and theirs) until it goes.

The "shortly after" work is the garbage collector's: it runs on a worker thread, which
``settle`` waits for. Like a real one it can lag
(``gc(lag=30)``: it notices what there is to do only 30 s of the store's time from now, as a real
one notices a newly installed kind) or be absent (``gc(running=False)``: nothing it would do
happens until it runs again).

The worker never races a test: the API server answers each request only once the work that is
due is done (``caught_up``), as if the collector were instant. The states in between are still
there for watches to see, and for any request while the collector lags or is absent.
"""

from __future__ import annotations

import builtins
import math
import secrets
import string
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from .access import NamespaceAccess
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
PROPAGATIONS = ("Background", "Foreground", "Orphan")
FOREGROUND = "foregroundDeletion"  # the finalizer of an owner deleted in the foreground
# Seconds a wait for the background work gives it before it calls it stuck: it is done in
# milliseconds, but a machine under load may not run the worker for a while.
SETTLE_TIMEOUT = 30.0


def _owner_uids(obj: Obj) -> list[str]:
    return [r.get("uid", "") for r in (obj.get("metadata") or {}).get("ownerReferences") or []]


def _random_suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))


class Store:
    """All objects of the fake cluster. Every public method is thread-safe."""

    def __init__(
        self,
        *,
        history: int = 1000,
        clock: Callable[[], float] = time.time,
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
        # pod logs by (namespace, pod), then container; they go with the pod (_remove)
        self._logs: dict[_ObjKey, dict[str, builtins.list[LogChunk]]] = {}
        self._fs: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]] = {}
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

    # --- deletion and garbage collection ------------------------------------------------------

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
        on demand, gone when idle); not before it notices (``gc``).
        Call with the lock held."""
        self._pending += 1
        self._work.append((max(self.clock(), self._gc_from), work, args))
        self._wake()

    def _wake(self) -> None:
        """Start the worker if there is work it may do (lock held)."""
        if self._gc_running and self._work:
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

    def _drain(self) -> None:
        """The worker thread: do the work that is due, and wait for what comes due."""
        while True:
            with self._idle:
                due = self._due()
                if due is None:
                    later = [when for when, _, _ in self._work]
                    if not (self._gc_running and later):
                        self._worker = None
                        return
                    self._idle.wait(max(0.001, min(later) - self.clock()))
                    continue
            work, args = due
            try:
                work(*args)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def caught_up(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Wait until the background work due now is done: the garbage collector's (what it
        will do later, lagging, or once it runs again, does not count) and each helper's; the
        API server calls this before it answers (TimeoutError if it is never done)."""
        with self._idle:
            if not self._idle.wait_for(self._nothing_due, timeout):
                raise TimeoutError("fakekube: garbage collection due but not done")

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
        with self._idle:
            idle = lambda: self._pending == 0 or not self._gc_running  # noqa: E731
            if not self._idle.wait_for(idle, timeout):
                raise TimeoutError("fakekube: deletions still pending")

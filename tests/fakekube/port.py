"""The fake cluster's one store (``Objects``) and the ``kfcompile.lifecycle.ports.Cluster`` port
over it (``PortFake``); the HTTP server (``fakekube.server``) serves the same store.

``Objects`` answers as the API server does (``StoreError``, a ``Status``, where it refuses):
``submit`` (defaulted, validated by ``fakekube.validation``), merge ``patch``, ``delete``,
``page`` (selectors, continue tokens), watch ``events`` (410 once ``compact`` forgot them),
``log_read``, ``exec_target``; events.k8s.io/v1 Events are stored as core/v1 ones. One lock
guards it (the server answers on its own thread). Stored objects are replaced, never changed in
place (the history shares them); ``put``, ``change``, ``remove`` are a controller's writes,
unchecked. Deletion as the API server and garbage collector do it: Background, Foreground
(the owner stays, ``foregroundDeletion``, until its dependents are gone), Orphan; finalizers;
a running pod on a node in ``kubelets_down`` stays Terminating (and its log read is a 500).
``collect`` (the collector) runs at each clock tick (or when a test calls it), never inside a
request: as a real one works apart from the API server's answers, an object deleted in the
foreground is seen Terminating (``deletionTimestamp`` and the finalizer) until it has run;
``gc(lag=30)`` delays it, as a real one notices a new kind late, ``gc(running=False)`` stops it.

``PortFake``: nothing moves a job by itself; a test scripts it (``at``, ``fakekube.jobs``) and
``FakeClock`` runs it when the code under test waits; an idle watch or followed log waits on the
fake clock. Faults and the record of calls are ``faults.Faults`` and ``requestlog.RequestLog``
(a call: its method name and ``Kind/name``); errors are the port's ``ApiError`` family.
"""

from __future__ import annotations

import base64
import bisect
import builtins
import json
import math
import re
import secrets
import string
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

from kfcompile.lifecycle.ports import ExecOutput, ExecResult, Page, Ref, Transient, WatchEvent

from .access import Attempt, NamespaceAccess
from .clock import FakeClock
from .events import EVENTS_V1, EVENTS_V1_KEY, Conversion
from .faults import Fault, Faults, port_error
from .kueue import CONVERSIONS as KUEUE_CONVERSIONS
from .requestlog import RequestLog, RequestRecord
from .resources import (
    BUILTIN_KINDS,
    CRD_KEY,
    NAMESPACE_KEY,
    ResourceKind,
    StoreError,
    check_name,
    clone,
    crd_kinds,
    rfc3339,
    server_defaults,
)
from .selectors import Matcher, field_matcher, label_matcher
from .shell import Filesystem, reads_stdin, run_command
from .validation import merge_patch, validate

__all__ = ["Objects", "PortFake", "rfc3339"]

Obj = dict[str, Any]
Key = tuple[str, str, str | None, str]
FOREGROUND = "foregroundDeletion"  # the finalizer of an owner deleted in the foreground
PROPAGATIONS = ("Background", "Foreground", "Orphan")
SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
# Versions served from another's storage: the same objects, under other field names.
CONVERSIONS: dict[tuple[str, str], Conversion] = {EVENTS_V1_KEY: EVENTS_V1, **KUEUE_CONVERSIONS}
FINISHED = ("Succeeded", "Failed")
T = TypeVar("T")


def bad(message: str, code: int = 400, reason: str = "BadRequest") -> StoreError:
    return StoreError(code, reason, message)


def _owners(obj: Obj) -> list[str]:
    return [r.get("uid", "") for r in obj["metadata"].get("ownerReferences") or []]


def _status(pod: Obj, container: str) -> Obj:
    """The container's entry in the pod's status ({} if none)."""
    status = pod.get("status") or {}
    entries = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return next((dict(e) for e in entries if e.get("name") == container), {})


def container_of(pod: Obj, container: str | None) -> str:
    """The container a request means: the one named (400 if the pod has none so named), or the
    pod's only one."""
    name, spec = pod["metadata"]["name"], pod.get("spec") or {}
    names = [c["name"] for c in spec.get("containers") or []]
    init = [c["name"] for c in spec.get("initContainers") or []]
    if not container:
        if len(names) != 1:
            also = f" or one of the init containers: [{' '.join(init)}]" if init else ""
            raise bad(
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(names)}]{also}"
            )
        return str(names[0])
    if container not in names + init:
        raise bad(f"container {container} is not valid for pod {name}")
    return container


def _lines(chunks: Iterable[tuple[float, str, int]], stamps: bool) -> list[str]:
    """The chunks' lines (ends kept), each after its time if ``stamps``. A line ends at ``\n``
    only, as the kubelet's do (a ``\r`` of a progress bar stays inside its line)."""
    out: list[str] = []
    for at, text, _ in chunks:
        lines = re.findall(r"[^\n]*\n|[^\n]+", text)
        out += [f"{rfc3339(at, nano=True)} {x}" for x in lines] if stamps else lines
    return out


@dataclass
class LogRead:
    """One run of a container's log as a reader sees it: what is new since the last ``more``."""

    store: Objects
    key: tuple[str, str, str]  # namespace, pod, container
    run: int  # its restartCount: a follow ends with the run
    stamps: bool
    seen: int = 0  # chunks of the log already given
    ended: bool = False  # the answer was empty and closed (a pod not scheduled yet)

    def more(self) -> list[str]:
        with self.store.lock:
            chunks = [] if self.ended else self.store.logs.get(self.key, [])[self.seen :]
            self.seen += len(chunks)
        return _lines([c for c in chunks if c[2] == self.run], self.stamps)

    def finished(self) -> bool:
        """Whether the run has ended (its pod gone or done, the container ended or restarted)."""
        pod = self.store.get("v1", "Pod", self.key[0], self.key[1])
        if self.ended or pod is None or (pod.get("status") or {}).get("phase") in FINISHED:
            return True
        status = _status(pod, self.key[2])
        ended = "terminated" in (status.get("state") or {})
        return ended or status.get("restartCount", 0) != self.run


class Objects:
    """All objects of the fake cluster; every public method is thread-safe."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.rv = 0
        self.items: dict[Key, Obj] = {}
        # (resourceVersion, type, object, the object before: None when it is new)
        self.changes: list[tuple[int, str, Obj, Obj | None]] = []
        self.compacted = 0  # versions before this give 410
        self.kinds = {(k.api_version, k.kind): k for k in BUILTIN_KINDS}
        self.volumes: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]] = {}
        # (namespace, pod, container): (time, text, run: the container's restartCount)
        self.logs: dict[tuple[str, str, str], list[tuple[float, str, int]]] = {}
        self.access: NamespaceAccess | None = None  # RBAC (``fakekube.access``); None: all
        # Mutating admission webhooks: each changes a new object before it is validated
        self.admission: list[Callable[[Obj], None]] = []
        # Told of each object a request (or a test's ``create``) creates, and each it patches
        self.on_create: list[Callable[[Obj], object]] = []
        self.on_patch: list[Callable[[Obj], object]] = []
        # Told of each object gone from the store (a controller that re-creates what it owns)
        self.on_remove: list[Callable[[Obj], object]] = []
        self.wakers: list[Callable[[], None]] = []  # told of every change (streams)
        self.gc_running, self.gc_from = True, -math.inf
        # Controllers that act on what the collector did, in its passes (Kueue letting the
        # Workload of a deleted job go: ``kueue.releases``)
        self.controllers: list[Callable[[], None]] = []
        # Nodes whose kubelet does not answer: their deleted pods stay Terminating, their logs
        # are answered 500 (the API server's dial error)
        self.kubelets_down: set[str] = set()
        # (resourceVersion, nodes without kubelet) the collector last had nothing to do at
        self._collected: tuple[int, frozenset[str]] | None = None
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})

    # --- kinds -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self.rv

    def served(self, api_version: str, kind: str) -> ResourceKind | None:
        return self.kinds.get((api_version, kind))

    def kind(self, api_version: str, kind: str) -> ResourceKind:
        """The served kind; StoreError 404 when nothing serves it."""
        found = self.kinds.get((api_version, kind))
        if found is None:
            message = f"the server could not find the requested resource ({kind} {api_version})"
            raise StoreError(404, "NotFound", message, {})
        return found

    def kind_by_plural(self, group: str, version: str, plural: str) -> ResourceKind | None:
        with self.lock:
            kinds = list(self.kinds.values())
        wanted = (group, version, plural)
        return next((k for k in kinds if (k.group, k.version, k.plural) == wanted), None)

    def authorize(self, verb: str, rk: ResourceKind, namespace: str | None, name: str | None = None,
                  sub: str | None = None) -> None:  # fmt: skip
        """StoreError 403 when RBAC (``access``) does not allow this."""
        if self.access is not None:
            self.access.check(Attempt(verb, rk, namespace, name, sub))

    @staticmethod
    def _key(rk: ResourceKind, namespace: str | None, name: str) -> Key:
        """Where an object of ``rk`` is stored (events.k8s.io/v1 Events: as core/v1 ones)."""
        conversion = CONVERSIONS.get((rk.api_version, rk.kind))
        stored = conversion.stored if conversion else (rk.api_version, rk.kind)
        return (*stored, (namespace or "default") if rk.namespaced else None, name)

    @staticmethod
    def _out(rk: ResourceKind, obj: Obj) -> Obj:
        """A copy of a stored object as ``rk`` serves it."""
        conversion = CONVERSIONS.get((rk.api_version, rk.kind))
        return clone(conversion.read(obj) if conversion else obj)

    @staticmethod
    def _in(rk: ResourceKind, obj: Obj) -> Obj:
        """An object of ``rk`` as it is stored."""
        conversion = CONVERSIONS.get((rk.api_version, rk.kind))
        return conversion.write(obj) if conversion else obj

    # --- reading ---------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A copy of the object, or None."""
        rk = self.kind(api_version, kind)
        with self.lock:
            obj = self.items.get(self._key(rk, namespace, name))
            return self._out(rk, obj) if obj is not None else None

    def current(self, rk: ResourceKind, namespace: str | None, name: str) -> Obj:
        """A copy of the object as ``rk`` serves it; StoreError 404 when there is none."""
        found = self.get(rk.api_version, rk.kind, namespace, name)
        if found is None:
            raise StoreError(404, "NotFound", f'{rk.resource} "{name}" not found', rk.details(name))
        return found

    def matcher(
        self, rk: ResourceKind, namespace: str | None, labels: str = "", fields: str = ""
    ) -> Matcher:
        """Which stored objects a list or watch of ``rk`` with these selectors has (StoreError
        400 for a selector that does not parse, in the server's words)."""
        conversion = CONVERSIONS.get((rk.api_version, rk.kind))
        stored = self._key(rk, namespace, "")
        by_labels = label_matcher(labels)
        by_fields = field_matcher(stored[1], conversion.fields(fields) if conversion else fields)

        def matches(obj: Obj) -> bool:
            ns = obj["metadata"].get("namespace")
            return (
                (obj["apiVersion"], obj["kind"]) == stored[:2]
                and (namespace is None or not rk.namespaced or ns == namespace)
                and by_labels(obj)
                and by_fields(obj)
            )

        return matches

    def _selected(self, rk: ResourceKind, matches: Matcher) -> list[tuple[Key, Obj]]:
        stored = self._key(rk, None, "")[:2]
        keys = sorted((k for k in self.items if k[:2] == stored), key=lambda k: (k[2] or "", k[3]))
        return [(k, self.items[k]) for k in keys if matches(self.items[k])]

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, selector: str = ""
    ) -> builtins.list[Obj]:
        """Copies of the matching objects, ordered by namespace and name (all namespaces: None)."""
        return self.page(self.kind(api_version, kind), namespace, selector)[0]

    def page(self, rk: ResourceKind, namespace: str | None, labels: str = "", fields: str = "", *,
             limit: int = 0, token: str | None = None
    ) -> tuple[builtins.list[Obj], int, str | None, int | None]:  # fmt: skip
        """One page of a list: ``(items, resourceVersion, continue token when more remain, how
        many remain)`` (counted only without selectors, as the server does). A token says the
        last key given, so an unchanged set is never skipped or repeated; StoreError 400 for a
        bad token, 410 for one older than the last ``compact``."""
        matches = self.matcher(rk, namespace, labels, fields)
        with self.lock:
            rv, after = self.rv, ("", "")
            if token:
                try:
                    decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                    rv, after = int(decoded["rv"]), (decoded["start"][0], decoded["start"][1])
                except (ValueError, KeyError, TypeError, IndexError) as exc:
                    raise bad(f"continue key is not valid: {exc}") from exc
                if rv < self.compacted:
                    raise StoreError(410, "Expired", "The provided continue parameter is too old "
                                     "to display a consistent list result. You can start a new "
                                     "list without the continue parameter.")  # fmt: skip
            found = [(k, o) for k, o in self._selected(rk, matches) if (k[2] or "", k[3]) > after]
            page = found[:limit] if limit else found
            items = [self._out(rk, obj) for _, obj in page]
        if len(page) == len(found):
            return items, rv, None, None
        last = page[-1][0]
        start = json.dumps({"rv": rv, "start": [last[2] or "", last[3]]})
        left = None if labels or fields else len(found) - len(page)
        return items, rv, base64.urlsafe_b64encode(start.encode()).decode(), left

    def snapshot(self, rk: ResourceKind, matches: Matcher) -> tuple[builtins.list[Obj], int]:
        """What a watch from "now" starts with: the matching objects and the resourceVersion."""
        with self.lock:
            return [self._out(rk, o) for _, o in self._selected(rk, matches)], self.rv

    def events(
        self, rk: ResourceKind, matches: Matcher, cursor: int
    ) -> tuple[builtins.list[tuple[str, Obj]], int]:
        """The watch events after ``cursor`` and the cursor after them (StoreError 410 when the
        history no longer reaches back that far). An object leaving the selection is DELETED
        for the watcher, one entering it ADDED, as the server's watch cache says."""
        with self.lock:
            if cursor < self.compacted:
                message = f"too old resource version: {cursor} ({self.compacted + 1})"
                raise StoreError(410, "Expired", message)
            changes = self.changes[bisect.bisect(self.changes, cursor, key=itemgetter(0)) :]
        out = []
        for _, type_, obj, old in changes:
            now, before = type_ != "DELETED" and matches(obj), old is not None and matches(old)
            if now or before:
                seen = "MODIFIED" if now and before else "ADDED" if now else "DELETED"
                out.append((seen, self._out(rk, obj)))
        return out, changes[-1][0] if changes else cursor

    # --- writing ---------------------------------------------------------------------------

    def _write(
        self, type_: str, key: Key, obj: Obj, old: Obj | None, *, given: Obj | None = None
    ) -> Obj:
        """Record a change of ``key`` (``obj``: the object now, or as it went; ``given``: a CRD
        as given, whose spec the kinds it serves share, so that its validator is built once
        however many clusters install it: ``kfcompile.output.crd`` caches it by identity)."""
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        if type_ == "DELETED":
            del self.items[key]
        else:
            self.items[key] = obj
        if key[:2] == CRD_KEY:  # what a CRD serves goes with it
            kept = self.kinds.items()
            self.kinds = {k: v for k, v in kept if not v.crd or v.crd["metadata"]["name"] != key[3]}
            if type_ != "DELETED":
                self.kinds |= {(k.api_version, k.kind): k for k in crd_kinds(given or obj)}
        self.changes.append((self.rv, type_, obj, old if type_ != "ADDED" else None))
        self.wake()
        return obj

    def wake(self) -> None:
        """Tell the streams something may have changed."""
        for waker in list(self.wakers):
            waker()

    def put(self, obj: Obj) -> Obj:
        """Store ``obj`` as a controller writes it (created, or replaced as ``_replace`` does) and
        return it as stored; no checks. Neither ``obj`` nor the answer may be changed after."""
        with self.lock:
            rk, given = self.kind(obj["apiVersion"], obj["kind"]), obj
            obj = self._in(rk, obj)
            obj = {**obj, "metadata": dict(obj.get("metadata") or {})}
            meta = obj["metadata"]
            key = self._key(rk, meta.get("namespace"), meta["name"])
            if key in self.items:
                return self._replace(key, obj)
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", rfc3339(self.clock.time()))
            meta.setdefault("generation", 1)
            return self._write("ADDED", key, obj, None, given=given)

    def change(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: Obj
    ) -> Obj:
        """A controller's merge patch (a status, a label...) of a stored object."""
        with self.lock:
            key = self._key(self.kind(api_version, kind), namespace, name)
            return self._replace(key, merge_patch(self.items[key], patch))

    def patch_status(
        self, api_version: str, kind: str, namespace: str | None, name: str, status: Obj
    ) -> Obj:
        """Replace ``.status`` (as the controllers do, through the status subresource)."""
        with self.lock:
            key = self._key(self.kind(api_version, kind), namespace, name)
            return self._replace(key, {**self.items[key], "status": clone(status)})

    def remove(self, key: Key) -> None:
        """Gone at once (what it owns goes at the collector's next pass); its pod's logs and
        scratch files with it."""
        with self.lock:
            gone = self.items[key]
            self._write("DELETED", key, gone, gone)
            if key[:2] == ("v1", "Pod"):
                for log in [k for k in self.logs if k[:2] == key[2:]]:
                    del self.logs[log]
                for fs in [k for k in self.volumes if k[0] == "pod" and k[1:3] == key[2:]]:
                    del self.volumes[fs]
            for hook in self.on_remove:
                hook(gone)

    def _replace(
        self, key: Key, new: Obj, *, server: bool = False, keep_status: bool = False
    ) -> Obj:
        """Store ``new`` over ``key``'s object: the server's metadata kept (``server``: it is the
        server writing it), generation grown when anything outside metadata and status changed,
        nothing written when nothing changed; removed if it was being deleted and lost its last
        finalizer."""
        old = self.items[key]
        was, meta = old["metadata"], dict(new.get("metadata") or {})
        new = {**new, "metadata": meta}
        meta["name"], meta["namespace"] = key[3], key[2]
        if key[2] is None:
            del meta["namespace"]
        for field in () if server else SERVER_META:
            if field in was:
                meta[field] = was[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = was["resourceVersion"]
        outside = {k for k in (*new, *old) if k not in ("metadata", "status")}
        grown = any(new.get(k) != old.get(k) for k in outside)
        meta["generation"] = was.get("generation", 1) + grown
        if keep_status:
            new = {k: v for k, v in new.items() if k != "status"}
            new |= {"status": old["status"]} if "status" in old else {}
        if key[:2] == ("v1", "Secret") and "stringData" in new:
            server_defaults(self.kind("v1", "Secret"), new, rfc3339(self.clock.time()))
        if new == old:
            return old
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not self._held(new):
            self.remove(key)
            return new
        return self._write("MODIFIED", key, new, old)

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        """The API server's create, unvalidated (what a test seeds; ``submit`` validates): the
        namespace (``default``) must exist, ``generateName`` is honoured, the name checked (422),
        taken (409); uid, resourceVersion, creationTimestamp, generation and the server's defaults
        filled in. ``dry_run``: all that, nothing stored (the answer has no resourceVersion, as
        the server's to ``dryRun=All``). Each ``on_create`` hook is told of what it stored."""
        with self.lock:
            rk, original = self.kind(str(obj.get("apiVersion")), str(obj.get("kind"))), obj
            is_crd = (rk.api_version, rk.kind) == CRD_KEY
            # CRDs are big and must not change once installed: their spec is shared, not copied
            obj = {**obj, "metadata": clone(obj.get("metadata"))} if is_crd else clone(obj)
            for mutate in () if is_crd else self.admission:
                mutate(obj)
            meta = obj.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise bad("metadata must be an object")
            if rk.namespaced:
                namespace = meta["namespace"] = meta.get("namespace") or "default"
                if (*NAMESPACE_KEY, None, namespace) not in self.items:
                    message, details = f'namespaces "{namespace}" not found', {"name": namespace}
                    raise StoreError(404, "NotFound", message, details | {"kind": "namespaces"})
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                prefix = meta.get("generateName")
                meta["name"] = self._generated_name(rk, prefix, meta.get("namespace"))
            check_name(rk, meta["name"])
            key = self._key(rk, meta.get("namespace"), meta["name"])
            if key in self.items:
                message = f'{rk.resource} "{meta["name"]}" already exists'
                raise StoreError(409, "AlreadyExists", message, rk.details(meta["name"]))
            for field in (*SERVER_META, "resourceVersion", "selfLink", "managedFields"):
                meta.pop(field, None)
            now = rfc3339(self.clock.time())
            meta |= {"uid": str(uuid.uuid4()), "creationTimestamp": now, "generation": 1}
            server_defaults(rk, obj, now)
            if dry_run:
                return obj
            stored = self._write("ADDED", key, self._in(rk, obj), None, given=original)
            for hook in self.on_create:
                hook(stored)
            return {**stored} if is_crd else self._out(rk, stored)  # (a CRD is big)

    def _generated_name(self, rk: ResourceKind, prefix: str | None, namespace: str | None) -> str:
        """``prefix`` and five random characters (apiserver ``names.SimpleNameGenerator``)."""
        if not prefix:
            required = "Required value: name or generateName is required"
            cause = {"reason": "FieldValueRequired", "message": required, "field": "metadata.name"}
            message = f'{rk.kind} "" is invalid: metadata.name: {required}'
            raise StoreError(422, "Invalid", message, {**rk.details(""), "causes": [cause]})
        while True:
            alphabet = string.ascii_lowercase + string.digits
            name = prefix + "".join(secrets.choice(alphabet) for _ in range(5))
            if self._key(rk, namespace, name) not in self.items:
                return name

    def submit(self, rk: ResourceKind, obj: Obj, *, strict: bool, dry_run: bool = False) -> Obj:
        """A create as a request makes it: the status dropped where a subresource owns it,
        unknown fields refused (``strict``) or pruned, defaulted and validated (``validate``:
        the CRD's schema and CEL rules), then ``create``d."""
        if "status" in rk.subresources:
            obj = {k: v for k, v in obj.items() if k != "status"}  # the controllers' to write
        return self.create(validate(rk, obj, strict=strict), dry_run=dry_run)

    def patch(self, rk: ResourceKind, namespace: str | None, name: str, change: Any) -> Obj:
        """A request's JSON merge patch of the object, validated as an update (the CRD's
        transition rules see the old object); a status subresource keeps the status; 409 when
        it names a resourceVersion that is not the current one."""
        if not isinstance(change, dict):
            raise bad("a merge patch must be a JSON object")
        with self.lock:
            stored = self.current(rk, namespace, name)
            result = merge_patch(stored, change)
            meta = result.setdefault("metadata", {})
            meta["name"], meta["namespace"] = name, namespace
            if not rk.namespaced:
                del meta["namespace"]
            result["apiVersion"], result["kind"] = rk.api_version, rk.kind
            obj = self._in(rk, validate(rk, result, strict=False, old=stored))
            asked = (change.get("metadata") or {}).get("resourceVersion")
            if asked and asked != stored["metadata"]["resourceVersion"]:
                message = (f'Operation cannot be fulfilled on {rk.resource} "{name}": the object '
                           "has been modified; please apply your changes to the latest version "
                           "and try again")  # fmt: skip
                raise StoreError(409, "Conflict", message, rk.details(name))
            key = self._key(rk, namespace, name)
            out = self._replace(key, obj, keep_status="status" in rk.subresources)
            for hook in self.on_patch:
                hook(out)
            return self._out(rk, out)

    # --- deleting --------------------------------------------------------------------------

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               propagation: str = "Background") -> tuple[Obj, bool]:  # fmt: skip
        """Delete with ``propagation``: ``(last state, whether it is gone already)``; StoreError
        404 when it does not exist."""
        if propagation not in PROPAGATIONS:
            raise bad(f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                      '"Foreground", "Background", "Orphan"')  # fmt: skip
        rk = self.kind(api_version, kind)
        if (rk.api_version, rk.kind) in (NAMESPACE_KEY, CRD_KEY):
            # Nothing the fake serves deletes them; a half-done emptying would mislead.
            raise StoreError(405, "MethodNotAllowed", f"fakekube does not delete {rk.plural}")
        with self.lock:
            self.current(rk, namespace, name)
            key = self._key(rk, namespace, name)
            again = self.items[key]["metadata"].get("deletionTimestamp")
            obj, gone = (self._delete_again if again else self._delete)(key, propagation)
            return self._out(rk, obj), gone

    def _delete(self, key: Key, propagation: str) -> tuple[Obj, bool]:
        obj = self.items[key]
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):  # already on its way out
            return obj, False
        if propagation == "Orphan":
            for dependent in self._dependents(meta["uid"]):
                self._disown(dependent, meta["uid"])
        held = self._held(obj)  # the API server waits for the node's kubelet
        grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30) if held else 0
        finalizers = list(meta.get("finalizers") or [])
        # The API server adds it whatever the owner has (it does not know); the collector
        # drops it once no dependent is left (registry/store.go, deletionFinalizersForGarbage
        # Collection), so a watch sees the owner Terminating before it goes.
        if not held and propagation == "Foreground":
            finalizers.append(FOREGROUND)
        if not held and not finalizers:
            self.remove(key)
            return obj, True
        at = rfc3339(self.clock.time() + grace)
        stamp = {"deletionTimestamp": at, "deletionGracePeriodSeconds": grace}
        stamp |= {} if held else {"finalizers": finalizers}
        return self._replace(key, merge_patch(obj, {"metadata": stamp}), server=True), False

    def _delete_again(self, key: Key, propagation: str) -> tuple[Obj, bool]:
        """A request's delete of an object already being deleted: a pod's grace period runs
        on; another object's ``foregroundDeletion`` finalizer becomes what the new propagation
        asks (apiserver ``registry/store.go`` ``deletionFinalizersForGarbageCollection``): a
        Background delete drops it, so an owner it held goes at once. (Orphan: not modelled.)"""
        obj = self.items[key]
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if obj["kind"] == "Pod" or propagation == "Orphan":
            return obj, False
        wanted = [f for f in finalizers if f != FOREGROUND]
        wanted += [FOREGROUND] if propagation == "Foreground" else []
        if sorted(wanted) == sorted(finalizers):
            return obj, False
        out = self._replace(
            key, merge_patch(obj, {"metadata": {"finalizers": wanted}}), server=True
        )
        return out, key not in self.items

    def _held(self, obj: Obj) -> bool:
        """Whether deleting ``obj`` leaves it Terminating: a pod still running on a node whose
        kubelet does not confirm it stopped."""
        node = (obj.get("spec") or {}).get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        return obj["kind"] == "Pod" and node in self.kubelets_down and phase not in FINISHED

    def _dependents(self, uid: str) -> builtins.list[Key]:
        return [k for k, o in self.items.items() if uid in _owners(o)]

    def _disown(self, key: Key, uid: str) -> None:
        obj = self.items[key]
        refs = [r for r in obj["metadata"]["ownerReferences"] if r.get("uid") != uid]
        meta = {k: v for k, v in obj["metadata"].items() if k != "ownerReferences"}
        self._replace(key, {**obj, "metadata": meta | ({"ownerReferences": refs} if refs else {})})

    # --- the garbage collector -------------------------------------------------------------

    def gc(self, *, running: bool | None = None, lag: float | None = None) -> None:
        """The garbage collector does nothing for ``lag`` s of the store's time from now;
        ``running=False``: it is absent, its work waits until ``running=True``."""
        with self.lock:
            self.gc_running = self.gc_running if running is None else running
            if lag is not None:
                self.gc_from = self.clock.time() + lag
            self._collected = None

    def collect(self) -> None:
        """The garbage collector's passes, until it has nothing left to do: dependents of owners
        gone go (or lose that owner, if they have another); an owner deleted in the foreground
        has its dependents deleted (foreground too, if they have their own) and loses its
        finalizer once none is left; a Terminating pod whose kubelet is back goes. An object
        made while it runs (a controller re-creating what it owns) is left to its next run, as
        a real one learns of objects from its watch: a dependent it has not deleted yet still
        holds a foreground-deleted owner."""
        with self.lock:
            if not self.gc_running or self.clock.time() < self.gc_from:
                return
            if self._collected == (self.rv, frozenset(self.kubelets_down)):
                return
            known = {o["metadata"]["uid"] for o in self.items.values()}
            while self._collected != (self.rv, frozenset(self.kubelets_down)):
                self._collected = (self.rv, frozenset(self.kubelets_down))
                self._pass(known)
                for controller in self.controllers:
                    controller()
            if any(o["metadata"]["uid"] not in known for o in self.items.values()):
                self._collected = None  # what was made meanwhile: the next run's

    def _pass(self, known: set[str]) -> None:
        uids = {o["metadata"]["uid"]: k for k, o in self.items.items()}
        children: dict[str, builtins.list[Key]] = {}
        for key, obj in self.items.items():
            for uid in _owners(obj):
                children.setdefault(uid, []).append(key)

        def alive(uid: str) -> bool:
            obj = self.items.get(uids[uid]) if uid in uids else None
            return obj is not None and not obj["metadata"].get("deletionTimestamp")

        for key in builtins.list(self.items):
            found = self.items.get(key)
            if found is None:
                continue  # gone as another's dependent
            obj, meta = found, found["metadata"]
            if meta["uid"] not in known:
                continue
            gone = [u for u in _owners(obj) if u not in uids]
            if gone and any(alive(u) for u in _owners(obj)):
                for uid in gone:
                    self._disown(key, uid)
            elif gone and not meta.get("deletionTimestamp"):
                self._delete(key, "Background")
            elif meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or []):
                uid = meta["uid"]
                for dependent in children.get(uid, []):
                    dep = self.items.get(dependent)
                    if dep is None or uid not in _owners(dep):
                        continue
                    if dep["metadata"]["uid"] not in known:
                        continue  # made meanwhile: it holds the owner until the next run
                    if any(u != uid and alive(u) for u in _owners(dep)):
                        self._disown(dependent, uid)
                    else:
                        deep = children.get(dep["metadata"]["uid"])
                        self._delete(dependent, "Foreground" if deep else "Background")
                if not self._dependents(uid):
                    left = {"finalizers": [f for f in meta["finalizers"] if f != FOREGROUND]}
                    self._replace(key, {**obj, "metadata": meta | left}, server=True)
            elif meta.get("deletionTimestamp") and not (meta.get("finalizers") or self._held(obj)):
                self.remove(key)  # a Terminating pod its kubelet is back for

    def compact(self) -> None:
        """Forget the history, as etcd compaction does: older versions and tokens give 410."""
        with self.lock:
            self.compacted = self.rv
            self.changes.clear()

    # --- what pods hold beyond their objects: logs, volumes, exec --------------------------

    def append_log(
        self, namespace: str, pod: str, container: str, text: str, *, at: float | None = None
    ) -> None:
        """Add ``text`` to the log of the container's current run (its restartCount)."""
        with self.lock:
            found = self.items.get(("v1", "Pod", namespace, pod))
            run = _status(found, container).get("restartCount", 0) if found else 0
            when = self.clock.time() if at is None else at
            self.logs.setdefault((namespace, pod, container), []).append((when, text, run))
            self.wake()

    def log_read(self, namespace: str, name: str, *, container: str | None,
                 since_seconds: float | None, tail_lines: int | None, stamps: bool
    ) -> tuple[builtins.list[str], LogRead]:  # fmt: skip
        """The container's current run as it is (``since``/``tail`` applied), and the reader of
        what comes next: nothing at all for a pod not scheduled yet (there is no kubelet to ask:
        ``LogLocation`` has no node; the HTTP server answers 204); StoreError 500 with the dial
        error when its node's kubelet is down (``kubelets_down``), as a real server answers
        having tried it; 400 while the container waits to start (the kubelet's answer)."""
        pod = self.current(self.kind("v1", "Pod"), namespace, name)
        chosen = container_of(pod, container)
        status = _status(pod, chosen)
        state = status.get("state") or {}
        pending = (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        node = (pod.get("spec") or {}).get("nodeName")
        if not node and not status and pending:
            return [], LogRead(self, (namespace, name, chosen), 0, stamps, ended=True)
        if node in self.kubelets_down:
            where = f"https://{node}:10250/containerLogs/{namespace}/{name}/{chosen}"
            dial = f"dial tcp {node}:10250: connect: connection refused"
            raise StoreError(500, "", f'Get "{where}": {dial}')  # Status reason Unknown ("")
        if "waiting" in state or (not status and pending):
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            raise bad(f'container "{chosen}" in pod "{name}" is waiting to start: {reason}')
        cutoff = self.clock.time() - since_seconds if since_seconds is not None else -math.inf
        reader = LogRead(self, (namespace, name, chosen), status.get("restartCount", 0), stamps)
        with self.lock:
            chunks = self.logs.get(reader.key, [])
            reader.seen = len(chunks)
            lines = _lines([c for c in chunks if c[2] == reader.run and c[0] >= cutoff], stamps)
        if tail_lines is not None:
            lines = lines[-tail_lines:] if tail_lines > 0 else []
        return lines, reader

    def exec_target(self, namespace: str, name: str, container: str | None) -> tuple[Obj, str]:
        """The pod to exec into and its container, checked running: StoreError 404 or 400."""
        pod = self.current(self.kind("v1", "Pod"), namespace, name)
        chosen = container_of(pod, container)
        phase = (pod.get("status") or {}).get("phase")
        if phase in FINISHED:
            raise bad(f"cannot exec into a container in a completed pod; current phase is {phase}")
        state = _status(pod, chosen).get("state") or {}
        if phase != "Running" or ("running" not in state and state):
            raise bad(f'unable to upgrade connection: container not found ("{chosen}")')
        return pod, chosen

    def run(self, pod: Obj, container: str, argv: builtins.list[str], stdin: bytes | bytearray,
            answer: bytes | Iterable[bytes] | None = None
    ) -> tuple[Iterable[bytes | memoryview], bytes, int]:  # fmt: skip
        """An exec's ``(stdout chunks, stderr, exit code)``: its command run on the pod's volumes
        (``fakekube.shell``), or ``answer`` (a fault's stdout) and exit 0."""
        if answer is not None:
            return [answer] if isinstance(answer, bytes) else answer, b"", 0
        return run_command(Filesystem(self, pod, container), argv, bytes(stdin))

    def filesystem(self, key: tuple[str, ...]) -> tuple[dict[str, bytes], set[str]]:
        """``(files, directories made empty)`` of a volume (``fakekube.shell``'s commands run on
        them): ``("pvc", ns, claim)``, ``("pod", ns, pod, volume-or-container)``."""
        with self.lock:
            return self.volumes.setdefault(key, ({}, set()))

    def volume(self, namespace: str, claim: str) -> dict[str, bytes]:
        """The files on a PersistentVolumeClaim, by path (mutable)."""
        return self.filesystem(("pvc", namespace, claim))[0]


class PortFake:
    """The ``Cluster`` port over ``Objects``; ``at`` scripts what happens."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.objects = Objects(self.clock)
        self.faults = Faults(self.objects, port=True)
        self.calls = RequestLog()
        self.on_create, self.on_patch = self.objects.on_create, self.objects.on_patch
        self._script: builtins.list[tuple[float, Callable[[], object]]] = []
        self._lock = threading.Lock()  # a request's hook schedules while the clock ticks
        self.clock.drive(self._tick)

    # --- for the tests and the scripts ---------------------------------------------------

    def at(self, seconds: float, change: Callable[[], object]) -> None:
        """Do ``change()`` at the first tick ``seconds`` of fake time from now."""
        with self._lock:
            self._script.append((self.clock.monotonic() + seconds, change))

    def log(self, namespace: str, pod: str, *lines: str) -> None:
        """The pod's (first) container writes ``lines`` now."""
        found = self.objects.items.get(("v1", "Pod", namespace, pod))
        container = ((found or {}).get("spec") or {}).get("containers") or [{"name": ""}]
        for line in lines:
            self.objects.append_log(namespace, pod, container[0]["name"], line + "\n")

    def _tick(self) -> None:
        with self._lock:  # (not held while a change runs: it takes the store's lock)
            now = self.clock.monotonic()
            due = [change for at, change in self._script if at <= now]
            self._script = [step for step in self._script if step[0] > now]
        for change in due:
            with suppress(KeyError, StoreError):  # its object deleted meanwhile
                change()
        self.objects.collect()
        self.objects.wake()

    # --- the port --------------------------------------------------------------------------

    def served(self, api_version: str, kind: str) -> bool:
        self._enter("served", api_version, kind, None, None)
        return self.objects.served(api_version, kind) is not None

    def get(self, ref: Ref) -> Obj:
        with self._call("get", *_at(ref)) as (rk, fault):
            return _answer(fault, self.objects.current(rk, ref.namespace, ref.name))

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        meta = obj.get("metadata") or {}
        ref = (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta.get("name"))
        shape: dict[str, Any] = {"dry_run": True} if dry_run else {}
        with self._call("create", *ref, **shape) as (rk, fault):
            # the adapter sends fieldValidation=Strict
            return _answer(fault, self.objects.submit(rk, obj, strict=True, dry_run=dry_run))

    def patch(self, ref: Ref, patch: Obj) -> Obj:
        with self._call("patch", *_at(ref)) as (rk, fault):
            return _answer(fault, self.objects.patch(rk, ref.namespace, ref.name, patch))

    def delete(self, ref: Ref, propagation: str = "Foreground") -> None:
        with self._call("delete", *_at(ref), propagation=propagation) as (_, fault):
            self.objects.delete(ref.api_version, ref.kind, ref.namespace, ref.name, propagation)
            _answer(fault, None)

    def list(self, api_version: str, kind: str, namespace: str | None, *, label_selector: str = "",
             field_selector: str = "", limit: int = 500, continue_token: str | None = None,
    ) -> Page:  # fmt: skip
        shape = {"label_selector": label_selector, "field_selector": field_selector, "limit": limit}
        with self._call("list", api_version, kind, namespace, None, **shape) as (rk, fault):
            items, rv, token, left = self.objects.page(
                rk, namespace, label_selector, field_selector, limit=limit, token=continue_token
            )
            return _answer(fault, Page(items, str(rv), token, left))

    def watch(self, api_version: str, kind: str, namespace: str | None, *, resource_version: str,
              label_selector: str = "", field_selector: str = "", timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:  # fmt: skip
        shape = {"label_selector": label_selector, "field_selector": field_selector}
        with self._call(
            "watch", api_version, kind, namespace, None, **shape, rv=resource_version
        ) as (rk, fault):
            matches = self.objects.matcher(rk, namespace, label_selector, field_selector)
            _answer(fault, None)  # a lost answer: the stream never came

        def events() -> Iterator[WatchEvent]:
            deadline = self.clock.monotonic() + timeout_seconds
            cursor = int(resource_version or 0)
            if resource_version in ("", "0"):
                objs, cursor = self.objects.snapshot(rk, matches)
                yield from (WatchEvent("ADDED", obj) for obj in objs)
            while True:
                with _errors():
                    seen, cursor = self.objects.events(rk, matches, cursor)
                yield from (WatchEvent(type_, obj) for type_, obj in seen)
                if self.clock.monotonic() >= deadline:
                    meta = {"resourceVersion": str(cursor)}
                    yield WatchEvent("BOOKMARK", {"apiVersion": api_version, "kind": kind,
                                                  "metadata": meta})  # fmt: skip
                    return
                self.clock.idle(until=deadline)

        yield from _cut(events(), fault)

    def pod_log(self, namespace: str, pod: str, *, container: str | None = None,
                follow: bool = False, since_seconds: int | None = None,
                tail_lines: int | None = None, timestamps: bool = False,
    ) -> Iterator[str]:  # fmt: skip
        shape = {"container": container, "follow": follow, "since_seconds": since_seconds,
                 "tail_lines": tail_lines, "timestamps": timestamps}  # fmt: skip
        with self._call("pod_log", "v1", "Pod", namespace, pod, **shape) as (_, fault):
            lines, reader = self.objects.log_read(
                namespace, pod, container=container, since_seconds=since_seconds,
                tail_lines=tail_lines, stamps=timestamps,
            )  # fmt: skip
            _answer(fault, None)

        def read() -> Iterator[str]:
            yield from lines
            while follow:
                done = reader.finished()  # before reading: its last lines still come
                yield from reader.more()
                if done:
                    return
                self.clock.idle()

        yield from _cut((line.removesuffix("\n") for line in read()), fault)

    def exec(self, namespace: str, pod: str, container: str, command: Sequence[str],
             stdin: bytes | Iterable[bytes] = b"", *,
             stdout: Callable[[ExecOutput], object] | None = None,
    ) -> ExecResult:  # fmt: skip
        argv = list(command)
        with self._call("exec", "v1", "Pod", namespace, pod, command=argv) as (_, fault):
            if not command:
                raise bad("you must specify at least 1 command")
            target, chosen = self.objects.exec_target(namespace, pod, container)
        data = b""
        if reads_stdin(argv):  # drawn as the command reads it; what it raises passes through
            data = stdin if isinstance(stdin, bytes) else b"".join(stdin)
        answer = fault.exec_stdout if fault is not None else None
        chunks, stderr, code = self.objects.run(target, chosen, argv, data, answer)
        _answer(fault, None)  # a lost answer: the command ran, its end unheard
        ended = ExecResult(b"", stderr, code)

        def output() -> ExecOutput:
            yield from _cut((bytes(chunk) for chunk in chunks), fault)
            return ended

        stream = output()
        if stdout is None:
            return ExecResult(b"".join(stream), stderr, code)
        try:
            stdout(stream)
            for _ in stream:
                pass  # what the consumer left unread
        except BaseException:
            stream.close()
            raise
        return ended

    # --- helpers ---------------------------------------------------------------------------

    def _enter(self, op: str, api_version: str, kind: str, namespace: str | None,
               name: str | None, **args: Any) -> Fault | None:  # fmt: skip
        """Record the call and take its fault: a status or a dropped call raises here."""
        path = f"{kind}/{name or ''}"
        fault = self.faults.take(op, path, op == "watch")
        record = RequestRecord(op, path, args, op == "watch", verb=op, fault=fault,
                               time=self.clock.monotonic(), api_version=api_version, kind=kind,
                               namespace=namespace, name=name)  # fmt: skip
        self.calls.append(record)
        error = fault.port_error() if fault is not None else None
        if error is not None:
            raise error
        return fault

    @contextmanager
    def _call(
        self,
        op: str,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str | None,
        **args: Any,
    ) -> Iterator[tuple[ResourceKind, Fault | None]]:
        """``_enter``, then the kind served, the namespace given and RBAC checked (verb and
        subresource); the store's refusals become the port's errors."""
        fault = self._enter(op, api_version, kind, namespace, name, **args)
        with _errors():
            rk = self.objects.kind(api_version, kind)
            if rk.namespaced and namespace is None and op not in ("list", "watch"):
                raise ValueError(f"{kind} is namespaced: the object needs a namespace")
            verb, sub = {"pod_log": ("get", "log"), "exec": ("create", "exec")}.get(op, (op, None))
            self.objects.authorize(verb, rk, namespace, None if op == "create" else name, sub)
            yield rk, fault


def _at(ref: Ref) -> tuple[str, str, str | None, str]:
    return ref.api_version, ref.kind, ref.namespace, ref.name


@contextmanager
def _errors() -> Iterator[None]:
    """The store's refusals as the port's errors."""
    try:
        yield
    except StoreError as exc:
        raise port_error(exc.code, exc.reason, exc.message) from None


def _answer(fault: Fault | None, result: T) -> T:
    """``result``, which a ``lost`` fault loses after the call happened."""
    if fault is not None and fault.lost:
        raise Transient(0, "Timeout", "read timed out (injected: the call was done)")
    return result


def _cut(items: Iterator[Any], fault: Fault | None) -> Iterator[Any]:
    """``items``, the connection reset after ``drop_after`` of them (0: before any)."""
    cut = fault.drop_after if fault is not None else None
    reset = Transient(0, "ConnectionError", "stream cut: connection reset (injected)")
    if cut == 0:
        raise reset
    for sent, item in enumerate(items):
        if cut is not None and sent >= cut:
            raise reset
        yield item

"""The fake cluster's objects: a dict, the history of its changes (what watches read), and what
the API server and the garbage collector do to them as KUBEFLOW.md records the real ones doing:
deletion by propagation policy (``foregroundDeletion`` holds an owner until its dependents are
gone), a collector that runs at the clock's ticks, late (``gc(lag=30)``) or not at all, and a
pod on a node whose kubelet is down (``kubelets_down``) left Terminating. No schema is checked
(``admission`` may add a check)."""

from __future__ import annotations

import base64
import bisect
import builtins
import json
import math
import re
import secrets
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from attrs import frozen

from kfcompile.lifecycle.ports import ApiError, Obj, Page, error_class
from kfcompile.testing.clock import FakeClock

__all__ = ["CRD", "FOREGROUND", "Key", "ResourceKind", "Store", "error", "rfc3339"]

T = TypeVar("T")
Key = tuple[str, str, str | None, str]  # apiVersion, kind, namespace (None: cluster-scoped), name
Matcher = Callable[[Obj], bool]
FOREGROUND: Final = "foregroundDeletion"  # the finalizer of an owner deleted in the foreground
CRD: Final = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
# The selectors kfcompile sends: labels ``k=v``, ``k!=v`` and ``k in (a,b)``, fields ``path=v``.
_LABEL = re.compile(r"\s*([\w./-]+)\s*(?:(!=|==?)\s*([\w.-]*)|\s+in\s*\(([^()]*)\))\s*")
_FIELD = re.compile(r"\s*([\w.]+)\s*(!=|==?)\s*([^,]*?)\s*")


def error(code: int, reason: str, message: str) -> ApiError:
    """The port's error for an answer with this HTTP ``code``."""
    return error_class(code)(code, reason, message)


def rfc3339(at: float, *, nano: bool = False) -> str:
    """A time (seconds since 1970) as the API server writes it; ``nano``: as the kubelet
    stamps log lines."""
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond:06d}000" * nano + "Z"


def clone(node: T) -> T:
    """A deep copy of JSON-like data (three times as fast as ``copy.deepcopy``)."""
    if isinstance(node, dict):
        return {k: clone(v) for k, v in node.items()}  # type: ignore[return-value]
    if isinstance(node, list):
        return [clone(v) for v in node]  # type: ignore[return-value]
    return node


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (a new value; ``target`` is left as it was)."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@frozen
class ResourceKind:
    """A kind the API serves, as discovery says it."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """How the API server's messages name it: ``pods``, ``trainjobs.trainer.kubeflow.org``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


BUILTIN: Final = (
    *(ResourceKind("", "v1", k, k.lower() + "s") for k in ("Pod", "ConfigMap", "Secret", "Event")),
    ResourceKind("", "v1", "ServiceAccount", "serviceaccounts"),
    ResourceKind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ResourceKind("", "v1", "Namespace", "namespaces", namespaced=False),
    ResourceKind("batch", "v1", "Job", "jobs"),
    ResourceKind("events.k8s.io", "v1", "Event", "events"),
    ResourceKind("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),  # installed with Trainer
    ResourceKind("apiextensions.k8s.io", "v1", CRD[1], "customresourcedefinitions", False),
)


def crd_kinds(crd: Obj) -> list[ResourceKind]:
    """The kinds a CustomResourceDefinition serves: one per served version."""
    spec = crd["spec"]
    names, scoped = spec["names"], spec.get("scope", "Namespaced") == "Namespaced"
    served = [v["name"] for v in spec["versions"] if v.get("served", True)]
    return [ResourceKind(spec["group"], v, names["kind"], names["plural"], scoped) for v in served]


def selector(
    rk: ResourceKind, namespace: str | None, labels: str = "", fields: str = ""
) -> Matcher:
    """Whether an object is one a list or watch of ``rk`` in ``namespace`` (None: all) with
    these selectors has; ``BadRequest`` for a term kfcompile never sends."""
    asked: list[tuple[bool, str, set[str], bool]] = []  # label?, its key or path, values, not?
    for text, pattern in ((labels, _LABEL), (fields, _FIELD)):
        for term in re.split(r",(?![^()]*\))", text) if text.strip() else []:
            if (found := pattern.fullmatch(term)) is None:
                raise error(400, "BadRequest", f"unable to parse requirement: {text!r}")
            key, op, value, *listed = found.groups()
            values = {value} if op else {v.strip() for v in listed[0].split(",")}
            asked.append((pattern is _LABEL, key, values, op == "!="))
    anywhere = namespace is None or not rk.namespaced

    def matches(obj: Obj) -> bool:
        if (obj["apiVersion"], obj["kind"]) != (rk.api_version, rk.kind):
            return False
        here = anywhere or obj["metadata"].get("namespace") == namespace
        fits = (
            (_value(obj, label, key) in values) != negated for label, key, values, negated in asked
        )
        return here and all(fits)

    return matches


def _value(obj: Obj, label: bool, key: str) -> Any:
    """A label's value, or the field at a dotted path."""
    if label:
        return (obj["metadata"].get("labels") or {}).get(key)
    node: Any = obj
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def owner(obj: Obj) -> Obj:
    """An ownerReference to ``obj``, as a controller sets it on what it makes."""
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _owners(obj: Obj) -> list[str]:
    return [r.get("uid", "") for r in obj["metadata"].get("ownerReferences") or []]


def _where(obj: Obj) -> list[str]:
    """Where a list has it: by namespace, then name."""
    return [obj["metadata"].get("namespace", ""), obj["metadata"]["name"]]


class Store:
    """Every object of one fake cluster, replaced on each change, never changed in place
    (``get`` and ``list`` give copies); thread-safe (``lock``). Hooks: ``admission`` (each new
    object a request creates: it may change it or raise an ``ApiError``), ``on_create`` and
    ``on_patch`` (what a request made), ``on_remove``, ``controllers`` (in the collector's run)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.items: dict[Key, Obj] = {}
        self.changes: list[tuple[int, str, Obj, Obj | None]] = []  # rv, type, object, before
        self.compacted = 0  # watches from a version before this one are answered 410
        self.kinds = {(k.api_version, k.kind): k for k in BUILTIN}
        # (namespace, pod, container): (time, text, the container's restartCount then)
        self.logs: dict[tuple[str, str, str], list[tuple[float, str, int]]] = {}
        self.admission: list[Callable[[Obj], object]] = []
        self.on_create: list[Callable[[Obj], object]] = []
        self.on_patch: list[Callable[[Obj], object]] = []
        self.on_remove: list[Callable[[Obj], object]] = []
        self.controllers: list[Callable[[], object]] = []
        self.kubelets_down: set[str] = set()  # nodes whose kubelet does not answer
        self.namespaces_allowed: set[str] | None = None  # user alice's Roles grant only these
        self.gc_running, self.gc_from = True, -math.inf
        self._rv, self._collected = 0, (-1, frozenset[str]())
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})

    @property
    def resource_version(self) -> int:
        return self._rv

    def served(self, api_version: str, kind: str) -> ResourceKind | None:
        return self.kinds.get((api_version, kind))

    def kind(self, api_version: str, kind: str) -> ResourceKind:
        """The served kind; ``NotFound`` when nothing serves it."""
        if (found := self.kinds.get((api_version, kind))) is None:
            raise error(404, "NotFound", "the server could not find the requested resource")
        return found

    @staticmethod
    def key(rk: ResourceKind, namespace: str | None, name: str) -> Key:
        return rk.api_version, rk.kind, (namespace or "default") if rk.namespaced else None, name

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A copy of the object, or None."""
        found = self.items.get(self.key(self.kind(api_version, kind), namespace, name))
        return clone(found) if found is not None else None

    def current(self, rk: ResourceKind, namespace: str | None, name: str) -> Obj:
        """A copy of the object; ``NotFound`` in the API server's words."""
        if (found := self.get(rk.api_version, rk.kind, namespace, name)) is None:
            raise error(404, "NotFound", f'{rk.resource} "{name}" not found')
        return found

    def matching(self, matches: Matcher) -> builtins.list[Obj]:
        """The stored objects that match (a ``selector``), by namespace and name."""
        return sorted((o for o in self.items.values() if matches(o)), key=_where)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, labels: str = ""
    ) -> builtins.list[Obj]:
        """Copies of the matching objects, by namespace and name (all namespaces: None)."""
        with self.lock:
            matches = selector(self.kind(api_version, kind), namespace, labels)
            return [clone(o) for o in self.matching(matches)]

    def page(self, matches: Matcher, limit: int, token: str | None, count: bool) -> Page:
        """A page of a list; its continue token says the last object given. How many remain is
        said only if ``count`` (a list without selectors, as the server does)."""
        after = json.loads(base64.urlsafe_b64decode(token)) if token else ["", ""]
        with self.lock:
            found = [o for o in self.matching(matches) if _where(o) > after]
            page, rv = found[:limit] if limit else found, str(self._rv)
            items = [clone(o) for o in page]
        if len(page) == len(found):
            return Page(items, rv)
        token = base64.urlsafe_b64encode(json.dumps(_where(page[-1])).encode()).decode()
        return Page(items, rv, token, len(found) - len(page) if count else None)

    def events(self, matches: Matcher, cursor: int) -> tuple[builtins.list[tuple[str, Obj]], int]:
        """The watch events after version ``cursor``, and the version after them (``Gone``
        once ``compact`` forgot them); leaving what ``matches`` is DELETED, entering it ADDED."""
        with self.lock:
            if cursor < self.compacted:
                said = f"too old resource version: {cursor} ({self.compacted + 1})"
                raise error(410, "Expired", said)
            changes = self.changes[bisect.bisect(self.changes, cursor, key=lambda c: c[0]) :]
        out = []
        for _, type_, obj, old in changes:
            now, before = type_ != "DELETED" and matches(obj), old is not None and matches(old)
            if now or before:
                seen = "MODIFIED" if now and before else "ADDED" if now else "DELETED"
                out.append((seen, clone(obj)))
        return out, changes[-1][0] if changes else cursor

    def compact(self) -> None:
        """Forget the history, as etcd's compaction does: older versions are answered 410."""
        with self.lock:
            self.compacted = self._rv
            self.changes.clear()

    def _write(self, type_: str, key: Key, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
        if type_ == "DELETED":
            del self.items[key]
        else:
            self.items[key] = obj
        if key[:2] == CRD:  # what a CRD serves comes and goes with it
            self.kinds = {k: v for k, v in self.kinds.items() if v.resource != key[3]}
            if type_ != "DELETED":
                self.kinds |= {(k.api_version, k.kind): k for k in crd_kinds(obj)}
        self.changes.append((self._rv, type_, obj, old))
        return obj

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        """The API server's create: ``admission`` first; the namespace must exist and the name
        be free; ``generateName``, the server's metadata and a Secret's ``data`` filled in.
        ``dry_run``: all that, nothing stored. ``on_create`` is told what was stored."""
        with self.lock:
            rk = self.kind(str(obj.get("apiVersion")), str(obj.get("kind")))
            obj = clone(obj) if (rk.api_version, rk.kind) != CRD else {**obj}  # (a CRD is big)
            meta = obj["metadata"] = dict(obj.get("metadata") or {})
            for admit in self.admission:
                admit(obj)
            ns = meta.pop("namespace", None) or "default"
            if rk.namespaced and ("v1", "Namespace", None, ns) not in self.items:
                raise error(404, "NotFound", f'namespaces "{ns}" not found')
            meta |= {"namespace": ns} if rk.namespaced else {}
            if not meta.get("name") and not meta.get("generateName"):
                said = "metadata.name: Required value: name or generateName is required"
                raise error(422, "Invalid", f'{rk.kind} "" is invalid: {said}')
            if not meta.get("name"):
                meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
            if (key := self.key(rk, ns, meta["name"])) in self.items:
                raise error(409, "AlreadyExists", f'{rk.resource} "{meta["name"]}" already exists')
            for field in ("deletionTimestamp", "resourceVersion"):
                meta.pop(field, None)
            now = rfc3339(self.clock.time())
            meta |= {"uid": str(uuid.uuid4()), "creationTimestamp": now, "generation": 1}
            if key[:2] == ("v1", "Secret"):
                data = obj.get("data") or {}
                for name, value in (obj.pop("stringData", None) or {}).items():
                    data[name] = base64.b64encode(str(value).encode()).decode()
                obj["data"], obj["type"] = data, obj.get("type", "Opaque")
            elif key[:2] == ("v1", "Pod"):
                obj.setdefault("status", {}).setdefault("phase", "Pending")
            if dry_run:
                return obj
            stored = self._write("ADDED", key, obj, None)
            for hook in self.on_create:
                hook(stored)
            return clone(stored) if key[:2] != CRD else stored  # a CRD is big, and never changed

    def put(self, obj: Obj) -> Obj:
        """``obj`` stored unchecked, as a controller writes it (created, or ``_replace``d); the
        object as stored, which must not be changed."""
        with self.lock:
            meta, rk = {**obj["metadata"]}, self.kind(obj["apiVersion"], obj["kind"])
            if (key := self.key(rk, meta.get("namespace"), meta["name"])) in self.items:
                return self._replace(key, {**obj, "metadata": meta})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", rfc3339(self.clock.time()))
            return self._write("ADDED", key, {**obj, "metadata": {"generation": 1, **meta}}, None)

    def change(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: Obj
    ) -> Obj:
        """A controller's merge patch of a stored object (its status, a label)."""
        with self.lock:
            key = self.key(self.kind(api_version, kind), namespace, name)
            return self._replace(key, merge_patch(self.items[key], patch))

    def patch_status(
        self, api_version: str, kind: str, namespace: str | None, name: str, status: Obj
    ) -> Obj:
        """A controller's status, written whole (through the status subresource)."""
        with self.lock:
            key = self.key(self.kind(api_version, kind), namespace, name)
            return self._replace(key, {**self.items[key], "status": clone(status)})

    def patch(self, rk: ResourceKind, namespace: str | None, name: str, patch: Obj) -> Obj:
        """A request's JSON merge patch, the status kept (the controllers', through its
        subresource); ``on_patch`` is told of the result."""
        with self.lock:
            asked = {k: v for k, v in patch.items() if k != "status"}
            new = merge_patch(self.current(rk, namespace, name), asked)
            out = self._replace(self.key(rk, namespace, name), new)
            for hook in self.on_patch:
                hook(out)
            return clone(out)

    def _replace(self, key: Key, new: Obj, *, server: bool = False) -> Obj:
        """Write ``new`` over ``key``'s object: the server's metadata kept (``server``: deleting
        it sets its own), the generation grown when more than metadata or status changed,
        nothing written when nothing did; one being deleted that lost its finalizers goes."""
        old = self.items[key]
        meta, was = dict(new["metadata"]), old["metadata"]
        kept = ["uid", "creationTimestamp", "resourceVersion", "name", "namespace"]
        for field in kept + ([] if server else ["deletionTimestamp", "deletionGracePeriodSeconds"]):
            meta.pop(field, None)
            meta |= {field: was[field]} if field in was else {}
        grown = any(new.get(k) != old.get(k) for k in {*new, *old} - {"metadata", "status"})
        new = {**new, "metadata": {**meta, "generation": was.get("generation", 1) + grown}}
        if new == old:
            return old
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not self._held(new):
            self.remove(key)
            return new
        return self._write("MODIFIED", key, new, old)

    def remove(self, key: Key) -> None:
        """Gone at once (what it owns at the collector's next pass), a pod's logs with it."""
        with self.lock:
            gone = self.items[key]
            self._write("DELETED", key, gone, gone)
            if key[:2] == ("v1", "Pod"):
                self.logs = {k: v for k, v in self.logs.items() if k[:2] != key[2:]}
            for hook in self.on_remove:
                hook(gone)

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str,
               propagation: str = "Background", uid: str | None = None) -> bool:  # fmt: skip
        """A request's delete (``NotFound`` when there is nothing; ``Conflict`` when ``uid``, a
        precondition, is not the object's): whether it went at once."""
        with self.lock:
            rk = self.kind(api_version, kind)
            found = self.current(rk, namespace, name)["metadata"]["uid"]
            if uid is not None and uid != found:
                said = (
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {found}"
                )
                raise error(409, "Conflict", f'Operation cannot be fulfilled on {rk.resource} '
                            f'"{name}": {said}')  # fmt: skip
            return self._delete(self.key(rk, namespace, name), propagation)

    def _delete(self, key: Key, propagation: str) -> bool:
        """Foreground adds the ``foregroundDeletion`` finalizer (the collector drops it once no
        dependent is left, so a watch sees the owner Terminating first); Orphan disowns the
        dependents. One already on its way keeps its deletion but gets the finalizer the new
        propagation asks (apiserver ``deletionFinalizersForGarbageCollection``)."""
        obj = self.items[key]
        meta = obj["metadata"]
        if propagation == "Orphan":
            for dependent in self._dependents(meta["uid"]):
                refs = self.items[dependent]["metadata"]["ownerReferences"]
                self._meta(dependent, ownerReferences=[r for r in refs if r["uid"] != meta["uid"]])
        finalizers = [f for f in meta.get("finalizers") or [] if f != FOREGROUND]
        finalizers += [FOREGROUND] * (propagation == "Foreground")
        stamp: Obj = {"finalizers": finalizers or None}
        if not meta.get("deletionTimestamp"):  # a pod's waits for its kubelet
            held = self._held(obj)
            grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30) if held else 0
            stamp |= {"deletionTimestamp": rfc3339(self.clock.time() + grace),
                      "deletionGracePeriodSeconds": grace}  # fmt: skip
        self._replace(key, merge_patch(obj, {"metadata": stamp}), server=True)
        return key not in self.items

    def _held(self, obj: Obj) -> bool:
        """A pod still running on a node whose kubelet does not confirm that it stopped."""
        node = (obj.get("spec") or {}).get("nodeName")
        ended = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        return obj["kind"] == "Pod" and node in self.kubelets_down and not ended

    def _dependents(self, uid: str) -> builtins.list[Key]:
        return [k for k, o in self.items.items() if uid in _owners(o)]

    def _meta(self, key: Key, **fields: builtins.list[Any]) -> None:
        """These metadata fields (an empty list: none) written over ``key``'s object."""
        patch = {"metadata": {k: v or None for k, v in fields.items()}}
        self._replace(key, merge_patch(self.items[key], patch))

    def gc(self, *, running: bool | None = None, lag: float | None = None) -> None:
        """The garbage collector does nothing for ``lag`` seconds of fake time from now;
        ``running=False``: it is absent (its work waits until ``running=True``)."""
        with self.lock:
            self.gc_running = self.gc_running if running is None else running
            self.gc_from = self.clock.time() + lag if lag is not None else self.gc_from
            self._collected = (-1, frozenset())

    def collect(self) -> None:
        """The garbage collector's passes until it has nothing left to do (``_pass``); what is
        made meanwhile (a controller re-creating what it owns) is the next run's, as a real
        collector learns of it from its watch."""
        with self.lock:
            if not self.gc_running or self.clock.time() < self.gc_from:
                return
            if self._collected == (self._rv, frozenset(self.kubelets_down)):
                return  # nothing changed since it last had nothing to do
            known = {o["metadata"]["uid"] for o in self.items.values()}
            while self._collected != (self._rv, frozenset(self.kubelets_down)):
                self._collected = (self._rv, frozenset(self.kubelets_down))
                self._pass(known)
                for controller in self.controllers:
                    controller()
            if any(o["metadata"]["uid"] not in known for o in self.items.values()):
                self._collected = (-1, frozenset())

    def _pass(self, known: set[str]) -> None:
        """Dependents of owners gone go; an owner deleted in the foreground has its dependents
        deleted and loses its finalizer once none is left; a Terminating pod whose kubelet is
        back goes. (kfcompile's objects have one owner each: no dependent keeps one of several.)"""
        uids = {o["metadata"]["uid"] for o in self.items.values()}
        for key in builtins.list(self.items):
            if (obj := self.items.get(key)) is None or obj["metadata"]["uid"] not in known:
                continue  # gone meanwhile, or made meanwhile
            meta, owners = obj["metadata"], _owners(obj)
            if owners and not uids & {*owners} and not meta.get("deletionTimestamp"):
                self._delete(key, "Background")
            elif meta.get("deletionTimestamp") and FOREGROUND in (meta.get("finalizers") or []):
                self._foreground(key, known)
            elif meta.get("deletionTimestamp") and not (meta.get("finalizers") or self._held(obj)):
                self.remove(key)  # a Terminating pod its kubelet is back for

    def _foreground(self, key: Key, known: set[str]) -> None:
        uid = self.items[key]["metadata"]["uid"]
        for dependent in self._dependents(uid):
            dep = self.items[dependent]["metadata"]
            # One made meanwhile holds the owner until the next run.
            if dep["uid"] in known and not dep.get("deletionTimestamp"):
                deep = self._dependents(dep["uid"])
                self._delete(dependent, "Foreground" if deep else "Background")
        if key in self.items and not self._dependents(uid):
            left = [f for f in self.items[key]["metadata"]["finalizers"] if f != FOREGROUND]
            self._meta(key, finalizers=left)

    def append_log(
        self, namespace: str, pod: str, container: str, text: str, *, at: float | None = None
    ) -> None:
        """The container's current run (its restartCount) writes ``text``."""
        with self.lock:
            found = self.items.get(("v1", "Pod", namespace, pod)) or {}
            statuses = (found.get("status") or {}).get("containerStatuses") or []
            run = next((s.get("restartCount", 0) for s in statuses if s["name"] == container), 0)
            when = self.clock.time() if at is None else at
            self.logs.setdefault((namespace, pod, container), []).append((when, text, run))

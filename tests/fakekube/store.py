"""The object store behind the fake API server: thread-safe, usable directly by tests.

Objects are plain dicts exactly as the API server speaks them. The store assigns ``uid``,
``resourceVersion`` (one global counter), ``creationTimestamp`` and ``generation``, keeps a bounded
history of changes for watches, collects garbage by ``ownerReferences`` (Foreground, Background,
Orphan), empties deleted namespaces, and holds pod logs and the in-memory files of volumes.

Changes made with :meth:`Store.update` replace the whole object (status included) and are not
validated: validation belongs to the HTTP layer, which uses the ``apply_*`` variants for
subresource rules, optimistic concurrency and ``dryRun``. Stored objects are replaced, never
changed in place (the watch history shares them); a CRD's spec is shared with the dict it was
created from, which must not change afterwards. Asynchronous work (background garbage
collection, foreground and namespace deletion) runs on short-lived threads; :meth:`Store.settle`
waits for it.
"""

from __future__ import annotations

import base64
import builtins
import copy
import re
import secrets
import string
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

__all__ = [
    "BUILTIN_KINDS",
    "Change",
    "LogChunk",
    "ResourceKind",
    "Store",
    "StoreError",
    "field_matcher",
    "label_matcher",
    "now_rfc3339",
]


class StoreError(Exception):
    """A refusal the API server would answer with a ``Status``: ``code``, ``reason``, message."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Obj:
        """The ``Status`` object the server sends for this error."""
        out: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class ResourceKind:
    """One served resource: what discovery lists and what routes and the store key on."""

    group: str  # "" for core
    version: str
    kind: str
    plural: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # e.g. ("status",), ("status", "log", "exec")
    # The CRD defining it (validation); never mutated.
    crd: Obj | None = field(default=None, compare=False, repr=False)
    core_schema: str | None = None  # kubernetes-validate strict schema, e.g. "pod-v1"
    returns_deleted: bool = False  # DELETE answers the object rather than a Status

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """How messages name it: ``pods``, ``trainjobs.trainer.kubeflow.org``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def details(self, name: str, uid: str | None = None) -> Obj:
        out: Obj = {"name": name, "kind": self.plural}
        if self.group:
            out["group"] = self.group
        if uid:
            out["uid"] = uid
        return out


def _core(kind: str, plural: str, short: tuple[str, ...] = (), **kw: Any) -> ResourceKind:
    schema = kw.pop("core_schema", f"{kind.lower()}-v1")
    return ResourceKind(
        "",
        "v1",
        kind,
        plural,
        kw.pop("namespaced", True),
        kind.lower(),
        short,
        core_schema=schema,
        **kw,
    )


BUILTIN_KINDS: tuple[ResourceKind, ...] = (
    _core("Pod", "pods", ("po",), subresources=("status", "log", "exec"), returns_deleted=True),
    _core("ConfigMap", "configmaps", ("cm",)),
    _core("Secret", "secrets"),
    _core("Event", "events", ("ev",)),
    _core("Namespace", "namespaces", ("ns",), namespaced=False, subresources=("status",)),
    _core(
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        ("pvc",),
        subresources=("status",),
        returns_deleted=True,
    ),
    _core("ServiceAccount", "serviceaccounts", ("sa",), returns_deleted=True),
    ResourceKind(
        "batch", "v1", "Job", "jobs", True, "job", (), ("status",), core_schema="job-batch-v1"
    ),
    ResourceKind(
        "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, "jobset", (), ("status",)
    ),
    ResourceKind(
        "kueue.x-k8s.io",
        "v1beta1",
        "LocalQueue",
        "localqueues",
        True,
        "localqueue",
        ("queue", "queues", "lq"),
        ("status",),
    ),
    ResourceKind(
        "kueue.x-k8s.io",
        "v1beta1",
        "ClusterQueue",
        "clusterqueues",
        False,
        "clusterqueue",
        ("cq",),
        ("status",),
    ),
    ResourceKind(
        "kueue.x-k8s.io", "v1beta1", "Workload", "workloads", True, "workload", ("wl",), ("status",)
    ),
    ResourceKind(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        "customresourcedefinition",
        ("crd", "crds"),
        ("status",),
    ),
)

_NS_KEY = ("v1", "Namespace")
_CRD_KEY = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def now_rfc3339(at: float | None = None) -> str:
    """``2024-05-01T12:00:00Z``: how the server writes timestamps."""
    moment = datetime.fromtimestamp(time.time() if at is None else at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Change:
    """One entry of the watch history. ``old`` is the previous state of a MODIFIED object."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    api_version: str
    kind: str
    obj: Obj  # shared by every reader: never mutate
    old: Obj | None = None


@dataclass(frozen=True)
class LogChunk:
    """Text a container wrote at ``time``, during its ``instance``-th run (its restartCount)."""

    time: float
    text: str
    instance: int


# --- selectors --------------------------------------------------------------------------------

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EXISTS = re.compile(rf"\s*(!?)\s*({_KEY})\s*")
_EQUALS = re.compile(rf"\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*")
_SET = re.compile(rf"\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*")

Matcher = Callable[[Obj], bool]
_Bucket = tuple[str, str]  # (apiVersion, kind)
_ObjKey = tuple[str, str]  # (namespace or "", name)


def _split_requirements(text: str) -> list[str]:
    """Split on the commas that separate requirements, not those inside ``in (a,b)``."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _requirement(text: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET.fullmatch(text):
        key, op = m[1], m[2]
        values = {v.strip() for v in m[3].split(",")}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQUALS.fullmatch(text):
        key, op, value = m[1], m[2], m[3]
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS.fullmatch(text):
        key, negated = m[2], bool(m[1])
        return lambda labels: (key in labels) != negated
    raise StoreError(400, "BadRequest", f"unable to parse requirement: {text.strip()!r}")


def label_matcher(selector: str) -> Matcher:
    """A predicate for ``selector`` (``a=b,c!=d,e in (f,g),h notin (i),j,!k``).

    Raises StoreError 400 when the selector does not parse, as the server does.
    """
    if not selector.strip():
        return lambda obj: True
    reqs = [_requirement(part) for part in _split_requirements(selector)]

    def match(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(req(labels) for req in reqs)

    return match


# Field selectors the real server supports beyond metadata.name/namespace, per kind.
_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "Event": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "Secret": ("type",),
    "Namespace": ("status.phase",),
    "Job": ("status.successful",),
}
_FIELD_REQ = re.compile(r"\s*([A-Za-z.]+)\s*(==|!=|=)\s*([^,]*?)\s*")


def _field_value(obj: Obj, path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if node is None:
        return ""
    if isinstance(node, bool):
        return str(node).lower()
    return str(node)


def field_matcher(kind: str, selector: str) -> Matcher:
    """A predicate for a field selector (``metadata.name=x,status.phase!=Running``)."""
    if not selector.strip():
        return lambda obj: True
    supported = ("metadata.name", "metadata.namespace", *_FIELDS.get(kind, ()))
    reqs: list[tuple[str, bool, str]] = []
    for part in selector.split(","):
        m = _FIELD_REQ.fullmatch(part)
        if not m:
            raise StoreError(400, "BadRequest", f"invalid selector: '{selector}'")
        if m[1] not in supported:
            raise StoreError(400, "BadRequest", f"field label not supported: {m[1]}")
        reqs.append((m[1], m[2] == "!=", m[3]))
    return lambda obj: all((_field_value(obj, p) == v) != neg for p, neg, v in reqs)


# --- the store --------------------------------------------------------------------------------


def _random_suffix() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))


def _owner_uids(obj: Obj) -> list[str]:
    return [r.get("uid", "") for r in (obj.get("metadata") or {}).get("ownerReferences") or []]


class Store:
    """All objects of the fake cluster. Every public method is thread-safe."""

    def __init__(self, *, history: int = 1000) -> None:
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0  # asynchronous deletion work not yet done
        self._kinds: dict[tuple[str, str], ResourceKind] = {}
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=history)
        self._floor = 0  # a watch can resume from any resourceVersion >= this
        self._subscribers: builtins.list[Callable[[str, Obj], None]] = []
        self._wakers: builtins.list[Callable[[], None]] = []
        # pod logs by (namespace, pod), then container
        self._logs: dict[tuple[str, str], dict[str, builtins.list[LogChunk]]] = {}
        self._fs: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]] = {}
        # indexes, so that garbage collection of 1,000-pod jobs stays linear
        self._uids: dict[str, tuple[_Bucket, _ObjKey]] = {}
        self._children: dict[str, set[tuple[_Bucket, _ObjKey]]] = {}
        self._work: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._worker: threading.Thread | None = None
        self._finishing: set[str] = set()  # namespaces being emptied right now
        for kind in BUILTIN_KINDS:
            self.register_kind(kind)
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})

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
        spec = crd["spec"]
        names = spec["names"]
        status = spec.get("subresources") or {}
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            subresources = version.get("subresources") or status
            self.register_kind(
                ResourceKind(
                    spec["group"],
                    version["name"],
                    names["kind"],
                    names["plural"],
                    spec.get("scope", "Namespaced") == "Namespaced",
                    names.get("singular", names["kind"].lower()),
                    tuple(names.get("shortNames") or ()),
                    ("status",) if "status" in subresources else (),
                    crd=crd,
                )
            )

    def _unregister_crd(self, crd: Obj, changes: builtins.list[Change]) -> None:
        spec = crd["spec"]
        for version in spec["versions"]:
            key = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
            kind = self._kinds.pop(key, None)
            for obj_key in list(self._objects.get(key, {})):
                if kind is not None:
                    self._remove(kind, obj_key, changes)
            self._objects.pop(key, None)

    # --- reading ---------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A copy of the object, or None."""
        rk = self.kind(api_version, kind)
        with self._lock:
            obj = self._objects[(api_version, kind)].get(self._key(rk, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

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
        after: tuple[str, str] | None = None,
    ) -> tuple[builtins.list[Obj], int, tuple[str, str] | None]:
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
            last: tuple[str, str] | None = None
            for key in keys:
                if namespace is not None and rk.namespaced and key[0] != namespace:
                    continue
                obj = bucket[key]
                if not (labels(obj) and fields(obj)):
                    continue
                if limit and len(out) == limit:
                    return out, self._rv, last
                out.append(copy.deepcopy(obj))
                last = key
            return out, self._rv, None

    # --- writing ---------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        """Store a new object; returns it as stored.

        Fills uid, resourceVersion, creationTimestamp, generation, the namespace ("default");
        honours generateName. StoreError 409 AlreadyExists when the name is taken, 404 when the
        namespace does not exist, 403 when it is being deleted, 422 for an invalid name.
        """
        return self.apply_create(obj)

    def apply_create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        """:meth:`create`, optionally without storing anything (``dryRun=All``)."""
        changes: builtins.list[Change] = []
        with self._lock:
            out = self._create(obj, changes, dry_run)
        self._notify(changes)
        return out

    def _create(self, original: Obj, changes: builtins.list[Change], dry_run: bool) -> Obj:
        rk = self.kind(str(original.get("apiVersion")), str(original.get("kind")))
        is_crd = (rk.api_version, rk.kind) == _CRD_KEY
        # CRDs are big and must not change once installed: share their spec rather than copy it
        obj = (
            {**original, "metadata": copy.deepcopy(original.get("metadata"))}
            if is_crd
            else (copy.deepcopy(original))
        )
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise StoreError(400, "BadRequest", "metadata must be an object")
        bucket = self._objects[(rk.api_version, rk.kind)]
        namespace = ""
        if rk.namespaced:
            namespace = meta.get("namespace") or "default"
            meta["namespace"] = namespace
            ns = self._objects[_NS_KEY].get(("", namespace))
            if ns is None:
                raise StoreError(
                    404,
                    "NotFound",
                    f'namespaces "{namespace}" not found',
                    {"name": namespace, "kind": "namespaces"},
                )
            if ns["metadata"].get("deletionTimestamp"):
                raise StoreError(
                    403,
                    "Forbidden",
                    f"{rk.resource} is forbidden: unable to create new content in namespace "
                    f"{namespace} because it is being terminated",
                )
        else:
            meta.pop("namespace", None)
        name = meta.get("name")
        if not name:
            prefix = meta.get("generateName")
            if not prefix:
                raise StoreError(
                    422,
                    "Invalid",
                    f'{rk.kind} "" is invalid: metadata.name: Required value: name or '
                    "generateName is required",
                    {
                        **rk.details(""),
                        "causes": [
                            {
                                "reason": "FieldValueRequired",
                                "message": "Required value: name or generateName is required",
                                "field": "metadata.name",
                            }
                        ],
                    },
                )
            name = prefix + _random_suffix()
            while (namespace, name) in bucket:
                name = prefix + _random_suffix()
            meta["name"] = name
        self._check_name(rk, name)
        if (namespace, name) in bucket:
            raise StoreError(
                409, "AlreadyExists", f'{rk.resource} "{name}" already exists', rk.details(name)
            )
        for key in (*_SERVER_META, "resourceVersion", "selfLink", "managedFields"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        self._defaults(rk, obj)
        if dry_run:
            return obj
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._put((rk.api_version, rk.kind), (namespace, name), obj)
        self._record(changes, "ADDED", rk, obj)
        if is_crd:
            self.register_crd(original)
            return {**obj}
        return copy.deepcopy(obj)

    @staticmethod
    def _check_name(rk: ResourceKind, name: str) -> None:
        pattern, limit, what = (
            (_LABEL, 63, "RFC 1123 label")
            if rk.kind == "Namespace"
            else (_SUBDOMAIN, 253, "RFC 1123 subdomain")
        )
        if not (len(name) <= limit and pattern.fullmatch(name)):
            msg = (
                f'Invalid value: "{name}": a lowercase {what} must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character"
            )
            raise StoreError(
                422,
                "Invalid",
                f'{rk.kind} "{name}" is invalid: metadata.name: {msg}',
                {
                    **rk.details(name),
                    "causes": [
                        {"reason": "FieldValueInvalid", "message": msg, "field": "metadata.name"}
                    ],
                },
            )

    @staticmethod
    def _defaults(rk: ResourceKind, obj: Obj) -> None:
        """What the real server's defaulting adds, where clients' models or our code look."""
        if rk.kind == "Secret" and not rk.group:
            data = obj.setdefault("data", {}) or {}
            for key, value in (obj.pop("stringData", None) or {}).items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data
            obj.setdefault("type", "Opaque")
        elif rk.kind == "Namespace" and not rk.group:
            name = obj["metadata"]["name"]
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        elif rk.kind in ("Pod", "PersistentVolumeClaim") and not rk.group:
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif (rk.api_version, rk.kind) == _CRD_KEY:
            names = obj["spec"]["names"]
            now = now_rfc3339()
            obj["status"] = {
                "acceptedNames": names,
                "conditions": [
                    {
                        "type": t,
                        "status": "True",
                        "reason": r,
                        "message": m,
                        "lastTransitionTime": now,
                    }
                    for t, r, m in (
                        ("NamesAccepted", "NoConflicts", "no conflicts found"),
                        (
                            "Established",
                            "InitialNamesAccepted",
                            "the initial names have been accepted",
                        ),
                    )
                ],
                "storedVersions": [v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
            }

    def update(self, obj: Obj) -> Obj:
        """Replace the stored object (metadata, spec and status); returns it as stored.

        Server-owned metadata (uid, creationTimestamp, deletionTimestamp) is kept; generation
        grows when anything outside metadata and status changes; an unchanged object is not
        written again. Removing the last finalizer of an object being deleted removes it.
        """
        return self.apply_update(obj)

    def apply_update(
        self, obj: Obj, *, part: str = "all", check_rv: bool = False, dry_run: bool = False
    ) -> Obj:
        """:meth:`update` with the HTTP layer's options.

        ``part``: ``"all"``; ``"main"`` (the status is kept: a PUT to a kind with a status
        subresource); ``"status"`` (only the status is taken). ``check_rv``: 409 Conflict when
        ``obj`` carries a resourceVersion that is not the current one.
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
            new = copy.deepcopy(obj)
            if part == "status":
                new = {**copy.deepcopy(existing), "status": new.get("status")}
                if new["status"] is None:
                    del new["status"]
            elif part == "main":
                new.pop("status", None)
                if "status" in existing:
                    new["status"] = copy.deepcopy(existing["status"])
            out = self._replace(rk, key, new, changes, dry_run)
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
            new = copy.deepcopy(self._existing(rk, key))
            new["status"] = copy.deepcopy(status)
            out = self._replace(rk, key, new, changes, False)
        self._notify(changes)
        return out

    def _replace(
        self,
        rk: ResourceKind,
        key: tuple[str, str],
        new: Obj,
        changes: builtins.list[Change],
        dry: bool,
    ) -> Obj:
        existing = self._objects[(rk.api_version, rk.kind)][key]
        old_meta = existing["metadata"]
        meta = new.setdefault("metadata", {})
        meta["name"], meta["namespace"] = key[1], key[0]
        if not rk.namespaced:
            del meta["namespace"]
        for name in _SERVER_META:
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
            self._defaults(rk, new)
        if new == existing:
            return copy.deepcopy(existing)
        if dry:
            return new
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._put((rk.api_version, rk.kind), key, new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rk, key, changes)
            self._schedule(self._collect, meta["uid"])
            return copy.deepcopy(new)
        self._record(changes, "MODIFIED", rk, new, existing)
        return copy.deepcopy(new)

    # --- deleting --------------------------------------------------------------------------

    def delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
    ) -> None:
        """Delete with ``propagation`` ``Background`` (dependents collected shortly after),
        ``Foreground`` (the owner stays, with ``deletionTimestamp`` and the
        ``foregroundDeletion`` finalizer, until its dependents are gone) or ``Orphan``.

        StoreError 404 when it does not exist.
        """
        self.apply_delete(api_version, kind, namespace, name, propagation)

    def apply_delete(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        *,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """:meth:`delete`, returning ``(last state, whether it is gone already)``."""
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise StoreError(
                400,
                "BadRequest",
                f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                '"Foreground", "Background", "Orphan"',
            )
        rk = self.kind(api_version, kind)
        changes: builtins.list[Change] = []
        with self._lock:
            key = self._key(rk, namespace, name)
            obj = self._existing(rk, key)
            if dry_run:
                return copy.deepcopy(obj), True
            out = self._delete(rk, key, propagation, changes)
        self._notify(changes)
        return out

    def _delete(
        self,
        rk: ResourceKind,
        key: tuple[str, str],
        propagation: str,
        changes: builtins.list[Change],
    ) -> tuple[Obj, bool]:
        obj = self._objects[(rk.api_version, rk.kind)][key]
        meta = obj["metadata"]
        uid = meta["uid"]
        if meta.get("deletionTimestamp"):  # already on its way out
            return copy.deepcopy(obj), False
        if propagation == "Orphan":
            for dep_kind, dep_key, dep in self._dependents(uid):
                self._drop_owner(dep_kind, dep_key, dep, uid, changes)
        is_namespace = (rk.api_version, rk.kind) == _NS_KEY
        if propagation == "Foreground" or is_namespace or meta.get("finalizers"):
            new = copy.deepcopy(obj)
            new["metadata"]["deletionTimestamp"] = now_rfc3339()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if is_namespace:
                new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
                self._schedule(self._finish_namespace, key[1], uid)
            elif propagation == "Foreground":
                finalizers = new["metadata"].setdefault("finalizers", [])
                finalizers.append("foregroundDeletion")
                self._schedule(self._finish_foreground, rk, key, uid)
            self._rv += 1
            new["metadata"]["resourceVersion"] = str(self._rv)
            self._put((rk.api_version, rk.kind), key, new)
            self._record(changes, "MODIFIED", rk, new, obj)
            return copy.deepcopy(new), False
        gone = self._remove(rk, key, changes)
        if propagation == "Background":
            self._schedule(self._collect, uid)
        return gone, True

    def _remove(
        self, rk: ResourceKind, key: tuple[str, str], changes: builtins.list[Change]
    ) -> Obj:
        obj = self._pop((rk.api_version, rk.kind), key)
        self._rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
        self._record(changes, "DELETED", rk, obj)
        if rk.kind == "Pod" and not rk.group:
            self._logs.pop(key, None)
            for fs_key in [k for k in self._fs if k[0] == "pod" and k[1:3] == key]:
                del self._fs[fs_key]
        elif (rk.api_version, rk.kind) == _CRD_KEY:
            self._unregister_crd(obj, changes)
        if rk.namespaced:
            ns = self._objects[_NS_KEY].get(("", key[0]))
            if (
                ns is not None
                and ns["metadata"].get("deletionTimestamp")
                and key[0] not in self._finishing
            ):
                self._schedule(self._finish_namespace, key[0], ns["metadata"]["uid"])
        return copy.deepcopy(obj)

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

    def _drop_owner(
        self,
        rk: ResourceKind,
        key: tuple[str, str],
        obj: Obj,
        uid: str,
        changes: builtins.list[Change],
    ) -> None:
        new = copy.deepcopy(obj)
        refs = [r for r in new["metadata"]["ownerReferences"] if r.get("uid") != uid]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            del new["metadata"]["ownerReferences"]
        self._replace(rk, key, new, changes, False)

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

    def _finish_foreground(self, rk: ResourceKind, key: tuple[str, str], uid: str) -> None:
        changes: builtins.list[Change] = []
        with self._lock:
            obj = self._objects.get((rk.api_version, rk.kind), {}).get(key)
            if obj is None or obj["metadata"]["uid"] != uid:
                return
            self._remove_tree(uid, changes)
            new = copy.deepcopy(obj)
            new["metadata"]["finalizers"] = [
                f for f in new["metadata"].get("finalizers", []) if f != "foregroundDeletion"
            ]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]
            self._replace(rk, key, new, changes, False)
        self._notify(changes)

    def _finish_namespace(self, namespace: str, uid: str) -> None:
        """Delete everything in a terminating namespace; remove it once nothing is left
        (objects held by finalizers keep it Terminating until they go)."""
        changes: builtins.list[Change] = []
        with self._lock:
            self._finishing.add(namespace)  # its objects' removal need not schedule this again
            left = False
            for bucket_key, bucket in list(self._objects.items()):
                rk = self._kinds.get(bucket_key)
                if rk is None or not rk.namespaced:
                    continue
                for key in [k for k in bucket if k[0] == namespace]:
                    self._delete(rk, key, "Background", changes)
                    left = left or key in bucket
            obj = self._objects[_NS_KEY].get(("", namespace))
            if not left and obj is not None and obj["metadata"]["uid"] == uid:
                for log_key in [k for k in self._logs if k[0] == namespace]:
                    del self._logs[log_key]
                for fs_key in [k for k in self._fs if k[1] == namespace]:
                    del self._fs[fs_key]
                self._remove(self._kinds[_NS_KEY], ("", namespace), changes)
            self._finishing.discard(namespace)
        self._notify(changes)

    def _schedule(self, work: Callable[..., None], *args: Any) -> None:
        """Run ``work`` soon on the store's worker thread (started on demand, gone when idle);
        :meth:`settle` waits for it. Call with the lock held."""
        self._pending += 1
        self._work.append((work, args))
        if self._worker is None:
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

    def settle(self, timeout: float = 2.0) -> None:
        """Wait until no garbage collection or deletion is pending (TimeoutError otherwise)."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout):
                raise TimeoutError("fakekube: deletions still pending")

    # --- watching --------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[str, Obj], None]) -> None:
        """Call ``callback(type, copy of obj)`` after every change, outside the lock, in the
        thread that made it. ``type`` is ADDED, MODIFIED or DELETED."""
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
            return [copy.deepcopy(bucket[k]) for k in sorted(bucket)], self._rv

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
                callback(change.type, copy.deepcopy(change.obj))
        for waker in wakers:
            waker()

    # --- logs and files --------------------------------------------------------------------

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
            chunk = LogChunk(time.time() if at is None else at, text, instance)
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

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _key(rk: ResourceKind, namespace: str | None, name: str) -> tuple[str, str]:
        return ((namespace or "default") if rk.namespaced else "", name)

    def _existing(self, rk: ResourceKind, key: tuple[str, str]) -> Obj:
        obj = self._objects[(rk.api_version, rk.kind)].get(key)
        if obj is None:
            raise StoreError(
                404, "NotFound", f'{rk.resource} "{key[1]}" not found', rk.details(key[1])
            )
        return obj

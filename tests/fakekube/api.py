"""The API server's answers over a Store, without the wire: what the HTTP server
(``fakekube.server``) serves.

Every function raises :class:`StoreError` (a ``Status``) where the real server answers an error:
404 for a missing object or kind, 400 for a bad selector, continue token or container, 410 for a
continue token or watch version that compaction has forgotten, 422 for an invalid object, 403
where the store's RBAC (``store.access``, ``fakekube.access``) allows none of it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .access import Attempt
from .events import EVENTS_V1, Conversion
from .resources import CRD_KEY, Change, LogChunk, ResourceKind, StoreError, rfc3339
from .selectors import Matcher, field_matcher, label_matcher
from .store import Store
from .validation import merge_patch, validate

Obj = dict[str, Any]

# Versions served from another's storage: the same objects, under other field names.
CONVERSIONS: dict[tuple[str, str], Conversion] = {("events.k8s.io/v1", "Event"): EVENTS_V1}

__all__ = [
    "LogRead",
    "authorize",
    "bad",
    "container_of",
    "create",
    "current",
    "delete",
    "exec_container",
    "list_page",
    "log_read",
    "patch",
    "snapshot",
    "watch_event",
    "watch_matcher",
]


def bad(message: str, code: int = 400, reason: str = "BadRequest") -> StoreError:
    return StoreError(code, reason, message)


def authorize(store: Store, attempt: Attempt) -> None:
    """StoreError 403 when the store's RBAC does not allow ``attempt``."""
    if store.access is not None:
        store.access.check(attempt)


# --- objects -------------------------------------------------------------------------------------


def _conversion(kind: ResourceKind) -> Conversion | None:
    return CONVERSIONS.get((kind.api_version, kind.kind))


def _stored(kind: ResourceKind) -> tuple[str, str]:
    """The (apiVersion, kind) the objects of ``kind`` are stored as."""
    conversion = _conversion(kind)
    return conversion.stored if conversion else (kind.api_version, kind.kind)


def _served(kind: ResourceKind, obj: Obj) -> Obj:
    conversion = _conversion(kind)
    return conversion.read(obj) if conversion else obj


def _to_store(kind: ResourceKind, obj: Obj) -> Obj:
    conversion = _conversion(kind)
    return conversion.write(obj) if conversion else obj


def _fields(kind: ResourceKind, selector: str) -> str:
    conversion = _conversion(kind)
    return conversion.fields(selector) if conversion else selector


def current(store: Store, kind: ResourceKind, namespace: str | None, name: str) -> Obj:
    authorize(store, Attempt("get", kind, namespace, name))
    return _get(store, kind, namespace, name)


def _get(store: Store, kind: ResourceKind, namespace: str | None, name: str) -> Obj:
    obj = store.get(*_stored(kind), namespace, name)
    if obj is None:
        raise StoreError(404, "NotFound", f'{kind.resource} "{name}" not found', kind.details(name))
    return _served(kind, obj)


def create(
    store: Store, kind: ResourceKind, obj: Obj, *, strict: bool, dry_run: bool = False
) -> Obj:
    """``dry_run`` (``dryRun=All``): decoded, defaulted and validated, CEL rules too, and then
    not stored."""
    authorize(store, Attempt("create", kind, (obj.get("metadata") or {}).get("namespace")))
    if "status" in kind.subresources:
        obj = {k: v for k, v in obj.items() if k != "status"}  # the controllers' to write
    created = store.create(_to_store(kind, validate(kind, obj, strict=strict)), dry_run=dry_run)
    if (kind.api_version, kind.kind) == CRD_KEY and not dry_run:
        store.warm_up(created)
    return _served(kind, created)


def patch(store: Store, kind: ResourceKind, namespace: str | None, name: str, change: Any) -> Obj:
    """A JSON merge patch of the object (a status subresource keeps the status)."""
    if not isinstance(change, dict):
        raise bad("a merge patch must be a JSON object")
    authorize(store, Attempt("patch", kind, namespace, name))
    stored = _get(store, kind, namespace, name)
    result = merge_patch(stored, change)
    meta = result.setdefault("metadata", {})
    meta["name"], meta["namespace"] = name, namespace
    if not kind.namespaced:
        del meta["namespace"]
    result["apiVersion"], result["kind"] = kind.api_version, kind.kind
    obj = _to_store(kind, validate(kind, result, strict=False, old=stored))
    keep_status = "status" in kind.subresources
    return _served(kind, store.apply_update(obj, keep_status=keep_status, check_rv=True))


def delete(
    store: Store, kind: ResourceKind, namespace: str | None, name: str, propagation: str
) -> tuple[Obj, bool]:
    """``(last state, gone already)``; Foreground and finalizers keep it for a while."""
    authorize(store, Attempt("delete", kind, namespace, name))
    obj, gone = store.delete(*_stored(kind), namespace, name, propagation)
    return _served(kind, obj), gone


# --- lists and watches ---------------------------------------------------------------------------


def list_page(
    store: Store,
    kind: ResourceKind,
    namespace: str | None,
    *,
    label_selector: str = "",
    field_selector: str = "",
    limit: int = 0,
    continue_token: str | None = None,
) -> tuple[list[Obj], int, str | None]:
    """``(items, resourceVersion, continue token when more remain)``; 429 for the first list
    of a kind whose CRD was just installed."""
    authorize(store, Attempt("list", kind, namespace))
    if store.initializing(kind.api_version, kind.kind):
        raise StoreError(
            429, "TooManyRequests", "storage is (re)initializing", {"retryAfterSeconds": 1}
        )
    after: tuple[str, str] | None = None
    if continue_token:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
            token_rv, after = int(decoded["rv"]), (decoded["start"][0], decoded["start"][1])
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise bad(f"continue key is not valid: {exc}") from exc
        try:
            store.changes_after(token_rv)
        except StoreError as exc:
            raise StoreError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            ) from exc
    items, rv, last = store.page(
        *_stored(kind),
        namespace,
        label_selector,
        _fields(kind, field_selector),
        limit=limit,
        after=after,
    )
    items = [_served(kind, item) for item in items]
    token = None
    if last is not None:
        token = base64.urlsafe_b64encode(
            json.dumps({"rv": rv, "start": list(last)}).encode()
        ).decode()
    return items, rv, token


def watch_matcher(
    store: Store,
    kind: ResourceKind,
    namespace: str | None,
    label_selector: str,
    field_selector: str,
) -> Matcher:
    """What a watch with these selectors sees of the stored objects (StoreError 400 for a bad
    selector, 403 when watching is not allowed)."""
    authorize(store, Attempt("watch", kind, namespace))
    labels = label_matcher(label_selector)
    fields = field_matcher(_stored(kind)[1], _fields(kind, field_selector))

    def matches(obj: Obj) -> bool:
        in_ns = namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace
        return in_ns and labels(obj) and fields(obj)

    return matches


def watch_event(
    change: Change, kind: ResourceKind, matches: Callable[[Obj], bool]
) -> tuple[str, Obj] | None:
    """The event a watcher with this filter sees for ``change`` (None: nothing); an object
    leaving the selection is DELETED for it, one entering it ADDED."""
    if (change.api_version, change.kind) != _stored(kind):
        return None
    now = matches(change.obj)
    if change.type != "MODIFIED" or change.old is None:
        return (change.type, _served(kind, change.obj)) if now else None
    before = matches(change.old)
    if now and before:
        return "MODIFIED", _served(kind, change.obj)
    if now:
        return "ADDED", _served(kind, change.obj)
    if before:
        return "DELETED", _served(kind, change.obj)
    return None


def snapshot(store: Store, kind: ResourceKind, matches: Matcher) -> tuple[list[Obj], int]:
    """What a watch from "now" starts with: the matching objects and the resourceVersion."""
    objs, rv = store.snapshot(*_stored(kind))
    return [_served(kind, obj) for obj in objs if matches(obj)], rv


# --- logs and exec -------------------------------------------------------------------------------


def container_of(pod: Obj, container: str | None) -> str:
    """The container a request means: the one named (StoreError 400 if the pod has none so
    named), or the pod's only one."""
    name = pod["metadata"]["name"]
    spec = pod.get("spec") or {}
    names: list[str] = [c["name"] for c in spec.get("containers") or []]
    init: list[str] = [c["name"] for c in spec.get("initContainers") or []]
    if not container:
        if len(names) != 1:
            raise bad(
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(names)}]"
                + (f" or one of the init containers: [{' '.join(init)}]" if init else "")
            )
        return names[0]
    if container not in names + init:
        raise bad(f"container {container} is not valid for pod {name}")
    return container


def _container_status(pod: Obj, container: str) -> Obj:
    status = pod.get("status") or {}
    for entry in (status.get("containerStatuses") or []) + (
        status.get("initContainerStatuses") or []
    ):
        if entry.get("name") == container:
            return dict(entry)
    return {}


def _stamped(chunks: list[LogChunk], stamps: bool) -> list[str]:
    """The chunks' lines (ends kept), each prefixed with its time if ``stamps``. A line ends
    at ``\n`` only, as the kubelet's do (a ``\r`` of a progress bar stays inside its line)."""
    out: list[str] = []
    for chunk in chunks:
        lines = re.findall(r"[^\n]*\n|[^\n]+", chunk.text)
        if stamps:
            lines = [f"{rfc3339(chunk.time, nano=True)} {line}" for line in lines]
        out += lines
    return out


@dataclass
class LogRead:
    """One container's log as a reader sees it: what it has been given so far, and what is
    new since (the follow of a restarted container goes on with its new run)."""

    store: Store
    namespace: str
    pod: str
    container: str
    stamps: bool
    seen: int = 0  # chunks of the log already given
    ended: bool = False  # the answer was empty and closed (a pod not scheduled yet)

    def more(self) -> list[str]:
        if self.ended:
            return []
        chunks = self.store.log(self.namespace, self.pod, self.container)
        new, self.seen = chunks[self.seen :], max(self.seen, len(chunks))
        return _stamped(new, self.stamps)

    def finished(self) -> bool:
        """Whether the container has ended (or its pod is gone): a follow ends then."""
        if self.ended:
            return True
        pod = self.store.get("v1", "Pod", self.namespace, self.pod)
        if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return True
        return bool((_container_status(pod, self.container).get("state") or {}).get("terminated"))


def log_read(
    store: Store,
    namespace: str,
    name: str,
    *,
    container: str | None,
    since_seconds: float | None,
    tail_lines: int | None,
    stamps: bool,
) -> tuple[list[str], LogRead]:
    """The container's current run as it is (``since``/``tail`` applied), and the reader that
    gives what comes next. StoreError 400 while the container waits to start; nothing at all for
    a pod not scheduled yet (no kubelet to ask)."""
    pods = store.kind("v1", "Pod")
    authorize(store, Attempt("get", pods, namespace, name, "log"))
    pod = _get(store, pods, namespace, name)
    chosen = container_of(pod, container)
    node = (pod.get("spec") or {}).get("nodeName")
    status = _container_status(pod, chosen)
    state = status.get("state") or {}
    pending = (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    if not node and not status and pending:  # not scheduled: no kubelet to ask; says nothing
        return [], LogRead(store, namespace, name, chosen, stamps, ended=True)
    if "waiting" in state or (not status and pending):
        reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
        raise bad(f'container "{chosen}" in pod "{name}" is waiting to start: {reason}')
    run = status.get("restartCount", 0)
    cutoff = store.clock() - since_seconds if since_seconds is not None else None
    chunks = store.log(namespace, name, chosen)
    first = [c for c in chunks if c.instance == run and (cutoff is None or c.time >= cutoff)]
    lines = _stamped(first, stamps)
    if tail_lines is not None:
        lines = lines[-tail_lines:] if tail_lines > 0 else []
    return lines, LogRead(store, namespace, name, chosen, stamps, len(chunks))


def exec_container(store: Store, namespace: str, name: str, container: str | None) -> Obj:
    """The pod to exec into (its running ``container`` checked): StoreError 404 or 400."""
    pods = store.kind("v1", "Pod")
    authorize(store, Attempt("create", pods, namespace, name, "exec"))
    pod = _get(store, pods, namespace, name)
    chosen = container_of(pod, container)
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise bad(f"cannot exec into a container in a completed pod; current phase is {phase}")
    state = _container_status(pod, chosen).get("state") or {}
    if phase != "Running" or ("running" not in state and state):
        raise bad(f'unable to upgrade connection: container not found ("{chosen}")')
    return pod

"""The API server's answers over a Store, without the wire: what the HTTP server
(``fakekube.server``) and the in-memory port (``fakekube.memory``) both serve, so the two agree.

Every function raises :class:`StoreError` (a ``Status``) where the real server answers an error:
404 for a missing object or kind, 400 for a bad selector, continue token or container, 410 for a
continue token or watch version that compaction has forgotten, 422 for an invalid object.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .resources import CRD_KEY, Change, LogChunk, ResourceKind, StoreError
from .selectors import Matcher, field_matcher, label_matcher
from .store import Store
from .validation import merge_patch, validate

Obj = dict[str, Any]

__all__ = [
    "LogRead",
    "bad",
    "container_of",
    "create",
    "current",
    "delete",
    "exec_container",
    "list_page",
    "log_read",
    "patch",
    "watch_event",
    "watch_matcher",
]


def bad(message: str, code: int = 400, reason: str = "BadRequest") -> StoreError:
    return StoreError(code, reason, message)


# --- objects -------------------------------------------------------------------------------------


def current(store: Store, kind: ResourceKind, namespace: str | None, name: str) -> Obj:
    obj = store.get(kind.api_version, kind.kind, namespace, name)
    if obj is None:
        raise StoreError(404, "NotFound", f'{kind.resource} "{name}" not found', kind.details(name))
    return obj


def create(
    store: Store, kind: ResourceKind, obj: Obj, *, strict: bool, dry_run: bool = False
) -> Obj:
    """``dry_run`` (``dryRun=All``): decoded, defaulted and validated, CEL rules too, and then
    not stored."""
    if "status" in kind.subresources:
        obj = {k: v for k, v in obj.items() if k != "status"}  # the controllers' to write
    created = store.create(validate(kind, obj, strict=strict), dry_run=dry_run)
    if (kind.api_version, kind.kind) == CRD_KEY and not dry_run:
        store.warm_up(created)
    return created


def patch(store: Store, kind: ResourceKind, namespace: str | None, name: str, change: Any) -> Obj:
    """A JSON merge patch of the object (a status subresource keeps the status)."""
    if not isinstance(change, dict):
        raise bad("a merge patch must be a JSON object")
    stored = current(store, kind, namespace, name)
    result = merge_patch(stored, change)
    meta = result.setdefault("metadata", {})
    meta["name"], meta["namespace"] = name, namespace
    if not kind.namespaced:
        del meta["namespace"]
    result["apiVersion"], result["kind"] = kind.api_version, kind.kind
    obj = validate(kind, result, strict=False, old=stored)
    keep_status = "status" in kind.subresources
    return store.apply_update(obj, keep_status=keep_status, check_rv=True)


def delete(
    store: Store, kind: ResourceKind, namespace: str | None, name: str, propagation: str
) -> tuple[Obj, bool]:
    """``(last state, gone already)``; Foreground and finalizers keep it for a while."""
    return store.delete(kind.api_version, kind.kind, namespace, name, propagation)


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
        kind.api_version,
        kind.kind,
        namespace,
        label_selector,
        field_selector,
        limit=limit,
        after=after,
    )
    token = None
    if last is not None:
        token = base64.urlsafe_b64encode(
            json.dumps({"rv": rv, "start": list(last)}).encode()
        ).decode()
    return items, rv, token


def watch_matcher(
    kind: ResourceKind, namespace: str | None, label_selector: str, field_selector: str
) -> Matcher:
    """What a watch with these selectors sees (StoreError 400 for a bad selector)."""
    labels = label_matcher(label_selector)
    fields = field_matcher(kind.kind, field_selector)

    def matches(obj: Obj) -> bool:
        in_ns = namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace
        return in_ns and labels(obj) and fields(obj)

    return matches


def watch_event(
    change: Change, kind: ResourceKind, matches: Callable[[Obj], bool]
) -> tuple[str, Obj] | None:
    """The event a watcher with this filter sees for ``change`` (None: nothing); an object
    leaving the selection is DELETED for it, one entering it ADDED."""
    if (change.api_version, change.kind) != (kind.api_version, kind.kind):
        return None
    now = matches(change.obj)
    if change.type != "MODIFIED" or change.old is None:
        return (change.type, change.obj) if now else None
    before = matches(change.old)
    if now and before:
        return "MODIFIED", change.obj
    if now:
        return "ADDED", change.obj
    if before:
        return "DELETED", change.obj
    return None


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
    """The chunks' lines (ends kept), each prefixed with its time if ``stamps``."""
    out: list[str] = []
    for chunk in chunks:
        lines = chunk.text.splitlines(keepends=True)
        if stamps:
            moment = datetime.fromtimestamp(chunk.time, UTC)
            stamp = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}000Z "
            lines = [stamp + line for line in lines]
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

    def more(self) -> list[str]:
        chunks = self.store.log(self.namespace, self.pod, self.container)
        new, self.seen = chunks[self.seen :], max(self.seen, len(chunks))
        return _stamped(new, self.stamps)

    def finished(self) -> bool:
        """Whether the container has ended (or its pod is gone): a follow ends then."""
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
    gives what comes next. StoreError 400 while the container waits to start."""
    pod = current(store, store.kind("v1", "Pod"), namespace, name)
    chosen = container_of(pod, container)
    status = _container_status(pod, chosen)
    state = status.get("state") or {}
    if "waiting" in state or (not status and (pod.get("status") or {}).get("phase") == "Pending"):
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
    pod = current(store, store.kind("v1", "Pod"), namespace, name)
    chosen = container_of(pod, container)
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise bad(f"cannot exec into a container in a completed pod; current phase is {phase}")
    state = _container_status(pod, chosen).get("state") or {}
    if phase != "Running" or ("running" not in state and state):
        raise bad(f'unable to upgrade connection: container not found ("{chosen}")')
    return pod

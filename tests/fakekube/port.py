"""``kfcompile.lifecycle.ports.Cluster`` as a dict, for the lifecycle tests: no controller, no
thread.

The objects (``Objects``) are keyed by (apiVersion, kind, namespace, name), each write a new
resourceVersion; the CRDs among them say what is served, and a create is checked against its CRD
with ``kfcompile.output.crd`` (the real CRDs are the oracle; no CEL: a test that needs the server's
own words scripts them as a fault). Nothing moves a job by itself: a test scripts what the cluster
does (``at``: a change at a fake-clock time), and ``FakeClock`` runs it when the code under test
waits. Answers are the port's: the ``ApiError`` family (404, 409, 410 for a watch or a continue
token older than the last ``compact``, 422 with the CRD's complaint), ``ValueError`` for a
namespaced object without a namespace, copies never shared with the store. A watch with nothing to
say waits on the fake clock and ends after its ``timeout_seconds`` with a BOOKMARK, as the server's
does for the adapter. An exec runs its command in-process on the pod's volumes (``fakekube.shell``:
tar, mkdir, cat, sh -c). Faults and the record of calls are ``faults.Faults`` and
``requestlog.RequestLog``, as for the HTTP server: a call is its method name and ``Kind/name``.

Deletion as the API server and garbage collector do it: a deleted object with ``finalizers``
stays with a ``deletionTimestamp`` until they are removed; ``Foreground`` holds it by the
``foregroundDeletion`` finalizer until the objects it owns are gone, which the garbage collector
(``gc``: running or not, ``lag`` seconds late) deletes at the next tick.
"""

from __future__ import annotations

import base64
import bisect
import functools
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from attrs import frozen

from kfcompile.lifecycle.ports import (
    Conflict,
    ExecOutput,
    ExecResult,
    Gone,
    Invalid,
    NotFound,
    Obj,
    Page,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile.output import crd

from .clock import FakeClock
from .events import EVENTS_V1, EVENTS_V1_KEY
from .faults import Fault, Faults
from .requestlog import RequestLog, RequestRecord
from .resources import StoreError, rfc3339
from .selectors import field_matcher, label_matcher
from .shell import Filesystem, reads_stdin, run_command
from .validation import merge_patch as _merge

__all__ = ["Kind", "Objects", "PortFake", "rfc3339"]

Key = tuple[str, str, str | None, str]
FOREGROUND = "foregroundDeletion"
CRD_KIND = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


@frozen
class Kind:
    group: str
    plural: str
    namespaced: bool


# What a cluster serves without a CRD (the kinds the lifecycle and its tests use).
BUILTIN: dict[tuple[str, str], Kind] = {
    ("v1", "Pod"): Kind("", "pods", True),
    ("v1", "Event"): Kind("", "events", True),
    ("events.k8s.io/v1", "Event"): Kind("events.k8s.io", "events", True),
    ("v1", "Secret"): Kind("", "secrets", True),
    ("v1", "ConfigMap"): Kind("", "configmaps", True),
    ("v1", "PersistentVolumeClaim"): Kind("", "persistentvolumeclaims", True),
    ("v1", "Namespace"): Kind("", "namespaces", False),
    CRD_KIND: Kind("apiextensions.k8s.io", "customresourcedefinitions", False),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue"): Kind("kueue.x-k8s.io", "localqueues", True),
    ("kueue.x-k8s.io/v1beta1", "Workload"): Kind("kueue.x-k8s.io", "workloads", True),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue"): Kind("kueue.x-k8s.io", "clusterqueues", False),
    ("kueue.x-k8s.io/v1beta1", "AdmissionCheck"): Kind("kueue.x-k8s.io", "admissionchecks", False),
}


def _copy(obj: Any) -> Any:
    """What the other side would get: a JSON copy."""
    return json.loads(json.dumps(obj))


def _matches(
    obj: Obj, api_version: str, kind: str, namespace: str | None, labels: str, fields: str
) -> bool:
    """Whether a list or watch of ``kind`` in ``namespace`` (None: all) with these selectors
    (parsed as the HTTP server parses them: ``fakekube.selectors``) has ``obj``."""
    meta, core = obj.get("metadata") or {}, None
    try:
        if (api_version, kind) == EVENTS_V1_KEY:  # selected by its core/v1 fields, as served
            fields, core = EVENTS_V1.fields(fields), EVENTS_V1.write(obj)
        by_labels, by_fields = label_matcher(labels), field_matcher(kind, fields)
    except StoreError as exc:
        raise Invalid(exc.code, exc.reason, exc.message) from None
    return (
        (obj["apiVersion"], obj["kind"]) == (api_version, kind)
        and namespace in (None, meta.get("namespace"))
        and by_labels(obj)
        and by_fields(core or obj)
    )


class Objects:
    """The cluster's objects and their history: what a test seeds and reads directly."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.rv = 0
        self.items: dict[Key, Obj] = {}
        # (resourceVersion, type, object, the object before: None when it is new)
        self.changes: list[tuple[int, str, Obj, Obj | None]] = []
        self.compacted = 0  # versions before this give 410
        self.uids = itertools.count(1)
        self.crds: dict[tuple[str, str], Obj] = {}  # (apiVersion, kind) served: its CRD
        self.volumes: dict[tuple[str, ...], tuple[dict[str, bytes], set[str]]] = {}

    def kind(self, api_version: str, kind: str) -> Kind | None:
        """The kind if served: built in, or by a CRD among the objects."""
        if (api_version, kind) in BUILTIN:
            return BUILTIN[api_version, kind]
        found = self.crd(api_version, kind)
        if found is None:
            return None
        spec = found["spec"]
        return Kind(spec["group"], spec["names"]["plural"], spec["scope"] == "Namespaced")

    def crd(self, api_version: str, kind: str) -> Obj | None:
        return self.crds.get((api_version, kind))

    def _index(self, key: Key, obj: Obj | None) -> None:
        """Keep ``crds`` as the CRDs stored say."""
        if key[:2] != CRD_KIND:
            return
        self.crds = {k: v for k, v in self.crds.items() if v["metadata"]["name"] != key[3]}
        if obj is not None:
            for api_version, kind, _ in crd.crd_versions(obj):
                self.crds[api_version, kind] = obj

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        obj = self.items.get((api_version, kind, namespace, name))
        return _copy(obj) if obj is not None else None

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, selector: str = ""
    ) -> list[Obj]:
        return [_copy(obj) for obj in self.select(api_version, kind, namespace, selector)]

    def select(
        self, api_version: str, kind: str, namespace: str | None, labels: str = "", fields: str = ""
    ) -> list[Obj]:
        """The stored objects a list would answer, in its order (not copies)."""
        return [
            obj
            for key, obj in sorted(self.items.items(), key=lambda kv: str(kv[0]))
            if _matches(obj, api_version, kind, namespace, labels, fields)
        ]

    def put(self, obj: Obj) -> Obj:
        """Store ``obj`` as it is (created or replaced), as the controller would write it, and
        return it as stored. Stored objects are never changed in place, only replaced, so ``obj``
        is not copied but for its metadata: neither it nor what is returned may be changed."""
        given, obj = obj, {**obj, "metadata": dict(obj.get("metadata") or {})}
        meta = obj["metadata"]
        key: Key = (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        old = self.items.get(key)
        kept = (old or {}).get("metadata") or {
            "uid": f"uid-{next(self.uids)}",
            "creationTimestamp": rfc3339(self.clock.time()),
            "generation": 1,
        }
        for field in ("uid", "creationTimestamp", "generation"):  # the server's, kept
            meta.setdefault(field, kept.get(field))
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.items[key] = obj
        self._index(key, given)  # a CRD as given: its validator is built once (output.crd)
        self.changes.append((self.rv, "ADDED" if old is None else "MODIFIED", obj, old))
        return obj

    create = update = put  # what ``cluster.install`` seeds through; a controller's write

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Gone at once, as someone else's deletion; what it owns goes at the next tick."""
        self.remove((api_version, kind, namespace, name))

    def change(
        self, api_version: str, kind: str, namespace: str | None, name: str, patch: Obj
    ) -> Obj:
        """Apply a merge patch (a status, a label...) to a stored object."""
        key: Key = (api_version, kind, namespace, name)
        return self.put(_merge(self.items[key], patch))

    def remove(self, key: Key) -> None:
        obj = self.items.pop(key)
        self._index(key, None)
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self.changes.append((self.rv, "DELETED", obj, obj))

    def filesystem(self, key: tuple[str, ...]) -> tuple[dict[str, bytes], set[str]]:
        """The files and directories of a volume (``fakekube.shell``'s commands run on them)."""
        return self.volumes.setdefault(key, ({}, set()))

    def volume(self, namespace: str, claim: str) -> dict[str, bytes]:
        """The files on a PersistentVolumeClaim, by path."""
        return self.filesystem(("pvc", namespace, claim))[0]

    def compact(self) -> None:
        """Forget the history: older resourceVersions and continue tokens now give 410."""
        self.compacted = self.rv
        self.changes.clear()


class PortFake:
    """The ``Cluster`` port over ``Objects``; ``at`` scripts what happens, ``gc`` how the
    garbage collector works."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.objects = Objects(self.clock)
        self.faults = Faults(port=True)
        self.calls = RequestLog()
        self.logs: dict[tuple[str, str], list[tuple[float, str]]] = {}  # (ns, pod): lines
        self.gc_running, self.gc_lag = True, 0.0
        self.kubelets_down: set[str] = set()  # nodes whose deleted pods stay Terminating
        # Told of each object created, and of each patched (the object as it now is).
        self.on_create: list[Callable[[Obj], object]] = []
        self.on_patch: list[Callable[[Obj], object]] = []
        self._script: list[tuple[float, Callable[[], object]]] = []
        self.clock.drive(self._tick)

    # --- for the tests ---------------------------------------------------------------------

    def at(self, seconds: float, change: Callable[[], object]) -> None:
        """Do ``change()`` at the first tick ``seconds`` of fake time from now."""
        self._script.append((self.clock.monotonic() + seconds, change))

    def gc(self, *, running: bool = True, lag: float = 0.0) -> None:
        self.gc_running, self.gc_lag = running, lag

    def log(self, namespace: str, pod: str, *lines: str) -> None:
        """The pod's container writes ``lines`` now (``restart``: its log starts over)."""
        self.logs.setdefault((namespace, pod), []).extend((self.clock.time(), x) for x in lines)

    def new_log(self, namespace: str, pod: str) -> None:
        """The pod's container restarted: its log starts over (a follow of the old one ends)."""
        self.logs[namespace, pod] = []

    def _tick(self) -> None:
        due = [step for step in self._script if step[0] <= self.clock.monotonic()]
        self._script = [step for step in self._script if step not in due]
        for _, change in due:
            change()
        if self.gc_running:
            self._collect()

    def _collect(self) -> None:
        """The garbage collector: dependents of deleted owners go; a foreground owner goes
        once it has none left."""
        now = self.clock.time()
        for key, obj in list(self._deleted()):
            if key not in self.objects.items:
                continue  # gone as another's dependent
            meta = obj["metadata"]
            since = datetime.fromisoformat(meta["deletionTimestamp"]).timestamp()
            if now - since < self.gc_lag:
                continue
            owned = self._owned_by(meta["uid"])
            for dependent in owned:
                self._delete(dependent, "Background")
            if FOREGROUND in meta.get("finalizers", []) and not any(
                k in self.objects.items for k in owned
            ):
                left = [f for f in meta["finalizers"] if f != FOREGROUND]
                self._finalize(key, left)
        for key, obj in list(self._deleted()):  # a kubelet back confirms its pods gone
            if not (obj["metadata"].get("finalizers") or self._kubelet_down(obj)):
                self.objects.remove(key)
        uids = {o["metadata"]["uid"] for o in self.objects.items.values()}
        for key, obj in list(self.objects.items.items()):  # orphans of a background deletion
            owners = obj["metadata"].get("ownerReferences") or []
            if owners and not any(o["uid"] in uids for o in owners):
                self._delete(key, "Background")

    def _deleted(self) -> Iterator[tuple[Key, Obj]]:
        for key, obj in self.objects.items.items():
            if obj["metadata"].get("deletionTimestamp"):
                yield key, obj

    def _kubelet_down(self, obj: Obj) -> bool:
        return (
            obj["kind"] == "Pod" and (obj.get("spec") or {}).get("nodeName") in self.kubelets_down
        )

    def _owned_by(self, uid: str) -> list[Key]:
        return [
            key
            for key, obj in self.objects.items.items()
            if any(o.get("uid") == uid for o in obj["metadata"].get("ownerReferences") or [])
        ]

    def _finalize(self, key: Key, finalizers: list[str]) -> None:
        obj = self.objects.items[key]
        if finalizers:
            self.objects.put(_merge(obj, {"metadata": {"finalizers": finalizers}}))
        else:
            self.objects.remove(key)

    def _delete(self, key: Key, propagation: str) -> None:
        obj = self.objects.items.get(key)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if propagation == "Foreground" and self._owned_by(obj["metadata"]["uid"]):
            finalizers.append(FOREGROUND)
        if not (finalizers or self._kubelet_down(obj)):
            self.objects.remove(key)
            return
        stamp: Obj = {"deletionTimestamp": rfc3339(self.clock.time()), "finalizers": finalizers}
        if key[1] == "Pod":
            stamp["deletionGracePeriodSeconds"] = 30
        self.objects.put(_merge(obj, {"metadata": stamp}))

    # --- the port --------------------------------------------------------------------------

    def served(self, api_version: str, kind: str) -> bool:
        self._enter("served", api_version, kind, None, None)
        return self.objects.kind(api_version, kind) is not None

    def get(self, ref: Ref) -> Obj:
        fault = self._enter("get", ref.api_version, ref.kind, ref.namespace, ref.name)
        obj = self._existing(self._key(ref.api_version, ref.kind, ref.namespace, ref.name))
        return self._answer(fault, _copy(obj))

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        meta = obj.get("metadata") or {}
        api_version, kind, namespace = obj["apiVersion"], obj["kind"], meta.get("namespace")
        shape = {"dry_run": dry_run} if dry_run else {}
        fault = self._enter("create", api_version, kind, namespace, meta.get("name"), **shape)
        key = self._key(api_version, kind, namespace, meta.get("name", ""))
        schema = self.objects.crd(api_version, kind)
        problems = crd.errors(obj, schema) if schema is not None else []
        if problems:
            raise Invalid(422, "Invalid", f'{kind} "{key[3]}" is invalid: {"; ".join(problems)}')
        if key in self.objects.items:
            raise Conflict(409, "AlreadyExists", f'{self._what(key)} "{key[3]}" already exists')
        body = _copy(obj)
        if kind == "Secret" and "stringData" in body:  # the API server encodes it
            data = {
                k: base64.b64encode(v.encode()).decode() for k, v in body.pop("stringData").items()
            }
            body["data"] = {**body.get("data", {}), **data}
        if dry_run:
            return self._answer(fault, body)
        stored = self.objects.put(body)
        for hook in self.on_create:
            hook(stored)
        return self._answer(fault, _copy(stored))

    def patch(self, ref: Ref, patch: Obj) -> Obj:
        fault = self._enter("patch", ref.api_version, ref.kind, ref.namespace, ref.name)
        key = self._key(ref.api_version, ref.kind, ref.namespace, ref.name)
        old = self._existing(key)
        new = _merge(old, _copy(patch))
        if new.get("spec") != old.get("spec"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        stored = self.objects.put(new)
        for hook in self.on_patch:
            hook(stored)
        return self._answer(fault, _copy(stored))

    def delete(self, ref: Ref, propagation: str = "Foreground") -> None:
        args = {"propagation": propagation}
        fault = self._enter("delete", ref.api_version, ref.kind, ref.namespace, ref.name, **args)
        key = self._key(ref.api_version, ref.kind, ref.namespace, ref.name)
        self._existing(key)
        self._delete(key, propagation)
        self._answer(fault, None)

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 500,
        continue_token: str | None = None,
    ) -> Page:
        shape = {"label_selector": label_selector, "field_selector": field_selector, "limit": limit}
        fault = self._enter("list", api_version, kind, namespace, None, **shape)
        self._served(api_version, kind)
        rv, start = (int(n) for n in (continue_token or f"{self.objects.rv}:0").split(":"))
        if rv < self.objects.compacted:
            raise Gone(410, "Expired", "The provided continue parameter is too old")
        matching = self.objects.select(api_version, kind, namespace, label_selector, field_selector)
        page = matching[start : start + limit]
        more = start + limit < len(matching)
        token = f"{rv}:{start + limit}" if more else None
        remaining = (
            len(matching) - start - limit
            if more and not (label_selector or field_selector)
            else None
        )
        return self._answer(fault, Page(_copy(page), str(rv), token, remaining))

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:
        shape = {"label_selector": label_selector, "field_selector": field_selector}
        fault = self._enter(
            "watch", api_version, kind, namespace, None, **shape, rv=resource_version
        )
        self._served(api_version, kind)
        self._answer(fault, None)  # a lost answer: the stream never came

        matches = functools.partial(
            _matches,
            api_version=api_version,
            kind=kind,
            namespace=namespace,
            labels=label_selector,
            fields=field_selector,
        )

        def events() -> Iterator[WatchEvent]:
            deadline = self.clock.monotonic() + timeout_seconds
            if resource_version in ("", "0"):
                cursor = self.objects.rv
                for obj in self.objects.select(
                    api_version, kind, namespace, label_selector, field_selector
                ):
                    yield WatchEvent("ADDED", _copy(obj))
            else:
                cursor = int(resource_version)
            while True:
                if cursor < self.objects.compacted:
                    raise Gone(410, "Expired", "too old resource version")
                changes = self.objects.changes
                for rv, type_, obj, old in changes[
                    bisect.bisect(changes, cursor, key=itemgetter(0)) :
                ]:
                    cursor = rv
                    # Into the selection: ADDED; out of it: DELETED, as the server's watch cache
                    now, before = (
                        type_ != "DELETED" and matches(obj),
                        old is not None and matches(old),
                    )
                    if now or before:
                        seen = "MODIFIED" if now and before else "ADDED" if now else "DELETED"
                        yield WatchEvent(seen, _copy(obj))
                if self.clock.monotonic() >= deadline:
                    meta = {"resourceVersion": str(cursor)}
                    yield WatchEvent(
                        "BOOKMARK", {"apiVersion": api_version, "kind": kind, "metadata": meta}
                    )
                    return
                self.clock.idle(until=deadline)

        yield from _cut(events(), fault)

    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        shape = {
            "container": container,
            "follow": follow,
            "since_seconds": since_seconds,
            "tail_lines": tail_lines,
            "timestamps": timestamps,
        }
        fault = self._enter("pod_log", "v1", "Pod", namespace, pod, **shape)
        self._not_waiting(self._existing(("v1", "Pod", namespace, pod)), container)
        self._answer(fault, None)
        lines = self.logs.setdefault((namespace, pod), [])
        since = self.clock.time() - since_seconds if since_seconds is not None else None

        def read() -> Iterator[str]:
            start = 0 if tail_lines is None else max(0, len(lines) - tail_lines)
            while True:
                # Ends with its container: the pod finished, or the container restarted.
                restarted = self.logs.get((namespace, pod)) is not lines
                done = not follow or self._finished(namespace, pod) or restarted
                while start < len(lines):  # what is written while a line is out comes too
                    when, line = lines[start]
                    start += 1
                    if since is None or when >= since:
                        yield f"{rfc3339(when, nano=True)} {line}" if timestamps else line
                if done:
                    return
                self.clock.idle()

        yield from _cut(read(), fault)

    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: Sequence[str],
        stdin: bytes | Iterable[bytes] = b"",
        *,
        stdout: Callable[[ExecOutput], object] | None = None,
    ) -> ExecResult:
        fault = self._enter("exec", "v1", "Pod", namespace, pod, command=list(command))
        target = self._existing(("v1", "Pod", namespace, pod))
        if not command:
            raise Invalid(400, "BadRequest", "you must specify at least 1 command")
        if self._finished(namespace, pod):
            raise Invalid(400, "BadRequest", "cannot exec into a container in a completed pod")
        argv = list(command)
        data = b""
        if reads_stdin(argv):  # drawn as the command reads it; what it raises passes through
            data = stdin if isinstance(stdin, bytes) else b"".join(stdin)
        answer = fault.exec_stdout if fault is not None else None
        if answer is not None:
            chunks: Iterable[bytes | memoryview] = [answer] if isinstance(answer, bytes) else answer
            stderr, code = b"", 0
        else:
            chunks, stderr, code = run_command(
                Filesystem(self.objects, target, container), argv, data
            )
        self._answer(fault, None)  # a lost answer: the command ran, its end unheard
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

    def _enter(
        self,
        op: str,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str | None,
        **args: Any,
    ) -> Fault | None:
        """Record the call and take its fault: a status or a dropped call raises here."""
        path = f"{kind}/{name or ''}"
        fault = self.faults.take(op, path, op == "watch")
        record = RequestRecord(op, path, args, op == "watch", verb=op, fault=fault)
        record.time, record.api_version, record.kind = self.clock.monotonic(), api_version, kind
        record.namespace, record.name = namespace, name
        self.calls.append(record)
        error = fault.port_error() if fault is not None else None
        if error is not None:
            raise error
        return fault

    def _served(self, api_version: str, kind: str) -> Kind:
        found = self.objects.kind(api_version, kind)
        if found is None:
            raise NotFound(
                404, "NotFound", f"the server could not find the requested resource ({kind})"
            )
        return found

    def _key(self, api_version: str, kind: str, namespace: str | None, name: str) -> Key:
        if self._served(api_version, kind).namespaced and namespace is None:
            raise ValueError(f"{kind} is namespaced: the object needs a namespace")
        return (api_version, kind, namespace, name)

    def _existing(self, key: Key) -> Obj:
        obj = self.objects.items.get(key)
        if obj is None:
            raise NotFound(404, "NotFound", f'{self._what(key)} "{key[3]}" not found')
        return obj

    @staticmethod
    def _not_waiting(pod: Obj, container: str | None) -> None:
        """The API server's 400 for the log of a container that has not started."""
        name, status = pod["metadata"]["name"], pod.get("status") or {}
        if not (pod.get("spec") or {}).get("nodeName"):
            raise Invalid(400, "BadRequest", f"pod {name} does not have a host assigned")
        for entry in status.get("containerStatuses") or []:
            waiting = (entry.get("state") or {}).get("waiting")
            if container in (None, entry["name"]) and waiting is not None:
                said = f'container "{entry["name"]}" in pod "{name}" is waiting to start'
                raise Invalid(400, "BadRequest", f"{said}: {waiting.get('reason', '')}")

    def _what(self, key: Key) -> str:
        """How the server names a kind in its messages: ``configmaps``, ``widgets.example.com``."""
        found = self._served(key[0], key[1])
        return f"{found.plural}.{found.group}" if found.group else found.plural

    def _finished(self, namespace: str, pod: str) -> bool:
        obj = self.objects.items.get(("v1", "Pod", namespace, pod))
        return obj is None or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    @staticmethod
    def _answer(fault: Fault | None, result: Any) -> Any:
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

"""Events in the two shapes the API serves, and the recorder that writes the new one.

The core/v1 recorder (most controllers; ``Writer.event``) writes a ``v1`` Event with ``count``,
``firstTimestamp``, ``lastTimestamp`` and ``source``. The events/v1 recorder (kube-scheduler and
most newer controllers, ``Reporter``) writes an ``events.k8s.io/v1`` Event with ``eventTime``,
``reportingController``, ``action`` and ``note``, and on each repeat raises the ``series``
(``count``, ``lastObservedTime``) of the event it wrote first, leaving ``eventTime`` at the first
occurrence. On the server both are one resource stored as core/v1: ``EVENTS_V1`` converts
between the versions as the API server does (``pkg/apis/events/v1/conversion.go``), so either
API lists every event under its own field names. Write events/v1 objects through
``fakekube.api`` (or ``Reporter``), never ``Store.create``, which would keep them apart.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from .selectors import rename_fields
from .store import Store

Obj = dict[str, Any]

__all__ = ["EVENTS_V1", "STORED", "Conversion", "Reporter", "micro_time"]

STORED: Final = ("v1", "Event")
EVENTS_V1_KEY: Final = ("events.k8s.io/v1", "Event")

# events.k8s.io/v1 field -> its core/v1 name; every other field keeps its name.
_RENAMED: Final = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_BACK: Final = {core: new for new, core in _RENAMED.items()}

# The field selectors events.k8s.io/v1 accepts, and the core/v1 label each stands for
# (AddFieldLabelConversionsForEvent): `involvedObject.name` is refused there.
_FIELD_LABELS: Final = {
    "reason": "reason",
    **{f"regarding.{f}": f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid")},
    **{f"regarding.{f}": f"involvedObject.{f}" for f in ("apiVersion", "resourceVersion")},
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    "source": "source",
    "type": "type",
    "metadata.namespace": "metadata.namespace",
    "metadata.name": "metadata.name",
}


def micro_time(moment: datetime) -> str:
    """A MicroTime as the server writes it: ``2025-06-02T09:14:03.100000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as it is stored (core/v1): the legacy times unset (null)."""
    out: Obj = {"apiVersion": STORED[0], "kind": STORED[1]}
    for key, value in event.items():
        if key not in ("apiVersion", "kind"):
            out[_RENAMED.get(key, key)] = value
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    out.setdefault("firstTimestamp", None)
    out.setdefault("lastTimestamp", None)
    if not out.get("count"):
        out.pop("count", None)  # int32, omitempty
    return out


def _from_core(event: Obj) -> Obj:
    """A stored (core/v1) Event as events.k8s.io/v1 serves it; a legacy one has no eventTime."""
    out: Obj = {"apiVersion": EVENTS_V1_KEY[0], "kind": EVENTS_V1_KEY[1]}
    for key, value in event.items():
        if key not in ("apiVersion", "kind"):
            out[_BACK.get(key, key)] = value
    out.setdefault("eventTime", None)
    return out


@dataclass(frozen=True)
class Conversion:
    """A version served from another's storage: how objects and field selectors convert."""

    stored: tuple[str, str]  # (apiVersion, kind) it is stored as
    read: Callable[[Obj], Obj]  # stored -> served
    write: Callable[[Obj], Obj]  # served -> stored
    field_labels: dict[str, str]  # served field label -> stored one

    def fields(self, selector: str) -> str:
        """The field selector in the stored version's labels (StoreError 400 for a label the
        served version does not support)."""
        return rename_fields(selector, self.field_labels)


EVENTS_V1: Final = Conversion(STORED, _from_core, _to_core, _FIELD_LABELS)


@dataclass
class Reporter:
    """One component's events/v1 recorder (client-go ``tools/events``): the first occurrence of
    an event (same regarding object, reason, action and controller) creates it; each repeat sets
    ``series`` (count 2 at the first repeat) with the time of the repeat."""

    store: Store
    controller: str  # reportingController, e.g. default-scheduler
    rng: random.Random
    seen: dict[tuple[str, ...], tuple[str, str]]  # isomorphic key -> (namespace, name)

    @classmethod
    def of(cls, store: Store, controller: str, rng: random.Random | None = None) -> Reporter:
        return cls(store, controller, rng or random.Random(), {})

    def report(
        self,
        regarding: Obj,
        type_: str,
        reason: str,
        action: str,
        note: str,
        at: datetime,
        *,
        instance: str = "",
    ) -> Obj:
        """Record it (or its repeat); the stored (core/v1) event."""
        namespace = str(regarding.get("namespace") or "default")
        key = (namespace, str(regarding.get("uid")), str(regarding.get("fieldPath", "")))
        key += (reason, action, self.controller)
        found = self.seen.get(key)
        stored = self.store.get(*STORED, *found) if found else None
        if stored is not None:
            count = int((stored.get("series") or {}).get("count") or 1) + 1
            stored["series"] = {"count": count, "lastObservedTime": micro_time(at)}
            return self.store.update(stored)
        name = f"{regarding.get('name')}.{self.rng.getrandbits(64):016x}"
        event: Obj = {
            "apiVersion": EVENTS_V1_KEY[0],
            "kind": EVENTS_V1_KEY[1],
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(at),
            "reportingController": self.controller,
            "reportingInstance": instance or f"{self.controller}-fakekube",
            "action": action,
            "reason": reason,
            "regarding": regarding,
            "note": note,
            "type": type_,
        }
        created = self.store.create(_to_core(event))
        self.seen[key] = (namespace, name)
        return created

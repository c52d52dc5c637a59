"""Events in the two shapes the API serves: core/v1 (``count``, ``firstTimestamp``,
``lastTimestamp``, ``source``) and events.k8s.io/v1 (``eventTime``, ``reportingController``,
``action``, ``note``, ``series``). On the server both are one resource stored as core/v1:
``EVENTS_V1`` converts between the versions as the API server does
(``pkg/apis/events/v1/conversion.go``), so either API lists every event under its own field
names. The store (``fakekube.port.Objects``) converts them on the way in and out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .selectors import rename_fields

Obj = dict[str, Any]

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
    **{f"regarding.{f}": f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid")},
    **{f"regarding.{f}": f"involvedObject.{f}" for f in ("apiVersion", "resourceVersion")},
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    **{f: f for f in ("reason", "source", "type", "metadata.namespace", "metadata.name")},
}


def _renamed(event: Obj, key: tuple[str, str], names: dict[str, str]) -> Obj:
    """``event`` as version ``key`` (apiVersion, kind) serves it, its fields renamed."""
    fields = {names.get(k, k): v for k, v in event.items() if k not in ("apiVersion", "kind")}
    return {"apiVersion": key[0], "kind": key[1], **fields}


def _to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as it is stored (core/v1): the legacy times unset (null)."""
    unset = {"involvedObject": {}, "source": {}, "firstTimestamp": None, "lastTimestamp": None}
    out = unset | _renamed(event, STORED, _RENAMED)
    if not out.get("count"):
        out.pop("count", None)  # int32, omitempty
    return out


def _from_core(event: Obj) -> Obj:
    """A stored (core/v1) Event as events.k8s.io/v1 serves it; a legacy one has no eventTime."""
    return {"eventTime": None} | _renamed(event, EVENTS_V1_KEY, _BACK)


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

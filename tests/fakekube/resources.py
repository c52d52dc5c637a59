"""What the fake cluster serves and how it refuses: the resource kinds (built-in and from CRDs),
the ``Status`` errors, and what the server checks and fills in on create."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

Obj = dict[str, Any]
T = TypeVar("T")


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
        out: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": self.reason, "code": self.code}  # fmt: skip
        if self.details is not None:
            out["details"] = self.details
        return out


class FieldError(NamedTuple):
    """One apimachinery ``field.Error``: ``<field>: <body>`` (``reason`` for ``causes``)."""

    field: str
    reason: str
    body: str

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"


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


_S, _POD = ("status",), ("status", "log", "exec")
# What the server serves besides CRDs: group, version, kind, plural, namespaced, short names,
# subresources, kubernetes-validate's strict schema (None: not checked), whether DELETE answers
# the object rather than a Status. (events.k8s.io/v1 Events are served from the core Events'
# storage, fakekube.events: the same objects under other names. Kueue's kinds come with its
# CRDs: fakekube.kueue.)
BUILTIN_KINDS: tuple[ResourceKind, ...] = tuple(
    ResourceKind(g, v, k, p, ns, k.lower(), short, sub, core_schema=schema, returns_deleted=obj)
    for g, v, k, p, ns, short, sub, schema, obj in (
        ("", "v1", "Pod", "pods", True, ("po",), _POD, "pod-v1", True),
        ("", "v1", "ConfigMap", "configmaps", True, ("cm",), (), "configmap-v1", False),
        ("", "v1", "Secret", "secrets", True, (), (), "secret-v1", False),
        ("", "v1", "Event", "events", True, ("ev",), (), "event-v1", False),
        ("", "v1", "Namespace", "namespaces", False, ("ns",), _S, "namespace-v1", False),
        ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("pvc",), _S,
         "persistentvolumeclaim-v1", True),
        ("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",), (), "serviceaccount-v1",
         True),
        ("batch", "v1", "Job", "jobs", True, (), _S, "job-batch-v1", False),
        ("events.k8s.io", "v1", "Event", "events", True, ("ev",), (), "event-events-v1", False),
        ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, (), _S, None, False),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
         False, ("crd", "crds"), _S, None, False),
    )
)  # fmt: skip


def clone(node: T) -> T:
    """A deep copy of JSON-like data (dicts, lists, scalars): three times as fast as
    ``copy.deepcopy``, which matters to 1,000-pod jobs."""
    kind = type(node)
    if kind is dict:
        return {k: clone(v) for k, v in node.items()}  # type: ignore[attr-defined,return-value]
    if kind is list or kind is tuple:
        return [clone(v) for v in node]  # type: ignore[attr-defined,return-value]
    return node


NAMESPACE_KEY = ("v1", "Namespace")
CRD_KEY = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def rfc3339(at: float, *, nano: bool = False) -> str:
    """``2024-05-01T12:00:00Z``: how the server writes timestamps (``at``: seconds since 1970);
    ``nano``: with nanoseconds, as the kubelet stamps log lines (RFC3339Nano)."""
    moment = datetime.fromtimestamp(at, UTC)
    fraction = f".{moment.microsecond:06d}000" if nano else ""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


# --- what the server checks and fills in on create ---------------------------------------------

# apimachinery ``pkg/util/validation/validation.go``: IsDNS1123Label (namespaces), and
# IsDNS1123Subdomain (other names): pattern, length, what a name may hold.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_NAMES = {
    "label": (re.compile(_LABEL), 63, "alphanumeric characters or '-'"),
    "subdomain": (re.compile(_SUBDOMAIN), 253, "alphanumeric characters, '-' or '.'"),
}


def invalid(rk: ResourceKind, name: str, errors: list[FieldError]) -> StoreError:
    """The 422 of ``errors`` (apimachinery ``errors.NewInvalid``: the kind qualified by its
    group, one error bare, several in brackets)."""
    listed = ", ".join(str(e) for e in errors)
    what = f"{rk.kind}.{rk.group}" if rk.group else rk.kind
    message = f'{what} "{name}" is invalid: ' + (f"[{listed}]" if len(errors) > 1 else listed)
    causes = [{"reason": e.reason, "message": e.body, "field": e.field} for e in errors]
    return StoreError(422, "Invalid", message, {**rk.details(name), "causes": causes})


def check_name(rk: ResourceKind, name: str) -> None:
    """StoreError 422 unless ``name`` is an RFC 1123 subdomain (a label for namespaces)."""
    what = "label" if rk.kind == "Namespace" else "subdomain"
    pattern, limit, holds = _NAMES[what]
    if len(name) > limit or not pattern.fullmatch(name):
        body = (f'Invalid value: "{name}": a lowercase RFC 1123 {what} must consist of lower '
                f"case {holds}, and must start and end with an alphanumeric character")  # fmt: skip
        raise invalid(rk, name, [FieldError("metadata.name", "FieldValueInvalid", body)])


_CRD_CONDITIONS = (
    ("NamesAccepted", "NoConflicts", "no conflicts found"),
    ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
)


def server_defaults(rk: ResourceKind, obj: Obj, now: str) -> None:
    """What the real server's defaulting adds, where clients' models or our code look."""
    core = not rk.group
    if core and rk.kind == "Secret":
        data = obj.setdefault("data", {}) or {}
        for key, value in (obj.pop("stringData", None) or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data
        obj.setdefault("type", "Opaque")
    elif core and rk.kind == "Namespace":
        name = obj["metadata"]["name"]
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
    elif core and rk.kind in ("Pod", "PersistentVolumeClaim"):
        obj.setdefault("status", {}).setdefault("phase", "Pending")
    elif (rk.api_version, rk.kind) == CRD_KEY:
        obj["status"] = {
            "acceptedNames": obj["spec"]["names"],
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
                for t, r, m in _CRD_CONDITIONS
            ],
            "storedVersions": [v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
        }


def crd_kinds(crd: Obj) -> list[ResourceKind]:
    """The kinds a CRD serves: one per served version."""
    spec = crd["spec"]
    names = spec["names"]
    status = spec.get("subresources") or {}
    return [
        ResourceKind(
            spec["group"],
            version["name"],
            names["kind"],
            names["plural"],
            spec.get("scope", "Namespaced") == "Namespaced",
            names.get("singular", names["kind"].lower()),
            tuple(names.get("shortNames") or ()),
            ("status",) if "status" in (version.get("subresources") or status) else (),
            crd=crd,
        )
        for version in spec["versions"]
        if version.get("served", True)
    ]

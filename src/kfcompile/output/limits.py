"""What each target's CRD bounds in the objects kfcompile renders, as a table per release
(each target carries its own: ``Target.limits``), and where its rendered job holds what the
API server's own rules check (``Places``, derived from the target's table).

The API server rejects a TrainJob whose ``spec.trainer.env`` has 129 entries on Trainer v2.2+,
whose image is 501 characters long, or whose override container carries an ``image``; the spec's
own rules cannot see these once overrides are merged, so render checks the rendered objects
against these rows. Each row is one keyword of the target's CRD at one CRD field path (the
path in the rendered object): ``maxItems``, ``maxLength``, ``x-kubernetes-list-type`` ``map``
(with its ``x-kubernetes-list-map-keys``) or ``set``, a CEL rule
(``x-kubernetes-validations``), or the fields an object may have where the CRD allows fewer
than core/v1 (the override containers). The CRD files stay out of the repository: a test reads
them in ``../shared/crds`` and asserts that these tables hold every such keyword there.

Left out, as they never reject a create: ``x-kubernetes-list-type: atomic``,
``x-kubernetes-map-type``, transition rules (CEL that reads ``oldSelf``), and ``status``.

Path notation: keys joined by ``.``, ``[]`` every item of a list, ``*`` every value of a map.
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from kfcompile.kinds import TRAINJOB

Path = tuple[str | int, ...]
Found = Iterator[tuple[Path, str]]


class Limit(NamedTuple):
    path: str  # the CRD field path, which is the path in the rendered object
    rule: str  # maxItems, maxLength, map, set, cel, fields
    value: Any  # the bound, the list-map keys, the CEL rule's text, or the allowed field names


class Places(NamedTuple):
    """Where a target's rendered job holds pod specs, the trainer's resources and the
    annotations of each object it makes (its own, its JobSet's and Jobs', its pods'): what the
    core/v1 rules check beside the CRD's limits. Paths in this module's notation."""

    pods: tuple[str, ...]  # PodSpecs
    whole: bool  # whole pod specs (PyTorchJob), or patches of a runtime's pod (TrainJob)
    resources: tuple[str, ...]  # ResourceRequirements outside any pod spec
    annotations: tuple[str, ...]


# --- CEL rules, by their text in the CRD -------------------------------------------------------

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_URI = r"[A-Za-z][A-Za-z0-9+.-]*://.+"  # RE2: "." stops at a newline; re compiles it when used
NAME_IS_DNS1035 = "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
NAME_LENGTH = "size(self.metadata.name) <= 63"
URI_RULE = "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')"
# The TrainJob CRD's rule on spec.managedBy: the managers of its row in `kinds`.
MANAGERS_RULE = f"self in [{', '.join(repr(m) for m in TRAINJOB.managers)}]"


def _name(obj: Any) -> Any:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta.get("name") if isinstance(meta, Mapping) else None


# rule text -> (holds for the value at the row's path, what to say when it does not)
CEL: Mapping[str, tuple[Callable[[Any], bool], str]] = {
    NAME_IS_DNS1035: (
        lambda obj: not isinstance(_name(obj), str) or bool(_DNS1035.fullmatch(_name(obj))),
        "metadata.name must be a DNS-1035 label",
    ),
    NAME_LENGTH: (
        lambda obj: not isinstance(_name(obj), str) or len(_name(obj)) <= 63,
        "metadata.name must be at most 63 characters",
    ),
    MANAGERS_RULE: (
        lambda v: v in TRAINJOB.managers,
        f"must be {' or '.join(TRAINJOB.managers)}",
    ),
    URI_RULE: (
        lambda v: not isinstance(v, str) or v == "" or bool(re.fullmatch(_URI, v)),
        "must be a URI (scheme://...)",
    ),
}

# --- TrainJob (trainer.kubeflow.org/v1alpha1), ../shared/crds/trainjobs-v2.*.yaml ----------------

_NAME = ("name",)
_V2_0_CONTAINER = frozenset({"name", "env", "volumeMounts"})  # what an override container holds


def _override_containers(
    c: str, fields: frozenset[str], most: int | None = None
) -> tuple[Limit, ...]:
    """``containers`` or ``initContainers`` of an override: keyed by name, and so are their env
    and mounts; from v2.2 each list has a maxItems (``most`` containers, 128 env and mounts)."""
    bounded = (
        ()
        if most is None
        else (
            Limit(c, "maxItems", most),
            Limit(f"{c}[].name", "maxLength", 253),
            Limit(f"{c}[].env", "maxItems", 128),
            Limit(f"{c}[].volumeMounts", "maxItems", 128),
        )
    )
    return (
        Limit(c, "map", _NAME),
        Limit(f"{c}[]", "fields", fields),
        Limit(f"{c}[].env", "map", _NAME),
        Limit(f"{c}[].volumeMounts", "map", _NAME),
        *bounded,
    )


# Every release: the trainer's and initializers' env keyed by name, and the managers.
_TRAINJOB: tuple[Limit, ...] = (
    Limit("spec.trainer.env", "map", _NAME),
    Limit("spec.trainer.resourcesPerNode.claims", "map", _NAME),
    Limit("spec.initializer.dataset.env", "map", _NAME),
    Limit("spec.initializer.model.env", "map", _NAME),
    Limit("spec.managedBy", "cel", MANAGERS_RULE),
)

_V2_0_POD = "spec.podSpecOverrides[]"
TRAINJOB_V2_0: tuple[Limit, ...] = (
    *_TRAINJOB,
    Limit(f"{_V2_0_POD}.volumes", "map", _NAME),
    Limit(f"{_V2_0_POD}.schedulingGates", "map", _NAME),
    *_override_containers(f"{_V2_0_POD}.containers", _V2_0_CONTAINER),
    *_override_containers(f"{_V2_0_POD}.initContainers", _V2_0_CONTAINER),
)

_V2_1_POD = "spec.podTemplateOverrides[].spec"
TRAINJOB_V2_1: tuple[Limit, ...] = (
    *_TRAINJOB,
    Limit("", "cel", NAME_IS_DNS1035),
    Limit("", "cel", NAME_LENGTH),
    Limit(f"{_V2_1_POD}.volumes", "map", _NAME),
    Limit(f"{_V2_1_POD}.schedulingGates", "map", _NAME),
    Limit(f"{_V2_1_POD}.imagePullSecrets", "map", _NAME),
    *_override_containers(f"{_V2_1_POD}.containers", _V2_0_CONTAINER),
    *_override_containers(f"{_V2_1_POD}.initContainers", _V2_0_CONTAINER),
)

# v2.2: spec.runtimePatches, and a maxItems or maxLength on most lists and strings.
_PATCHES = "spec.runtimePatches"
_JOBS = f"{_PATCHES}[].trainingRuntimeSpec.template.spec.replicatedJobs"
TRAINJOB_POD = f"{_JOBS}[].template.spec.template.spec"  # the pod a patch reaches
_V2_2_CONTAINER = frozenset({*_V2_0_CONTAINER, "securityContext"})

TRAINJOB_V2_2: tuple[Limit, ...] = (
    *_TRAINJOB,
    Limit("", "cel", NAME_IS_DNS1035),
    Limit("", "cel", NAME_LENGTH),
    Limit("spec.managedBy", "maxLength", 253),
    Limit("spec.runtimeRef.apiGroup", "maxLength", 253),
    Limit("spec.runtimeRef.kind", "maxLength", 253),
    Limit("spec.runtimeRef.name", "maxLength", 253),
    Limit("spec.trainer.image", "maxLength", 500),
    Limit("spec.trainer.command", "maxItems", 128),
    Limit("spec.trainer.command[]", "maxLength", 65536),
    Limit("spec.trainer.args", "maxItems", 128),
    Limit("spec.trainer.args[]", "maxLength", 65536),
    Limit("spec.trainer.env", "maxItems", 128),
    Limit("spec.initializer.dataset.env", "maxItems", 128),
    Limit("spec.initializer.dataset.storageUri", "maxLength", 2048),
    Limit("spec.initializer.model.env", "maxItems", 128),
    Limit("spec.initializer.model.storageUri", "maxLength", 2048),
    Limit(_PATCHES, "maxItems", 16),
    Limit(_PATCHES, "map", ("manager",)),
    Limit(f"{_PATCHES}[].manager", "maxLength", 253),
    Limit(_JOBS, "maxItems", 100),
    Limit(_JOBS, "map", _NAME),
    Limit(f"{_JOBS}[].name", "maxLength", 253),
    Limit(f"{TRAINJOB_POD}.serviceAccountName", "maxLength", 253),
    Limit(f"{TRAINJOB_POD}.tolerations", "maxItems", 128),
    Limit(f"{TRAINJOB_POD}.volumes", "maxItems", 128),
    Limit(f"{TRAINJOB_POD}.volumes", "map", _NAME),
    Limit(f"{TRAINJOB_POD}.imagePullSecrets", "maxItems", 64),
    Limit(f"{TRAINJOB_POD}.imagePullSecrets", "map", _NAME),
    Limit(f"{TRAINJOB_POD}.schedulingGates", "maxItems", 16),
    Limit(f"{TRAINJOB_POD}.schedulingGates", "map", _NAME),
    *_override_containers(f"{TRAINJOB_POD}.containers", _V2_2_CONTAINER, most=64),
    *_override_containers(f"{TRAINJOB_POD}.initContainers", _V2_2_CONTAINER, most=64),
)

# v2.3: command and args items up to 1 MiB, and the initializers' storageUri is a URI.
_V2_3_LONGER = ("spec.trainer.command[]", "spec.trainer.args[]")
TRAINJOB_V2_3: tuple[Limit, ...] = (
    *(row for row in TRAINJOB_V2_2 if row.path not in _V2_3_LONGER),
    Limit("spec.trainer.command[]", "maxLength", 1048576),
    Limit("spec.trainer.args[]", "maxLength", 1048576),
    Limit("spec.initializer.dataset.storageUri", "cel", URI_RULE),
    Limit("spec.initializer.model.storageUri", "cel", URI_RULE),
)

# --- PyTorchJob (kubeflow.org/v1), ../shared/crds/pytorchjobs-v1.{7,8,9}.*.yaml -----------------
# One target serves Training Operator v1.7-v1.9: the rows are the union of the three CRDs (v1.9
# keys more of the pod's lists than v1.7 and v1.8 do).

_REPLICA_POD = "spec.pytorchReplicaSpecs*.template.spec"


def _pytorch_containers(kind: str) -> tuple[Limit, ...]:
    c = f"{_REPLICA_POD}.{kind}"
    return (
        Limit(c, "map", ("name",)),  # v1.9
        Limit(f"{c}[].env", "map", ("name",)),  # v1.9
        Limit(f"{c}[].ports", "map", ("containerPort", "protocol")),  # v1.7+
        Limit(f"{c}[].resources.claims", "map", ("name",)),  # v1.7+
        Limit(f"{c}[].restartPolicyRules[].exitCodes.values", "set", ()),  # v1.9
        Limit(f"{c}[].volumeDevices", "map", ("devicePath",)),  # v1.9
        Limit(f"{c}[].volumeMounts", "map", ("mountPath",)),  # v1.9
    )


PYTORCHJOB_V1: tuple[Limit, ...] = (
    *(
        row
        for kind in ("containers", "initContainers", "ephemeralContainers")
        for row in _pytorch_containers(kind)
    ),
    Limit(f"{_REPLICA_POD}.hostAliases", "map", ("ip",)),  # v1.9
    Limit(f"{_REPLICA_POD}.imagePullSecrets", "map", ("name",)),  # v1.9
    Limit(f"{_REPLICA_POD}.resourceClaims", "map", ("name",)),  # v1.7+
    Limit(f"{_REPLICA_POD}.resources.claims", "map", ("name",)),  # v1.9
    Limit(f"{_REPLICA_POD}.schedulingGates", "map", ("name",)),  # v1.7+
    Limit(f"{_REPLICA_POD}.topologySpreadConstraints", "map", ("topologyKey", "whenUnsatisfiable")),
    Limit(f"{_REPLICA_POD}.volumes", "map", ("name",)),  # v1.9
    # v1.7 only
    Limit(
        f"{_REPLICA_POD}.volumes[].ephemeral.volumeClaimTemplate.spec.resources.claims",
        "map",
        ("name",),
    ),
)

# A list-map key the CRD defaults before it validates: a port without a protocol is TCP's.
KEY_DEFAULTS: Mapping[str, str] = {"protocol": "TCP"}

# k8s.io/apimachinery pkg/api/validation/objectmeta.go ValidateAnnotations: the keys and values of
# one object's annotations together (TotalAnnotationSizeLimitB).
ANNOTATIONS_MAX_BYTES = 256 * 1024


# --- checking ----------------------------------------------------------------------------------


@functools.cache
def _segments(path: str) -> tuple[str, ...]:
    """``a.b[].c*`` -> ``("a", "b", "[]", "c", "*")``."""
    out: list[str] = []
    for part in path.split(".") if path else ():
        name = part.rstrip("[]*")
        if name:
            out.append(name)
        rest = part[len(name) :]
        while rest:
            out.append("[]" if rest.startswith("[]") else "*")
            rest = rest[2:] if rest.startswith("[]") else rest[1:]
    return tuple(out)


def _step(seg: str, at: Path, node: Any) -> list[tuple[Path, Any]]:
    """The values one segment below ``node``, with where they are."""
    if seg == "[]":
        return [((*at, i), item) for i, item in enumerate(node)] if isinstance(node, list) else []
    if not isinstance(node, dict):
        return []
    if seg == "*":
        return [((*at, k), v) for k, v in node.items() if isinstance(k, str)]
    return [((*at, seg), node[seg])] if seg in node else []


Check = Callable[[Any], Iterable[tuple[Path, str]]]  # a value -> (sub-path, message) pairs


class Branch:
    """Checks at one path, and the paths below it: checks walked as a tree (``tree``), so that
    each part of the rendered object is visited once however many checks look at it."""

    __slots__ = ("below", "checks")

    def __init__(self) -> None:
        self.checks: list[tuple[Check, bool]] = []
        self.below: dict[str, Branch] = {}


def tree(checks: Iterable[tuple[str, Check, bool]]) -> Branch:
    """``(path, check, tag)`` triples as one tree; the tag comes back with each problem."""
    root = Branch()
    for path, check, tag in checks:
        branch = root
        for seg in _segments(path):
            branch = branch.below.setdefault(seg, Branch())
        branch.checks.append((check, tag))
    return root


def walk(doc: Any, root: Branch) -> Iterator[tuple[Path, str, bool]]:
    """Every problem the tree's checks find in ``doc``, depth first in the checks' order."""
    stack: list[tuple[Branch, Path, Any]] = [(root, (), doc)]
    while stack:
        branch, at, value = stack.pop()
        for check, tag in branch.checks:
            for sub, message in check(value):
                yield (*at, *sub), message, tag
        below = [(b, a, v) for seg, b in branch.below.items() for a, v in _step(seg, at, value)]
        stack += reversed(below)


def checks(limits: Iterable[Limit]) -> Iterator[tuple[str, Check]]:
    """A target's table as checks at paths."""
    for row in limits:
        yield row.path, functools.partial(_check, row)


def _key_text(keys: tuple[str, ...], values: tuple[Any, ...]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in zip(keys, values, strict=True))


def _check(row: Limit, value: Any) -> Found:
    rule, bound = row.rule, row.value
    if rule == "maxItems" and isinstance(value, list) and len(value) > bound:
        yield (), f"has {len(value)} items; the CRD allows at most {bound}"
    elif rule == "maxLength" and isinstance(value, str) and len(value) > bound:
        yield (), f"is {len(value)} characters long; the CRD allows at most {bound}"
    elif rule in ("map", "set") and isinstance(value, list):
        seen: set[str] = set()
        for i, item in enumerate(value):
            if rule == "map":
                if not isinstance(item, dict):
                    continue
                key = tuple(item.get(k, KEY_DEFAULTS.get(k)) for k in bound)
                by = ", ".join(bound)
                what = f"duplicate entry {_key_text(bound, key)} (the CRD keys this list by {by})"
            else:
                key = item
                what = f"duplicate item {item!r} (the CRD makes this list a set)"
            text = repr(key)
            if text in seen:
                yield (i,), what
            seen.add(text)
    elif rule == "fields" and isinstance(value, dict):
        for k in value:
            if k not in bound:
                yield (k,), f"unknown field (the CRD allows only {', '.join(sorted(bound))} here)"
    elif rule == "cel":
        holds, message = CEL[bound]
        if value is not None and not holds(value):
            yield (), f"{message} (CRD rule {bound})"


def annotation_budget(notes: Any) -> Found:
    """One object's annotations within ValidateAnnotations' total (keys and values, in bytes)."""
    if isinstance(notes, dict):
        size = sum(len(str(k).encode()) + len(str(v).encode()) for k, v in notes.items())
        if size > ANNOTATIONS_MAX_BYTES:
            yield (
                (),
                (
                    f"total {size} bytes; Kubernetes allows at most 256 KiB "
                    f"({ANNOTATIONS_MAX_BYTES} bytes) of annotations per object"
                ),
            )

"""The API server's pod validation that no schema carries, checked on the rendered pod templates.

A TrainJob or PyTorchJob that breaks these is accepted; the pods its controller then creates are
refused, so the job never starts. Each rule mirrors a function of k8s.io/kubernetes
``pkg/apis/core/validation/validation.go`` (named beside it). Every check takes a value as
rendered and yields ``(sub-path, message)`` pairs; none raises, whatever it is given.

``pod_spec`` takes a whole PodSpec (a PyTorchJob replica's template) or a partial one (what a
TrainJob patches into its runtime's pod, ``whole=False``): a partial pod's own lists are checked,
but not against the runtime's (a mount may name a volume the runtime has).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from kfcompile.spec import k8s_rules as k8s

Path = tuple[str | int, ...]
Found = Iterator[tuple[Path, str]]

# helper.IsStandardContainerResourceName: the unprefixed names a container may ask for
# (besides hugepages-<size>).
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
# helper.IsIntegerResourceName: counted resources (an extended resource is counted too).
INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
QOS_RESOURCES = ("cpu", "memory")  # supportedQoSComputeResources
# validateMountPropagation
MOUNT_PROPAGATION = ("None", "HostToContainer", "Bidirectional")
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
FILE_MODE_MAX = 0o777  # fileModeErrorMsg: "must be a number between 0 and 0777 (octal)"
WEIGHT = (1, 100)
# The volume sources with a defaultMode and items[].mode / items[].path.
MODE_SOURCES = ("secret", "configMap", "downwardAPI", "projected")


# Rendered objects are plain dicts and lists (``paths.copied``): checked as such, which is
# several times faster than checking for a Mapping.
def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[tuple[int, dict[Any, Any]]]:
    return (
        [(i, v) for i, v in enumerate(value) if isinstance(v, dict)]
        if isinstance(value, list)
        else []
    )


@functools.lru_cache(maxsize=1024)
def _parsed(value: str | int | float) -> Decimal | None:
    try:
        return k8s.parse_quantity(value)
    except ValueError:
        return None  # the quantity grammar reports it (k8s_schema)


def _amount(value: Any) -> Decimal | None:
    return _parsed(value) if isinstance(value, str | int | float) else None


# --- resources ---------------------------------------------------------------------------------


def resource_name(name: str) -> Iterator[str]:
    """validateContainerResourceName: an unprefixed name must be a standard container resource;
    a prefixed one outside ``*kubernetes.io/`` must be an extended resource name."""
    if not isinstance(name, str) or k8s.qualified_name(name):
        return  # the spec's own rules report a name that is no qualified name
    if "/" not in name:
        if name not in STANDARD_CONTAINER_RESOURCES and not k8s.is_hugepages_resource(name):
            yield (
                "must be a standard resource for containers (cpu, memory, ephemeral-storage, "
                "hugepages-<size>) or an extended resource with a vendor domain "
                "(e.g. nvidia.com/gpu)"
            )
    elif "kubernetes.io/" not in name and not k8s.is_extended_resource(name):
        yield "doesn't follow extended resource name standard"


@functools.lru_cache(maxsize=1024)
def _name_problems(name: str) -> tuple[str, ...]:
    return tuple(resource_name(name))


def _page_size(name: str) -> Decimal | None:
    """helper.HugePageSizeFromResourceName: the size in ``hugepages-<size>``, if positive."""
    size = _amount(name.removeprefix("hugepages-"))
    return size if size is not None and size > 0 else None


def _quantity(name: str, value: Any) -> Iterator[str]:
    amount = _amount(value)
    if amount is None:
        return
    # validateResourceQuantityValue: counted resources take whole numbers.
    if (name in INTEGER_RESOURCES or k8s.is_extended_resource(name)) and amount % 1 != 0:
        yield f"must be an integer ({name} is counted in whole units)"
    # validateResourceQuantityHugePageValue (helper.IsHugePageResourceValueDivisible)
    if k8s.is_hugepages_resource(name):
        size = _page_size(name)
        if size is None:
            yield f"{name} names no page size (hugepages-<size>, e.g. hugepages-2Mi)"
        elif amount % size != 0:
            yield f"{value} is not positive integer multiple of {name}"


def resources(r: Any) -> Found:
    """ValidateContainerResourceRequirements (ValidateResourceRequirements): names, whole numbers
    for counted resources, requests within limits, equal for resources that cannot be
    overcommitted, and hugepages only beside cpu or memory."""
    requests, limits = _mapping(_mapping(r).get("requests")), _mapping(_mapping(r).get("limits"))
    for group, amounts in (("limits", limits), ("requests", requests)):
        for name, value in amounts.items():
            named = _name_problems(name) if isinstance(name, str) else ()
            for message in (*named, *_quantity(str(name), value)):
                yield (group, name), message
    for name, value in requests.items():
        if not isinstance(name, str):
            continue
        request, limit = _amount(value), _amount(limits.get(name))
        if request is None:
            continue
        fixed = not k8s.is_overcommit_allowed(name)
        if name not in limits:
            if fixed:
                yield ("limits", name), "Limit must be set for non overcommitable resources"
        elif limit is None:
            continue
        elif fixed and request != limit:
            yield ("requests", name), f"must be equal to {name} limit"
        elif request > limit:
            yield ("requests", name), f"must be less than or equal to {name} limit"
    names = [n for n in (*requests, *limits) if isinstance(n, str)]
    if any(k8s.is_hugepages_resource(n) for n in names) and not any(
        n in QOS_RESOURCES for n in names
    ):
        yield (), "HugePages require cpu or memory"


# --- mounts and volumes ------------------------------------------------------------------------


def local_descending_path(path: Any) -> Iterator[str]:
    """validateLocalDescendingPath: relative, with no ``..`` element."""
    if not isinstance(path, str):
        return
    if path.startswith("/"):
        yield "must be a relative path"
    if ".." in path.replace("\\", "/").split("/"):
        yield "must not contain '..'"


def volume_mounts(mounts: Any, volumes: Iterable[str] | None, privileged: bool | None) -> Found:
    """ValidateVolumeMounts: each mount names a volume of the pod (``volumes``, when the whole
    pod is known), its mountPath is unique, subPath/subPathExpr descend;
    validateMountPropagation."""
    seen: set[str] = set()
    for i, m in _items(mounts):
        name, path = m.get("name"), m.get("mountPath")
        if volumes is not None and isinstance(name, str) and name not in volumes:
            yield (i, "name"), f"not found: the pod has no volume {name!r}"
        if isinstance(path, str):
            if path in seen:
                yield (i, "mountPath"), f"must be unique: {path!r} is mounted twice"
            seen.add(path)
        for key in ("subPath", "subPathExpr"):
            for message in local_descending_path(m.get(key)):
                yield (i, key), message
        if m.get("subPath") and m.get("subPathExpr"):
            yield (i, "subPathExpr"), "subPathExpr and subPath are mutually exclusive"
        propagation = m.get("mountPropagation")
        if propagation is not None and propagation not in MOUNT_PROPAGATION:
            yield (i, "mountPropagation"), f"must be one of: {', '.join(MOUNT_PROPAGATION)}"
        elif propagation == "Bidirectional" and privileged is False:
            yield (
                (i, "mountPropagation"),
                "Bidirectional mount propagation is available only to privileged containers",
            )


def _file_mode(mode: Any) -> Iterator[str]:
    if isinstance(mode, int) and not isinstance(mode, bool) and not 0 <= mode <= FILE_MODE_MAX:
        yield "must be a number between 0 and 0777 (octal), both inclusive"


def _key_paths(items: Any) -> Found:
    """validateKeyToPath / validateDownwardAPIVolumeFile: each item's path and mode."""
    for j, item in _items(items):
        for message in local_descending_path(item.get("path")):
            yield (j, "path"), message
        path = item.get("path")
        if isinstance(path, str) and path.startswith(".."):
            yield (j, "path"), "must not start with '..'"  # validateLocalNonReservedPath
        for message in _file_mode(item.get("mode")):
            yield (j, "mode"), message


def volumes(items: Any) -> Found:
    """ValidateVolumes: names unique; validateSecretVolumeSource, validateConfigMapVolumeSource,
    validateDownwardAPIVolumeSource, validateProjectedVolumeSource: defaultMode and each item's
    mode within 0..0777, each item's path relative and descending."""
    seen: set[str] = set()
    for i, v in _items(items):
        name = v.get("name")
        if isinstance(name, str):
            if name in seen:
                yield (i, "name"), f"Duplicate value: {name!r}"
            seen.add(name)
        for source in MODE_SOURCES:
            s = _mapping(v.get(source))
            for message in _file_mode(s.get("defaultMode")):
                yield (i, source, "defaultMode"), message
            yield from (((i, source, "items", *at), m) for at, m in _key_paths(s.get("items")))
        for k, proj in _items(_mapping(v.get("projected")).get("sources")):
            for kind in ("secret", "configMap", "downwardAPI"):
                found = _key_paths(_mapping(proj.get(kind)).get("items"))
                yield from (
                    ((i, "projected", "sources", k, kind, "items", *at), m) for at, m in found
                )


# --- affinity ----------------------------------------------------------------------------------


def node_selector_requirement(rq: dict[Any, Any]) -> Found:
    """ValidateNodeSelectorRequirement: the number of values each operator takes."""
    op, values = rq.get("operator"), rq.get("values") or []
    count = len(values) if isinstance(values, list) else 0
    if op in ("In", "NotIn") and count == 0:
        yield ("values",), "must be specified when `operator` is 'In' or 'NotIn'"
    elif op in ("Exists", "DoesNotExist") and count > 0:
        yield ("values",), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    elif op in ("Gt", "Lt") and count != 1:
        yield ("values",), "must be specified single value when `operator` is 'Lt' or 'Gt'"
    elif op not in NODE_OPERATORS:
        yield ("operator",), f"not a valid selector operator (one of: {', '.join(NODE_OPERATORS)})"


def node_field_selector_requirement(rq: dict[Any, Any]) -> Found:
    """validateNodeFieldSelectorRequirement: ``metadata.name`` In/NotIn exactly one value."""
    values = rq.get("values") or []
    if rq.get("operator") not in ("In", "NotIn"):
        yield ("operator",), "not a valid selector operator (matchFields takes In or NotIn)"
    elif not isinstance(values, list) or len(values) != 1:
        yield (
            ("values",),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )
    if rq.get("key") != "metadata.name":
        yield ("key",), "not a valid field selector key (matchFields takes metadata.name)"


def node_selector_term(term: dict[Any, Any]) -> Found:
    """ValidateNodeSelectorTerm."""
    for i, rq in _items(term.get("matchExpressions")):
        found = node_selector_requirement(rq)
        yield from ((("matchExpressions", i, *at), m) for at, m in found)
    for i, rq in _items(term.get("matchFields")):
        found = node_field_selector_requirement(rq)
        yield from ((("matchFields", i, *at), m) for at, m in found)


def _weight(term: dict[Any, Any]) -> Iterator[str]:
    w = term.get("weight")
    if isinstance(w, int) and not isinstance(w, bool) and not WEIGHT[0] <= w <= WEIGHT[1]:
        yield "must be in the range 1-100"


def label_selector(selector: Any) -> Found:
    """k8s.io/apimachinery ValidateLabelSelectorRequirement: In/NotIn need values,
    Exists/DoesNotExist take none."""
    for i, rq in _items(_mapping(selector).get("matchExpressions")):
        op, values = rq.get("operator"), rq.get("values") or []
        count = len(values) if isinstance(values, list) else 0
        if op in ("In", "NotIn") and count == 0:
            yield (
                ("matchExpressions", i, "values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )
        elif op in ("Exists", "DoesNotExist") and count > 0:
            yield (
                ("matchExpressions", i, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
        elif op not in LABEL_OPERATORS:
            yield (
                ("matchExpressions", i, "operator"),
                f"not a valid selector operator (one of: {', '.join(LABEL_OPERATORS)})",
            )


def _pod_affinity_term(term: dict[Any, Any]) -> Found:
    """validatePodAffinityTerm: a topologyKey, and valid selectors."""
    if not term.get("topologyKey"):
        yield ("topologyKey",), "can not be empty"
    for key in ("labelSelector", "namespaceSelector"):
        yield from (((key, *at), m) for at, m in label_selector(term.get(key)))


def affinity(a: Any) -> Found:
    """validateAffinity: validateNodeAffinity (ValidateNodeSelector,
    validatePreferredSchedulingTerms), validatePodAffinity / validatePodAntiAffinity
    (validateWeightedPodAffinityTerms)."""
    node = _mapping(_mapping(a).get("nodeAffinity"))
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        at: Path = (
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        )
        terms = required.get("nodeSelectorTerms")
        if not terms:
            yield at, "must have at least one node selector term"
        for i, term in _items(terms):
            yield from (((*at, i, *sub), m) for sub, m in node_selector_term(term))
    at = ("nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
    for i, term in _items(node.get("preferredDuringSchedulingIgnoredDuringExecution")):
        yield from (((*at, i, "weight"), m) for m in _weight(term))
        found = node_selector_term(_mapping(term.get("preference")))
        yield from (((*at, i, "preference", *sub), m) for sub, m in found)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = _mapping(_mapping(a).get(kind))
        at = (kind, "requiredDuringSchedulingIgnoredDuringExecution")
        for i, term in _items(pod.get(at[1])):
            yield from (((*at, i, *sub), m) for sub, m in _pod_affinity_term(term))
        at = (kind, "preferredDuringSchedulingIgnoredDuringExecution")
        for i, term in _items(pod.get(at[1])):
            yield from (((*at, i, "weight"), m) for m in _weight(term))
            found = _pod_affinity_term(_mapping(term.get("podAffinityTerm")))
            yield from (((*at, i, "podAffinityTerm", *sub), m) for sub, m in found)


# --- the pod -----------------------------------------------------------------------------------


def container(c: dict[Any, Any], volume_names: Iterable[str] | None) -> Found:
    """validateContainers' per-container rules: resources and mounts."""
    yield from ((("resources", *at), m) for at, m in resources(c.get("resources")))
    security = c.get("securityContext")
    privileged = _mapping(security).get("privileged") is True if volume_names is not None else None
    found = volume_mounts(c.get("volumeMounts"), volume_names, privileged)
    yield from ((("volumeMounts", *at), m) for at, m in found)


def pod_spec(spec: Any, whole: bool = True) -> Found:
    """ValidatePodSpec's rules above, over every container, init container and volume."""
    spec = _mapping(spec)
    yield from ((("volumes", *at), m) for at, m in volumes(spec.get("volumes")))
    names = {str(v.get("name")) for _, v in _items(spec.get("volumes"))} if whole else None
    seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, c in _items(spec.get(kind)):
            name = c.get("name")
            if whole and isinstance(name, str):  # validateContainers / validateInitContainers
                if name in seen:
                    yield (kind, i, "name"), f"Duplicate value: {name!r}"
                seen.add(name)
            yield from (((kind, i, *at), m) for at, m in container(c, names))
    yield from ((("affinity", *at), m) for at, m in affinity(spec.get("affinity")))

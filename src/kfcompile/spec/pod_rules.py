"""The API server's pod validation that no schema carries, and what the scheduler cannot parse.

A TrainJob or PyTorchJob that breaks these is accepted; the pods its controller then creates are
refused (or never scheduled), so the job never starts. Each rule mirrors a function of
k8s.io/kubernetes ``pkg/apis/core/validation/validation.go`` (named beside it). Every check
takes a value as given and yields ``(sub-path, message)`` pairs; none raises, whatever it is
given.

The rules come in two kinds:

- per core/v1 object (``OBJECT_RULES``, a definition -> the rules of that object alone): run
  wherever such an object is, found through the core/v1 schema: in a spec when it is loaded
  (``k8s_schema.check`` with ``rules.OBJECT_RULES``), so a spec's problems come in one pass,
  and in the rendered pods (``objects``);
- per pod (``pod_spec``): the rules between a pod's lists (names once, mounts of the pod's
  volumes, hostPort under hostNetwork) and between a container's requests and limits, on the
  rendered pod templates, where what the overrides merged in is seen whole. A partial pod
  (what a TrainJob patches into its runtime's pod, ``whole=False``) is checked without the
  rules that need the whole (a mount may name a volume the runtime has).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, TypeGuard

from kfcompile.spec import k8s_rules as k8s
from kfcompile.spec import k8s_schema

Path = tuple[str | int, ...]
Found = Iterator[tuple[Path, str]]
ObjectCheck = Callable[[Mapping[Any, Any]], Found]

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
MOUNT_PROPAGATION = ("None", "HostToContainer", "Bidirectional")  # validateMountPropagation
NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
FILE_MODE_MAX = 0o777  # fileModeErrorMsg: "must be a number between 0 and 0777 (octal)"
WEIGHT = (1, 100)
INT32_MAX = 2**31 - 1
# supportedHostPathTypes (validateHostPathType)
HOST_PATH_TYPES = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)
# validEnvDownwardAPIFieldPathExpressions (validateObjectFieldSelector); metadata.labels and
# metadata.annotations only with a subscript (``metadata.labels['app']``).
ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
SUBSCRIPTED_FIELD_PATHS = ("metadata.annotations", "metadata.labels")
# validContainerResourceFieldPathExpressions, and the hugepages prefixes
# (validateContainerResourceFieldSelector)
RESOURCE_FIELD_PATHS = tuple(
    f"{group}.{name}"
    for group in ("limits", "requests")
    for name in ("cpu", "memory", "ephemeral-storage")
)
RESOURCE_FIELD_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
# validateContainerResourceDivisor: the divisors each resource takes.
_BYTE_DIVISORS = ("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
CPU_DIVISORS = ("1m", "1")
ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
ENV_FROM_SOURCES = ("configMapRef", "secretRef")  # ValidateEnvFrom
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")  # handlerFromProbe
LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")  # handlerFromLifecycle
PROBE_COUNTS = (  # validateProbe: ValidateNonnegativeField
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
)
PROTOCOLS = ("TCP", "UDP", "SCTP")  # supportedPortProtocols
# validatePodDNSConfig: the limits of Linux libc's resolver (MaxDNSNameservers,
# MaxDNSSearchPaths, MaxDNSSearchListChars).
MAX_DNS_NAMESERVERS = 3
MAX_DNS_SEARCH_PATHS = 32
MAX_DNS_SEARCH_LIST_CHARS = 2048
WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")  # supportedScheduleActions
NODE_INCLUSION_POLICIES = ("Honor", "Ignore")  # validateNodeInclusionPolicy


def _mapping(value: Any) -> dict[Any, Any]:
    # Rendered objects are plain dicts and lists (``paths.copied``), a spec's frozen ones
    # subclasses of them: checked as such, several times faster than checking for a Mapping.
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[tuple[int, dict[Any, Any]]]:
    return (
        [(i, v) for i, v in enumerate(value) if isinstance(v, dict)]
        if isinstance(value, list | tuple)
        else []
    )


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _under(prefix: Path, found: Iterable[tuple[Path, str]]) -> Found:
    for at, message in found:
        yield (*prefix, *at), message


def _told(at: Path, problems: Iterable[str]) -> Found:
    for message in problems:
        yield at, message


def _one_of(value: Any, choices: Iterable[str]) -> Iterator[str]:
    choices = tuple(choices)
    if isinstance(value, str) and value not in choices:
        yield "must be one of: " + ", ".join(c or '""' for c in choices)


def _name(grammar: Callable[[str], list[str]]) -> Callable[[Any], Iterator[str]]:
    """A name checked by ``grammar`` when given (an empty one is not given)."""

    def check(value: Any) -> Iterator[str]:
        if isinstance(value, str) and value:
            yield from grammar(value)

    return check


def _choice(*choices: str) -> Callable[[Any], Iterator[str]]:
    return lambda value: _one_of(value, choices)


def _between(low: int, high: int) -> Callable[[Any], Iterator[str]]:
    """validation.InclusiveRangeError."""

    def check(value: Any) -> Iterator[str]:
        if _int(value) and not low <= value <= high:
            yield f"must be between {low} and {high}, inclusive"

    return check


def _requires(*keys: str, then: ObjectCheck | None = None) -> ObjectCheck:
    """A check: ``field.Required`` for each of ``keys`` that is absent, null or empty
    (``len(x) == 0``); then ``then``'s."""

    def check(obj: Mapping[Any, Any]) -> Found:
        for k in keys:
            if obj.get(k) in (None, "", [], ()):
                yield (k,), "required"
        if then is not None:
            yield from then(obj)

    return check


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


@functools.lru_cache(maxsize=1024)
def _counted(name: str) -> bool:
    """helper.IsIntegerResourceName: counted in whole units."""
    return name in INTEGER_RESOURCES or k8s.is_extended_resource(name)


def _page_size(name: str) -> Decimal | None:
    """helper.HugePageSizeFromResourceName: the size in ``hugepages-<size>``, if positive."""
    size = _amount(name.removeprefix("hugepages-"))
    return size if size is not None and size > 0 else None


def resource_amount(name: Any, value: Any) -> Iterator[str]:
    """One entry of a container's requests or limits: validateContainerResourceName;
    validateResourceQuantityValue (counted resources take whole numbers);
    validateResourceQuantityHugePageValue (helper.IsHugePageResourceValueDivisible)."""
    if not isinstance(name, str):
        return
    yield from _name_problems(name)
    amount = _amount(value)
    if amount is None:
        return
    if _counted(name) and amount % 1 != 0:
        yield f"must be an integer ({name} is counted in whole units)"
    if k8s.is_hugepages_resource(name):
        size = _page_size(name)
        if size is None:
            yield f"{name} names no page size (hugepages-<size>, e.g. hugepages-2Mi)"
        elif amount % size != 0:
            yield f"{value} is not positive integer multiple of {name}"


def resource_amounts(r: Any) -> Found:
    """Each entry of a ResourceRequirements on its own (``resource_amount``)."""
    for group in ("limits", "requests"):
        for name, value in _mapping(_mapping(r).get(group)).items():
            yield from _told((group, name), resource_amount(name, value))


def needs_qos_resource(names: Iterable[Any]) -> bool:
    """ValidateContainerResourceRequirements: "HugePages require cpu or memory"."""
    names = [n for n in names if isinstance(n, str)]
    return any(k8s.is_hugepages_resource(n) for n in names) and not any(
        n in QOS_RESOURCES for n in names
    )


def resources_between(r: Any) -> Found:
    """ValidateContainerResourceRequirements' rules between a whole container's requests and
    limits: requests within limits, equal for resources that cannot be overcommitted, and
    hugepages only beside cpu or memory."""
    requests, limits = _mapping(_mapping(r).get("requests")), _mapping(_mapping(r).get("limits"))
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
    if needs_qos_resource([*requests, *limits]):
        yield (), "HugePages require cpu or memory"


def resources(r: Any) -> Found:
    """ValidateContainerResourceRequirements (ValidateResourceRequirements), on a whole
    container's resources: each entry, and the rules between them."""
    yield from resource_amounts(r)
    yield from resources_between(r)


# --- volumes and mounts ------------------------------------------------------------------------


def local_descending_path(path: Any) -> Iterator[str]:
    """validateLocalDescendingPath: relative, with no ``..`` element."""
    if not isinstance(path, str):
        return
    if path.startswith("/"):
        yield "must be a relative path"
    if ".." in path.replace("\\", "/").split("/"):
        yield "must not contain '..'"


def volume_mount(m: Mapping[Any, Any]) -> Found:
    """ValidateVolumeMounts' rules of one mount: an absolute mountPath, subPath and subPathExpr
    descending and not both; validateMountPropagation's values."""
    path = m.get("mountPath")
    if isinstance(path, str) and not path.startswith("/"):
        yield ("mountPath",), "must be an absolute path"
    for key in ("subPath", "subPathExpr"):
        yield from _told((key,), local_descending_path(m.get(key)))
    if m.get("subPath") and m.get("subPathExpr"):
        yield ("subPathExpr",), "subPathExpr and subPath are mutually exclusive"
    propagation = m.get("mountPropagation")
    yield from _told(("mountPropagation",), _one_of(propagation, MOUNT_PROPAGATION))


def volume_mounts(mounts: Any, volumes: Iterable[str] | None, privileged: bool | None) -> Found:
    """ValidateVolumeMounts, between a container's mounts (each mount's own rules are
    ``volume_mount``'s): each names a volume of the pod (``volumes``, when the whole pod is
    known), at a mountPath of its own; Bidirectional propagation only for a privileged
    container (validateMountPropagation)."""
    seen: set[str] = set()
    for i, m in _items(mounts):
        name, path = m.get("name"), m.get("mountPath")
        if volumes is not None and isinstance(name, str) and name not in volumes:
            yield (i, "name"), f"not found: the pod has no volume {name!r}"
        if isinstance(path, str):
            if path in seen:
                yield (i, "mountPath"), f"must be unique: {path!r} is mounted twice"
            seen.add(path)
        if m.get("mountPropagation") == "Bidirectional" and privileged is False:
            yield (
                (i, "mountPropagation"),
                "Bidirectional mount propagation is available only to privileged containers",
            )


def _file_mode(mode: Any) -> Iterator[str]:
    if _int(mode) and not 0 <= mode <= FILE_MODE_MAX:
        yield "must be a number between 0 and 0777 (octal), both inclusive"


def key_to_path(item: Mapping[Any, Any]) -> Found:
    """validateKeyToPath / validateDownwardAPIVolumeFile: an item's path and mode."""
    path = item.get("path")
    yield from _told(("path",), local_descending_path(path))
    if isinstance(path, str) and path.startswith(".."):
        yield ("path",), "must not start with '..'"  # ValidateLocalNonReservedPath
    yield from _told(("mode",), _file_mode(item.get("mode")))


def _default_mode(source: Mapping[Any, Any]) -> Found:
    """fileModeErrorMsg, for the defaultMode of secret, configMap, downwardAPI and projected."""
    yield from _told(("defaultMode",), _file_mode(source.get("defaultMode")))


def host_path(source: Mapping[Any, Any]) -> Found:
    """validateHostPathVolumeSource: no ``..`` in the path (validatePathNoBacksteps), a type
    of ``HOST_PATH_TYPES`` (validateHostPathType)."""
    path = source.get("path")
    if isinstance(path, str) and ".." in path.split("/"):
        yield ("path",), "must not contain '..'"
    yield from _told(("type",), _one_of(source.get("type"), HOST_PATH_TYPES))


def fibre_channel(source: Mapping[Any, Any]) -> Found:
    """validateFCVolumeSource: targetWWNs or wwids, not both."""
    if bool(source.get("targetWWNs")) == bool(source.get("wwids")):
        yield ("targetWWNs",), "must specify either targetWWNs or wwids, but not both"


# validateVolumeSource, per source: what it cannot do without (validateSecretVolumeSource,
# validateConfigMapVolumeSource, validatePersistentClaimVolumeSource, ...; an empty string or
# list is as missing as an absent key) and its own rules; validateProjectionSources' names.
VOLUME_SOURCE_RULES: Mapping[str, ObjectCheck] = {
    "AWSElasticBlockStoreVolumeSource": _requires("volumeID"),
    "AzureDiskVolumeSource": _requires("diskName", "diskURI"),
    "AzureFileVolumeSource": _requires("secretName", "shareName"),
    "CSIVolumeSource": _requires("driver"),
    "CephFSVolumeSource": _requires("monitors"),
    "CinderVolumeSource": _requires("volumeID"),
    "ConfigMapProjection": _requires("name"),
    "ConfigMapVolumeSource": _requires("name", then=_default_mode),
    "DownwardAPIVolumeSource": _default_mode,
    "EphemeralVolumeSource": _requires("volumeClaimTemplate"),
    "FCVolumeSource": fibre_channel,
    "FlexVolumeSource": _requires("driver"),
    "GCEPersistentDiskVolumeSource": _requires("pdName"),
    "GitRepoVolumeSource": _requires("repository"),
    "GlusterfsVolumeSource": _requires("endpoints", "path"),
    "HostPathVolumeSource": _requires("path", then=host_path),
    "ISCSIVolumeSource": _requires("targetPortal", "iqn"),
    "NFSVolumeSource": _requires("server", "path"),
    "PersistentVolumeClaimVolumeSource": _requires("claimName"),
    "PhotonPersistentDiskVolumeSource": _requires("pdID"),
    "PortworxVolumeSource": _requires("volumeID"),
    "ProjectedVolumeSource": _default_mode,
    "QuobyteVolumeSource": _requires("registry", "volume"),
    "RBDVolumeSource": _requires("monitors", "image"),
    "ScaleIOVolumeSource": _requires("gateway", "system", "volumeName"),
    "SecretProjection": _requires("name"),
    "SecretVolumeSource": _requires("secretName", then=_default_mode),
    "StorageOSVolumeSource": _requires("volumeName"),
    "VsphereVirtualDiskVolumeSource": _requires("volumePath"),
}


def volume(v: Mapping[Any, Any]) -> Found:
    """ValidateVolumes' rules of one volume: a DNS-1123 label for a name; validateVolumeSource:
    exactly one source (each source's rules are ``VOLUME_SOURCE_RULES``)."""
    name = v.get("name")
    if isinstance(name, str):
        yield from _told(("name",), k8s.dns1123_label(name))
    sources = k8s_schema.fields("Volume") - {"name"}
    if sum(1 for k, s in v.items() if k in sources and s is not None) != 1:
        yield (), "must have exactly one volume source (e.g. persistentVolumeClaim)"


def volume_names(items: Any) -> Found:
    """ValidateVolumes, between a pod's volumes: names once."""
    seen: set[str] = set()
    for i, v in _items(items):
        name = v.get("name")
        if isinstance(name, str):
            if name in seen:
                yield (i, "name"), f"Duplicate value: {name!r}"
            seen.add(name)


# --- environment -------------------------------------------------------------------------------


def key_selector(s: Mapping[Any, Any]) -> Found:
    """validateConfigMapKeySelector / validateSecretKeySelector: the object's name (a DNS
    subdomain) and a key a ConfigMap or Secret can have (IsConfigMapKey)."""
    yield from _requires("name", "key")(s)
    yield from _told(("name",), _name(k8s.dns1123_subdomain)(s.get("name")))
    yield from _told(("key",), _name(k8s.configmap_key)(s.get("key")))


def _subscripted(path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: ``metadata.labels['app']`` -> (path, subscript)."""
    if not path.endswith("']"):
        return None
    head, sep, subscript = path[:-2].partition("['")
    return (head, subscript) if sep else None


def _field_selector(s: Mapping[Any, Any]) -> Found:
    """validateObjectFieldSelector (podshelper.ConvertDownwardAPIFieldLabel): a field the
    downward API gives an env var, a label or annotation by its key."""
    version, path = s.get("apiVersion"), s.get("fieldPath")
    if version not in (None, "", "v1"):  # defaulted to v1
        yield ("apiVersion",), f"unsupported pod version: {version}"
    if not isinstance(path, str) or not path:
        return
    split = _subscripted(path)
    if split is None:
        if path not in ENV_FIELD_PATHS:
            choices = ", ".join(
                (*ENV_FIELD_PATHS, *(f"{p}['<key>']" for p in SUBSCRIPTED_FIELD_PATHS))
            )
            yield ("fieldPath",), f"must be one of: {choices}"
        return
    head, subscript = split
    if head not in SUBSCRIPTED_FIELD_PATHS:
        yield ("fieldPath",), f"{head} does not support subscript"
    else:
        key = subscript.lower() if head == "metadata.annotations" else subscript
        yield from _told(("fieldPath",), k8s.qualified_name(key))


def _divisors(resource: str) -> tuple[str, ...] | None:
    """validateContainerResourceDivisor: the divisors a resource takes."""
    name = resource.partition(".")[2]
    if name == "cpu":
        return CPU_DIVISORS
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return _BYTE_DIVISORS
    return None


def _resource_selector(s: Mapping[Any, Any]) -> Found:
    """validateContainerResourceFieldSelector (an env var's): one of the container's own
    requests or limits, divided by a divisor that resource takes."""
    resource = s.get("resource")
    if not isinstance(resource, str) or not resource:
        return
    if resource not in RESOURCE_FIELD_PATHS and not resource.startswith(RESOURCE_FIELD_PREFIXES):
        choices = ", ".join(
            (*RESOURCE_FIELD_PATHS, *(f"{p}<size>" for p in RESOURCE_FIELD_PREFIXES))
        )
        yield ("resource",), f"must be one of: {choices}"
        return
    divisor, allowed = _amount(s.get("divisor")), _divisors(resource)
    if divisor and allowed and divisor not in {_amount(d) for d in allowed}:
        yield ("divisor",), f"must be one of {', '.join(allowed)} for {resource}"


# The env sources whose rules depend on being an env var's (a volume's downward API takes
# others); a ConfigMap's or Secret's key is checked as an object of its own (``OBJECT_RULES``).
ENV_SOURCE_CHECKS: Mapping[str, ObjectCheck] = {
    "fieldRef": _field_selector,
    "resourceFieldRef": _resource_selector,
}


@functools.lru_cache(maxsize=4096)
def _env_name_problems(name: str) -> tuple[str, ...]:
    return tuple(k8s.env_var_name(name))


def env_var(e: Mapping[Any, Any]) -> Found:
    """ValidateEnv's rules of one variable: its name (IsEnvVarName), a value or a valueFrom;
    validateEnvVarValueFrom: exactly one source, each checked (``ENV_SOURCE_CHECKS``)."""
    name = e.get("name")
    if isinstance(name, str):
        yield from _told(("name",), _env_name_problems(name))
    source = e.get("valueFrom")
    if not isinstance(source, dict):
        return
    given = [k for k in ENV_SOURCES if source.get(k) is not None]
    if e.get("value") not in (None, ""):
        yield (), "set value or valueFrom, not both"
    elif not source:  # (a key of its own is an unknown field: the schema names it)
        yield ("valueFrom",), f"must specify one of: {', '.join(ENV_SOURCES[:4])}"
    elif len(given) > 1:
        yield (
            ("valueFrom",),
            f"may not have more than one field specified at a time: {', '.join(given)}",
        )
    for k in given:
        check = ENV_SOURCE_CHECKS.get(k)
        if check is not None and isinstance(source[k], dict):
            yield from _under(("valueFrom", k), check(source[k]))


def env_from(e: Mapping[Any, Any]) -> Found:
    """ValidateEnvFrom's rules of one source: a prefix that makes variable names; exactly one
    of configMapRef and secretRef, named (validateConfigMapEnvSource, validateSecretEnvSource)."""
    prefix = e.get("prefix")
    if isinstance(prefix, str) and prefix:
        yield from _told(("prefix",), k8s.env_var_name(prefix))
    given = [k for k in ENV_FROM_SOURCES if e.get(k) is not None]
    if len(given) != 1:
        yield (), "must specify one of: `configMapRef` or `secretRef`"
    for k in given:
        ref = _mapping(e.get(k))
        yield from _under((k,), _requires("name")(ref))
        yield from _told((k, "name"), _name(k8s.dns1123_subdomain)(ref.get("name")))


# --- containers --------------------------------------------------------------------------------


def _port(value: Any) -> Iterator[str]:
    """ValidatePortNumOrName."""
    if _int(value):
        yield from k8s.port_number(value)
    elif isinstance(value, str):
        yield from k8s.port_name(value)


def container_port(p: Mapping[Any, Any]) -> Found:
    """validateContainerPorts' rules of one port: an IANA_SVC_NAME for a name, port numbers in
    range (a hostPort of 0 is none), a known protocol."""
    yield from _told(("name",), _name(k8s.port_name)(p.get("name")))
    container_port = p.get("containerPort")
    if container_port == 0:
        yield ("containerPort",), "required"
    elif _int(container_port):
        yield from _told(("containerPort",), k8s.port_number(container_port))
    host_port = p.get("hostPort")
    if _int(host_port) and host_port != 0:
        yield from _told(("hostPort",), k8s.port_number(host_port))
    yield from _told(("protocol",), _one_of(p.get("protocol") or "TCP", PROTOCOLS))


def _handler(h: Mapping[Any, Any], kinds: tuple[str, ...]) -> Found:
    """validateHandler: exactly one handler; validateExecAction, validateHTTPGetAction's and
    validateTCPSocketAction's ports (ValidatePortNumOrName), validateGRPCAction."""
    given = [k for k in kinds if h.get(k) is not None]
    if not given:
        yield (), f"must specify a handler type (one of: {', '.join(kinds)})"
    for k in given[1:]:
        yield (k,), "may not specify more than 1 handler type"
    if "exec" in given:
        yield from _under(("exec",), _requires("command")(_mapping(h["exec"])))
    for k in ("httpGet", "tcpSocket", "grpc"):
        if k in given:
            yield from _told((k, "port"), _port(_mapping(h[k]).get("port")))


def probe(p: Mapping[Any, Any]) -> Found:
    """validateProbe: one handler, counts not negative, a positive grace period."""
    yield from _handler(p, PROBE_HANDLERS)
    for k in PROBE_COUNTS:
        if _int(p.get(k)) and p[k] < 0:
            yield (k,), "must be greater than or equal to 0"
    grace = p.get("terminationGracePeriodSeconds")
    if _int(grace) and grace <= 0:
        yield ("terminationGracePeriodSeconds",), "must be greater than 0"


def lifecycle(lc: Mapping[Any, Any]) -> Found:
    """validateLifecycle: each hook has one handler."""
    for hook in ("postStart", "preStop"):
        if isinstance(lc.get(hook), dict):
            yield from _under((hook,), _handler(lc[hook], LIFECYCLE_HANDLERS))


def security_context(sc: Mapping[Any, Any]) -> Found:
    """ValidateSecurityContext: user and group IDs in range (IsValidUserID, IsValidGroupID);
    allowPrivilegeEscalation false is impossible with privileged or CAP_SYS_ADMIN."""
    for k in ("runAsUser", "runAsGroup"):
        if _int(sc.get(k)):
            yield from _told((k,), k8s.id_number(sc[k]))
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged") is True:
            yield (
                ("allowPrivilegeEscalation",),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            )
        if "CAP_SYS_ADMIN" in (_mapping(sc.get("capabilities")).get("add") or ()):
            yield (
                ("allowPrivilegeEscalation",),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` "
                "CAP_SYS_ADMIN",
            )


def pod_security_context(sc: Mapping[Any, Any]) -> Found:
    """validatePodSpecSecurityContext: fsGroup, user and group IDs in range."""
    for k in ("fsGroup", "runAsUser", "runAsGroup"):
        if _int(sc.get(k)):
            yield from _told((k,), k8s.id_number(sc[k]))
    groups = sc.get("supplementalGroups")
    for g, gid in enumerate(groups if isinstance(groups, list | tuple) else ()):
        if _int(gid):
            yield from _told(("supplementalGroups", g), k8s.id_number(gid))


def container(c: Mapping[Any, Any]) -> Found:
    """validateContainerCommon's rules of one container, by itself: a DNS-1123 label for a name;
    validateContainerPorts' names once; the probes' own rules (validateLivenessProbe,
    validateReadinessProbe, validateStartupProbe)."""
    name = c.get("name")
    if isinstance(name, str):
        yield from _told(("name",), k8s.dns1123_label(name))
    ports: set[str] = set()
    for i, p in _items(c.get("ports")):
        port_name = p.get("name")
        if isinstance(port_name, str) and port_name:
            if port_name in ports:
                yield (("ports", i, "name"), f"Duplicate value: {port_name!r}")
            ports.add(port_name)
    for k in ("livenessProbe", "startupProbe"):
        threshold = _mapping(c.get(k)).get("successThreshold")
        if _int(threshold) and threshold not in (0, 1):  # 0 is defaulted to 1
            yield (k, "successThreshold"), "must be 1"
    if _mapping(c.get("readinessProbe")).get("terminationGracePeriodSeconds") is not None:
        yield (
            ("readinessProbe", "terminationGracePeriodSeconds"),
            "must not be set for readinessProbes",
        )


# --- affinity ----------------------------------------------------------------------------------


def _is_int64(text: Any) -> bool:
    """strconv.ParseInt(text, 10, 64) succeeds."""
    if not isinstance(text, str) or not text.lstrip("+-").isascii():
        return False
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isdigit() and -(2**63) <= int(text) < 2**63


def node_selector_requirement(rq: Mapping[Any, Any], required: bool = True) -> Found:
    """ValidateNodeSelectorRequirement: the number of values each operator takes, a label name
    for a key, label values (in a required term); and what the scheduler parses
    (k8s.io/apimachinery labels.NewRequirement): Gt and Lt compare with an integer, or the
    term never matches and the pods are never scheduled."""
    op, values = rq.get("operator"), rq.get("values") or []
    values = values if isinstance(values, list | tuple) else []
    if op in ("In", "NotIn") and not values:
        yield ("values",), "must be specified when `operator` is 'In' or 'NotIn'"
    elif op in ("Exists", "DoesNotExist") and values:
        yield ("values",), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    elif op in ("Gt", "Lt") and len(values) != 1:
        yield ("values",), "must be specified single value when `operator` is 'Lt' or 'Gt'"
    elif op not in NODE_OPERATORS:
        yield ("operator",), f"not a valid selector operator (one of: {', '.join(NODE_OPERATORS)})"
    key = rq.get("key")
    if isinstance(key, str):
        yield from _told(("key",), k8s.qualified_name(key))
    for i, value in enumerate(values):
        if op in ("Gt", "Lt") and isinstance(value, str) and not _is_int64(value):
            yield ("values", i), "for 'Gt', 'Lt' operators, the value must be an integer"
        elif required and isinstance(value, str):
            yield from _told(("values", i), k8s.label_value(value))


def node_field_selector_requirement(rq: Mapping[Any, Any]) -> Found:
    """validateNodeFieldSelectorRequirement: ``metadata.name`` In/NotIn exactly one value."""
    values = rq.get("values") or []
    if rq.get("operator") not in ("In", "NotIn"):
        yield ("operator",), "not a valid selector operator (matchFields takes In or NotIn)"
    elif not isinstance(values, list | tuple) or len(values) != 1:
        yield (
            ("values",),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )
    if rq.get("key") != "metadata.name":
        yield ("key",), "not a valid field selector key (matchFields takes metadata.name)"


def node_selector_term(term: Mapping[Any, Any], required: bool = True) -> Found:
    """ValidateNodeSelectorTerm (a preferred term may hold label values a required one may
    not: ValidatePreferredSchedulingTerms)."""
    for i, rq in _items(term.get("matchExpressions")):
        yield from _under(("matchExpressions", i), node_selector_requirement(rq, required))
    for i, rq in _items(term.get("matchFields")):
        yield from _under(("matchFields", i), node_field_selector_requirement(rq))


def _weight(term: Mapping[Any, Any]) -> Iterator[str]:
    w = term.get("weight")
    if _int(w) and not WEIGHT[0] <= w <= WEIGHT[1]:
        yield "must be in the range 1-100"


def label_selector(selector: Any) -> Found:
    """k8s.io/apimachinery ValidateLabelSelectorRequirement: In/NotIn need values,
    Exists/DoesNotExist take none."""
    for i, rq in _items(_mapping(selector).get("matchExpressions")):
        op, values = rq.get("operator"), rq.get("values") or []
        count = len(values) if isinstance(values, list | tuple) else 0
        at: Path = ("matchExpressions", i)
        if op in ("In", "NotIn") and count == 0:
            yield (*at, "values"), "must be specified when `operator` is 'In' or 'NotIn'"
        elif op in ("Exists", "DoesNotExist") and count > 0:
            yield (
                (*at, "values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )
        elif op not in LABEL_OPERATORS:
            yield (
                (*at, "operator"),
                f"not a valid selector operator (one of: {', '.join(LABEL_OPERATORS)})",
            )


def _pod_affinity_term(term: Mapping[Any, Any]) -> Found:
    """validatePodAffinityTerm: a topologyKey (a missing one is the schema's "required"), and
    valid selectors."""
    if term.get("topologyKey") == "":
        yield ("topologyKey",), "can not be empty"
    for key in ("labelSelector", "namespaceSelector"):
        yield from _under((key,), label_selector(term.get(key)))


def affinity(a: Mapping[Any, Any]) -> Found:
    """validateAffinity: validateNodeAffinity (ValidateNodeSelector,
    ValidatePreferredSchedulingTerms), validatePodAffinity / validatePodAntiAffinity
    (validateWeightedPodAffinityTerms)."""
    node = _mapping(a.get("nodeAffinity"))
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
            yield from _under((*at, i), node_selector_term(term))
    at = ("nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
    for i, term in _items(node.get(at[1])):
        yield from _told((*at, i, "weight"), _weight(term))
        found = node_selector_term(_mapping(term.get("preference")), required=False)
        yield from _under((*at, i, "preference"), found)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = _mapping(a.get(kind))
        at = (kind, "requiredDuringSchedulingIgnoredDuringExecution")
        for i, term in _items(pod.get(at[1])):
            yield from _under((*at, i), _pod_affinity_term(term))
        at = (kind, "preferredDuringSchedulingIgnoredDuringExecution")
        for i, term in _items(pod.get(at[1])):
            yield from _told((*at, i, "weight"), _weight(term))
            found = _pod_affinity_term(_mapping(term.get("podAffinityTerm")))
            yield from _under((*at, i, "podAffinityTerm"), found)


# --- the rest of a pod's objects ---------------------------------------------------------------


def toleration(t: Mapping[Any, Any]) -> Found:
    """ValidateTolerations' rules of one toleration."""
    op = t.get("operator") or "Equal"
    effect, value, key = t.get("effect"), t.get("value"), t.get("key")
    if isinstance(op, str) and op not in ("Exists", "Equal"):
        # Kubernetes also has Lt and Gt, behind the alpha gate TaintTolerationComparisonOperators.
        yield ("operator",), "must be Exists or Equal"
    if op == "Exists" and isinstance(value, str) and value:
        yield ("value",), "must be empty when operator is Exists"
    if isinstance(effect, str) and effect:
        yield from _told(
            ("effect",), _one_of(effect, ("NoSchedule", "PreferNoSchedule", "NoExecute"))
        )
    if t.get("tolerationSeconds") is not None and effect != "NoExecute":
        yield ("tolerationSeconds",), "only with effect NoExecute"
    if isinstance(key, str) and key:
        yield from _told(("key",), k8s.qualified_name(key))
    elif key in (None, "") and op != "Exists":  # an empty key with Exists matches all taints
        yield ("key",), "required unless operator is Exists"


def topology_spread_constraint(c: Mapping[Any, Any]) -> Found:
    """validateTopologySpreadConstraints' rules of one constraint: ValidateMaxSkew,
    ValidateTopologyKey, ValidateWhenUnsatisfiable, validateMinDomains,
    validateNodeInclusionPolicy, and its label selector."""
    skew, domains = c.get("maxSkew"), c.get("minDomains")
    if _int(skew) and skew <= 0:
        yield ("maxSkew",), "must be greater than zero"
    if c.get("topologyKey") == "":
        yield ("topologyKey",), "can not be empty"
    when = c.get("whenUnsatisfiable")
    yield from _told(("whenUnsatisfiable",), _one_of(when, WHEN_UNSATISFIABLE))
    if _int(domains):
        if domains <= 0:
            yield ("minDomains",), "must be greater than zero"
        if when != "DoNotSchedule":
            yield (
                ("minDomains",),
                f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {when}",
            )
    for k in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        yield from _told((k,), _one_of(c.get(k), NODE_INCLUSION_POLICIES))
    yield from _under(("labelSelector",), label_selector(c.get("labelSelector")))


def host_alias(h: Mapping[Any, Any]) -> Found:
    """ValidateHostAliases' rules of one alias: an IP address, DNS subdomains for names."""
    ip = h.get("ip")
    if isinstance(ip, str):
        yield from _told(("ip",), k8s.ip_address(ip))
    names = h.get("hostnames")
    for j, name in enumerate(names if isinstance(names, list | tuple) else ()):
        if isinstance(name, str):
            yield from _told(("hostnames", j), k8s.dns1123_subdomain(name))


def _strings(value: Any) -> list[str] | None:
    """A list of strings as given, or None (the schema reports any other shape)."""
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def dns_config(c: Mapping[Any, Any]) -> Found:
    """validatePodDNSConfig's rules of a dnsConfig by itself: at most 3 nameservers, each an IP
    address; at most 32 search domains of at most 2048 characters together (with the spaces
    between them), each a DNS-1123 subdomain but for one trailing dot (the strict rule: clusters
    with ``RelaxedDNSSearchValidation`` also take ``_`` and a lone ``.``); a name for each
    option."""
    nameservers = _strings(c.get("nameservers")) or []
    if len(nameservers) > MAX_DNS_NAMESERVERS:
        yield ("nameservers",), f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"
    for i, server in enumerate(nameservers):
        yield from _told(("nameservers", i), k8s.ip_address(server))
    searches = _strings(c.get("searches")) or []
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        yield ("searches",), f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"
    if len(" ".join(searches).encode("utf-8", "surrogatepass")) > MAX_DNS_SEARCH_LIST_CHARS:
        yield (
            ("searches",),
            f"must not have more than {MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) "
            "in the search list",
        )
    for i, search in enumerate(searches):
        yield from _told(("searches", i), k8s.dns1123_subdomain(search.removesuffix(".")))


def dns_policy_none(spec: Mapping[Any, Any]) -> Found:
    """validatePodDNSConfig under dnsPolicy None: the pod's whole DNS setup is its dnsConfig,
    which must name a nameserver."""
    if spec.get("dnsPolicy") != "None":
        return
    config = spec.get("dnsConfig")
    if not isinstance(config, dict):
        yield ("dnsConfig",), "must provide `dnsConfig` when `dnsPolicy` is None"
    elif not config.get("nameservers"):
        yield (
            ("dnsConfig", "nameservers"),
            "must provide at least one DNS nameserver when `dnsPolicy` is None",
        )


# ValidatePodSpec's rules of single fields: field -> its check.
POD_FIELDS: Mapping[str, Callable[[Any], Iterator[str]]] = {
    "activeDeadlineSeconds": _between(1, INT32_MAX),
    "dnsPolicy": _choice("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
    "hostname": _name(k8s.dns1123_label),  # ValidateDNS1123Label
    "nodeName": _name(k8s.dns1123_subdomain),  # ValidateNodeName
    "preemptionPolicy": _choice("PreemptLowerPriority", "Never"),  # ValidatePreemptionPolicy
    "priorityClassName": _name(k8s.dns1123_subdomain),  # ValidatePriorityClassName
    "restartPolicy": _choice("Always", "OnFailure", "Never"),  # validateRestartPolicy
    "runtimeClassName": _name(k8s.dns1123_subdomain),  # ValidateRuntimeClassName
    "serviceAccountName": _name(k8s.dns1123_subdomain),  # ValidateServiceAccountName
    "subdomain": _name(k8s.dns1123_label),  # ValidateDNS1123Label
}


def pod_fields(spec: Mapping[Any, Any]) -> Found:
    """ValidatePodSpec's rules of single fields (``POD_FIELDS``), which a partial pod has
    too, and what dnsPolicy None asks of dnsConfig (which no other field writes)."""
    for field, check in POD_FIELDS.items():
        yield from _told((field,), check(spec.get(field)))
    yield from dns_policy_none(spec)


# Each core/v1 object's own rules, run wherever the object is: in a spec when it is loaded
# (``rules.OBJECT_RULES``), in the rendered pods by ``objects``.
OBJECT_RULES: Mapping[str, ObjectCheck] = {
    **VOLUME_SOURCE_RULES,
    "Affinity": affinity,
    "Container": container,
    "ConfigMapKeySelector": key_selector,
    "ContainerPort": container_port,
    "DownwardAPIVolumeFile": key_to_path,
    "EnvFromSource": env_from,
    "EnvVar": env_var,
    "HostAlias": host_alias,
    "KeyToPath": key_to_path,
    "Lifecycle": lifecycle,
    "PodDNSConfig": dns_config,
    "PodDNSConfigOption": _requires("name"),  # validatePodDNSConfig: "must not be empty"
    "PodSpec": pod_fields,
    "PodSecurityContext": pod_security_context,
    "Probe": probe,
    "ResourceRequirements": resource_amounts,
    "SecretKeySelector": key_selector,
    "SecurityContext": security_context,
    "Toleration": toleration,
    "TopologySpreadConstraint": topology_spread_constraint,
    "Volume": volume,
    "VolumeMount": volume_mount,
}


def _shape(kind: Any) -> tuple[str, str] | None:
    """How a property holds objects: ``("one" | "list" | "map", definition)``, or None."""
    if isinstance(kind, dict):
        if "ref" in kind:
            return "one", kind["ref"]
        for shape in ("list", "map"):
            inner = kind.get(shape)
            if isinstance(inner, dict) and "ref" in inner:
                return shape, inner["ref"]
    return None


@functools.cache
def _ruled(definition: str) -> Mapping[str, tuple[str, str]]:
    """The properties of ``definition`` below which an object has rules: field -> (shape,
    definition), found once through the core/v1 schema."""
    found = {}
    for field, kind in k8s_schema.properties(definition).items():
        shape = _shape(kind)
        if shape is not None and _has_rules(shape[1], frozenset({definition})):
            found[field] = shape
    return found


def _has_rules(definition: str, seen: frozenset[str]) -> bool:
    if definition in OBJECT_RULES:
        return True
    if definition in seen:
        return False
    seen |= {definition}
    return any(
        shape is not None and _has_rules(shape[1], seen)
        for shape in map(_shape, k8s_schema.properties(definition).values())
    )


def objects(value: Any, definition: str) -> Found:
    """The rules of every object in ``value`` (a ``definition``, itself included), found
    through the schema as the spec's are (``k8s_schema.check``)."""
    stack: list[tuple[Path, Any, str]] = [((), value, definition)]
    while stack:
        at, node, name = stack.pop()
        if not isinstance(node, dict):
            continue
        check = OBJECT_RULES.get(name)
        if check is not None:
            for sub, message in check(node):
                yield (*at, *sub), message
        ruled = _ruled(name)
        below: list[tuple[Path, Any, str]] = []
        for field, child in node.items():  # a node has few of its fields: walk those
            if field not in ruled:
                continue
            shape, ref = ruled[field]
            if shape == "one":
                below.append(((*at, field), child, ref))
            elif shape == "list":
                below += [((*at, field, i), item, ref) for i, item in _items(child)]
            else:
                below += [((*at, field, k), item, ref) for k, item in _mapping(child).items()]
        stack.extend(reversed(below))


def regular_container(c: Mapping[Any, Any]) -> Found:
    """validateContainers: a regular container takes no restartPolicy."""
    if c.get("restartPolicy") is not None:
        yield ("restartPolicy",), "may not be set for non-init containers"


def init_container(c: Mapping[Any, Any]) -> Found:
    """validateInitContainers (validateInitContainerRestartPolicy): an init container's
    restartPolicy is Always (a sidecar) or none, and without it no probes or lifecycle."""
    restart = c.get("restartPolicy")
    yield from _told(("restartPolicy",), _one_of(restart, ("Always",)))
    if restart != "Always":
        for k in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
            if c.get(k) is not None:
                yield (k,), "may not be set for init containers without restartPolicy=Always"


# In validateContainers' order: an init container's name is checked against the regular ones.
CONTAINER_KINDS: Mapping[str, ObjectCheck] = {
    "containers": regular_container,
    "initContainers": init_container,
}


def containers(spec: Mapping[Any, Any], whole: bool) -> Found:
    """validateContainers and validateInitContainers, between a pod's containers: each of its
    kind (``CONTAINER_KINDS``); validatePodHostNetworkDeps: under hostNetwork a hostPort is
    its containerPort; names once across both lists (of a whole pod)."""
    seen: set[str] = set()
    host_network = spec.get("hostNetwork") is True
    for kind, check in CONTAINER_KINDS.items():
        for i, c in _items(spec.get(kind)):
            at: Path = (kind, i)
            name = c.get("name")
            if whole and isinstance(name, str):
                if name in seen:
                    yield (*at, "name"), f"Duplicate value: {name!r}"
                seen.add(name)
            yield from _under(at, check(c))
            for j, p in _items(c.get("ports")):
                host, port = p.get("hostPort"), p.get("containerPort")
                if host_network and _int(host) and host != 0 and host != port:
                    yield (
                        (*at, "ports", j, "hostPort"),
                        "must match `containerPort` when `hostNetwork` is true",
                    )


def pod_spec(spec: Any, whole: bool = True) -> Found:
    """ValidatePodSpec: the rules of every object in the pod (``objects``), and those between
    its volumes, its containers and each container's mounts and resources."""
    spec = _mapping(spec)
    yield from objects(spec, "PodSpec")
    yield from _under(("volumes",), volume_names(spec.get("volumes")))
    names = {str(v.get("name")) for _, v in _items(spec.get("volumes"))} if whole else None
    for kind in CONTAINER_KINDS:
        for i, c in _items(spec.get(kind)):
            security = _mapping(c.get("securityContext"))
            privileged = security.get("privileged") is True if whole else None
            found = volume_mounts(c.get("volumeMounts"), names, privileged)
            yield from _under((kind, i, "volumeMounts"), found)
            yield from _under((kind, i, "resources"), resources_between(c.get("resources")))
    yield from containers(spec, whole)

"""Field rules for ``JobSpec``: each takes a field value and yields ``(sub-path, message)`` pairs.

The grammar itself (names, labels, quantities) lives in ``k8s_rules``; this module applies it to
the shapes the spec uses (maps, lists of Kubernetes objects) and adds the rules between fields.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kfcompile import k8s_rules as k8s
from kfcompile.paths import key

if TYPE_CHECKING:
    from kfcompile.spec import JobSpec

Found = Iterator[tuple[str, str]]

MANAGERS = (
    "kueue.x-k8s.io/multikueue",
    "trainer.kubeflow.org/trainjob-controller",
    "kubeflow.org/training-operator",
)
TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
ENV_VAR_KEYS = frozenset({"name", "value", "valueFrom"})
TOLERATION_TYPES = {
    "key": str,
    "operator": str,
    "value": str,
    "effect": str,
    "tolerationSeconds": int,
}
TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MOUNT_KEYS = frozenset(
    {
        "name",
        "mountPath",
        "readOnly",
        "subPath",
        "subPathExpr",
        "mountPropagation",
        "recursiveReadOnly",
    }
)
# The inline script travels as a ConfigMap key (its file name) and value.
CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
CONFIGMAP_MAX_BYTES = 1024 * 1024 - 4096  # the API server's limit, less room for metadata
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
# Kubernetes' own limit on image references is loose; reject only what can never pull.
IMAGE = re.compile(r"^[^\s]+$")


def _each(problems: Iterable[str], sub: str = "") -> Found:
    for message in problems:
        yield sub, message


def dns1123_subdomain(v: str) -> Found:
    return _each(k8s.dns1123_subdomain(v))


def dns1123_label(v: str) -> Found:
    return _each(k8s.dns1123_label(v))


def label_value(v: str) -> Found:
    return _each(k8s.label_value(v))


def resource_name(v: str) -> Found:
    return _each(k8s.resource_name(v))


def quantity(v: str) -> Found:
    return _each(k8s.resource_quantity(v))


def job_name(v: str) -> Found:
    return _each(k8s.dns1035_label(v))


def image(v: str) -> Found:
    if not IMAGE.match(v):
        yield "", "must be an image reference without spaces"


def entrypoint(v: str) -> Found:
    if not v.strip():
        yield "", "must not be empty"


def absolute_path(v: str) -> Found:
    if not v.startswith("/"):
        yield "", "must be an absolute path"


def storage_uri(v: str) -> Found:
    if not URI.match(v):
        yield "", "must be a URI (scheme://...)"


def managed_by(v: str) -> Found:
    if v not in MANAGERS:
        yield "", f"must be one of: {', '.join(MANAGERS)}"


INT32_MAX = 2**31 - 1  # Kubernetes counts and seconds are int32 (or wider)


def _at_most_int32(v: int) -> Found:
    if v > INT32_MAX:
        yield "", f"must be at most {INT32_MAX}"


def positive(v: int) -> Found:
    if v < 1:
        yield "", "must be at least 1"
    yield from _at_most_int32(v)


def non_negative(v: int) -> Found:
    if v < 0:
        yield "", "must be 0 or more"
    yield from _at_most_int32(v)


def port(v: int) -> Found:
    if not 1 <= v <= 65535:
        yield "", "must be a port number from 1 to 65535"


def nprocs(v: int | str) -> Found:
    if isinstance(v, int):
        if v < 1:
            yield "", "must be at least 1 or 'auto'"
        yield from _at_most_int32(v)


def label_map(m: Mapping[str, str]) -> Found:
    for k, v in m.items():
        yield from _each(k8s.qualified_name(k), f"{key(k)} (key)")
        yield from _each(k8s.label_value(v), key(k))


def annotation_map(m: Mapping[str, str]) -> Found:
    for k in m:
        yield from _each(k8s.qualified_name(k), f"{key(k)} (key)")


def resource_map(m: Mapping[str, str]) -> Found:
    for k, v in m.items():
        yield from _each(k8s.resource_name(k), f"{key(k)} (key)")
        yield from _each(k8s.resource_quantity(v), key(k))


def env_map(m: Mapping[str, str]) -> Found:
    for k in m:
        yield from _each(k8s.env_var_name(k), f"{key(k)} (key)")


def pod_overrides(m: Mapping[str, Any]) -> Found:
    """Keys of pod_spec_overrides: PodSpec fields."""
    return _unknown(m, k8s.POD_SPEC_FIELDS, "PodSpec", "")


def container_overrides(m: Mapping[str, Any]) -> Found:
    """Keys of container_overrides: Container fields other than the generated name."""
    yield from _unknown(m, k8s.CONTAINER_FIELDS - {"name"}, "Container (name is fixed)", "")


def _unique(names: tuple[str, ...], grammar: Callable[[str], list[str]]) -> Found:
    seen: set[str] = set()
    for i, n in enumerate(names):
        yield from _each(grammar(n), f"[{i}]")
        if n in seen:
            yield f"[{i}]", f"duplicate {n!r}"
        seen.add(n)


def name_list(names: tuple[str, ...]) -> Found:
    """Names of objects (Secrets): DNS-1123 subdomains, each once."""
    return _unique(names, k8s.dns1123_subdomain)


def env_names(names: tuple[str, ...]) -> Found:
    """Environment variable names, each once."""
    return _unique(names, k8s.env_var_name)


def gate_list(names: tuple[str, ...]) -> Found:
    """Scheduling gates: qualified names, each once."""
    return _unique(names, k8s.qualified_name)


def _required_str(item: Mapping[str, Any], name: str, at: str) -> Found:
    if name not in item or item[name] is None:
        yield f"{at}.{name}", "required"
    elif not isinstance(item[name], str):
        yield f"{at}.{name}", "must be a string"


def env_list(items: tuple[Mapping[str, Any], ...]) -> Found:
    for i, item in enumerate(items):
        yield from _required_str(item, "name", f"[{i}]")
        if isinstance(item.get("name"), str):
            yield from _each(k8s.env_var_name(item["name"]), f"[{i}].name")
        yield from _unknown(item, ENV_VAR_KEYS, "EnvVar", f"[{i}]")
        if "value" in item and "valueFrom" in item:
            yield f"[{i}]", "set value or valueFrom, not both"
        if "value" in item and not isinstance(item["value"], str):
            yield f"[{i}].value", "must be a string"
        if "valueFrom" in item and not isinstance(item["valueFrom"], Mapping):
            yield f"[{i}].valueFrom", "must be a mapping"


def env_unique(
    env: Mapping[str, str], listed: tuple[Mapping[str, Any], ...], secret: tuple[str, ...]
) -> Found:
    seen = set(env)
    named = [(f"env_list[{i}].name", item.get("name")) for i, item in enumerate(listed)]
    named += [(f"secret_env[{i}]", name) for i, name in enumerate(secret)]
    for at, name in named:
        if isinstance(name, str):
            if name in seen:
                yield at, f"duplicate environment variable {name!r}"
            seen.add(name)


def _unknown(item: Mapping[str, Any], known: frozenset[str], what: str, at: str) -> Found:
    for k in sorted(map(str, set(item) - known)):
        close = difflib.get_close_matches(k, known, n=1)
        if close:
            hint = f"did you mean {close[0]!r}?"
        elif len(known) <= 8:
            hint = f"{what} has {', '.join(sorted(known))}"
        else:
            hint = f"not a {what} field"
        yield f"{at}{key(k)}", f"unknown field ({hint})"


def _typed(item: Mapping[str, Any], types: Mapping[str, type], at: str) -> Found:
    for k, t in types.items():
        if k in item and not (isinstance(item[k], t) and not isinstance(item[k], bool)):
            yield f"{at}.{k}", f"must be {'an integer' if t is int else 'a string'}"


def tolerations(items: tuple[Mapping[str, Any], ...]) -> Found:
    for i, t in enumerate(items):
        at = f"[{i}]"
        yield from _unknown(t, TOLERATION_KEYS, "Toleration", at)
        yield from _typed(t, TOLERATION_TYPES, at)
        op = t.get("operator", "Equal")
        if op not in TOLERATION_OPERATORS:
            yield f"{at}.operator", "must be Exists or Equal"
        if op == "Exists" and t.get("value"):
            yield f"{at}.value", "must be empty when operator is Exists"
        if "effect" in t and t["effect"] not in TOLERATION_EFFECTS:
            yield f"{at}.effect", f"must be one of: {', '.join(TOLERATION_EFFECTS)}"
        if "tolerationSeconds" in t and t.get("effect") != "NoExecute":
            yield f"{at}.tolerationSeconds", "only with effect NoExecute"
        if isinstance(t.get("key"), str):
            yield from _each(k8s.qualified_name(t["key"]), f"{at}.key")
        elif "key" not in t and op != "Exists":
            yield f"{at}.key", "required unless operator is Exists"


def volumes(items: tuple[Mapping[str, Any], ...]) -> Found:
    seen: set[str] = set()
    for i, v in enumerate(items):
        name = v.get("name")
        yield from _required_str(v, "name", f"[{i}]")
        if isinstance(name, str):
            yield from _each(k8s.dns1123_label(name), f"[{i}].name")
            if name in seen:
                yield f"[{i}].name", f"duplicate volume {name!r}"
            seen.add(name)
        yield from _unknown(v, k8s.VOLUME_SOURCES | {"name"}, "a Volume", f"[{i}]")
        sources = [k for k in v if k in k8s.VOLUME_SOURCES]
        if len(sources) != 1:
            yield f"[{i}]", "must have exactly one volume source (e.g. persistentVolumeClaim)"
        for k in sources:
            if not isinstance(v[k], Mapping):
                yield f"[{i}].{k}", "must be a mapping"


def volume_mounts(items: tuple[Mapping[str, Any], ...]) -> Found:
    paths: set[str] = set()
    for i, m in enumerate(items):
        for k in ("name", "mountPath"):
            yield from _required_str(m, k, f"[{i}]")
        yield from _unknown(m, MOUNT_KEYS, "VolumeMount", f"[{i}]")
        path = m.get("mountPath")
        if isinstance(path, str):
            if not path.startswith("/"):
                yield f"[{i}].mountPath", "must be an absolute path"
            if path in paths:
                yield f"[{i}].mountPath", f"duplicate mount path {path!r}"
            paths.add(path)


def resources_consistent(s: JobSpec) -> Found:
    """Limits not below requests; non-overcommitable resources need a limit equal to the request."""
    pairs: list[tuple[str, str, str | None, str | None]] = [
        ("cpu_limit", "cpu_request", s.cpu_limit, s.cpu_request),
        ("memory_limit", "memory_request", s.memory_limit, s.memory_request),
    ]
    for k, lim in s.extra_resource_limits.items():
        if k in s.extra_resource_requests:
            pairs.append(
                (
                    f"extra_resource_limits{key(k)}",
                    f"extra_resource_requests{key(k)}",
                    lim,
                    s.extra_resource_requests[k],
                )
            )
    for lim_path, req_path, limit, request in pairs:
        if limit is None or request is None or k8s.quantity(limit) or k8s.quantity(request):
            continue  # absent, or already reported by the quantity rule
        if k8s.compare_quantities(limit, request) < 0:
            yield lim_path, f"must not be below {req_path} ({request})"
    for k, wanted in s.extra_resource_requests.items():
        if k8s.is_overcommit_allowed(k):
            continue
        limit = s.extra_resource_limits.get(k)
        path = f"extra_resource_requests{key(k)}"
        if limit is None:
            yield path, "needs an equal limit in extra_resource_limits (it cannot be overcommitted)"
        elif (
            not k8s.quantity(limit)
            and not k8s.quantity(wanted)
            and k8s.compare_quantities(limit, wanted) != 0
        ):
            yield path, "must equal its limit (it cannot be overcommitted)"
    for field, extra in (
        ("extra_resource_requests", s.extra_resource_requests),
        ("extra_resource_limits", s.extra_resource_limits),
    ):
        for k in extra:
            if k in ("cpu", "memory"):
                yield f"{field}{key(k)}", f"use {k}_request / {k}_limit"
            elif k == s.gpu_resource:
                yield f"{field}{key(k)}", "use gpus_per_node (it sets request and limit)"

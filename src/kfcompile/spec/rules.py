"""Field rules for ``JobSpec``: each takes a field value and yields ``(sub-path, message)`` pairs.

The grammar itself (names, labels, quantities) lives in ``k8s_rules``; this module applies it to
the shapes the spec uses (maps, lists of Kubernetes objects) and adds the rules between fields.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kfcompile.kinds import MANAGERS
from kfcompile.spec import k8s_rules as k8s
from kfcompile.spec import k8s_schema, pod_rules
from kfcompile.spec.object_paths import key
from kfcompile.spec.resource_rules import amounts, resources_agree

Found = Iterator[tuple[str, str]]

# The inline script travels as a ConfigMap key (its file name) and value. This pattern and URI
# stay text, compiled (and cached) by re when a spec has a script or an initializer.
CONFIGMAP_KEY = r"[-._a-zA-Z0-9]{1,253}"
CONFIGMAP_MAX_BYTES = 1024 * 1024 - 4096  # the API server's limit, less room for metadata
URI = r"^[A-Za-z][A-Za-z0-9+.-]*://.+$"
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


def extended_resource(v: str) -> Found:
    """A resource a device plugin advertises (``nvidia.com/gpu``): ``cpu``, ``memory`` and the
    ``*kubernetes.io/`` names are the node's own, written by their own fields (k8s.io/kubernetes
    pkg/apis/core/helper/helpers.go IsExtendedResourceName)."""
    yield from _each(k8s.resource_name(v))
    if not k8s.resource_name(v) and not k8s.is_extended_resource(v):
        yield "", "must be an extended resource: a vendor's domain and name, e.g. nvidia.com/gpu"


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


def python_module(v: str) -> Found:
    """What ``python -m`` imports: dotted identifiers (``pkg.sub.train``)."""
    if not all(part.isidentifier() for part in v.split(".")):
        yield "", "must be a Python module name: identifiers joined by '.' (e.g. pkg.train)"


def absolute_path(v: str) -> Found:
    if not v.startswith("/"):
        yield "", "must be an absolute path"


def storage_uri(v: str) -> Found:
    if not re.match(URI, v):
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


def label_name(v: str) -> Found:
    """A label key (a qualified name), as Kubernetes' ``ValidateLabelName`` checks it."""
    return _each(k8s.qualified_name(v))


def resource_map(m: Mapping[str, str]) -> Found:
    for k, v in m.items():
        yield from _each(k8s.resource_name(k), f"{key(k)} (key)")
        yield from _each(k8s.resource_quantity(v), key(k))


def container_resource_map(m: Mapping[str, str]) -> Found:
    """A training container's requests or limits: each entry as ``resource_map``, and as the
    API server takes a container's (``pod_rules.resource_amount``)."""
    yield from resource_map(m)
    for k, v in m.items():
        yield from _each(pod_rules.resource_amount(k, v), key(k))


def env_map(m: Mapping[str, str]) -> Found:
    for k in m:
        yield from _each(k8s.env_var_name(k), f"{key(k)} (key)")


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


# --- Kubernetes objects: the upstream schema, plus the rules it cannot say ---------------------


def _object(value: Any, definition: str, at: str = "", partial: bool = False) -> Found:
    for sub, message in k8s_schema.check(value, definition, partial=partial, rules=OBJECT_RULES):
        yield at + sub, message


def _objects(items: tuple[Any, ...], definition: str) -> Found:
    for i, item in enumerate(items):
        yield from _object(item, definition, f"[{i}]")


def env_list(items: tuple[Mapping[str, Any], ...]) -> Found:
    return _objects(items, "EnvVar")


def tolerations(items: tuple[Mapping[str, Any], ...]) -> Found:
    return _objects(items, "Toleration")


def affinity(m: Mapping[str, Any]) -> Found:
    return _object(m, "Affinity")


# The escape hatches: spec field -> the core/v1 object it is merged into, and the keys of that
# object kfcompile fixes itself.
ESCAPE_HATCHES: Mapping[str, tuple[str, frozenset[str]]] = {
    "pod_spec_overrides": ("PodSpec", frozenset()),
    "container_overrides": ("Container", frozenset({"name"})),
}


def _escape_hatch(field: str, m: Mapping[str, Any]) -> Found:
    definition, fixed = ESCAPE_HATCHES[field]
    for k in fixed & set(m):
        yield key(k), f"is fixed (kfcompile sets the {definition} {k})"
    yield from _object({k: v for k, v in m.items() if k not in fixed}, definition, partial=True)


def pod_overrides(m: Mapping[str, Any]) -> Found:
    """pod_spec_overrides: a partial PodSpec, merged into the generated one; its single fields
    and its own containers are checked as a pod's (what needs the whole waits for the merge)."""
    yield from _escape_hatch("pod_spec_overrides", m)
    yield from _told(pod_rules.pod_fields(m))
    yield from _told(pod_rules.containers(m, whole=False))


def container_overrides(m: Mapping[str, Any]) -> Found:
    """container_overrides: a partial Container, merged into the generated training container
    (a regular container, not an init container)."""
    yield from _escape_hatch("container_overrides", m)
    yield from _told(pod_rules.regular_container(m))


def volumes(items: tuple[Mapping[str, Any], ...]) -> Found:
    yield from _objects(items, "Volume")
    seen: set[str] = set()
    for i, v in enumerate(items):
        name = v.get("name") if isinstance(v, Mapping) else None
        if isinstance(name, str):
            if name in seen:
                yield f"[{i}].name", f"duplicate volume {name!r}"
            seen.add(name)


def volume_mounts(items: tuple[Mapping[str, Any], ...]) -> Found:
    """Each mount; one place per mount point is a rule between fields (``model``), which
    also counts the mounts of the overrides and those kfcompile adds."""
    return _objects(items, "VolumeMount")


def _resource_requirements(r: Mapping[Any, Any]) -> Found:
    """Resource names and non-negative amounts (the schema checks the quantity grammar)."""
    for group in ("requests", "limits"):
        amounts = r.get(group)
        for k, v in amounts.items() if isinstance(amounts, Mapping) else ():
            at = f".{group}{key(str(k))}"
            yield from _each(k8s.resource_name(k), f"{at} (key)")
            if v is not None and not k8s.quantity(v):
                yield from _each(k8s.resource_quantity(v), at)


def _told(found: Iterable[tuple[pod_rules.Path, str]]) -> Found:
    """The pod rules' problems, their paths as sub-paths (``.volumes[0].name``)."""
    for at, message in found:
        yield "".join(f"[{seg}]" if isinstance(seg, int) else key(seg) for seg in at), message


def _container(c: Mapping[Any, Any]) -> Found:
    """A whole container's requests and limits agree (a partial one waits for the merge)."""
    requests, limits = amounts(c.get("resources"), ".resources", late=False)
    return resources_agree(requests, limits, need_limits=False)


def _spec_rule(*checks: Callable[[Any], Iterable[tuple[Any, str]]]) -> k8s_schema.ObjectRule:
    """One object's rules: the pod rules' (their paths told as sub-paths), then the spec's."""
    pod_rule, *own = checks
    return lambda obj: [*_told(pod_rule(obj)), *(found for check in own for found in check(obj))]


# Rules per core/v1 object that the schema cannot express, run wherever the object appears: the
# API server's (``pod_rules``), with the spec's own on resource names and amounts.
OBJECT_RULES: Mapping[str, k8s_schema.ObjectRule] = {
    **{name: _spec_rule(check) for name, check in pod_rules.OBJECT_RULES.items()},
    "Container": _spec_rule(pod_rules.container, _container),
    "ResourceRequirements": _spec_rule(pod_rules.resource_amounts, _resource_requirements),
}

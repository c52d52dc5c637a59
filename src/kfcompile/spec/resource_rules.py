"""The training container's resources as render merges them: the first-class fields (``cpu_*``,
``memory_*``, ``gpus_per_node``, ``extra_resource_*``) and ``container_overrides.resources``
over them, checked together as Kubernetes checks the merged container (limits not below
requests; extended resources and hugepages equal in both; hugepages beside cpu or memory), each
problem told where it was written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kfcompile.spec import k8s_rules as k8s
from kfcompile.spec import pod_rules
from kfcompile.spec.object_paths import key

if TYPE_CHECKING:
    from kfcompile.spec.model import JobSpec

Found = Iterator[tuple[str, str]]


class _Amount(NamedTuple):
    value: Any
    path: str  # where the user wrote it
    late: bool = False  # from an override: merged over the first-class fields
    limits_at: str = ""  # where its missing limit belongs


Amounts = dict[str, _Amount]


def amounts(resources: Any, at: str, late: bool) -> tuple[Amounts, Amounts]:
    """The requests and limits of a ResourceRequirements mapping, by resource name."""
    found: tuple[Amounts, Amounts] = ({}, {})
    if not isinstance(resources, Mapping):
        return found
    for group, into in zip(("requests", "limits"), found, strict=True):
        amounts = resources.get(group)
        for k, v in amounts.items() if isinstance(amounts, Mapping) else ():
            if isinstance(k, str) and v is not None:
                into[k] = _Amount(v, f"{at}.{group}{key(k)}", late, f"{at}.limits".lstrip("."))
    return found


def resources_agree(requests: Amounts, limits: Amounts, need_limits: bool) -> Found:
    """Limits not below requests; a resource that cannot be overcommitted (extended resources,
    hugepages) needs a limit equal to its request. Each problem is told at the path written
    last (an override over a first-class field), naming the other."""
    for name, req in requests.items():
        lim = limits.get(name)
        fixed = not k8s.is_overcommit_allowed(name)
        if k8s.quantity(req.value) or (lim is not None and k8s.quantity(lim.value)):
            continue  # already reported by the quantity grammar
        if lim is None:
            if need_limits and fixed:
                yield (
                    req.path,
                    f"needs an equal limit in {req.limits_at} (it cannot be overcommitted)",
                )
            continue
        order = k8s.compare_quantities(lim.value, req.value)
        if fixed and order != 0:
            if lim.late and not req.late:
                yield (
                    lim.path,
                    f"must equal the request {req.path} ({req.value}) (it cannot be overcommitted)",
                )
            else:
                yield (
                    req.path,
                    f"must equal its limit {lim.path} ({lim.value}) (it cannot be overcommitted)",
                )
        elif order < 0:
            if req.late and not lim.late:
                yield req.path, f"must not exceed {lim.path} ({lim.value})"
            else:
                yield lim.path, f"must not be below {req.path} ({req.value})"


def _first_class(s: JobSpec) -> tuple[Amounts, Amounts]:
    """The requests and limits the typed fields write, in the order render writes them."""
    requests: Amounts = {}
    limits: Amounts = {}
    for name in ("cpu", "memory"):
        for group, into in (("request", requests), ("limit", limits)):
            value = getattr(s, f"{name}_{group}")
            if value is not None:
                into[name] = _Amount(value, f"{name}_{group}")
    if s.gpus_per_node:
        requests[s.gpu_resource] = limits[s.gpu_resource] = _Amount(
            str(s.gpus_per_node), "gpus_per_node"
        )
    for field, extra, into in (
        ("extra_resource_requests", s.extra_resource_requests, requests),
        ("extra_resource_limits", s.extra_resource_limits, limits),
    ):
        for k, v in extra.items():
            into.setdefault(k, _Amount(v, f"{field}{key(k)}", limits_at="extra_resource_limits"))
    return requests, limits


def resources_consistent(s: JobSpec) -> Found:
    """The rendered container's resources agree, whichever field wrote each amount; and no
    amount is written by two fields (an override would silently win over the typed field)."""
    for field, extra in (
        ("extra_resource_requests", s.extra_resource_requests),
        ("extra_resource_limits", s.extra_resource_limits),
    ):
        for k in extra:
            if k in ("cpu", "memory"):
                yield f"{field}{key(k)}", f"use {k}_request / {k}_limit"
            elif k == s.gpu_resource:
                yield f"{field}{key(k)}", "use gpus_per_node (it sets request and limit)"
    requests, limits = _first_class(s)
    over = amounts(s.container_overrides.get("resources"), "container_overrides.resources", True)
    for typed, overriding in zip((requests, limits), over, strict=True):
        for name, amount in overriding.items():
            if name in typed:
                yield amount.path, f"also written by {typed[name].path}: give it in one place"
            else:
                typed[name] = amount
    yield from resources_agree(requests, limits, need_limits=True)
    if pod_rules.needs_qos_resource([*requests, *limits]):
        # told at the first hugepages amount written (ValidateContainerResourceRequirements)
        written = [*requests.items(), *limits.items()]
        first = next(a for name, a in written if k8s.is_hugepages_resource(name))
        yield first.path, "HugePages require cpu or memory"

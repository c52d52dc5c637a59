"""The training container's resources as render merges them: the first-class fields (``cpu_*``,
``memory_*``, ``gpus_per_node``, ``extra_resource_*``) and ``container_overrides.resources``
over them, checked together as Kubernetes checks the merged container (limits not below
requests; extended resources and hugepages equal in both; hugepages beside cpu or memory), each
problem told where it was written.
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from kfcompile.spec import k8s_rules as k8s
from kfcompile.spec.object_paths import key

Found = Iterator[tuple[str, str]]


class Amount(NamedTuple):
    value: Any
    path: str  # where the user wrote it
    late: bool = False  # from an override: merged over the first-class fields
    limits_at: str = ""  # where its missing limit belongs


Amounts = dict[str, Amount]


def amounts(resources: Any, at: str, late: bool) -> tuple[Amounts, Amounts]:
    """The requests and limits of a ResourceRequirements mapping, by resource name."""
    found: tuple[Amounts, Amounts] = ({}, {})
    if not isinstance(resources, Mapping):
        return found
    for group, into in zip(("requests", "limits"), found, strict=True):
        amounts = resources.get(group)
        for k, v in amounts.items() if isinstance(amounts, Mapping) else ():
            if isinstance(k, str) and v is not None:
                into[k] = Amount(v, f"{at}.{group}{key(k)}", late, f"{at}.limits".lstrip("."))
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

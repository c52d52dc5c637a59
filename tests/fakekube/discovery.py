"""What discovery answers: the resources of each group version served."""

from __future__ import annotations

from typing import Any

from .resources import ResourceKind, not_found

Obj = dict[str, Any]

__all__ = ["discovery"]

# Verbs each resource lists (what a real server lists; not all are served here).
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def discovery(kinds: list[ResourceKind], parts: list[str]) -> Obj:
    """The resources of one group version, at ``/api/v1`` or ``/apis/G/V``: all that the
    official client and the adapter ask. ``/api``, ``/apis`` and ``/apis/G`` (kubectl's) answer
    404 here, as an unserved group version does: no caller here asks them."""
    if parts == ["api", "v1"]:
        return _resource_list("", "v1", kinds)
    served = {(kind.group, kind.version) for kind in kinds if kind.group}
    if len(parts) == 3 and (parts[1], parts[2]) in served:
        return _resource_list(parts[1], parts[2], kinds)
    raise not_found()


def _resource_list(group: str, version: str, kinds: list[ResourceKind]) -> Obj:
    resources: list[Obj] = []
    for kind in kinds:
        if (kind.group, kind.version) != (group, version):
            continue
        entry: Obj = {
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": _VERBS,
        }
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        resources.append(entry)
        for sub in kind.subresources:
            sub_kind, verbs = {
                "status": (kind.kind, ["get", "patch", "update"]),
                "log": (kind.kind, ["get"]),
                "exec": ("PodExecOptions", ["create", "get"]),
            }[sub]
            resources.append(
                {
                    "name": f"{kind.plural}/{sub}",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": sub_kind,
                    "verbs": verbs,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }

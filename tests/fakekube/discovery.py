"""What discovery answers: the API groups and the resources of each."""

from __future__ import annotations

from typing import Any

from .resources import ResourceKind, StoreError

Obj = dict[str, Any]

# Verbs each resource lists (what a real server lists; not all are served here).
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_SUBRESOURCES = {  # subresource -> its kind (None: the resource's own) and verbs
    "status": (None, ["get", "patch", "update"]),
    "log": (None, ["get"]),
    "exec": ("PodExecOptions", ["create", "get"]),
}


def not_found(message: str = "the server could not find the requested resource") -> StoreError:
    return StoreError(404, "NotFound", message)


def discovery(kinds: list[ResourceKind], parts: list[str], address: str) -> Obj:
    """The discovery document at ``/api``, ``/api/v1``, ``/apis``, ``/apis/G``, ``/apis/G/V``."""
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if parts[0] == "api":
        if parts[1] != "v1":
            raise not_found()
        return _resource_list("", "v1", kinds)
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        if kind.group and kind.version not in groups.setdefault(kind.group, []):
            groups[kind.group].append(kind.version)

    def group_obj(name: str) -> Obj:
        versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]]
        return {"name": name, "versions": versions, "preferredVersion": versions[0]}

    if len(parts) == 1:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [*map(group_obj, groups)]}
    if parts[1] not in groups or (parts[2:] and parts[2] not in groups[parts[1]]):
        raise not_found()
    if len(parts) == 2:
        return {"kind": "APIGroup", "apiVersion": "v1", **group_obj(parts[1])}
    return _resource_list(parts[1], parts[2], kinds)


def _resource_list(group: str, version: str, kinds: list[ResourceKind]) -> Obj:
    resources: list[Obj] = []
    for kind in kinds:
        if (kind.group, kind.version) != (group, version):
            continue
        entry: Obj = {"name": kind.plural, "singularName": kind.singular, "kind": kind.kind,
                      "namespaced": kind.namespaced, "verbs": _VERBS}  # fmt: skip
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        resources.append(entry)
        for sub in kind.subresources:
            sub_kind, verbs = _SUBRESOURCES[sub]
            resources.append({"name": f"{kind.plural}/{sub}", "singularName": "",
                              "namespaced": kind.namespaced, "kind": sub_kind or kind.kind,
                              "verbs": verbs})  # fmt: skip
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }

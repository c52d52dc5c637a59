"""RBAC as a user whose Roles grant only some namespaces sees it: ``store.access =
NamespaceAccess("alice", {"default"})``. Every answer of ``fakekube.api`` asks it first, so the
HTTP server and the in-memory port refuse alike, in the real server's words (apiserver's
``forbiddenMessage``):

    trainjobs.trainer.kubeflow.org is forbidden: User "alice" cannot list resource "trainjobs"
    in API group "trainer.kubeflow.org" at the cluster scope

A request at the cluster scope for a namespaced kind (a list or watch of all namespaces) or in
another namespace is refused; cluster-scoped kinds (namespaces, CRDs, ClusterTrainingRuntimes)
stay readable, as the aggregated ``view`` ClusterRoles make them on most clusters; discovery is
always allowed.
"""

from __future__ import annotations

from collections.abc import Iterable

from .resources import ResourceKind, StoreError

__all__ = ["NamespaceAccess", "forbidden"]


def forbidden(
    user: str,
    verb: str,
    kind: ResourceKind,
    namespace: str | None,
    name: str | None = None,
    subresource: str | None = None,
) -> StoreError:
    """The 403 the real server answers when RBAC allows none of this."""
    resource = f"{kind.plural}/{subresource}" if subresource else kind.plural
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    what = f'{kind.resource} "{name}"' if name else kind.resource
    details = kind.details(name or "")
    if not name:
        del details["name"]
    return StoreError(
        403,
        "Forbidden",
        f'{what} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group '
        f'"{kind.group}" {scope}',
        details,
    )


class NamespaceAccess:
    """RBAC that lets ``user`` do anything in ``namespaces`` and nothing namespaced elsewhere."""

    def __init__(self, user: str, namespaces: Iterable[str]) -> None:
        self.user = user
        self.namespaces = frozenset(namespaces)

    def check(
        self,
        verb: str,
        kind: ResourceKind,
        namespace: str | None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> None:
        """StoreError 403 unless this request is allowed."""
        if not kind.namespaced or namespace in self.namespaces:
            return
        raise forbidden(self.user, verb, kind, namespace, name, subresource)

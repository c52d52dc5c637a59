"""RBAC as a user whose Roles grant only some namespaces sees it: ``store.access =
NamespaceAccess("alice", {"default"})``. The HTTP server and the port fake ask it
(``Objects.authorize``) before every answer, so they refuse alike, in the real server's words
(apiserver's ``forbiddenMessage``):

    trainjobs.trainer.kubeflow.org is forbidden: User "alice" cannot list resource "trainjobs"
    in API group "trainer.kubeflow.org" at the cluster scope

A request at the cluster scope for a namespaced kind (a list or watch of all namespaces) or in
another namespace is refused; cluster-scoped kinds (namespaces, CRDs, ClusterTrainingRuntimes)
stay readable, as the aggregated ``view`` ClusterRoles make them on most clusters; discovery is
always allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .resources import ResourceKind, StoreError

__all__ = ["Attempt", "NamespaceAccess", "forbidden"]


@dataclass(frozen=True)
class Attempt:
    """What a request tries, as the authorizer sees it."""

    verb: str  # get, list, watch, create, patch, delete
    kind: ResourceKind
    namespace: str | None  # None: at the cluster scope
    name: str | None = None
    subresource: str | None = None  # log, exec


def forbidden(user: str, attempt: Attempt) -> StoreError:
    """The 403 the real server answers when RBAC allows none of this."""
    kind = attempt.kind
    resource = f"{kind.plural}/{attempt.subresource}" if attempt.subresource else kind.plural
    where = (
        f'in the namespace "{attempt.namespace}"' if attempt.namespace else "at the cluster scope"
    )
    what = f'{kind.resource} "{attempt.name}"' if attempt.name else kind.resource
    details = kind.details(attempt.name or "")
    if not attempt.name:
        del details["name"]
    return StoreError(
        403,
        "Forbidden",
        f'{what} is forbidden: User "{user}" cannot {attempt.verb} resource "{resource}" in API '
        f'group "{kind.group}" {where}',
        details,
    )


class NamespaceAccess:
    """RBAC that lets ``user`` do anything in ``namespaces`` and nothing namespaced elsewhere."""

    def __init__(self, user: str, namespaces: Iterable[str]) -> None:
        self.user = user
        self.namespaces = frozenset(namespaces)

    def check(self, attempt: Attempt) -> None:
        """StoreError 403 unless ``attempt`` is allowed."""
        if attempt.kind.namespaced and attempt.namespace not in self.namespaces:
            raise forbidden(self.user, attempt)

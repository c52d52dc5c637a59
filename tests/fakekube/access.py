"""RBAC as a user whose Roles grant only some namespaces sees it: ``store.access =
NamespaceAccess("alice", {"default"})``, asked (``Objects.authorize``) before every answer of the
HTTP server and the port fake alike, refusing in apiserver's words (``forbiddenMessage``). A
namespaced kind at the cluster scope or in another namespace is refused; cluster-scoped kinds
stay readable, as the aggregated ``view`` ClusterRoles make them on most clusters; discovery is
always allowed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .resources import ResourceKind, StoreError


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
    ns = attempt.namespace
    where = f'in the namespace "{ns}"' if ns else "at the cluster scope"
    what = f'{kind.resource} "{attempt.name}"' if attempt.name else kind.resource
    details = kind.details(attempt.name or "")
    if not attempt.name:
        del details["name"]
    message = f'{what} is forbidden: User "{user}" cannot {attempt.verb} resource "{resource}"'
    return StoreError(403, "Forbidden", f'{message} in API group "{kind.group}" {where}', details)


class NamespaceAccess:
    """RBAC that lets ``user`` do anything in ``namespaces`` and nothing namespaced elsewhere."""

    def __init__(self, user: str, namespaces: Iterable[str]) -> None:
        self.user = user
        self.namespaces = frozenset(namespaces)

    def check(self, attempt: Attempt) -> None:
        """StoreError 403 unless ``attempt`` is allowed."""
        if attempt.kind.namespaced and attempt.namespace not in self.namespaces:
            raise forbidden(self.user, attempt)

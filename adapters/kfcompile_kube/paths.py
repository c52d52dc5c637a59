"""Where a kind's objects are: their URL paths, from the built-in kinds the lifecycle touches, else
API discovery (this process's answer, else the disk's, ``discovery``, else the server's). A path
the disk's discovery gave that the server does not serve (its CRD removed since, or another
cluster on that URL) is forgotten and discovery asked again (``Paths.rediscovering``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar
from urllib.parse import quote, urlsplit

from kfcompile.lifecycle.ports import NotFound, Obj, Ref
from kfcompile_kube import compat
from kfcompile_kube.answers import BadAnswer, bad, field
from kfcompile_kube.discovery import DiskDiscovery
from kfcompile_kube.errors import Unserved
from kfcompile_kube.transport import Transport

# Built-in kinds the lifecycle touches: (plural, namespaced), so their paths need no discovery
# round trip. Whether events.k8s.io/v1 is served (since Kubernetes 1.19) is its list's answer: a
# 404 there is the lifecycle's cue to read core/v1 (``served`` still asks discovery).
BUILT_IN: Final[dict[tuple[str, str], tuple[str, bool]]] = {
    ("v1", "Pod"): ("pods", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Event"): ("events", True),
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("events.k8s.io/v1", "Event"): ("events", True),
}

T = TypeVar("T")
Resources = dict[str, tuple[str, bool]]  # kind -> (plural, namespaced)


class Paths:
    """The paths of kinds on the server ``transport`` sends to. ``cache_discovery``: discovery
    documents are kept on disk for the next process, as kubectl keeps them."""

    def __init__(self, transport: Transport, *, cache_discovery: bool = False) -> None:
        self._transport = transport
        self._discovered: dict[str, Resources] = {}
        self._from_disk: set[str] = set()  # the api versions _discovered holds from the disk
        # The cache's key: the server without credentials or query, and its CA (a re-created
        # cluster on the same URL has a new one).
        where = f"{transport.server}{urlsplit(transport.host).path}"
        anchor = compat.trust_anchor(transport.client.configuration)
        self._disk = DiskDiscovery.of(where, anchor) if cache_discovery else None

    def served(self, api_version: str, kind: str) -> bool:
        if api_version == "v1" and (api_version, kind) in BUILT_IN:
            return True
        return self._discover(api_version, kind) is not None  # a built-in group too

    def collection(
        self, api_version: str, kind: str, namespace: str | None, *, for_object: bool = False
    ) -> str:
        """The path of ``kind``'s objects in ``namespace`` (all namespaces: ``None``);
        ``for_object``: a namespaced kind's object needs its namespace."""
        resource = BUILT_IN.get((api_version, kind)) or self._discover(api_version, kind)
        if resource is None:
            raise not_served(api_version, kind)
        plural, namespaced = resource
        if not namespaced:
            return f"{base(api_version)}/{plural}"
        if namespace is None:
            if for_object:
                raise ValueError(f"{kind} is namespaced: the object needs a namespace")
            return f"{base(api_version)}/{plural}"  # across all namespaces
        return f"{base(api_version)}/namespaces/{segment(namespace)}/{plural}"

    def object(self, ref: Ref) -> str:
        path = self.collection(ref.api_version, ref.kind, ref.namespace, for_object=True)
        return f"{path}/{segment(ref.name)}"

    def rediscovering(self, ref: Ref, send: Callable[[], T]) -> T:
        """``send()``, a request to the path of ``ref``'s kind. If its 404 says that path, which
        the disk's discovery gave, is not served (its CRD removed, or another cluster on that
        URL), that discovery is forgotten and the server asked: ``send()`` once more when that
        gives another path (a kind no longer served: the ``NotFound`` an uncached one gets)."""
        try:
            return send()
        except Unserved:
            if ref.api_version not in self._from_disk:
                raise
            before = self._discovered.get(ref.api_version, {}).get(ref.kind)
            self._forget(ref.api_version)
            now = self._discover(ref.api_version, ref.kind)
            if now == before:
                raise
            if now is None:
                raise not_served(ref.api_version, ref.kind) from None
        return send()

    def forget_group(self, group: str) -> None:
        """What the disk said of ``group``'s versions (its CRD is gone: so are its kinds)."""
        for api_version in [v for v in self._from_disk if v.partition("/")[0] == group]:
            self._forget(api_version)

    def _discover(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """What discovery says of ``kind`` in ``api_version``: this process's answer, else the
        disk's, else the server's; a kind the disk's lacks may have come since, so the server is
        asked then."""
        resources = self._discovered.get(api_version)
        if resources is None and (resources := self._cached(api_version)) is not None:
            self._discovered[api_version] = resources
            self._from_disk.add(api_version)
        if resources is None or (kind not in resources and api_version in self._from_disk):
            resources = self._ask(api_version)
        return None if resources is None else resources.get(kind)

    def _forget(self, api_version: str) -> None:
        """What the disk said of ``api_version``, here and there."""
        self._from_disk.discard(api_version)
        self._discovered.pop(api_version, None)
        if self._disk is not None:
            self._disk.forget(api_version)

    def _cached(self, api_version: str) -> Resources | None:
        doc = None if self._disk is None else self._disk.read(api_version)
        try:
            return None if doc is None else _resources(doc)
        except BadAnswer:
            return None  # not what the server wrote: it is asked instead

    def _ask(self, api_version: str) -> Resources | None:
        self._from_disk.discard(api_version)
        try:
            doc = self._transport.json("GET", base(api_version))
            resources = _resources(doc)
        except NotFound:
            self._discovered.pop(api_version, None)
            return None  # not cached: the CRD may be installed later
        except BadAnswer as e:
            raise bad(f"discovery of {api_version}: {e.message}") from None
        self._discovered[api_version] = resources
        if self._disk is not None:
            self._disk.write(api_version, doc)
        return resources


def not_served(api_version: str, kind: str) -> NotFound:
    return NotFound(404, "NotFound", f"the server does not serve {kind} in {api_version} (no CRD?)")


def _resources(doc: Obj) -> Resources:
    """A discovery document's kinds, subresources left out."""
    found: Resources = {}
    for i, r in enumerate(field(doc, "resources", list) or []):
        where = f"resources[{i}]."
        if not isinstance(r, dict):
            raise bad(f"resources[{i}] is not a JSON object")
        name, kind = field(r, "name", str, where), field(r, "kind", str, where)
        if name is None or kind is None:
            raise bad(f"{where}name and kind are needed")
        if "/" not in name:  # subresources such as trainjobs/status
            found[kind] = (name, field(r, "namespaced", bool, where) or False)
    return found


def base(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def segment(name: str) -> str:
    """``name`` as one segment of a path."""
    return quote(name, safe="")


def pod_path(namespace: str, pod: str, subresource: str) -> str:
    """The path of a pod's ``subresource`` (``log``, ``exec``)."""
    return f"/api/v1/namespaces/{segment(namespace)}/pods/{segment(pod)}/{subresource}"


def selectors(label_selector: str, field_selector: str) -> list[tuple[str, str]]:
    """The query selecting objects by labels and fields."""
    query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query

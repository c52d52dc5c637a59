"""The port's calls on objects (``served``, ``get``, ``create``, ``patch``, ``delete``, ``list``):
one request each, its answer a JSON object checked for shape, objects exactly as the server sent
them."""

from __future__ import annotations

from typing import Final

from kfcompile.lifecycle.ports import NotFound, Obj, Page, Ref
from kfcompile_kube.answers import LIST_LIMIT, field, k8s_object
from kfcompile_kube.paths import Paths, selectors
from kfcompile_kube.transport import Transport, redacting

_CRD: Final = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


class Objects:
    """``served``, ``get``, ``create``, ``patch``, ``delete`` and ``list`` of ``ports.Cluster``
    (a part of ``KubeCluster``)."""

    _transport: Transport
    _paths: Paths

    @redacting
    def served(self, api_version: str, kind: str) -> bool:
        return self._paths.served(api_version, kind)

    @redacting
    def get(self, ref: Ref) -> Obj:
        try:
            return k8s_object(
                self._paths.rediscovering(
                    ref, lambda: self._transport.json("GET", self._paths.object(ref))
                )
            )
        except NotFound:
            if (ref.api_version, ref.kind) == _CRD:  # the kinds it defined are gone with it
                self._paths.forget_group(ref.name.partition(".")[2])
            raise

    @redacting
    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        namespace = (obj.get("metadata") or {}).get("namespace")
        ref = Ref(obj["apiVersion"], obj["kind"], namespace, "")
        query = [("fieldValidation", "Strict"), *([("dryRun", "All")] if dry_run else [])]

        def send() -> Obj:
            path = self._paths.collection(ref.api_version, ref.kind, namespace, for_object=True)
            return self._transport.json("POST", path, query=query, body=obj)

        return k8s_object(self._paths.rediscovering(ref, send))

    @redacting
    def patch(self, ref: Ref, patch: Obj) -> Obj:
        def send() -> Obj:
            merge = "application/merge-patch+json"
            path = self._paths.object(ref)
            return self._transport.json("PATCH", path, body=patch, content_type=merge)

        return k8s_object(self._paths.rediscovering(ref, send))

    @redacting
    def delete(self, ref: Ref, propagation: str = "Foreground", *, uid: str | None = None) -> None:
        options: dict[str, object] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        self._paths.rediscovering(
            ref, lambda: self._transport.json("DELETE", self._paths.object(ref), body=options)
        )

    @redacting
    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 500,
        continue_token: str | None = None,
    ) -> Page:
        query = [*selectors(label_selector, field_selector), ("limit", str(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        body = self._paths.rediscovering(
            Ref(api_version, kind, namespace, ""),
            lambda: self._transport.json(
                "GET", self._paths.collection(api_version, kind, namespace), query=query,
                limit=LIST_LIMIT,
            ),
        )  # fmt: skip
        items = field(body, "items", list) or []
        for i, item in enumerate(items):  # list items come without apiVersion/kind
            k8s_object(item, f"items[{i}].")
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        meta = field(body, "metadata", dict) or {}
        version = field(meta, "resourceVersion", str, "metadata.") or ""
        token = field(meta, "continue", str, "metadata.") or None
        remaining = field(meta, "remainingItemCount", int, "metadata.")
        return Page(items, version, token, remaining)

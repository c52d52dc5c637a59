"""``validate --cluster``: the CRDs a cluster serves, read once per kind, and the target it
runs. Imported only with ``--cluster`` (it connects through the adapter)."""

from __future__ import annotations

import argparse

from kfcompile import lifecycle
from kfcompile.cli.common import Failed
from kfcompile.cli.context import Context, cluster_errors, target_for
from kfcompile.kinds import KINDS, Kind
from kfcompile.lifecycle import ClusterError
from kfcompile.lifecycle.cluster_target import crd_name, unreadable
from kfcompile.lifecycle.ports import ApiError, Obj


class ServedCRDs:
    """``validate --cluster``: the CRDs the cluster serves, each read once, and the target it
    runs."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.ctx = Context(args)
        self._crds: dict[str, Obj | None] = {}

    def target(self, requested: str | None) -> str:
        with cluster_errors():
            return target_for(self.ctx, requested).target

    def problems(self, objects: list[Obj]) -> list[str]:
        """What in ``objects`` the served CRDs refuse, one line each."""
        found = []
        for obj in objects:
            kind = KINDS.get(str(obj.get("kind")))
            if kind is None:
                continue  # core companions (ConfigMap, Secret) have no CRD
            crd = self._crd(kind)
            name = crd_name(kind)
            if crd is None:
                found.append(
                    f"{kind.name} is not served by this cluster (no CRD {name}): {kind.install}"
                )
                continue
            per = f" (per the CRD {name} the cluster serves)"
            found += [line + per for line in lifecycle.cluster_target.crd_problems(obj, crd)]
        return found

    def _crd(self, kind: Kind) -> Obj | None:
        if kind.name not in self._crds:
            try:
                self._crds[kind.name] = lifecycle.served_crd(self.ctx.session, kind)
            except ApiError as exc:
                raise Failed("kfcompile", [unreadable(f"CRD {crd_name(kind)}", exc)]) from None
            except ClusterError as exc:
                raise Failed("kfcompile", str(exc).splitlines()) from None
        return self._crds[kind.name]

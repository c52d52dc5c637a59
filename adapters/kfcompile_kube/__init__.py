"""kfcompile's cluster ports (``kfcompile.lifecycle.ports``) implemented with the official
``kubernetes`` client, and the session that joins them to the local ones (``kfcompile_local``).

>>> session, connection = kfcompile_kube.session()  # kubeconfig or in-cluster, as kubectl would
>>> lifecycle.status(session, lifecycle.locate(session, connection.namespace, "demo"))
"""

from __future__ import annotations

from kfcompile_kube.cluster import KubeCluster
from kfcompile_kube.config import ConfigError, Connection, connect
from kfcompile_kube.wiring import session

__all__ = [
    "ConfigError",
    "Connection",
    "KubeCluster",
    "connect",
    "session",
]

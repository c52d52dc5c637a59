"""kfcompile's ports (``kfcompile.ports``) implemented with the official ``kubernetes`` client.

>>> conn = connect()  # kubeconfig or in-cluster, as kubectl would
>>> cluster = KubeCluster(conn.api_client)
"""

from __future__ import annotations

from kfcompile_kube.cluster import KubeCluster
from kfcompile_kube.config import ConfigError, Connection, connect
from kfcompile_kube.fanout import Threads
from kfcompile_kube.local import SystemClock, TarFiles

__all__ = [
    "ConfigError",
    "Connection",
    "KubeCluster",
    "SystemClock",
    "TarFiles",
    "Threads",
    "connect",
]

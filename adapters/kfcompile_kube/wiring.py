"""The composition root: the one place the ports are wired into a lifecycle ``Session``."""

from __future__ import annotations

import random
from collections.abc import Callable

from kfcompile.lifecycle import Session
from kfcompile.lifecycle.ports import ApiError
from kfcompile_kube.cluster import KubeCluster
from kfcompile_kube.config import Connection, connect
from kfcompile_kube.exec_credential import EXEC_TIMEOUT
from kfcompile_kube.transport import REQUEST_TIMEOUT
from kfcompile_local import SystemClock


def session(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    request_timeout: float | None = REQUEST_TIMEOUT,
    exec_timeout: float = EXEC_TIMEOUT,
    retry_for: float = 60.0,
    on_retry: Callable[[str, ApiError], None] | None = None,
    cache_discovery: bool = False,
) -> tuple[Session, Connection]:
    """A session on the cluster kubectl would use (``connect``'s arguments; raises
    ``ConfigError``), with the real clock and random backoff jitter; and its ``Connection``
    (the context's namespace; ``close()`` it when done). ``cache_discovery``: keep the API's
    discovery on disk, as kubectl does (``KubeCluster``)."""
    connection = connect(
        kubeconfig, context, request_timeout=request_timeout, exec_timeout=exec_timeout
    )
    cluster = KubeCluster(
        connection.api_client,
        request_timeout=connection.request_timeout,
        cache_discovery=cache_discovery,
    )
    wired = Session(
        cluster, SystemClock(), jitter=random.random, retry_for=retry_for, on_retry=on_retry
    )
    return wired, connection

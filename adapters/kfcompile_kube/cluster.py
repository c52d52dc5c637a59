"""``kfcompile.lifecycle.ports.Cluster`` over the official client: ``KubeCluster``, made of one part
per family of the port's calls, each in its module (``objects``, ``watch``, ``logs``,
``podexec``), all sending through one ``transport`` and finding kinds' paths through one
``paths``. Retrying, waiting and ordering are the lifecycle's business, not the adapter's."""

from __future__ import annotations

from kfcompile_kube import compat
from kfcompile_kube.logs import Logs
from kfcompile_kube.objects import Objects
from kfcompile_kube.paths import Paths
from kfcompile_kube.podexec import PodExec
from kfcompile_kube.transport import REQUEST_TIMEOUT, Transport
from kfcompile_kube.watch import Watch
from kfcompile_local import Threads


# The parts last to first: so the documentation lists the calls in the port's order.
class KubeCluster(PodExec, Logs, Watch, Objects, Threads):
    """The Kubernetes API as ``kfcompile.lifecycle.ports.Cluster``, and as ``Merge``
    (``fanout``: its followed logs read at once, one thread each, cut when the reader stops).

    ``request_timeout`` (kubectl's ``--request-timeout``; ``None``: no limit) bounds each
    request as a whole (``deadline``): connecting (the TCP connect never longer than
    ``connect_timeout`` either), TLS, the answer's headers and its body; a server that does not
    answer in full in time is ``Transient``. Past its answer's start, a watch may stay quiet for
    its ``timeout_seconds`` plus a margin, a followed log as long as the container runs, and
    ``exec`` runs for ``exec_timeout`` in all. Every answer that is not a stream is bounded in
    size and checked for shape (``answers``). ``cache_discovery``: discovery documents are
    kept on disk for the next process, as kubectl keeps them (``discovery``).
    """

    def __init__(
        self,
        api_client: compat.Client,
        *,
        connect_timeout: float = 5.0,
        request_timeout: float | None = REQUEST_TIMEOUT,
        exec_timeout: float = 600.0,
        cache_discovery: bool = False,
    ) -> None:
        self._transport = Transport(
            api_client,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            exec_timeout=exec_timeout,
        )
        self._paths = Paths(self._transport, cache_discovery=cache_discovery)

"""The port's ``pod_log``: a container's log, line by line, each line bounded (``lines``)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from kfcompile_kube import compat
from kfcompile_kube.lines import log_lines
from kfcompile_kube.paths import pod_path
from kfcompile_kube.transport import Transport, redacting_stream
from kfcompile_local.fanout import cut_on_stop


class Logs:
    """``pod_log`` of ``ports.Cluster`` (a part of ``KubeCluster``). A followed log may stay
    quiet as long as its container runs."""

    _transport: Transport

    @redacting_stream
    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        query: list[tuple[str, str]] = []
        if container is not None:
            query.append(("container", container))
        if follow:
            query.append(("follow", "true"))
        if since_seconds is not None:
            query.append(("sinceSeconds", str(since_seconds)))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        if timestamps:
            query.append(("timestamps", "true"))
        # A followed training log may stay quiet for hours (its answer starts with its first
        # line): no read timeout then, nor a deadline past its connection's.
        read_timeout = None if follow else self._transport.request_timeout
        response = self._transport.stream(
            "GET",
            pod_path(namespace, pod, "log"),
            query=query,
            accept="*/*",
            read_timeout=read_timeout,
            answer_bounded=not follow,
        )
        with cut_on_stop(partial(compat.cut, response)):
            for line in log_lines(self._transport.chunks(response, read_timeout)):
                yield line.decode("utf-8", "replace")

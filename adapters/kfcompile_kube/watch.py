"""The port's ``watch``: a kind's changes after a resourceVersion, one event a line of a stream
that stays open for the watch's ``timeoutSeconds``; each line bounded (``lines``), each event
checked for shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial

from kfcompile.lifecycle.ports import ApiError, Obj, Ref, Transient, WatchEvent
from kfcompile_kube import compat
from kfcompile_kube.answers import bad, field, k8s_object
from kfcompile_kube.errors import status_error
from kfcompile_kube.lines import event_lines
from kfcompile_kube.paths import Paths, selectors
from kfcompile_kube.transport import Transport, redacting_stream
from kfcompile_local.fanout import cut_on_stop

MARGIN = 15.0  # seconds past a watch's timeoutSeconds before we call the server hung


class Watch:
    """``watch`` of ``ports.Cluster`` (a part of ``KubeCluster``). Past its answer's start, a
    watch may stay quiet for its ``timeout_seconds`` plus a margin."""

    _transport: Transport
    _paths: Paths

    @redacting_stream
    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
            *selectors(label_selector, field_selector),
        ]
        # The server starts its answer at once: that is bounded as any request is, the events
        # then by the watch's own timeout (the server ends the stream then).
        response = self._paths.rediscovering(
            Ref(api_version, kind, namespace, ""),
            lambda: self._transport.stream(
                "GET",
                self._paths.collection(api_version, kind, namespace),
                query=query,
                read_timeout=self._transport.request_timeout,
            ),
        )
        chunks = self._transport.chunks(response, timeout_seconds + MARGIN)
        # A watch of every job may stay quiet for minutes: a merge that stops cuts it.
        with cut_on_stop(partial(compat.cut, response)):
            yield from _events(chunks, api_version, kind)


def _too_long(limit: int) -> ApiError:
    return ApiError(
        0,
        "EventTooLong",
        f"the watch sent a line longer than {limit} bytes: no Kubernetes object is that large",
    )


def _events(chunks: Iterator[bytes], api_version: str, kind: str) -> Iterator[WatchEvent]:
    for line in event_lines(chunks, _too_long):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            # Half an event: the stream was cut mid-line.
            raise Transient(0, "StreamError", "watch stream ended inside an event") from None
        type_, obj = _event(event)
        if type_ == "ERROR":
            code = field(obj, "code", int, "the ERROR event's object.")
            raise status_error(code or 500, obj)
        if type_ != "BOOKMARK":
            k8s_object(obj, "the event's object.")
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
        yield WatchEvent(type_, obj)


def _event(event: object) -> tuple[str, Obj]:
    """A watch event's type and object, as ``WatchEvent`` holds them."""
    if not isinstance(event, dict):
        raise bad("a watch event is not a JSON object")
    type_, obj = field(event, "type", str, "the event's "), event.get("object")
    if type_ is None or not isinstance(obj, dict):
        raise bad("a watch event has no type or no object")
    return type_, obj

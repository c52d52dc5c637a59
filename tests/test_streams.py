"""The adapter's streams (pod logs, watches) cut into lines in linear time and bounded memory,
through the real client over real HTTP to the fake API server; and the line splitting itself,
fed a stream far longer than any bound, for the memory it holds (issue 15, item 17)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakekube import FakeKube
from test_adapter_kube import NS, cluster_for, running_pod

from kfcompile.lifecycle.ports import ApiError
from kfcompile_kube import KubeCluster
from kfcompile_kube.lines import EVENT_LINE, LOG_LINE, cut_note, log_lines

MiB = 1024 * 1024


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeKube, KubeCluster]]:
    """The fake API server with namespace ``NS``, and the adapter talking to it."""
    with FakeKube() as fake:
        fake.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield fake, cluster_for(fake, tmp_path, request_timeout=5.0)


def progress(steps: int) -> str:
    """What tqdm writes: each drawing of the bar after a carriage return, no newline."""
    return "".join(f"\r{i:>3}%|{'#' * (i % 50):<50}| {i}/{steps}" for i in range(steps))


def test_a_progress_bar_without_newline_is_one_bounded_line(
    served: tuple[FakeKube, KubeCluster],
) -> None:
    fake, kube = served
    running_pod(fake, "p")
    bar = progress(60_000)  # 4.5 MB, no newline
    fake.store.append_log(NS, "p", "main", f"epoch 1{bar}\ndone\n")
    lines = list(kube.pod_log(NS, "p"))
    # The part before the first \r, and the last drawing: what a terminal shows at the end.
    assert lines == ["epoch 1\r" + bar.rsplit("\r", 1)[1], "done"]


def test_a_line_past_the_bound_is_cut_and_says_so(served: tuple[FakeKube, KubeCluster]) -> None:
    fake, kube = served
    running_pod(fake, "p")
    fake.store.append_log(NS, "p", "main", "x" * (3 * MiB) + "\nnext\n")
    first, second = kube.pod_log(NS, "p")
    assert first == "x" * LOG_LINE + cut_note(3 * MiB - LOG_LINE).decode()
    assert "more bytes of this line not shown" in first and second == "next"


def test_a_watch_line_past_any_object_is_an_error(served: tuple[FakeKube, KubeCluster]) -> None:
    fake, kube = served
    page = kube.list("v1", "ConfigMap", NS)
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": NS}}
    fake.store.create({**big, "data": {"blob": "x" * (EVENT_LINE + 1)}})
    events = kube.watch(
        "v1", "ConfigMap", NS, resource_version=page.resource_version, timeout_seconds=5
    )
    with pytest.raises(ApiError, match=f"the watch sent a line longer than {EVENT_LINE} bytes"):
        next(events)


def test_a_carriage_return_stream_is_read_in_bounded_memory() -> None:
    """32 MB of progress bar with no newline, as 64 KiB chunks arrive: what the splitting holds
    at any time stays within a few bounds (it used to hold the whole line, and split all of it
    again for every chunk: quadratic time)."""
    chunk = progress(1000).encode()[: 64 * 1024]
    count = 32 * MiB // len(chunk)

    def stream() -> Iterator[bytes]:
        for _ in range(count):
            yield bytes(chunk)  # a new chunk each time, as a socket gives them

    tracemalloc.start()
    try:
        lines = list(log_lines(stream()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [line] = lines
    assert len(line) <= 2 * LOG_LINE + 1
    assert peak < 8 * LOG_LINE, peak  # first part, drawing, last drawn, a chunk and its parts

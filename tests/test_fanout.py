"""kfcompile_local.fanout: the ``Merge`` port with threads, over real HTTP against the fake API
server. Whoever stops reading stops the threads: closing the merged lines cuts the streams they
are blocked in, wakes those asleep, and returns once every thread has ended."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube import FakeKube
from fakekube.cluster import NAMESPACE, SCENARIO_ANNOTATION, LocalCluster

from kfcompile import lifecycle, structure
from kfcompile.lifecycle.ports import Clock
from kfcompile_kube import KubeCluster, connect
from kfcompile_local import SystemClock

NS = "team-a"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as kube:
        kube.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield kube


@pytest.fixture
def kube(fake: FakeKube, tmp_path: Path) -> KubeCluster:
    return KubeCluster(connect(str(fake.kubeconfig(tmp_path / "kubeconfig"))).api_client)


def quiet_pod(fake: FakeKube, name: str) -> None:
    """A running pod that has logged one line and then says nothing."""
    fake.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        }
    )
    running = {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
    fake.store.patch_status(
        "v1", "Pod", NS, name, {"phase": "Running", "containerStatuses": [running]}
    )
    fake.store.append_log(NS, name, "main", f"{name} started\n")


def merge_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kfcompile-merge-")]


class Followed:
    """Streams of followed logs, each kept to check that it was closed."""

    def __init__(self, kube: KubeCluster) -> None:
        self.kube = kube
        self.opened: list[Generator[str, None, None]] = []

    def log(self, pod: str, clock: Clock) -> Iterator[str]:
        stream = self.kube.pod_log(NS, pod, follow=True)
        assert isinstance(stream, Generator)
        self.opened.append(stream)
        return stream


def test_closing_cuts_streams_blocked_in_a_read(fake: FakeKube, kube: KubeCluster) -> None:
    for name in ("a", "b"):
        quiet_pod(fake, name)
    followed = Followed(kube)
    streams = {name: (lambda clock, n=name: followed.log(n, clock)) for name in ("a", "b")}
    merged = kube.merge(streams, SystemClock())
    assert sorted([next(merged), next(merged)]) == [("a", "a started"), ("b", "b started")]
    assert len(merge_threads()) == 2  # both now blocked on streams that stay quiet
    merged.close()
    assert merge_threads() == []
    assert len(followed.opened) == 2
    assert all(inspect.getgeneratorstate(s) == inspect.GEN_CLOSED for s in followed.opened)


def test_a_stream_that_fails_stops_the_others(fake: FakeKube, kube: KubeCluster) -> None:
    quiet_pod(fake, "a")
    followed = Followed(kube)

    def failing(clock: Clock) -> Iterator[str]:
        yield "b started"
        raise ValueError("b broke")

    merged = kube.merge({"a": lambda clock: followed.log("a", clock), "b": failing}, SystemClock())
    with pytest.raises(ValueError, match="b broke"):
        list(merged)
    assert merge_threads() == []
    assert [inspect.getgeneratorstate(s) for s in followed.opened] == [inspect.GEN_CLOSED]


def test_closing_wakes_a_stream_asleep(kube: KubeCluster) -> None:
    def patient(clock: Clock) -> Iterator[str]:
        yield "first"
        clock.sleep(3600)  # the test's time limit is far shorter: only a wake-up ends this
        yield "an hour later"

    merged = kube.merge({0: patient}, SystemClock())
    assert next(merged) == (0, "first")
    merged.close()
    assert merge_threads() == []


def test_a_followed_job_closed_part_way_leaves_no_thread() -> None:
    spec = structure(
        {
            "name": "demo",
            "image": "python:3.11-slim",
            "command": ["python", "-c", "print('hi')"],
            "num_nodes": 2,
            "annotations": {SCENARIO_ANNOTATION: "hang"},  # runs, logs, then says nothing
        }
    )
    with LocalCluster(schema_check.require_shared()) as local:
        session = local.session()
        ref = lifecycle.submit(session, spec, "trainjob/v2.3", namespace=NAMESPACE, environ={}).ref
        lifecycle.wait(session, ref, "running", timeout=10)
        before = set(threading.enumerate())
        lines = lifecycle.logs(session, ref, follow=True)
        ranks: set[Any] = set()
        while ranks != {0, 1}:
            ranks.add(next(lines).rank)
        lines.close()
        left = set(threading.enumerate()) - before
        assert {t for t in left if not t.name.startswith("fakekube")} == set()  # (the server's)

"""The job lifecycle end to end: through the real adapter, over real HTTP, against the fake API
server, each job's life scripted (``fakekube.jobs``). What only the wire can show: the requests
the adapter sends, streams cut on the wire, exec over websockets, a server that answers too
late. The lifecycle's behaviour itself is proven at the port (test_lifecycle.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube.cluster import CLAIM, NAMESPACE, LocalCluster, members
from test_lifecycle import ENV, TRAINJOB, spec, with_companions

from kfcompile import lifecycle
from kfcompile.lifecycle.ports import Ref
from kfcompile.spec.model import JobSpec
from kfcompile.status import State
from kfcompile_local import TarFiles


@pytest.fixture
def local() -> Iterator[LocalCluster]:
    with LocalCluster(schema_check.require_shared()) as cluster:
        yield cluster


def submit(local: LocalCluster, job: JobSpec, target: str = "trainjob/v2.3") -> Ref:
    done = lifecycle.submit(local.session(), job, target, namespace=NAMESPACE, environ=ENV)
    return done.ref


def _sync_pods(local: LocalCluster) -> list[dict[str, Any]]:
    local.store.collect()
    return local.store.list("v1", "Pod", NAMESPACE, "kfcompile.dev/role=sync")


def test_submit_sends_companions_first_with_strict_validation(local: LocalCluster) -> None:
    submit(local, with_companions())
    posts = local.kube.requests.matching("POST")
    assert [r.path.rsplit("/", 1)[-1] for r in posts] == ["configmaps", "secrets", "trainjobs"]
    assert all(r.query.get("fieldValidation") == "Strict" for r in posts)
    assert [r.status for r in posts] == [201, 201, 201]
    patches = local.kube.requests.matching("PATCH")  # the job then owns its companions
    assert [r.path.rsplit("/", 1)[-1] for r in patches] == ["demo-script", "demo-env"]


def test_wait_watches_each_change_as_it_happens() -> None:
    with LocalCluster(schema_check.require_shared(), auto=False) as local:
        ref = submit(local, spec())
        local.run_once_watched("trainjobs")
        seen: list[State] = []
        obs = lifecycle.wait(
            local.session(),
            ref,
            "done",
            timeout=30,
            on_change=lambda o, _: seen.append(o.state.state),
        )
        watches = local.kube.requests.matching("GET", "/trainjobs", watch=True)
    assert obs.state.state is State.SUCCEEDED and obs.state.reason == "Complete"
    assert seen[-1] is State.SUCCEEDED and len(seen) >= 2
    assert watches and watches[0].query["allowWatchBookmarks"] == "true"


@pytest.mark.parametrize("fault", [{"status": 410}, {"drop_after": 1}])
def test_wait_survives_a_watch_cut_on_the_wire(fault: dict[str, Any]) -> None:
    with LocalCluster(schema_check.require_shared(), auto=False) as local:
        ref = submit(local, spec())
        local.kube.faults.add("GET", "/trainjobs", watch=True, **fault)
        local.run_once_watched("trainjobs")  # not done before the wait watches, however slow
        obs = lifecycle.wait(local.session(), ref, "done", timeout=30)
        assert obs.state.state is State.SUCCEEDED
        assert local.kube.faults.fired, "the fault never hit a request"


def test_follow_resumes_a_log_cut_on_the_wire_without_repeating(local: LocalCluster) -> None:
    ref = submit(local, spec(num_nodes=1))
    local.kube.faults.add("GET", "/log", drop_after=1, times=2)
    followed = [x.text for x in lifecycle.logs(local.session(), ref, rank=0, follow=True)]
    full = [x.text for x in lifecycle.logs(local.session(), ref, rank=0)]
    assert followed == full and full
    assert local.kube.faults.fired


def test_sync_up_and_down_over_exec(local: LocalCluster, tmp_path: Path) -> None:
    up = tmp_path / "up"
    (up / "a").mkdir(parents=True)
    (up / "a" / "weights.bin").write_bytes(bytes(range(256)) * 1000)
    (up / "README").write_text("hello\n")
    session = local.session()
    sent = lifecycle.sync_up(
        session, TarFiles(), namespace=NAMESPACE, pvc=CLAIM, path="/runs/1", local=str(up)
    )
    assert sent == lifecycle.Synced(files=2, size=256_000 + 6)
    assert members(local.sent["/mnt/pvc/runs/1"])["README"] == b"hello\n"  # as the pod got it
    down = tmp_path / "dn"
    got = lifecycle.sync_down(
        session, TarFiles(), namespace=NAMESPACE, pvc=CLAIM, path="/runs/1", local=str(down)
    )
    assert got == sent and (down / "a" / "weights.bin").read_bytes() == bytes(range(256)) * 1000
    assert len(local.kube.requests.matching(verb="exec")) == 3  # mkdir, tar -x, tar -c
    assert _sync_pods(local) == []


def test_a_read_answered_too_late_is_retried(local: LocalCluster) -> None:
    ref = submit(local, spec())
    lifecycle.wait(local.session(), ref, "done", timeout=10)
    local.kube.faults.add("GET", "/pods", hang=1.0)  # longer than the read timeout below
    obs = lifecycle.status(local.session(request_timeout=0.5), ref)
    assert obs.state.state is State.SUCCEEDED
    assert local.kube.faults.fired


def test_a_create_whose_answer_was_lost_is_not_made_twice(
    local: LocalCluster, tmp_path: Path
) -> None:
    """The server creates, the client times out and retries: one job, one helper pod."""
    local.kube.faults.add("POST", "/trainjobs", hang=1.0)
    ref = lifecycle.submit(
        local.session(request_timeout=0.5), spec(), "trainjob/v2.3", namespace=NAMESPACE, environ={}
    ).ref
    assert len(local.store.list(TRAINJOB, "TrainJob", NAMESPACE)) == 1
    assert local.kube.requests.count("POST", "/trainjobs") == 2
    session = local.session(request_timeout=0.5)
    lifecycle.cancel(session, ref, wait_gone=True, timeout=10)  # the API has answered it
    local.kube.faults.add("POST", "/pods", hang=1.0)
    (tmp_path / "f").write_text("x")
    lifecycle.sync_up(
        session,
        TarFiles(),
        namespace=NAMESPACE,
        pvc=CLAIM,
        path="/",
        local=str(tmp_path),
    )
    assert local.kube.requests.count("POST", "/pods") == 2 and _sync_pods(local) == []

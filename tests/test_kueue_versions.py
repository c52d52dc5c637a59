"""Kueue as each of its releases serves it (``kueue.x-k8s.io``: v1beta2 only from v0.20, both
v1beta2 and v1beta1 from v0.15 to v0.19, v1beta1 only in v0.13 and v0.14): kfcompile reads every
Kueue object through the version the cluster serves (``lifecycle.kueue.served_api``), and says
which where it matters. The test cluster serves each as configured (``fakekube.kueue``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, SERVES, PortCluster, TwoClusters, live
from test_lifecycle import spec, submit
from test_multikueue import run, spec_file, submitted

from kfcompile.lifecycle import PreflightFailed
from kfcompile.lifecycle.kueue import served_api
from kfcompile.lifecycle.multikueue import check_names, multikueue_check
from kfcompile.testing import courses
from kfcompile.testing.kueue import CHECK, CLUSTER_QUEUE, V1BETA1, V1BETA2

ALL = pytest.mark.parametrize("serves", list(SERVES))
NEWEST = {"v1beta2": V1BETA2, "both": V1BETA2, "v1beta1": V1BETA1}


@pytest.fixture
def shared() -> Path:
    return schema_check.require_shared()


def queued_cluster(shared: Path, serves: str | None) -> PortCluster:
    cluster = PortCluster(shared, kueue=serves)
    cluster.store.on_create.append(lambda job: live(cluster.fake, job, "succeeds"))
    cluster.store.on_patch.append(courses.suspends(cluster.fake))
    return cluster


@ALL
def test_the_newest_version_served_is_read(shared: Path, serves: str) -> None:
    with PortCluster(shared, kueue=serves) as cluster:
        session = cluster.session()
        for version in ("v1beta2", "v1beta1"):
            served = session.cluster.served(f"kueue.x-k8s.io/{version}", "Workload")
            assert served is (version in SERVES[serves])
        assert served_api(session, "LocalQueue") == NEWEST[serves]


def test_a_clusterqueues_checks_are_read_in_either_versions_shape() -> None:
    """v1beta1's ``spec.admissionChecks``, and the strategy both versions have (the shape
    v1beta2 stores: a v1beta1 read of a ClusterQueue written through v1beta2 has only it)."""
    assert check_names({"spec": {"admissionChecks": [CHECK]}}) == [CHECK]
    strategy = {"admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]}}
    assert check_names({"spec": strategy}) == [CHECK]


@ALL
def test_submit_of_a_queued_job_reads_the_localqueue_through_the_served_version(
    shared: Path, serves: str
) -> None:
    with queued_cluster(shared, serves) as local:
        ref = submit(local, spec(queue=QUEUE))
        assert ref.name == "demo"
        [read] = [c for c in local.calls.matching("get") if c.kind == "LocalQueue"]
        assert read.api_version == NEWEST[serves]
        with pytest.raises(PreflightFailed) as info:
            submit(local, spec("other", queue="no-such-queue"))
    [problem] = info.value.problems
    assert problem.startswith(
        f"Kueue LocalQueue no-such-queue does not exist in namespace {NAMESPACE} "
        f"(read through {NEWEST[serves]}): create it"
    )


def test_a_cluster_without_kueue_is_said_with_the_versions_kfcompile_reads(shared: Path) -> None:
    with queued_cluster(shared, None) as local, pytest.raises(PreflightFailed) as info:
        submit(local, spec(queue=QUEUE))
    [problem] = info.value.problems
    assert problem == (
        f"the job names Kueue queue {QUEUE} but Kueue is not installed (LocalQueue: this "
        "cluster serves neither kueue.x-k8s.io/v1beta2 (Kueue v0.15 on) nor "
        "kueue.x-k8s.io/v1beta1 (Kueue v0.13 to v0.19)): install Kueue or remove `queue`"
    )


@ALL
def test_whether_a_queue_dispatches_is_read_through_the_served_version(
    shared: Path, serves: str
) -> None:
    with TwoClusters(shared, kueue=serves) as clusters:
        session = clusters.manager.session()
        assert multikueue_check(session, NAMESPACE, QUEUE) == CHECK
        cq = clusters.manager.store.get(NEWEST[serves], "ClusterQueue", None, CLUSTER_QUEUE)
        assert cq is not None


@ALL
def test_multikueue_is_followed_through_the_served_version(
    shared: Path,
    serves: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with TwoClusters(shared, kueue=serves) as clusters:
        clusters.wire(monkeypatch)
        monkeypatch.setenv("KFCOMPILE_CLUSTERS", str(clusters.clusters_file))
        _followed(clusters, serves, capsys, tmp_path)


def _followed(
    clusters: TwoClusters, serves: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    submitted(clusters, capsys, tmp_path)
    code, out, err = run(clusters, capsys, "status", "demo", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["multikueue"]["cluster"] == "worker1"
    assert doc["multikueue"]["kueueApi"] == NEWEST[serves]
    assert doc["nodesTotal"] == 2 and len(doc["nodes"]) == 2  # the worker's pods
    code, out, err = run(clusters, capsys, "logs", "demo", "--rank", "1")
    assert code == 0 and "rank 1 step 1" in out, err
    code, _, err = run(clusters, capsys, "submit", str(spec_file(tmp_path, "hang")))
    assert code == 0, err  # unchanged: the LocalQueue read again

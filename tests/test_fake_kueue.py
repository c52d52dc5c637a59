"""The test cluster's Kueue behaves as KUBEFLOW.md records the real Kueue v0.19.2 (beside the
real Trainer v2.3.0): its webhook, the Workload, the full Update on admission, eviction, and
MultiKueue's nomination and mirror. These pin the simulation to the record: where they
disagree, the simulation is wrong."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
from fakekube import jobs
from fakekube import kueue as fake_kueue
from fakekube.cluster import NAMESPACE, QUEUE, PortCluster, live
from fakekube.multikueue import TwoClusters, mirror_of
from test_lifecycle import TRAINJOB, spec, submit

from kfcompile import lifecycle
from kfcompile.status import State


@pytest.fixture
def cluster() -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as local:
        local.fake.on_create.append(lambda job: live(local.fake, job, "hang", admits=math.inf))
        local.fake.on_patch.append(jobs.suspends(local.fake))
        yield local


def _job(local: PortCluster) -> dict[str, object]:
    job = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert job is not None
    return job


def test_on_create_the_job_is_suspended_and_kueues_patch_appended(cluster: PortCluster) -> None:
    submit(cluster, spec(queue=QUEUE, node_selector={"pool": "a"}))
    job = _job(cluster)
    assert job["spec"]["suspend"] is True and job["metadata"]["generation"] == 1
    managers = [p["manager"] for p in job["spec"]["runtimePatches"]]
    assert managers == ["kfcompile.dev/kfcompile", "kueue.x-k8s.io/manager"]
    assert job["spec"]["runtimePatches"][1] == {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {"template": {"spec": {}}},
    }
    # a job without a queue: not Kueue's
    submit(cluster, spec("free"))
    free = cluster.store.get(TRAINJOB, "TrainJob", NAMESPACE, "free")
    assert free is not None and "runtimePatches" not in free["spec"]


def test_the_workload_waits_as_kueues_does(cluster: PortCluster) -> None:
    submit(cluster, spec(queue=QUEUE))
    job = _job(cluster)
    [workload] = cluster.store.list(fake_kueue.V1BETA2, "Workload", NAMESPACE)
    meta = workload["metadata"]
    assert re.fullmatch(r"trainjob-demo-[0-9a-f]{5}", meta["name"])
    assert meta["labels"] == {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]}
    assert meta["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    [owner] = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "TrainJob",
        job["metadata"]["uid"],
        True,
    )
    [cond] = workload["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("QuotaReserved", "False", "Pending")
    assert cond["message"].startswith("couldn't assign flavors to pod set node: insufficient")


def test_admission_is_a_full_update_then_unsuspends(cluster: PortCluster) -> None:
    submit(cluster, spec(queue=QUEUE))
    job = fake_kueue.admit(cluster.store, _job(cluster))
    assert job["spec"]["suspend"] is False and job["metadata"]["generation"] == 3
    kueues = job["spec"]["runtimePatches"][-1]["trainingRuntimeSpec"]["template"]["spec"]
    [rjob] = kueues["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["metadata"]
    assert pod["labels"] == {
        "kueue.x-k8s.io/cluster-queue-name": "cluster-queue",
        "kueue.x-k8s.io/local-queue-name": QUEUE,
        "kueue.x-k8s.io/podset": "node",
    }
    [workload] = cluster.store.list(fake_kueue.V1BETA2, "Workload", NAMESPACE)
    assert pod["annotations"] == {"kueue.x-k8s.io/workload": workload["metadata"]["name"]}
    assert {c["type"]: c["status"] for c in workload["status"]["conditions"]} == {
        "QuotaReserved": "True",
        "Admitted": "True",
    }


def test_eviction_says_evicted_and_suspends_again(cluster: PortCluster) -> None:
    ref = submit(cluster, spec(queue=QUEUE))
    job = fake_kueue.admit(cluster.store, _job(cluster))
    jobs.start(cluster.fake, NAMESPACE, "demo")
    fake_kueue.evict(cluster.store, job)
    [workload] = cluster.store.list(fake_kueue.V1BETA2, "Workload", NAMESPACE)
    conditions = {c["type"]: (c["status"], c["reason"]) for c in workload["status"]["conditions"]}
    assert conditions["Evicted"] == ("True", "Preempted")
    assert conditions["QuotaReserved"] == ("False", "Pending")
    assert _job(cluster)["spec"]["suspend"] is True
    assert jobs.pods(cluster.fake, NAMESPACE, "demo") == []  # the Trainer stopped it
    obs = lifecycle.status(cluster.session(), ref)
    assert (obs.state.state, obs.state.reason) == (State.SUSPENDED, "Evicted")


def test_a_resubmit_of_a_queued_job_is_unchanged_with_kueues_patch_there(
    cluster: PortCluster,
) -> None:
    job = spec(queue=QUEUE)
    submit(cluster, job)
    done = lifecycle.submit(
        cluster.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={}
    )
    assert not done.created and not done.repaired


def test_the_workload_goes_with_its_job(cluster: PortCluster) -> None:
    ref = submit(cluster, spec(queue=QUEUE))
    lifecycle.cancel(cluster.session(), ref, wait_gone=True, timeout=30)
    cluster.settle()  # deleted in the background: the collector, then Kueue, let it go
    assert cluster.store.list(fake_kueue.V1BETA2, "Workload", NAMESPACE) == []


def test_multikueue_nominates_then_mirrors(tmp_path: Path) -> None:
    with TwoClusters(schema_check.require_shared()) as clusters:
        manager = clusters.manager
        lifecycle.submit(
            manager.session(), spec(queue=QUEUE), "trainjob/v2.3", namespace=NAMESPACE, environ={}
        )
        [workload] = manager.store.list(fake_kueue.V1BETA2, "Workload", NAMESPACE)
        assert workload["status"]["nominatedClusterNames"] == [TwoClusters.WORKER]
        assert "clusterName" not in workload["status"]
        job = manager.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
        assert job is not None and job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        mirror = mirror_of(job, workload["metadata"]["name"])
        assert "kueue.x-k8s.io/manager" not in str(mirror["spec"])

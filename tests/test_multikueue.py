"""Jobs Kueue's MultiKueue dispatches, followed to the worker cluster that runs them: the CLI,
in-process, on two port-level fakes (a manager and a worker, a kubeconfig context each) on one
fake clock, with MultiKueue between them (``kfcompile.testing.kueue.dispatches``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import schema_check
import yaml
from fakekube.cluster import NAMESPACE, QUEUE, TwoClusters
from test_cli_cluster import write_spec

from kfcompile import lifecycle
from kfcompile.cli import main
from kfcompile.lifecycle.deleting import Remaining
from kfcompile.lifecycle.kueue import JOB_UID_LABEL, pick_workload
from kfcompile.lifecycle.multikueue import Workers, check_names, read_workload
from kfcompile.testing.kueue import MULTIKUEUE, PREBUILT
from kfcompile.testing.kueue import V1BETA2 as KUEUE

TRAINJOB = "trainer.kubeflow.org/v1alpha1"


@pytest.fixture
def clusters(monkeypatch: pytest.MonkeyPatch) -> Iterator[TwoClusters]:
    with TwoClusters(schema_check.require_shared()) as two:
        monkeypatch.setenv("KFCOMPILE_CLUSTERS", str(two.clusters_file))
        two.wire(monkeypatch)
        yield two


def spec_file(tmp_path: Path, scenario: str = "succeeds") -> Path:
    return write_spec(tmp_path, scenario, queue=QUEUE)


def run(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    code = main([*args, "--context", "manager"])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_fake_dispatches_mirrors_and_copies_status_back(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(clusters, capsys, "submit", str(spec_file(tmp_path)))
    assert code == 0, err
    clusters.settle()
    job = clusters.manager.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert job is not None and job["spec"]["managedBy"] == MULTIKUEUE
    (workload,) = clusters.manager.store.list(KUEUE, "Workload", NAMESPACE)
    assert workload["status"]["clusterName"] == TwoClusters.WORKER
    assert "nominatedClusterNames" not in workload["status"]
    assert workload["status"]["admissionChecks"][0]["message"] == (
        'The workload was admitted on "worker1"'
    )
    name = workload["metadata"]["name"]
    assert re.fullmatch(r"trainjob-demo-[0-9a-f]{5}", name)
    assert workload["metadata"]["labels"] == {JOB_UID_LABEL: job["metadata"]["uid"]}
    assert workload["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    [owner] = workload["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == (job["metadata"]["uid"], True)
    mirror = clusters.worker.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert mirror is not None
    assert mirror["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert mirror["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == name
    assert mirror["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    # Kueue's own runtimePatches entry: the manager's removed, the worker's webhook's appended
    managers = [p["manager"] for p in mirror["spec"]["runtimePatches"]]
    assert managers.count("kueue.x-k8s.io/manager") == 1
    assert clusters.manager.store.list("v1", "Pod", NAMESPACE) == []
    assert len(clusters.worker.store.list("v1", "Pod", NAMESPACE)) == 2
    conditions = {c["type"] for c in job["status"]["conditions"]}
    assert "Complete" in conditions


def submitted(clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(clusters, capsys, "submit", str(spec_file(tmp_path, "hang")))
    assert code == 0, err
    clusters.settle()


def test_status_shows_the_worker_its_pods_and_events(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    submitted(clusters, capsys, tmp_path)
    code, out, err = run(clusters, capsys, "status", "demo")
    assert code == 0, err
    assert "TrainJob demo in namespace default: RUNNING" in out
    assert "cluster: dispatched to worker cluster worker1 (Workload trainjob-demo-" in out
    assert "admission check multikueue: Ready" in out
    assert "nodes: 2/2 ready" in out
    assert "demo-node-0-1-" in out  # a pod on the worker, listed by rank
    assert "events on worker cluster worker1:" in out and "Created pod: demo-node-0-0-" in out
    code, out, err = run(clusters, capsys, "list")
    assert code == 0 and out.splitlines()[0].split()[-2:] == ["CREATED", "CLUSTER"], err
    assert out.splitlines()[1].endswith(" worker1")
    code, out, err = run(clusters, capsys, "status", "demo", "-o", "json")
    doc = json.loads(out)
    assert doc["multikueue"]["cluster"] == "worker1" and doc["nodesReady"] == 2


def test_logs_come_from_the_worker_and_cancel_waits_for_the_mirror(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    submitted(clusters, capsys, tmp_path)
    code, out, err = run(clusters, capsys, "logs", "demo", "--rank", "1")
    assert code == 0, err
    assert "rank 1 step 1" in out
    assert "dispatched to worker cluster worker1" in err
    code, out, err = run(clusters, capsys, "cancel", "demo", "--wait", "--timeout", "30s")
    assert code == 0, err
    assert "its mirror on worker cluster worker1 is gone, with its pods" in out
    assert clusters.worker.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    assert clusters.worker.store.list("v1", "Pod", NAMESPACE) == []
    assert clusters.manager.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []


def test_cancel_wait_waits_on_the_worker_only_for_the_mirror_of_this_job(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A job of that name on the worker whose prebuilt Workload is another (not this job's
    mirror) is neither waited on nor touched by kfcompile."""
    submitted(clusters, capsys, tmp_path)
    other = {"annotations": {PREBUILT: "someone-elses"}, "finalizers": ["example.com/keep"]}
    clusters.worker.store.change(TRAINJOB, "TrainJob", NAMESPACE, "demo", {"metadata": other})
    code, _, err = run(clusters, capsys, "cancel", "demo", "--wait", "--timeout", "3s")
    assert code == 0, err
    assert (
        "kfcompile: not checked on a worker cluster: TrainJob demo in namespace default on "
        "worker cluster worker1 is not MultiKueue's mirror of this job (not labelled "
        "kueue.x-k8s.io/multikueue-origin with Workload trainjob-demo-"
    ) in err
    assert "left alone, not read" in err
    writes = ("create", "patch", "delete")
    assert [c.method for c in clusters.worker.calls if c.method in writes] == []


# --- the library's cancel on a manager (issue 28, item 1) ----------------------------------------


def _worker_objects(clusters: TwoClusters) -> list[str]:
    """What is on the worker of job demo: its mirror, JobSet, Job and pods."""
    found = [
        *clusters.worker.store.list(TRAINJOB, "TrainJob", NAMESPACE),
        *clusters.worker.store.list("jobset.x-k8s.io/v1alpha2", "JobSet", NAMESPACE),
        *clusters.worker.store.list("batch/v1", "Job", NAMESPACE),
        *clusters.worker.store.list("v1", "Pod", NAMESPACE),
    ]
    return [f"{o['kind']} {o['metadata']['name']}" for o in found]


def test_the_library_cancel_on_a_manager_waits_for_the_mirror_and_its_pods(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``lifecycle.cancel`` on the manager, given the mapped workers and how to reach one:
    it returns once the mirror, its JobSet, Job and pods are gone from the worker too, within
    the one timeout, deleting nothing there (Kueue deletes the mirror)."""
    submitted(clusters, capsys, tmp_path)
    assert "TrainJob demo" in _worker_objects(clusters) and len(_worker_objects(clusters)) == 5
    reached: list[tuple[str, str]] = []

    def reach(cluster: str, context: str) -> lifecycle.Session:
        reached.append((cluster, context))
        return clusters.worker.session()

    told: list[Remaining] = []
    manager = clusters.manager.session()
    ref = lifecycle.locate(manager, NAMESPACE, "demo")
    start = clusters.clock.monotonic()
    done = lifecycle.cancel(
        manager,
        ref,
        wait_gone=True,
        timeout=30,
        on_change=lambda left, _: told.append(left),
        workers=Workers("manager", {TwoClusters.WORKER: "ctx-w1"}),
        reach=reach,
    )
    assert reached == [(TwoClusters.WORKER, "ctx-w1")]
    assert done.existed and done.all_gone and done.mirror is not None
    assert (done.mirror.cluster, done.mirror.problem) == (TwoClusters.WORKER, "")
    assert _worker_objects(clusters) == []  # gone by the time it returned
    assert clusters.manager.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    assert clusters.clock.monotonic() - start < 30
    assert any(left.cluster == TwoClusters.WORKER for left in told), told  # waited there
    writes = ("create", "patch", "delete")
    assert [c.method for c in clusters.worker.calls if c.method in writes] == []


def test_the_library_cancel_waits_for_the_worker_within_its_one_timeout(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A pod of the mirror stays Terminating (its node's kubelet does not answer): the cancel
    raises ``StillDeleting`` naming it on the worker, once its timeout is up."""
    submitted(clusters, capsys, tmp_path)
    [pod, _] = clusters.worker.store.list("v1", "Pod", NAMESPACE)
    clusters.worker.store.kubelets_down.add(pod["spec"]["nodeName"])
    manager = clusters.manager.session()
    ref = lifecycle.locate(manager, NAMESPACE, "demo")
    start = clusters.clock.monotonic()
    with pytest.raises(lifecycle.StillDeleting) as info:
        lifecycle.cancel(
            manager,
            ref,
            wait_gone=True,
            timeout=10,
            workers=Workers("manager", {TwoClusters.WORKER: "w"}),
            reach=lambda cluster, context: clusters.worker.session(),
        )
    assert 10 <= clusters.clock.monotonic() - start < 15  # one timeout for both clusters
    said = str(info.value)
    assert said.startswith(
        "TrainJob demo in namespace default is gone from this manager cluster, but its mirror "
        "on worker cluster worker1 is not, after 1"
    )
    assert f"still there: pod {pod['metadata']['name']} (Terminating on node " in said
    assert info.value.left is not None and info.value.left.cluster == TwoClusters.WORKER


def test_the_library_cancel_never_reads_a_worker_not_mapped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Workload names worker1, which the workers given do not map: the job is deleted on the
    manager, nothing asked of the worker, and the result says why it was not waited on."""
    with TwoClusters(schema_check.require_shared(), mapped=False) as clusters:
        clusters.wire(monkeypatch)
        submitted(clusters, capsys, tmp_path)
        clusters.worker.calls.clear()
        reached: list[str] = []

        def reach(cluster: str, context: str) -> lifecycle.Session:
            reached.append(cluster)
            return clusters.worker.session()

        manager = clusters.manager.session()
        ref = lifecycle.locate(manager, NAMESPACE, "demo")
        done = lifecycle.cancel(
            manager,
            ref,
            wait_gone=True,
            timeout=30,
            workers=Workers("manager", {"worker2": "ctx-w2"}, file="clusters.yaml"),
            reach=reach,
        )
        assert reached == [] and list(clusters.worker.calls) == []
        assert done.existed and not done.all_gone and done.mirror is not None
        assert done.mirror.problem == (
            "TrainJob demo in namespace default runs on worker cluster worker1, which is not "
            "mapped to a kubeconfig context for manager context manager: map it with "
            "managers.manager.worker1: CONTEXT in clusters.yaml; a cluster not mapped is never "
            "read"
        )
        assert clusters.manager.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []


def test_a_worker_not_mapped_is_named_with_how_to_map_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TwoClusters(schema_check.require_shared(), worker_context=None) as clusters:
        clusters.wire(monkeypatch)
        monkeypatch.setenv("KFCOMPILE_CLUSTERS", str(clusters.clusters_file))
        submitted(clusters, capsys, tmp_path)
        code, out, err = run(clusters, capsys, "logs", "demo")
        assert code == 1 and "Traceback" not in err
        line = (
            "kfcompile: TrainJob demo in namespace default runs on worker cluster worker1, which "
            "is not mapped to a kubeconfig context for manager context manager: map it with "
            f"--cluster worker1=CONTEXT or managers.manager.worker1: CONTEXT in "
            f"{clusters.clusters_file}; a cluster not mapped is never read\n"
        )
        assert line in err
        code, out, err = run(clusters, capsys, "status", "demo")
        assert code == 0 and "worker: TrainJob demo in namespace default runs on" in out
        code, out, err = run(clusters, capsys, "cancel", "demo", "--wait", "--timeout", "30s")
        assert code == 0 and "kfcompile: not checked on a worker cluster: TrainJob demo" in err
        assert clusters.manager.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []


def test_a_worker_mapped_to_a_context_the_kubeconfig_lacks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TwoClusters(schema_check.require_shared(), worker_context=None) as clusters:
        clusters.wire(monkeypatch)
        submitted(clusters, capsys, tmp_path)
        code, _, err = run(clusters, capsys, "logs", "demo", "--cluster", "worker1=ctx-gone")
    assert code == 1 and "Traceback" not in err
    assert (
        "runs on worker cluster worker1, mapped to kubeconfig context 'ctx-gone', which cannot "
        "be reached: kubeconfig "
    ) in err
    assert "no context 'ctx-gone' (available: manager)" in err


def test_a_worker_context_given_with_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TwoClusters(
        schema_check.require_shared(), worker_context="ctx-w1", mapped=False
    ) as clusters:
        clusters.wire(monkeypatch)
        submitted(clusters, capsys, tmp_path)
        code, out, err = run(clusters, capsys, "logs", "demo", "--cluster", "worker1=ctx-w1")
        assert code == 0 and "rank 0 step 1" in out, err


def test_a_context_named_like_the_worker_is_never_followed_unless_mapped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manager's Workload names worker1 and the kubeconfig has a context worker1 (another
    team's cluster, say), but nothing maps it for this manager: not one request reaches it,
    whatever the command; mapped in the file, the same commands follow the job there."""
    with TwoClusters(schema_check.require_shared(), mapped=False) as clusters:
        clusters.wire(monkeypatch)
        monkeypatch.setenv("KFCOMPILE_CLUSTERS", str(clusters.clusters_file))
        submitted(clusters, capsys, tmp_path)
        clusters.worker.calls.clear()
        for command in (
            ["status", "demo"],
            ["status", "demo", "-o", "json"],
            ["events", "demo"],
            ["logs", "demo", "--all-ranks"],
            ["logs", "demo", "--follow"],
            ["wait", "demo", "--until", "running", "--timeout", "5s"],
        ):
            code, out, err = run(clusters, capsys, *command)
            assert "Traceback" not in err and "is not mapped" in out + err, command
        code, out, err = run(clusters, capsys, "list")
        assert code == 0 and " worker1" in out, err  # where it runs, from the manager alone
        code, out, err = run(clusters, capsys, "cancel", "demo", "--wait", "--timeout", "5s")
        assert code == 0 and "not checked on a worker cluster" in err and "is not mapped" in err
        assert list(clusters.worker.calls) == []


def test_submit_says_the_queue_dispatches_and_wait_names_the_worker(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(clusters, capsys, "submit", str(spec_file(tmp_path)))
    assert code == 0, err
    assert f"queue {QUEUE} is a MultiKueue queue (its ClusterQueue has the AdmissionCheck " in err
    clusters.settle()
    code, out, err = run(clusters, capsys, "wait", "demo", "--timeout", "30s")
    assert code == 0 and "SUCCEEDED (Complete)" in out, err
    assert "demo: dispatched to worker cluster worker1" in err
    code, out, err = run(clusters, capsys, "events", "demo")
    assert code == 0, err
    assert "[worker1] " in out and "Created pod: demo-node-0-1-" in out  # the worker's events
    code, out, err = run(clusters, capsys, "logs", "demo", "--follow", "--all-ranks")
    assert code == 0 and "[rank 1] rank 1 step 1" in out, err


def _check(state: str, message: str = "") -> dict[str, str]:
    return {"name": "mk", "state": state, "message": message, "lastTransitionTime": "t"}


RESERVED = 'The workload got reservation on "worker2"'


@pytest.mark.parametrize(
    ("status", "cluster", "checks"),
    [
        ({}, None, ()),
        # Kueue v0.13+: status.clusterName
        (
            {"clusterName": "worker1", "admissionChecks": [_check("Ready")]},
            "worker1",
            ("mk: Ready",),
        ),
        # before v0.13: only the MultiKueue check's message names the worker
        ({"admissionChecks": [_check("Ready", RESERVED)]}, "worker2", (f"mk: Ready: {RESERVED}",)),
        ({"admissionChecks": [_check("Pending", RESERVED)]}, None, (f"mk: Pending: {RESERVED}",)),
        ({"nominatedClusterNames": ["worker1", "worker2"]}, None, ()),
        # hostile shapes read as nothing
        ({"clusterName": 7, "admissionChecks": "x"}, None, ()),
        ({"admissionChecks": [None, {"state": "Ready"}]}, None, ()),
        # a name no MultiKueueCluster can have is not taken for a kubeconfig context's
        ({"clusterName": "Prod Admin\x1b[2J"}, None, ()),
        (
            {"admissionChecks": [_check("Ready", 'got reservation on "../x"\x07')]},
            None,
            ('mk: Ready: got reservation on "../x"\\x07',),
        ),
    ],
)
def test_read_workload(
    status: dict[str, object], cluster: str | None, checks: tuple[str, ...]
) -> None:
    found = read_workload({"metadata": {"name": "wl"}, "status": status})
    assert found.cluster == cluster and tuple(str(c) for c in found.checks) == checks


def test_the_workload_is_found_by_uid_label_then_by_owner() -> None:
    labelled = {"metadata": {"name": "a", "labels": {JOB_UID_LABEL: "u1"}}}
    owned = {"metadata": {"name": "b", "ownerReferences": [{"uid": "u1", "controller": True}]}}
    other = {"metadata": {"name": "c", "ownerReferences": [{"uid": "u1", "controller": False}]}}
    assert pick_workload([owned, labelled], "u1") is labelled
    assert pick_workload([other, owned], "u1") is owned
    assert pick_workload([other], "u1") is None


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ({"admissionChecks": ["mk", 3]}, ["mk"]),
        ({"admissionChecksStrategy": {"admissionChecks": [{"name": "mk"}, {"x": 1}]}}, ["mk"]),
        ({"admissionChecks": "mk"}, []),
    ],
)
def test_check_names(spec: dict[str, object], names: list[str]) -> None:
    assert check_names({"spec": spec}) == names


def test_a_job_not_dispatched_yet_says_so(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(clusters, capsys, "submit", str(spec_file(tmp_path)))
    assert code == 0, err  # no tick yet: Kueue has made no Workload
    code, _, err = run(clusters, capsys, "logs", "demo")
    assert (
        code == 1
        and (  # Kueue made its Workload at once, and nominated the worker
            "demo: not dispatched to a worker cluster yet (nominated: worker1; Workload "
            "trainjob-demo-"
        )
        in err
    )
    assert "; admission check multikueue: Pending)" in err
    code, out, err = run(clusters, capsys, "logs", "demo", "--follow", "--rank", "1")
    assert code == 0 and "rank 1 step 1" in out, err
    assert "demo: dispatched to worker cluster worker1" in err


def test_watch_jobs_over_the_manager_reports_the_dispatch(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    submitted(clusters, capsys, tmp_path)
    session = clusters.manager.session()
    with closing(lifecycle.watch_jobs(session, NAMESPACE)) as events:
        first = [next(events), next(events)]
    assert [(e.ref.name, e.what, e.cluster) for e in first] == [
        ("demo", lifecycle.Happened.LISTED, None),
        ("demo", lifecycle.Happened.DISPATCHED, TwoClusters.WORKER),
    ]


def test_submit_follow_reads_the_logs_on_the_worker(
    clusters: TwoClusters, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(clusters, capsys, "submit", str(spec_file(tmp_path)), "--follow")
    assert code == 0, err
    assert "dispatched to worker cluster worker1" in err
    assert "[rank 0] rank 0 step 1" in out and "SUCCEEDED (Complete)" in out


def test_rbac_says_what_a_manager_and_its_workers_need(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rbac", "-n", "team-a", "--cluster-reads"]) == 0
    out, err = capsys.readouterr()
    docs = list(yaml.safe_load_all(out))
    granted = {(r["resources"][0], tuple(r["verbs"])) for d in docs for r in d["rules"]}
    assert {
        ("workloads", ("list", "watch")),
        ("clusterqueues", ("get",)),
        ("admissionchecks", ("get",)),
    } <= granted
    assert "on each worker cluster, bind the same Role in the same namespace" in err


# --- the launchers against a manager --------------------------------------------------------------


def test_the_torchx_scheduler_on_a_manager_reads_describe_and_logs_on_the_worker(
    clusters: TwoClusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torchx", reason="torchx is not installed (CI's launcher env)")
    from torchx.components import dist
    from torchx.runner import get_runner

    from kfcompile.integrations.torchx import create_scheduler

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBECONFIG", str(clusters.kubeconfig))
    cfg = {"kubeconfig": str(clusters.kubeconfig), "context": "manager", "queue": QUEUE}
    with get_runner() as runner:
        handle = runner.run(dist.ddp(script="train.py", j="2x1"), "kfcompile", cfg=cfg)
        clusters.scenario = "hang"
        clusters.settle()
        lines = list(runner.log_lines(handle, "train", k=1))
    described = create_scheduler("t").describe(handle.rpartition("/")[2])
    assert described is not None
    hosts = [r.hostname for r in described.roles_statuses[0].replicas]
    assert all(h.startswith("train-") for h in hosts), hosts  # the worker's pods, by rank
    assert any("rank 1 step 1" in line for line in lines), lines


def test_the_torchx_scheduler_says_how_to_map_a_worker_not_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torchx", reason="torchx is not installed (CI's launcher env)")
    from torchx.components import dist
    from torchx.runner import get_runner

    from kfcompile.integrations.torchx import SchedulerError

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    with TwoClusters(schema_check.require_shared(), worker_context=None) as clusters:
        clusters.wire(monkeypatch)
        cfg = {"kubeconfig": str(clusters.kubeconfig), "context": "manager", "queue": QUEUE}
        with get_runner() as runner:
            handle = runner.run(dist.ddp(script="train.py", j="1x1"), "kfcompile", cfg=cfg)
            clusters.settle()
            with pytest.raises(SchedulerError) as caught:
                list(runner.log_lines(handle, "train", k=0))
    assert (
        "runs on worker cluster worker1, which is not mapped to a kubeconfig context for manager "
        "context manager: map it with clusters={'worker1': CONTEXT} or "
        "managers.manager.worker1: CONTEXT in "
    ) in str(caught.value)


def _nemo_executor_on(
    clusters: TwoClusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """A ``KfcompileExecutor`` whose kubeconfig's current context is the manager, queueing its
    jobs to the MultiKueue queue."""
    from kfcompile.integrations.nemo_run import KfcompileExecutor

    kubeconfig = json.loads(clusters.kubeconfig.read_text())
    kubeconfig["current-context"] = "manager"
    (tmp_path / "kubeconfig").write_text(json.dumps(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    ex = KfcompileExecutor(
        image="python:3.11",
        num_nodes=2,
        namespace=NAMESPACE,
        labels={"kueue.x-k8s.io/queue-name": QUEUE},  # as a NeMo-Run user queues with Kueue
    )
    ex.assign("exp", str(tmp_path), "train", "train")
    return ex


def test_the_nemo_run_executor_on_a_manager_fetches_the_logs_on_the_worker(
    clusters: TwoClusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("nemo_run", reason="nemo_run is not installed (CI's launcher env)")
    ex = _nemo_executor_on(clusters, tmp_path, monkeypatch)
    name, _ = ex.launch("train", ["python", "/app/train.py"])
    clusters.settle()
    shown = list(ex.fetch_logs(name))
    assert any(line.startswith("rank 0 ") for line in shown), shown
    assert clusters.manager.store.list("v1", "Pod", NAMESPACE) == []  # they are the worker's


def test_the_nemo_run_executor_cancel_on_a_manager_waits_for_the_mirror(
    clusters: TwoClusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cancel(wait=True)`` on the manager is True only once the mirror and its pods are gone
    from the worker the mapping file ($KFCOMPILE_CLUSTERS) maps; while a pod of it stays there
    (its node's kubelet does not answer) it is False."""
    pytest.importorskip("nemo_run", reason="nemo_run is not installed (CI's launcher env)")
    ex = _nemo_executor_on(clusters, tmp_path, monkeypatch)
    clusters.scenario = "hang"
    name, _ = ex.launch("train", ["python", "/app/train.py"])
    clusters.settle()
    assert len(clusters.worker.store.list("v1", "Pod", NAMESPACE)) == 2
    assert ex.cancel(name, wait=True, timeout=30) is True
    assert clusters.worker.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    assert clusters.worker.store.list("v1", "Pod", NAMESPACE) == []
    writes = ("create", "patch", "delete")
    assert [c.method for c in clusters.worker.calls if c.method in writes] == []
    name, _ = ex.launch("train", ["python", "/app/train.py"])  # again, a pod kept on the worker
    clusters.settle()
    [pod, _] = clusters.worker.store.list("v1", "Pod", NAMESPACE)
    clusters.worker.store.kubelets_down.add(pod["spec"]["nodeName"])
    assert ex.cancel(name, wait=True, timeout=5) is False
    assert clusters.manager.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    assert [p["metadata"]["name"] for p in clusters.worker.store.list("v1", "Pod", NAMESPACE)] == [
        pod["metadata"]["name"]
    ]


def test_the_nemo_run_executor_cancel_on_a_manager_never_reads_an_unmapped_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is a context of the kubeconfig, but the mapping file does not map it: the
    job is deleted on the manager, nothing is asked of the worker, and ``cancel(wait=True)``
    is False (its pods there were not seen gone), saying why."""
    pytest.importorskip("nemo_run", reason="nemo_run is not installed (CI's launcher env)")
    from test_nemo_run import warnings_logged  # NeMo-Run takes pytest's caplog off the root

    with TwoClusters(schema_check.require_shared(), mapped=False) as clusters:
        clusters.wire(monkeypatch)
        monkeypatch.setenv("KFCOMPILE_CLUSTERS", str(clusters.clusters_file))
        ex = _nemo_executor_on(clusters, tmp_path, monkeypatch)
        clusters.scenario = "hang"
        name, _ = ex.launch("train", ["python", "/app/train.py"])
        clusters.settle()
        clusters.worker.calls.clear()
        with warnings_logged() as said:
            assert ex.cancel(name, wait=True, timeout=30) is False
        assert list(clusters.worker.calls) == []
        assert clusters.manager.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    [warning] = said
    assert "not checked on a worker cluster: TrainJob " in warning
    assert "which is not mapped to a kubeconfig context for manager context manager" in warning


def test_the_manager_judges_a_dispatched_job_by_the_workers_pods(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's pods cannot be scheduled; its JobSet counts the Job active, none ready, as
    the real one does (observed/trainer-v2.3.0), and Kueue copies that status to the manager's
    job. On the manager, status and wait judge the job by those pods, as on one cluster:
    PENDING (Unschedulable), and wait --until running keeps waiting."""
    shared = schema_check.require_shared()
    with TwoClusters(shared) as clusters:
        clusters.wire(monkeypatch)
        monkeypatch.setenv("KFCOMPILE_CLUSTERS", str(clusters.clusters_file))
        code, _, err = run(clusters, capsys, "submit", str(spec_file(tmp_path, "unschedulable")))
        assert code == 0, err
        clusters.settle()
        active = [{"name": "node", "active": 1, "ready": 0, "succeeded": 0, "failed": 0,
                   "suspended": 0}]  # fmt: skip
        clusters.worker.store.change(
            TRAINJOB, "TrainJob", NAMESPACE, "demo", {"status": {"jobsStatus": active}}
        )
        clusters.settle()
        code, out, err = run(clusters, capsys, "status", "demo")
        assert code == 0, err
        assert out.startswith("TrainJob demo in namespace default: PENDING (Unschedulable) pod ")
        assert "nodes: 0/2 ready" in out
        code, out, err = run(clusters, capsys, "wait", "demo", "--until", "running",
                             "--timeout", "1s")  # fmt: skip
        assert code == 1 and "did not become running within 1s: PENDING (Unschedulable)" in err
        assert "demo: dispatched to worker cluster worker1" in err

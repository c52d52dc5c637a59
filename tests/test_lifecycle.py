"""The job lifecycle (kfcompile.lifecycle) at the Cluster port, against the port-level fake
(``kfcompile.testing``: what the cluster does to a job is scripted, ``courses``) on a fake
clock: what the user sees, and what reached the port (no duplicate jobs, no orphaned companions,
no helper pods left). Nothing here sleeps in real time or depends on thread timing; what only
HTTP can show (the adapter's requests, faults on the wire) is in test_lifecycle_http.py."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from attrs import evolve
from fakekube.cluster import (
    CLAIM,
    NAMESPACE,
    QUEUE,
    SCENARIO_ANNOTATION,
    PortCluster,
    live,
    members,
)

from kfcompile import lifecycle, structure
from kfcompile.lifecycle import (
    MANAGED_BY_LABEL,
    SPEC_HASH,
    JobDeleted,
    JobNotFound,
    NameTaken,
    NoSuchRank,
    PreflightFailed,
    TimedOut,
)
from kfcompile.lifecycle.observe import MAX_RANKS, nodes_total
from kfcompile.lifecycle.pod_logs import POD_WATCH, ranks
from kfcompile.lifecycle.ports import Ref, WatchEvent
from kfcompile.spec.model import JobSpec
from kfcompile.status import State
from kfcompile.testing import courses, fixed_jitter
from kfcompile_local import TarFiles

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
PYTORCHJOB = "kubeflow.org/v1"
ENV = {"HF_TOKEN": "hf_s3cr3t_value"}


# How each job the small fake's tests submit lives: the row of ``cluster.LIVES`` its scenario
# annotation names (``cluster.live``, as over HTTP): its pods run 0.2 s after its create, and it
# succeeds or fails 1 s after, or never ends, or its pods never start; a job with a queue is
# first held by Kueue (``jobs.kueue``).
@pytest.fixture
def local(request: pytest.FixtureRequest) -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as cluster:
        cluster.store.on_create.append(lambda job: live(cluster.fake, job, "succeeds"))
        cluster.store.on_patch.append(courses.suspends(cluster.fake))
        if "helper" in request.fixturenames:
            cluster.store.on_create.append(courses.helpers(cluster.fake))
        yield cluster


@pytest.fixture
def helper() -> None:
    """The sync's helper pods run (``courses.helpers``): for the tests that sync."""


def at(local: PortCluster, seconds: float, action: Callable[[], object]) -> None:
    """Do ``action`` once, at the first tick ``seconds`` of fake time from now."""
    local.fake.at(seconds, action)


def spec(name: str = "demo", **extra: Any) -> JobSpec:
    data = {
        "name": name,
        "image": "python:3.11-slim",
        "command": ["python", "-c", "print('hi')"],
        "num_nodes": 2,
        **extra,
    }
    return structure(data)


def submit(local: PortCluster, job: JobSpec, target: str = "trainjob/v2.3") -> Ref:
    done = lifecycle.submit(local.session(), job, target, namespace=NAMESPACE, environ=ENV)
    return done.ref


def answered(local: PortCluster) -> lifecycle.Session:
    """A session the API has answered already: trouble from now on is that of a server that
    works (before any answer, a call that gets none is not retried)."""
    session = local.session()
    lifecycle.list_jobs(session, NAMESPACE)
    return session


def scenario(name: str) -> dict[str, Any]:
    return {"annotations": {SCENARIO_ANNOTATION: name}}


# --- submit ---------------------------------------------------------------------------------------


def with_companions() -> JobSpec:
    """A job with a script ConfigMap and a Secret to create before it."""
    return spec(
        launcher={"kind": "torchrun", "entrypoint": "train.py"},
        command=(),
        script="print('x')",
        secret_env=["HF_TOKEN"],
    )


def test_submit_creates_companions_first_then_owns_them(local: PortCluster) -> None:
    ref = submit(local, with_companions())
    creates = [c.kind for c in local.calls.matching("create")]
    assert creates == ["ConfigMap", "Secret", "TrainJob"]
    trainjob = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, ref.name)
    assert trainjob is not None
    uid = trainjob["metadata"]["uid"]
    for kind in ("ConfigMap", "Secret"):
        [obj] = local.objects(kind)
        [owner] = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("TrainJob", "demo", uid)
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == "kfcompile"
    [secret] = local.objects("Secret")
    assert secret["data"]["HF_TOKEN"]  # stored (base64) by the server, from our environment
    env = {e["name"]: e for e in trainjob["spec"]["trainer"]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "demo-env", "key": "HF_TOKEN"}
    assert trainjob["metadata"]["annotations"][SPEC_HASH]
    # Garbage collection removes the companions with the job.
    lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=10)
    local.settle()
    assert local.objects("ConfigMap") == [] and local.objects("Secret") == []


def test_submitting_the_same_spec_twice_creates_one_job(local: PortCluster) -> None:
    session = local.session()
    first = lifecycle.submit(session, spec(), "trainjob/v2.3", namespace=NAMESPACE, environ={})
    again = lifecycle.submit(session, spec(), "trainjob/v2.3", namespace=NAMESPACE, environ={})
    assert (first.created, again.created) == (True, False)
    assert local.calls.count("create", "TrainJob") == 1


def test_a_different_job_holding_the_name_is_an_error_and_untouched(local: PortCluster) -> None:
    submit(local, spec())
    before = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    with pytest.raises(NameTaken, match="different job"):
        submit(local, spec(num_nodes=3))
    assert local.calls.count("delete") == 0
    after = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert after is not None and before is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["spec"]["trainer"]["numNodes"] == 2


def test_preflight_names_each_missing_thing_and_creates_nothing(local: PortCluster) -> None:
    local.store.delete(TRAINJOB, "ClusterTrainingRuntime", None, "torch-distributed")
    local.store.delete("v1", "PersistentVolumeClaim", NAMESPACE, CLAIM)
    job = spec(queue="no-such-queue", work_dir={"local": ".", "pvc": CLAIM, "mount_path": "/w"})
    with pytest.raises(PreflightFailed) as info:
        submit(local, job)
    problems = info.value.problems
    assert len(problems) == 3, problems
    assert "ClusterTrainingRuntime torch-distributed does not exist" in problems[0]
    assert "LocalQueue no-such-queue does not exist in namespace default" in problems[1]
    assert f"PersistentVolumeClaim {CLAIM} does not exist" in problems[2]
    assert local.calls.count("create") == 0


def test_preflight_missing_namespace(local: PortCluster) -> None:
    with pytest.raises(PreflightFailed, match="namespace nowhere does not exist"):
        lifecycle.submit(local.session(), spec(), "trainjob/v2.3", namespace="nowhere", environ={})


def test_preflight_missing_crd() -> None:
    shared = schema_check.require_shared()
    with (
        PortCluster(shared, crds=("pytorchjobs-v1.9.4.yaml",)) as local,
        pytest.raises(PreflightFailed, match=r"TrainJob \(trainer.kubeflow.org/v1alpha1\) is not"),
    ):
        submit(local, spec())


def test_a_failure_part_way_rolls_back(local: PortCluster) -> None:
    local.faults.add("create", "TrainJob", status=403)
    job = spec(secret_env=["HF_TOKEN"])
    with pytest.raises(lifecycle.ApiError):
        submit(local, job)
    local.settle()
    assert local.objects("Secret") == []
    assert local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []


@pytest.mark.parametrize(
    "fault", [{"status": 503}, {"status": 429}, {"status": 500}, {"drop": True}]
)
def test_transient_trouble_while_creating_is_retried_once_created(
    local: PortCluster, fault: dict[str, Any]
) -> None:
    local.faults.add("create", "TrainJob", times=2, **fault)
    ref = submit(local, spec())
    assert len(local.store.list(TRAINJOB, "TrainJob", NAMESPACE)) == 1
    assert lifecycle.wait(local.session(), ref, "done", timeout=10).state.state is State.SUCCEEDED


def test_secret_env_missing_from_the_environment(local: PortCluster) -> None:
    with pytest.raises(lifecycle.ClusterError, match="secret_env: OTHER is not set"):
        lifecycle.submit(
            local.session(),
            spec(secret_env=["OTHER"]),
            "trainjob/v2.3",
            namespace=NAMESPACE,
            environ={},
        )
    assert local.calls.count("create") == 0


@pytest.mark.usefixtures("helper")
def test_submit_uploads_the_work_dir_first(local: PortCluster, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "pkg" / "data.bin").write_bytes(bytes(range(256)) * 40)
    job = spec(work_dir={"local": str(tmp_path), "pvc": CLAIM, "mount_path": "/workspace"})
    done = lifecycle.submit(
        local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ={}, files=TarFiles()
    )
    assert done.uploaded == lifecycle.Synced(files=2, size=9 + 256 * 40)
    files = members(local.sent["/mnt/pvc"])  # the stream the helper pod's tar read
    assert files["train.py"] == b"print(1)\n"
    assert files["pkg/data.bin"] == bytes(range(256)) * 40
    creates = [c.kind for c in local.calls.matching("create")]
    assert creates.index("Pod") < creates.index("TrainJob")
    local.settle()
    assert _sync_pods(local) == []


def test_submit_waits_for_the_sync_helper_as_long_as_it_is_told(
    local: PortCluster, tmp_path: Path
) -> None:
    # No ``helper`` fixture: the helper pod never runs.
    job = spec(work_dir={"local": str(tmp_path), "pvc": CLAIM, "mount_path": "/workspace"})
    with pytest.raises(lifecycle.TimedOut, match=r"^sync helper not running after 2s \(--time"):
        lifecycle.submit(
            local.session(),
            job,
            "trainjob/v2.3",
            namespace=NAMESPACE,
            environ={},
            files=TarFiles(),
            sync_timeout=2,
        )
    assert local.clock.monotonic() < 3  # fake seconds: not the helper's default 300
    local.settle()
    assert _sync_pods(local) == [] and local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []


@pytest.mark.parametrize("move", [lifecycle.sync_up, lifecycle.sync_down])
def test_sync_to_a_claim_that_does_not_exist_makes_no_pod(
    local: PortCluster, tmp_path: Path, move: Callable[..., object]
) -> None:
    with pytest.raises(lifecycle.ClusterError) as info:
        move(
            local.session(),
            TarFiles(),
            namespace=NAMESPACE,
            pvc="nope",
            path="/",
            local=str(tmp_path),
        )
    assert str(info.value) == (
        "PersistentVolumeClaim nope does not exist in namespace default: create it, or name "
        "another with --pvc"
    )
    assert local.calls.count("create") == 0 and local.clock.monotonic() == 0


# --- wait and status ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "name", "until", "state", "reason"),
    [
        ("trainjob/v2.3", "succeeds", "done", State.SUCCEEDED, "Complete"),
        ("trainjob/v2.3", "succeeds", "running", State.RUNNING, None),
        ("pytorchjob/v1", "succeeds", "done", State.SUCCEEDED, "Succeeded"),
        ("trainjob/v2.3", "fails", "done", State.FAILED, None),
        ("pytorchjob/v1", "fails", "running", State.RUNNING, None),
        ("trainjob/v2.3", "deadline", "done", State.FAILED, "DeadlineExceeded"),
        ("pytorchjob/v1", "restarts", "done", State.SUCCEEDED, "Succeeded"),
    ],
)
def test_wait_ends_where_the_job_goes(
    target: str, name: str, until: str, state: State, reason: str | None
) -> None:
    with PortCluster(schema_check.require_shared()) as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        ref = submit(local, spec(**scenario(name)), target)
        seen: list[State] = []
        obs = lifecycle.wait(
            local.session(),
            ref,
            until,  # type: ignore[arg-type]
            timeout=30,
            on_change=lambda o, _: seen.append(o.state.state),
        )
    assert obs.state.state is state
    if reason:
        assert obs.state.reason == reason
    assert seen[-1] is state and len(seen) >= 2  # progress was reported on the way


def test_wait_rides_out_kueue_queueing(local: PortCluster) -> None:
    ref = submit(local, spec(queue=QUEUE))
    seen: list[State] = []
    obs = lifecycle.wait(
        local.session(), ref, "done", timeout=10, on_change=lambda o, _: seen.append(o.state.state)
    )
    assert obs.state.state is State.SUCCEEDED
    assert State.SUSPENDED in seen and seen.index(State.SUSPENDED) < seen.index(State.RUNNING)


@pytest.mark.parametrize(
    ("name", "reason", "warning"),
    [
        ("unschedulable", "Unschedulable", "Warning FailedScheduling pod/demo-node-0-"),
        ("image_pull", "ImagePullBackOff", "Warning Failed pod/demo-node-0-"),
    ],
)
def test_a_stuck_job_times_out_saying_why(
    local: PortCluster, name: str, reason: str, warning: str
) -> None:
    ref = submit(local, spec(**scenario(name)))
    with pytest.raises(TimedOut, match=reason) as info:
        lifecycle.wait(local.session(), ref, "running", timeout=1.5)
    assert info.value.last is not None and info.value.last.state.reason == reason
    assert warning in str(info.value)  # the events that say why come with it
    status = lifecycle.status(local.session(), ref)
    assert status.state.reason == reason
    assert any(e.type == "Warning" and e.about.startswith("pod/") for e in status.events)


def test_a_job_deleted_by_someone_else_is_reported(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("hang")))
    at(local, 0.3, lambda: local.store.delete(TRAINJOB, "TrainJob", NAMESPACE, "demo"))
    with pytest.raises(JobDeleted, match="deleted"):
        lifecycle.wait(local.session(), ref, "done", timeout=10)


def test_wait_for_a_job_that_never_existed(local: PortCluster) -> None:
    with pytest.raises(JobNotFound):
        lifecycle.wait(local.session(), Ref(TRAINJOB, "TrainJob", NAMESPACE, "nope"), "done")


@pytest.mark.parametrize(
    "fault",
    [
        {"method": "watch", "status": 410},
        {"method": "watch", "drop_after": 0},
        {"method": "watch", "drop_after": 1},
        {"method": "watch", "status": 500, "times": 3},
        {"method": "list", "status": 429, "times": 2},
        {"method": "list", "status": 503},
        {"method": "list", "drop": True, "times": 2},
    ],
)
def test_wait_survives_api_trouble(local: PortCluster, fault: dict[str, Any]) -> None:
    ref = submit(local, spec(**scenario("succeeds")))
    session = answered(local)
    local.faults.add(path="TrainJob", **fault)
    obs = lifecycle.wait(session, ref, "done", timeout=15)
    assert obs.state.state is State.SUCCEEDED
    assert local.faults.fired, "the fault never hit a call"


def test_watch_resumes_after_history_is_compacted(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("succeeds")))
    local.store.compact()  # any older resourceVersion now answers 410 Gone
    obs = lifecycle.wait(local.session(), ref, "done", timeout=10)
    assert obs.state.state is State.SUCCEEDED


FAILED = {"conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs"}]}


def impostor(job: dict[str, Any], name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    """Another job than ``job``, failed: what a broken or hostile server sends in its place."""
    meta = {**job["metadata"], "name": name, "namespace": namespace, "uid": f"uid-{name}"}
    return {**job, "metadata": meta, "status": FAILED}


class Hostile:
    """A cluster behind a server that sends objects nobody asked for: each list and
    each watch of ``kind`` starts with ``sent`` (events: ``(type, object)``)."""

    def __init__(self, inner: Any, kind: str, sent: list[tuple[str, dict[str, Any]]]) -> None:
        self.inner, self.kind, self.sent = inner, kind, sent

    def list(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> Any:
        page = self.inner.list(api_version, kind, *args, **kwargs)
        if kind != self.kind:
            return page
        return evolve(page, items=[obj for _, obj in self.sent] + page.items)

    def watch(self, api_version: str, kind: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if kind == self.kind:
            yield from (WatchEvent(type_, obj) for type_, obj in self.sent)
        yield from self.inner.watch(api_version, kind, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_wait_takes_no_other_object_for_the_job(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("succeeds")))
    job = _job(local, ref)
    sent = [
        ("MODIFIED", impostor(job, "other")),  # another job, failed
        ("MODIFIED", impostor(job, "demo", "team-b")),  # the same name, another namespace
        ("DELETED", impostor(job, "demo", "team-b")),
    ]
    session = evolve(local.session(), cluster=Hostile(local.fake, "TrainJob", sent))
    obs = lifecycle.wait(session, ref, "done", timeout=30)
    assert (obs.ref, obs.state.state) == (ref, State.SUCCEEDED)


def test_wait_polls_only_when_watching_is_forbidden(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("succeeds")))
    local.faults.add("watch", "TrainJob", status=403, times=100)
    obs = lifecycle.wait(local.session(), ref, "done", timeout=15)
    assert obs.state.state is State.SUCCEEDED
    assert local.calls.count("watch", "TrainJob") == 1


def test_status_lists_nodes_by_rank(local: PortCluster) -> None:
    ref = submit(local, spec(num_nodes=3, **scenario("hang")))
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    for _ in range(50):  # every node becomes ready shortly after the first
        obs = lifecycle.status(local.session(), ref)
        if obs.nodes_ready == 3:
            break
        local.clock.advance(0.05)
    assert [n.rank for n in obs.nodes] == [0, 1, 2]
    assert all(
        n.phase == "Running" and n.pod.startswith(f"demo-node-0-{n.rank}-") for n in obs.nodes
    )
    assert obs.nodes_total == 3


def test_requests_for_status_do_not_grow_with_pods() -> None:
    shared = schema_check.require_shared()
    counts = []
    for nodes in (4, 1000):
        with PortCluster(shared) as local:
            local.store.on_create.append(courses.runs(local.fake, ends=None))
            ref = submit(local, spec(num_nodes=nodes))
            lifecycle.wait(local.session(), ref, "running", timeout=20)
            while lifecycle.observe.observe(local.session(), _job(local, ref)).nodes_ready < nodes:
                local.clock.advance(0.05)  # all healthy: no pod's events are fetched
            local.calls.clear()
            obs = lifecycle.status(local.session(), ref)
            assert len(obs.nodes) == nodes
            counts.append(len(local.calls))
            local.calls.clear()
            lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=20)
            assert local.calls.count("get") <= 60
    # 1,000 pods are two pages of 500, and so are the Job's 1,000 SuccessfulCreate events
    # (read through one event API): two more calls, not 996 more.
    assert counts[1] - counts[0] <= 2, counts


def _job(local: PortCluster, ref: Ref) -> dict[str, Any]:
    job = local.store.get(ref.api_version, ref.kind, ref.namespace, ref.name)
    assert job is not None
    return job


# --- logs ---------------------------------------------------------------------------------------


def test_logs_of_one_rank_and_of_all(local: PortCluster) -> None:
    ref = submit(local, spec(num_nodes=2, **scenario("succeeds")))
    lifecycle.wait(local.session(), ref, "done", timeout=10)
    one = list(lifecycle.logs(local.session(), ref, rank=1))
    assert one and all(line.rank == 1 and "rank 1" in line.text for line in one)
    every = list(lifecycle.logs(local.session(), ref))
    assert {line.rank for line in every} == {0, 1}
    assert [line for line in every if line.rank == 1] == one
    tail = list(lifecycle.logs(local.session(), ref, rank=0, tail_lines=1))
    assert [t.text for t in tail] == [[x for x in every if x.rank == 0][-1].text]


def test_follow_survives_restarts_and_ends_with_the_job(local: PortCluster) -> None:
    _follow_restarts(local)


def _follow_restarts(local: PortCluster) -> None:
    # The job runs and then waits (`hang`) until both ranks are being followed; only then does
    # rank 1 crash and restart, and the job finish, so the first run's lines are followed.
    ref = submit(local, spec(num_nodes=2, **scenario("hang")), "pytorchjob/v1")
    lifecycle.wait(local.session(), ref, "running", timeout=10)

    def crash_once_followed() -> None:
        logs = local.calls.matching("pod_log")
        if len({c.name for c in logs if c.query["follow"]}) >= 2 and not switched:
            switched.append(True)
            nccl = "RuntimeError: NCCL communicator was aborted on rank 1"
            courses.crash(local.fake, NAMESPACE, ref.name, 1, nccl)
            local.fake.at(
                1.0, lambda: courses.finish(local.fake, NAMESPACE, ref.name, "PyTorchJob")
            )

    switched: list[bool] = []
    local.clock.on_tick(crash_once_followed)
    lines = list(lifecycle.logs(local.session(), ref, follow=True))
    lifecycle.wait(local.session(), ref, "done", timeout=5)
    final = {r: [x.text for x in lifecycle.logs(local.session(), ref, rank=r)] for r in (0, 1)}
    for rank in (0, 1):
        followed = [x.text for x in lines if x.rank == rank]
        # Everything of the last run, in order, once.
        assert followed[-len(final[rank]) :] == final[rank]
    # Rank 1 crashed and restarted: its first run's lines came first, the crash among them.
    crashed = [x.text for x in lines if x.rank == 1][: -len(final[1])]
    assert any("NCCL communicator was aborted" in t for t in crashed), crashed
    assert [x.text for x in lines if x.rank == 0] == final[0]


def test_follow_resumes_a_dropped_stream_without_repeating(local: PortCluster) -> None:
    ref = submit(local, spec(num_nodes=1, **scenario("succeeds")))
    local.faults.add("pod_log", drop_after=1, times=2)
    followed = [x.text for x in lifecycle.logs(local.session(), ref, rank=0, follow=True)]
    full = [x.text for x in lifecycle.logs(local.session(), ref, rank=0)]
    assert followed == full and full
    assert len(local.faults.fired) == 2  # both streams were cut, and resumed


def test_follow_with_tail_resumes_from_the_last_line_shown() -> None:
    with PortCluster(schema_check.require_shared(), step=0.05) as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        ref = submit(local, spec(num_nodes=1, **scenario("succeeds")))
        lifecycle.wait(local.session(), ref, "running", timeout=10)
        local.faults.add("pod_log", drop_after=1)
        followed = [x.text for x in lifecycle.logs(local.session(), ref, follow=True, tail_lines=1)]
        full = [x.text for x in lifecycle.logs(local.session(), ref, rank=0)]
        reads = [c.query for c in local.calls.matching("pod_log")]
    assert reads[0]["tail_lines"] == 1 and reads[0]["follow"] is True
    # After the drop: from a little before the last line shown, never the whole log again.
    assert reads[1]["tail_lines"] is None and reads[1]["since_seconds"] <= 3
    assert reads[1]["timestamps"] is True  # lines already shown are known by their time
    assert followed == full[-len(followed) :]  # from the tail on, each line once


def test_follow_watches_a_pod_that_cannot_start_then_gives_up() -> None:
    with PortCluster(schema_check.require_shared()) as local:
        local.clock.limit = 1200  # it used to look again every 5 s, for ever
        for second, why in enumerate(("NotScheduled", "ContainerCreating", "ImagePullBackOff")):
            local.fake.at(
                1 + second, functools.partial(courses.pending, local.fake, NAMESPACE, "demo", why)
            )
        ref = submit(local, spec(num_nodes=1))
        told: list[lifecycle.Waiting] = []
        with pytest.raises(lifecycle.CannotStart) as info:
            list(lifecycle.logs(local.session(), ref, rank=0, follow=True, on_waiting=told.append))
        waited = local.clock.monotonic()
        watches = local.calls.matching("watch", "Pod")
    assert str(info.value).startswith("rank 0: pod demo-node-0-0-")
    assert "cannot start (ImagePullBackOff)" in str(info.value)
    assert str(info.value).endswith("giving up: it has not started for 300s")
    assert 300 <= waited < 330
    # Why, once per change of why: no pod, not scheduled, starting, cannot start.
    reasons = ["NoPod", "NotScheduled", "ContainerCreating", "ImagePullBackOff"]
    assert [n.reason for n in told] == reasons
    # Woken by the pod's watch (its rank's pod only), not by looking every few seconds.
    assert watches and all(
        "batch.kubernetes.io/job-completion-index=0" in c.query["label_selector"] for c in watches
    )
    assert len(local.calls.matching("pod_log")) <= 300 / POD_WATCH + 4


def test_follow_says_what_it_retries_when_the_kubelet_fails() -> None:
    with PortCluster(schema_check.require_shared()) as local:
        local.store.on_create.append(courses.runs(local.fake, ends=None))
        local.clock.limit = 600  # it used to retry for ever, silently
        ref = submit(local, spec(num_nodes=1))
        lifecycle.wait(local.session(), ref, "running", timeout=10)
        local.faults.add("pod_log", status=500, times=10_000)
        told: list[lifecycle.Waiting] = []
        follow = lifecycle.logs(local.session(), ref, rank=0, follow=True, on_waiting=told.append)
        with pytest.raises(lifecycle.Unavailable, match="read logs of Pod default/demo-node-0-0-"):
            list(follow)
    [retrying] = told
    assert str(retrying).startswith("rank 0: reading the log of pod demo-node-0-0-")
    assert str(retrying).endswith(
        ": 500 InternalError: Internal error occurred: injected fault; retrying for up to 5s"
    )


def test_logs_of_every_rank_are_bounded_by_the_pods_not_by_num_nodes(
    local: PortCluster,
) -> None:
    """numNodes is the server's number (int32 in the CRD): 10^8 of them makes no 10^8 reads."""
    ref = submit(local, spec(num_nodes=2, **scenario("succeeds")))
    lifecycle.wait(local.session(), ref, "done", timeout=10)
    job = _job(local, ref)
    job["spec"]["trainer"]["numNodes"] = 100_000_000
    local.store.put(job)
    told: list[lifecycle.Waiting] = []

    def tell(notice: lifecycle.Waiting) -> None:
        told.append(notice)
        assert len(told) <= MAX_RANKS, "a notice per rank numNodes names"

    lines = list(lifecycle.logs(local.session(), ref, on_waiting=tell))
    assert {line.rank for line in lines} == {0, 1}
    [rest] = [n for n in told if n.rank is None]
    assert "99998976 more ranks (up to rank 99999999) have no pod" in str(rest)
    assert len(told) == MAX_RANKS - 2 + 1  # ranks 2..1023 without a pod, then the rest at once
    assert len(ranks(local.session(), ref)) == MAX_RANKS
    assert lifecycle.status(local.session(), ref).ranks == list(range(MAX_RANKS))  # integrations
    huge = {"kind": "TrainJob", "spec": {"trainer": {"numNodes": 2**40}}}
    assert nodes_total(huge) == 2**31 - 1  # the CRD's int32


@pytest.mark.parametrize("follow", [False, True])
def test_a_rank_the_job_does_not_have_is_an_error(local: PortCluster, follow: bool) -> None:
    ref = submit(local, spec(num_nodes=1, **scenario("succeeds")))
    lifecycle.wait(local.session(), ref, "done", timeout=10)
    with pytest.raises(NoSuchRank, match="has rank 0: there is no rank 5"):
        list(lifecycle.logs(local.session(), ref, rank=5, follow=follow))
    assert local.calls.count("pod_log") == 0


# --- cancel, suspend, list ----------------------------------------------------------------------


def test_cancel_waits_until_job_and_pods_are_gone(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("hang")))
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    done = lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=10)
    assert done.existed
    [delete] = local.calls.matching("delete", "TrainJob/demo")
    assert delete.fault is None
    assert local.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo") is None
    assert local.store.list("v1", "Pod", NAMESPACE, "jobset.sigs.k8s.io/jobset-name=demo") == []


def test_cancel_of_a_missing_job_succeeds(local: PortCluster) -> None:
    done = lifecycle.cancel(local.session(), Ref(TRAINJOB, "TrainJob", NAMESPACE, "gone"))
    assert not done.existed


def test_cancel_times_out_naming_what_remains(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("hang")))
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    stray = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "stray",
            "namespace": NAMESPACE,
            "labels": {"jobset.sigs.k8s.io/jobset-name": "demo"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    local.store.create(stray)
    with pytest.raises(TimedOut, match="still there: pod stray"):
        lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=1)


def test_suspend_and_resume(local: PortCluster) -> None:
    ref = submit(local, spec(**scenario("hang")), "pytorchjob/v1")
    lifecycle.wait(local.session(), ref, "running", timeout=10)
    lifecycle.set_suspended(local.session(), ref, True)
    for _ in range(100):
        obs = lifecycle.status(local.session(), ref)
        if obs.state.state is State.SUSPENDED and not obs.nodes:
            break
        local.clock.advance(0.05)
    assert obs.state.state is State.SUSPENDED and not obs.nodes
    lifecycle.set_suspended(local.session(), ref, False)
    assert lifecycle.wait(local.session(), ref, "running", timeout=10).state.state is State.RUNNING


def test_list_finds_only_jobs_kfcompile_created(local: PortCluster) -> None:
    submit(local, spec("ours"))
    submit(local, spec("torch"), "pytorchjob/v1")
    local.store.create(
        {
            "apiVersion": TRAINJOB,
            "kind": "TrainJob",
            "metadata": {"name": "theirs", "namespace": NAMESPACE},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    )
    jobs = lifecycle.list_jobs(local.session(), NAMESPACE)
    assert [(j.ref.kind, j.ref.name, j.target) for j in jobs] == [
        ("TrainJob", "ours", "trainjob/v2.3"),
        ("PyTorchJob", "torch", "pytorchjob/v1"),
    ]
    assert lifecycle.list_jobs(local.session(), "other-namespace") == []


def test_locate_finds_either_kind(local: PortCluster) -> None:
    submit(local, spec("torch"), "pytorchjob/v1")
    assert lifecycle.locate(local.session(), NAMESPACE, "torch").kind == "PyTorchJob"
    with pytest.raises(JobNotFound, match="no TrainJob or PyTorchJob named x"):
        lifecycle.locate(local.session(), NAMESPACE, "x")


# --- work-dir sync ------------------------------------------------------------------------------


def _sync_pods(local: PortCluster) -> list[dict[str, Any]]:
    return local.store.list("v1", "Pod", NAMESPACE, "kfcompile.dev/role=sync")


@pytest.mark.usefixtures("helper")
def test_sync_up_and_down_round_trip(local: PortCluster, tmp_path: Path) -> None:
    up = tmp_path / "up"
    (up / "a" / "b").mkdir(parents=True)
    (up / "a" / "b" / "weights.bin").write_bytes(bytes(range(256)) * 1000)
    (up / "README").write_text("hello\n")
    session = local.session()
    sent = lifecycle.sync_up(
        session, TarFiles(), namespace=NAMESPACE, pvc=CLAIM, path="/runs/1", local=str(up)
    )
    assert sent == lifecycle.Synced(files=2, size=256_000 + 6)
    assert members(local.sent["/mnt/pvc/runs/1"])["README"] == b"hello\n"
    got = lifecycle.sync_down(
        session,
        TarFiles(),
        namespace=NAMESPACE,
        pvc=CLAIM,
        path="/runs/1",
        local=str(tmp_path / "dn"),
    )
    assert got == sent
    assert (tmp_path / "dn" / "a" / "b" / "weights.bin").read_bytes() == bytes(range(256)) * 1000
    local.settle()
    assert _sync_pods(local) == []


def test_sync_helper_is_deleted_when_it_cannot_start(local: PortCluster, tmp_path: Path) -> None:
    local.store.on_create.append(courses.helpers(local.fake, waiting="ImagePullBackOff"))
    with pytest.raises(lifecycle.ClusterError, match="ImagePullBackOff"):
        lifecycle.sync_up(
            local.session(),
            TarFiles(),
            namespace=NAMESPACE,
            pvc=CLAIM,
            path="/",
            local=str(tmp_path),
        )
    local.settle()
    assert _sync_pods(local) == []


class InterruptingFiles(TarFiles):
    """Ctrl-C while the download is being written locally."""

    def unpack(self, chunks: Any, directory: str) -> Any:
        raise KeyboardInterrupt


@pytest.mark.usefixtures("helper")
def test_sync_helper_is_deleted_on_ctrl_c(local: PortCluster, tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        lifecycle.sync_down(
            local.session(),
            InterruptingFiles(),
            namespace=NAMESPACE,
            pvc=CLAIM,
            path="/",
            local=str(tmp_path),
        )
    local.settle()
    assert _sync_pods(local) == []


def test_sync_path_stays_inside_the_claim(local: PortCluster) -> None:
    assert lifecycle.sync.claim_dir("/") == lifecycle.sync.SYNC_ROOT
    assert lifecycle.sync.claim_dir("/../../etc/") == f"{lifecycle.sync.SYNC_ROOT}/etc"
    with pytest.raises(lifecycle.ClusterError, match="must be absolute"):
        lifecycle.sync_up(
            local.session(), TarFiles(), namespace=NAMESPACE, pvc=CLAIM, path="runs", local="."
        )
    assert local.calls.count("create") == 0


# --- pagination, on a port of its own -----------------------------------------------------------


class ExpiringPages:
    """A Cluster port whose pod list comes in pages and forgets its first continue token once,
    as a real server does after compaction."""

    def __init__(self, pods: list[dict[str, Any]], *, always: bool = False) -> None:
        self.pods = pods
        self.calls: list[str | None] = []
        self.expired = False
        self.always = always  # every continue token has expired by the time it comes back

    def list(self, api_version: str, kind: str, namespace: str | None, **kw: Any) -> Any:
        from kfcompile.lifecycle.ports import Gone, Page

        token, limit = kw.get("continue_token"), kw["limit"]
        self.calls.append(token)
        if token is not None and (self.always or not self.expired):
            self.expired = True
            raise Gone(410, "Expired", "The provided continue parameter is too old")
        start = int(token or 0)
        rest = self.pods[start + limit :]
        return Page(self.pods[start : start + limit], "7", str(start + limit) if rest else None)


class Instant:
    def monotonic(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        raise AssertionError("nothing to wait for")


def test_an_expired_continue_token_starts_the_list_over() -> None:
    job = {
        "apiVersion": TRAINJOB,
        "kind": "TrainJob",
        "metadata": {"name": "big", "namespace": NAMESPACE},
        "spec": {"trainer": {"numNodes": 1200}},
    }
    pods = [
        {
            "metadata": {
                "name": f"big-node-0-{i}-x",
                "labels": {"batch.kubernetes.io/job-completion-index": str(i)},
            },
            "status": {"phase": "Running"},
        }
        for i in range(1200)
    ]
    port = ExpiringPages(pods)
    obs = lifecycle.observe.observe(lifecycle.Session(port, Instant(), jitter=fixed_jitter), job)  # type: ignore[arg-type]
    assert [n.rank for n in obs.nodes] == list(range(1200))  # each once, none missing
    assert port.calls == [None, "500", None, "500", "1000"]


def test_a_list_whose_tokens_keep_expiring_starts_over_list_restarts_times_then_fails() -> None:
    from kfcompile.lifecycle.objects import list_all
    from kfcompile.lifecycle.ports import Gone
    from kfcompile.lifecycle.session import LIST_RESTARTS

    pods = [{"metadata": {"name": f"p-{i}"}} for i in range(600)]  # two pages
    port = ExpiringPages(pods, always=True)
    with pytest.raises(Gone):
        list_all(lifecycle.Session(port, Instant(), jitter=fixed_jitter), "v1", "Pod", NAMESPACE)  # type: ignore[arg-type]
    # the first try, then LIST_RESTARTS more, each a first page and an expired second
    assert port.calls == [None, "500"] * (1 + LIST_RESTARTS)


# --- each operation rides out each kind of transient trouble ------------------------------------

FAULTS = {
    "429": {"status": 429, "times": 2},
    "500": {"status": 500, "times": 2},
    "503": {"status": 503, "times": 2},
    "dropped": {"drop": True, "times": 2},
    "hung": {"lost": True},  # answered after the client's read timeout: done, answer lost
}


def _status(local: PortCluster, session: lifecycle.Session, ref: Ref, tmp: Path) -> object:
    return lifecycle.status(session, ref).state.state


def _logs(local: PortCluster, session: lifecycle.Session, ref: Ref, tmp: Path) -> object:
    return len(list(lifecycle.logs(session, ref, rank=0))) > 0


def _cancel(local: PortCluster, session: lifecycle.Session, ref: Ref, tmp: Path) -> object:
    lifecycle.cancel(session, ref, wait_gone=True, timeout=10)
    return local.store.get(ref.api_version, ref.kind, ref.namespace, ref.name)


def _suspend(local: PortCluster, session: lifecycle.Session, ref: Ref, tmp: Path) -> object:
    lifecycle.set_suspended(session, ref, True)
    return _job(local, ref)["spec"]["suspend"]


def _list(local: PortCluster, session: lifecycle.Session, ref: Ref, tmp: Path) -> object:
    return [j.ref.name for j in lifecycle.list_jobs(session, NAMESPACE)]


def _sync(local: PortCluster, session: lifecycle.Session, ref: Ref, tmp: Path) -> object:
    (tmp / "f").write_text("x")
    done = lifecycle.sync_up(
        session, TarFiles(), namespace=NAMESPACE, pvc=CLAIM, path="/d", local=str(tmp)
    )
    local.settle()
    return (done.files, len(_sync_pods(local)), members(local.sent["/mnt/pvc/d"])["f"])


OPERATIONS = {  # operation -> (what it does, the call to trouble, what it must still give)
    "status": (_status, ("list", "Pod"), State.SUCCEEDED),
    "logs": (_logs, ("pod_log", "Pod"), True),
    "cancel": (_cancel, ("delete", "TrainJob"), None),
    "suspend": (_suspend, ("patch", "TrainJob"), True),
    "list": (_list, ("list", "TrainJob"), ["demo"]),
    "sync-create": (_sync, ("create", "Pod"), (1, 0, b"x")),
    "sync-exec": (_sync, ("exec", "Pod"), (1, 0, b"x")),
}
READS = ("list", "pod_log", "exec")  # what a GET asks for


@pytest.mark.parametrize(
    ("operation", "fault"),
    [
        (operation, fault)
        for operation, (_, (op, _), _) in OPERATIONS.items()
        for fault in FAULTS
        # A hung write is the lost-answer case: test_a_create_whose_answer_was_lost.
        if fault != "hung" or op in READS
    ],
)
@pytest.mark.usefixtures("helper")
def test_each_operation_survives_each_transient_fault(
    local: PortCluster, operation: str, fault: str, tmp_path: Path
) -> None:
    ref = submit(local, spec(**scenario("succeeds")))
    session = local.session()
    lifecycle.wait(session, ref, "done", timeout=10)  # trouble comes once the API has answered
    run, (op, kind), expected = OPERATIONS[operation]
    local.faults.add(op, kind, **FAULTS[fault])
    assert run(local, session, ref, tmp_path) == expected
    assert local.faults.fired, "the fault never hit a call"


@pytest.mark.usefixtures("helper")
def test_a_create_whose_answer_was_lost_is_not_made_twice(
    local: PortCluster, tmp_path: Path
) -> None:
    """The server creates, the client times out and retries: one job, one helper pod."""
    local.faults.add("create", "TrainJob", lost=True)
    ref = lifecycle.submit(
        local.session(), spec(), "trainjob/v2.3", namespace=NAMESPACE, environ={}
    ).ref
    assert len(local.store.list(TRAINJOB, "TrainJob", NAMESPACE)) == 1
    assert local.calls.count("create", "TrainJob") == 2
    session = local.session()
    lifecycle.cancel(session, ref, wait_gone=True, timeout=10)
    local.faults.add("create", "Pod", lost=True)
    (tmp_path / "f").write_text("x")
    lifecycle.sync_up(
        session,
        TarFiles(),
        namespace=NAMESPACE,
        pvc=CLAIM,
        path="/",
        local=str(tmp_path),
    )
    local.settle()
    assert local.calls.count("create", "Pod") == 2 and _sync_pods(local) == []


# --- what a failed submit leaves behind, and a resubmit that mends it ---------------------------


class Faulty:
    """A Cluster port that passes every call to another port, except that a chosen call
    ``fail`` (``"create"``, ``"delete"``) on ``kind`` goes through and then raises ``error``."""

    def __init__(self, inner: Any, fail: str, kind: str, error: BaseException) -> None:
        self.inner, self.fail, self.kind, self.error = inner, fail, kind, error

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name != self.fail:
            return method

        def call(first: Any, *args: Any, **kwargs: Any) -> Any:
            kind = first.kind if isinstance(first, Ref) else first["kind"]
            if kind != self.kind:
                return method(first, *args, **kwargs)
            if not getattr(self, "done", False):
                self.done = True
                method(first, *args, **kwargs)  # it happens on the server ...
            raise self.error  # ... but its answer never comes

        return call


def secret_spec(**extra: Any) -> JobSpec:
    return spec(secret_env=["HF_TOKEN"], **extra)


def owners(local: PortCluster, kind: str, name: str) -> list[str]:
    obj = local.store.get("v1", kind, NAMESPACE, name)
    assert obj is not None, f"{kind} {name} is gone"
    return [o["uid"] for o in obj["metadata"].get("ownerReferences", [])]


def job_uid(local: PortCluster, name: str = "demo") -> str:
    job = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, name)
    assert job is not None
    return str(job["metadata"]["uid"])


def test_an_owner_patch_and_a_rollback_that_fail_say_what_is_left(local: PortCluster) -> None:
    local.faults.add("patch", "Secret/demo-env", status=403)
    local.faults.add("delete", "TrainJob/demo", status=403)
    local.faults.add("delete", "Secret/demo-env", status=403)
    with pytest.raises(lifecycle.LeftBehind) as info:
        submit(local, secret_spec())
    lines = str(info.value).splitlines()
    assert lines[0].startswith("patch Secret default/demo-env: 403 Forbidden: ")  # the cause
    assert lines[1].endswith("2 objects left on the cluster:")
    assert lines[2] == (
        "  TrainJob demo in namespace default (delete failed: 403 Forbidden: forbidden: injected "
        "fault): remove it with: kfcompile cancel demo -n default --kind TrainJob"
    )
    assert lines[3] == (
        "  Secret demo-env in namespace default (delete failed: 403 Forbidden: forbidden: "
        "injected fault; it holds the values of secret_env; it has no owner, so nothing "
        "will ever delete it): remove it with: kubectl delete secret demo-env -n default"
    )
    assert ENV["HF_TOKEN"] not in str(info.value)
    assert [left.ref.kind for left in info.value.left] == ["TrainJob", "Secret"]
    assert owners(local, "Secret", "demo-env") == []
    # The same spec again: the job is there, and the Secret gets its owner back.
    done = lifecycle.submit(local.session(), secret_spec(), "trainjob/v2.3", namespace=NAMESPACE,
                            environ=ENV)  # fmt: skip
    assert (done.created, done.repaired) == (
        False,
        ("Secret demo-env in namespace default had lost its owner: owned by the job again",),
    )
    assert owners(local, "Secret", "demo-env") == [job_uid(local)]
    again = lifecycle.submit(local.session(), secret_spec(), "trainjob/v2.3", namespace=NAMESPACE,
                             environ=ENV)  # fmt: skip
    assert (again.created, again.repaired) == (False, ())  # nothing left to mend


def test_a_companion_left_without_its_job_is_adopted_by_the_next_submit(
    local: PortCluster,
) -> None:
    local.faults.add("patch", "Secret/demo-env", status=403)
    local.faults.add("delete", "Secret/demo-env", status=403)
    with pytest.raises(lifecycle.LeftBehind) as info:
        submit(local, secret_spec())
    assert [str(left.ref) for left in info.value.left] == ["Secret demo-env in namespace default"]
    local.settle()
    assert local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    submit(local, secret_spec())
    assert owners(local, "Secret", "demo-env") == [job_uid(local)]


def test_a_resubmit_recreates_a_missing_companion(local: PortCluster) -> None:
    job = secret_spec(
        launcher={"kind": "torchrun", "entrypoint": "train.py"}, command=(), script="print(1)"
    )
    submit(local, job)
    local.store.delete("v1", "Secret", NAMESPACE, "demo-env")
    done = lifecycle.submit(local.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ=ENV)
    assert done.repaired == ("Secret demo-env in namespace default was missing: created again",)
    assert owners(local, "Secret", "demo-env") == [job_uid(local)]
    [configmap] = local.objects("ConfigMap")
    assert [o["uid"] for o in configmap["metadata"]["ownerReferences"]] == [job_uid(local)]


def test_a_companion_that_is_not_ours_is_not_adopted_by_a_resubmit(local: PortCluster) -> None:
    submit(local, secret_spec())
    local.store.delete("v1", "Secret", NAMESPACE, "demo-env")
    other = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "demo-env",
             "namespace": NAMESPACE}, "stringData": {"HF_TOKEN": "someone else's"}}  # fmt: skip
    local.store.create(other)
    with pytest.raises(NameTaken, match="kubectl delete secret demo-env -n default"):
        submit(local, secret_spec())
    assert owners(local, "Secret", "demo-env") == []


def test_a_repair_that_fails_says_what_stays_broken(local: PortCluster) -> None:
    submit(local, secret_spec())
    local.store.delete("v1", "Secret", NAMESPACE, "demo-env")
    local.faults.add("create", "Secret", status=403)
    with pytest.raises(lifecycle.ClusterError) as info:
        submit(local, secret_spec())
    assert str(info.value).startswith(
        "TrainJob demo in namespace default exists, but Secret demo-env in namespace default "
        "could not be mended (create Secret default/demo-env: 403 Forbidden: "
    )
    assert "kfcompile cancel demo -n default --kind TrainJob" in str(info.value)


def test_a_job_created_without_an_answer_is_rolled_back_too(local: PortCluster) -> None:
    # The create reaches the server, but no answer ever comes: the job may exist, so it is
    # looked for and deleted with its companions (else it would stay without its Secret).
    lost = lifecycle.ports.Transient(0, "Timeout", "read timed out")
    port = Faulty(local.fake, "create", "TrainJob", lost)
    session = lifecycle.Session(port, local.clock, jitter=fixed_jitter, retry_for=1.0)
    with pytest.raises(lifecycle.Unavailable):
        lifecycle.submit(session, secret_spec(), "trainjob/v2.3", namespace=NAMESPACE, environ=ENV)
    local.settle()
    assert local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    assert local.objects("Secret") == []


def test_a_rollback_cut_short_by_ctrl_c_says_what_it_did_not_delete(local: PortCluster) -> None:
    local.faults.add("patch", "Secret/demo-env", status=403)
    port = Faulty(local.fake, "delete", "TrainJob", KeyboardInterrupt())
    session = lifecycle.Session(port, local.clock, jitter=fixed_jitter)
    with pytest.raises(lifecycle.LeftBehind) as info:
        lifecycle.submit(session, secret_spec(), "trainjob/v2.3", namespace=NAMESPACE, environ=ENV)
    assert [(str(x.ref), x.why) for x in info.value.left] == [
        ("TrainJob demo in namespace default", "delete interrupted: it may still be there"),
        ("Secret demo-env in namespace default", "not deleted"),
    ]
    assert isinstance(info.value.__cause__, lifecycle.ApiError)


def test_a_rollback_against_an_unavailable_server_does_not_wait_twice(
    local: PortCluster,
) -> None:
    local.faults.add("patch", "Secret/demo-env", status=403)
    local.faults.add("delete", status=503, times=1000)
    session = local.session(retry_for=1.0)
    with pytest.raises(lifecycle.LeftBehind) as info:
        lifecycle.submit(session, secret_spec(), "trainjob/v2.3", namespace=NAMESPACE, environ=ENV)
    assert [x.ref.kind for x in info.value.left] == ["TrainJob", "Secret"]
    assert "the API server kept failing for" in info.value.left[0].why
    assert info.value.left[1].why == "not deleted: the API server was unavailable"
    assert local.calls.count("delete", "Secret") == 0  # given up with the first

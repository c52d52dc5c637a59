"""Refuse what Kueue would break: each Kueue release is built against one Trainer API (v0.17 to
v0.19 Trainer v2.2's), and when it admits a TrainJob it drops what only a newer Trainer has (a
patch's terminationGracePeriodSeconds); the JobSet webhook then refuses the Trainer's update and
the job never starts, while its status says Resumed (KUBEFLOW.md, Kueue). The release is told
from the versions of Kueue's API the cluster serves, narrowed by its Workload CRD where that can
tell; a range is held to the most restrictive API in it. ``status`` shows the Trainer's
refusal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, QUEUE, PortCluster, cli, live
from test_cli_cluster import write_spec
from test_lifecycle import spec, submit

from kfcompile import lifecycle
from kfcompile.cli import main
from kfcompile.lifecycle import PreflightFailed
from kfcompile.lifecycle.kueue import KueueRelease, builds, kueue_release, narrowed
from kfcompile.status import JobState, State, trainer_refused
from kfcompile.testing import courses
from kfcompile.testing import kueue as fake_kueue
from kfcompile.testing.store import CRD

GRACE = (
    "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec"
    ".template.spec.terminationGracePeriodSeconds"
)


@pytest.fixture
def shared() -> Path:
    return schema_check.require_shared()


@pytest.fixture(params=["v1beta2", "both", "v1beta1"])
def cluster(request: pytest.FixtureRequest) -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared(), kueue=request.param) as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        local.store.on_patch.append(courses.suspends(local.fake))
        yield local


@pytest.mark.parametrize(
    ("serves", "release", "apis"),
    [
        ("v1beta2", "Kueue v0.20 or later", [(2, 3)]),
        ("both", "Kueue v0.15 to v0.19", [(2, 1), (2, 2)]),
        ("v1beta1", "Kueue v0.13 to v0.14", [(2, 0), (2, 1)]),
    ],
)
def test_the_release_is_told_from_the_versions_served(
    serves: str, release: str, apis: list[tuple[int, int]]
) -> None:
    with PortCluster(schema_check.require_shared(), kueue=serves) as local:
        found = kueue_release(local.session())
    assert found is not None and str(found) == release
    assert [build.api for build in found.builds] == apis  # every Trainer API in the range


def test_no_kueue_no_release() -> None:
    with PortCluster(schema_check.require_shared(), kueue=None) as local:
        assert kueue_release(local.session()) is None


def test_each_kueue_release_is_built_against_the_trainer_api_its_go_mod_names() -> None:
    """Kueue's go.mod at each tag: v0.14.0-v0.14.4 Trainer v2.0.1, v0.14.5-v0.16.9 v2.1.0,
    v0.17.0-v0.19.2 v2.2 (KUBEFLOW.md: v0.14-v0.16 pair with v2.1, v0.17-v0.19 with v2.2)."""
    said = [(str(build), build.api) for build in builds()]
    assert said == [
        ("v0.14.0 to v0.14.4", (2, 0)),
        ("v0.14.5 to v0.16", (2, 1)),
        ("v0.17 to v0.19", (2, 2)),
        ("v0.20 or later", (2, 3)),
    ]
    assert [(str(b), b.api) for b in KueueRelease(17, 17, "").builds] == [("v0.17", (2, 2))]
    assert [str(b) for b in KueueRelease(13, 14, "").builds] == [
        "v0.14.0 to v0.14.4",
        "v0.14.5 and later v0.14",
    ]


def test_submit_refuses_a_field_the_clusters_kueue_drops(cluster: PortCluster) -> None:
    grace = spec(queue=QUEUE, termination_grace_period_seconds=60)
    serves_v1beta1 = cluster.store.served("kueue.x-k8s.io/v1beta1", "Workload") is not None
    if not serves_v1beta1:  # Kueue v0.20 on: built against Trainer v2.3's API
        assert submit(cluster, grace).name == "demo"
        return
    with pytest.raises(PreflightFailed) as info:
        submit(cluster, grace)
    lines = {line.split(": ")[0]: line for line in info.value.problems}
    line = lines.pop(GRACE)
    has_no = "no terminationGracePeriodSeconds: Kueue drops it when it admits the job"
    serves_v1beta2 = cluster.store.served("kueue.x-k8s.io/v1beta2", "Workload") is not None
    if serves_v1beta2:  # the fake's Workload CRD is v0.19's: it tells v0.17 to v0.19
        told = (
            "Kueue v0.17 to v0.19 (this cluster serves kueue.x-k8s.io/v1beta2 and v1beta1; its "
            "Workload CRD has v1beta2 spec.preemptionGates) is built against Trainer v2.2's API, "
            "which has "
        )
    else:  # Kueue v0.13 to v0.14, built against Trainer v2.0's API, then v2.1's
        told = (
            "Kueue v0.13 to v0.14 (this cluster serves kueue.x-k8s.io/v1beta1): v0.14.0 to "
            "v0.14.4 (built against Trainer v2.0's API) and v0.14.5 and later v0.14 (built "
            "against Trainer v2.1's API) have "
        )
    assert line.startswith(f"{GRACE}: {told}{has_no}")
    assert line.endswith("or run Kueue v0.20 or later (submit --force submits it anyway)")
    # Trainer v2.0's and v2.1's APIs have no runtimePatches either: Kueue v0.14 drops every patch
    assert list(lines) == ([] if serves_v1beta2 else ["spec.runtimePatches"])
    assert cluster.calls.count("create") == 0
    # the same field on a job no queue holds, or without the field: submitted
    assert submit(cluster, spec("free", termination_grace_period_seconds=60)).name == "free"
    assert submit(cluster, spec("plain", queue=QUEUE)).name == "plain"


# A field Kueue v0.15 to v0.16 drop (built against Trainer v2.1's API) and v0.17 to v0.19 keep.
PATCHED = {"pod_annotations": {"example.com/team": "a"}}
PATCHES = "spec.runtimePatches"
V2_1 = "v0.15 to v0.16 (built against Trainer v2.1's API) have no runtimePatches: Kueue drops it"
BOTH = "this cluster serves kueue.x-k8s.io/v1beta2 and v1beta1"


def crd_reads(cluster: PortCluster) -> int:
    return cluster.calls.count("get", "CustomResourceDefinition/workloads.kueue.x-k8s.io")


def test_a_range_is_held_to_the_most_restrictive_trainer_api_in_it() -> None:
    """Told only that Kueue is v0.15 to v0.19 (its Workload CRD may not be read: 403), a field
    that v0.15 and v0.16 drop is refused, saying which releases drop it and why; --force
    sends it."""
    with PortCluster(schema_check.require_shared(), kueue="both") as local:
        local.faults.add("get", "CustomResourceDefinition", status=403)
        with pytest.raises(PreflightFailed) as info:
            submit(local, spec(queue=QUEUE, **PATCHED))
        [line] = info.value.problems
        assert line.startswith(
            f"{PATCHES}: Kueue v0.15 to v0.19 ({BOTH}; its CustomResourceDefinition "
            "workloads.kueue.x-k8s.io could not be read: 403 Forbidden: "
        )
        assert f"): {V2_1} when it admits the job" in line
        assert line.endswith("or run Kueue v0.17 or later (submit --force submits it anyway)")
        assert local.calls.count("create") == 0 and crd_reads(local) == 1
        local.faults.add("get", "CustomResourceDefinition", status=403)
        done = lifecycle.submit(
            local.session(),
            spec(queue=QUEUE, active_deadline_seconds=60),
            "trainjob/v2.3",
            namespace=NAMESPACE,
            environ={},
            force=True,
        )
        [warning] = done.warnings  # (activeDeadlineSeconds: Trainer v2.2's too)
        assert warning.startswith("spec.activeDeadlineSeconds: Kueue v0.15 to v0.19 (")
        assert (
            "v0.15 to v0.16 (built against Trainer v2.1's API) have no activeDeadlineSeconds"
            in (warning)
        )
        assert local.calls.count("create") == 1


def test_the_workload_crd_tells_v0_15_to_v0_16_from_v0_17_to_v0_19(shared: Path) -> None:
    """Kueue v0.17 added v1beta2 ``spec.preemptionGates`` to the Workload CRD: the real v0.15.8
    CRD has none, so the cluster runs v0.15 to v0.16, which drop the job's patches; the fake's
    (v0.19's) has it, so the same job is submitted. One read of the CRD, each time."""
    real = schema_check.load_crd("kueue/workloads-v0.15.8.yaml")
    with PortCluster(shared, kueue="both") as local:
        local.store.put(real)
        with pytest.raises(PreflightFailed) as info:
            submit(local, spec(queue=QUEUE, **PATCHED))
        [line] = info.value.problems
        assert line.startswith(
            f"{PATCHES}: Kueue v0.15 to v0.16 ({BOTH}; its Workload CRD has no v1beta2 "
            "spec.preemptionGates) is built against Trainer v2.1's API, which has no "
            "runtimePatches: Kueue drops it when it admits the job"
        )
        assert crd_reads(local) == 1
    with PortCluster(shared, kueue="both") as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        assert submit(local, spec(queue=QUEUE, **PATCHED)).name == "demo"
        assert crd_reads(local) == 1


@pytest.mark.parametrize("minor", [15, 16, 17, 19])
def test_the_fakes_workload_crd_is_told_as_its_release(shared: Path, minor: int) -> None:
    with PortCluster(shared, kueue="both") as local:
        local.store.put(fake_kueue.workload_crd(("v1beta2", "v1beta1"), minor))
        told = narrowed(local.session(), KueueRelease(15, 19, "it serves both"))
    assert (told.low, told.high) == ((17, 19) if minor >= 17 else (15, 16))


@pytest.mark.parametrize("serves", ["v1beta2", "both", "v1beta1"])
def test_the_crd_is_read_only_where_it_would_tell(shared: Path, serves: str) -> None:
    """Not for a job without a field the releases disagree on, nor where discovery told all
    there is to tell (v0.20 on; v0.13 to v0.14, whose releases no CRD field tells apart)."""
    with PortCluster(shared, kueue=serves) as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        local.store.on_patch.append(courses.suspends(local.fake))
        assert submit(local, spec(queue=QUEUE)).name == "demo"
        assert crd_reads(local) == 0
        try:
            submit(local, spec("patched", queue=QUEUE, **PATCHED))
        except PreflightFailed:  # Kueue v0.13 to v0.14: every patch dropped
            assert serves == "v1beta1"
        assert crd_reads(local) == (1 if serves == "both" else 0)


def test_the_release_stays_a_range_without_the_crd(shared: Path) -> None:
    """No Workload CRD to read (a cluster whose discovery is older than its CRDs): the range
    as discovery told it, nothing said of the CRD."""
    with PortCluster(shared, kueue="both") as local:
        local.store.delete(*CRD, None, "workloads.kueue.x-k8s.io")
        told = narrowed(local.session(), KueueRelease(15, 19, "it serves both"))
    assert (told.low, told.high, told.evidence) == (15, 19, "it serves both")


def test_forced_the_job_never_starts_and_status_says_why(tmp_path: Path) -> None:
    """As seen with the real Kueue v0.19.2 and Trainer v2.3.0: status said PENDING (Resumed);
    it says the Trainer's refusal."""
    with PortCluster(schema_check.require_shared(), kueue="both") as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        grace = spec(queue=QUEUE, termination_grace_period_seconds=60)
        done = lifecycle.submit(
            local.session(), grace, "trainjob/v2.3", namespace=NAMESPACE, environ={}, force=True
        )
        [warning] = done.warnings
        assert warning.startswith(GRACE)
        local.clock.advance(5.0)
        obs = lifecycle.status(local.session(), done.ref)
    assert (obs.state.state, obs.state.reason) == (State.PENDING, "TrainJobResourcesCreationFailed")
    assert obs.state.message.startswith("TrainJob resources reconciliation failed: ")
    assert obs.nodes == ()


def test_the_trainers_refusal_is_the_reason_only_of_a_job_that_seems_to_wait() -> None:
    resumed = JobState(State.PENDING, "Resumed", "TrainJob is resumed")
    said = [("FailedScheduling", "x"), ("TrainJobResourcesCreationFailed", "refused")]
    assert trainer_refused(resumed, said) == JobState(
        State.PENDING, "TrainJobResourcesCreationFailed", "refused"
    )
    running = JobState(State.RUNNING, "JobsActive", "m")
    assert trainer_refused(running, said) == running
    assert trainer_refused(resumed, said[:1]) == resumed


def test_the_cli_refuses_and_force_submits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cli(monkeypatch, kueue="both")
    path = write_spec(tmp_path, "succeeds", queue=QUEUE, termination_grace_period_seconds=60)
    assert main(["submit", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"kfcompile: {GRACE}: Kueue v0.17 to v0.19 ({BOTH}; its Workload CRD has " in err
    assert "Traceback" not in err
    assert main(["submit", str(path), "--force"]) == 0
    out, err = capsys.readouterr()
    assert (
        "TrainJob demo in namespace default: created" in out
        and f"kfcompile: warning (--force): {GRACE}: " in err
    )

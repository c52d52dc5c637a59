"""Refuse what Kueue would break: Kueue up to v0.19 is built against Trainer v2.2's API, so when
it admits a TrainJob it drops what only Trainer v2.3 has (a patch's
terminationGracePeriodSeconds); the JobSet webhook then refuses the Trainer's update and the
job never starts, while its status says Resumed (KUBEFLOW.md, Kueue). The release is told from
the versions of Kueue's API the cluster serves; ``status`` shows the Trainer's refusal."""

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
from kfcompile.lifecycle.kueue import KueueRelease, kueue_release
from kfcompile.status import JobState, State, trainer_refused
from kfcompile.testing import courses

GRACE = (
    "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec"
    ".template.spec.terminationGracePeriodSeconds"
)


@pytest.fixture(params=["v1beta2", "both", "v1beta1"])
def cluster(request: pytest.FixtureRequest) -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared(), kueue=request.param) as local:
        local.store.on_create.append(lambda job: live(local.fake, job, "succeeds"))
        local.store.on_patch.append(courses.suspends(local.fake))
        yield local


@pytest.mark.parametrize(
    ("serves", "release", "api"),
    [
        ("v1beta2", "Kueue v0.20 or later", (2, 3)),
        ("both", "Kueue v0.15 to v0.19", (2, 2)),
        ("v1beta1", "Kueue v0.13 to v0.14", (2, 0)),
    ],
)
def test_the_release_is_told_from_the_versions_served(
    serves: str, release: str, api: tuple[int, int]
) -> None:
    with PortCluster(schema_check.require_shared(), kueue=serves) as local:
        found = kueue_release(local.session())
    assert found is not None and str(found) == release and found.trainer_api == api


def test_no_kueue_no_release() -> None:
    with PortCluster(schema_check.require_shared(), kueue=None) as local:
        assert kueue_release(local.session()) is None
    assert KueueRelease(17, 17, "").trainer_api == (2, 2)  # an exact release (v0.17)


def test_submit_refuses_a_field_the_clusters_kueue_drops(cluster: PortCluster) -> None:
    grace = spec(queue=QUEUE, termination_grace_period_seconds=60)
    serves_v1beta1 = cluster.store.served("kueue.x-k8s.io/v1beta1", "Workload") is not None
    if not serves_v1beta1:  # Kueue v0.20 on: built against Trainer v2.3's API
        assert submit(cluster, grace).name == "demo"
        return
    with pytest.raises(PreflightFailed) as info:
        submit(cluster, grace)
    *older, line = info.value.problems
    serves_v1beta2 = cluster.store.served("kueue.x-k8s.io/v1beta2", "Workload") is not None
    api = "v2.2" if serves_v1beta2 else "v2.0"  # Kueue v0.15-v0.19, else v0.13-v0.14
    assert line.startswith(f"{GRACE}: Kueue v0.1")
    has_no = "which has no terminationGracePeriodSeconds: Kueue drops it when it admits the job"
    assert f"is built against Trainer {api}'s API, {has_no}" in line
    assert line.endswith("(submit --force submits it anyway)")
    # Trainer v2.0's API has no runtimePatches either: Kueue v0.14 drops every patch
    assert [o.split(":")[0] for o in older] == ([] if serves_v1beta2 else ["spec.runtimePatches"])
    assert cluster.calls.count("create") == 0
    # the same field on a job no queue holds, or without the field: submitted
    assert submit(cluster, spec("free", termination_grace_period_seconds=60)).name == "free"
    assert submit(cluster, spec("plain", queue=QUEUE)).name == "plain"


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
    assert f"kfcompile: {GRACE}: Kueue v0.15 to v0.19 (it serves kueue.x-k8s.io/v1beta2 " in err
    assert "Traceback" not in err
    assert main(["submit", str(path), "--force"]) == 0
    out, err = capsys.readouterr()
    assert (
        "TrainJob demo in namespace default: created" in out
        and f"kfcompile: warning (--force): {GRACE}: " in err
    )

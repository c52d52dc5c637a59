"""The target read from the cluster (``lifecycle.detect_target``), a Trainer newer than kfcompile
knows (the job checked against the CRD it serves first), and ``submit(dry_run=True)``: at the
port, against small fakes of each release built from the upstream CRDs (tests/fakekube/port.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube.cluster import CLAIM, NAMESPACE, RELEASES, PortCluster
from test_lifecycle import ENV, spec

from kfcompile import lifecycle
from kfcompile.lifecycle import TARGET_ANNOTATION, ClusterError, PreflightFailed
from kfcompile.lifecycle.ports import Invalid
from kfcompile_local import TarFiles

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
UNRELEASED = "unreleased/trainjobs-master-8c0f5059.yaml"  # main after v2.3: what v2.4 serves


def cluster(release: str, **kw: Any) -> PortCluster:
    return PortCluster(schema_check.require_shared(), crds=RELEASES[release], **kw)


def reads(c: PortCluster) -> list[tuple[str, str]]:
    """What detection read besides discovery: (kind, name) of each get."""
    return [(call.kind, str(call.name)) for call in c.calls.matching("get")]


CONFIGMAP = ("ConfigMap", "kubeflow-trainer-public")
CRD = ("CustomResourceDefinition", "trainjobs.trainer.kubeflow.org")


@pytest.mark.parametrize(
    ("release", "evidence", "read"),
    [
        ("trainjob/v2.0", "the served TrainJob CRD has spec.podSpecOverrides", [CONFIGMAP, CRD]),
        (
            "trainjob/v2.1",
            "the served TrainJob CRD has spec.podTemplateOverrides",
            [CONFIGMAP, CRD],
        ),
        (
            "trainjob/v2.2",
            "ConfigMap kubeflow-trainer-public says kubeflow_trainer_version: v2.2.1",
            [CONFIGMAP],  # the ConfigMap settles it: no cluster-wide read
        ),
        (
            "trainjob/v2.3",
            "ConfigMap kubeflow-trainer-public says kubeflow_trainer_version: v2.3.0",
            [CONFIGMAP],
        ),
        ("pytorchjob/v1", "only PyTorchJob (kubeflow.org/v1) is served", []),
    ],
)
def test_the_target_is_read_from_what_the_cluster_serves(
    release: str, evidence: str, read: list[tuple[str, str]]
) -> None:
    with cluster(release) as c:
        found = lifecycle.detect_target(c.session())
        assert (found.target, found.evidence, found.newer) == (release, evidence, False)
        assert reads(c) == read


def test_a_forbidden_crd_read_does_not_matter_when_the_configmap_answers() -> None:
    with cluster("trainjob/v2.2") as c:
        c.faults.add("get", "CustomResourceDefinition", status=403, times=5)
        assert lifecycle.detect_target(c.session()).target == "trainjob/v2.2"


def test_a_forbidden_configmap_falls_back_on_the_crd() -> None:
    # e.g. GKE Autopilot refuses the Trainer's binding of the ConfigMap to every user
    with cluster("trainjob/v2.3") as c:
        c.faults.add("get", "ConfigMap/kubeflow-trainer-public", status=403)
        found = lifecycle.detect_target(c.session())
        assert found.target == "trainjob/v2.3"
        assert found.evidence.startswith("the served TrainJob CRD has spec.runtimePatches")


def test_when_nothing_tells_the_release_it_says_what_it_tried() -> None:
    with cluster("trainjob/v2.1") as c:
        c.faults.add("get", "CustomResourceDefinition", status=403)
        with pytest.raises(ClusterError) as caught:
            lifecycle.detect_target(c.session())
    lines = str(caught.value).splitlines()
    assert "give --target (trainjob/v2.0, trainjob/v2.1, trainjob/v2.2, trainjob/v2.3)" in lines[0]
    assert lines[1] == (
        "  CustomResourceDefinition trainjobs.trainer.kubeflow.org: 403 Forbidden: forbidden: "
        "injected fault"
    )


# --- a Trainer newer than kfcompile knows -----------------------------------------------------


@pytest.fixture
def newer() -> Iterator[PortCluster]:
    """Trainer v2.4: its ConfigMap says so, and it serves the CRD of main after v2.3."""
    with PortCluster(
        schema_check.require_shared(),
        crds=(UNRELEASED, "pytorchjobs-v1.9.4.yaml"),
        trainer="v2.4.0",
    ) as c:
        yield c


def test_a_newer_release_gets_the_newest_shape_once_the_job_fits_its_crd(
    newer: PortCluster,
) -> None:
    session = newer.session()
    found = lifecycle.detect_target(session)
    assert (found.target, found.newer) == ("trainjob/v2.3", True)
    assert (
        found.evidence == "ConfigMap kubeflow-trainer-public says kubeflow_trainer_version: v2.4.0"
    )
    assert (
        found.crd is not None and found.crd["metadata"]["name"] == "trainjobs.trainer.kubeflow.org"
    )
    done = lifecycle.submit(
        session, spec(), found.target, namespace=NAMESPACE, environ={}, against=found.crd
    )
    job = newer.store.get(TRAINJOB, "TrainJob", NAMESPACE, done.ref.name)
    assert job is not None and job["metadata"]["annotations"][TARGET_ANNOTATION] == "trainjob/v2.3"


def test_a_job_that_does_not_fit_the_newer_crd_is_never_sent() -> None:
    """A release that changed the shape (here: dropped activeDeadlineSeconds): refused before
    anything is created, naming the field."""
    changed = copy.deepcopy(schema_check.load_crd(UNRELEASED))
    props = changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    del props["spec"]["properties"]["activeDeadlineSeconds"]
    with PortCluster(
        schema_check.require_shared(), crds=("pytorchjobs-v1.9.4.yaml",), trainer="v2.4.0"
    ) as c:
        c.store.create(changed)
        session = c.session()
        found = lifecycle.detect_target(session)
        with pytest.raises(PreflightFailed) as caught:
            lifecycle.submit(
                session,
                spec(active_deadline_seconds=600),
                found.target,
                namespace=NAMESPACE,
                environ={},
                against=found.crd,
            )
        assert c.calls.count("create") == 0
    [line] = caught.value.problems
    assert line.startswith("TrainJob/demo: spec: Additional properties are not allowed")
    assert "'activeDeadlineSeconds' was unexpected" in line
    assert line.endswith("(per the TrainJob CRD this cluster serves)")


def test_a_newer_release_whose_crd_cannot_be_read_needs_target(newer: PortCluster) -> None:
    newer.faults.add("get", "CustomResourceDefinition", status=403)
    with pytest.raises(ClusterError) as caught:
        lifecycle.detect_target(newer.session())
    first, tried = str(caught.value).splitlines()
    assert "newer than any Trainer release kfcompile knows" in first
    assert first.endswith(
        "give --target trainjob/v2.3 to send the newest shape kfcompile knows unchecked"
    )
    assert tried.startswith("  CustomResourceDefinition trainjobs.trainer.kubeflow.org: 403")


# --- submit --dry-run=server --------------------------------------------------------------------


def test_a_dry_run_sends_every_object_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print(1)\n")
    job = spec(
        launcher={"kind": "torchrun", "entrypoint": "train.py"},
        command=(),
        script="print('x')",
        secret_env=["HF_TOKEN"],
        work_dir={"local": str(tmp_path), "pvc": CLAIM, "mount_path": "/workspace"},
    )
    with cluster("trainjob/v2.3") as c:
        done = lifecycle.submit(
            c.session(),
            job,
            "trainjob/v2.3",
            namespace=NAMESPACE,
            environ=ENV,
            files=TarFiles(),
            dry_run=True,
        )
        assert (done.created, done.dry_run, done.uploaded) == (True, True, None)
        creates = [(call.kind, call.query) for call in c.calls.matching("create")]
        assert creates == [
            (kind, {"dry_run": True}) for kind in ("ConfigMap", "Secret", "TrainJob")
        ]
        assert c.calls.count("patch") == 0  # no owners set on companions that do not exist
        assert c.objects("ConfigMap") == c.objects("Secret") == c.objects("Pod") == []
        assert c.store.list(TRAINJOB, "TrainJob") == []
        assert c.calls.count("exec") == 0  # nothing uploaded
        # The real submit afterwards, then a dry run of the same spec: unchanged
        lifecycle.submit(c.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ=ENV)
        again = lifecycle.submit(
            c.session(), job, "trainjob/v2.3", namespace=NAMESPACE, environ=ENV, dry_run=True
        )
        assert (again.created, again.dry_run) == (False, True)


def test_a_dry_run_meets_the_clusters_own_rules() -> None:
    """What only the server knows (a CEL rule this cluster added to its CRD, an admission
    webhook) refuses the job in a dry run, with the server's words, and nothing is created."""
    words = (
        'TrainJob.trainer.kubeflow.org "demo" is invalid: spec.trainer: Invalid value: '
        '"object": this cluster runs one-node jobs only'
    )
    with cluster("trainjob/v2.3") as c:
        c.faults.add("create", "TrainJob", status=422, message=words)
        with pytest.raises(Invalid) as caught:
            lifecycle.submit(
                c.session(), spec(), "trainjob/v2.3", namespace=NAMESPACE, environ={}, dry_run=True
            )
        assert caught.value.message == words
        [create] = c.calls.matching("create", "TrainJob")
        assert create.query == {"dry_run": True}
        assert c.store.list(TRAINJOB, "TrainJob") == []

"""A Trainer release is one module: a hypothetical v2.4 (``release_v2_4``: v2.3 plus
``spec.backoffLimit``), registered only here, is known to detection (the cluster's ConfigMap
version and its served CRD), import, convert and render with no other edit. And the PyTorchJob
layout's rank rule, which its ``Kind`` carries."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import release_v2_4
import schema_check
from fakekube.cluster import PortCluster
from test_lifecycle_target import CONFIGMAP, UNRELEASED, reads

from kfcompile import (
    TARGETS,
    UnsupportedFeature,
    convert_manifest,
    import_manifest_lossy,
    lifecycle,
    render,
)
from kfcompile.kinds import PYTORCHJOB
from kfcompile.lifecycle.target_evidence import detect, from_crd
from kfcompile.spec.load import structure
from kfcompile.targets import RELEASES, registered, target, trainjob

V23, V24 = "trainjob/v2.3", "trainjob/v2.4"


@pytest.fixture
def v24() -> Iterator[None]:
    with registered(release_v2_4.RELEASE):
        yield


def spec(**extra: Any) -> Any:
    return structure({"name": "demo", "image": "python:3.11-slim", "num_nodes": 2, **extra})


def test_registering_leaves_the_registry_as_it_was() -> None:
    before = dict(TARGETS), dict(RELEASES)
    with registered(release_v2_4.RELEASE):
        assert TARGETS[V24] is release_v2_4.TARGET and RELEASES[V24] is release_v2_4.RELEASE
    assert (dict(TARGETS), dict(RELEASES)) == before


@pytest.mark.usefixtures("v24")
def test_detection_knows_it_from_the_configmap_version() -> None:
    found = detect(trainjob_served=True, pytorchjob_served=False, trainer_version="v2.4.1")
    assert (found.target, found.newer) == (V24, False)
    newer = detect(trainjob_served=True, pytorchjob_served=False, trainer_version="v2.5.0")
    assert (newer.target, newer.newer) == (V24, True)  # the newest known shape is now v2.4's


@pytest.mark.usefixtures("v24")
def test_a_cluster_whose_configmap_says_v2_4_is_v2_4_with_no_crd_read() -> None:
    with PortCluster(
        schema_check.require_shared(),
        crds=(UNRELEASED, "pytorchjobs-v1.9.4.yaml"),
        trainer="v2.4.0",
    ) as c:
        found = lifecycle.detect_target(c.session())
        assert (found.target, found.newer) == (V24, False)
        assert reads(c) == [CONFIGMAP]


@pytest.mark.usefixtures("v24")
def test_detection_knows_it_from_the_served_crd() -> None:
    crd = copy.deepcopy(schema_check.load_crd("trainjobs-v2.3.0.yaml"))
    for version in crd["spec"]["versions"]:
        spec_schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec_schema["properties"]["backoffLimit"] = {"type": "integer", "format": "int32"}
    found = from_crd(crd)
    assert found is not None
    assert (found.target, found.evidence) == (V24, "the served TrainJob CRD has spec.backoffLimit")
    plain = from_crd(schema_check.load_crd("trainjobs-v2.3.0.yaml"))
    assert plain is not None and plain.target == V23  # v2.3's CRD is still v2.3's


@pytest.mark.usefixtures("v24")
def test_render_places_its_new_field_and_checks_it_as_v2_3() -> None:
    job = render(spec(backoff_limit=3), V24)[-1]
    assert job["spec"]["backoffLimit"] == 3
    assert target(f"{V24}.2").name == V24  # its patch releases too
    with pytest.raises(UnsupportedFeature) as refused:
        render(spec(backoff_limit=3), V23)
    assert "supported by: pytorchjob/v1, trainjob/v2.4" in str(refused.value)
    env = {f"V{i}": "x" for i in range(129)}  # the CRD limit v2.4 shares with v2.3
    messages = []
    for name in (V23, V24):
        with pytest.raises(UnsupportedFeature) as too_many:
            render(spec(env=env), name)
        messages.append([p.message for p in too_many.value.problems])
    assert messages[0] == messages[1] and "at most 128" in messages[0][0]


def test_a_release_made_without_its_crd_limits_is_refused() -> None:
    """What render checks a release's output by is the release's own: one made without it is
    an error when made, not a release whose output nothing checks (200 env vars, exit 0)."""
    with pytest.raises(TypeError, match="limits"):
        trainjob.Release(
            (2, 4), release_v2_4.TABLE, release_v2_4.BACKOFF, release_v2_4.RELEASE.marks
        )


def test_a_release_whose_table_places_no_pod_is_refused() -> None:
    """The places the pod rules check are read from the release's table: a table without
    them is an error when the release is made."""
    table = {k: v for k, v in release_v2_4.TABLE.items() if not k.startswith("pod.")}
    with pytest.raises(ValueError, match=r"target trainjob/v2\.4: no pod\.\* slot in its table"):
        attrs.evolve(release_v2_4.RELEASE, table=table)


@pytest.mark.usefixtures("v24")
@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("env", {f"V{i}": "x" for i in range(200)}, "has 200 items; the CRD allows at most 128"),
        ("pod_annotations", {"example.com/big": "x" * 300_000}, "of annotations per object"),
        ("runtime_annotations", {"example.com/big": "x" * 300_000}, "of annotations per object"),
    ],
)
def test_a_release_built_from_v2_3_is_checked_by_every_check_of_v2_3(
    field: str, value: Any, said: str
) -> None:
    """v2.4, made from v2.3's release (``attrs.evolve``) and registered, carries v2.3's CRD
    limits and its pods' places: render refuses on it what it refuses on v2.3, in the same
    words."""
    messages = []
    for name in (V23, V24):
        with pytest.raises(UnsupportedFeature) as refused:
            render(spec(**{field: value}), name)
        messages.append([str(p) for p in refused.value.problems])
    assert messages[0] == messages[1] and said in messages[1][0], messages
    new, old = target(V24), target(V23)
    assert (new.limits, new.places) == (old.limits, old.places)
    assert new.places.pods and new.places.resources and len(new.places.annotations) == 4


@pytest.mark.usefixtures("v24")
def test_import_tells_it_by_its_mark_and_reads_its_field_back() -> None:
    imported = import_manifest_lossy(render(spec(backoff_limit=3), V24)[-1])
    assert imported.detected == "TrainJob for Trainer v2.4 (backoffLimit)"
    assert (imported.target, imported.spec.backoff_limit, imported.losses) == (V24, 3, ())
    plain = import_manifest_lossy(render(spec(), V23)[-1])
    assert plain.detected == (
        "TrainJob for any Trainer release v2.0-v2.4 (no release-specific field)"
    )
    assert plain.target == V24  # the newest release that fits


@pytest.mark.usefixtures("v24")
def test_convert_writes_it() -> None:
    pytorchjob = render(spec(backoff_limit=3, num_nodes=1), "pytorchjob/v1")[-1]
    converted = convert_manifest(pytorchjob, V24)
    assert converted.losses == () and converted.objects[-1]["spec"]["backoffLimit"] == 3
    lossy = convert_manifest(pytorchjob, V23, allow_lossy=True)
    assert [str(p.at) for p in lossy.losses] == ["spec.runPolicy.backoffLimit"]


def pytorchjob(*types: str) -> dict[str, Any]:
    return {"kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {t: {} for t in types}}}


@pytest.mark.parametrize(
    ("types", "label", "index", "rank"),
    [
        (("Master", "Worker"), "master", 0, 0),
        (("Master", "Worker"), "worker", 0, 1),  # the operator's RANK: index + 1 with a Master
        (("Master", "Worker"), "worker", 6, 7),
        (("Worker",), "worker", 0, 0),  # elastic: Workers only
        (("Worker",), "worker", 3, 3),
        (("Master", "Worker"), "None", 2, 3),  # no type label: read as a Worker
    ],
)
def test_a_pytorchjob_pods_rank_follows_its_replica_types(
    types: tuple[str, ...], label: str, index: int, rank: int
) -> None:
    assert PYTORCHJOB.replica_rank(pytorchjob(*types), label, index) == rank

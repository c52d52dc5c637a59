"""Telling the target from what a cluster serves (KUBEFLOW.md, "Telling the release from a
cluster"): the CRD files of each release in ../shared/crds are what a cluster of that release
serves."""

from __future__ import annotations

from typing import Any

import pytest
import schema_check

from kfcompile.lifecycle.target_evidence import NotDetected, detect, from_crd, from_version

RELEASE_CRDS = {
    "trainjobs-v2.0.1.yaml": "trainjob/v2.0",
    "trainjobs-v2.1.0.yaml": "trainjob/v2.1",
    "trainjobs-v2.2.1.yaml": "trainjob/v2.2",
    "trainjobs-v2.3.0.yaml": "trainjob/v2.3",
    # main after v2.3 (and so v2.4): the v2.3 shape, as KUBEFLOW.md records
    "unreleased/trainjobs-master-8c0f5059.yaml": "trainjob/v2.3",
}


def crd(name: str) -> dict[str, Any]:
    return schema_check.load_crd(name)  # parsed once per file: CRDs are megabytes of YAML


@pytest.mark.parametrize(("name", "target"), list(RELEASE_CRDS.items()))
def test_the_served_crd_tells_the_release(name: str, target: str) -> None:
    found = from_crd(crd(name))
    assert found is not None and found.target == target
    assert found.evidence.startswith("the served TrainJob CRD has spec.")
    assert detect(trainjob_served=True, pytorchjob_served=True, trainjob_crd=crd(name)) == found


@pytest.mark.parametrize(
    ("version", "target", "newer"),
    [
        ("v2.2.1", "trainjob/v2.2", False),
        ("v2.3.0", "trainjob/v2.3", False),
        ("2.3.4", "trainjob/v2.3", False),
        ("v2.3.0-rc.1", "trainjob/v2.3", False),
        ("v2.4.0", "trainjob/v2.3", True),  # newer than kfcompile knows: the newest shape
        ("v2.10.2", "trainjob/v2.3", True),
    ],
)
def test_the_configmap_version_wins(version: str, target: str, newer: bool) -> None:
    found = detect(
        trainjob_served=True,
        pytorchjob_served=False,
        trainer_version=version,
        trainjob_crd=crd("trainjobs-v2.2.1.yaml"),  # the ConfigMap is stronger evidence
    )
    assert (found.target, found.newer) == (target, newer)
    assert f"kubeflow_trainer_version: {version}" in found.evidence


@pytest.mark.parametrize("version", ["v3.0.0", "v1.9.4", "latest", ""])
def test_a_version_that_is_no_known_line_is_not_guessed(version: str) -> None:
    assert from_version(version) is None


def test_pytorchjob_only_when_no_trainjob_is_served() -> None:
    found = detect(trainjob_served=False, pytorchjob_served=True)
    assert found.target == "pytorchjob/v1" and "only PyTorchJob" in found.evidence


def test_nothing_served_or_nothing_to_tell_says_what_to_do() -> None:
    with pytest.raises(NotDetected, match="serves neither TrainJob"):
        detect(trainjob_served=False, pytorchjob_served=False)
    with pytest.raises(NotDetected, match="give --target"):
        detect(trainjob_served=True, pytorchjob_served=False, trainjob_crd={"spec": {}})

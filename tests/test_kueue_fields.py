"""Kueue topology-aware scheduling and ProvisioningRequest as typed spec fields (issue 23 §5):
``topology`` (one of required/preferred/unconstrained, a slice level and size, a pod set group)
written as Kueue's PodSet annotations on the pod template of every target that has one, and
``provisioning_parameters`` as the job's ``provreq.kueue.x-k8s.io/`` annotations; checked when
loaded, as Kueue's webhook checks them (kueue pkg/controller/jobframework/tas_validation.go),
and imported back. Where each lands is written here from KUBEFLOW.md, not read from the
targets' tables (the property tests cover generated values: test_properties.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kfcompile import SpecError, UnsupportedFeature, explain, render, structure
from kfcompile.importer import convert_manifest, import_manifest, import_manifest_lossy

PT = "pytorchjob/v1"
V20, V21, V22, V23 = (f"trainjob/v2.{i}" for i in range(4))
KUEUE = "kueue.x-k8s.io/"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
Obj = dict[str, Any]


def spec(**extra: Any) -> Any:
    launcher = {"kind": "torchrun", "entrypoint": "train.py"}
    return structure(
        {"name": "llama", "image": "img:1", "num_nodes": 4, "launcher": launcher, **extra}
    )


def pod_annotations(job: Obj, target: str) -> list[dict[str, str]]:
    """KUBEFLOW.md: PyTorchJob template metadata (every replica); v2.1 podTemplateOverrides
    metadata; v2.2+ runtimePatches replicatedJobs[node] template.spec.template.metadata."""
    s = job["spec"]
    if target == PT:
        return [r["template"]["metadata"]["annotations"] for r in s["pytorchReplicaSpecs"].values()]
    if target == V21:
        [override] = s["podTemplateOverrides"]
        assert override["targetJobs"] == [{"name": "node"}]
        return [override["metadata"]["annotations"]]
    [patch] = s["runtimePatches"]
    [rjob] = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == "node"
    return [rjob["template"]["spec"]["template"]["metadata"]["annotations"]]


TOPOLOGIES = {
    "required": (
        {"required": BLOCK},
        {f"{KUEUE}podset-required-topology": BLOCK},
    ),
    "preferred, sliced": (
        {"preferred": BLOCK, "slice_required": RACK, "slice_size": 1},
        {
            f"{KUEUE}podset-preferred-topology": BLOCK,
            f"{KUEUE}podset-slice-required-topology": RACK,
            f"{KUEUE}podset-slice-size": "1",
        },
    ),
    "unconstrained": (
        {"unconstrained": True},
        {f"{KUEUE}podset-unconstrained-topology": "true"},
    ),
}


@pytest.mark.parametrize("target", [PT, V21, V22, V23])
@pytest.mark.parametrize("case", TOPOLOGIES)
def test_topology_is_the_pod_templates_kueue_annotations(case: str, target: str) -> None:
    given, annotations = TOPOLOGIES[case]
    job = render(spec(topology=given, pod_annotations={"team": "a"}), target)[-1]
    for found in pod_annotations(job, target):
        assert found == {"team": "a", **annotations}
    assert "annotations" not in job["metadata"]  # nothing on the job itself
    back = import_manifest(job)
    assert back.topology == spec(topology=given).topology
    assert dict(back.pod_annotations) == {"team": "a"}


def test_trainer_v2_0_cannot_carry_it_and_says_who_can() -> None:
    with pytest.raises(UnsupportedFeature) as raised:
        render(spec(topology={"required": BLOCK}), V20)
    assert str(raised.value) == (
        "topology: not supported by trainjob/v2.0 (supported by: pytorchjob/v1, trainjob/v2.1, "
        "trainjob/v2.2, trainjob/v2.3)"
    )


@pytest.mark.parametrize("target", [PT, V20, V21, V22, V23])
def test_provisioning_parameters_are_the_jobs_annotations(target: str) -> None:
    given = {"ValidUntilSeconds": "3600", "CapacityReservation": "res-1"}
    job = render(spec(provisioning_parameters=given, annotations={"a": "b"}), target)[-1]
    assert job["metadata"]["annotations"] == {
        "a": "b",
        "provreq.kueue.x-k8s.io/ValidUntilSeconds": "3600",
        "provreq.kueue.x-k8s.io/CapacityReservation": "res-1",
    }
    back = import_manifest(job)
    assert (dict(back.provisioning_parameters), dict(back.annotations)) == (given, {"a": "b"})


def test_converting_drops_only_what_the_target_refuses() -> None:
    """A PyTorchJob's Master and Workers may form a pod set group; a TrainJob's annotations
    reach its `node` job only, so the group is dropped there, and the rest is kept."""
    topology = {"preferred": BLOCK, "group_name": "leader-workers"}
    job = render(spec(topology=topology, provisioning_parameters={"X": "1"}), PT)[-1]
    converted = convert_manifest(job, V23, allow_lossy=True)
    assert [str(p) for p in converted.losses] == [
        "spec.pytorchReplicaSpecs.Master.template.metadata.annotations"
        f'["{KUEUE}podset-group-name"]: Kueue groups exactly two pod sets, one of a single pod '
        "(a PyTorchJob's Master and Workers): a TrainJob has node (4 pods): dropped"
    ]
    trainjob = converted.objects[-1]
    assert pod_annotations(trainjob, V23) == [{f"{KUEUE}podset-preferred-topology": BLOCK}]
    assert trainjob["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/X": "1"}


@pytest.mark.parametrize(
    ("topology", "problems"),
    [
        ({}, ["topology: set exactly one of required, preferred or unconstrained"]),
        (
            {"required": BLOCK, "unconstrained": True},
            ["topology.unconstrained: set exactly one of required, preferred or unconstrained"],
        ),
        ({"preferred": "not a label!"}, ["topology.preferred: name part must consist of"]),
        (
            {"required": BLOCK, "slice_required": RACK},
            ["topology.slice_required: needs slice_size"],
        ),
        ({"required": BLOCK, "slice_size": 2}, ["topology.slice_size: needs slice_required"]),
        (
            {"required": BLOCK, "slice_required": RACK, "slice_size": 0},
            ["topology.slice_size: must be at least 1"],
        ),
        ({"required": BLOCK, "group_name": "12"}, ["topology.group_name: must be a name"]),
        ({"unconstrained": True, "group_name": "g"}, ["topology.group_name: needs required or"]),
        (
            {"required": BLOCK, "group_name": "g", "slice_required": RACK, "slice_size": 1},
            ["topology.group_name: Kueue refuses a group with slices"],
        ),
        ({"required": BLOCK, "levels": 2}, ["topology.levels: unknown field"]),
    ],
)
def test_a_topology_kueue_would_refuse_is_refused_when_loaded(
    topology: Obj, problems: list[str]
) -> None:
    with pytest.raises(SpecError) as raised:
        spec(topology=topology)
    found = [str(p) for p in raised.value.problems]
    assert len(found) == len(problems) and all(
        f.startswith(p) for f, p in zip(found, problems, strict=True)
    ), found


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (
            {"pod_annotations": {f"{KUEUE}podset-required-topology": BLOCK}},
            f'pod_annotations["{KUEUE}podset-required-topology"] (key): set it as '
            "topology.required",
        ),
        (
            {"annotations": {"provreq.kueue.x-k8s.io/ValidUntilSeconds": "60"}},
            'annotations["provreq.kueue.x-k8s.io/ValidUntilSeconds"] (key): set it as '
            "provisioning_parameters.ValidUntilSeconds",
        ),
        (
            {"provisioning_parameters": {"not/a name": "1"}},
            'provisioning_parameters["not/a name"] (key): ',
        ),
    ],
)
def test_each_is_given_in_one_place(extra: Obj, problem: str) -> None:
    with pytest.raises(SpecError) as raised:
        spec(**extra)
    [found] = [str(p) for p in raised.value.problems]
    assert found.startswith(problem), found


@pytest.mark.parametrize(
    ("num_nodes", "topology", "target", "problem"),
    [
        (
            4,
            {"required": BLOCK, "slice_required": RACK, "slice_size": 2},
            PT,
            "topology.slice_size: Kueue refuses a slice larger than a pod set: a PyTorchJob's "
            "Master has 1 pod",
        ),
        (
            2,
            {"required": BLOCK, "slice_required": RACK, "slice_size": 3},
            V23,
            "topology.slice_size: Kueue refuses a slice larger than a pod set: a TrainJob's "
            "node has 2 pods",
        ),
        (
            1,
            {"required": BLOCK, "group_name": "g"},
            PT,
            "topology.group_name: Kueue groups exactly two pod sets, one of a single pod (a "
            "PyTorchJob's Master and Workers): a PyTorchJob has Master (1 pod)",
        ),
    ],
)
def test_slices_and_groups_must_fit_the_targets_pod_sets(
    num_nodes: int, topology: Obj, target: str, problem: str
) -> None:
    with pytest.raises(UnsupportedFeature) as raised:
        render(spec(num_nodes=num_nodes, topology=topology), target)
    assert str(raised.value) == problem


def test_a_pytorchjobs_master_and_workers_form_a_group_and_slice_by_one() -> None:
    topology = {"required": BLOCK, "group_name": "llama"}
    job = render(spec(topology=topology), PT)[-1]
    for found in pod_annotations(job, PT):
        assert found[f"{KUEUE}podset-group-name"] == "llama"
    sliced = {"required": BLOCK, "slice_required": RACK, "slice_size": 4}
    assert render(spec(topology=sliced), V23)  # a TrainJob's node: 4 pods


def test_explain_shows_each_field_where_it_lands() -> None:
    given = spec(topology={"unconstrained": True}, provisioning_parameters={"X": "1"})
    placed = {p.source: p.path for p in explain(given, V22)}
    assert placed["topology.unconstrained"] == (
        "spec.runtimePatches[manager=kfcompile.dev/kfcompile].trainingRuntimeSpec.template.spec."
        f'replicatedJobs[name=node].template.spec.template.metadata.annotations["{KUEUE}'
        'podset-unconstrained-topology"]'
    )
    assert placed["provisioning_parameters.X"] == (
        'metadata.annotations["provreq.kueue.x-k8s.io/X"]'
    )


@pytest.mark.parametrize(
    ("value", "loss"),
    [
        ("abc", "topology.slice_size is written as a number only: dropped"),
        ("-1", "topology.slice_size is written as a number only: dropped"),
    ],
)
def test_an_annotation_kfcompile_cannot_read_is_a_loss(value: str, loss: str) -> None:
    job = render(spec(topology={"required": BLOCK}), V23)[-1]
    [annotations] = pod_annotations(job, V23)
    annotations[f"{KUEUE}podset-slice-size"] = value
    imported = import_manifest_lossy(job)
    assert [str(p) for p in imported.losses] == [
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec"
        ".replicatedJobs[name=node].template.spec.template.metadata.annotations"
        f'["{KUEUE}podset-slice-size"]: {loss}'
    ]
    assert imported.spec.topology == spec(topology={"required": BLOCK}).topology

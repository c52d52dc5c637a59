"""The ``KfcompileExecutor`` parameter table (``nemo_run_task.PARAMETERS``) both ways: each
parameter's value reaches the spec field its row names (forward, ``job_spec``), and a problem at
that spec field is told by the parameter (backward, ``checked``). The expectations are stated
here, independently of the table, so a row right one way and wrong the other fails. Needs the
real NeMo-Run (CI's launcher environment)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

pytest.importorskip(
    "nemo_run", reason="nemo_run is not installed (pip install -e '.[nemo]'; CI's launcher env)"
)

from torchx.specs import Role

import kfcompile
from kfcompile.integrations.nemo_run import KfcompileExecutor
from kfcompile.integrations.nemo_run_task import PARAMETERS, ExecutorError, checked
from kfcompile.spec.errors import KfcompileError, Problem

IMAGE = "nvcr.io/nvidia/nemo:25.02"
PYTORCHJOB = {"target": "pytorchjob/v1"}  # some land on PyTorchJob only (README)

# Parameter -> (parameters given, the spec fields they give, unstructured).
FORWARD: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {
    "train_job_basename": [({"train_job_basename": "Llama"}, {})],  # the name: see the test
    "namespace": [({"namespace": "team-a"}, {"namespace": "team-a"})],
    "image": [({"image": "img:2"}, {"image": "img:2"})],
    "num_nodes": [({"num_nodes": 3}, {"num_nodes": 3})],
    "labels": [({"labels": {"a": "b"}}, {"labels": {"a": "b"}})],
    "annotations": [({"annotations": {"a": "b"}}, {"annotations": {"a": "b"}})],
    "pod_labels": [({"pod_labels": {"a": "b"}}, {"pod_labels": {"a": "b"}})],
    "pod_annotations": [({"pod_annotations": {"a": "b"}}, {"pod_annotations": {"a": "b"}})],
    "env_vars": [({"env_vars": {"MODE": "fast"}}, {"env": {"MODE": "fast"}})],
    "env_list": [
        ({"env_list": [{"name": "B", "value": "2"}]}, {"env_list": [{"name": "B", "value": "2"}]})
    ],
    "extra_resource_requests": [
        (
            {"extra_resource_requests": {"ephemeral-storage": "1Gi"}},
            {"extra_resource_requests": {"ephemeral-storage": "1Gi"}},
        )
    ],
    "extra_resource_limits": [
        ({"extra_resource_limits": {"x.io/y": "1"}}, {"extra_resource_limits": {"x.io/y": "1"}})
    ],
    "volumes": [
        (
            {"volumes": [{"name": "d", "emptyDir": {}}]},
            {"volumes": [{"name": "d", "emptyDir": {}}]},
        )
    ],
    "volume_mounts": [
        (
            {
                "volumes": [{"name": "d", "emptyDir": {}}],
                "volume_mounts": [{"name": "d", "mountPath": "/d"}],
            },
            {"volume_mounts": [{"name": "d", "mountPath": "/d"}]},
        )
    ],
    "tolerations": [
        (
            {"tolerations": [{"key": "k", "operator": "Exists"}]},
            {"tolerations": [{"key": "k", "operator": "Exists"}]},
        )
    ],
    "image_pull_secrets": [
        ({"image_pull_secrets": ["regcred"]}, {"image_pull_secrets": ["regcred"]})
    ],
    "pod_spec_overrides": [
        (
            {**PYTORCHJOB, "pod_spec_overrides": {"dnsPolicy": "ClusterFirstWithHostNet"}},
            {"pod_spec_overrides": {"dnsPolicy": "ClusterFirstWithHostNet"}},
        )
    ],
    "container_kwargs": [
        (
            {**PYTORCHJOB, "container_kwargs": {"workingDir": "/w"}},
            {"container_overrides": {"workingDir": "/w"}},
        )
    ],
    "runtime_ref": [
        ({"runtime_ref": "my-runtime"}, {"runtime_ref": {"name": "my-runtime"}}),
        ({}, {"runtime_ref": None}),  # the default runtime is no runtime_ref
    ],
    "nprocs_per_node": [({"nprocs_per_node": 4}, {"nprocs_per_node": 4})],
    "gpus_per_node": [({"gpus_per_node": 8}, {"gpus_per_node": 8}), ({}, {"gpus_per_node": None})],
    "cpu_requests": [({"cpu_requests": "2"}, {"cpu_request": "2"})],
    "cpu_limits": [({"cpu_limits": "4"}, {"cpu_limit": "4"})],
    "memory_requests": [({"memory_requests": "8Gi"}, {"memory_request": "8Gi"})],
    "memory_limits": [({"memory_limits": "16Gi"}, {"memory_limit": "16Gi"})],
    "affinity": [
        (
            {"affinity": {"nodeAffinity": {}}},
            {"affinity": {"nodeAffinity": {}}},
        )
    ],
    "retries": [
        ({**PYTORCHJOB, "retries": 2}, {"backoff_limit": 2}),
        ({**PYTORCHJOB, "retries": 0}, {"backoff_limit": None}),
    ],
    "restart_policy": [
        ({**PYTORCHJOB, "restart_policy": "Never"}, {"restart_policy": "Never"}),
        ({}, {"restart_policy": None}),  # TrainJob: the default is the runtime's
    ],
}
# Spec field -> the parameter a problem there is told by.
BACKWARD: dict[str, str] = {
    "name": "train_job_basename",
    "env": "env_vars",
    "container_overrides": "container_kwargs",
    "cpu_request": "cpu_requests",
    "cpu_limit": "cpu_limits",
    "memory_request": "memory_requests",
    "memory_limit": "memory_limits",
    "backoff_limit": "retries",
}


def _spec(given: dict[str, Any]) -> dict[str, Any]:
    executor = KfcompileExecutor(**{"image": IMAGE, **given})
    role = Role("train", "", entrypoint="python", args=["t.py"], env=executor.env_vars)
    data: dict[str, Any] = kfcompile.unstructure(
        executor.job_spec(role, executor.k8s_job_name("task"))
    )
    return data


def test_every_row_is_an_executor_parameter_and_is_tested() -> None:
    parameters = {f.name for f in dataclasses.fields(KfcompileExecutor)}
    assert {p.parameter for p in PARAMETERS} <= parameters
    assert [p.parameter for p in PARAMETERS] == list(FORWARD)


@pytest.mark.parametrize(
    ("given", "expected"),
    [pytest.param(*case, id=name) for name, cases in FORWARD.items() for case in cases],
)
def test_a_parameter_reaches_its_spec_field(
    given: dict[str, Any], expected: dict[str, Any]
) -> None:
    spec = _spec(given)
    assert {k: spec.get(k) for k in expected} == expected
    if "train_job_basename" in given:
        assert spec["name"].startswith("llama-")


@pytest.mark.parametrize("row", PARAMETERS, ids=[p.parameter for p in PARAMETERS])
def test_a_problem_at_the_spec_field_is_told_by_the_parameter(row: Any) -> None:
    def fails() -> None:
        raise KfcompileError([Problem(f"{row.field}.x", "wrong")])

    with pytest.raises(ExecutorError) as caught:
        checked(fails, {})
    assert [p.path for p in caught.value.problems] == [f"{BACKWARD.get(row.field, row.field)}.x"]


def test_a_bad_value_is_told_by_the_parameter_end_to_end() -> None:
    with pytest.raises(ExecutorError) as caught:
        _spec({"cpu_requests": "lots", "labels": {"a": 1}, "num_nodes": 0})
    assert sorted(p.path.partition(":")[0] for p in caught.value.problems) == [
        "cpu_requests",
        "labels.a",
        "num_nodes",
    ]

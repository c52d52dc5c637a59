"""The runtime a TrainJob names, read at submit (issue 23 §5): overrides and patches may name only
the runtime's replicated jobs and containers, initializers need its initializer jobs, and the
JobSet name budget comes from its real replicated jobs (the JobSet webhook's rule in
KUBEFLOW.md); and the names the Trainer takes (its token volume and mount path, the
``<name>-runtime-snapshot`` ConfigMap) are refused when a spec is loaded. Run at the Cluster
port (``PortCluster``), whose runtimes are ../shared/crds's."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, RELEASES, PortCluster, upstream_runtime

from kfcompile import lifecycle, structure
from kfcompile.lifecycle import PreflightFailed
from kfcompile.lifecycle.runtimes import named, problems, replicated_jobs
from kfcompile.spec.errors import SpecError
from kfcompile.spec.model import JobSpec

API = "trainer.kubeflow.org/v1alpha1"
TRAINJOBS = tuple(f"trainjob/v2.{i}" for i in range(4))
Obj = dict[str, Any]


@pytest.fixture
def local(request: pytest.FixtureRequest) -> Iterator[PortCluster]:
    """A cluster serving the TrainJob CRD of the test's ``target`` (v2.3 without one)."""
    target = getattr(request, "param", None) or "trainjob/v2.3"
    with PortCluster(schema_check.require_shared(), crds=RELEASES[target]) as cluster:
        yield cluster


def runtime(local: PortCluster, name: str, like: str = "torch-distributed", *,
            kind: str = "ClusterTrainingRuntime", job: str | None = None,
            container: str | None = None) -> None:  # fmt: skip
    """A runtime ``name`` made from the upstream ``like``: its `node` job renamed ``job``, its
    `node` container renamed ``container``."""
    made = copy.deepcopy(upstream_runtime(schema_check.require_shared(), like))
    made["kind"] = kind
    made["metadata"] = {"name": name}
    if kind == "TrainingRuntime":
        made["metadata"]["namespace"] = NAMESPACE
    for rjob in made["spec"]["template"]["spec"]["replicatedJobs"]:
        if rjob["name"] == "node":
            rjob["name"] = job or "node"
            pod = rjob["template"]["spec"]["template"]["spec"]
            pod["containers"][0]["name"] = container or "node"
    local.store.create(made)


def spec(name: str = "demo", **extra: Any) -> JobSpec:
    return structure({"name": name, "image": "python:3.12", "num_nodes": 2, **extra})


def submit(local: PortCluster, job: JobSpec, target: str = "trainjob/v2.3") -> None:
    lifecycle.submit(local.session(), job, target, namespace=NAMESPACE, environ={})


def refused(local: PortCluster, job: JobSpec, target: str) -> list[str]:
    with pytest.raises(PreflightFailed) as info:
        submit(local, job, target)
    assert local.calls.count("create") == 0  # nothing made
    return list(info.value.problems)


WHERE = {
    "trainjob/v2.0": "spec.podSpecOverrides[0]",
    "trainjob/v2.1": "spec.podTemplateOverrides[0]",
    "trainjob/v2.2": "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]",
    "trainjob/v2.3": "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]",
}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(("local", "target"), [(t, t) for t in TRAINJOBS], indirect=["local"])
def test_an_override_naming_a_replicated_job_the_runtime_lacks_is_refused(
    local: PortCluster, target: str
) -> None:
    """kfcompile patches the job `node`; a runtime whose trainer job is `trainer` lacks it:
    Trainer v2.3 would append a broken `node` job, v2.0-v2.2 drop the tolerations."""
    runtime(local, "team-trainer", job="trainer")
    job = spec(runtime_ref={"name": "team-trainer"}, tolerations=[TOLERATION])
    assert refused(local, job, target) == [
        "ClusterTrainingRuntime team-trainer has no replicatedJob 'node' (it has: trainer), "
        f"which the TrainJob's {WHERE[target]} names: the Trainer would ignore it or add it "
        "broken; set runtime_ref to a runtime that has it, or drop it from the spec"
    ]


@pytest.mark.parametrize(("local", "target"), [(t, t) for t in TRAINJOBS], indirect=["local"])
def test_an_override_naming_a_container_the_runtime_lacks_is_refused(
    local: PortCluster, target: str
) -> None:
    runtime(local, "team-pytorch", kind="TrainingRuntime", container="pytorch")
    job = spec(
        runtime_ref={"name": "team-pytorch", "kind": "TrainingRuntime"},
        volumes=[{"name": "data", "emptyDir": {}}],
        volume_mounts=[{"name": "data", "mountPath": "/data"}],
        pod_spec_overrides={
            "containers": [{"name": "pytorch", "env": [{"name": "A", "value": "1"}]}]
        },
    )
    pod = {
        "trainjob/v2.0": "",
        "trainjob/v2.1": ".spec",
        "trainjob/v2.2": ".template.spec.template.spec",
        "trainjob/v2.3": ".template.spec.template.spec",
    }[target]
    assert refused(local, job, target) == [
        "TrainingRuntime team-pytorch: replicatedJob 'node' has no container 'node' (it has: "
        f"pytorch), which the TrainJob's {WHERE[target]}{pod}.containers[name=node] names: the "
        "Trainer would ignore it or add it broken; set runtime_ref to a runtime that has it, or "
        "drop it from the spec"
    ]


@pytest.mark.parametrize("local", ["trainjob/v2.1"], indirect=True)
def test_the_runtimes_own_names_are_accepted(local: PortCluster) -> None:
    runtime(local, "team-pytorch", container="pytorch")
    job = spec(
        runtime_ref={"name": "team-pytorch"},
        tolerations=[TOLERATION],
        pod_spec_overrides={
            "containers": [{"name": "pytorch", "env": [{"name": "A", "value": "1"}]}]
        },
    )
    submit(local, job, "trainjob/v2.1")
    assert local.calls.count("create", "TrainJob") == 1


# The pod name the JobSet webhook checks for the dataset initializer of job <name>:
# <name>-dataset-initializer-0-0-abcde, 30 characters more than the name (KUBEFLOW.md: 33).
CACHED_LIMIT = 63 - len("-dataset-initializer-0-0-abcde")


@pytest.mark.parametrize("kind", ["ClusterTrainingRuntime", "TrainingRuntime"])
def test_the_name_budget_is_the_real_runtimes(local: PortCluster, kind: str) -> None:
    """A runtime kfcompile does not know by name, with a dataset initializer: render allows a
    name as long as the nodes' pods take (49 - digits); the runtime's initializer job allows 33,
    and a longer name would be accepted and then never make a JobSet."""
    runtime(local, "cached", "torch-distributed-with-cache", kind=kind)
    ref = {"name": "cached", "kind": kind}
    long_name = "a" * (CACHED_LIMIT + 1)
    [line] = refused(local, spec(long_name, runtime_ref=ref), "trainjob/v2.3")
    assert line == (
        f"too long for a TrainJob on {kind} cached (JobSet pods): pod name "
        f"'{long_name}-dataset-initializer-0-0-abcde' would be 64 characters (a DNS label "
        f"allows 63); this spec allows names of at most {CACHED_LIMIT} characters"
    )
    submit(local, spec("a" * CACHED_LIMIT, runtime_ref=ref))
    assert local.calls.count("create", "TrainJob") == 1


def test_the_budget_counts_the_runtimes_job_names(local: PortCluster) -> None:
    """A runtime whose trainer job is `trainer`, not `node`: its pods' names are 3 characters
    longer than render can know."""
    runtime(local, "team-trainer", job="trainer")
    name = "b" * (63 - len("-node-0-1-abcde"))  # what render allows for 2 nodes
    [line] = refused(local, spec(name, runtime_ref={"name": "team-trainer"}), "trainjob/v2.3")
    assert f"'{name}-trainer-0-1-abcde' would be 66 characters" in line
    assert line.endswith(f"at most {63 - len('-trainer-0-1-abcde')} characters")


def test_an_initializer_needs_the_runtimes_initializer_job(local: PortCluster) -> None:
    runtime(local, "plain")
    dataset = {"dataset": {"storage_uri": "hf://org/data"}}
    [line] = refused(
        local, spec(runtime_ref={"name": "plain"}, initializer=dataset), "trainjob/v2.3"
    )
    assert line == (
        "ClusterTrainingRuntime plain has no dataset-initializer job (a replicatedJob labelled "
        "trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer with a container "
        "dataset-initializer): initializer.dataset would be ignored; set runtime_ref to a "
        "runtime that has it, or drop it from the spec"
    )
    cached = {"name": "torch-distributed-with-cache"}
    submit(local, spec(runtime_ref=cached, initializer=dataset))
    assert local.calls.count("create", "TrainJob") == 1


def test_a_runtime_that_may_not_be_read_is_left_to_the_trainer(local: PortCluster) -> None:
    runtime(local, "team-trainer", job="trainer")
    local.faults.add("get", "ClusterTrainingRuntime", status=403)
    submit(local, spec(runtime_ref={"name": "team-trainer"}, tolerations=[TOLERATION]))
    assert local.calls.count("create", "TrainJob") == 1


@pytest.mark.parametrize(
    ("runtime_obj", "jobs"),
    [
        ({}, []),
        ({"spec": "x"}, []),
        ({"spec": {"template": {"spec": {"replicatedJobs": [1, {"name": 2}, {"name": "n"}]}}}},
         ["n"]),
        ({"spec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "replicas": -3, "template": {"metadata": {"labels": []},
             "spec": {"completions": True, "template": {"spec": {"containers": ["x", {}]}}}}},
        ]}}}}, ["node"]),
    ],
)  # fmt: skip
def test_a_runtime_of_any_shape_is_read_without_failing(runtime_obj: Obj, jobs: list[str]) -> None:
    """The runtime is the cluster's answer: what is not shaped like a replicated job is left
    out, counts not positive are the API's default."""
    found = replicated_jobs(runtime_obj)
    assert [j.name for j in found] == jobs
    assert all((j.replicas, j.completions, j.step) == (1, 1, None) for j in found)
    job = {"spec": {"podSpecOverrides": [{"targetJobs": [{"name": "node"}]}]}}
    lines = problems(spec(), job, runtime_obj)
    assert bool(lines) == ("node" not in jobs)  # names the missing `node`, nothing else


def test_what_each_release_names_is_read() -> None:
    patch = {"template": {"spec": {"template": {"spec": {"initContainers": [{"name": "i"}]}}}}}
    job = {
        "spec": {
            "runtimePatches": [
                {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
                    {"name": "node", **patch}]}}}}
            ]
        }
    }  # fmt: skip
    at = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    assert [(n.at, n.job, n.key, n.container) for n in named(job)] == [
        (at, "node", None, None),
        (f"{at}.template.spec.template.spec.initContainers[name=i]", "node", "initContainers", "i"),
    ]


# --- the names the Trainer takes ---------------------------------------------------------------

TAKEN = {
    "the token volume": (
        {"volumes": [{"name": "kubeflow-trainer-token", "emptyDir": {}}]},
        "volumes[0].name: the name 'kubeflow-trainer-token' is used by the Trainer (its "
        "progress-reporting token, which replaces this volume)",
    ),
    "the token's mount path": (
        {
            "volumes": [{"name": "t", "emptyDir": {}}],
            "volume_mounts": [{"name": "t", "mountPath": "/var/run/secrets/kubeflow//trainer/"}],
        },
        "volume_mounts[0].mountPath: already mounted by the Trainer (its progress-reporting "
        "token, which replaces this mount)",
    ),
    "the token's mount path, in an override": (
        {
            "volumes": [{"name": "t", "emptyDir": {}}],
            "container_overrides": {
                "volumeMounts": [{"name": "t", "mountPath": "/var/run/secrets/kubeflow/trainer"}]
            },
        },
        "container_overrides.volumeMounts[0].mountPath: already mounted by the Trainer (its "
        "progress-reporting token, which replaces this mount)",
    ),
    "the runtime snapshot": (
        {"volumes": [{"name": "cfg", "configMap": {"name": "demo-runtime-snapshot"}}]},
        "volumes[0].configMap.name: ConfigMap demo-runtime-snapshot is the one the Trainer "
        "(v2.3+) makes for this job: not the spec's to make or read",
    ),
    "the runtime snapshot, projected": (
        {
            "pod_spec_overrides": {
                "volumes": [
                    {
                        "name": "cfg",
                        "projected": {
                            "sources": [{"configMap": {"name": "demo-runtime-snapshot"}}]
                        },
                    }
                ]
            }
        },
        "pod_spec_overrides.volumes[0].projected.sources[0].configMap.name: ConfigMap "
        "demo-runtime-snapshot is the one the Trainer (v2.3+) makes for this job: not the "
        "spec's to make or read",
    ),
}


@pytest.mark.parametrize("case", TAKEN)
def test_the_names_the_trainer_takes_are_refused_at_load(case: str) -> None:
    extra, message = TAKEN[case]
    with pytest.raises(SpecError) as raised:
        spec(**extra)
    assert [str(p) for p in raised.value.problems] == [message]


def test_another_jobs_snapshot_and_other_paths_are_the_specs() -> None:
    spec(
        volumes=[{"name": "cfg", "configMap": {"name": "other-runtime-snapshot"}}],
        volume_mounts=[{"name": "cfg", "mountPath": "/var/run/secrets/kubeflow"}],
    )

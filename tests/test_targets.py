"""Target behaviour that KUBEFLOW.md pins down, checked on small specs built in code."""

from __future__ import annotations

from typing import Any

import pytest

from kfcompile import TARGETS, JobSpec, Launcher, SpecError, UnsupportedFeature, render, structure
from kfcompile.spec import yamlio
from kfcompile.spec.model import ElasticPolicy

TRAINJOBS = [t for t in TARGETS if t.startswith("trainjob/")]
BASE: dict[str, Any] = {"name": "job", "image": "img:1"}


def spec(**fields: Any) -> JobSpec:
    return structure({**BASE, **fields})


def job(s: JobSpec, target: str) -> dict[str, Any]:
    return render(s, target)[-1]


def torch_spec(**fields: Any) -> JobSpec:
    return spec(
        launcher={"kind": "torchrun", "entrypoint": "/w/train.py", "args": ["--lr", "0.1"]},
        **fields,
    )


# --- PyTorchJob ---------------------------------------------------------------------------


def test_pytorchjob_single_node_is_master_only() -> None:
    replicas = job(spec(), "pytorchjob/v1")["spec"]["pytorchReplicaSpecs"]
    assert list(replicas) == ["Master"]
    assert replicas["Master"]["replicas"] == 1


@pytest.mark.parametrize("n", [2, 5, 16])
def test_pytorchjob_master_plus_workers(n: int) -> None:
    replicas = job(spec(num_nodes=n), "pytorchjob/v1")["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1
    assert replicas["Worker"]["replicas"] == n - 1
    for r in replicas.values():
        names = [c["name"] for c in r["template"]["spec"]["containers"]]
        assert names == ["pytorch"]


def test_pytorchjob_nproc_is_a_string() -> None:
    assert job(spec(gpus_per_node=8), "pytorchjob/v1")["spec"]["nprocPerNode"] == "8"
    assert job(spec(nprocs_per_node="auto"), "pytorchjob/v1")["spec"]["nprocPerNode"] == "auto"
    assert job(spec(), "pytorchjob/v1")["spec"]["nprocPerNode"] == "1"


def test_pytorchjob_torchrun_uses_operator_env() -> None:
    c = job(torch_spec(num_nodes=3, gpus_per_node=4), "pytorchjob/v1")["spec"][
        "pytorchReplicaSpecs"
    ]["Worker"]["template"]["spec"]["containers"][0]
    cmd = c["command"]
    assert cmd[0] == "torchrun"
    assert "--nnodes=3" in cmd and "--nproc-per-node=4" in cmd
    assert {
        "--node-rank=$(RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
    } <= set(cmd)
    assert cmd[-3:] == ["/w/train.py", "--lr", "0.1"]
    assert {"name": "pytorchjob-port", "containerPort": 23456} in c["ports"]


def test_pytorchjob_elastic_is_workers_only_with_static_rendezvous() -> None:
    s = torch_spec(num_nodes=3, elastic={"min_nodes": 2, "max_nodes": 4, "max_restarts": 2})
    j = job(s, "pytorchjob/v1")
    replicas = j["spec"]["pytorchReplicaSpecs"]
    assert list(replicas) == ["Worker"] and replicas["Worker"]["replicas"] == 3
    assert j["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 4,
        "rdzvBackend": "c10d",
        "rdzvPort": 29400,
        "maxRestarts": 2,
    }
    cmd = replicas["Worker"]["template"]["spec"]["containers"][0]["command"]
    assert "--nnodes=2:4" in cmd
    assert "--rdzv-endpoint=job-worker-0:29400" in cmd
    assert not [a for a in cmd if "$(" in a], "no operator env without a Master"


def test_pytorchjob_run_policy() -> None:
    s = spec(
        suspend=True,
        backoff_limit=3,
        ttl_seconds_after_finished=60,
        clean_pod_policy="All",
        active_deadline_seconds=600,
        restart_policy="ExitCode",
        scheduling_policy={"min_available": 2, "queue": "q"},
    )
    j = job(s, "pytorchjob/v1")
    assert j["spec"]["runPolicy"] == {
        "suspend": True,
        "activeDeadlineSeconds": 600,
        "backoffLimit": 3,
        "ttlSecondsAfterFinished": 60,
        "cleanPodPolicy": "All",
        "schedulingPolicy": {"minAvailable": 2, "queue": "q"},
    }
    assert j["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] == "ExitCode"


# --- TrainJob -----------------------------------------------------------------------------


@pytest.mark.parametrize("target", TRAINJOBS)
def test_trainjob_defaults_to_torch_distributed(target: str) -> None:
    assert job(spec(), target)["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }


@pytest.mark.parametrize(
    ("target", "auto"),
    [
        ("trainjob/v2.0", "auto"),
        ("trainjob/v2.1", "auto"),
        ("trainjob/v2.2", None),
        ("trainjob/v2.3", None),
    ],
)
def test_num_proc_per_node_auto(target: str, auto: str | None) -> None:
    trainer = job(spec(nprocs_per_node="auto"), target)["spec"]["trainer"]
    assert trainer.get("numProcPerNode") == auto
    assert job(spec(nprocs_per_node=4), target)["spec"]["trainer"]["numProcPerNode"] == 4


@pytest.mark.parametrize("target", TRAINJOBS)
def test_trainjob_torchrun_relies_on_runtime_env(target: str) -> None:
    trainer = job(torch_spec(num_nodes=4), target)["spec"]["trainer"]
    assert trainer["command"] == ["torchrun", "/w/train.py", "--lr", "0.1"]
    assert trainer["numNodes"] == 4


@pytest.mark.parametrize("target", TRAINJOBS)
def test_reserved_env_rejected(target: str) -> None:
    with pytest.raises(UnsupportedFeature, match=r"env\.PET_NODE_RANK: reserved"):
        render(spec(env={"PET_NODE_RANK": "0"}), target)
    render(spec(env={"PET_MASTER_PORT": "0"}), "pytorchjob/v1")  # the operator never sets it


def test_override_shapes_per_release() -> None:
    s = spec(tolerations=[{"key": "gpu", "operator": "Exists"}])
    v20 = job(s, "trainjob/v2.0")["spec"]["podSpecOverrides"][0]
    assert next(iter(v20)) == "targetJobs" and v20["targetJobs"] == [{"name": "node"}]
    v21 = job(s, "trainjob/v2.1")["spec"]["podTemplateOverrides"][0]
    assert v21["targetJobs"] == [{"name": "node"}] and "tolerations" in v21["spec"]
    for target in ("trainjob/v2.2", "trainjob/v2.3"):
        patch = job(s, target)["spec"]["runtimePatches"]
        assert [p["manager"] for p in patch] == ["kfcompile.dev/kfcompile"]
        rjobs = patch[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        assert [r["name"] for r in rjobs] == ["node"]


def test_runtime_labels_reach_jobset_and_jobs() -> None:
    s = spec(runtime_labels={"a": "b"})
    assert job(s, "trainjob/v2.1")["spec"]["labels"] == {"a": "b"}
    tpl = job(s, "trainjob/v2.3")["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
    assert tpl["metadata"]["labels"] == {"a": "b"}
    assert tpl["spec"]["replicatedJobs"][0]["template"]["metadata"]["labels"] == {"a": "b"}
    assert "labels" not in job(s, "trainjob/v2.3")["spec"]


# --- shared behaviour ---------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_gpus_in_limits_and_equal_requests(target: str) -> None:
    objs = render(spec(gpus_per_node=8, gpu_resource="amd.com/gpu"), target)
    text = yamlio.dump_all(objs)
    assert "amd.com/gpu: '8'" in text and text.count("amd.com/gpu: '8'") % 2 == 0


@pytest.mark.parametrize("target", TARGETS)
def test_inline_script_configmap_comes_first(target: str) -> None:
    s = spec(launcher={"kind": "python"}, script="print('hi')\n")
    cm, j = render(s, target)
    assert cm["kind"] == "ConfigMap" and cm["data"] == {"train.py": "print('hi')\n"}
    assert cm["metadata"]["name"] == "job-script"
    assert j["kind"] in ("TrainJob", "PyTorchJob")
    text = yamlio.dump_all([j])
    assert "/opt/kfcompile/scripts/train.py" in text and "job-script" in text


@pytest.mark.parametrize("target", TARGETS)
def test_yaml_has_no_anchors(target: str) -> None:
    s = torch_spec(
        num_nodes=4,
        tolerations=[{"key": "a", "operator": "Exists"}],
        env={"A": "1"},
        shm_size="1Gi",
    )
    text = yamlio.dump_all(render(s, target))
    assert "&id" not in text and "*id" not in text


def test_pod_spec_overrides_merge_without_dropping() -> None:
    s = spec(
        shm_size="1Gi",
        volumes=[{"name": "data", "emptyDir": {}}],
        pod_spec_overrides={"volumes": [{"name": "extra", "emptyDir": {}}], "hostNetwork": True},
    )
    pod = job(s, "pytorchjob/v1")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["data", "dshm", "extra"]
    assert pod["hostNetwork"] is True


def test_container_overrides_merge_by_name() -> None:
    s = spec(env={"A": "1"}, container_overrides={"env": [{"name": "B", "value": "3"}]})
    env = job(s, "trainjob/v2.3")["spec"]["trainer"]["env"]
    assert env == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("fields", "line"),
    [
        (
            {"container_overrides": {"command": ["python", "/b.py"]}},
            "container_overrides.command: would replace what launcher writes",
        ),
        (
            {"container_overrides": {"args": ["--epochs", "1"]}},
            "container_overrides.args: launcher writes the training container's whole command",
        ),
        (
            {"image_pull_policy": "Always", "container_overrides": {"imagePullPolicy": "Never"}},
            "container_overrides.imagePullPolicy: would replace what image_pull_policy writes",
        ),
    ],
)
def test_an_override_of_the_launchers_command_line_is_an_error_naming_both(
    target: str, fields: dict[str, Any], line: str
) -> None:
    """The issue's example: `torchrun ... /a.py python /b.py` ran; now nothing is appended."""
    s = torch_spec(**fields)
    if "imagePullPolicy" in str(fields) and target.startswith("trainjob/"):
        return  # no TrainJob release holds an image pull policy
    with pytest.raises(UnsupportedFeature) as raised:
        render(s, target)
    assert [str(p).startswith(line) for p in raised.value.problems] == [True], raised.value


@pytest.mark.parametrize("key", ["command", "args"])
def test_a_pytorchjob_training_container_override_is_one_with_container_overrides(
    key: str,
) -> None:
    s = torch_spec(pod_spec_overrides={"containers": [{"name": "pytorch", key: ["x"]}]})
    with pytest.raises(UnsupportedFeature) as raised:
        render(s, "pytorchjob/v1")
    (problem,) = raised.value.problems
    assert problem.path == f"pod_spec_overrides.containers[name=pytorch].{key}"
    assert "launcher" in problem.message


@pytest.mark.parametrize("target", TARGETS)
def test_the_training_containers_override_mounts_take_no_generated_place(target: str) -> None:
    """`/dev/shm/` is `/dev/shm`: the pod override's mount would have replaced shm_size's."""
    container = "pytorch" if target == "pytorchjob/v1" else "node"
    mount = {"name": "mine", "mountPath": "/dev/shm/"}
    over = {"containers": [{"name": container, "volumeMounts": [mount]}]}
    with pytest.raises(UnsupportedFeature) as raised:
        render(spec(shm_size="1Gi", pod_spec_overrides=over), target)
    assert [str(p) for p in raised.value.problems] == [
        "pod_spec_overrides.containers[0].volumeMounts[0].mountPath: already mounted by shm_size"
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_an_override_never_replaces_what_another_field_writes(target: str) -> None:
    """Given twice, one value would silently lose: the override is an error naming both."""
    s = spec(env={"A": "1"}, container_overrides={"env": [{"name": "A", "value": "2"}]})
    with pytest.raises(UnsupportedFeature) as raised:
        render(s, target)
    (problem,) = raised.value.problems
    assert problem.path == "container_overrides.env[name=A].value"
    assert "would replace what env.A writes" in problem.message


def test_render_is_independent_of_spec_objects() -> None:
    s = JobSpec(
        name="job",
        image="img",
        launcher=Launcher(kind="python", entrypoint="/a.py"),
        tolerations=({"key": "a", "operator": "Exists"},),
    )
    first = render(s, "trainjob/v2.3")
    first[-1]["spec"]["runtimePatches"][0]["manager"] = "mutated"
    tol = first[-1]["spec"]
    assert s.tolerations == ({"key": "a", "operator": "Exists"},)
    assert render(s, "trainjob/v2.3")[-1]["spec"]["runtimePatches"][0]["manager"] != "mutated"
    assert tol is not None


def test_elastic_policy_class_is_exported() -> None:
    assert ElasticPolicy(min_nodes=1, max_nodes=2).rdzv_backend == "c10d"


@pytest.mark.parametrize("target", TRAINJOBS)
def test_override_containers_must_be_the_runtime_node(target: str) -> None:
    """The upstream runtimes' `node` job has one container, `node`, and no init containers:
    an override naming another is refused, not ignored (v2.0-v2.2) or appended (v2.3)."""
    side = spec(pod_spec_overrides={"containers": [{"name": "sidecar"}]})
    with pytest.raises(UnsupportedFeature, match=r"containers\[0\]\.name: runtime torch-distrib"):
        render(side, target)
    init = spec(pod_spec_overrides={"initContainers": [{"name": "setup"}]})
    with pytest.raises(UnsupportedFeature, match=r"initContainers\[0\]\.name"):
        render(init, target)
    own = spec(
        runtime_ref={"name": "my-runtime"},
        pod_spec_overrides={"containers": [{"name": "sidecar", "env": []}]},
    )
    render(own, target)  # a cluster's own runtime is trusted to have its containers


@pytest.mark.parametrize(("target", "allowed"), [(t, t < "trainjob/v2.2") for t in TRAINJOBS])
def test_env_patch_on_node(target: str, allowed: bool) -> None:
    s = spec(pod_spec_overrides={"containers": [{"name": "node", "env": [{"name": "A"}]}]})
    if allowed:
        render(s, target)
    else:
        with pytest.raises(UnsupportedFeature, match="env patches on node: use env"):
            render(s, target)


def _command(s: JobSpec, target: str) -> list[str]:
    j = job(s, target)
    if target == "pytorchjob/v1":
        replica = next(iter(j["spec"]["pytorchReplicaSpecs"].values()))
        return list(replica["template"]["spec"]["containers"][0]["command"])
    return list(j["spec"]["trainer"]["command"])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["torchrun", "python"])
def test_a_module_runs_as_dash_m_after_the_launchers_own_flags(target: str, kind: str) -> None:
    """``python -m module args`` / ``torchrun [rendezvous flags] -m module args``: the module is
    a program form of its own, not an entrypoint that happens to be ``-m``."""
    s = spec(num_nodes=2, launcher={"kind": kind, "module": "pkg.train", "args": ["-n", "x"]})
    cmd = _command(s, target)
    assert cmd[0] == kind
    assert cmd[-4:] == ["-m", "pkg.train", "-n", "x"]
    flags = cmd[1:-4]
    assert all(f.startswith("--") for f in flags)
    if kind == "torchrun" and target == "pytorchjob/v1":
        assert "--master-addr=$(MASTER_ADDR)" in flags  # the rendezvous still comes first
    else:
        assert flags == []  # TrainJob's torchrun reads PET_*; python takes no flags


@pytest.mark.parametrize(
    ("launcher", "script", "path", "message"),
    [
        ({"entrypoint": "a.py", "module": "m"}, None, "launcher.module", "not both"),
        ({"module": "m"}, "print(1)\n", "launcher.module", "set either module or script"),
        ({"module": "pkg..train"}, None, "launcher.module", "Python module name"),
        ({"module": "1pkg"}, None, "launcher.module", "Python module name"),
        ({"module": "-m"}, None, "launcher.module", "Python module name"),
        ({"entrypoint": "-m", "args": ["pkg"]}, None, "launcher.entrypoint", "launcher.module"),
        ({}, None, "launcher.entrypoint", "required (or launcher.module"),
    ],
)
def test_a_launcher_runs_exactly_one_program(
    launcher: dict[str, Any], script: str | None, path: str, message: str
) -> None:
    fields: dict[str, Any] = {"launcher": {"kind": "python", **launcher}}
    if script is not None:
        fields["script"] = script
    with pytest.raises(SpecError) as info:
        spec(**fields)
    assert [(p.path, message in p.message) for p in info.value.problems] == [(path, True)]


def test_a_module_may_be_any_dotted_identifier() -> None:
    for module in ("train", "nemo_run.core.runners.fdl_runner", "_x.Y2", "ünï.code"):
        assert spec(launcher={"kind": "python", "module": module}).launcher is not None


@pytest.mark.parametrize("entrypoint", ["my script.py", "dir/train.py", "ümlaut.py"])
def test_inline_script_name_must_be_a_configmap_key(entrypoint: str) -> None:
    with pytest.raises(SpecError, match=r"launcher\.entrypoint: must be a file name"):
        spec(launcher={"kind": "python", "entrypoint": entrypoint}, script="print()\n")


def test_inline_script_must_fit_a_configmap() -> None:
    with pytest.raises(SpecError, match="script: larger than a ConfigMap holds"):
        spec(launcher={"kind": "python"}, script="#" * (1024 * 1024))


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize(
    "shape",
    [
        {"num_nodes": 1},
        {"num_nodes": 10},
        {"num_nodes": 11},
        {"num_nodes": 1000},
        {"num_nodes": 10, "elastic": {"min_nodes": 2, "max_nodes": 100}},
        {"num_nodes": 2, "runtime_ref": {"name": "torch-distributed-with-cache"}},
    ],
)
def test_name_limit_is_the_longest_name_render_accepts(
    target_name: str, shape: dict[str, Any]
) -> None:
    """Launchers that make names ask the target how long one may be for this spec."""
    from kfcompile.targets import target

    chosen = target(target_name)
    limit = chosen.name_limit(torch_spec(**shape))
    try:
        render(torch_spec(**shape, name="a" * limit), target_name)
    except UnsupportedFeature as exc:  # elastic or the runtime: not about the name
        assert all(p.path != "name" for p in exc.problems), exc
        return
    with pytest.raises(UnsupportedFeature) as caught:
        render(torch_spec(**shape, name="a" * (limit + 1)), target_name)
    assert [p.path for p in caught.value.problems] == ["name"]

"""Every golden output is valid for the real cluster objects, and the checks bite.

1. Each golden job validates against the release CRD(s) of its target, each ConfigMap against
   core/v1; the YAML means the same to a YAML 1.1 reader (kubectl) as to a YAML 1.2 one.
2. Core pod schema: PyTorchJob replica templates as written; for a TrainJob the *effective* pod
   template the Trainer controller builds from the default ``torch-distributed`` runtime of that
   release plus ``spec.trainer`` and the pod-level overrides/patches (merged here by an
   independent, deliberately small merge, not by kfcompile.spec.object_paths).
3. The checks bite: outputs of one release fail the CRDs of releases that lack their fields.
4. torchrun wiring: ``$(VAR)`` references name variables that exist in the container at run time
   (Kubernetes leaves ``$VAR`` alone), and rank / master address really reach torchrun.
"""

from __future__ import annotations

import copy
import functools
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
import yaml
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from kfcompile import TARGETS, SpecError, UnsupportedFeature, render, structure

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "golden"
EXAMPLES = ROOT / "examples"

PYTORCHJOB_CRDS = ("pytorchjobs-v1.7.0.yaml", "pytorchjobs-v1.8.1.yaml", "pytorchjobs-v1.9.4.yaml")
# golden file stem -> (target, release CRDs, default runtimes of those releases)
TARGET_FILES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "pytorchjob-v1": ("pytorchjob/v1", PYTORCHJOB_CRDS, ()),
    "trainjob-v2.0": (
        "trainjob/v2.0",
        ("trainjobs-v2.0.1.yaml",),
        ("torch_distributed-v2.0.0.yaml", "torch_distributed-v2.0.1.yaml"),
    ),
    "trainjob-v2.1": (
        "trainjob/v2.1",
        ("trainjobs-v2.1.0.yaml",),
        ("torch_distributed-v2.1.0.yaml",),
    ),
    "trainjob-v2.2": (
        "trainjob/v2.2",
        ("trainjobs-v2.2.1.yaml",),
        ("torch_distributed-v2.2.0.yaml",),
    ),
    "trainjob-v2.3": (
        "trainjob/v2.3",
        ("trainjobs-v2.3.0.yaml",),
        ("torch_distributed-v2.3.0.yaml",),
    ),
}
MANAGED_BY_CRDS = ("pytorchjobs-v1.9.4.yaml",)  # runPolicy.managedBy exists from v1.9 only

NODE = "node"  # replicated job and container of the default runtime
PYTORCH = "pytorch"
# Injected by the Trainer Torch plugin into the `node` container (and reserved in trainer.env).
PET_ENV = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)
# Injected by the Training Operator into every container, only when there is a Master replica.
OPERATOR_ENV = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    *PET_ENV,
)
# v2.2+ webhook: the `node` container patch may not touch env, command, args, image, resources.
NODE_PATCH_KEYS = {"name", "volumeMounts", "securityContext"}
NAMED_LISTS = ("containers", "initContainers", "volumes", "env", "volumeMounts")


# --- golden files ---------------------------------------------------------------------------


def load_docs(path: Path) -> list[Obj]:
    """All documents of a golden file, as plain data (YAML 1.2, like the renderer writes)."""
    text = path.read_text()
    return [d for d in YAML(typ="safe", pure=True).load_all(io.StringIO(text)) if d is not None]


def split(docs: list[Obj]) -> tuple[list[Obj], Obj]:
    """``(ConfigMaps, the one job)``; the job comes last (apply order: companions first)."""
    jobs = [d for d in docs if d.get("kind") != "ConfigMap"]
    assert len(jobs) == 1, [d.get("kind") for d in docs]
    assert docs[-1] is jobs[0], "companion objects must come before the job"
    return [d for d in docs if d.get("kind") == "ConfigMap"], jobs[0]


def golden_job(example: str, stem: str) -> Obj:
    return split(load_docs(GOLDEN / example / f"{stem}.yaml"))[1]


def has_error_on(errors: list[str], word: str) -> bool:
    return any(word in e for e in errors)


def golden_yaml() -> list[Path]:
    return sorted(GOLDEN.glob("*/*.yaml"))


def stem_of(path: Path) -> str:
    return path.name.removesuffix(".yaml")


def job_crds(stem: str, job: Obj) -> tuple[str, ...]:
    """The release CRDs a job rendered for target file ``stem`` must be valid for."""
    _, crds, _ = TARGET_FILES[stem]
    if job.get("kind") == "PyTorchJob" and "managedBy" in job["spec"].get("runPolicy", {}):
        return tuple(c for c in crds if c in MANAGED_BY_CRDS)
    return crds


def crds_for(path: Path) -> tuple[str, ...]:
    return job_crds(stem_of(path), split(load_docs(path))[1])


def rel(path: Path) -> str:
    return str(path.relative_to(GOLDEN))


CRD_CASES = [
    pytest.param(path, crd, id=f"{rel(path)}-{crd}")
    for path in golden_yaml()
    for crd in crds_for(path)
]
GOLDEN_CASES = [pytest.param(path, id=rel(path)) for path in golden_yaml()]
TRAINJOB_CASES = [
    pytest.param(path, runtime, id=f"{rel(path)}-{runtime}")
    for path in golden_yaml()
    for runtime in TARGET_FILES[stem_of(path)][2]
]
PYTORCHJOB_CASES = [
    pytest.param(path, id=rel(path)) for path in golden_yaml() if path.name == "pytorchjob-v1.yaml"
]


@pytest.fixture
def shared() -> Path:
    return schema_check.require_shared()


def test_golden_files_exist_for_every_example_and_target() -> None:
    examples = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    assert len(examples) >= 5, examples
    assert set(TARGET_FILES) == {t.replace("/", "-") for t in TARGETS}, "a target lacks its CRDs"
    files = sorted(GOLDEN.glob("*/*"))
    assert len(files) >= 5 * 5, files
    for example in examples:
        for stem in TARGET_FILES:
            found = [GOLDEN / example / f"{stem}.{ext}" for ext in ("yaml", "err")]
            assert [p.exists() for p in found].count(True) == 1, (example, stem)
    assert len(CRD_CASES) >= len(GOLDEN_CASES) >= 10
    assert len(TRAINJOB_CASES) >= 5 and len(PYTORCHJOB_CASES) >= 5


@pytest.mark.parametrize("path", GOLDEN_CASES)
def test_golden_yaml_means_the_same_to_kubectl(path: Path) -> None:
    """kubectl reads YAML 1.1 (`on`, `yes`, `0777` ...): no value may change meaning there."""
    assert [d for d in yaml.safe_load_all(path.read_text()) if d is not None] == load_docs(path)


# --- 1. CRDs and ConfigMaps -----------------------------------------------------------------


TRAINJOB_MANAGERS = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
STORAGE_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")


def cel_problems(job: Obj) -> list[str]:
    """The TrainJob CRDs' CEL rules on a new object (schema_check does not run CEL); the name
    rule of v2.1+ is in name_problems."""
    if job["kind"] != "TrainJob":
        return []
    spec = job["spec"]
    problems = []
    if "managedBy" in spec and spec["managedBy"] not in TRAINJOB_MANAGERS:
        problems.append(f"spec.managedBy {spec['managedBy']!r} not in {TRAINJOB_MANAGERS}")
    for kind, source in spec.get("initializer", {}).items():
        uri = source.get("storageUri", "")
        if uri and not STORAGE_URI.match(uri):
            problems.append(f"spec.initializer.{kind}.storageUri {uri!r} is no URI")
    return problems


@pytest.mark.parametrize(("path", "crd"), CRD_CASES)
def test_golden_job_is_valid_for_release_crd(shared: Path, path: Path, crd: str) -> None:
    configmaps, job = split(load_docs(path))
    assert schema_check.crd_errors(job, crd) == []
    assert cel_problems(job) == []
    for cm in configmaps:
        assert cm["apiVersion"] == "v1"
        assert schema_check.configmap_errors(cm) == []
        assert cm["metadata"].get("namespace") == job["metadata"].get("namespace")


RFC1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def name_problems(job: Obj) -> list[str]:
    """The job name, and the names the controllers derive from it, are valid where they land:
    TrainJob names are RFC 1035 labels (CEL from v2.1) and pods get hostnames
    ``<name>-node-0-<rank>``; PyTorchJob replicas get Services and hostnames ``<name>-<role>-<i>``
    (Service names are RFC 1035 labels too)."""
    name = job["metadata"]["name"]
    if job["kind"] == "TrainJob":
        last = job["spec"].get("trainer", {}).get("numNodes", 1) - 1
        derived = [name, f"{name}-{NODE}-0-{last}"]
    else:
        most = job["spec"].get("elasticPolicy", {}).get("maxReplicas", 0)  # scaled up to this
        derived = [name] + [
            f"{name}-{role.lower()}-{max(replica.get('replicas', 1), most) - 1}"
            for role, replica in job["spec"]["pytorchReplicaSpecs"].items()
        ]
    return [
        f"{n!r} is no RFC 1035 label of at most 63 characters"
        for n in derived
        if len(n) > 63 or not RFC1035_LABEL.match(n)
    ]


@pytest.mark.parametrize("path", GOLDEN_CASES)
def test_golden_names_fit_the_objects_controllers_create(path: Path) -> None:
    _, job = split(load_docs(path))
    assert name_problems(job) == []


def test_cel_rules_bite() -> None:
    job = golden_job("minimal", "trainjob-v2.3")
    assert cel_problems(job) == []
    job["spec"]["managedBy"] = "kubeflow.org/training-operator"  # a PyTorchJob manager
    job["spec"]["initializer"] = {"model": {"storageUri": "meta-llama/Llama-3.1-8B"}}
    assert len(cel_problems(job)) == 2


def test_long_name_is_caught() -> None:
    job = golden_job("llama-4x8-efa", "trainjob-v2.3")
    job["metadata"]["name"] = "x" * 55  # valid itself, but x...x-node-0-3 has 64 characters
    assert name_problems(job) == [
        "'" + "x" * 55 + "-node-0-3' is no RFC 1035 label of at most 63 characters"
    ]


def test_elastic_name_checked_at_max_nodes() -> None:
    data = {
        "name": "a" * 54,
        "image": "ghcr.io/example/train:1.0",
        "launcher": {"kind": "torchrun", "entrypoint": "/app/train.py"},
        "num_nodes": 9,
        "elastic": {"min_nodes": 1, "max_nodes": 11},
    }
    try:
        *_, job = render(structure(data), "pytorchjob/v1")
    except (SpecError, UnsupportedFeature) as e:  # refusing the name is a fix
        assert {p.path for p in e.problems} == {"name"}, e.problems
        return
    assert job["spec"]["elasticPolicy"]["maxReplicas"] == 11
    assert name_problems(job) == []


def test_managed_by_narrows_pytorchjob_to_v1_9(shared: Path, tmp_path: Path) -> None:
    job = golden_job("minimal", "pytorchjob-v1")
    job["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    path = tmp_path / "pytorchjob-v1.yaml"
    path.write_text(yaml.safe_dump(job))
    assert crds_for(path) == ("pytorchjobs-v1.9.4.yaml",)
    assert schema_check.crd_errors(job, "pytorchjobs-v1.9.4.yaml") == []
    for crd in ("pytorchjobs-v1.7.0.yaml", "pytorchjobs-v1.8.1.yaml"):
        assert has_error_on(schema_check.crd_errors(job, crd), "managedBy")


# --- 2. effective pod templates -------------------------------------------------------------


def merge(base: Any, patch: Any) -> Any:
    """Mappings merge key by key, lists of named items by ``name``, anything else is replaced."""
    if not (isinstance(base, dict) and isinstance(patch, dict)):
        return copy.deepcopy(patch)
    out = dict(base)
    for key, value in patch.items():
        old = out.get(key)
        if key in NAMED_LISTS and isinstance(old, list) and isinstance(value, list):
            out[key] = merge_named(old, value)
        elif isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge(old, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_named(base: list[Obj], patch: list[Obj]) -> list[Obj]:
    out = [copy.deepcopy(item) for item in base]
    for item in patch:
        at = [i for i, old in enumerate(out) if old.get("name") == item.get("name")]
        if at:
            out[at[0]] = merge(out[at[0]], item)
        else:
            out.append(copy.deepcopy(item))
    return out


@functools.lru_cache
def _runtime(shared: Path, runtime: str) -> Obj:
    data: Obj = YAML(typ="safe", pure=True).load(shared / "crds" / "runtimes" / runtime)
    return data


def load_runtime(shared: Path, runtime: str) -> Obj:
    """A ``torch-distributed`` runtime file (a fresh copy: callers may change it)."""
    return copy.deepcopy(_runtime(shared, runtime))


def runtime_jobs(runtime: Obj) -> list[Obj]:
    jobs: list[Obj] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return jobs


def runtime_pod_template(runtime: Obj) -> Obj:
    node = [j for j in runtime_jobs(runtime) if j["name"] == NODE]
    assert len(node) == 1, "the default runtime has one replicated job `node`"
    template: Obj = node[0]["template"]["spec"]["template"]
    return copy.deepcopy(template)


def pod_patches(job: Obj) -> Iterator[tuple[str, Obj]]:
    """``(targeted replicated job name, {metadata?, spec?})`` of every pod-level customisation."""
    spec = job["spec"]
    for item in spec.get("podSpecOverrides", []):  # v2.0: the item is the pod spec patch
        rest = {k: v for k, v in item.items() if k != "targetJobs"}
        for target in item["targetJobs"]:
            yield target["name"], {"spec": rest}
    for item in spec.get("podTemplateOverrides", []):  # v2.1
        rest = {k: v for k, v in item.items() if k in ("metadata", "spec")}
        for target in item["targetJobs"]:
            yield target["name"], rest
    for patch in spec.get("runtimePatches", []):  # v2.2+
        rt = patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {})
        for rjob in rt.get("replicatedJobs", []):
            pod = rjob.get("template", {}).get("spec", {}).get("template", {})
            yield rjob["name"], pod


def pet_env(job: Obj) -> list[Obj]:
    trainer = job["spec"].get("trainer", {})
    name = job["metadata"]["name"]
    values = {
        "PET_NNODES": str(trainer.get("numNodes", 1)),
        "PET_NPROC_PER_NODE": str(trainer.get("numProcPerNode", "auto")),
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": f"{name}-{NODE}-0-0.{name}",
        "PET_MASTER_PORT": "29400",
    }
    return [{"name": k, "value": values[k]} for k in PET_ENV]


def effective_trainjob_template(job: Obj, runtime: Obj) -> Obj:
    """The pod template of replicated job `node` the Trainer controller would create."""
    template = runtime_pod_template(runtime)
    trainer = job["spec"].get("trainer", {})
    nodes = [c for c in template["spec"]["containers"] if c["name"] == NODE]
    assert len(nodes) == 1, "the default runtime has one container `node`"
    node = nodes[0]
    for key in ("image", "command", "args"):
        if key in trainer:
            node[key] = copy.deepcopy(trainer[key])
    if "resourcesPerNode" in trainer:
        node["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    node["env"] = [*node.get("env", []), *copy.deepcopy(trainer.get("env", [])), *pet_env(job)]
    for target, patch in pod_patches(job):
        if target == NODE:
            template = merge(template, patch)
    return template


def pod_problems(template: Obj, main: str, containers: set[str]) -> list[str]:
    """What the API server (schema and pod validation) or the controller would reject."""
    problems = list(schema_check.pod_template_errors(template))
    pod = template.get("spec", {})
    names = [c.get("name") for c in pod.get("containers", [])]
    inits = [c.get("name") for c in pod.get("initContainers", [])]
    if set(names) != containers:
        problems.append(f"containers {sorted(map(str, names))} != expected {sorted(containers)}")
    if names.count(main) != 1:
        problems.append(f"container {main!r} appears {names.count(main)} times")
    if len(set(names + inits)) != len(names + inits):
        problems.append(f"duplicate container names: {names + inits}")
    volumes = [v.get("name") for v in pod.get("volumes", [])]
    if len(set(volumes)) != len(volumes):
        problems.append(f"duplicate volume names: {volumes}")
    for c in [*pod.get("containers", []), *pod.get("initContainers", [])]:
        if not c.get("image"):
            problems.append(f"container {c.get('name')!r} has no image")
        paths = [m.get("mountPath") for m in c.get("volumeMounts", [])]
        if len(set(paths)) != len(paths):
            problems.append(f"container {c.get('name')!r}: duplicate mountPath in {paths}")
        for m in c.get("volumeMounts", []):
            if m.get("name") not in volumes:
                problems.append(f"container {c.get('name')!r} mounts unknown volume {m['name']!r}")
    return problems


def trainjob_problems(job: Obj, runtime: Obj) -> list[str]:
    """pod_problems of the effective template, plus the Trainer webhook's rules."""
    expected = {c["name"] for c in runtime_pod_template(runtime)["spec"]["containers"]}
    problems = pod_problems(effective_trainjob_template(job, runtime), NODE, expected)
    runtime_names = {j["name"] for j in runtime_jobs(runtime)}
    for target, patch in pod_patches(job):
        if target not in runtime_names:
            problems.append(f"patch targets replicated job {target!r} the runtime lacks")
        if "runtimePatches" in job["spec"]:
            for c in patch.get("spec", {}).get("containers", []):
                if c.get("name") == NODE and set(c) - NODE_PATCH_KEYS:
                    problems.append(f"patch sets {sorted(set(c) - NODE_PATCH_KEYS)} on `node`")
    for env in job["spec"].get("trainer", {}).get("env", []):
        if env["name"] in PET_ENV:
            problems.append(f"trainer.env sets reserved {env['name']}")
    return problems


def script_problems(configmaps: list[Obj], template: Obj, main: str) -> list[str]:
    """Each shipped ConfigMap is mounted in the main container and one of its files is run."""
    problems = []
    pod = template["spec"]
    container = next(c for c in pod["containers"] if c["name"] == main)
    argv = [*container.get("command", []), *container.get("args", [])]
    for cm in configmaps:
        name = cm["metadata"]["name"]
        vols = [v for v in pod.get("volumes", []) if v.get("configMap", {}).get("name") == name]
        mounts = [
            m for v in vols for m in container.get("volumeMounts", []) if m["name"] == v["name"]
        ]
        files = {
            f"{m['mountPath'].rstrip('/')}/{path}"
            for v in vols
            for m in mounts
            if m["name"] == v["name"]
            for path in (
                [i["path"] for i in v["configMap"]["items"]]
                if "items" in v["configMap"]
                else cm.get("data", {})
            )
        }
        if not mounts:
            problems.append(f"ConfigMap {name!r} is not mounted in container {main!r}")
        elif not files & set(argv):
            problems.append(f"no file of ConfigMap {name!r} ({sorted(files)}) is run by {argv}")
    return problems


@pytest.mark.parametrize("path", PYTORCHJOB_CASES)
def test_golden_pytorchjob_pod_templates(shared: Path, path: Path) -> None:
    configmaps, job = split(load_docs(path))
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas and set(replicas) <= {"Master", "Worker"}
    for role, replica in replicas.items():
        template = replica["template"]
        assert pod_problems(template, PYTORCH, {PYTORCH}) == [], role
        assert script_problems(configmaps, template, PYTORCH) == [], role


@pytest.mark.parametrize(("path", "runtime_file"), TRAINJOB_CASES)
def test_golden_trainjob_effective_pod_template(
    shared: Path, path: Path, runtime_file: str
) -> None:
    configmaps, job = split(load_docs(path))
    runtime = load_runtime(shared, runtime_file)
    assert job["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    assert job["spec"]["runtimeRef"].get("kind", "ClusterTrainingRuntime") == runtime["kind"]
    assert trainjob_problems(job, runtime) == []
    template = effective_trainjob_template(job, runtime)
    assert script_problems(configmaps, template, NODE) == []


# --- 3. the checks bite ---------------------------------------------------------------------


@pytest.mark.parametrize("crd", ["trainjobs-v2.2.1.yaml", "trainjobs-v2.3.0.yaml"])
def test_v2_1_overrides_rejected_by_newer_crds(shared: Path, crd: str) -> None:
    job = golden_job("llama-4x8-efa", "trainjob-v2.1")
    assert "podTemplateOverrides" in job["spec"]
    assert has_error_on(schema_check.crd_errors(job, crd), "podTemplateOverrides")


@pytest.mark.parametrize("crd", ["trainjobs-v2.0.1.yaml", "trainjobs-v2.1.0.yaml"])
def test_v2_3_runtime_patches_rejected_by_older_crds(shared: Path, crd: str) -> None:
    job = golden_job("llama-4x8-efa", "trainjob-v2.3")
    assert "runtimePatches" in job["spec"]
    assert has_error_on(schema_check.crd_errors(job, crd), "runtimePatches")


def test_v2_2_active_deadline_rejected_by_v2_1_crd(shared: Path) -> None:
    job = golden_job("kueue-queued", "trainjob-v2.2")
    assert "activeDeadlineSeconds" in job["spec"]
    errors = schema_check.crd_errors(job, "trainjobs-v2.1.0.yaml")
    assert has_error_on(errors, "activeDeadlineSeconds")
    del job["spec"]["activeDeadlineSeconds"], job["spec"]["runtimePatches"]
    assert schema_check.crd_errors(job, "trainjobs-v2.1.0.yaml") == []  # nothing else was wrong


def test_num_proc_per_node_auto_valid_only_before_v2_2(shared: Path) -> None:
    data = YAML(typ="safe", pure=True).load(EXAMPLES / "minimal.yaml")
    data["nprocs_per_node"] = "auto"
    *_, job = render(structure(data), "trainjob/v2.1")
    assert job["spec"]["trainer"]["numProcPerNode"] == "auto"
    assert schema_check.crd_errors(job, "trainjobs-v2.1.0.yaml") == []
    assert schema_check.crd_errors(job, "trainjobs-v2.0.1.yaml") == []
    errors = schema_check.crd_errors(job, "trainjobs-v2.2.1.yaml")
    assert has_error_on(errors, "numProcPerNode")
    # rendered for v2.2 the same spec is valid there (auto = omit the field)
    *_, job22 = render(structure(data), "trainjob/v2.2")
    assert schema_check.crd_errors(job22, "trainjobs-v2.2.1.yaml") == []


def test_misspelled_container_field_rejected(shared: Path) -> None:
    job = golden_job("llama-4x8-efa", "pytorchjob-v1")
    template = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    container = next(c for c in template["spec"]["containers"] if c["name"] == PYTORCH)
    container["imagee"] = container.pop("image")
    assert has_error_on(schema_check.pod_template_errors(template), "imagee")
    assert pod_problems(template, PYTORCH, {PYTORCH}) != []
    for crd in PYTORCHJOB_CRDS:  # the CRDs embed the core pod schema too
        assert has_error_on(schema_check.crd_errors(job, crd), "imagee")


def test_override_naming_unknown_container_is_caught(shared: Path) -> None:
    runtime = load_runtime(shared, "torch_distributed-v2.1.0.yaml")
    job = golden_job("llama-4x8-efa", "trainjob-v2.1")
    assert trainjob_problems(job, runtime) == []
    job["spec"]["podTemplateOverrides"][0]["spec"]["containers"][0]["name"] = "trainer"
    assert schema_check.crd_errors(job, "trainjobs-v2.1.0.yaml") == []  # the CRD cannot see it
    problems = trainjob_problems(job, runtime)
    assert any("containers" in p for p in problems), problems
    assert any("has no image" in p for p in problems), problems


def test_override_naming_unknown_replicated_job_is_caught(shared: Path) -> None:
    runtime = load_runtime(shared, "torch_distributed-v2.3.0.yaml")
    job = golden_job("llama-4x8-efa", "trainjob-v2.3")
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    patch["replicatedJobs"][0]["name"] = "trainer"
    problems = trainjob_problems(job, runtime)
    assert any("replicated job 'trainer'" in p for p in problems), problems
    # the volumes went nowhere, so the effective pod lacks them: the same job is not a no-op
    assert "volumes" not in effective_trainjob_template(job, runtime)["spec"]


def test_mount_of_missing_volume_is_caught(shared: Path) -> None:
    runtime = load_runtime(shared, "torch_distributed-v2.2.0.yaml")
    job = golden_job("inline-script", "trainjob-v2.2")
    rjob = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    del rjob["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"]
    problems = trainjob_problems(job, runtime)
    assert any("unknown volume 'kfcompile-script'" in p for p in problems), problems


def test_env_patch_on_node_container_is_caught(shared: Path) -> None:
    runtime = load_runtime(shared, "torch_distributed-v2.3.0.yaml")
    job = golden_job("inline-script", "trainjob-v2.3")
    rjob = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod = rjob["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    assert any("on `node`" in p for p in trainjob_problems(job, runtime))


def test_script_not_run_is_caught() -> None:
    docs = load_docs(GOLDEN / "inline-script" / "pytorchjob-v1.yaml")
    configmaps, job = split(docs)
    template = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert script_problems(configmaps, template, PYTORCH) == []
    container = template["spec"]["containers"][0]
    container["command"] = [a.replace("smoke.py", "other.py") for a in container["command"]]
    assert script_problems(configmaps, template, PYTORCH) != []


# --- 4. torchrun wiring ---------------------------------------------------------------------

SHELL_REF = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")
TORCHRUN_SWITCHES = {"--standalone", "--no-python", "--run-path", "--module", "-m"}


def references(text: str) -> tuple[list[str], list[str]]:
    """``($(VAR) names Kubernetes expands, shell-style $VAR / ${VAR} it leaves literally)``."""
    k8s: list[str] = []
    shell: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):  # escaped: a literal `$`
            i += 2
            continue
        if text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            k8s.append(text[i + 2 : end])
            i = end + 1
            continue
        m = SHELL_REF.match(text, i)
        if m:
            shell.append(m.group(0))
            i = m.end()
            continue
        i += 1
    return k8s, shell


def is_shell(argv: list[str]) -> bool:
    return bool(argv) and argv[0].rsplit("/", 1)[-1] in ("sh", "bash") and "-c" in argv


def torchrun_flags(argv: list[str]) -> dict[str, str] | None:
    """torchrun's own options (``--a_b`` spelled ``--a-b``), or None if argv is no torchrun."""
    if not argv or argv[0].rsplit("/", 1)[-1] != "torchrun":
        return None
    flags: dict[str, str] = {}
    rest = argv[1:]
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        name, eq, value = rest[i].partition("=")
        name = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        if eq or name in TORCHRUN_SWITCHES:
            flags[name] = value if eq else ""
            i += 1
        else:
            flags[name] = rest[i + 1] if i + 1 < len(rest) else ""
            i += 2
    return flags


def ref_problems(argv: list[str], defined: set[str]) -> list[str]:
    problems = []
    for item in argv:
        k8s, shell = references(item)
        if shell and not is_shell(argv):
            problems.append(f"{item!r}: Kubernetes does not expand {shell}")
        for var in k8s:
            if var not in defined:
                problems.append(f"{item!r}: $({var}) is not defined in the container")
    return problems


def is_ref(value: str | None, *names: str) -> bool:
    return value in {f"$({n})" for n in names}


def pytorchjob_wiring(job: Obj) -> list[str]:
    problems = []
    spec = job["spec"]
    name = job["metadata"]["name"]
    replicas = spec["pytorchReplicaSpecs"]
    master = "Master" in replicas
    nodes = sum(r.get("replicas", 1) for r in replicas.values())
    elastic = spec.get("elasticPolicy")
    for role, replica in replicas.items():
        pod = replica["template"]["spec"]
        containers = [("c", c) for c in pod["containers"]]
        for kind, c in containers + [("i", c) for c in pod.get("initContainers", [])]:
            argv = [*c.get("command", []), *c.get("args", [])]
            defined = {e["name"] for e in c.get("env", [])}
            if master and kind == "c":
                defined |= set(OPERATOR_ENV)
            problems += [f"{role}/{c['name']}: {p}" for p in ref_problems(argv, defined)]
            flags = torchrun_flags(argv)
            if flags is None or nodes == 1:
                continue
            where = f"{role}/{c['name']}"
            if "--standalone" in flags:
                problems.append(f"{where}: --standalone on {nodes} nodes")
            nproc = flags.get("--nproc-per-node", str(spec.get("nprocPerNode")))
            if "nprocPerNode" in spec and nproc != str(spec["nprocPerNode"]):
                problems.append(f"{where}: --nproc-per-node != spec.nprocPerNode")
            if elastic is None:
                if not is_ref(flags.get("--node-rank"), "RANK", "PET_NODE_RANK"):
                    problems.append(f"{where}: node rank does not reach torchrun: {flags}")
                addr = flags.get("--master-addr")
                if not (
                    is_ref(addr, "MASTER_ADDR", "PET_MASTER_ADDR") or addr == f"{name}-master-0"
                ):
                    problems.append(f"{where}: master address does not reach torchrun: {flags}")
                if flags.get("--nnodes", str(nodes)) != str(nodes):
                    problems.append(f"{where}: --nnodes={flags['--nnodes']} but {nodes} replicas")
            else:
                host, _, port = flags.get("--rdzv-endpoint", "").partition(":")
                if host != f"{name}-worker-0":
                    problems.append(f"{where}: rendezvous endpoint is not worker 0: {flags}")
                if "rdzvPort" in elastic and port != str(elastic["rdzvPort"]):
                    problems.append(f"{where}: rendezvous port {port!r} != elasticPolicy.rdzvPort")
                lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
                if flags.get("--nnodes") != f"{lo}:{hi}":
                    problems.append(f"{where}: --nnodes != elasticPolicy {lo}:{hi}")
                if not lo <= nodes <= hi:
                    problems.append(f"{where}: {nodes} replicas outside {lo}:{hi}")
                for key, flag in (
                    ("rdzvBackend", "--rdzv-backend"),
                    ("maxRestarts", "--max-restarts"),
                ):
                    if key in elastic and flags.get(flag) != str(elastic[key]):
                        problems.append(f"{where}: {flag} != elasticPolicy.{key}")
    return problems


def trainjob_wiring(job: Obj) -> list[str]:
    trainer = job["spec"].get("trainer", {})
    argv = [*trainer.get("command", []), *trainer.get("args", [])]
    defined = {e["name"] for e in trainer.get("env", [])} | set(PET_ENV)
    problems = ref_problems(argv, defined)
    flags = torchrun_flags(argv)
    nodes = trainer.get("numNodes", 1)
    if flags is None or nodes == 1:
        return problems
    if "--standalone" in flags or "--rdzv-endpoint" in flags:
        problems.append(f"rendezvous flags override the runtime's PET_* wiring: {flags}")
    # explicit flags must carry the injected values; absent flags come from PET_* (torchrun reads
    # PET_<FLAG>), so no flag may say something else
    for flag, var in (("--node-rank", "PET_NODE_RANK"), ("--master-addr", "PET_MASTER_ADDR")):
        if flag in flags and not is_ref(flags[flag], var):
            problems.append(f"{flag}={flags[flag]} conflicts with the injected {var}")
    if "--master-port" in flags and not is_ref(flags["--master-port"], "PET_MASTER_PORT"):
        problems.append(f"--master-port={flags['--master-port']} conflicts with PET_MASTER_PORT")
    if flags.get("--nnodes", str(nodes)) not in (str(nodes), "$(PET_NNODES)"):
        problems.append(f"--nnodes={flags['--nnodes']} but numNodes={nodes}")
    nproc = str(trainer.get("numProcPerNode", flags.get("--nproc-per-node")))
    if flags.get("--nproc-per-node", nproc) not in (nproc, "$(PET_NPROC_PER_NODE)"):
        problems.append(f"--nproc-per-node={flags['--nproc-per-node']} != numProcPerNode")
    return problems


def wiring(job: Obj) -> list[str]:
    return pytorchjob_wiring(job) if job["kind"] == "PyTorchJob" else trainjob_wiring(job)


@pytest.mark.parametrize("path", GOLDEN_CASES)
def test_golden_torchrun_wiring(path: Path) -> None:
    _, job = split(load_docs(path))
    assert wiring(job) == []


def test_references_follow_kubernetes_expansion() -> None:
    assert references("--node-rank=$(RANK)") == (["RANK"], [])
    assert references("$$(RANK) $$HOME") == ([], [])
    assert references("--a=$RANK --b=${MASTER_ADDR}") == ([], ["$RANK", "${MASTER_ADDR}"])
    assert references("$(unclosed") == ([], [])
    assert torchrun_flags(
        ["torchrun", "--nnodes", "2", "--node_rank=$(RANK)", "x.py", "--a=1"]
    ) == {
        "--nnodes": "2",
        "--node-rank": "$(RANK)",
    }
    assert torchrun_flags(["python", "--nnodes=2"]) is None


def replace_argv(job: Obj, old: str, new: str) -> Obj:
    out = copy.deepcopy(job)
    for replica in out["spec"].get("pytorchReplicaSpecs", {}).values():
        for c in replica["template"]["spec"]["containers"]:
            c["command"] = [a.replace(old, new) for a in c.get("command", [])]
    if "trainer" in out["spec"]:
        trainer = out["spec"]["trainer"]
        trainer["command"] = [a.replace(old, new) for a in trainer.get("command", [])]
    return out


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("$(RANK)", "$RANK", "does not expand"),
        ("$(MASTER_ADDR)", "${MASTER_ADDR}", "does not expand"),
        ("$(RANK)", "$(NODE_RANK)", "not defined"),
        ("--node-rank=$(RANK)", "--node-rank=0", "node rank"),
        ("--nnodes=4", "--nnodes=2", "--nnodes"),
        ("--master-addr=$(MASTER_ADDR)", "--master-port=1", "master address"),
    ],
)
def test_broken_pytorchjob_wiring_is_caught(old: str, new: str, says: str) -> None:
    job = golden_job("llama-4x8-efa", "pytorchjob-v1")
    assert wiring(job) == []
    problems = wiring(replace_argv(job, old, new))
    assert any(says in p for p in problems), problems


def test_elastic_job_gets_no_injected_env() -> None:
    job = golden_job("elastic-pytorchjob", "pytorchjob-v1")
    assert wiring(job) == []
    broken = replace_argv(job, "--rdzv-id=elastic-resnet", "--rdzv-id=$(RANK)")
    assert any("$(RANK) is not defined" in p for p in wiring(broken))
    broken = replace_argv(job, "elastic-resnet-worker-0:", "elastic-resnet-master-0:")
    assert any("worker 0" in p for p in wiring(broken))


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("--node-rank=0", "conflicts"),
        ("--master-addr=localhost", "conflicts"),
        ("--nnodes=1", "--nnodes"),
        ("--standalone", "override"),
        ("--rank=$(RANK)", "not defined"),
    ],
)
def test_broken_trainjob_wiring_is_caught(extra: str, says: str) -> None:
    job = golden_job("llama-4x8-efa", "trainjob-v2.3")
    assert wiring(job) == []
    job["spec"]["trainer"]["command"].insert(1, extra)
    problems = wiring(job)
    assert any(says in p for p in problems), problems


# --- rendered specs beyond the goldens --------------------------------------------------------

RUNTIME_OF = {t: runtimes[-1] for t, _, runtimes in TARGET_FILES.values() if runtimes}

specs = st.fixed_dictionaries(
    {
        "name": st.one_of(
            st.sampled_from(["job", "train-x1"]),
            st.from_regex(r"[a-z]([-a-z0-9]{40,52}[a-z0-9])?", fullmatch=True),
        ),
        "image": st.just("ghcr.io/example/train:1.0"),
        "launcher": st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["torchrun", "python"]),
                "entrypoint": st.just("train.py"),
                "args": st.lists(st.sampled_from(["--lr", "0.1", "--steps"]), max_size=3),
            }
        ),
        "num_nodes": st.integers(1, 5),
        "gpus_per_node": st.integers(0, 8),
    },
    optional={
        "nprocs_per_node": st.one_of(st.integers(1, 8), st.just("auto")),
        "script": st.just("print('hi')\n"),
        "env": st.just({"A": "1"}),
        "namespace": st.just("team-a"),
        "shm_size": st.just("8Gi"),
        "managed_by": st.sampled_from((*TRAINJOB_MANAGERS, "kubeflow.org/training-operator")),
        "initializer": st.fixed_dictionaries(
            {}, optional={"model": st.just({"storage_uri": "hf://org/model"})}
        ),
        "elastic": st.fixed_dictionaries(
            # max_nodes <= 10: more is test_elastic_name_checked_at_max_nodes (a known bug)
            {"max_restarts": st.integers(0, 3), "extra": st.integers(0, 5)}
        ),
    },
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=specs)
def test_rendered_jobs_are_valid_for_the_cluster(data: Obj) -> None:
    """Beyond the goldens: whatever a target renders passes every check above."""
    shared = schema_check.require_shared()
    if "script" not in data:
        data["launcher"]["entrypoint"] = "/app/train.py"
    if "elastic" in data:
        extra = data["elastic"].pop("extra")
        data["elastic"].update(min_nodes=1, max_nodes=data["num_nodes"] + extra)
    try:
        spec = structure(data)
    except SpecError as e:  # only a name too long for the pods it leads to may be refused
        assert {p.path for p in e.problems} == {"name"}, e.problems
        reject()
    for target in TARGETS:
        try:
            objects = render(spec, target)
        except UnsupportedFeature:
            continue
        configmaps, job = split(objects)
        for crd in job_crds(target.replace("/", "-"), job):
            assert schema_check.crd_errors(job, crd) == [], (target, crd)
        assert cel_problems(job) == [], target
        for cm in configmaps:
            assert schema_check.configmap_errors(cm) == []
        assert wiring(job) == [], target
        assert name_problems(job) == [], target
        if job["kind"] == "PyTorchJob":
            for replica in job["spec"]["pytorchReplicaSpecs"].values():
                assert pod_problems(replica["template"], PYTORCH, {PYTORCH}) == []
                assert script_problems(configmaps, replica["template"], PYTORCH) == []
        else:
            runtime = load_runtime(shared, RUNTIME_OF[target])
            assert trainjob_problems(job, runtime) == [], target
            template = effective_trainjob_template(job, runtime)
            assert script_problems(configmaps, template, NODE) == [], target

"""Importing manifests back to specs, and converting them between targets.

The proof of the issue: for every generated spec and every target it renders on,
``import(render(spec, t))`` is the spec after ``normalise`` (the documented rewrites, written
here independently of the importer), with no loss; the normalisation changes nothing a cluster
would see; and converting between every pair of targets gives objects the destination release's
CRD accepts. Then hand-written manifests: what is detected, what is lost, what is dropped as
server-set, and what cannot be imported at all.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
import pytest
import schema_check
import strategies as S
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kfcompile import JobSpec, RuntimeRef, UnsupportedFeature, render, structure, unstructure
from kfcompile.importer import (
    GPU_RESOURCES,
    SLOTS,
    Imported,
    LossyImport,
    NotImportable,
    convert_manifest,
    import_manifest,
    import_manifest_lossy,
    jobs_in,
)
from kfcompile.targets.reference import field_slots

PT = "pytorchjob/v1"
V20, V21, V22, V23 = (f"trainjob/v2.{i}" for i in range(4))
TRAINJOB = (V20, V21, V22, V23)
ALL = (PT, *TRAINJOB)
CRD_FILES = {
    PT: "pytorchjobs-v1.9.4.yaml",
    V20: "trainjobs-v2.0.1.yaml",
    V21: "trainjobs-v2.1.0.yaml",
    V22: "trainjobs-v2.2.1.yaml",
    V23: "trainjobs-v2.3.0.yaml",
}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SCRIPT_DIR = "/opt/kfcompile/scripts"
DEFAULT_MANAGER = {
    PT: "kubeflow.org/training-operator",
    **dict.fromkeys((V20, V21, V22, V23), "trainer.kubeflow.org/trainjob-controller"),
}

FAST = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Obj = dict[str, Any]


# --- the documented normalisation -------------------------------------------------------------


def normalise(spec: JobSpec, target: str) -> JobSpec:
    """The spec ``import(render(spec, target))`` gives back: the rewrites listed (numbered) in
    the ``kfcompile.importer`` docstring, each of which renders the same objects (a PyTorchJob's
    torchrun line as kfcompile writes it: the same nodes, processes and program)."""
    data = unstructure(spec)
    # 2. GPUs of an unknown accelerator are extra resources; no GPUs, no GPU resource.
    gpus = data.get("gpus_per_node", 0)
    resource = data.pop("gpu_resource", "nvidia.com/gpu")
    if gpus and resource not in GPU_RESOURCES:
        del data["gpus_per_node"]
        for group in ("extra_resource_requests", "extra_resource_limits"):
            data.setdefault(group, {})[resource] = str(gpus)
        gpus = 0
    elif gpus and resource != "nvidia.com/gpu":
        data["gpu_resource"] = resource
    # 1. nprocs_per_node only where it differs from its default.
    data.pop("nprocs_per_node", None)
    if spec.nprocs != (gpus or 1):
        data["nprocs_per_node"] = spec.nprocs
    # 3. The environment split as the container's list is read.
    secret = spec.secret_name
    items: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in spec.env.items()]
    items += [dict(i) for i in spec.env_list]
    items += [
        {"name": n, "valueFrom": {"secretKeyRef": {"name": secret, "key": n}}}
        for n in spec.secret_env
    ]
    start = 0
    while start < len(items) and set(items[start]) == {"name", "value"}:
        start += 1
    end = len(items)
    while end > start and items[end - 1] == {
        "name": items[end - 1]["name"],
        "valueFrom": {"secretKeyRef": {"name": secret, "key": items[end - 1]["name"]}},
    }:
        end -= 1
    for key in ("env", "env_list", "secret_env"):
        data.pop(key, None)
    if start:
        data["env"] = {i["name"]: i["value"] for i in items[:start]}
    if end > start:
        data["env_list"] = items[start:end]
    if end < len(items):
        data["secret_env"] = [i["name"] for i in items[end:]]
    # 4. Kueue labels are queue / priority_class; empty ones render nothing.
    labels = data.get("labels", {})
    for label, field in ((QUEUE_LABEL, "queue"), (PRIORITY_LABEL, "priority_class")):
        if labels.get(label):
            data[field] = labels.pop(label)
        if data.get(field) == "":
            del data[field]
    if not labels:
        data.pop("labels", None)
    # 5. The default runtime is no runtime_ref.
    if spec.runtime_ref == RuntimeRef():
        del data["runtime_ref"]
    # 6. The kind's default controller is no managed_by.
    if data.get("managed_by") == DEFAULT_MANAGER[target]:
        del data["managed_by"]
    # 7. Programs: launcher-shaped commands are launchers, and the other way round.
    command: list[str] = data.get("command", [])
    line = target == PT and command[:1] == ["torchrun"]  # a PyTorchJob's torchrun line
    if line:
        command = [*command, *data.get("args", [])]  # its args too
    shaped = len(command) > 1 and command[0] in ("torchrun", "python")
    shaped = shaped and (line or "args" not in data)
    program, rest = command[1:2], command[2:]
    if shaped and command[1] == "-m":  # python -m module
        program, rest = command[2:3], command[3:]
        module = len(program) == 1 and all(p.isidentifier() for p in program[0].split("."))
        shaped = module
    elif shaped:
        shaped = bool(command[1].strip()) and not command[1].startswith("-")
    if shaped:
        key = "module" if command[1] == "-m" else "entrypoint"
        data["launcher"] = {"kind": command[0], key: program[0]}
        if rest:
            data["launcher"]["args"] = rest
        del data["command"]
        data.pop("args", None)
    launcher: dict[str, Any] | None = data.get("launcher")
    if launcher is not None and "script" in data:
        launcher.setdefault("entrypoint", "train.py")
    # 1. (the exception) a PyTorchJob's python launcher with GPUs says its processes per node.
    if target == PT and launcher is not None and launcher["kind"] == "python" and gpus > 1:
        data["nprocs_per_node"] = spec.nprocs
    # 8. work_dir is a volume and its mount.
    work_dir = data.pop("work_dir", None)
    if work_dir is not None:
        data.setdefault("volumes", []).append(
            {"name": "workdir", "persistentVolumeClaim": {"claimName": work_dir["pvc"]}}
        )
        data.setdefault("volume_mounts", []).append(
            {"name": "workdir", "mountPath": work_dir["mount_path"]}
        )
    return structure(data)


def try_render(spec: JobSpec, target: str) -> list[Obj] | None:
    try:
        return render(spec, target)
    except UnsupportedFeature:
        return None


def as_served(objects: list[Obj], target: str) -> list[Obj]:
    """The objects with the controller default filled in: the TrainJob CRD defaults
    ``spec.managedBy``, and the Training Operator takes an absent ``runPolicy.managedBy`` as
    itself (KUBEFLOW.md, the v1.9 CRD's description)."""
    out = copy.deepcopy(objects)
    job = out[-1]["spec"]
    holder = job.setdefault("runPolicy", {}) if target == PT else job
    holder.setdefault("managedBy", DEFAULT_MANAGER[target])
    return out


def same(a: Any, b: Any, key: str = "") -> bool:
    """Equal as a cluster sees it: mappings in any order, pod volumes and mounts too."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return False
        if key in ("volumes", "volumeMounts"):
            a, b = sorted(a, key=repr), sorted(b, key=repr)
        return all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# --- a. round trip ---------------------------------------------------------------------------


# Found by Hypothesis: on a PyTorchJob a python launcher with more than one GPU must say its
# processes per node (the target refuses the default), so their number is read back as given.
PYTHON_ON_GPUS = structure(
    {
        "name": "j",
        "image": "i",
        "gpus_per_node": 2,
        "nprocs_per_node": 2,
        "launcher": {"kind": "python", "entrypoint": "t.py"},
    }
)


@FAST
@given(spec=S.job_specs())
@example(spec=PYTHON_ON_GPUS)
@example(spec=attrs.evolve(PYTHON_ON_GPUS, launcher=None, command=("python", "t.py")))
def test_import_inverts_render(spec: JobSpec) -> None:
    """Every target's output imports without loss, to the spec up to normalisation."""
    for t in ALL:
        objects = try_render(spec, t)
        if objects is None:
            continue
        back = import_manifest(objects[-1], companions=objects[:-1])
        assert back == normalise(spec, t), t


@pytest.mark.parametrize(
    "program",
    [{"command": ["torchrun", "t.py", "--x"]}, {"command": ["torchrun"], "args": ["-m", "p.t"]}],
)
def test_a_torchrun_command_reads_back_as_the_launcher_on_a_pytorchjob(program: Obj) -> None:
    """Normalisation 7 on a PyTorchJob: a torchrun line, with its args, is the launcher."""
    spec = structure({"name": "j", "image": "i", "num_nodes": 2, **program})
    back = import_manifest(render(spec, PT)[-1])
    assert back.launcher is not None and back.launcher.kind == "torchrun"
    assert back == normalise(spec, PT)


@FAST
@given(spec=S.job_specs())
@example(spec=PYTHON_ON_GPUS)
@example(spec=attrs.evolve(PYTHON_ON_GPUS, launcher=None, command=("python", "t.py")))
def test_normalisation_renders_the_same(spec: JobSpec) -> None:
    """The normalisation hides nothing: the normalised spec renders the same objects."""
    for t in ALL:
        objects = try_render(spec, t)
        if objects is not None:
            assert same(as_served(render(normalise(spec, t), t), t), as_served(objects, t)), t


@FAST
@given(spec=S.job_specs())
def test_imported_spec_is_detected_as_its_target(spec: JobSpec) -> None:
    """What import detects includes the release the manifest was rendered for."""
    for t in ALL:
        objects = try_render(spec, t)
        if objects is None:
            continue
        imported = import_manifest_lossy(objects[-1], objects[:-1])
        if t == PT:
            assert imported.detected == "PyTorchJob kubeflow.org/v1"
            assert imported.target == PT
        else:
            assert f"v{t[-3:]}" in imported.detected or "any Trainer release" in imported.detected
            assert imported.target >= t


# --- b. converting between every pair validates against the destination CRD ------------------


@FAST
@given(spec=S.job_specs(), source=st.sampled_from(ALL))
def test_convert_between_targets_passes_the_destination_crd(spec: JobSpec, source: str) -> None:
    schema_check.require_shared()
    objects = try_render(spec, source)
    if objects is None:
        return
    for t in ALL:
        try:
            converted = convert_manifest(objects[-1], t, objects[:-1], allow_lossy=True)
        except NotImportable:
            # what would run differently there (not a loss): refused as the spec itself is
            assert try_render(spec, t) is None, (source, t)
            continue
        for obj in converted.objects:
            if obj["kind"] == "ConfigMap":
                assert schema_check.configmap_errors(obj) == [], t
            else:
                assert schema_check.crd_errors(obj, CRD_FILES[t]) == [], (source, t)
        dropped = [p for p in converted.losses if p.message.endswith(": dropped")]
        if try_render(converted.imported.spec, t) is not None:
            assert dropped == [], (source, t)  # nothing the target lacks, nothing dropped
        else:
            assert dropped, (source, t)
            with pytest.raises(LossyImport):
                convert_manifest(objects[-1], t, objects[:-1])


def test_every_rendered_slot_is_read() -> None:
    """A slot the renderer fills but the importer never reads would be lost on import."""
    used = {slot for slots in field_slots().values() for slot in slots}
    assert used <= set(SLOTS), used - set(SLOTS)


# --- c. hand-written manifests ----------------------------------------------------------------


def pytorchjob(**spec: Any) -> Obj:
    """A minimal hand-written PyTorchJob: one Master, ``spec`` merged in."""
    container = {"name": "pytorch", "image": "img:1", "command": ["python", "/t.py"]}
    job: Obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "ns"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}
            }
        },
    }
    job["spec"].update(spec)
    return job


def trainjob(**spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"image": "img:1"},
            **spec,
        },
    }


def lines(imported: Imported) -> list[str]:
    return [str(p) for p in imported.losses]


def test_server_set_fields_are_dropped_silently() -> None:
    spec = structure({"name": "job", "image": "i", "num_nodes": 2, "shm_size": "1Gi"})
    for t in ALL:
        job = render(spec, t)[-1]
        plain = import_manifest(job)
        dumped = copy.deepcopy(job)
        dumped["status"] = {"conditions": [{"type": "Created", "status": "True"}]}
        dumped["metadata"].update(
            managedFields=[{"manager": "kubectl", "operation": "Update"}],
            resourceVersion="42",
            uid="0b3e1a57",
            creationTimestamp="2025-06-03T11:02:45Z",
            generation=3,
            selfLink="/apis/x",
            ownerReferences=[{"kind": "Workflow", "name": "w"}],
            annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        )
        assert import_manifest(dumped) == plain, t


def test_defaults_the_api_server_writes_are_not_fields() -> None:
    """managedBy's CRD default and a patch's time carry nothing; Kueue's patch is Kueue's."""
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "time": "2025-06-03T11:02:47Z",
        "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"kueue": "x"}}}},
    }
    job = trainjob(managedBy="trainer.kubeflow.org/trainjob-controller", runtimePatches=[patch])
    imported = import_manifest_lossy(job)
    assert imported.losses == ()
    assert imported.spec.managed_by is None and imported.spec.runtime_labels == {}


@pytest.mark.parametrize(
    ("spec", "detected", "target"),
    [
        ({"podSpecOverrides": []}, "TrainJob for Trainer v2.0 (podSpecOverrides)", V20),
        ({"podTemplateOverrides": []}, "TrainJob for Trainer v2.1 (podTemplateOverrides)", V21),
        ({"labels": {"a": "b"}}, "TrainJob for Trainer v2.0 or v2.1 (spec.labels)", V21),
        ({"runtimePatches": []}, "TrainJob for Trainer v2.2 or v2.3 (runtimePatches)", V23),
        (
            {"activeDeadlineSeconds": 5},
            "TrainJob for Trainer v2.2 or v2.3 (activeDeadlineSeconds)",
            V23,
        ),
        ({}, "TrainJob for any Trainer release v2.0-v2.3 (no release-specific field)", V23),
        (
            {"trainer": {"image": "i", "numProcPerNode": "auto"}},
            "TrainJob for Trainer v2.0 or v2.1 (string numProcPerNode)",
            V21,
        ),
        (
            {"podTemplateOverrides": [], "activeDeadlineSeconds": 5},
            "TrainJob mixing Trainer releases (podTemplateOverrides: v2.1; "
            "activeDeadlineSeconds: v2.2 or v2.3)",
            V23,
        ),
    ],
)
def test_trainjob_release_is_detected_from_its_fields(
    spec: dict[str, Any], detected: str, target: str
) -> None:
    imported = import_manifest_lossy(trainjob(**spec))
    assert (imported.detected, imported.target) == (detected, target)


def test_termination_grace_in_a_patch_means_v23() -> None:
    spec = structure({"name": "tj", "image": "i", "termination_grace_period_seconds": 9})
    imported = import_manifest_lossy(render(spec, V23)[-1])
    assert imported.detected == (
        "TrainJob for Trainer v2.3 (runtimePatches, terminationGracePeriodSeconds)"
    )


def test_replicas_that_differ_are_losses_on_the_worker() -> None:
    job = pytorchjob()
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]
    worker = copy.deepcopy(master)
    worker["replicas"] = 3
    worker["template"]["spec"]["containers"][0]["env"] = [{"name": "ROLE", "value": "worker"}]
    worker["template"]["spec"]["nodeSelector"] = {"pool": "cpu"}
    job["spec"]["pytorchReplicaSpecs"]["Worker"] = worker
    imported = import_manifest_lossy(job)
    assert imported.spec.num_nodes == 4
    assert imported.spec.env == {} and imported.spec.node_selector == {}
    assert lines(imported) == [
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[name=pytorch].env: "
        "differs from Master: every node gets the Master's",
        "spec.pytorchReplicaSpecs.Worker.template.spec.nodeSelector: "
        "differs from Master: every node gets the Master's",
    ]
    with pytest.raises(LossyImport) as raised:
        import_manifest(job)
    assert [str(p) for p in raised.value.problems] == lines(imported)


def test_replica_shapes_kfcompile_cannot_write_are_losses() -> None:
    job = pytorchjob()
    job["spec"]["pytorchReplicaSpecs"]["Chief"] = {"replicas": 1}
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    assert lines(import_manifest_lossy(job)) == [
        "spec.pytorchReplicaSpecs.Chief: a PyTorchJob has Master and Worker only: dropped",
        "spec.pytorchReplicaSpecs.Master.replicas: one Master: the rest are Workers",
    ]
    workers = pytorchjob()
    replicas = workers["spec"]["pytorchReplicaSpecs"]
    replicas["Worker"] = replicas.pop("Master")
    assert lines(import_manifest_lossy(workers)) == [
        "spec.pytorchReplicaSpecs.Worker: no Master and not elastic: node 0 is a Master"
    ]


def test_unknown_fields_are_losses_at_their_input_path() -> None:
    job = pytorchjob(
        runPolicy={"cleanPodPolicy": "All", "futureField": 1},
        elasticPolicy={"minReplicas": 1, "maxReplicas": 1, "rdzvId": "x", "standalone": True},
    )
    job["metadata"]["finalizers"] = ["example.com/keep"]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"] = {"name": "pod"}
    imported = import_manifest_lossy(job)
    assert imported.spec.clean_pod_policy == "All"
    assert sorted(lines(imported)) == [
        "metadata.finalizers: no JobSpec field holds it: dropped",
        "spec.elasticPolicy.rdzvId: kfcompile derives it from the job name: dropped",
        "spec.elasticPolicy.standalone: no JobSpec field holds it: dropped",
        "spec.pytorchReplicaSpecs.Master.template.metadata.name: no JobSpec field holds it: "
        "dropped",
        "spec.pytorchReplicaSpecs.Master: an elastic job has Workers only: a Worker now",
        "spec.runPolicy.futureField: no JobSpec field holds it: dropped",
    ]


def test_pod_and_container_fields_become_overrides_where_the_target_has_them() -> None:
    job = pytorchjob()
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    pod["priorityClassName"] = "high"
    pod["initContainers"] = [{"name": "fetch", "image": "busybox"}]
    pod["containers"].append({"name": "sidecar", "image": "envoy"})
    pod["containers"][0]["workingDir"] = "/w"
    pod["containers"][0]["ports"] = [{"name": "pytorchjob-port", "containerPort": 23456}]
    spec = import_manifest(job)
    assert spec.pod_spec_overrides == {
        "priorityClassName": "high",
        "initContainers": [{"name": "fetch", "image": "busybox"}],
        "containers": [{"name": "sidecar", "image": "envoy"}],
    }
    assert spec.container_overrides == {"workingDir": "/w"}  # the master port is kfcompile's
    patch = trainjob(
        runtimePatches=[
            {
                "manager": "kfcompile.dev/kfcompile",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {
                                            "template": {
                                                "spec": {
                                                    "securityContext": {"runAsNonRoot": True},
                                                    "containers": [
                                                        {
                                                            "name": "node",
                                                            "securityContext": {
                                                                "privileged": False
                                                            },
                                                        }
                                                    ],
                                                }
                                            }
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ]
    )
    spec = import_manifest(patch)
    assert spec.pod_spec_overrides == {"securityContext": {"runAsNonRoot": True}}
    assert spec.container_overrides == {"securityContext": {"privileged": False}}


def test_overrides_for_other_jobs_and_foreign_patches_are_losses() -> None:
    v21 = trainjob(
        podTemplateOverrides=[
            {"targetJobs": [{"name": "dataset-initializer"}], "spec": {"nodeSelector": {"a": "b"}}},
            {
                "targetJobs": [{"name": "node"}, {"name": "launcher"}],
                "spec": {"nodeSelector": {"c": "d"}},
            },
        ]
    )
    imported = import_manifest_lossy(v21)
    assert imported.spec.node_selector == {"c": "d"}
    assert lines(imported) == [
        "spec.podTemplateOverrides[0]: targets dataset-initializer, not the runtime's node job: "
        "dropped",
        "spec.podTemplateOverrides[1].targetJobs: applies to node only, not to launcher",
    ]
    node_env = {"name": "node", "env": [{"name": "A", "value": "1"}]}
    v22 = trainjob(
        runtimePatches=[
            {
                "manager": "example.com/team",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {"name": "launcher", "template": {}},
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {"template": {"spec": {"containers": [node_env]}}}
                                    },
                                },
                            ]
                        }
                    }
                },
            }
        ]
    )
    imported = import_manifest_lossy(v22)
    assert imported.spec.env == {"A": "1"}  # the node container's env is the trainer's
    assert lines(imported) == [
        "spec.runtimePatches[0].manager: example.com/team: written as kfcompile.dev/kfcompile",
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[name=launcher]: "
        "patches a job other than the runtime's node job: dropped",
    ]


def test_jobset_labels_on_one_level_only_are_a_loss() -> None:
    """kfcompile writes runtime_labels to the JobSet and its Jobs alike."""
    job = render(structure({"name": "tj", "image": "i", "runtime_labels": {"a": "b"}}), V22)[-1]
    template = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
    del template["spec"]["replicatedJobs"][0]["template"]["metadata"]
    imported = import_manifest_lossy(job)
    assert imported.spec.runtime_labels == {"a": "b"}
    assert lines(imported) == [
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[name=node]"
        ".template.metadata.labels: absent: written here as at "
        "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.labels"
    ]
    jobs = template["spec"]["replicatedJobs"][0]
    jobs["template"]["metadata"] = {"labels": {"a": "b", "c": "d"}}
    assert lines(import_manifest_lossy(job)) == [
        "spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.labels.c: absent here: "
        "written to all of spec.runtimePatches[0].trainingRuntimeSpec.template.metadata.labels, "
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[name=node]"
        ".template.metadata.labels"
    ]


def test_nproc_values_without_a_spec_equivalent() -> None:
    imported = import_manifest_lossy(pytorchjob(nprocPerNode="gpu"))
    assert imported.spec.nprocs_per_node == "auto"
    assert lines(imported) == ["spec.nprocPerNode: 'gpu' has no spec equivalent: written as 'auto'"]
    assert import_manifest(pytorchjob(nprocPerNode="4")).nprocs_per_node == 4
    assert import_manifest(pytorchjob()).nprocs_per_node == "auto"  # the operator's default


# The accelerators' device plugins, restated here as the oracle (not read from the importer):
# NVIDIA's k8s-device-plugin, AMD's ROCm k8s-device-plugin, Intel's GPU plugin (i915 and xe),
# Habana's Gaudi plugin, AWS's Neuron plugin (devices and cores), GKE's TPUs.
DEVICE_PLUGIN_GPUS = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "google.com/tpu",
)


def test_gpus_are_recognised_by_resource_name() -> None:
    assert set(GPU_RESOURCES) == set(DEVICE_PLUGIN_GPUS)
    for gpu in DEVICE_PLUGIN_GPUS:
        job = trainjob(trainer={"image": "i", "resourcesPerNode": {"limits": {gpu: 2}}})
        spec = import_manifest(job)
        assert (spec.gpus_per_node, spec.gpu_resource, spec.nprocs) == (2, gpu, "auto")
    job = trainjob(trainer={"image": "i", "resourcesPerNode": {"limits": {"x.io/fpga": "1"}}})
    spec = import_manifest(job)
    assert (spec.gpus_per_node, spec.extra_resource_limits) == (0, {"x.io/fpga": "1"})


def test_secret_env_and_work_dir_round_trip() -> None:
    spec = structure(
        {
            "name": "job",
            "image": "i",
            "env": {"A": "1"},
            "env_list": [
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
            ],
            "secret_env": ["HF_TOKEN", "WANDB_API_KEY"],
            "work_dir": {"local": ".", "pvc": "code", "mount_path": "/workspace"},
        }
    )
    for t in ALL:
        back = import_manifest(render(spec, t)[-1])
        assert back == normalise(spec, t), t
        assert back.secret_env == ("HF_TOKEN", "WANDB_API_KEY")
        assert back.work_dir is None
        assert {"name": "workdir", "persistentVolumeClaim": {"claimName": "code"}} in back.volumes


def test_inline_script_needs_its_configmap() -> None:
    """Without the companion ConfigMap the script's volume is an ordinary ConfigMap volume."""
    spec = structure(
        {"name": "s", "image": "i", "launcher": {"kind": "python"}, "script": "print(1)\n"}
    )
    config_map, job = render(spec, V23)
    assert import_manifest(job, [config_map]).script == "print(1)\n"
    alone = import_manifest(job)
    assert alone.script is None
    assert alone.launcher is not None
    assert alone.launcher.entrypoint == f"{SCRIPT_DIR}/train.py"
    assert render(alone, V23) == [job]
    stranger = {**config_map, "data": {"other.py": "x"}}
    assert lines(import_manifest_lossy(job, [stranger])) == [
        "ConfigMap s-script: not the job's inline script as kfcompile writes it: not converted"
    ]


@pytest.mark.parametrize("target", ALL)
def test_a_module_launcher_is_read_back_as_a_module(target: str) -> None:
    """``python -m m`` and torchrun's ``-m m`` are the ``module`` form; a ``-m`` without a
    module name after it is no launcher kfcompile writes, so it stays a command."""
    for kind in ("torchrun", "python"):
        launcher = {"kind": kind, "module": "nemo_run.core.runners.fdl_runner", "args": ["-n"]}
        spec = structure({"name": "m", "image": "i", "num_nodes": 2, "launcher": launcher})
        back = import_manifest(render(spec, target)[-1])
        assert back.launcher == spec.launcher, kind
        assert back.command == ()
    odd = structure({"name": "m", "image": "i", "command": ["python", "-m", "not a module"]})
    assert import_manifest(render(odd, target)[-1]).launcher is None


def _values_of(tree: Any, key: str) -> list[Any]:
    """Every value of ``key`` anywhere in a manifest (replicas of a PyTorchJob once each)."""
    if isinstance(tree, dict):
        found = [tree[key]] if key in tree else []
        return found + [v for k, x in tree.items() if k != "Worker" for v in _values_of(x, key)]
    if isinstance(tree, list):
        return [v for x in tree for v in _values_of(x, key)]
    return []


@pytest.mark.parametrize("target", ALL)
def test_torchrun_no_python_is_rendered_and_read_back(target: str) -> None:
    """``no_python`` is torchrun's ``--no-python`` just before the program on every target; an
    inline script is then mode 0755 (the process runs the file itself); both read back."""
    for script in (None, "#!/bin/bash\necho hi\n"):
        launcher = {"kind": "torchrun", "no_python": True, "entrypoint": "run.sh", "args": ["-x"]}
        data = {"name": "np", "image": "i", "num_nodes": 2, "launcher": launcher}
        spec = structure({**data, **({"script": script} if script else {})})
        *companions, job = render(spec, target)
        [words] = _values_of(job, "command")
        program = f"{SCRIPT_DIR}/run.sh" if script else "run.sh"
        assert words[0] == "torchrun" and words[-3:] == ["--no-python", program, "-x"]
        modes = [c.get("defaultMode") for c in _values_of(job, "configMap")]
        assert modes == ([0o755] if script else [])
        back = import_manifest(job, companions)
        assert back.launcher == spec.launcher
        assert back.script == spec.script


def test_what_cannot_be_imported() -> None:
    with pytest.raises(NotImportable, match="Deployment web is not a job kfcompile reads"):
        import_manifest(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
        )
    nameless = pytorchjob()
    del nameless["metadata"]["name"]
    with pytest.raises(NotImportable, match=r"metadata\.name: required"):
        import_manifest(nameless)
    renamed = pytorchjob()
    renamed["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "name"
    ] = "main"
    with pytest.raises(NotImportable) as raised:
        import_manifest(renamed)
    assert str(raised.value) == (
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[name=pytorch].image: "
        "required: the training image"
    )
    bad_name = pytorchjob()
    bad_name["metadata"]["name"] = "Not_A_Name"
    with pytest.raises(NotImportable) as raised:
        import_manifest(bad_name)
    assert str(raised.value).startswith("metadata.name: ")
    assert "(spec field name)" in str(raised.value)


def test_convert_refuses_what_it_cannot_drop() -> None:
    """A program too long for v2.2's 128 items cannot be dropped: there would be no job."""
    job = pytorchjob()
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["command"] = ["echo", *map(str, range(200))]
    assert convert_manifest(job, V21).objects
    with pytest.raises(NotImportable) as raised:
        convert_manifest(job, V22, allow_lossy=True)
    assert str(raised.value) == (
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[name=pytorch].command: "
        "at most 128 items from this release (for trainjob/v2.2)"
    )


def test_jobs_in_pairs_jobs_with_their_scripts() -> None:
    spec = structure({"name": "s", "image": "i", "launcher": {"kind": "python"}, "script": "1\n"})
    config_map, job = render(spec, PT)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}}
    listed = {"apiVersion": "v1", "kind": "List", "items": [job, service]}
    jobs, others = jobs_in([None, config_map, listed, "text"])
    assert jobs == [(job, [config_map])]
    assert [str(p) for p in others] == [
        "documents[2].items[1]: Service svc is not a PyTorchJob or TrainJob: not converted",
        "documents[3]: a document that is no mapping is not a PyTorchJob or TrainJob: "
        "not converted",
    ]


def _multi_node(command: list[str]) -> Obj:
    job = pytorchjob()
    specs = job["spec"]["pytorchReplicaSpecs"]
    specs["Master"]["template"]["spec"]["containers"][0]["command"] = command
    specs["Worker"] = copy.deepcopy(specs["Master"]) | {"replicas": 2}
    return job


NOT_TORCHRUN = [
    ["python3", "train.py"],
    ["/usr/bin/python3", "-u", "train.py"],
    ["python", "-m", "pkg.train"],
    ["bash", "-c", "python train.py"],
    ["sh", "-ec", "cd /app && python -m torch.distributed.elastic_agent"],
    ["./run.sh"],
    ["env", "A=1", "python", "t.py"],
]
TORCHRUN = [
    ["torchrun", "--nproc-per-node=8", "t.py"],
    ["/opt/conda/bin/torchrun", "t.py"],
    ["python", "-m", "torch.distributed.run", "t.py"],
    ["python3", "-u", "-mtorch.distributed.run", "t.py"],
    ["bash", "-c", "cd /app && torchrun t.py"],
    ["env", "NCCL_DEBUG=INFO", "torchrun", "t.py"],
]


@pytest.mark.parametrize("command", NOT_TORCHRUN, ids=" ".join)
def test_a_multi_node_job_without_torchrun_is_a_loss_on_trainjob(command: list[str]) -> None:
    job = _multi_node(command)
    assert convert_manifest(job, PT).losses == ()
    for t in TRAINJOB:
        with pytest.raises(LossyImport) as raised:
            convert_manifest(job, t)
        [line] = [str(p) for p in raised.value.problems]
        shown = " ".join(command)
        assert line.startswith(
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[name=pytorch].command: "
            f"runs {shown!r} on 3 nodes without torchrun"
        ), line
        assert "PET_*" in line and "kept as written" in line
        assert convert_manifest(job, t, allow_lossy=True).objects  # a warning with the flag


@pytest.mark.parametrize("command", TORCHRUN, ids=" ".join)
def test_a_multi_node_torchrun_job_converts_without_loss(command: list[str]) -> None:
    for t in TRAINJOB:
        assert convert_manifest(_multi_node(command), t).losses == ()


def test_a_single_node_program_needs_no_rendezvous() -> None:
    for t in TRAINJOB:
        assert convert_manifest(pytorchjob(), t).losses == ()


def test_import_and_convert_check_the_pod_name_budget() -> None:
    """A TrainJob whose pods would have names over 63 characters never starts: importing it is
    an error naming the pod name; a PyTorchJob with the same name is fine on its own shape."""
    long_name = "a" * 52
    stuck = trainjob(trainer={"image": "img:1", "numNodes": 4})
    stuck["metadata"]["name"] = long_name
    with pytest.raises(NotImportable) as raised:
        import_manifest(stuck)
    assert str(raised.value) == (
        f"metadata.name: too long for a TrainJob (JobSet pods): pod name "
        f"'{long_name}-node-0-3-xxxxx' would be 67 characters (a DNS label allows 63); this spec "
        "allows names of at most 48 characters"
    )
    fine = _multi_node(["torchrun", "t.py"])
    fine["metadata"]["name"] = long_name
    assert import_manifest(fine).name == long_name
    with pytest.raises(NotImportable, match="would be 67 characters"):
        convert_manifest(fine, V23, allow_lossy=True)

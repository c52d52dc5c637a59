"""The schema checker bites and passes: hand-written manifests against the real upstream schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import schema_check as sc

Obj = dict[str, Any]

TRAINJOB_CRDS = {
    "2.0": "trainjobs-v2.0.1.yaml",
    "2.1": "trainjobs-v2.1.0.yaml",
    "2.2": "trainjobs-v2.2.1.yaml",
    "2.3": "trainjobs-v2.3.0.yaml",
}
PYTORCHJOB_CRDS = {
    "1.7": "pytorchjobs-v1.7.0.yaml",
    "1.8": "pytorchjobs-v1.8.1.yaml",
    "1.9": "pytorchjobs-v1.9.4.yaml",
}


@pytest.fixture
def shared() -> None:
    sc.require_shared()


DELETE = object()


def patched(obj: Obj, path: str, value: Any) -> Obj:
    """A deep copy of obj with ``value`` set at (or DELETE removed from) the dotted ``path``."""
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node: Any = out
    for key in parents:
        node = node[int(key)] if key.isdigit() else node.setdefault(key, {})
    if value is DELETE:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return out


def trainjob() -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "x"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "numProcPerNode": 4},
        },
    }


def pod_template(container: str = "pytorch") -> Obj:
    return {
        "metadata": {"labels": {"app": "train"}, "annotations": {"note": "x"}},
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": "ghcr.io/acme/train:1.0",
                    "command": ["torchrun"],
                    "args": ["--nnodes=2", "train.py", "--epochs", "3"],
                    "env": [{"name": "HF_HOME", "value": "/cache"}, {"name": "SEED", "value": "1"}],
                    "resources": {
                        "limits": {"nvidia.com/gpu": 8, "memory": "64Gi", "cpu": "16"},
                        "requests": {"nvidia.com/gpu": 8, "memory": "64Gi", "cpu": "500m"},
                    },
                    "volumeMounts": [
                        {"name": "cache", "mountPath": "/cache"},
                        {"name": "dshm", "mountPath": "/dev/shm"},
                    ],
                }
            ],
            "volumes": [
                {"name": "cache", "persistentVolumeClaim": {"claimName": "hf-cache"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            ],
            "nodeSelector": {"gpu": "a100"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "serviceAccountName": "trainer",
            "imagePullSecrets": [{"name": "regcred"}],
        },
    }


def pytorchjob() -> Obj:
    def replica(n: int) -> Obj:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": pod_template()}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "x", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "nprocPerNode": "8",
            "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)},
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 3, "suspend": False},
        },
    }


# --- TrainJob -------------------------------------------------------------------------------

PATCH_POD = "trainingRuntimeSpec.template.spec.replicatedJobs.0.template.spec.template.spec"
RUNTIME_PATCH: Obj = {
    "manager": "example.com/kfcompile",
    "trainingRuntimeSpec": {
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}},
                    }
                ]
            }
        }
    },
}
OVERRIDE: Obj = {
    "targetJobs": [{"name": "node"}],
    "metadata": {"labels": {"a": "b"}},
    "spec": {"nodeSelector": {"a": "b"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
}
ALL, NONE = {"2.0", "2.1", "2.2", "2.3"}, set[str]()

# (dotted path, value, releases whose CRD accepts the patched TrainJob)
TRAINJOB_CASES: dict[str, tuple[str, Any, set[str]]] = {
    "numProcPerNode auto": ("spec.trainer.numProcPerNode", "auto", {"2.0", "2.1"}),
    "podSpecOverrides": ("spec.podSpecOverrides", [{"targetJobs": [{"name": "node"}]}], {"2.0"}),
    "podTemplateOverrides": ("spec.podTemplateOverrides", [OVERRIDE], {"2.1"}),
    "runtimePatches": ("spec.runtimePatches", [RUNTIME_PATCH], {"2.2", "2.3"}),
    "patch terminationGracePeriodSeconds": (
        "spec.runtimePatches",
        [patched(RUNTIME_PATCH, f"{PATCH_POD}.terminationGracePeriodSeconds", 30)],
        {"2.3"},
    ),
    "activeDeadlineSeconds": ("spec.activeDeadlineSeconds", 3600, {"2.2", "2.3"}),
    "labels": ("spec.labels", {"team": "ml"}, {"2.0", "2.1"}),
    "suspend": ("spec.suspend", True, ALL),
    "resources": ("spec.trainer.resourcesPerNode", {"limits": {"nvidia.com/gpu": 4}}, ALL),
    "unknown spec.trainer.foo": ("spec.trainer.foo", 1, NONE),
    "unknown spec.foo": ("spec.foo", 1, NONE),
    "unknown nested in patch": (
        "spec.runtimePatches",
        [patched(RUNTIME_PATCH, f"{PATCH_POD}.foo", 1)],
        NONE,
    ),
    "duplicate patch manager": ("spec.runtimePatches", [RUNTIME_PATCH, RUNTIME_PATCH], NONE),
    "numNodes string": ("spec.trainer.numNodes", "2", NONE),
    "numNodes float": ("spec.trainer.numNodes", 2.0, NONE),
    "suspend string": ("spec.suspend", "yes", NONE),
    "suspend null": ("spec.suspend", None, NONE),
    "bad quantity": ("spec.trainer.resourcesPerNode", {"limits": {"memory": "1GB"}}, NONE),
    "runtimeRef without name": ("spec.runtimeRef", {"kind": "ClusterTrainingRuntime"}, NONE),
    "wrong kind": ("kind", "PyTorchJob", NONE),
    "wrong apiVersion": ("apiVersion", "kubeflow.org/v1", NONE),
    "name not a string": ("metadata.name", 5, NONE),
    "label value not a string": ("metadata.labels", {"n": 1}, NONE),
}


@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("release", TRAINJOB_CRDS)
def test_minimal_trainjob_is_valid(release: str) -> None:
    assert sc.crd_errors(trainjob(), TRAINJOB_CRDS[release]) == []


@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("release", TRAINJOB_CRDS)
@pytest.mark.parametrize("case", TRAINJOB_CASES)
def test_trainjob_cases(case: str, release: str) -> None:
    path, value, valid_in = TRAINJOB_CASES[case]
    errors = sc.crd_errors(patched(trainjob(), path, value), TRAINJOB_CRDS[release])
    assert (errors == []) == (release in valid_in), errors
    assert all(path.rsplit(".", 1)[-1] in error for error in errors), errors  # for that reason


@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("crd_file", [*TRAINJOB_CRDS.values(), *PYTORCHJOB_CRDS.values()])
def test_converted_schemas_are_valid_json_schema(crd_file: str) -> None:
    sc._Validator.check_schema(sc.crd_schema(crd_file))


@pytest.mark.usefixtures("shared")
def test_errors_name_the_path() -> None:
    obj = patched(patched(trainjob(), "spec.trainer.foo", 1), "spec.trainer.numNodes", "2")
    assert sc.crd_errors(obj, TRAINJOB_CRDS["2.3"]) == [
        "spec.trainer.numNodes: '2' is not of type 'integer'",
        "spec.trainer: Additional properties are not allowed ('foo' was unexpected)",
    ]


# --- PyTorchJob -----------------------------------------------------------------------------

MASTER_POD = "spec.pytorchReplicaSpecs.Master.template.spec"
ALL_PT = {"1.7", "1.8", "1.9"}
PYTORCHJOB_CASES: dict[str, tuple[str, Any, set[str]]] = {
    "managedBy": ("spec.runPolicy.managedBy", "kubeflow.org/training-operator", {"1.9"}),
    "elasticPolicy": ("spec.elasticPolicy", {"rdzvBackend": "c10d", "maxReplicas": 4}, ALL_PT),
    "nprocPerNode int": ("spec.nprocPerNode", 8, set()),
    "unknown runPolicy field": ("spec.runPolicy.foo", 1, set()),
    "unknown pod field": (f"{MASTER_POD}.foo", 1, set()),
    "container without name": (f"{MASTER_POD}.containers.0.name", DELETE, set()),
    "unknown toleration key": (f"{MASTER_POD}.tolerations.0.foo", "x", set()),
    "bad quantity": (f"{MASTER_POD}.containers.0.resources.limits.memory", "1GB", set()),
    "replicas string": ("spec.pytorchReplicaSpecs.Worker.replicas", "3", set()),
}


@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("release", PYTORCHJOB_CRDS)
def test_pytorchjob_is_valid(release: str) -> None:
    assert sc.crd_errors(pytorchjob(), PYTORCHJOB_CRDS[release]) == []


@pytest.mark.usefixtures("shared")
@pytest.mark.parametrize("release", PYTORCHJOB_CRDS)
@pytest.mark.parametrize("case", PYTORCHJOB_CASES)
def test_pytorchjob_cases(case: str, release: str) -> None:
    path, value, valid_in = PYTORCHJOB_CASES[case]
    errors = sc.crd_errors(patched(pytorchjob(), path, value), PYTORCHJOB_CRDS[release])
    assert (errors == []) == (release in valid_in), errors
    assert all(path.rsplit(".", 1)[-1] in error for error in errors), errors


@pytest.mark.usefixtures("shared")
def test_list_map_keys_must_be_unique() -> None:
    containers = pod_template()["spec"]["containers"] * 2
    errors = sc.crd_errors(
        patched(pytorchjob(), f"{MASTER_POD}.containers", containers), PYTORCHJOB_CRDS["1.9"]
    )
    assert errors == [f'{MASTER_POD}.containers[1]: duplicate map entry ["pytorch"]']


def test_require_shared_fails_when_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sc, "SHARED", None)
    monkeypatch.setenv("KFCOMPILE_REQUIRE_SHARED", "1")
    with pytest.raises(pytest.fail.Exception, match="KFCOMPILE_REQUIRE_SHARED"):
        sc.require_shared()


def test_require_shared_skips_with_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sc, "SHARED", None)
    monkeypatch.delenv("KFCOMPILE_REQUIRE_SHARED", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"shared/crds not found.*KFCOMPILE_SHARED"):
        sc.require_shared()


# --- CRD conversion of extensions the shipped CRDs do not all use ----------------------------


def test_structural_extensions() -> None:
    schema = sc._convert(
        {
            "type": "object",
            "properties": {
                "port": {"x-kubernetes-int-or-string": True},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "empty": {"type": "object"},
                "maybe": {"type": "string", "nullable": True},
                "count": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
                "embedded": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {}}},
                },
            },
        }
    )
    validator = sc._Validator(schema)
    ok = {
        "port": "http",
        "raw": {"anything": [1]},
        "empty": {},
        "maybe": None,
        "count": 1,
        "embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
    }
    assert sc._errors(validator, ok) == []
    assert sc._errors(validator, {**ok, "port": 8080}) == []
    for bad in (
        {"port": 1.5},
        {"empty": {"x": 1}},
        {"count": 0},
        {"embedded": {"spec": {"x": 1}}},
        {"extra": 1},
    ):
        assert sc._errors(validator, {**ok, **bad}), bad


# --- core/v1 via kubernetes-validate --------------------------------------------------------


def test_pod_template_valid() -> None:
    assert sc.pod_template_errors(pod_template()) == []
    assert sc.pod_template_errors(pod_template(), sc.K8S_VERSIONS[0]) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.foo", 1),
        ("spec.tolerations.0.foo", "x"),
        ("spec.containers.0.ports", [{"containerPort": "http"}]),
        ("metadata.foo", 1),
        ("spec.containers", pod_template()["spec"]["containers"] * 2),
    ],
)
def test_pod_template_invalid(path: str, value: Any) -> None:
    assert sc.pod_template_errors(patched(pod_template(), path, value))


def test_pod_template_container_needs_name() -> None:
    template = patched(pod_template(), "spec.containers.0.name", DELETE)
    assert sc.pod_template_errors(template) == ["spec.containers[0]: 'name' is a required property"]


CONFIGMAP: Obj = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "x", "labels": {"a": "b"}},
    "data": {"hostfile": "node-0 slots=8\n"},
}


def test_configmap() -> None:
    assert sc.configmap_errors(CONFIGMAP) == []
    for path, value in [("data.n", 1), ("spec", {}), ("kind", "Secret"), ("metadata.foo", 1)]:
        assert sc.configmap_errors(patched(CONFIGMAP, path, value)), path

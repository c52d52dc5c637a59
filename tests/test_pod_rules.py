"""The API server's pod rules (``kfcompile.spec.pod_rules``, after k8s.io/kubernetes
pkg/apis/core/validation/validation.go): a spec whose pods would be refused is refused, when it
is loaded where the spec's own objects break them, else by render on the merged pods, on every
target, told at the spec field; beside each refused case, a valid one that renders."""

from __future__ import annotations

from typing import Any

import pytest
from refused import problems

from kfcompile.spec import pod_rules

TARGETS = ["trainjob/v2.0", "trainjob/v2.3", "pytorchjob/v1"]
WITH_AFFINITY = ["trainjob/v2.1", "trainjob/v2.3", "pytorchjob/v1"]  # v2.0 overrides have none


def both(name: str, amount: str) -> dict[str, Any]:
    return {"extra_resource_requests": {name: amount}, "extra_resource_limits": {name: amount}}


def node_term(**requirement: Any) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", **requirement}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


NODE_EXPR = (
    "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    ".nodeSelectorTerms[0].matchExpressions[0]"
)


# validateContainerResourceName
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["gpu", "pods"])
def test_an_unprefixed_resource_must_be_a_standard_one(target: str, name: str) -> None:
    found = problems(target, **both(name, "1"))
    assert [p.split(":")[0] for p in found] == [
        f"extra_resource_requests.{name}",
        f"extra_resource_limits.{name}",
    ]
    assert "must be a standard resource for containers" in found[0]
    assert problems(target, **both("example.com/fpga", "1")) == []
    assert (
        problems(
            target, container_overrides={"resources": {"limits": {"ephemeral-storage": "1Gi"}}}
        )
        == []
    )


@pytest.mark.parametrize("target", TARGETS)
def test_an_override_resource_name_is_checked_after_the_merge(target: str) -> None:
    over = {"resources": {"requests": {"pods": "1"}, "limits": {"pods": "1"}}}
    found = problems(target, container_overrides=over)
    assert found[0].startswith("container_overrides.resources.limits.pods: must be a standard")


# validateResourceQuantityValue (IsIntegerResourceName)
@pytest.mark.parametrize("target", TARGETS)
def test_an_extended_resource_is_counted_in_whole_units(target: str) -> None:
    found = problems(target, **both("example.com/fpga", "500m"))
    assert found == [
        'extra_resource_requests["example.com/fpga"]: must be an integer '
        "(example.com/fpga is counted in whole units)",
        'extra_resource_limits["example.com/fpga"]: must be an integer '
        "(example.com/fpga is counted in whole units)",
    ]
    assert problems(target, **both("example.com/fpga", "2")) == []


# ValidateContainerResourceRequirements: "HugePages require cpu or memory", told at the key
# (issue 27 item 2), when the spec is loaded; what an override merges in, at render.
@pytest.mark.parametrize("target", TARGETS)
def test_hugepages_need_cpu_or_memory_beside_them(target: str) -> None:
    assert problems(target, **both("hugepages-2Mi", "4Mi")) == [
        "extra_resource_requests.hugepages-2Mi: HugePages require cpu or memory"
    ]
    assert problems(target, extra_resource_limits={"hugepages-1Gi": "2Gi"}) == [
        "extra_resource_limits.hugepages-1Gi: HugePages require cpu or memory"
    ]
    over = {"resources": {"requests": {"hugepages-2Mi": "4Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}}
    assert problems(target, container_overrides=over) == [
        "container_overrides.resources.requests.hugepages-2Mi: HugePages require cpu or memory"
    ]
    assert problems(target, memory_request="1Gi", **both("hugepages-2Mi", "4Mi")) == []
    assert (
        problems(
            target,
            container_overrides={"resources": {"limits": {"cpu": "1"}}},
            **both("hugepages-2Mi", "4Mi"),
        )
        == []
    )


def test_hugepages_merged_into_a_whole_pod_are_checked_at_render() -> None:
    container = {"name": "setup", "resources": {"limits": {"hugepages-2Mi": "4Mi"}}}
    found = problems("pytorchjob/v1", pod_spec_overrides={"initContainers": [container]})
    assert len(found) == 1
    assert found[0].startswith("pod_spec_overrides.initContainers[0].resources: HugePages require")


# validateResourceQuantityHugePageValue
@pytest.mark.parametrize("target", TARGETS)
def test_hugepages_come_in_whole_pages(target: str) -> None:
    found = problems(target, cpu_request="1", **both("hugepages-2Mi", "3Mi"))
    message = "3Mi is not positive integer multiple of hugepages-2Mi"
    assert found == [
        f"extra_resource_requests.hugepages-2Mi: {message}",
        f"extra_resource_limits.hugepages-2Mi: {message}",
    ]
    assert problems(target, cpu_request="1", **both("hugepages-1Gi", "2Gi")) == []


def test_resource_requirements_between_requests_and_limits() -> None:
    """The rest of ValidateContainerResourceRequirements, on a merged container's resources."""
    assert list(pod_rules.resources({"requests": {"example.com/x": "1"}})) == [
        (("limits", "example.com/x"), "Limit must be set for non overcommitable resources")
    ]
    unequal = {"requests": {"example.com/x": "1"}, "limits": {"example.com/x": "2"}}
    assert list(pod_rules.resources(unequal)) == [
        (("requests", "example.com/x"), "must be equal to example.com/x limit")
    ]
    above = {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}
    assert list(pod_rules.resources(above)) == [
        (("requests", "cpu"), "must be less than or equal to cpu limit")
    ]
    assert list(pod_rules.resources({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}})) == []
    assert list(
        pod_rules.resources({"limits": {"hugepages-x": "1"}, "requests": {"cpu": "1"}})
    ) == [
        (
            ("limits", "hugepages-x"),
            "hugepages-x names no page size (hugepages-<size>, e.g. hugepages-2Mi)",
        )
    ]


# ValidateNodeSelectorRequirement
@pytest.mark.parametrize("target", WITH_AFFINITY)
@pytest.mark.parametrize(
    ("requirement", "where", "message"),
    [
        ({"operator": "In"}, ".values", "must be specified when `operator` is 'In' or 'NotIn'"),
        (
            {"operator": "Exists", "values": ["a"]},
            ".values",
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ),
        (
            {"operator": "Gt", "values": ["1", "2"]},
            ".values",
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        ),
    ],
)
def test_node_selector_operators_take_their_number_of_values(
    target: str, requirement: dict[str, Any], where: str, message: str
) -> None:
    assert problems(target, affinity=node_term(**requirement)) == [f"{NODE_EXPR}{where}: {message}"]


@pytest.mark.parametrize("target", WITH_AFFINITY)
def test_node_selector_operators_with_the_right_values_render(target: str) -> None:
    for requirement in (
        {"operator": "In", "values": ["a"]},
        {"operator": "DoesNotExist"},
        {"operator": "Lt", "values": ["3"]},
    ):
        assert problems(target, affinity=node_term(**requirement)) == [], requirement


def test_match_fields_and_label_selectors() -> None:
    """validateNodeFieldSelectorRequirement and apimachinery ValidateLabelSelectorRequirement."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
    assert [m for _, m in pod_rules.node_selector_term(term)] == [
        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
    ]
    term["matchFields"][0]["values"] = ["a"]
    assert list(pod_rules.node_selector_term(term)) == []
    selector = {"matchExpressions": [{"key": "a", "operator": "NotIn"}]}
    assert list(pod_rules.label_selector(selector)) == [
        (("matchExpressions", 0, "values"), "must be specified when `operator` is 'In' or 'NotIn'")
    ]
    assert (
        list(pod_rules.label_selector({"matchExpressions": [{"key": "a", "operator": "Exists"}]}))
        == []
    )


# validatePreferredSchedulingTerms / validateWeightedPodAffinityTerms
@pytest.mark.parametrize("target", WITH_AFFINITY)
@pytest.mark.parametrize("weight", [0, 101])
def test_preference_weights_are_1_to_100(target: str, weight: int) -> None:
    node = {
        "weight": weight,
        "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
    }
    pod = {"weight": weight, "podAffinityTerm": {"topologyKey": "zone"}}
    affinity = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [node]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [pod]},
    }
    assert problems(target, affinity=affinity) == [
        "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be in the range 1-100",
        "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be in the range 1-100",
    ]
    node["weight"] = pod["weight"] = 100 if weight else 1
    assert problems(target, affinity=affinity) == []


MOUNT = {"name": "d", "mountPath": "/d"}
EMPTY = [{"name": "d", "emptyDir": {}}]


# validateLocalDescendingPath (validateVolumeMounts' subPath)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("sub", "message"), [("../etc", "must not contain '..'"), ("/etc", "must be a relative path")]
)
def test_a_sub_path_descends(target: str, sub: str, message: str) -> None:
    mounts = [{**MOUNT, "subPath": sub}]
    assert problems(target, volumes=EMPTY, volume_mounts=mounts) == [
        f"volume_mounts[0].subPath: {message}"
    ]
    assert problems(target, volumes=EMPTY, volume_mounts=[{**MOUNT, "subPath": "a/..b/c"}]) == []


# validateMountPropagation
@pytest.mark.parametrize("target", TARGETS)
def test_mount_propagation_is_one_kubernetes_knows(target: str) -> None:
    mounts = [{**MOUNT, "mountPropagation": "Sideways"}]
    assert problems(target, volumes=EMPTY, volume_mounts=mounts) == [
        "volume_mounts[0].mountPropagation: must be one of: None, HostToContainer, Bidirectional"
    ]
    mounts = [{**MOUNT, "mountPropagation": "HostToContainer"}]
    assert problems(target, volumes=EMPTY, volume_mounts=mounts) == []


def test_bidirectional_propagation_needs_a_privileged_container() -> None:
    mounts = [{**MOUNT, "mountPropagation": "Bidirectional"}]
    assert problems("pytorchjob/v1", volumes=EMPTY, volume_mounts=mounts) == [
        "volume_mounts[0].mountPropagation: "
        "Bidirectional mount propagation is available only to privileged containers"
    ]
    privileged = {"securityContext": {"privileged": True}}
    assert (
        problems(
            "pytorchjob/v1", volumes=EMPTY, volume_mounts=mounts, container_overrides=privileged
        )
        == []
    )


# validateSecretVolumeSource / validateConfigMapVolumeSource / ... (fileModeErrorMsg)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", [-1, 0o1000])
def test_a_default_mode_is_0_to_0777(target: str, mode: int) -> None:
    volumes = [{"name": "d", "secret": {"secretName": "s", "defaultMode": mode}}]
    assert problems(target, volumes=volumes) == [
        "volumes[0].secret.defaultMode: must be a number between 0 and 0777 (octal), both inclusive"
    ]
    volumes[0]["secret"]["defaultMode"] = 0o777
    assert problems(target, volumes=volumes) == []


@pytest.mark.parametrize("target", TARGETS)
def test_projected_items_keep_their_paths_and_modes_in_bounds(target: str) -> None:
    item = {"key": "k", "path": "../x", "mode": 0o1000}
    volumes = [
        {"name": "d", "projected": {"sources": [{"configMap": {"name": "c", "items": [item]}}]}}
    ]
    at = "pod_spec_overrides.volumes[0].projected.sources[0].configMap.items[0]"
    assert problems(target, pod_spec_overrides={"volumes": volumes}) == [
        f"{at}.path: must not contain '..'",
        f"{at}.path: must not start with '..'",
        f"{at}.mode: must be a number between 0 and 0777 (octal), both inclusive",
    ]
    item.update(path="conf/x", mode=0o640)
    assert problems(target, pod_spec_overrides={"volumes": volumes}) == []


def test_a_whole_pod_mounts_only_its_own_volumes_and_names_containers_once() -> None:
    """validateVolumeMounts ("not found") and validateContainers ("Duplicate"), on a PyTorchJob's
    templates, which are whole pods (a TrainJob patches its runtime's pod, whose volumes
    kfcompile cannot see)."""
    spec = {"containers": [{"name": "a", "volumeMounts": [MOUNT]}, {"name": "a"}]}
    assert list(pod_rules.pod_spec(spec)) == [
        (("containers", 0, "volumeMounts", 0, "name"), "not found: the pod has no volume 'd'"),
        (("containers", 1, "name"), "Duplicate value: 'a'"),
    ]
    assert list(pod_rules.pod_spec(spec, whole=False)) == []
    assert list(pod_rules.pod_spec({"volumes": EMPTY, "containers": spec["containers"][:1]})) == []


def test_the_rules_never_raise_on_odd_shapes() -> None:
    for odd in (
        None,
        3,
        "x",
        [],
        {},
        {"containers": "x"},
        {"volumes": [1, None]},
        {"affinity": []},
        {"dnsConfig": []},
        {"dnsConfig": {"nameservers": "x", "searches": [1, None], "options": [None, 3]}},
    ):
        assert list(pod_rules.pod_spec(odd)) == []
    assert list(pod_rules.resources({"requests": {"cpu": "lots"}, "limits": []})) == []


# validateVolumeMounts: "must be unique" (a TrainJob's CRD keys mounts by volume name only)
@pytest.mark.parametrize("target", ["trainjob/v2.0", "trainjob/v2.3"])
def test_two_volumes_on_one_mount_path_through_an_override(target: str) -> None:
    volumes = [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]
    mounts = [{"name": "a", "mountPath": "/x"}, {"name": "b", "mountPath": "/x"}]
    # On the rendered pod (whatever merged into it), and said first by the spec's own rule
    # for every way a spec gives mounts.
    assert list(pod_rules.volume_mounts(mounts, ["a", "b"], None)) == [
        ((1, "mountPath"), "must be unique: '/x' is mounted twice")
    ]
    over = {"containers": [{"name": "node", "volumeMounts": mounts}], "volumes": volumes}
    assert problems(target, pod_spec_overrides=over) == [
        "pod_spec_overrides.containers[0].volumeMounts[1].mountPath: already mounted by "
        "pod_spec_overrides.containers[0].volumeMounts[0]"
    ]
    assert problems(target, volumes=volumes, container_overrides={"volumeMounts": mounts}) == [
        "container_overrides.volumeMounts[1].mountPath: already mounted by "
        "container_overrides.volumeMounts[0]"
    ]
    mounts[1]["mountPath"] = "/y"
    assert problems(target, volumes=volumes, container_overrides={"volumeMounts": mounts}) == []


def test_sub_path_and_sub_path_expr_exclude_each_other() -> None:
    both_set = [{**MOUNT, "subPath": "a", "subPathExpr": "$(POD)"}]
    assert list(pod_rules.volume_mount(both_set[0])) == [
        (("subPathExpr",), "subPathExpr and subPath are mutually exclusive")
    ]
    assert list(pod_rules.volume_mount({**MOUNT, "subPathExpr": "$(POD)/x"})) == []


# ValidateNodeSelectorRequirement, and k8s.io/apimachinery labels.NewRequirement, which the
# scheduler parses each term with: Gt and Lt compare a node label with one integer; anything
# else and the term never matches, so the pods are never scheduled (issue 27 item 3).
@pytest.mark.parametrize("target", WITH_AFFINITY)
@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_gt_and_lt_compare_with_an_integer(target: str, operator: str) -> None:
    message = "for 'Gt', 'Lt' operators, the value must be an integer"
    assert problems(target, affinity=node_term(operator=operator, values=["ten"])) == [
        f"{NODE_EXPR}.values[0]: {message}"
    ]
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "preference": {
                        "matchExpressions": [
                            {"key": "zone", "operator": operator, "values": ["1.5"]}
                        ]
                    },
                }
            ]
        }
    }
    at = "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
    assert problems(target, affinity=preferred) == [
        f"{at}.matchExpressions[0].values[0]: {message}"
    ]
    for value in ("10", "0"):  # (a sign is no label value)
        assert problems(target, affinity=node_term(operator=operator, values=[value])) == []


@pytest.mark.parametrize("target", WITH_AFFINITY)
def test_node_selector_keys_are_label_names_and_required_values_label_values(target: str) -> None:
    found = problems(target, affinity=node_term(operator="In", values=["a b"]) | {})
    assert [line.split(":")[0] for line in found] == [f"{NODE_EXPR}.values[0]"]
    term = node_term(operator="Exists")
    term["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]["key"] = "a/b/c"
    assert [line.split(":")[0] for line in problems(target, affinity=term)] == [f"{NODE_EXPR}.key"]


def test_five_affinity_problems_are_five_lines() -> None:
    """The case of issue 27 item 3: four lines came for five problems (Gt with a word was
    accepted), and a missing topologyKey hid the rest until it was fixed."""
    required = [
        {"key": "a", "operator": "In"},
        {"key": "b", "operator": "Exists", "values": ["x"]},
        {"key": "c", "operator": "Gt", "values": ["ten"]},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": required}]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 0,
                    "preference": {"matchExpressions": [{"key": "e", "operator": "Exists"}]},
                }
            ],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]
        },
    }
    node = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    for target in WITH_AFFINITY:
        assert [line.split(": ")[0] for line in problems(target, affinity=affinity)] == [
            f"{node}.nodeSelectorTerms[0].matchExpressions[0].values",
            f"{node}.nodeSelectorTerms[0].matchExpressions[1].values",
            f"{node}.nodeSelectorTerms[0].matchExpressions[2].values[0]",
            "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        ], target


# validateHostPathVolumeSource: validateHostPathType, validatePathNoBacksteps (issue 27 item 4)
@pytest.mark.parametrize("target", TARGETS)
def test_a_host_path_has_a_kubernetes_type(target: str) -> None:
    def host(**source: Any) -> list[dict[str, Any]]:
        return [{"name": "h", "hostPath": {"path": "/data", **source}}]

    assert problems(target, volumes=host(type="Bogus")) == [
        'volumes[0].hostPath.type: must be one of: "", DirectoryOrCreate, Directory, '
        "FileOrCreate, File, Socket, CharDevice, BlockDevice"
    ]
    found = problems(target, pod_spec_overrides={"volumes": host(type="directory")})
    assert [line.split(":")[0] for line in found] == ["pod_spec_overrides.volumes[0].hostPath.type"]
    assert problems(target, volumes=host(path="/data/../etc")) == [
        "volumes[0].hostPath.path: must not contain '..'"
    ]
    for kind in pod_rules.HOST_PATH_TYPES:
        assert problems(target, volumes=host(type=kind)) == [], kind


# --- issue 24 item 8: the rest of ValidatePodSpec that a spec or an override can break --------

PT = "pytorchjob/v1"
SETUP = {"name": "setup", "image": "busybox"}
PROBE = {"exec": {"command": ["true"]}}


def env(**source: Any) -> dict[str, Any]:
    return {"env_list": [{"name": "A", "valueFrom": source}]}


def ports(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"container_overrides": {"ports": list(entries)}}


def pod(**fields: Any) -> dict[str, Any]:
    return {"pod_spec_overrides": fields}


def security(**context: Any) -> dict[str, Any]:
    return {"container_overrides": {"securityContext": context}}


# 32 search paths of 2048 characters with the spaces between them (each 63, the last with a
# trailing dot): as many, and as long, as validatePodDNSConfig takes.
SEARCHES = [f"{'a' * 29}{i:02d}.{'b' * 31}" for i in range(32)]
SEARCHES[-1] += "."
assert len(" ".join(SEARCHES)) == 2048  # MaxDNSSearchListChars


# (what the spec writes, [(path, a phrase of the message)]), each beside the function it mirrors
REFUSED: dict[str, tuple[dict[str, Any], list[tuple[str, str]]]] = {
    # validateEnvVarValueFrom
    "env: no source": (env(), [("env_list[0].valueFrom", "must specify one of")]),
    "env: two sources": (
        env(fieldRef={"fieldPath": "metadata.name"}, secretKeyRef={"name": "s", "key": "k"}),
        [("env_list[0].valueFrom", "more than one field")],
    ),
    # validateSecretKeySelector / validateConfigMapKeySelector (IsConfigMapKey)
    "env: secret name": (
        env(secretKeyRef={"name": "My_Secret", "key": "k"}),
        [("env_list[0].valueFrom.secretKeyRef.name", "RFC 1123 subdomain")],
    ),
    "env: secret key": (
        env(secretKeyRef={"name": "s", "key": "a key"}),
        [("env_list[0].valueFrom.secretKeyRef.key", "a valid config key")],
    ),
    "env: config map without name": (
        env(configMapKeyRef={"key": "k"}),
        [("env_list[0].valueFrom.configMapKeyRef.name", "required")],
    ),
    "env: empty config map key": (
        env(configMapKeyRef={"name": "c", "key": ""}),
        [("env_list[0].valueFrom.configMapKeyRef.key", "required")],
    ),
    # validateObjectFieldSelector
    "env: field path": (
        env(fieldRef={"fieldPath": "spec.containers"}),
        [("env_list[0].valueFrom.fieldRef.fieldPath", "must be one of: metadata.name")],
    ),
    "env: field subscript": (
        env(fieldRef={"fieldPath": "spec.nodeName['x']"}),
        [("env_list[0].valueFrom.fieldRef.fieldPath", "does not support subscript")],
    ),
    "env: label key": (
        env(fieldRef={"fieldPath": "metadata.labels['a b']"}),
        [("env_list[0].valueFrom.fieldRef.fieldPath", "name part must consist of")],
    ),
    # validateContainerResourceFieldSelector, validateContainerResourceDivisor
    "env: resource": (
        env(resourceFieldRef={"resource": "limits.nvidia.com/gpu"}),
        [("env_list[0].valueFrom.resourceFieldRef.resource", "must be one of: limits.cpu")],
    ),
    "env: divisor": (
        env(resourceFieldRef={"resource": "limits.cpu", "divisor": "1Mi"}),
        [("env_list[0].valueFrom.resourceFieldRef.divisor", "must be one of 1m, 1")],
    ),
    # ValidateEnvFrom (validateConfigMapEnvSource, validateSecretEnvSource)
    "envFrom: no source": (
        {"container_overrides": {"envFrom": [{"prefix": "X_"}]}},
        [("container_overrides.envFrom[0]", "must specify one of")],
    ),
    "envFrom: two sources": (
        {
            "container_overrides": {
                "envFrom": [{"configMapRef": {"name": "c"}, "secretRef": {"name": "s"}}]
            }
        },
        [("container_overrides.envFrom[0]", "must specify one of")],
    ),
    "envFrom: unnamed": (
        {"container_overrides": {"envFrom": [{"secretRef": {}}]}},
        [("container_overrides.envFrom[0].secretRef.name", "required")],
    ),
    "envFrom: prefix": (
        {"container_overrides": {"envFrom": [{"prefix": "1X", "configMapRef": {"name": "c"}}]}},
        [("container_overrides.envFrom[0].prefix", "environment variable name")],
    ),
    # validateVolumeSource: each source's required name
    "volume: config map": (
        {"volumes": [{"name": "v", "configMap": {}}]},
        [("volumes[0].configMap.name", "required")],
    ),
    "volume: secret": (
        {"volumes": [{"name": "v", "secret": {"secretName": ""}}]},
        [("volumes[0].secret.secretName", "required")],
    ),
    "volume: pvc": (
        {
            "pod_spec_overrides": {
                "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": ""}}]
            }
        },
        [("pod_spec_overrides.volumes[0].persistentVolumeClaim.claimName", "required")],
    ),
    "volume: nfs": (
        {"volumes": [{"name": "v", "nfs": {"server": "fs", "path": ""}}]},
        [("volumes[0].nfs.path", "required")],
    ),
    "volume: csi": (
        {"volumes": [{"name": "v", "csi": {"driver": ""}}]},
        [("volumes[0].csi.driver", "required")],
    ),
    "volume: projected secret": (
        {"volumes": [{"name": "v", "projected": {"sources": [{"secret": {}}]}}]},
        [("volumes[0].projected.sources[0].secret.name", "required")],
    ),
    # validateContainerPorts (IsValidPortNum, IsValidPortName)
    "port: number": (
        ports({"containerPort": 70000}),
        [("container_overrides.ports[0].containerPort", "between 1 and 65535")],
    ),
    "port: zero": (
        ports({"containerPort": 0}),
        [("container_overrides.ports[0].containerPort", "required")],
    ),
    "port: host port": (
        ports({"containerPort": 80, "hostPort": 65536}),
        [("container_overrides.ports[0].hostPort", "between 1 and 65535")],
    ),
    "port: long name": (
        ports({"containerPort": 80, "name": "metrics-exporter"}),
        [("container_overrides.ports[0].name", "no more than 15 characters")],
    ),
    "port: name": (
        ports({"containerPort": 80, "name": "Metrics_1"}),
        [("container_overrides.ports[0].name", "alpha-numeric")],
    ),
    "port: digits only": (
        ports({"containerPort": 80, "name": "8080"}),
        [("container_overrides.ports[0].name", "at least one letter")],
    ),
    "port: protocol": (
        ports({"containerPort": 80, "protocol": "HTTP"}),
        [("container_overrides.ports[0].protocol", "TCP, UDP, SCTP")],
    ),
    "port: same name": (
        ports({"containerPort": 80, "name": "web"}, {"containerPort": 81, "name": "web"}),
        [("container_overrides.ports[1].name", "Duplicate value")],
    ),
    # validatePodHostNetworkDeps
    "port: hostPort under hostNetwork": (
        {**pod(hostNetwork=True), **ports({"containerPort": 8080, "hostPort": 9090})},
        [("container_overrides.ports[0].hostPort", "must match `containerPort`")],
    ),
    # ValidatePodSpec's single fields (POD_FIELDS)
    "pod: dnsPolicy": (
        pod(dnsPolicy="Cluster"),
        [("pod_spec_overrides.dnsPolicy", "ClusterFirst")],
    ),
    "pod: hostname": (pod(hostname="Node_1"), [("pod_spec_overrides.hostname", "RFC 1123 label")]),
    "pod: subdomain": (
        pod(subdomain="a.b"),
        [("pod_spec_overrides.subdomain", "must not contain dots")],
    ),
    "pod: priorityClassName": (
        pod(priorityClassName="Top Priority"),
        [("pod_spec_overrides.priorityClassName", "RFC 1123 subdomain")],
    ),
    "pod: nodeName": (
        pod(nodeName="Node_1"),
        [("pod_spec_overrides.nodeName", "RFC 1123 subdomain")],
    ),
    "pod: activeDeadlineSeconds": (
        pod(activeDeadlineSeconds=0),
        [("pod_spec_overrides.activeDeadlineSeconds", "between 1 and 2147483647")],
    ),
    "pod: preemptionPolicy": (
        pod(preemptionPolicy="Always"),
        [("pod_spec_overrides.preemptionPolicy", "PreemptLowerPriority")],
    ),
    "pod: runtimeClassName": (
        pod(runtimeClassName="NVIDIA"),
        [("pod_spec_overrides.runtimeClassName", "RFC 1123 subdomain")],
    ),
    # validateContainerCommon / validateInitContainers / validateContainers
    "sidecar: name": (
        pod(initContainers=[{**SETUP, "name": "Set_Up"}]),
        [("pod_spec_overrides.initContainers[0].name", "RFC 1123 label")],
    ),
    "sidecar: restartPolicy": (
        pod(initContainers=[{**SETUP, "restartPolicy": "OnFailure"}]),
        [("pod_spec_overrides.initContainers[0].restartPolicy", "must be one of: Always")],
    ),
    "init: probe without restartPolicy Always": (
        pod(initContainers=[{**SETUP, "readinessProbe": PROBE}]),
        [("pod_spec_overrides.initContainers[0].readinessProbe", "restartPolicy=Always")],
    ),
    "init: the training container's name": (
        pod(initContainers=[{**SETUP, "name": "pytorch"}]),
        [("pod_spec_overrides.initContainers[0].name", "Duplicate value: 'pytorch'")],
    ),
    "container: restartPolicy": (
        {"container_overrides": {"restartPolicy": "Always"}},
        [("container_overrides.restartPolicy", "non-init containers")],
    ),
    # validateProbe / validateHandler / validateLivenessProbe / validateReadinessProbe
    "probe: no handler": (
        {"container_overrides": {"livenessProbe": {"periodSeconds": 5}}},
        [("container_overrides.livenessProbe", "must specify a handler type")],
    ),
    "probe: two handlers": (
        {"container_overrides": {"startupProbe": {**PROBE, "tcpSocket": {"port": 80}}}},
        [("container_overrides.startupProbe.tcpSocket", "more than 1 handler type")],
    ),
    "probe: exec without command": (
        {"container_overrides": {"livenessProbe": {"exec": {}}}},
        [("container_overrides.livenessProbe.exec.command", "required")],
    ),
    "probe: port": (
        {"container_overrides": {"readinessProbe": {"httpGet": {"port": 0}}}},
        [("container_overrides.readinessProbe.httpGet.port", "between 1 and 65535")],
    ),
    "probe: negative": (
        {"container_overrides": {"readinessProbe": {**PROBE, "periodSeconds": -1}}},
        [("container_overrides.readinessProbe.periodSeconds", "greater than or equal to 0")],
    ),
    "probe: liveness threshold": (
        {
            "pod_spec_overrides": {
                "initContainers": [
                    {
                        **SETUP,
                        "restartPolicy": "Always",
                        "livenessProbe": {**PROBE, "successThreshold": 2},
                    }
                ]
            }
        },
        [("pod_spec_overrides.initContainers[0].livenessProbe.successThreshold", "must be 1")],
    ),
    "lifecycle: no handler": (
        {"container_overrides": {"lifecycle": {"preStop": {}}}},
        [("container_overrides.lifecycle.preStop", "must specify a handler type")],
    ),
    # validateTopologySpreadConstraints: ValidateMaxSkew, ValidateWhenUnsatisfiable,
    # validateMinDomains
    "spread: maxSkew": (
        pod(
            topologySpreadConstraints=[
                {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
            ]
        ),
        [("pod_spec_overrides.topologySpreadConstraints[0].maxSkew", "greater than zero")],
    ),
    "spread: whenUnsatisfiable": (
        pod(
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}
            ]
        ),
        [("pod_spec_overrides.topologySpreadConstraints[0].whenUnsatisfiable", "DoNotSchedule")],
    ),
    "spread: minDomains": (
        pod(
            topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "minDomains": 2,
                }
            ]
        ),
        [("pod_spec_overrides.topologySpreadConstraints[0].minDomains", "only use minDomains")],
    ),
    # ValidateHostAliases
    "hostAliases: ip": (
        pod(hostAliases=[{"ip": "10.0.0.256"}]),
        [("pod_spec_overrides.hostAliases[0].ip", "valid IP address")],
    ),
    "hostAliases: hostname": (
        pod(hostAliases=[{"ip": "10.0.0.1", "hostnames": ["Data_Host"]}]),
        [("pod_spec_overrides.hostAliases[0].hostnames[0]", "RFC 1123 subdomain")],
    ),
    # validatePodDNSConfig (MaxDNSNameservers, IsValidIP, MaxDNSSearchPaths,
    # MaxDNSSearchListChars, ValidateDNS1123Subdomain)
    "dns: None without dnsConfig": (
        pod(dnsPolicy="None"),
        [("pod_spec_overrides.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None")],
    ),
    "dns: None without nameservers": (
        pod(dnsPolicy="None", dnsConfig={"searches": ["example.com"]}),
        [("pod_spec_overrides.dnsConfig.nameservers", "at least one DNS nameserver")],
    ),
    "dns: four nameservers": (
        pod(dnsConfig={"nameservers": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]}),
        [("pod_spec_overrides.dnsConfig.nameservers", "more than 3 nameservers")],
    ),
    "dns: nameserver": (
        pod(dnsConfig={"nameservers": ["10.0.0.256"]}),
        [("pod_spec_overrides.dnsConfig.nameservers[0]", "valid IP address")],
    ),
    "dns: nameserver with a zone": (  # Python's parser takes it; Go's does not
        pod(dnsConfig={"nameservers": ["fe80::1%eth0"]}),
        [("pod_spec_overrides.dnsConfig.nameservers[0]", "valid IP address")],
    ),
    "dns: 33 search paths": (
        pod(dnsConfig={"searches": [f"s{i}.example.com" for i in range(33)]}),
        [("pod_spec_overrides.dnsConfig.searches", "more than 32 search paths")],
    ),
    "dns: 2049 characters of search paths": (
        pod(dnsConfig={"searches": [*SEARCHES[:-1], SEARCHES[-1] + "c"]}),
        [("pod_spec_overrides.dnsConfig.searches", "more than 2048 characters")],
    ),
    "dns: search path": (
        pod(dnsConfig={"searches": ["Corp_Net.example.com"]}),
        [("pod_spec_overrides.dnsConfig.searches[0]", "RFC 1123 subdomain")],
    ),
    "dns: two trailing dots": (
        pod(dnsConfig={"searches": ["example.com.."]}),
        [("pod_spec_overrides.dnsConfig.searches[0]", "RFC 1123 subdomain")],
    ),
    "dns: option without a name": (
        pod(dnsConfig={"nameservers": ["10.0.0.10"], "options": [{"value": "2"}]}),
        [("pod_spec_overrides.dnsConfig.options[0].name", "required")],
    ),
    # ValidateSecurityContext, validatePodSpecSecurityContext (IsValidUserID, IsValidGroupID)
    "security: runAsUser": (
        security(runAsUser=-1),
        [("container_overrides.securityContext.runAsUser", "between 0 and 2147483647")],
    ),
    "security: runAsGroup": (
        security(runAsGroup=-1),
        [("container_overrides.securityContext.runAsGroup", "between 0 and 2147483647")],
    ),
    "security: privileged without escalation": (
        security(privileged=True, allowPrivilegeEscalation=False),
        [("container_overrides.securityContext.allowPrivilegeEscalation", "`privileged` to true")],
    ),
    "security: CAP_SYS_ADMIN without escalation": (
        security(allowPrivilegeEscalation=False, capabilities={"add": ["CAP_SYS_ADMIN"]}),
        [("container_overrides.securityContext.allowPrivilegeEscalation", "CAP_SYS_ADMIN")],
    ),
    "pod security: fsGroup": (
        pod(securityContext={"fsGroup": -1, "runAsUser": -2}),
        [
            ("pod_spec_overrides.securityContext.fsGroup", "between 0 and 2147483647"),
            ("pod_spec_overrides.securityContext.runAsUser", "between 0 and 2147483647"),
        ],
    ),
}

ACCEPTED: dict[str, dict[str, Any]] = {
    "env sources": {
        "env_list": [
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token.txt"}}},
            {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "KEY_1"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {
                "name": "D",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
            },
            {
                "name": "E",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {
                "name": "F",
                "valueFrom": {"resourceFieldRef": {"resource": "requests.hugepages-2Mi"}},
            },
        ]
    },
    "volumes": {
        "volumes": [
            {"name": "a", "configMap": {"name": "conf"}},
            {"name": "b", "secret": {"secretName": "creds"}},
            {
                "name": "c",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "x"}},
                        {"serviceAccountToken": {"path": "t"}},
                    ]
                },
            },
        ]
    },
    "container": {
        "container_overrides": {
            "ports": [{"containerPort": 8080, "name": "metrics", "protocol": "UDP"}],
            "envFrom": [{"prefix": "X_", "configMapRef": {"name": "c"}}],
            "livenessProbe": {**PROBE, "successThreshold": 1, "periodSeconds": 0},
            "readinessProbe": {"httpGet": {"port": "metrics"}},
            "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
            "securityContext": {
                "runAsUser": 0,
                "privileged": True,
                "allowPrivilegeEscalation": True,
            },
        }
    },
    "dns": pod(
        dnsPolicy="None",
        dnsConfig={
            "nameservers": ["10.0.0.10", "fd00::a", "1.1.1.1"],
            "searches": SEARCHES,
            "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
        },
    ),
    "dns beside the cluster's": pod(
        dnsPolicy="ClusterFirst", dnsConfig={"searches": ["svc.cluster.local."]}
    ),
    "pod": {
        "pod_spec_overrides": {
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "hostname": "node-0",
            "priorityClassName": "high.priority",
            "activeDeadlineSeconds": 3600,
            "nodeName": "ip-10-0-0-1.ec2.internal",
            "hostAliases": [{"ip": "fd00::1", "hostnames": ["store.local"]}],
            "securityContext": {"fsGroup": 1000, "supplementalGroups": [0, 5]},
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "minDomains": 2,
                }
            ],
            "initContainers": [
                {**SETUP, "restartPolicy": "Always", "startupProbe": PROBE},
                {"name": "fetch", "image": "busybox"},
            ],
        },
        "container_overrides": {"ports": [{"containerPort": 9090, "hostPort": 9090}]},
    },
}


@pytest.mark.parametrize("case", REFUSED)
def test_what_validate_pod_spec_refuses_is_refused(case: str) -> None:
    fields, expected = REFUSED[case]
    found = problems(PT, **fields)
    assert len(found) == len(expected), found
    for line, (path, phrase) in zip(found, expected, strict=True):
        assert line.startswith(f"{path}: "), found
        assert phrase in line, found


@pytest.mark.parametrize("case", ACCEPTED)
def test_what_validate_pod_spec_takes_renders(case: str) -> None:
    assert problems(PT, **ACCEPTED[case]) == []

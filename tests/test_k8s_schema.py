"""Kubernetes objects inside a spec, checked against the upstream core/v1 schema at every depth.

Covers issue 8: typos and wrong types deep inside volumes, env, affinity and the escape hatches
(item 3); resources that the overrides contribute going through the same rules as the
first-class fields (item 5); the support table telling, per escape-hatch key, what each target
really places (item 7). The schema data file is pinned here: it is regenerated from
kubernetes-validate and must equal the committed one.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_spec_errors import assert_problems

from kfcompile import TARGETS, SpecError, UnsupportedFeature, load_spec, render, structure
from kfcompile.spec import k8s_schema, object_paths, rules
from kfcompile.spec.k8s_rules import (
    compare_quantities,
    is_extended_resource,
    is_overcommit_allowed,
    parse_quantity,
)
from kfcompile.targets.reference import override_support, support, support_table

ROOT = Path(__file__).resolve().parents[1]
BASE = "name: job\nimage: img:1\n"


def problems_of(body: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        load_spec(BASE + textwrap.dedent(body))
    return [(p.path, p.message) for p in info.value.problems]


# --- the generated data file ----------------------------------------------------------------


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_k8s_schema", ROOT / "tools/gen_k8s_schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_data_file_is_what_the_upstream_schema_generates() -> None:
    """Regenerate with `python tools/gen_k8s_schema.py` and review the diff."""
    gen = _generator()
    committed = (ROOT / "src/kfcompile/spec/k8s_core_v1.json").read_text(encoding="utf-8")
    assert gen.dumps(gen.generate(gen.upstream())) == committed


def test_data_file_holds_the_objects_a_spec_embeds() -> None:
    defs = json.loads((ROOT / "src/kfcompile/spec/k8s_core_v1.json").read_text())["definitions"]
    for name in ("PodSpec", "Container", "Volume", "VolumeMount", "EnvVar", "Toleration"):
        assert name in defs
    for name in ("Affinity", "PodSecurityContext", "SecurityContext", "Probe"):
        assert name in defs
    assert defs["ResourceRequirements"]["properties"]["limits"] == {"map": "quantity"}
    assert defs["EnvVar"]["required"] == ["name"]
    assert defs["HTTPGetAction"]["properties"]["port"] == "int-or-string"


# --- item 3: typos and wrong types at every depth ---------------------------------------------

ISSUE_TYPOS = [
    (
        "volumes: [{name: data, persistentVolumeClaim: {claimNam: fsx}}]\n",
        [
            (
                "volumes[0].persistentVolumeClaim.claimNam",
                "unknown field (did you mean 'claimName'?)",
            ),
            ("volumes[0].persistentVolumeClaim.claimName", "required"),
        ],
    ),
    (
        "env_list: [{name: A, valueFrom: {secretKeyRf: {name: s, key: k}}}]\n",
        [("env_list[0].valueFrom.secretKeyRf", "unknown field (did you mean 'secretKeyRef'?)")],
    ),
    (
        "env_list: [{name: A, valueFrom: {secretKeyRef: {name: s, Key: k}}}]\n",
        [
            ("env_list[0].valueFrom.secretKeyRef.Key", "unknown field (did you mean 'key'?)"),
            ("env_list[0].valueFrom.secretKeyRef.key", "required"),
        ],
    ),
    (
        "affinity: {nodeAffinty: {}}\n",
        [("affinity.nodeAffinty", "unknown field (did you mean 'nodeAffinity'?)")],
    ),
    (
        "container_overrides: {securityContext: {privilegd: true}}\n",
        [
            (
                "container_overrides.securityContext.privilegd",
                "unknown field (did you mean 'privileged'?)",
            )
        ],
    ),
]


@pytest.mark.parametrize(("body", "expected"), ISSUE_TYPOS, ids=lambda x: str(x)[:40])
def test_typos_inside_kubernetes_objects_are_named(
    body: str, expected: list[tuple[str, str]]
) -> None:
    assert problems_of(body) == expected


DEEP = [
    (
        "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: []}}\n",
        [
            (
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                "must be a mapping, got a list",
            )
        ],
    ),
    (
        "tolerations: [{key: a, operator: Exists, effect: NoExecute, tolerationSeconds: '30'}]\n",
        [("tolerations[0].tolerationSeconds", "must be an integer, got a string")],
    ),
    (
        "pod_spec_overrides: {containers: [{image: x, resources: {limits: {cpu: 1GB}}}]}\n",
        [
            ("pod_spec_overrides.containers[0].name", "required"),
            ("pod_spec_overrides.containers[0].resources.limits.cpu", "unknown suffix 'GB'"),
        ],
    ),
    (
        "container_overrides: {livenessProbe: {httpGet: {port: true}, periodSeconds: 1.5}}\n",
        [
            (
                "container_overrides.livenessProbe.httpGet.port",
                "must be an integer or a string, got true/false",
            ),
            ("container_overrides.livenessProbe.periodSeconds", "must be an integer, got a number"),
        ],
    ),
    (
        "pod_spec_overrides: {priority: 4294967296, nodeSelector: {pool: 5}}\n",
        [
            ("pod_spec_overrides.priority", "must be an integer from -2147483648 to 2147483647"),
            ("pod_spec_overrides.nodeSelector.pool", "must be a string, got an integer"),
        ],
    ),
    (
        # the object rules the schema cannot say apply at depth too
        "pod_spec_overrides:\n"
        "  volumes: [{name: Data}]\n"
        "  tolerations: [{key: a, operator: In}]\n"
        "  initContainers: [{name: i, env: [{name: A, value: x, valueFrom: {}}]}]\n",
        [
            ("pod_spec_overrides.volumes[0].name", "RFC 1123 label"),
            ("pod_spec_overrides.volumes[0]", "exactly one volume source"),
            ("pod_spec_overrides.tolerations[0].operator", "must be Exists or Equal"),
            ("pod_spec_overrides.initContainers[0].env[0]", "set value or valueFrom, not both"),
        ],
    ),
    (
        "container_overrides: {name: other, volumeMounts: [{name: v, mountPath: rel}]}\n",
        [
            ("container_overrides.name", "fixed"),
            ("container_overrides.volumeMounts[0].mountPath", "must be an absolute path"),
        ],
    ),
    (
        "volumes: [{name: v, emptyDir: {sizeLimit: lots}}]\n"
        "volume_mounts: [{name: v, mountPath: /v, bindMountOptions: {}}]\n",
        [
            ("volumes[0].emptyDir.sizeLimit", "must start with a number"),
            ("volume_mounts[0].bindMountOptions", "must be a list, got a mapping"),
        ],
    ),
]


@pytest.mark.parametrize(("body", "expected"), DEEP, ids=lambda x: str(x)[:40])
def test_wrong_shapes_at_depth_one_line_each(body: str, expected: list[tuple[str, str]]) -> None:
    assert_problems(problems_of(body), expected)


@pytest.mark.parametrize(
    "body",
    [
        # the escape hatches are partial objects: the root needs none of its required keys
        "pod_spec_overrides: {hostNetwork: true, dnsPolicy: ClusterFirstWithHostNet}\n",
        "container_overrides: {securityContext: {privileged: true}}\n",
        "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n"
        "      nodeSelectorTerms: [{matchExpressions: [{key: a, operator: In, values: [b]}]}]\n",
        "pod_spec_overrides: {affinity: null, nodeSelector: {a: null}}\n",  # null is unset
        "container_overrides: {livenessProbe: {httpGet: {port: http, path: /}}}\n",
        "pod_spec_overrides: {overhead: {cpu: 0.5}}\n",
        "tolerations: [{key: '', operator: Exists}, {key: a, operator: Exists, effect: ''}]\n",
    ],
)
def test_valid_kubernetes_objects_load(body: str) -> None:
    load_spec(BASE + body)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.just(datetime.date(2024, 1, 1)),
    st.just(b"\x00"),
)
_KEYS = st.one_of(st.sampled_from(["name", "key", "spec", "resources", "limits"]), _SCALARS)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=12,
)
_DEFINITIONS = sorted(
    json.loads((ROOT / "src/kfcompile/spec/k8s_core_v1.json").read_text())["definitions"]
)


@settings(max_examples=3 * settings().max_examples, deadline=None)
@given(value=_VALUES, definition=st.sampled_from(_DEFINITIONS), partial=st.booleans())
def test_checking_never_raises_whatever_it_is_given(
    value: Any, definition: str, partial: bool
) -> None:
    found = list(k8s_schema.check(value, definition, partial=partial, rules=rules.OBJECT_RULES))
    assert all(isinstance(p, str) and isinstance(m, str) and m for p, m in found)


def test_render_path_needs_no_schema_library() -> None:
    code = (
        "import sys, kfcompile.cli as c; c.main(['render', 'examples/llama-4x8-efa.yaml']); "
        "assert 'kfcompile.spec.k8s_schema' in sys.modules; "
        "heavy = {m.split('.')[0] for m in sys.modules} & {'kubernetes_validate', 'jsonschema'}; "
        "assert not heavy, heavy"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


# --- item 5: what the overrides contribute goes through the resource rules ---------------------


OVERRIDE_RESOURCES = [
    (
        "gpus_per_node: 4\ncontainer_overrides: {resources: {limits: {nvidia.com/gpu: 8}}}\n",
        [
            (
                'container_overrides.resources.limits["nvidia.com/gpu"]',
                "also written by gpus_per_node: give it in one place",
            )
        ],
    ),
    (
        "cpu_limit: '1'\ncontainer_overrides: {resources: {requests: {cpu: 2}}}\n",
        [("container_overrides.resources.requests.cpu", "must not exceed cpu_limit (1)")],
    ),
    (
        "container_overrides: {resources: {requests: {example.com/fpga: 1}}}\n",
        [
            (
                'container_overrides.resources.requests["example.com/fpga"]',
                "needs an equal limit in container_overrides.resources.limits "
                "(it cannot be overcommitted)",
            )
        ],
    ),
    (
        "container_overrides: {resources: {requests: {memory: 1GB, cpu: '-1'}}}\n",
        [
            ("container_overrides.resources.requests.memory", "unknown suffix 'GB'"),
            ("container_overrides.resources.requests.cpu", "must be greater than or equal to 0"),
        ],
    ),
    (
        "container_overrides: {resources: {limits: {Bad_Prefix/gpu: 1}}}\n",
        [('container_overrides.resources.limits["Bad_Prefix/gpu"] (key)', "prefix part")],
    ),
    (
        # a sidecar's own requests and limits must agree too
        "pod_spec_overrides:\n  containers:\n  - name: side\n"
        "    resources: {requests: {cpu: '2', x.io/a: 1}, limits: {cpu: '1', x.io/a: 2}}\n",
        [
            ("pod_spec_overrides.containers[0].resources.limits.cpu", "must not be below"),
            (
                'pod_spec_overrides.containers[0].resources.requests["x.io/a"]',
                "must equal its limit",
            ),
        ],
    ),
]


@pytest.mark.parametrize(("body", "expected"), OVERRIDE_RESOURCES, ids=lambda x: str(x)[:40])
def test_override_resources_follow_the_resource_rules(
    body: str, expected: list[tuple[str, str]]
) -> None:
    assert_problems(problems_of(body), expected)


_AMOUNTS = st.sampled_from(["1", "2", "500m", "2000m", None])
_NAMES = st.sampled_from(["cpu", "memory", "example.com/fpga", "nvidia.com/gpu"])


def _consistent(resources: dict[str, dict[str, Any]]) -> bool:
    """What the API server demands of a container's resources (ValidateResourceRequirements)."""
    requests, limits = resources.get("requests", {}), resources.get("limits", {})
    for name, wanted in requests.items():
        if name in limits:
            order = compare_quantities(limits[name], wanted)
            if order < 0 or (order != 0 and not is_overcommit_allowed(name)):
                return False
        elif not is_overcommit_allowed(name):
            return False
    return True


@settings(max_examples=2 * settings().max_examples, deadline=None)
@given(
    gpus=st.integers(min_value=0, max_value=2),
    first=st.dictionaries(st.sampled_from(["cpu_request", "cpu_limit"]), _AMOUNTS, max_size=2),
    over=st.dictionaries(
        st.sampled_from(["requests", "limits"]), st.dictionaries(_NAMES, _AMOUNTS, max_size=3)
    ),
)
def test_spec_loads_exactly_when_the_rendered_resources_are_consistent(
    gpus: int, first: dict[str, str | None], over: dict[str, dict[str, str | None]]
) -> None:
    """The rules run on the effective resources: the first-class fields merged with the
    override, as render writes them; an amount the override writes over a first-class field's
    is refused, naming both."""
    overrides = {g: {k: v for k, v in m.items() if v is not None} for g, m in over.items()}
    data = {
        "name": "j",
        "image": "i",
        "gpus_per_node": gpus,
        **{k: v for k, v in first.items() if v is not None},
        "container_overrides": {"resources": overrides},
    }
    # What render writes, by hand: the first-class amounts, then the override merged over them.
    effective: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for field, value in first.items():
        if value is not None:
            group = "requests" if field == "cpu_request" else "limits"
            effective[group]["cpu"] = value
    if gpus:
        for group in effective.values():
            group["nvidia.com/gpu"] = str(gpus)
    twice = {
        (f"container_overrides.resources.{g}{object_paths.key(k)}", "also written by")
        for g, m in overrides.items()
        for k in m
        if k in effective[g]
    }
    for g, m in overrides.items():
        effective[g].update(m)
    # validateResourceQuantityValue: a fractional extended resource is refused when loaded.
    fractional = {
        (f"container_overrides.resources.{g}{object_paths.key(name)}", "must be an integer")
        for g, m in overrides.items()
        for name, v in m.items()
        if is_extended_resource(name) and parse_quantity(v) % 1
    }
    try:
        spec = structure(data)
    except SpecError as exc:
        found = {(p.path, p.message[: len("also written by")]) for p in exc.problems}
        assert twice <= found
        assert fractional <= {
            (p.path, p.message[: len("must be an integer")]) for p in exc.problems
        }
        assert twice or fractional or not _consistent(effective), exc.problems
        return
    assert not twice
    assert not fractional
    assert _consistent(effective)
    job = render(spec, "pytorchjob/v1")[-1]
    box = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    rendered = {g: v for g, v in box.get("resources", {}).items() if v}
    assert rendered == {g: v for g, v in effective.items() if v}


# --- item 7: the support table tells what each target places, key by key ---------------------

HATCHES = ("pod_spec_overrides", "container_overrides")


def _refused(field: str, key: str, target: str) -> bool:
    """Whether render refuses the override key as one the target cannot express."""
    spec = structure({"name": "j", "image": "i", field: {key: None}})
    try:
        render(spec, target)
    except UnsupportedFeature as exc:
        return any(
            p.path == f"{field}.{key}" and p.message.startswith("not supported by")
            for p in exc.problems
        )
    return False


@pytest.mark.parametrize("field", HATCHES)
def test_override_support_is_what_render_does(field: str) -> None:
    table = override_support()[field]
    definition, fixed = rules.ESCAPE_HATCHES[field]
    assert set(table) == k8s_schema.fields(definition) - fixed
    for key, marks in table.items():
        for target in TARGETS:
            assert marks[target] is not _refused(field, key, target), (field, key, target)


def test_issue_cases_in_the_support_data() -> None:
    over = override_support()
    assert over["pod_spec_overrides"]["affinity"]["trainjob/v2.0"] is False
    assert over["pod_spec_overrides"]["hostNetwork"]["trainjob/v2.2"] is False
    assert over["pod_spec_overrides"]["hostNetwork"]["pytorchjob/v1"] is True
    marks = support()
    assert marks["pod_spec_overrides"]["pytorchjob/v1"] is True
    assert marks["pod_spec_overrides"]["trainjob/v2.2"] == "partial"
    assert marks["container_overrides"]["trainjob/v2.0"] == "partial"
    assert marks["affinity"]["trainjob/v2.0"] is False


def test_readme_table_and_targets_json_tell_the_same() -> None:
    table = support_table()
    assert "| `pod_spec_overrides` | ✓ | partial | partial | partial | partial |" in table
    # the second table lists hostNetwork among keys only pytorchjob/v1 places
    row = next(line for line in table.splitlines() if "`hostNetwork`" in line)
    assert row.endswith("| ✓ | — | — | — | — |")
    out = subprocess.run(
        [sys.executable, "-m", "kfcompile", "targets", "-o", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc = json.loads(out)
    for name in TARGETS:
        assert doc[name]["supports"] == {f: m[name] for f, m in support().items()}
        for field, keys in override_support().items():
            assert doc[name]["overrides"][field] == {k: m[name] for k, m in keys.items()}

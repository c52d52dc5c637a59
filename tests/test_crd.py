"""Tests for kfcompile.output.crd on small literal CRDs (the real ones are in
test_schema_check.py)."""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import pytest

from kfcompile.output import crd

Obj = dict[str, Any]

SPEC_SCHEMA: Obj = {
    "type": "object",
    "required": ["replicas"],
    "properties": {
        "replicas": {"type": "integer", "minimum": 0},
        "port": {"x-kubernetes-int-or-string": True},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "maybe": {"type": "string", "nullable": True},
        "mode": {"type": "string", "enum": ["a", "b"], "nullable": True},
        "limits": {
            "type": "object",
            "nullable": True,
            "properties": {"cpu": {"type": "string"}},
        },
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "protocol"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "protocol": {"type": "string"}},
            },
        },
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "count": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
        "template": {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "properties": {"spec": {"type": "object", "properties": {}}},
        },
    },
}


def version(name: str, spec: Obj, served: bool = True) -> Obj:
    return {
        "name": name,
        "served": served,
        "storage": False,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": "A Widget.",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": spec,
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }
        },
    }


def make_crd(*versions: Obj) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": list(versions) or [version("v1", SPEC_SCHEMA)],
        },
    }


CRD = make_crd()
TWO_VERSIONS = make_crd(
    version("v1alpha1", {"type": "object"}, served=False),
    version("v1beta1", {"type": "object", "properties": {"old": {"type": "string"}}}),
    version("v1", {"type": "object", "properties": {"new": {"type": "integer"}}}),
)


def widget(api_version: str = "example.com/v1", **spec: Any) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "w"}},
        "spec": {"replicas": 1, **spec},
    }


def test_minimal_object_is_valid() -> None:
    assert crd.errors(widget(), CRD) == []


def test_int_or_string() -> None:
    assert crd.errors(widget(port=8080), CRD) == []
    assert crd.errors(widget(port="http"), CRD) == []
    assert crd.errors(widget(port=1.5), CRD) == [
        "spec.port: 1.5 is not of type 'integer', 'string'"
    ]
    assert crd.errors(widget(port=True), CRD) != []


def test_integers_are_no_floats_nor_bools() -> None:
    assert crd.errors(widget(replicas=2.0), CRD) == ["spec.replicas: 2.0 is not of type 'integer'"]
    assert crd.errors(widget(replicas=True), CRD) == [
        "spec.replicas: True is not of type 'integer'"
    ]
    assert crd.errors(widget(replicas=-1), CRD) == [
        "spec.replicas: -1 is less than the minimum of 0"
    ]


def test_preserve_unknown_fields() -> None:
    raw = {"anything": [1, {"goes": None}], "x": {"y": "z"}}
    assert crd.errors(widget(raw=raw), CRD) == []
    assert crd.errors({**widget(), "status": {"whatever": 1}}, CRD) == []


def test_unknown_fields_are_rejected() -> None:
    assert crd.errors(widget(foo=1), CRD) == [
        "spec: Additional properties are not allowed ('foo' was unexpected)"
    ]
    assert crd.errors(widget(ports=[{"name": "a", "bogus": 1}]), CRD) == [
        "spec.ports[0]: Additional properties are not allowed ('bogus' was unexpected)"
    ]
    assert crd.errors({**widget(), "extra": 1}, CRD) == [
        "(root): Additional properties are not allowed ('extra' was unexpected)"
    ]


def test_wrong_kind_or_api_version_is_one_error() -> None:
    assert crd.errors({**widget(), "kind": "Gadget"}, CRD) == [
        "kind: 'Gadget' does not belong to CRD widgets.example.com, whose kind is 'Widget'"
    ]
    assert crd.errors(widget("other.com/v1", foo=1), CRD) == [
        "apiVersion: 'other.com/v1' is not served by CRD widgets.example.com "
        "(served: 'example.com/v1')"
    ]
    [error] = crd.errors({"spec": {}}, CRD)
    assert error.startswith("kind: None does not belong")


def test_list_map_and_set_reject_duplicates() -> None:
    ports = [{"name": "http", "protocol": "TCP"}, {"name": "http", "protocol": "UDP"}]
    assert crd.errors(widget(ports=ports), CRD) == []
    assert crd.errors(widget(ports=[*ports, ports[0]]), CRD) == [
        'spec.ports[2]: duplicate map entry ["http", "TCP"]'
    ]
    assert crd.errors(widget(tags=["a", "b"]), CRD) == []
    assert crd.errors(widget(tags=["a", "b", "a"]), CRD) == [
        'spec.tags[2]: duplicate set entry "a"'
    ]


def test_version_is_chosen_by_api_version() -> None:
    assert crd.crd_versions(TWO_VERSIONS) == [
        ("example.com/v1beta1", "Widget", "v1beta1"),
        ("example.com/v1", "Widget", "v1"),
    ]
    beta, v1 = "example.com/v1beta1", "example.com/v1"
    assert crd.errors({**widget(beta), "spec": {"old": "x"}}, TWO_VERSIONS) == []
    assert crd.errors({**widget(v1), "spec": {"new": 1}}, TWO_VERSIONS) == []
    assert crd.errors({**widget(beta), "spec": {"new": 1}}, TWO_VERSIONS) == [
        "spec: Additional properties are not allowed ('new' was unexpected)"
    ]
    assert crd.errors({**widget(v1), "spec": {"old": "x"}}, TWO_VERSIONS) == [
        "spec: Additional properties are not allowed ('old' was unexpected)"
    ]
    [error] = crd.errors({**widget("example.com/v1alpha1"), "spec": {}}, TWO_VERSIONS)
    assert error.startswith("apiVersion: 'example.com/v1alpha1' is not served"), error
    assert "'example.com/v1beta1', 'example.com/v1'" in error


def test_nullable() -> None:
    assert crd.errors(widget(maybe=None, mode=None, limits=None), CRD) == []
    assert crd.errors(widget(maybe="x", mode="a", limits={"cpu": "1"}), CRD) == []
    assert crd.errors(widget(maybe=5), CRD) == ["spec.maybe: 5 is not of type 'string', 'null'"]
    assert crd.errors(widget(mode="c"), CRD) == ["spec.mode: 'c' is not one of ['a', 'b', None]"]
    assert crd.errors(widget(limits={"gpu": "1"}), CRD) == [
        "spec.limits: Additional properties are not allowed ('gpu' was unexpected)"
    ]
    assert crd.errors(widget(replicas=None), CRD) == [
        "spec.replicas: None is not of type 'integer'"
    ]  # not nullable: stricter than the server, which would prune the null


def test_exclusive_bounds_and_embedded_resources() -> None:
    assert crd.errors(widget(count=1), CRD) == []
    assert crd.errors(widget(count=0), CRD) == [
        "spec.count: 0 is less than or equal to the minimum of 0"
    ]
    template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    assert crd.errors(widget(template=template), CRD) == []
    assert crd.errors(widget(template={"spec": {"x": 1}}), CRD) == [
        "spec.template.spec: Additional properties are not allowed ('x' was unexpected)"
    ]


def test_metadata() -> None:
    obj = widget()
    obj["metadata"] = {"generateName": "w-", "labels": {"a.b/c": 1}}
    assert crd.errors(obj, CRD) == ["metadata.labels[\"a.b/c\"]: 1 is not of type 'string'"]
    obj["metadata"] = {"namespace": "ns"}
    assert crd.errors(obj, CRD) == [
        "metadata: {'namespace': 'ns'} is not valid under any of the given schemas"
    ]
    del obj["metadata"]
    assert crd.errors(obj, CRD) == ["(root): 'metadata' is a required property"]


def test_errors_are_sorted_and_deterministic() -> None:
    obj = widget(foo=1, port=1.5, maybe=5, ports=[{"protocol": "TCP"}])
    first = crd.errors(obj, CRD)
    assert first == sorted(first)
    assert len(first) == 4
    assert crd.errors(copy.deepcopy(obj), copy.deepcopy(CRD)) == first


def test_json_schema() -> None:
    schema = crd.json_schema(TWO_VERSIONS)
    assert schema["properties"]["apiVersion"] == {"const": "example.com/v1beta1"}
    assert schema["properties"]["kind"] == {"const": "Widget"}
    assert schema["required"] == ["apiVersion", "kind", "metadata"]
    assert "description" not in schema
    v1 = crd.json_schema(TWO_VERSIONS, "v1")
    assert v1["properties"]["apiVersion"] == {"const": "example.com/v1"}
    crd._validator_class().check_schema(crd.json_schema(CRD))
    with pytest.raises(
        ValueError, match=r"no served version 'v1alpha1' \(served: 'v1beta1', 'v1'\)"
    ):
        crd.json_schema(TWO_VERSIONS, "v1alpha1")


def test_json_schema_shares_nothing_with_the_crd() -> None:
    before = copy.deepcopy(CRD)
    schema = crd.json_schema(CRD)
    schema["properties"]["spec"]["properties"]["mode"]["enum"].append("z")
    schema["properties"]["metadata"]["properties"]["labels"]["additionalProperties"] = {}
    assert before == CRD
    assert crd.json_schema(CRD) != schema


def test_validator_is_cached_per_crd_and_version() -> None:
    assert crd._validator(TWO_VERSIONS, "v1") is crd._validator(TWO_VERSIONS, "v1")
    assert crd._validator(TWO_VERSIONS, "v1") is not crd._validator(TWO_VERSIONS, "v1beta1")
    assert crd._validator(copy.deepcopy(CRD), "v1") is not crd._validator(CRD, "v1")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({}, r"spec must be a mapping"),
        ({"spec": {"group": "g", "names": {}, "versions": []}}, r"spec\.names\.kind must be"),
        (
            {"spec": {"group": "g", "names": {"kind": "K"}, "versions": [{}]}},
            r"versions\[0\]\.name",
        ),
    ],
)
def test_not_a_crd(bad: Obj, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        crd.crd_versions(bad)
    with pytest.raises(ValueError, match=message):
        crd.errors(widget(), bad)


def test_missing_or_broken_schema() -> None:
    no_schema = make_crd({"name": "v1", "served": True})
    with pytest.raises(ValueError, match=r"spec\.versions\[0\]\.schema must be a mapping"):
        crd.errors(widget(), no_schema)
    broken = make_crd(version("v1", {"type": "object", "properties": {"s": {"pattern": "("}}}))
    assert crd.errors({**widget(), "spec": {}}, broken) == []  # the broken part is not reached
    with pytest.raises(ValueError, match=r"CRD widgets.example.com: invalid schema for v1"):
        crd.errors({**widget(), "spec": {"s": "x"}}, broken)


def test_import_does_not_load_jsonschema() -> None:
    code = (
        "import sys, kfcompile.output.crd\n"
        "print(sorted(m for m in sys.modules if 'jsonschema' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfcompile.spec import k8s_schema, object_paths
from kfcompile.spec.object_paths import EACH, Select


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("metadata.name", ("metadata", "name")),
        (
            'metadata.labels["kueue.x-k8s.io/queue-name"]',
            ("metadata", "labels", "kueue.x-k8s.io/queue-name"),
        ),
        (
            "spec.containers[name=node].env[0]",
            ("spec", "containers", Select("name", "node"), "env", 0),
        ),
        (
            "spec.pytorchReplicaSpecs.*.replicas",
            ("spec", "pytorchReplicaSpecs", EACH, "replicas"),
        ),
        ("a[mountPath=/dev/shm]", ("a", Select("mountPath", "/dev/shm"))),
    ],
)
def test_parse_and_format(text: str, parsed: object_paths.Path) -> None:
    assert object_paths.parse(text) == parsed
    assert object_paths.format(parsed) == text


@pytest.mark.parametrize("bad", ["a..b", "a[", "a[x]", "[name=]"])
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="bad path"):
        object_paths.parse(bad)


keys = st.one_of(
    st.from_regex(r"[a-z][a-zA-Z0-9]{0,8}", fullmatch=True),
    st.from_regex(r"[a-z]{1,5}\.[a-z]{1,5}/[a-z-]{1,8}", fullmatch=True),
)


@given(st.lists(keys, min_size=1, max_size=5), st.integers())
def test_put_then_get(segments: list[str], value: int) -> None:
    doc: dict[str, Any] = {}
    path = object_paths.parse("".join(object_paths.key(s) for s in segments))
    object_paths.put(doc, path, value)
    assert object_paths.get(doc, path) == value


def test_put_select_creates_then_updates_one_item() -> None:
    doc: dict[str, Any] = {}
    object_paths.put(doc, object_paths.parse("c[name=a].image"), "x")
    object_paths.put(doc, object_paths.parse("c[name=a].env"), [])
    object_paths.put(doc, object_paths.parse("c[name=b]"), {"image": "y"})
    assert doc == {"c": [{"name": "a", "image": "x", "env": []}, {"image": "y", "name": "b"}]}


def test_put_each_reaches_every_replica_and_copies() -> None:
    doc: dict[str, Any] = {"r": {"Master": {}, "Worker": {}}}
    value = {"k": ["v"]}
    object_paths.put(doc, object_paths.parse("r.*.x"), value)
    assert doc["r"]["Master"]["x"] == doc["r"]["Worker"]["x"] == value
    assert doc["r"]["Master"]["x"] is not doc["r"]["Worker"]["x"]
    assert doc["r"]["Master"]["x"]["k"] is not value["k"]
    assert object_paths.get(doc, object_paths.parse("r.*.x")) == [value, value]


POD_SPEC = object_paths.Merge({"ref": "PodSpec"}, k8s_schema.properties)


def test_merged_follows_the_strategic_merge_patch_of_each_field() -> None:
    """Containers and volumes merge by name (a volume keeps only the keys the override gives it:
    retainKeys), volumeMounts by mountPath; tolerations, command and scalars are replaced, and
    each replacement of another value is reported where it happened."""
    base = {
        "containers": [
            {
                "name": "node",
                "command": ["torchrun", "/a.py"],
                "volumeMounts": [{"name": "a", "mountPath": "/a"}],
            }
        ],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "volumes": [{"name": "a", "emptyDir": {}}],
        "hostNetwork": False,
    }
    over = {
        "containers": [
            {
                "name": "node",
                "command": ["python", "/b.py"],
                "volumeMounts": [{"name": "b", "mountPath": "/b"}],
            },
            {"name": "side"},
        ],
        "tolerations": [{"key": "efa", "operator": "Exists"}],
        "volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "c"}}],
        "hostNetwork": True,
    }
    out, replaced = object_paths.merged(base, over, POD_SPEC)
    assert out["containers"] == [
        {
            "name": "node",
            "command": ["python", "/b.py"],
            "volumeMounts": [{"name": "a", "mountPath": "/a"}, {"name": "b", "mountPath": "/b"}],
        },
        {"name": "side"},
    ]
    assert out["tolerations"] == over["tolerations"]
    assert out["volumes"] == over["volumes"]
    assert out["hostNetwork"] is True
    assert base["hostNetwork"] is False  # inputs untouched
    node = Select("name", "node")
    assert replaced == [
        ("containers", node, "command"),
        ("tolerations",),
        ("volumes", Select("name", "a"), "emptyDir"),
        ("hostNetwork",),
    ]


def test_merged_lists_are_atomic_where_kubernetes_says_so() -> None:
    """The issue's example: args [--lr, "1"] then [--epochs, "1"] is [--epochs, "1"] (the
    override's, whole), not the first list plus the items it lacked."""
    container = object_paths.Merge({"ref": "Container"}, k8s_schema.properties)
    out, replaced = object_paths.merged(
        {"name": "c", "args": ["--lr", "1"]}, {"args": ["--epochs", "1"]}, container
    )
    assert out == {"name": "c", "args": ["--epochs", "1"]}
    assert replaced == [("args",)]
    # an equal value replaces nothing; ports merge on containerPort, an integer
    same = {"name": "c", "ports": [{"containerPort": 1, "name": "p"}], "image": "i"}
    out, replaced = object_paths.merged(
        same, {"ports": [{"containerPort": 1}], "image": "i"}, container
    )
    assert (out, replaced) == (same, [])


def test_get_missing_raises_keyerror() -> None:
    with pytest.raises(KeyError):
        object_paths.get({"c": [{"name": "a"}]}, object_paths.parse("c[name=b]"))


segments = st.one_of(
    st.text(min_size=1, max_size=12),
    st.integers(min_value=0, max_value=50),
    st.builds(Select, st.sampled_from(["name", "mountPath"]), st.text(min_size=1, max_size=12)),
)


@given(st.lists(segments, min_size=1, max_size=6))
def test_any_path_formats_and_parses_back(path: list[object_paths.Segment]) -> None:
    assert object_paths.parse(object_paths.format(tuple(path))) == tuple(path)


@given(st.lists(segments, min_size=1, max_size=6))
def test_a_problem_path_is_a_value_that_formats_as_its_text(
    path: list[object_paths.Segment],
) -> None:
    from kfcompile.spec.errors import Problem
    from kfcompile.spec.fieldpath import FieldPath

    text = object_paths.format(tuple(path))
    problem = Problem(text, "bad")
    assert problem.at == FieldPath(tuple(path)) == Problem(FieldPath(tuple(path)), "bad").at
    assert (problem.path, str(problem)) == (text, f"{text}: bad")


@pytest.mark.parametrize("text", ["", "line 3, column 5", "ConfigMap job-script", "env.A (key)"])
def test_a_place_that_is_no_path_keeps_its_text(text: str) -> None:
    from kfcompile.spec.errors import Problem

    assert Problem(text, "m").path == text
    assert str(Problem(text, "m")) == (f"{text}: m" if text else "m")

"""The limits render checks on its output (``kfcompile.output.limits``): the table equals what the
upstream CRDs in ../shared/crds say, and render, validate and submit refuse output past it, each
problem told at the spec field that wrote the value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakekube.cluster import LocalCluster
from refused import BASE, problems
from schema_check import require_shared

from kfcompile import UnsupportedFeature, load_spec, render
from kfcompile.cli import main
from kfcompile.output import limits as output_limits
from kfcompile.targets import target as target_named

# The CRDs each target's table comes from: PyTorchJob's one target serves three operator
# releases, so its table is their union.
CRDS: dict[str, tuple[str, ...]] = {
    "pytorchjob/v1": (
        "pytorchjobs-v1.7.0.yaml",
        "pytorchjobs-v1.8.1.yaml",
        "pytorchjobs-v1.9.4.yaml",
    ),
    "trainjob/v2.0": ("trainjobs-v2.0.1.yaml",),
    "trainjob/v2.1": ("trainjobs-v2.1.0.yaml",),
    "trainjob/v2.2": ("trainjobs-v2.2.1.yaml",),
    "trainjob/v2.3": ("trainjobs-v2.3.0.yaml",),
}
FIELDS_PATHS = {
    row.path for name in CRDS for row in target_named(name).limits if row.rule == "fields"
}


def _keywords(node: Any, path: str) -> Iterator[tuple[str, str, Any]]:
    """Every maxItems, maxLength, keyed or set list and CEL rule in a CRD schema, by path;
    not what never rejects a create (atomic lists, map types, transition rules) nor status."""
    if not isinstance(node, dict) or path == "status":
        return
    for key in ("maxItems", "maxLength", "maxProperties"):
        if key in node:
            yield path, key, node[key]
    if node.get("x-kubernetes-list-type") in ("map", "set"):
        yield (
            path,
            node["x-kubernetes-list-type"],
            tuple(node.get("x-kubernetes-list-map-keys", ())),
        )
    for rule in node.get("x-kubernetes-validations", ()):
        if "oldSelf" not in rule["rule"]:
            yield path, "cel", rule["rule"]
    if path in FIELDS_PATHS:
        yield path, "fields", frozenset(node.get("properties", {}))
    for name, sub in node.get("properties", {}).items():
        yield from _keywords(sub, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from _keywords(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _keywords(node["additionalProperties"], f"{path}*")


def _upstream(target: str) -> set[tuple[str, str, Any]]:
    crds = require_shared() / "crds"
    found: set[tuple[str, str, Any]] = set()
    for name in CRDS[target]:
        crd = yaml.safe_load((crds / name).read_text(encoding="utf-8"))
        for version in crd["spec"]["versions"]:
            found |= set(_keywords(version["schema"]["openAPIV3Schema"], ""))
    return found


@pytest.mark.parametrize("target", sorted(CRDS))
def test_the_table_is_what_the_crds_say(target: str) -> None:
    ours = {(row.path, row.rule, row.value) for row in target_named(target).limits}
    upstream = _upstream(target)
    assert sorted(upstream - ours, key=str) == [], "in the CRD, not in the table"
    assert sorted(ours - upstream, key=str) == [], "in the table, not in the CRD"


def test_every_cel_rule_of_the_tables_is_implemented() -> None:
    rules = {row.value for name in CRDS for row in target_named(name).limits if row.rule == "cel"}
    assert rules and rules <= set(output_limits.CEL)


def test_the_fields_rows_cover_the_override_containers() -> None:
    """Where kfcompile merges user containers into a TrainJob, the table says what they may hold."""
    for target in ("trainjob/v2.0", "trainjob/v2.1", "trainjob/v2.2", "trainjob/v2.3"):
        kinds = {
            row.path.rsplit(".", 1)[-1]
            for row in target_named(target).limits
            if row.rule == "fields"
        }
        assert kinds == {"containers[]", "initContainers[]"}, target


# --- render refuses what the API server would ---------------------------------------------------


@pytest.mark.parametrize(
    "target", ["trainjob/v2.0", "trainjob/v2.1", "trainjob/v2.2", "trainjob/v2.3"]
)
def test_a_trainjob_override_container_holds_only_what_the_crd_allows(target: str) -> None:
    over = {"containers": [{"name": "node", "image": "other:2", "command": ["sh"]}]}
    found = problems(target, pod_spec_overrides=over)
    assert [p.split(":")[0] for p in found] == [
        "pod_spec_overrides.containers[0].image",
        "pod_spec_overrides.containers[0].command",
    ]
    assert all("unknown field" in p for p in found)
    ok = {"containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}
    assert problems(target, pod_spec_overrides=ok) == [] or target in (
        "trainjob/v2.2",
        "trainjob/v2.3",
    )


@pytest.mark.parametrize(
    ("target", "refused"),
    [
        ("trainjob/v2.1", False),
        ("trainjob/v2.2", True),
        ("trainjob/v2.3", True),
        ("pytorchjob/v1", False),
    ],
)
def test_more_than_128_env_entries_from_trainer_v2_2(target: str, refused: bool) -> None:
    env = {f"V{i}": "x" for i in range(100)}
    over = {"env": [{"name": f"O{i}", "value": "y"} for i in range(29)]}
    found = problems(target, env=env, container_overrides=over)
    assert bool(found) is refused
    if refused:
        assert found == [
            "env: has 129 items; the CRD allows at most 128 "
            "(in TrainJob/demo spec.trainer.env, written by env, container_overrides)"
        ]
    assert problems(target, env={f"V{i}": "x" for i in range(128)}) == []


@pytest.mark.parametrize("target", ["trainjob/v2.2", "trainjob/v2.3"])
def test_an_image_over_500_characters(target: str) -> None:
    assert problems(target, image="r/" + "a" * 499) == [
        "image: is 501 characters long; the CRD allows at most 500"
    ]
    assert problems(target, image="r/" + "a" * 498) == []
    # an override may not give the image at all (it would replace `image`): said first
    [line] = problems(target, container_overrides={"image": "r/" + "a" * 499})
    assert line.startswith("container_overrides.image: would replace what image writes")


@pytest.mark.parametrize("target", ["trainjob/v2.3", "pytorchjob/v1"])
def test_annotations_over_256_kib_in_total(target: str) -> None:
    """apimachinery ValidateAnnotations: keys and values of one object, 256 KiB together."""
    budget = output_limits.ANNOTATIONS_MAX_BYTES
    full = {"a": "x" * (budget // 2 - 1), "b": "y" * (budget // 2 - 1)}
    assert problems(target, annotations=full) == []
    found = problems(target, annotations={**full, "c": ""})
    assert len(found) == 1 and found[0].startswith("annotations: total 262145 bytes")
    assert problems(target, pod_annotations={**full, "c": ""})[0].startswith(
        "pod_annotations: total"
    )


@pytest.mark.parametrize("target", ["trainjob/v2.0", "trainjob/v2.3", "pytorchjob/v1"])
def test_duplicate_env_names_from_an_override(target: str) -> None:
    over = {"env": [{"name": "A", "value": "2"}, {"name": "A", "value": "3"}]}
    assert problems(target, env={"B": "1"}, container_overrides=over) == [
        "container_overrides.env[1]: duplicate entry name='A' (the CRD keys this list by name)"
    ]
    assert problems(target, env={"B": "1"}, container_overrides={"env": over["env"][:1]}) == []


@pytest.mark.parametrize("target", ["trainjob/v2.1", "trainjob/v2.3", "pytorchjob/v1"])
def test_duplicate_volumes_from_pod_spec_overrides(target: str) -> None:
    volumes = [{"name": "x", "emptyDir": {}}, {"name": "x", "emptyDir": {"medium": "Memory"}}]
    assert problems(target, pod_spec_overrides={"volumes": volumes}) == [
        "pod_spec_overrides.volumes[1]: duplicate entry name='x' (the CRD keys this list by name)"
    ]
    assert problems(target, pod_spec_overrides={"volumes": volumes[:1]}) == []


def test_duplicate_mount_paths_and_ports_from_container_overrides() -> None:
    mounts = [{"name": "d", "mountPath": "/x"}, {"name": "d", "mountPath": "/x", "readOnly": True}]
    volumes = [{"name": "d", "emptyDir": {}}]
    # the spec's own rule says it first (a mount path is reserved by its first mount)
    assert problems(
        "pytorchjob/v1", volumes=volumes, container_overrides={"volumeMounts": mounts}
    ) == [
        "container_overrides.volumeMounts[1].mountPath: already mounted by "
        "container_overrides.volumeMounts[0]"
    ]
    ports = [{"containerPort": 80}, {"containerPort": 80, "protocol": "TCP"}]
    assert problems("pytorchjob/v1", container_overrides={"ports": ports}) == [
        "container_overrides.ports[1]: duplicate entry containerPort=80, protocol='TCP' "
        "(the CRD keys this list by containerPort, protocol)"
    ]
    udp = [ports[0], {"containerPort": 80, "protocol": "UDP"}]
    assert problems("pytorchjob/v1", container_overrides={"ports": udp}) == []


def test_validate_says_why_one_line_each_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    over = {
        "containers": [{"name": "node", "image": "x"}],
        "volumes": [{"name": "v", "emptyDir": {}}] * 2,
    }
    spec.write_text(json.dumps({**BASE, "pod_spec_overrides": over}), encoding="utf-8")
    assert main(["validate", str(spec), "-t", "trainjob/v2.3"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"{spec} (trainjob/v2.3): pod_spec_overrides.volumes[1]: duplicate entry name='v' "
        "(the CRD keys this list by name)",
        f"{spec} (trainjob/v2.3): pod_spec_overrides.containers[0].image: unknown field "
        "(the CRD allows only env, name, securityContext, volumeMounts here)",
    ]
    assert main(["render", str(spec), "-t", "trainjob/v2.3"]) == 1
    assert capsys.readouterr().out == ""


def test_submit_refuses_before_anything_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    over = {"containers": [{"name": "node", "command": ["sh"]}]}
    spec.write_text(json.dumps({**BASE, "pod_spec_overrides": over}), encoding="utf-8")
    with LocalCluster(require_shared()) as local:
        code = main(
            ["submit", str(spec), "-t", "trainjob/v2.3", "--kubeconfig", str(local.kubeconfig)]
        )
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err
        assert "pod_spec_overrides.containers[0].command: unknown field" in err
        assert local.kube.requests.count("POST") == 0


@pytest.mark.parametrize(
    ("rule", "holds", "fails"),
    [
        (
            output_limits.NAME_IS_DNS1035,
            {"metadata": {"name": "a-1"}},
            {"metadata": {"name": "1a"}},
        ),
        (
            output_limits.NAME_LENGTH,
            {"metadata": {"name": "a" * 63}},
            {"metadata": {"name": "a" * 64}},
        ),
        (output_limits.MANAGERS_RULE, "kueue.x-k8s.io/multikueue", "example.com/mine"),
        (output_limits.URI_RULE, "s3://bucket/x", "s3://bucket/\nx"),
    ],
)
def test_each_cel_rule_holds_and_fails_as_cel_would(rule: str, holds: Any, fails: Any) -> None:
    check, _ = output_limits.CEL[rule]
    assert check(holds) and not check(fails)


def _metadata_annotations(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Where ``node`` holds an ObjectMeta's annotations, however deep."""
    if isinstance(node, dict):
        if isinstance(node.get("metadata"), dict) and "annotations" in node["metadata"]:
            yield (*at, "metadata", "annotations")
        for k, v in node.items():
            yield from _metadata_annotations(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _metadata_annotations(v, (*at, i))


@pytest.mark.parametrize("target", sorted(CRDS))
def test_the_annotation_budget_reaches_every_object_metadata_rendered(target: str) -> None:
    """Each object the job makes (the job, its JobSet and Jobs, its pods) has its own 256 KiB."""
    fields = {
        k: {"example.com/note": "x"}
        for k in ("annotations", "pod_annotations", "runtime_annotations")
    }
    try:
        objects = render(load_spec(json.dumps({**BASE, **fields})), target)
    except UnsupportedFeature as exc:  # what this target cannot hold
        for p in exc.problems:
            fields.pop(p.at.top)
        objects = render(load_spec(json.dumps({**BASE, **fields})), target)
    job = objects[-1]
    found_here = output_limits.tree(
        (path, lambda v: [((), "here")], True) for path in target_named(target).places.annotations
    )
    covered = {at for at, _, _ in output_limits.walk(job, found_here)}
    found = set(_metadata_annotations(job))
    assert found and found <= covered

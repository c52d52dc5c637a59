"""What the fake API server answers where a real kube-apiserver was seen to answer so (issue 9,
"What the fake must model"): the CRDs' CEL rules with their messages as the server formats them,
strict decoding errors with the decoder's prefix, schema errors as apimachinery words them,
``dryRun=All`` (everything checked, nothing stored), ``429 storage is (re)initializing`` on the
first list of a kind just installed, and clusters of each Trainer release with the Trainer's
public ConfigMap. Mostly at the port (the in-memory cluster); over HTTP what only the wire
shows (the query parameter, the Retry-After header)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube import FakeKube
from fakekube.cel import rules_of
from fakekube.cluster import NAMESPACE, RELEASES, InMemoryCluster, trainer_configmap
from fakekube.memory import MemoryCluster

from kfcompile import lifecycle
from kfcompile.lifecycle.ports import Conflict, Invalid, Ref, Transient
from kfcompile_kube import KubeCluster, connect

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
NOT_CHECKED = (
    '<nil>: Invalid value: "null": some validation rules were not checked because the object '
    "was invalid; correct the existing errors to complete validation"
)


def cluster(release: str = "trainjob/v2.3", **kw: Any) -> InMemoryCluster:
    return InMemoryCluster(schema_check.require_shared(), crds=RELEASES[release], **kw)


@pytest.fixture
def v23() -> Iterator[InMemoryCluster]:
    with cluster() as c:
        yield c


def trainjob(name: str = "demo", **spec: Any) -> dict[str, Any]:
    body = {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"image": "python:3.11", "numNodes": 1},
        **spec,
    }
    return {
        "apiVersion": TRAINJOB,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": body,
    }


def refused(c: InMemoryCluster, obj: dict[str, Any]) -> str:
    with pytest.raises(Invalid) as caught:
        c.cluster.create(obj)
    assert caught.value.status == 422
    return caught.value.message


def test_managed_by_values_are_the_crds_rule(v23: InMemoryCluster) -> None:
    message = refused(v23, trainjob(managedBy="example.com/mine"))
    assert message == (
        'TrainJob.trainer.kubeflow.org "demo" is invalid: spec.managedBy: Invalid value: "string": '
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue "
        "if set"
    )
    assert v23.cluster.create(trainjob("queued", managedBy="kueue.x-k8s.io/multikueue"))


def test_a_storage_uri_must_have_a_scheme(v23: InMemoryCluster) -> None:
    message = refused(v23, trainjob(initializer={"dataset": {"storageUri": "my-data"}}))
    assert message.endswith(
        'is invalid: spec.initializer.dataset.storageUri: Invalid value: "string": storageUri '
        "may be empty, or it must be a valid URI (scheme://...)"
    )


def test_the_name_rules_sit_on_the_root_from_v2_1_only() -> None:
    long_name, not_rfc1035 = "a" * 64, "9lives"
    with cluster("trainjob/v2.3") as c:
        assert refused(c, trainjob(long_name)) == (
            f'TrainJob.trainer.kubeflow.org "{long_name}" is invalid: <nil>: Invalid value: '
            '"object": metadata.name must be no more than 63 characters'
        )
        assert refused(c, trainjob(not_rfc1035)).endswith(
            '<nil>: Invalid value: "object": metadata.name must match RFC 1035 DNS label format'
        )
    with cluster("trainjob/v2.0") as c:  # v2.0's CRD has no such rule: the server takes both
        assert c.cluster.create(trainjob(long_name)) and c.cluster.create(trainjob(not_rfc1035))


def test_too_many_command_items_block_the_cel_rules(v23: InMemoryCluster) -> None:
    job = trainjob(managedBy="example.com/mine")  # breaks a rule, which is then not evaluated
    job["spec"]["trainer"]["command"] = ["echo"] * 129
    assert refused(v23, job) == (
        'TrainJob.trainer.kubeflow.org "demo" is invalid: [spec.trainer.command: Too many: 129: '
        f"must have at most 128 items, {NOT_CHECKED}]"
    )


def test_immutable_fields_hold_on_update_only(v23: InMemoryCluster) -> None:
    v23.cluster.create(trainjob())
    ref = Ref(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    v23.cluster.patch(ref, {"spec": {"suspend": True}})  # not immutable
    with pytest.raises(Invalid) as caught:
        v23.cluster.patch(ref, {"spec": {"trainer": {"image": "python:3.12"}}})
    assert caught.value.message == (
        'TrainJob.trainer.kubeflow.org "demo" is invalid: spec.trainer: Invalid value: '
        '"object": field is immutable'
    )
    with pytest.raises(
        Invalid, match=r'spec\.runtimeRef: Invalid value: "object": field is immutable'
    ):
        v23.cluster.patch(ref, {"spec": {"runtimeRef": {"name": "other"}}})
    stored = v23.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert stored is not None and stored["spec"]["trainer"]["image"] == "python:3.11"


def test_v2_1_words_its_immutable_runtime_ref_its_own_way() -> None:
    with cluster("trainjob/v2.1") as c:
        c.cluster.create(trainjob())
        ref = Ref(TRAINJOB, "TrainJob", NAMESPACE, "demo")
        c.cluster.patch(ref, {"spec": {"trainer": {"image": "python:3.12"}}})  # v2.1 allows it
        with pytest.raises(Invalid, match=r'spec\.runtimeRef: Invalid value: "object": runtimeRef'):
            c.cluster.patch(ref, {"spec": {"runtimeRef": {"name": "other"}}})


def test_strict_decoding_names_the_kind_and_version() -> None:
    patch = [{"manager": "example.com/kfcompile", "trainingRuntimeSpec": {}}]
    with cluster("trainjob/v2.1") as c, pytest.raises(Invalid) as caught:
        c.cluster.create(trainjob(runtimePatches=patch))
    assert (caught.value.status, str(caught.value.message)) == (
        400,
        'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: '
        'unknown field "spec.runtimePatches"',
    )


def test_every_rule_of_every_crd_compiles() -> None:
    """The interpreter takes each rule as the CRDs write it (none is rewritten for the fake)."""
    from fakekube.cel import _program

    crds = schema_check.require_shared() / "crds"
    files = [*crds.glob("*.yaml"), *crds.glob("unreleased/*.yaml")]
    rules = {
        rule
        for path in files
        for rule in rules_of(schema_check.load_crd(str(path.relative_to(crds))))
    }
    assert len(rules) >= 10  # (some rule texts recur with other messages)
    for rule in rules:
        _program(rule)


# --- dryRun=All -----------------------------------------------------------------------------------


def test_a_dry_run_checks_everything_and_stores_nothing(v23: InMemoryCluster) -> None:
    version = v23.store.resource_version
    answer = v23.cluster.create(trainjob(), dry_run=True)
    assert answer["metadata"]["uid"] and "resourceVersion" not in answer["metadata"]
    assert answer["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"  # defaults
    assert v23.store.list(TRAINJOB, "TrainJob") == []
    assert v23.store.resource_version == version  # nothing was written, no watch saw anything
    message = refused_dry(v23, trainjob(managedBy="example.com/mine"))
    assert "spec.managedBy: Invalid value" in message
    v23.cluster.create(trainjob())
    with pytest.raises(Conflict, match='"demo" already exists'):
        v23.cluster.create(trainjob(), dry_run=True)


def refused_dry(c: InMemoryCluster, obj: dict[str, Any]) -> str:
    with pytest.raises(Invalid) as caught:
        c.cluster.create(obj, dry_run=True)
    return caught.value.message


def test_the_adapter_sends_dry_run_all(tmp_path: Path) -> None:
    crd = schema_check.load_crd("trainjobs-v2.3.0.yaml")
    with FakeKube(crds=[crd]) as kube:
        port = KubeCluster(connect(str(kube.kubeconfig(tmp_path / "kc"))).api_client)
        port.create(trainjob(), dry_run=True)
        [post] = kube.requests.matching("POST", "/trainjobs")
        assert post.query == {"fieldValidation": "Strict", "dryRun": "All"}
        assert kube.store.list(TRAINJOB, "TrainJob") == []
        port.create(trainjob())
        assert kube.requests.matching("POST", "/trainjobs")[1].query == {
            "fieldValidation": "Strict"
        }
        url = f"{kube.url}/apis/{TRAINJOB}/namespaces/{NAMESPACE}/trainjobs?dryRun=Some"
        request = urllib.request.Request(
            url,
            data=json.dumps(trainjob("other")).encode(),
            headers={"Authorization": "Bearer fake-token", "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)
        assert caught.value.code == 422
        assert json.loads(caught.value.read())["message"].endswith(
            'dryRun: Unsupported value: "Some": supported values: "All"'
        )


# --- a CRD just installed ---------------------------------------------------------------------


def test_the_first_list_after_a_crd_install_finds_storage_initializing() -> None:
    crd = schema_check.load_crd("trainjobs-v2.3.0.yaml")
    with cluster("pytorchjob/v1") as c:
        # as `kubectl apply` installs it, through a port of its own (not a kfcompile command's)
        MemoryCluster(c.store, c.clock).create(crd)
        with pytest.raises(Transient) as caught:
            c.cluster.list(TRAINJOB, "TrainJob", NAMESPACE)
        assert (caught.value.status, caught.value.message) == (429, "storage is (re)initializing")
        assert c.cluster.list(TRAINJOB, "TrainJob", NAMESPACE).items == []  # then it is ready
        assert c.cluster.list("kubeflow.org/v1", "PyTorchJob", NAMESPACE).items == []


def test_listing_jobs_right_after_the_install_rides_out_the_429() -> None:
    crd = schema_check.load_crd("trainjobs-v2.3.0.yaml")
    with cluster("pytorchjob/v1") as c:
        MemoryCluster(c.store, c.clock).create(crd)  # kubectl apply
        assert lifecycle.list_jobs(c.session(), NAMESPACE) == []
        lists = [call.fault for call in c.calls.matching("list", "TrainJob")]
        assert len(lists) == 2  # the 429, then the list that was answered


def test_over_http_the_429_says_when_to_retry(tmp_path: Path) -> None:
    crd = schema_check.load_crd("trainjobs-v2.3.0.yaml")
    with FakeKube() as kube:
        kube.install_crd(crd, fresh=True)
        url = f"{kube.url}/apis/{TRAINJOB}/namespaces/{NAMESPACE}/trainjobs"
        request = urllib.request.Request(url, headers={"Authorization": "Bearer fake-token"})
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)
        body = json.loads(caught.value.read())
        assert (caught.value.code, caught.value.headers["Retry-After"]) == (429, "1")
        assert (body["reason"], body["message"]) == (
            "TooManyRequests",
            "storage is (re)initializing",
        )
        assert body["details"] == {"retryAfterSeconds": 1}
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 200


# --- clusters of each release -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("release", "version"),
    [
        ("trainjob/v2.0", None),  # no ConfigMap before v2.2
        ("trainjob/v2.1", None),
        ("trainjob/v2.2", "v2.2.1"),
        ("trainjob/v2.3", "v2.3.0"),
        ("pytorchjob/v1", None),
    ],
)
def test_each_release_serves_its_crd_and_says_its_version(
    release: str, version: str | None
) -> None:
    with cluster(release) as c:
        found = c.store.get("v1", "ConfigMap", "kubeflow-system", "kubeflow-trainer-public")
        assert (found or {}).get("data") == (
            trainer_configmap(version)["data"] if version else None
        )
        served = c.cluster.served(TRAINJOB, "TrainJob")
        assert served == release.startswith("trainjob/")
        if served:
            crd = c.store.get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                "trainjobs.trainer.kubeflow.org",
            )
            file = schema_check.load_crd(RELEASES[release][0])
            assert crd is not None and crd["spec"] == file["spec"]

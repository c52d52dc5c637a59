"""What the fake API server answers where a real kube-apiserver was seen to answer so (issue 9,
"What the fake must model"): the CRDs' CEL rules with their messages as the server formats them,
strict decoding errors with the decoder's prefix, schema errors as apimachinery words them,
``dryRun=All`` (everything checked, nothing stored), ``429 storage is (re)initializing`` on the
first list of a kind just installed, and clusters of each Trainer release with the Trainer's
public ConfigMap. Mostly through the store (``fakekube.port.Objects``: what the HTTP server and
the port fake answer from, without the wire); over HTTP what only the wire shows (the query
parameter, the Retry-After header)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube import FakeKube, Objects, StoreError
from fakekube.clock import FakeClock
from fakekube.cluster import NAMESPACE, RELEASES, install, trainer_configmap
from fakekube.validation import compiled, rules_of

from kfcompile_kube import KubeCluster, connect

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
NOT_CHECKED = (
    '<nil>: Invalid value: "null": some validation rules were not checked because the object '
    "was invalid; correct the existing errors to complete validation"
)


class Server:
    """A store with one release's CRDs installed, answered as the fake API server answers."""

    def __init__(self, release: str = "trainjob/v2.3") -> None:
        self.store = Objects(FakeClock())
        install(self.store, schema_check.require_shared(), RELEASES[release], runtime=False)

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        kind = self.store.kind(TRAINJOB, "TrainJob")  # the adapter sends fieldValidation=Strict
        return self.store.submit(kind, obj, strict=True, dry_run=dry_run)

    def patch(self, change: dict[str, Any], name: str = "demo") -> dict[str, Any]:
        return self.store.patch(self.store.kind(TRAINJOB, "TrainJob"), NAMESPACE, name, change)

    def refused(
        self, obj: dict[str, Any] | None = None, *, patch: dict[str, Any] | None = None,
        dry_run: bool = False, code: int = 422,
    ) -> str:  # fmt: skip
        """The message of the refusal of a create of ``obj``, or of a ``patch`` of "demo"."""
        with pytest.raises(StoreError) as caught:
            self.create(obj or {}, dry_run=dry_run) if patch is None else self.patch(patch)
        assert caught.value.code == code
        return caught.value.message


@pytest.fixture
def v23() -> Server:
    return Server()


def trainjob(name: str = "demo", *, command: int = 0, **spec: Any) -> dict[str, Any]:
    """A TrainJob (with ``command`` items of its trainer's command, if any)."""
    trainer: dict[str, Any] = {"image": "python:3.11", "numNodes": 1}
    if command:
        trainer["command"] = ["echo"] * command
    meta = {"name": name, "namespace": NAMESPACE}
    body = {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer, **spec}
    return {"apiVersion": TRAINJOB, "kind": "TrainJob", "metadata": meta, "spec": body}


INVALID = 'TrainJob.trainer.kubeflow.org "{}" is invalid: '
LONG_NAME, NOT_RFC1035 = "a" * 64, "9lives"


@pytest.mark.parametrize(
    ("release", "job", "code", "message"),
    [
        ("trainjob/v2.3", trainjob(managedBy="example.com/mine"), 422,
         INVALID.format("demo") + 'spec.managedBy: Invalid value: "string": ManagedBy must be '
         "trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"),
        ("trainjob/v2.3", trainjob(initializer={"dataset": {"storageUri": "my-data"}}), 422,
         INVALID.format("demo") + 'spec.initializer.dataset.storageUri: Invalid value: "string": '
         "storageUri may be empty, or it must be a valid URI (scheme://...)"),
        # the name rules sit on the root, from v2.1 only
        ("trainjob/v2.3", trainjob(LONG_NAME), 422, INVALID.format(LONG_NAME) +
         '<nil>: Invalid value: "object": metadata.name must be no more than 63 characters'),
        ("trainjob/v2.3", trainjob(NOT_RFC1035), 422, INVALID.format(NOT_RFC1035) +
         '<nil>: Invalid value: "object": metadata.name must match RFC 1035 DNS label format'),
        # too many command items: the broken rule (managedBy) is then not evaluated
        ("trainjob/v2.3", trainjob(managedBy="example.com/mine", command=129), 422,
         INVALID.format("demo") + "[spec.trainer.command: Too many: 129: must have at most 128 "
         f"items, {NOT_CHECKED}]"),
        # strict decoding names the kind and version
        ("trainjob/v2.1", trainjob(runtimePatches=[{"manager": "example.com/kfcompile",
                                                    "trainingRuntimeSpec": {}}]), 400,
         'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding '
         'error: unknown field "spec.runtimePatches"'),
    ],
)  # fmt: skip
def test_refusals_in_the_servers_words(
    release: str, job: dict[str, Any], code: int, message: str
) -> None:
    assert Server(release).refused(job, code=code) == message


def test_what_the_crds_take() -> None:
    assert Server().create(trainjob("queued", managedBy="kueue.x-k8s.io/multikueue"))
    v20 = Server("trainjob/v2.0")  # v2.0's CRD has no name rules: the server takes both
    assert v20.create(trainjob(LONG_NAME)) and v20.create(trainjob(NOT_RFC1035))


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"image": "a" * 501}, "spec.trainer.image: Too long: may not be more than 500 bytes"),
        ({"numNodes": "two"}, 'spec.trainer.numNodes: Invalid value: "string": '
         'spec.trainer.numNodes in body must be of type integer: "string"'),
    ],
)  # fmt: skip
def test_schema_errors_in_apimachinerys_words_block_the_cel_rules(
    v23: Server, change: dict[str, Any], error: str
) -> None:
    job = trainjob(managedBy="example.com/mine")
    job["spec"]["trainer"].update(change)
    assert v23.refused(job).endswith(f"is invalid: [{error}, {NOT_CHECKED}]")
    job["spec"]["runtimeRef"] = {}  # required: name (the order of errors is not pinned)
    message = v23.refused(job)
    assert "spec.runtimeRef.name: Required value, " in message and error in message
    assert message.endswith(f", {NOT_CHECKED}]") and "managedBy" not in message


def test_immutable_fields_hold_on_update_only(v23: Server) -> None:
    v23.create(trainjob())
    v23.patch({"spec": {"suspend": True}})  # not immutable
    assert v23.refused(patch={"spec": {"trainer": {"image": "python:3.12"}}}) == (
        INVALID.format("demo") + 'spec.trainer: Invalid value: "object": field is immutable'
    )
    assert v23.refused(patch={"spec": {"runtimeRef": {"name": "other"}}}).endswith(
        'spec.runtimeRef: Invalid value: "object": field is immutable'
    )
    stored = v23.store.get(TRAINJOB, "TrainJob", NAMESPACE, "demo")
    assert stored is not None and stored["spec"]["trainer"]["image"] == "python:3.11"


def test_v2_1_words_its_immutable_runtime_ref_its_own_way() -> None:
    c = Server("trainjob/v2.1")
    c.create(trainjob())
    c.patch({"spec": {"trainer": {"image": "python:3.12"}}})  # v2.1 allows it
    message = c.refused(patch={"spec": {"runtimeRef": {"name": "other"}}})
    assert 'spec.runtimeRef: Invalid value: "object": runtimeRef' in message


def test_every_rule_of_every_crd_compiles() -> None:
    """The interpreter takes each rule as the CRDs write it (none is rewritten for the fake)."""
    crds = schema_check.require_shared() / "crds"
    files = [*crds.glob("*.yaml"), *crds.glob("unreleased/*.yaml")]
    rules = {r for p in files for r in rules_of(schema_check.load_crd(str(p.relative_to(crds))))}
    assert len(rules) >= 10  # (some rule texts recur with other messages)
    for rule in rules:
        compiled(rule)


# --- dryRun=All -----------------------------------------------------------------------------------


def test_a_dry_run_checks_everything_and_stores_nothing(v23: Server) -> None:
    version = v23.store.resource_version
    answer = v23.create(trainjob(), dry_run=True)
    assert answer["metadata"]["uid"] and "resourceVersion" not in answer["metadata"]
    assert answer["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"  # defaults
    assert v23.store.list(TRAINJOB, "TrainJob") == []
    assert v23.store.resource_version == version  # nothing was written, no watch saw anything
    message = v23.refused(trainjob(managedBy="example.com/mine"), dry_run=True)
    assert "spec.managedBy: Invalid value" in message
    v23.create(trainjob())
    assert v23.refused(trainjob(), dry_run=True, code=409).endswith('"demo" already exists')


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


# --- over HTTP: what only the wire shows, and what kubectl (not kfcompile) sends -----------


def _call(kube: FakeKube, path: str, data: Any = None) -> tuple[int, Any, Any]:
    """Status, JSON body and headers of a GET (a POST of ``data``) to the fake API server."""
    headers = {"Authorization": "Bearer fake-token", "Content-Type": "application/json"}
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(f"{kube.url}{path}", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read()), answer.headers
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read()), refused.headers


def test_the_first_list_after_a_crd_install_finds_storage_initializing() -> None:
    crd = schema_check.load_crd("trainjobs-v2.3.0.yaml")
    with FakeKube() as kube:
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        assert _call(kube, crds, crd)[0] == 201  # as `kubectl apply` installs it
        trainjobs = f"/apis/{TRAINJOB}/namespaces/{NAMESPACE}/trainjobs"
        code, body, headers = _call(kube, trainjobs)
        assert (code, headers["Retry-After"]) == (429, "1")
        reason, message, details = body["reason"], body["message"], body["details"]
        assert (reason, message) == ("TooManyRequests", "storage is (re)initializing")
        assert details == {"retryAfterSeconds": 1}
        assert _call(kube, trainjobs)[0] == 200


def test_discovery_serves_the_group_lists_kubectl_reads_first() -> None:
    """kubectl's discovery walks ``/api`` and ``/apis`` before any group version (client-go's
    ``ServerGroupsAndResources``); the shapes are apimachinery's APIVersions and APIGroupList."""
    with FakeKube(crds=[schema_check.load_crd("trainjobs-v2.3.0.yaml")]) as kube:
        code, versions, _ = _call(kube, "/api")
        assert (code, versions["kind"], versions["versions"]) == (200, "APIVersions", ["v1"])
        code, groups, _ = _call(kube, "/apis")
        assert (code, groups["kind"]) == (200, "APIGroupList")
        trainer = {g["name"]: g for g in groups["groups"]}["trainer.kubeflow.org"]
        assert trainer["preferredVersion"]["groupVersion"] == TRAINJOB
        code, group, _ = _call(kube, "/apis/trainer.kubeflow.org")
        assert (code, group["kind"], group["name"]) == (200, "APIGroup", "trainer.kubeflow.org")
        assert _call(kube, "/apis/no.such.group")[0] == 404


def test_a_dry_run_other_than_all_is_refused_not_stored() -> None:
    """``dryRun`` takes only ``All`` (apimachinery ``ValidateDryRun``): anything else is a 422,
    never a real create."""
    with FakeKube() as kube:
        configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        path = f"/api/v1/namespaces/{NAMESPACE}/configmaps?dryRun=Some"
        code, status, _ = _call(kube, path, configmap)
        assert code == 422 and 'dryRun: Unsupported value: "Some"' in status["message"]
        assert kube.store.list("v1", "ConfigMap", NAMESPACE) == []


@pytest.mark.parametrize(
    ("selector", "matched"),
    [
        ("app=a", ["x"]),
        ("app!=a", ["y", "z"]),
        ("app in (a,b)", ["x", "y"]),
        ("app notin (a)", ["y", "z"]),
        ("app", ["x", "y"]),
        ("!app", ["z"]),
        ("app=a,tier", []),
        ("app in (a, b),!tier", ["x", "y"]),  # a comma inside a set splits nothing
    ],
)
def test_label_selectors_as_apimachinery_parses_them(selector: str, matched: list[str]) -> None:
    """Every term of apimachinery's ``labels.Parse`` (equality, inequality, set, existence)."""
    store = Objects(FakeClock())
    for name, labels in (("x", {"app": "a"}), ("y", {"app": "b"}), ("z", {})):
        meta = {"name": name, "namespace": NAMESPACE, "labels": labels}
        store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    items, _, _, _ = store.page(store.kind("v1", "ConfigMap"), NAMESPACE, selector)
    assert [o["metadata"]["name"] for o in items] == matched


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
    store = Server(release).store
    found = store.get("v1", "ConfigMap", "kubeflow-system", "kubeflow-trainer-public")
    assert (found or {}).get("data") == (trainer_configmap(version)["data"] if version else None)
    assert (store.served(TRAINJOB, "TrainJob") is not None) == release.startswith("trainjob/")
    crd = store.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None,
                    "trainjobs.trainer.kubeflow.org")  # fmt: skip
    if release.startswith("trainjob/"):
        file = schema_check.load_crd(RELEASES[release][0])
        assert crd is not None and crd["spec"] == file["spec"]


def test_generate_name_gets_a_name_and_neither_is_a_422() -> None:
    """``metadata.generateName`` gets five random characters (apiserver
    ``names.SimpleNameGenerator``); with neither it nor a name, 422 FieldValueRequired."""
    store = Objects(FakeClock())
    configmap = {"apiVersion": "v1", "kind": "ConfigMap"}
    made = store.create({**configmap, "metadata": {"generateName": "c-", "namespace": NAMESPACE}})
    assert re.fullmatch(r"c-[a-z0-9]{5}", made["metadata"]["name"])
    with pytest.raises(StoreError) as caught:
        store.create({**configmap, "metadata": {"namespace": NAMESPACE}})
    assert caught.value.code == 422 and "name or generateName is required" in caught.value.message

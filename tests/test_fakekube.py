"""The fake API server behaves like a real one where the adapter depends on it.

Driven through the real ``kubernetes`` client over HTTP (its strict models and status-code
handling are part of what is checked) and through the Store directly.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
import urllib3
from fakekube import FakeKube
from fakekube.cluster import CRDS
from kubernetes import client, config, watch
from kubernetes.stream import stream

Obj = dict[str, Any]
TRAINER = ("trainer.kubeflow.org", "v1alpha1")


def configmap(name: str, labels: dict[str, str] | None = None, ns: str = "default") -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": name}}


def running_pod(name: str, containers: tuple[str, ...] = ("node",), **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers], **spec},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": c,
                    "image": "busybox",
                    "imageID": "sha256:0",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}},
                }
                for c in containers
            ],
        },
    }


def trainjob(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def owned(obj: Obj, owner: Obj) -> Obj:
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return obj


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    """The server with the newest release of each Kubeflow CRD in ../shared/crds, or none when
    they are absent (tests that need them call ``need_crds()``)."""
    files = (*CRDS, "clustertrainingruntimes-v2.3.0.yaml", "trainingruntimes-v2.3.0.yaml")
    crds = [schema_check.load_crd(name) for name in files] if schema_check.CRDS else []
    with FakeKube(crds=crds) as kube:
        yield kube


@pytest.fixture
def kube_client(fake_kube: FakeKube, tmp_path: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(fake_kube.kubeconfig(tmp_path / "kubeconfig")))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def core(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def custom(kube_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client)


@pytest.fixture
def raw(fake_kube: FakeKube) -> Iterator[Any]:
    """``raw(path, method="GET", body=None, **query)``: a request with the right token and
    without the client's retries or model checks; the urllib3 response, not yet read."""
    pool = urllib3.PoolManager(retries=False)

    def send(
        path: str, method: str = "GET", body: Obj | None = None, **query: str
    ) -> urllib3.BaseHTTPResponse:
        url = fake_kube.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return pool.request(
            method,
            url,
            body=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": "Bearer fake-token", "Content-Type": "application/json"},
            preload_content=False,
            timeout=5,
        )

    yield send
    pool.clear()


def events(response: urllib3.BaseHTTPResponse, until: int | None = None) -> list[Obj]:
    """The watch events of ``response``: all, to its end, or the first ``until`` (read as
    they come, so that a test need not wait for the watch's timeout)."""
    if until is None:
        return [json.loads(line) for line in response.read().decode().splitlines()]
    buffer, found = b"", []
    while len(found) < until:
        chunk = response.read(1)
        assert chunk, f"the watch ended after {found}"
        buffer += chunk
        if chunk == b"\n":
            found.append(json.loads(buffer))
            buffer = b""
    return found


def api_error(call: Any, *args: Any, **kwargs: Any) -> tuple[int, Obj]:
    """The HTTP status and Status body of a call that must fail."""
    with pytest.raises(client.ApiException) as info:
        call(*args, **kwargs)
    return info.value.status, json.loads(info.value.body)


def need_crds() -> None:
    schema_check.require_shared()


# --- CRUD -------------------------------------------------------------------------------------


def fake_kube_patch(core: client.CoreV1Api, patch: Obj) -> Obj:
    """A JSON merge patch of ConfigMap ``a``, as the adapter sends it (the client's own patch
    methods prefer strategic merge)."""
    answer = core.api_client.call_api(
        "PATCH",
        core.api_client.configuration.host + "/api/v1/namespaces/default/configmaps/a",
        header_params={
            "Content-Type": "application/merge-patch+json",
            "Authorization": "Bearer fake-token",
        },
        body=patch,
    )
    answer.read()
    assert answer.status == 200
    result: Obj = json.loads(answer.data)
    return result


def test_core_crud_through_the_client(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", configmap("a"))
    assert isinstance(created, client.V1ConfigMap)  # 201 deserialized, not None
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert int(created.metadata.resource_version) == fake_kube.store.resource_version
    status, body = api_error(core.create_namespaced_config_map, "default", configmap("a"))
    assert (status, body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'configmaps "a" already exists'

    got = core.read_namespaced_config_map("a", "default")
    assert got.data == {"k": "a"} and got.metadata.uid == created.metadata.uid
    patched = fake_kube_patch(core, {"metadata": {"labels": {"x": "1"}}})
    assert patched["metadata"]["labels"] == {"x": "1"} and patched["data"] == {"k": "a"}
    assert int(patched["metadata"]["resourceVersion"]) > int(got.metadata.resource_version)
    ops = [{"op": "replace", "path": "/data/k", "value": "json-patched"}]
    status, body = api_error(core.patch_namespaced_config_map, "a", "default", ops)
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")  # no client here sends it

    deleted = core.delete_namespaced_config_map("a", "default")
    assert deleted["status"] == "Success" and deleted["details"]["name"] == "a"
    status, body = api_error(core.read_namespaced_config_map, "a", "default")
    assert (status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        'configmaps "a" not found',
    )
    assert api_error(core.delete_namespaced_config_map, "a", "default")[0] == 404


def test_namespaces_generate_name_and_secrets(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    status, body = api_error(
        core.create_namespaced_config_map, "nowhere", configmap("a", ns="nowhere")
    )
    assert (status, body["message"]) == (404, 'namespaces "nowhere" not found')
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    generated = core.create_namespaced_config_map(
        "team", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "cm-"}}
    )
    assert re.fullmatch(r"cm-[a-z0-9]{5}", generated.metadata.name)
    assert generated.metadata.namespace == "team"
    secret = core.create_namespaced_secret(
        "team",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": "b"}},
    )
    assert secret.data == {"a": base64.b64encode(b"b").decode()} and secret.type == "Opaque"
    status, body = api_error(
        core.create_namespaced_config_map, "team", configmap("Bad_Name", ns="team")
    )
    assert (status, body["reason"]) == (422, "Invalid")


def test_pods_answer_typed_objects_and_delete_returns_the_pod(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod("default", running_pod("p"))
    assert pod.status.phase == "Pending"  # a create never sets the status
    assert core.delete_namespaced_pod("p", "default").metadata.name == "p"
    assert core.list_namespaced_pod("default").items == []


def test_custom_resources_and_their_status(
    fake_kube: FakeKube, custom: client.CustomObjectsApi
) -> None:
    need_crds()
    created = custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", trainjob("t")
    )
    assert created["metadata"]["generation"] == 1
    assert created["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"  # CRD default
    patched = custom.patch_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "t", {"spec": {"suspend": True}, "status": {"x": 1}}
    )
    assert patched["spec"]["suspend"] is True and "status" not in patched  # main ignores status
    assert patched["metadata"]["generation"] == 2
    listed = custom.list_cluster_custom_object(*TRAINER, "trainjobs")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["t"]
    assert listed["items"][0]["kind"] == "TrainJob"  # custom resource items keep their kind
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed"},
        "spec": {"template": {"spec": {"replicatedJobs": []}}},
    }
    made = custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
    assert "namespace" not in made["metadata"]
    got = custom.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", "torch-distributed")
    assert got["metadata"]["uid"] == made["metadata"]["uid"]


def test_discovery(fake_kube: FakeKube, kube_client: client.ApiClient) -> None:
    need_crds()
    core_names = {r.name for r in client.CoreV1Api(kube_client).get_api_resources().resources}
    assert {
        "pods",
        "pods/log",
        "pods/exec",
        "configmaps",
        "secrets",
        "events",
        "namespaces",
        "persistentvolumeclaims",
        "serviceaccounts",
    } <= core_names
    groups = {g.name: g for g in client.ApisApi(kube_client).get_api_versions().groups}
    assert {
        "trainer.kubeflow.org",
        "kubeflow.org",
        "batch",
        "jobset.x-k8s.io",
        "kueue.x-k8s.io",
    } <= groups.keys()
    resources = client.CustomObjectsApi(kube_client).get_api_resources(*TRAINER).resources
    scoped = {r.name: r.namespaced for r in resources}
    assert scoped["trainjobs"] is True and scoped["clustertrainingruntimes"] is False
    assert next(r for r in resources if r.name == "trainjobs").kind == "TrainJob"
    with pytest.raises(client.ApiException) as info:
        client.CustomObjectsApi(kube_client).get_api_resources("example.com", "v1")
    assert info.value.status == 404

    widget = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    fake_kube.install_crd(widget)
    listed = client.CustomObjectsApi(kube_client).get_api_resources("example.com", "v1")
    assert [r.name for r in listed.resources] == ["widgets"]


def test_bearer_token_is_required(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.kubeconfig(tmp_path / "good")
    bad = config.new_client_from_config(str(fake_kube.kubeconfig(tmp_path / "k", token="x")))
    fake_kube.tokens.discard("x")
    with bad:
        status, body = api_error(client.CoreV1Api(bad).list_namespaced_pod, "default")
    assert (status, body["reason"]) == (401, "Unauthorized")


# --- validation -------------------------------------------------------------------------------


def test_strict_validation_rejects_unknown_trainjob_fields(
    fake_kube: FakeKube, custom: client.CustomObjectsApi
) -> None:
    need_crds()
    bad = trainjob("t", trainer={"numNodes": 2, "bogus": True})
    status, body = api_error(
        custom.create_namespaced_custom_object,
        *TRAINER,
        "default",
        "trainjobs",
        bad,
        field_validation="Strict",
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    assert body["message"] == (
        'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: '
        'unknown field "spec.trainer.bogus"'
    )
    assert fake_kube.store.list("trainer.kubeflow.org/v1alpha1", "TrainJob") == []

    # Without Strict the server prunes the field
    response = custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", bad, _preload_content=False
    )
    assert response.status == 201
    assert json.loads(response.data)["spec"]["trainer"] == {"numNodes": 2}

    wrong_type = trainjob("u", trainer={"numNodes": "two"})
    status, body = api_error(
        custom.create_namespaced_custom_object, *TRAINER, "default", "trainjobs", wrong_type
    )
    assert (status, body["reason"]) == (422, "Invalid")
    assert "spec.trainer.numNodes" in body["message"]


def test_strict_validation_of_core_kinds(raw: Any) -> None:
    # Raw requests: the client's own models already refuse unknown fields in a dict body
    pod = running_pod("p")
    pod["spec"]["containers"][0]["bogus"] = 1
    pods = "/api/v1/namespaces/default/pods"
    response = raw(pods, "POST", pod, fieldValidation="Strict")
    assert response.status == 400
    message = json.loads(response.read())["message"]
    assert message == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].bogus"'
    )
    cm = configmap("a")
    cm["extra"] = 1
    response = raw("/api/v1/namespaces/default/configmaps", "POST", cm, fieldValidation="Strict")
    assert json.loads(response.read())["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: '
        'unknown field "extra"'
    )
    response = raw(pods, "POST", pod)  # default (Warn): pruned
    assert response.status == 201
    assert "bogus" not in json.loads(response.read())["spec"]["containers"][0]


# --- selectors and pagination ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web", ["a", "b"]),
        ("app!=web", ["c", "d"]),  # includes the one without the label
        ("tier in (front,back)", ["a", "c"]),
        ("tier notin (front)", ["b", "c", "d"]),
        ("tier", ["a", "b", "c"]),
        ("!tier", ["d"]),
        ("app=web,tier=front", ["a"]),
        ("app in (web, db),!tier", []),
    ],
)
def test_label_selectors(
    fake_kube: FakeKube, core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    for name, labels in {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web", "tier": "middle"},
        "c": {"app": "db", "tier": "back"},
        "d": {},
    }.items():
        fake_kube.store.create(configmap(name, labels))
    listed = core.list_namespaced_config_map("default", label_selector=selector)
    assert [i.metadata.name for i in listed.items] == expected


def test_bad_label_selector_is_400(core: client.CoreV1Api) -> None:
    status, _ = api_error(core.list_namespaced_config_map, "default", label_selector="a in b")
    assert status == 400


def test_field_selectors(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    store = fake_kube.store
    store.create(running_pod("run"))
    pending = running_pod("wait")
    pending["status"] = {"phase": "Pending"}
    store.create(pending)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "run", "namespace": "default"},
        "reason": "Started",
        "message": "started",
    }
    store.create(event)
    store.create(
        {**event, "metadata": {"name": "e2"}, "involvedObject": {"kind": "Pod", "name": "wait"}}
    )
    pods = core.list_namespaced_pod("default", field_selector="status.phase=Running")
    assert [p.metadata.name for p in pods.items] == ["run"]
    pods = core.list_pod_for_all_namespaces(field_selector="metadata.name!=run")
    assert [p.metadata.name for p in pods.items] == ["wait"]
    evs = core.list_namespaced_event("default", field_selector="involvedObject.name=wait")
    assert [e.metadata.name for e in evs.items] == ["e2"]
    assert api_error(core.list_namespaced_pod, "default", field_selector="spec.bogus=1")[0] == 400


# --- watch ------------------------------------------------------------------------------------


def test_watch_streams_live_changes_with_selector_transitions(
    fake_kube: FakeKube, raw: Any
) -> None:
    store = fake_kube.store
    rv = str(store.resource_version)

    def change() -> None:  # once the watch is open: live, not replayed
        while not fake_kube.requests.count("GET", "/configmaps", watch=True):
            time.sleep(0.005)
        store.create(configmap("a", {"x": "1"}))
        store.create(configmap("b", {"x": "2"}))
        obj = store.get("v1", "ConfigMap", "default", "a")
        assert obj is not None
        obj["metadata"]["labels"] = {"x": "2"}
        store.update(obj)  # leaves the selection: a DELETED for this watcher

    thread = threading.Thread(target=change)
    thread.start()
    response = raw(
        "/api/v1/namespaces/default/configmaps",
        watch="True",  # older clients send the capitalized form
        resourceVersion=rv,
        labelSelector="x=1",
        timeoutSeconds="30",
    )
    got = [(e["type"], e["object"]["metadata"]["name"]) for e in events(response, until=2)]
    response.release_conn()
    thread.join()
    assert got == [("ADDED", "a"), ("DELETED", "a")]


def test_watch_of_a_compacted_version_answers_410_in_stream(
    fake_kube: FakeKube, core: client.CoreV1Api, raw: Any
) -> None:
    fake_kube.store.create(configmap("a"))
    old = "1"
    fake_kube.faults.compact()
    response = raw(
        "/api/v1/namespaces/default/configmaps",
        watch="true",
        resourceVersion=old,
        timeoutSeconds="1",
    )
    assert response.status == 200
    (event,) = events(response)
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    with pytest.raises(client.ApiException) as info:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=1
            )
        )
    assert info.value.status == 410


def test_watch_history_is_bounded(raw: Any) -> None:
    with FakeKube(history=5) as kube:
        for i in range(8):
            kube.store.create(configmap(f"c{i}"))
        headers = {"Authorization": "Bearer fake-token"}
        base = kube.url + "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=0.1"
        pool = urllib3.PoolManager(retries=False)
        kept = events(
            pool.request(
                "GET",
                f"{base}&resourceVersion={kube.store.resource_version - 5}",
                headers=headers,
                preload_content=False,
            )
        )
        assert [e["object"]["metadata"]["name"] for e in kept] == [f"c{i}" for i in range(3, 8)]
        lost = events(
            pool.request("GET", f"{base}&resourceVersion=2", headers=headers, preload_content=False)
        )
        assert [e["type"] for e in lost] == ["ERROR"]


def test_watch_bookmarks_and_initial_state(fake_kube: FakeKube, raw: Any) -> None:
    fake_kube.store.create(configmap("a"))
    fake_kube.bookmark_interval = 0.05
    response = raw(
        "/api/v1/namespaces/default/configmaps",
        watch="true",
        allowWatchBookmarks="true",
        timeoutSeconds="0.2",
    )
    got = events(response)
    assert (got[0]["type"], got[0]["object"]["metadata"]["name"]) == ("ADDED", "a")
    bookmarks = [e for e in got if e["type"] == "BOOKMARK"]
    assert bookmarks
    rv = str(fake_kube.store.resource_version)
    assert bookmarks[-1]["object"]["metadata"]["resourceVersion"] == rv


# --- garbage collection -----------------------------------------------------------------------


@pytest.fixture
def family(fake_kube: FakeKube) -> dict[str, Obj]:
    """TrainJob -> JobSet -> Job -> two Pods, plus an unrelated ConfigMap."""
    need_crds()
    store = fake_kube.store
    job = store.create(trainjob("t"))
    jobset = store.create(
        owned(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "t"},
                "spec": {},
            },
            job,
        )
    )
    batch = store.create(
        owned(
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "t-node-0"}, "spec": {}},
            jobset,
        )
    )
    pods = [store.create(owned(running_pod(f"t-node-0-{i}-abcde"), batch)) for i in range(2)]
    store.create(configmap("other"))
    return {"trainjob": job, "jobset": jobset, "job": batch, "pod0": pods[0], "pod1": pods[1]}


def names(fake_kube: FakeKube) -> set[str]:
    store = fake_kube.store
    return {
        f"{kind}/{o['metadata']['name']}"
        for api, kind in (
            ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
            ("jobset.x-k8s.io/v1alpha2", "JobSet"),
            ("batch/v1", "Job"),
            ("v1", "Pod"),
            ("v1", "ConfigMap"),
        )
        for o in store.list(api, kind)
    }


def test_background_deletion_removes_the_owner_at_once_then_dependents(
    fake_kube: FakeKube, custom: client.CustomObjectsApi, family: dict[str, Obj]
) -> None:
    answer = custom.delete_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "t", propagation_policy="Background"
    )
    assert answer["status"] == "Success"
    assert "TrainJob/t" not in names(fake_kube)
    fake_kube.store.settle()
    assert names(fake_kube) == {"ConfigMap/other"}


def test_foreground_deletion_removes_dependents_first(
    fake_kube: FakeKube, custom: client.CustomObjectsApi, family: dict[str, Obj]
) -> None:
    order: list[tuple[str, str]] = []
    fake_kube.store.subscribe(lambda t, o: order.append((t, o["kind"])))
    answer = custom.delete_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "t", propagation_policy="Foreground"
    )
    assert answer["metadata"]["deletionTimestamp"]  # still there, being deleted
    assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    fake_kube.store.settle()
    assert names(fake_kube) == {"ConfigMap/other"}
    deleted = [kind for t, kind in order if t == "DELETED"]
    assert deleted == ["Pod", "Pod", "Job", "JobSet", "TrainJob"]


def test_orphan_deletion_keeps_dependents_and_drops_their_owner_reference(
    fake_kube: FakeKube, custom: client.CustomObjectsApi, family: dict[str, Obj]
) -> None:
    custom.delete_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "t", propagation_policy="Orphan"
    )
    fake_kube.store.settle()
    assert "TrainJob/t" not in names(fake_kube) and "JobSet/t" in names(fake_kube)
    jobset = fake_kube.store.get("jobset.x-k8s.io/v1alpha2", "JobSet", "default", "t")
    assert jobset is not None and "ownerReferences" not in jobset["metadata"]
    job = fake_kube.store.get("batch/v1", "Job", "default", "t-node-0")
    assert job is not None and job["metadata"]["ownerReferences"][0]["name"] == "t"


def test_every_answer_comes_after_the_background_work_due(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    """The garbage collector works on a thread, but a request made after another sees what it
    did for it, however busy the machine: a foreground delete has gone. (Before: about one read
    in ten raced it on a loaded machine.)"""
    for i in range(50):
        core.create_namespaced_config_map("default", configmap(f"c{i}"))
        core.delete_namespaced_config_map(f"c{i}", "default")  # the client's Foreground
        status, _ = api_error(core.read_namespaced_config_map, f"c{i}", "default")
        assert status == 404
    fake_kube.store.gc(running=False)  # an absent collector: the deletion stays in between
    core.create_namespaced_config_map("default", configmap("held"))
    core.delete_namespaced_config_map("held", "default", propagation_policy="Foreground")
    held = core.read_namespaced_config_map("held", "default").metadata
    assert held.deletion_timestamp and held.finalizers == ["foregroundDeletion"]


def test_finalizers_hold_deletion_until_removed(fake_kube: FakeKube) -> None:
    store = fake_kube.store
    cm = configmap("a")
    cm["metadata"]["finalizers"] = ["example.com/keep"]
    store.create(cm)
    store.delete("v1", "ConfigMap", "default", "a")
    held = store.get("v1", "ConfigMap", "default", "a")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"] = []
    store.update(held)
    assert store.get("v1", "ConfigMap", "default", "a") is None


# --- logs -------------------------------------------------------------------------------------


def test_log_follow_streams_through_a_restart_until_termination(
    fake_kube: FakeKube, core: client.CoreV1Api
) -> None:
    store = fake_kube.store
    store.create(running_pod("p"))
    store.append_log("default", "p", "node", "first\n")

    def container(restarts: int, state: Obj) -> None:
        pod = store.get("v1", "Pod", "default", "p")
        assert pod is not None
        pod["status"]["containerStatuses"][0].update(restartCount=restarts, state=state)
        store.update(pod)

    # Each change once the line before has arrived: live, whatever the machine's speed.
    lines = []
    for line in watch.Watch().stream(core.read_namespaced_pod_log, "p", "default"):
        lines.append(line)
        if line == "first":
            container(1, {"running": {}})  # restarted: the new run's output keeps streaming
            store.append_log("default", "p", "node", "second\n")
        elif line == "second":
            store.append_log("default", "p", "node", "last\n")
            container(1, {"terminated": {"exitCode": 0, "reason": "Completed"}})
    assert lines == ["first", "second", "last"]
    assert core.read_namespaced_pod_log("p", "default") == "second\nlast\n"  # the current run


def test_log_follow_ends_when_the_pod_is_deleted(fake_kube: FakeKube, raw: Any) -> None:
    fake_kube.store.create(running_pod("p"))
    fake_kube.store.append_log("default", "p", "node", "x\n")
    response = raw("/api/v1/namespaces/default/pods/p/log", follow="true")
    assert response.read(2) == b"x\n"  # following: then the pod goes
    fake_kube.store.delete("v1", "Pod", "default", "p")
    assert response.read() == b""


# --- exec -------------------------------------------------------------------------------------


def pvc_pod(name: str = "p") -> Obj:
    pod = running_pod(name)
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "work", "mountPath": "/workspace"}]
    pod["spec"]["volumes"] = [{"name": "work", "persistentVolumeClaim": {"claimName": "data"}}]
    return pod


def run_exec(
    core: client.CoreV1Api, command: list[str], stdin: bytes | None = None
) -> tuple[int, bytes, bytes]:
    """``(exit code, stdout, stderr)`` of ``command`` in pod ``p``, through the client's stream."""
    ws = stream(
        core.connect_get_namespaced_pod_exec,
        "p",
        "default",
        command=command,
        container="node",
        stdin=stdin is not None,
        stdout=True,
        stderr=True,
        tty=False,
        binary=True,
        _preload_content=False,
    )
    if stdin is not None:
        ws.write_stdin(stdin)
        ws.close_channel(0)  # v5: end of stdin
    ws.run_forever(timeout=10)
    try:
        return ws.returncode, ws.read_stdout(), ws.read_stderr()
    finally:
        # After the server's close frame WSClient.close() leaves the socket open: shut it
        ws.sock.shutdown()


def test_exec_failures(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    fake_kube.store.create(pvc_pod())
    code, _, err = run_exec(core, ["python", "-c", "1"])
    assert code == 127 and b"command not found" in err
    code, _, err = run_exec(core, ["tar", "-xf", "-", "-C", "/workspace/missing"], b"")
    assert code == 2 and b"Cannot open" in err
    fake_kube.store.patch_status("v1", "Pod", "default", "p", {"phase": "Succeeded"})
    with pytest.raises(client.ApiException) as info:
        run_exec(core, ["true"])
    assert "400" in str(info.value.reason)


# --- faults and the request log ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (409, "Conflict"),
        (410, "Expired"),
        (429, "TooManyRequests"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
    ],
)
def test_status_faults(fake_kube: FakeKube, core: client.CoreV1Api, code: int, reason: str) -> None:
    fault = fake_kube.faults.add("POST", "/configmaps", status=code)
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_config_map("default", configmap("a"))
    assert info.value.status == code
    assert json.loads(info.value.body)["reason"] == reason
    if code == 429:
        assert info.value.headers["Retry-After"] == "1"
    assert core.create_namespaced_config_map("default", configmap("a"))  # consumed once
    assert fault.fired == 1 and [f.fault for f in fake_kube.faults.fired] == [fault]
    assert [r.status for r in fake_kube.requests.matching("POST")] == [code, 201]


def test_faults_match_fifo_by_method_and_path(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    faults = fake_kube.faults
    first = faults.add(path=re.compile(r"/configmaps$"), status=500)
    second = faults.add("GET", "/configmaps", status=503, times=2)
    core.list_namespaced_pod("default")  # matches neither
    for expected in (500, 503, 503):
        with pytest.raises(client.ApiException) as info:
            core.list_namespaced_config_map("default")
        assert info.value.status == expected
    core.list_namespaced_config_map("default")
    assert (first.fired, second.fired, faults.pending) == (1, 2, [])


def test_hang_and_drop_faults(fake_kube: FakeKube, core: client.CoreV1Api, raw: Any) -> None:
    fake_kube.faults.add("POST", "/configmaps", hang=0.2)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_namespaced_config_map("default", configmap("a"), _request_timeout=0.05)
    # A create that timed out on the client may still happen
    deadline = time.monotonic() + 30  # the hang is 0.2 s; a loaded machine may take longer
    while fake_kube.store.get("v1", "ConfigMap", "default", "a") is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    fake_kube.faults.add("GET", "/pods", drop=True)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        raw("/api/v1/namespaces/default/pods")
    record = fake_kube.requests.matching(path_contains="/pods")[-1]
    assert record.status == 0 and record.fault is not None and record.verb == ""
    assert raw("/api/v1/namespaces/default/pods").status == 200


def test_streams_dropped_mid_way(fake_kube: FakeKube, raw: Any) -> None:
    store = fake_kube.store
    for name in ("a", "b", "c"):
        store.create(configmap(name))
    fake_kube.faults.add(path="/configmaps", watch=True, drop_after=2)
    response = raw("/api/v1/namespaces/default/configmaps", watch="true", resourceVersion="1")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        response.read()
    store.create(running_pod("p"))
    store.append_log("default", "p", "node", "1\n2\n3\n")
    fake_kube.faults.add(path="/log", drop_after=1)
    response = raw("/api/v1/namespaces/default/pods/p/log", follow="true")
    lines = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        for chunk in response.stream(None):
            lines.append(chunk)
    assert b"".join(lines) == b"1\n"


def test_request_log(fake_kube: FakeKube, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", configmap("a"))
    core.list_namespaced_config_map("default", label_selector="x=1")
    watcher = watch.Watch()
    for _ in watcher.stream(core.list_namespaced_config_map, "default", timeout_seconds=5):
        watcher.stop()  # after the initial ADDED
    log = fake_kube.requests
    assert log.count("POST", "/configmaps") == 1
    assert [r.verb for r in log] == ["create", "list", "watch"]
    assert log[1].query == {"labelSelector": "x=1"}
    assert log.count(watch=True) == 1
    log.clear()
    assert log.count() == 0

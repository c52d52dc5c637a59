"""kfcompile_kube: KubeCluster through the real ``kubernetes`` client over real HTTP against a
fake cluster served over HTTP (``fakekube.server``), error mapping for injected faults, the
exec protocol (what an exec'd command gets and sends, byte for byte), and the local ports
(TarFiles, SystemClock)."""

from __future__ import annotations

import io
import os
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakekube import FakeKube

from kfcompile.lifecycle.ports import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Packed,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile.testing import Exec, ExecAnswer
from kfcompile_kube.cluster import KubeCluster
from kfcompile_kube.config import connect
from kfcompile_local import SystemClock, TarFiles

Obj = dict[str, Any]
NS = "team-a"
TOKEN = "adapter-test-token"

WIDGET_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}},
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}
GADGET_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.org"},
    "spec": {
        "group": "example.org",
        "scope": "Cluster",
        "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
        "versions": [
            {
                "name": "v2",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as kube:
        kube.store.create(WIDGET_CRD)
        kube.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield kube


def cluster_for(fake: FakeKube, tmp_path: Path, **timeouts: float) -> KubeCluster:
    conn = connect(str(fake.kubeconfig(tmp_path / "kubeconfig", namespace=NS, token=TOKEN)))
    assert conn.namespace == NS
    return KubeCluster(conn.api_client, **timeouts)


@pytest.fixture
def kube(fake: FakeKube, tmp_path: Path) -> KubeCluster:
    return cluster_for(fake, tmp_path, request_timeout=5.0)


def configmap(name: str, namespace: str | None = NS, **extra: Any) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **extra}


def cm_ref(name: str, namespace: str = NS) -> Ref:
    return Ref("v1", "ConfigMap", namespace, name)


def echo(call: Exec) -> ExecAnswer:
    """A pod's ``cat``: what it reads, it writes."""
    return ExecAnswer(stdout=call.stdin)


def running_pod(fake: FakeKube, name: str, containers: tuple[str, ...] = ("main",)) -> None:
    fake.store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]},
        }
    )
    statuses = [
        {"name": c, "ready": True, "restartCount": 0, "state": {"running": {}}} for c in containers
    ]
    fake.store.patch_status(
        "v1", "Pod", NS, name, {"phase": "Running", "containerStatuses": statuses}
    )


# --- discovery ---------------------------------------------------------------------------------


def test_served_core_builtin_crd_and_missing(fake: FakeKube, kube: KubeCluster) -> None:
    assert kube.served("v1", "Pod")
    assert kube.served("batch/v1", "Job")  # through discovery
    assert kube.served("example.com/v1", "Widget")
    assert not kube.served("example.com/v1", "Gizmo")  # group served, kind not
    assert not kube.served("example.com/v2", "Widget")  # 404 for the group version
    assert not kube.served("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert not kube.served("v1", "Gizmo")


def test_discovery_is_cached_but_a_miss_is_not(fake: FakeKube, kube: KubeCluster) -> None:
    for _ in range(3):
        assert kube.served("example.com/v1", "Widget")
    assert fake.requests.count("GET", "/apis/example.com/v1", verb="discovery") == 1

    assert not kube.served("example.org/v2", "Gadget")
    fake.store.create(GADGET_CRD)  # e.g. the operator got installed meanwhile
    assert kube.served("example.org/v2", "Gadget")


# --- create, get, patch, delete ------------------------------------------------------------------


def test_crud_round_trip_as_plain_dicts(fake: FakeKube, kube: KubeCluster) -> None:
    created = kube.create(configmap("cfg", data={"a": "1", "b": "2"}))
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and created["data"] == {"a": "1", "b": "2"}
    assert fake.requests.matching("POST", "/configmaps")[0].query["fieldValidation"] == "Strict"

    assert kube.get(cm_ref("cfg")) == created

    patched = kube.patch(
        cm_ref("cfg"), {"data": {"b": None, "c": "3"}, "metadata": {"labels": {"x": "y"}}}
    )
    assert patched["data"] == {"a": "1", "c": "3"}  # merge patch: null removes, the rest stays
    assert patched["metadata"]["labels"] == {"x": "y"}
    assert int(patched["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])

    # Background: gone at once (Foreground keeps it, Terminating, until the garbage collector
    # has run, as a real API server does)
    kube.delete(cm_ref("cfg"), propagation="Background")
    with pytest.raises(NotFound, match='configmaps "cfg" not found'):
        kube.get(cm_ref("cfg"))
    with pytest.raises(NotFound):
        kube.delete(cm_ref("cfg"))
    with pytest.raises(NotFound):
        kube.patch(cm_ref("cfg"), {"data": {}})


def test_custom_resource_and_cluster_scoped_objects(fake: FakeKube, kube: KubeCluster) -> None:
    fake.store.create(GADGET_CRD)
    widget = kube.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": NS},
            "spec": {"size": 3},
        }
    )
    assert (
        fake.requests.matching("POST")[-1].path == f"/apis/example.com/v1/namespaces/{NS}/widgets"
    )
    assert kube.get(Ref.of(widget))["spec"] == {"size": 3}
    # A custom resource takes only JSON merge patches (no strategic merge): this one works.
    assert kube.patch(Ref.of(widget), {"spec": {"size": 4}})["spec"] == {"size": 4}

    gadget = kube.create(
        {"apiVersion": "example.org/v2", "kind": "Gadget", "metadata": {"name": "g"}}
    )
    assert "namespace" not in gadget["metadata"]
    assert fake.requests.matching("POST")[-1].path == "/apis/example.org/v2/gadgets"
    kube.delete(Ref("example.org/v2", "Gadget", None, "g"), propagation="Background")
    with pytest.raises(NotFound):
        kube.get(Ref("example.org/v2", "Gadget", None, "g"))

    ns = kube.get(Ref("v1", "Namespace", None, NS))
    assert ns["metadata"]["name"] == NS


def test_strict_field_validation_rejects_unknown_fields(kube: KubeCluster) -> None:
    with pytest.raises(Invalid, match='unknown field "bogus"') as err:
        kube.create(configmap("cfg", bogus=1))
    assert err.value.status in (400, 422)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": NS},
        "spec": {"size": 1, "colour": "red"},
    }
    with pytest.raises(Invalid, match="colour"):
        kube.create(widget)


def test_create_taken_name_is_a_conflict(kube: KubeCluster) -> None:
    kube.create(configmap("cfg"))
    with pytest.raises(Conflict) as err:
        kube.create(configmap("cfg"))
    assert (err.value.status, err.value.reason) == (409, "AlreadyExists")


def test_kind_not_served_and_missing_namespace(kube: KubeCluster) -> None:
    with pytest.raises(NotFound, match="does not serve TrainJob"):
        kube.get(Ref("trainer.kubeflow.org/v1alpha1", "TrainJob", NS, "x"))
    with pytest.raises(ValueError, match="needs a namespace"):
        kube.create(configmap("cfg", namespace=None))


@pytest.mark.parametrize(
    ("propagation", "dependent_survives"),
    [("Background", False), ("Foreground", False), ("Orphan", True)],
)
def test_delete_sends_the_propagation_policy(
    fake: FakeKube, kube: KubeCluster, propagation: str, dependent_survives: bool
) -> None:
    owner = kube.create(configmap("owner"))
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    kube.create(configmap("dependent", metadata={"ownerReferences": [ref]}))
    kube.delete(cm_ref("owner"), propagation=propagation)
    fake.store.collect()
    with pytest.raises(NotFound):
        kube.get(cm_ref("owner"))
    if dependent_survives:
        assert "ownerReferences" not in kube.get(cm_ref("dependent"))["metadata"]
    else:
        with pytest.raises(NotFound):
            kube.get(cm_ref("dependent"))


def test_delete_sends_the_uid_as_a_precondition(fake: FakeKube, kube: KubeCluster) -> None:
    made = kube.create(configmap("cfg"))
    with pytest.raises(Conflict, match="Precondition failed: UID in precondition: other-uid"):
        kube.delete(cm_ref("cfg"), uid="other-uid")
    assert kube.get(cm_ref("cfg"))["metadata"]["uid"] == made["metadata"]["uid"]
    assert [r.status for r in fake.requests if r.method == "DELETE"] == [409]
    kube.delete(cm_ref("cfg"), "Background", uid=made["metadata"]["uid"])
    with pytest.raises(NotFound):
        kube.get(cm_ref("cfg"))


# --- list and watch ------------------------------------------------------------------------------


def test_list_pages_selectors_and_all_namespaces(fake: FakeKube, kube: KubeCluster) -> None:
    fake.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    for i in range(5):
        kube.create(configmap(f"cm{i}", metadata={"labels": {"app": "x"}}))
    kube.create(configmap("other"))
    kube.create(configmap("elsewhere", namespace="team-b", metadata={"labels": {"app": "x"}}))

    names: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        page = kube.list(
            "v1", "ConfigMap", NS, label_selector="app=x", limit=2, continue_token=token
        )
        pages += 1
        assert page.resource_version
        for item in page.items:  # list items come without them: the adapter fills them in
            assert (item["apiVersion"], item["kind"]) == ("v1", "ConfigMap")
        names += [item["metadata"]["name"] for item in page.items]
        token = page.continue_token
        if token is None:
            break
    assert pages == 3 and names == [f"cm{i}" for i in range(5)]

    by_field = kube.list("v1", "ConfigMap", NS, field_selector="metadata.name=other")
    assert [i["metadata"]["name"] for i in by_field.items] == ["other"]

    everywhere = kube.list("v1", "ConfigMap", None, label_selector="app=x")
    assert {i["metadata"]["namespace"] for i in everywhere.items} == {NS, "team-b"}
    assert len(everywhere.items) == 6


def test_watch_streams_changes_after_a_version(fake: FakeKube, kube: KubeCluster) -> None:
    start = kube.list("v1", "ConfigMap", NS).resource_version
    kube.create(configmap("cfg", data={"v": "1"}))
    events = kube.watch("v1", "ConfigMap", NS, resource_version=start, timeout_seconds=5)
    first = next(events)
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "cfg")
    assert first.object["apiVersion"] == "v1" and first.object["kind"] == "ConfigMap"
    # Changes made while the watch is open arrive on it.
    kube.patch(cm_ref("cfg"), {"data": {"v": "2"}})
    kube.delete(cm_ref("cfg"), propagation="Background")  # Foreground would first be MODIFIED
    seen = [(e.type, e.object.get("data")) for e in _take(events, 2)]
    assert seen == [("MODIFIED", {"v": "2"}), ("DELETED", {"v": "2"})]
    assert isinstance(events, Generator)
    events.close()  # stopping early must not hang or leak: the next request still works
    assert kube.list("v1", "ConfigMap", NS).items == []
    query = fake.requests.matching(watch=True)[0].query
    assert query["allowWatchBookmarks"] == "true" and query["resourceVersion"] == start


def test_watch_filters_and_ends_when_the_server_closes_it(
    fake: FakeKube, kube: KubeCluster, tmp_path: Path
) -> None:
    # Quiet gaps between bookmarks are longer than the read timeout: a watch may idle for its
    # whole timeoutSeconds. (The timeout is still ample for the answer's start on a loaded
    # machine; the objects are made with the usual one.)
    watcher = cluster_for(fake, tmp_path, request_timeout=1.0)
    start = kube.list("v1", "ConfigMap", NS).resource_version
    kube.create(configmap("skip"))
    kube.create(configmap("keep", metadata={"labels": {"app": "x"}}))
    began = time.monotonic()
    events = list(
        watcher.watch("v1", "ConfigMap", NS, resource_version=start, label_selector="app=x",
                      timeout_seconds=2)
    )  # fmt: skip
    assert time.monotonic() - began < 15  # ended by the server, well before any bookmark
    assert [e.object["metadata"]["name"] for e in events if e.type != "BOOKMARK"] == ["keep"]
    bookmarks = [e for e in events if e.type == "BOOKMARK"]
    assert bookmarks and bookmarks[-1].object["metadata"]["resourceVersion"]


def test_watch_from_a_compacted_version_is_gone(fake: FakeKube, kube: KubeCluster) -> None:
    start = kube.list("v1", "ConfigMap", NS).resource_version
    kube.create(configmap("cfg"))
    fake.store.compact()
    with pytest.raises(Gone) as err:  # an ERROR event inside a 200 stream, as the server does
        list(kube.watch("v1", "ConfigMap", NS, resource_version=start, timeout_seconds=5))
    assert err.value.status == 410 and "too old resource version" in err.value.message


def test_watch_answered_410_is_gone(fake: FakeKube, kube: KubeCluster) -> None:
    fake.faults.add("GET", "/configmaps", watch=True, status=410)
    with pytest.raises(Gone):
        list(kube.watch("v1", "ConfigMap", NS, resource_version="1", timeout_seconds=5))


def test_watch_dropped_mid_stream_is_transient(fake: FakeKube, kube: KubeCluster) -> None:
    start = kube.list("v1", "ConfigMap", NS).resource_version
    kube.create(configmap("a"))
    kube.create(configmap("b"))
    fake.faults.add("GET", "/configmaps", watch=True, drop_after=1)
    events = kube.watch("v1", "ConfigMap", NS, resource_version=start, timeout_seconds=5)
    assert next(events).object["metadata"]["name"] == "a"
    with pytest.raises(Transient):
        next(events)


# --- error mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error", "reason"),
    [
        (400, Invalid, "BadRequest"),
        (401, Forbidden, "Unauthorized"),
        (403, Forbidden, "Forbidden"),
        (404, NotFound, "NotFound"),
        (409, Conflict, "Conflict"),
        (410, Gone, "Expired"),
        (422, Invalid, "Invalid"),
        (429, Transient, "TooManyRequests"),
        (500, Transient, "InternalError"),
        (502, Transient, "InternalError"),
        (503, Transient, "ServiceUnavailable"),
        (504, Transient, "Timeout"),
    ],
)
def test_error_status_maps_to_the_port_error(
    fake: FakeKube, kube: KubeCluster, status: int, error: type[ApiError], reason: str
) -> None:
    kube.create(configmap("cfg"))
    fake.requests.clear()
    fake.faults.add("GET", "/configmaps/cfg", status=status, message=f"injected {status}")
    with pytest.raises(error) as err:
        kube.get(cm_ref("cfg"))
    assert type(err.value) is error
    assert (err.value.status, err.value.reason, err.value.message) == (
        status,
        reason,
        f"injected {status}",
    )
    assert str(err.value) == f"{status} {reason}: injected {status}"
    # One request: no retry hidden below the port (the lifecycle owns retrying).
    assert fake.requests.count("GET", "/configmaps/cfg") == 1
    assert kube.get(cm_ref("cfg"))["metadata"]["name"] == "cfg"


@pytest.mark.parametrize("method", ["served", "create", "patch", "delete", "list"])
def test_every_verb_maps_server_errors(fake: FakeKube, kube: KubeCluster, method: str) -> None:
    kube.create(configmap("cfg"))
    fake.faults.add(None, "/configmaps", status=503)
    fake.faults.add(None, "/apis/example.com/v1", status=503)
    calls: dict[str, Callable[[], object]] = {
        # A discovery failure must not pass for "CRD not installed".
        "served": lambda: kube.served("example.com/v1", "Widget"),
        "create": lambda: kube.create(configmap("new")),
        "patch": lambda: kube.patch(cm_ref("cfg"), {"data": {"a": "b"}}),
        "delete": lambda: kube.delete(cm_ref("cfg")),
        "list": lambda: kube.list("v1", "ConfigMap", NS),
    }
    with pytest.raises(Transient, match="503 ServiceUnavailable"):
        calls[method]()


def test_hung_server_times_out_as_transient(fake: FakeKube, tmp_path: Path) -> None:
    kube = cluster_for(fake, tmp_path, request_timeout=0.1)
    fake.faults.add("GET", "/configmaps/cfg", hang=30.0)
    began = time.monotonic()
    with pytest.raises(Transient) as err:
        kube.get(cm_ref("cfg"))
    assert time.monotonic() - began < 15  # gave up long before the server would answer
    assert (err.value.status, err.value.reason) == (0, "Timeout")
    # Asked once, not again: a loaded server may read the request only after the client gave up.
    while not fake.requests.count("GET", "/configmaps/cfg"):
        assert time.monotonic() - began < 30
        time.sleep(0.01)
    assert fake.requests.count("GET", "/configmaps/cfg") == 1


def test_dropped_connection_is_transient_and_not_retried(fake: FakeKube, kube: KubeCluster) -> None:
    fake.faults.add("GET", "/configmaps/cfg", drop=True)
    with pytest.raises(Transient) as err:
        kube.get(cm_ref("cfg"))
    assert (err.value.status, err.value.reason) == (0, "ConnectionError")
    assert fake.requests.count("GET", "/configmaps/cfg") == 1


def test_refused_connection_is_transient(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FakeKube() as fake:
        path = fake.kubeconfig(tmp_path / "kc", token=TOKEN)
    path.write_text(path.read_text().replace(fake.url, f"http://127.0.0.1:{port}"))
    kube = KubeCluster(connect(str(path)).api_client)
    with pytest.raises(Transient) as err:
        kube.get(cm_ref("cfg"))
    assert err.value.status == 0 and "refused" in err.value.message.lower()


def test_bad_credentials_are_forbidden_and_never_quoted(fake: FakeKube, tmp_path: Path) -> None:
    path = fake.kubeconfig(tmp_path / "kc", token="wrong-token-do-not-print")
    fake.tokens.discard("wrong-token-do-not-print")
    kube = KubeCluster(connect(str(path)).api_client)
    with pytest.raises(Forbidden) as err:
        kube.get(cm_ref("cfg"))
    assert err.value.status == 401
    exc: BaseException | None = err.value
    while exc is not None:
        assert "wrong-token-do-not-print" not in f"{exc} {exc!r}"
        exc = exc.__cause__ or exc.__context__


# --- logs ----------------------------------------------------------------------------------------


def test_pod_log_lines_tail_and_container(fake: FakeKube, kube: KubeCluster) -> None:
    running_pod(fake, "p", ("main", "side"))
    fake.store.append_log(NS, "p", "main", "one\ntwo ✓\nthree\n")
    fake.store.append_log(NS, "p", "side", "sidecar\n")
    assert list(kube.pod_log(NS, "p", container="main")) == ["one", "two ✓", "three"]
    assert list(kube.pod_log(NS, "p", container="main", tail_lines=1)) == ["three"]
    assert list(kube.pod_log(NS, "p", container="side", since_seconds=60)) == ["sidecar"]
    query = fake.requests.matching(verb="log")[-1].query
    assert query == {"container": "side", "sinceSeconds": "60"}
    with pytest.raises(Invalid, match="container name must be specified"):
        list(kube.pod_log(NS, "p"))
    with pytest.raises(NotFound):
        list(kube.pod_log(NS, "missing"))


def test_pod_log_follow_streams_until_the_container_ends(fake: FakeKube, tmp_path: Path) -> None:
    # A short read timeout: a followed log must not be subject to it.
    kube = cluster_for(fake, tmp_path, request_timeout=0.05)
    running_pod(fake, "p")
    fake.store.append_log(NS, "p", "main", "step 1\n")
    lines = kube.pod_log(NS, "p", follow=True)
    assert next(lines) == "step 1"
    fake.store.append_log(NS, "p", "main", "step 2\npartial")
    assert next(lines) == "step 2"

    def finish() -> None:
        fake.store.append_log(NS, "p", "main", " line\n")
        fake.store.patch_status("v1", "Pod", NS, "p", {"phase": "Succeeded"})

    # The reader blocks on a quiet stream for longer than the read timeout.
    later = threading.Timer(0.15, finish)
    later.start()
    try:
        assert list(lines) == ["partial line"]
    finally:
        later.join()


def test_pod_log_dropped_while_following_is_transient(fake: FakeKube, kube: KubeCluster) -> None:
    running_pod(fake, "p")
    fake.store.append_log(NS, "p", "main", "a\nb\nc\n")
    fake.faults.add("GET", "/log", drop_after=1)
    lines = kube.pod_log(NS, "p", follow=True)
    assert next(lines) == "a"
    with pytest.raises(Transient):
        list(lines)


# --- exec ----------------------------------------------------------------------------------------


def make_tree(root: Path) -> None:
    (root / "pkg" / "sub" / "deep").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 1024)  # 256 KiB
    (root / "pkg" / "sub" / "deep" / "notes.txt").write_text("ünïcödé\n")
    (root / "empty").mkdir()


def tree(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = None if path.is_dir() and not path.is_symlink() else path.read_bytes()
    return out


def drain(chunks: Generator[bytes, None, Packed]) -> tuple[bytes, Packed]:
    """A stream's bytes and what its generator returned."""
    out = bytearray()
    while True:
        try:
            out += next(chunks)
        except StopIteration as end:
            return bytes(out), end.value


def test_exec_streams_stdin_and_stdout_byte_for_byte(
    fake: FakeKube, kube: KubeCluster, tmp_path: Path
) -> None:
    """What the pod's ``tar -x`` reads is the tar stream read from disk, whole; what its
    ``tar -c`` writes arrives as it was sent (each more than one frame of the protocol)."""
    running_pod(fake, "p")
    src, back = tmp_path / "src", tmp_path / "back"
    src.mkdir()
    make_tree(src)
    files = TarFiles()
    data, packed = drain(files.pack(str(src)))
    assert len(data) > 256 * 1024  # more than one stdin chunk
    fake.fake.on_exec = lambda call: ExecAnswer(stdout=data if "-c" in call.command else b"")
    untar = ["tar", "-x", "-f", "-", "-C", "/work"]
    put = kube.exec(NS, "p", "main", untar, files.pack(str(src)))  # streamed from disk
    assert (put.exit_code, put.stderr) == (0, b"")
    got = kube.exec(NS, "p", "main", ["tar", "-c", "-f", "-", "-C", "/work", "."])
    assert got.exit_code == 0 and got.stdout == data
    assert [(e.command, len(e.stdin)) for e in fake.fake.execs] == [
        (tuple(untar), len(data)),
        (("tar", "-c", "-f", "-", "-C", "/work", "."), 0),
    ]
    assert fake.fake.execs[0].stdin == data
    unpacked = files.unpack(got.stdout, str(back))
    assert (unpacked.files, unpacked.size) == (packed.files, packed.size)
    assert tree(back) == tree(src)
    query = fake.requests.matching(verb="exec")[0].query
    assert query["stdin"] == "true" and query["container"] == "main"


def test_exec_exit_codes_and_stderr(fake: FakeKube, kube: KubeCluster) -> None:
    def shell(call: Exec) -> ExecAnswer:
        if call.command[0] == "cat":
            return ExecAnswer(stdout=call.stdin)
        if call.command[0] == "true":
            return ExecAnswer()
        return ExecAnswer(stderr=f"sh: {call.command[0]}: not found\n".encode(), exit_code=127)

    running_pod(fake, "p")
    fake.fake.on_exec = shell
    assert kube.exec(NS, "p", "main", ["true"]).exit_code == 0
    missing = kube.exec(NS, "p", "main", ["no-such-tool", "--flag"])
    assert missing.exit_code == 127 and missing.stderr == b"sh: no-such-tool: not found\n"
    echo = kube.exec(NS, "p", "main", ["cat"], b"\x00\xffbinary stdin\n")
    assert (echo.stdout, echo.exit_code) == (b"\x00\xffbinary stdin\n", 0)


def test_exec_refused_at_the_handshake(fake: FakeKube, kube: KubeCluster) -> None:
    with pytest.raises(NotFound, match='pods "nope" not found'):
        kube.exec(NS, "nope", "main", ["true"])
    running_pod(fake, "done")
    fake.store.patch_status("v1", "Pod", NS, "done", {"phase": "Succeeded"})
    with pytest.raises(Invalid, match="completed pod"):
        kube.exec(NS, "done", "main", ["true"])
    fake.faults.add("GET", "/exec", status=503)
    running_pod(fake, "p")
    with pytest.raises(Transient, match="503"):
        kube.exec(NS, "p", "main", ["true"])
    fake.faults.add("GET", "/exec", drop=True)
    with pytest.raises(Transient) as err:
        kube.exec(NS, "p", "main", ["true"])
    assert err.value.status == 0


# --- local ports ---------------------------------------------------------------------------------


def test_system_clock() -> None:
    clock = SystemClock()
    before = clock.monotonic()
    clock.sleep(0.01)
    assert clock.monotonic() - before >= 0.01


def test_pack_members_in_order_with_inside_symlinks_only(tmp_path: Path) -> None:
    make_tree(tmp_path)
    os.symlink("sub/weights.bin", tmp_path / "pkg" / "link-inside")
    os.symlink("../outside", tmp_path / "link-up")
    os.symlink("/etc/passwd", tmp_path / "link-absolute")
    os.mkfifo(tmp_path / "fifo")
    data, packed = drain(TarFiles().pack(str(tmp_path)))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == [
        "empty", "pkg", "pkg/__init__.py", "pkg/link-inside", "pkg/sub", "pkg/sub/deep",
        "pkg/sub/deep/notes.txt", "pkg/sub/weights.bin", "train.py",
    ]  # fmt: skip
    assert {m.uid for m in members} == {0} and {m.uname for m in members} == {""}
    assert packed.files == 4
    assert packed.size == len("print('hi')\n") + 256 * 1024 + len("ünïcödé\n".encode())
    assert drain(TarFiles().pack(str(tmp_path)))[0] == data  # deterministic


def test_unpack_keeps_inside_symlinks_and_reports_files(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    make_tree(src)
    os.symlink("sub/weights.bin", src / "pkg" / "link")
    result = TarFiles().unpack(TarFiles().pack(str(src)), str(dest))
    assert (result.files, result.size) == (4, 12 + 256 * 1024 + len("ünïcödé\n".encode()))
    assert os.readlink(dest / "pkg" / "link") == "sub/weights.bin"
    assert tree(dest) == tree(src)


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def _file(name: str) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), b"data"


def _link(name: str, target: str, type_: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = type_, target
    return info, b""


def _device(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return info, b""


@pytest.mark.parametrize(
    ("bad", "member"),
    [
        (_file("/etc/evil"), "/etc/evil"),
        (_file("../evil"), "../evil"),
        (_file("ok/../../evil"), "ok/../../evil"),
        (_link("link", "/etc/passwd"), "link"),
        (_link("link", "../../outside"), "link"),
        (_link("hard", "../outside", tarfile.LNKTYPE), "hard"),
        (_device("null"), "null"),
    ],
)
def test_unpack_refuses_escapes_and_writes_nothing(
    tmp_path: Path, bad: tuple[tarfile.TarInfo, bytes], member: str
) -> None:
    dest = tmp_path / "dest"
    data = _tar(_file("first.txt"), bad)
    with pytest.raises(ValueError, match=f"refusing to unpack {member!r}"):
        TarFiles().unpack(data, str(dest))
    assert not dest.exists()
    assert not (tmp_path / "evil").exists() and not (tmp_path / "outside").exists()


def test_unpack_rejects_garbage(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a readable tar stream"):
        TarFiles().unpack(b"this is not a tar file" * 100, str(tmp_path / "dest"))


def _take(events: Iterator[WatchEvent], n: int) -> list[WatchEvent]:
    out = []
    for event in events:
        if event.type != "BOOKMARK":
            out.append(event)
        if len(out) == n:
            break
    return out

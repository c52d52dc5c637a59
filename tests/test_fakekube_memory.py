"""The port fake answers as the real adapter over HTTP does (both answer from one store,
``fakekube.port.Objects``): each ``side`` test runs the same calls and assertions against
``KubeCluster`` over HTTP to the fake API server and against ``PortFake``; then the port fake's
own clock, script, faults and record of calls."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakekube import FakeKube
from fakekube.access import NamespaceAccess
from fakekube.clock import FakeClock, FakeTimeLimit
from fakekube.port import Objects, PortFake
from test_adapter_kube import (
    GADGET_CRD,
    NS,
    WIDGET_CRD,
    cm_ref,
    configmap,
    drain,
    make_tree,
    running_pod,
    tree,
)

from kfcompile.lifecycle.ports import (
    Cluster,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Ref,
    Transient,
    WatchEvent,
)
from kfcompile_kube.cluster import KubeCluster
from kfcompile_kube.config import connect
from kfcompile_local import TarFiles

Obj = dict[str, Any]


@dataclass
class Side:
    """One way to reach a fake cluster: the port, the store behind it, and how to let its
    garbage collector do what it can (the port's passes at the clock's ticks)."""

    port: Cluster
    store: Objects
    settle: Callable[[], None]


@pytest.fixture(params=["http", "port"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    if request.param == "port":
        fake = PortFake()
        fake.objects.put(WIDGET_CRD)
        fake.objects.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        yield Side(fake, fake.objects, lambda: fake.clock.advance(1.0))
        return
    with FakeKube(crds=[WIDGET_CRD]) as kube:
        kube.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        conn = connect(str(kube.kubeconfig(tmp_path / "kubeconfig", namespace=NS)))
        port = KubeCluster(conn.api_client, request_timeout=5.0)
        yield Side(port, kube.store, kube.store.collect)


def test_the_port_and_the_http_server_answer_from_one_store(tmp_path: Path) -> None:
    """What one front writes the other reads, and a script on the port fake's clock moves what
    the HTTP server serves (``LocalCluster``'s jobs live so)."""
    fake = PortFake(FakeClock(step=0.5))
    with FakeKube(fake=fake) as kube:
        conn = connect(str(kube.kubeconfig(tmp_path / "kubeconfig", namespace="default")))
        http = KubeCluster(conn.api_client, request_timeout=5.0)
        made = fake.create(configmap("by-port", namespace="default"))
        assert http.get(cm_ref("by-port", "default"))["metadata"]["uid"] == made["metadata"]["uid"]
        http.create(configmap("by-http", namespace="default"))
        change = {"data": {"moved": "yes"}}
        fake.at(1.0, lambda: fake.objects.change("v1", "ConfigMap", "default", "by-http", change))
        fake.clock.advance(1.0)
        assert http.get(cm_ref("by-http", "default"))["data"] == {"moved": "yes"}
        assert fake.get(cm_ref("by-http", "default"))["data"] == {"moved": "yes"}


def widget(**spec: Any) -> Obj:
    meta = {"name": "w", "namespace": NS}
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta, "spec": spec}


def names(objs: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def until_deleted(events: Iterator[WatchEvent]) -> list[tuple[str, str]]:
    seen = []
    for event in events:
        if event.type != "BOOKMARK":
            seen.append((event.type, event.object["metadata"]["name"]))
        if event.type == "DELETED":
            break
    return seen


# --- the same answers ----------------------------------------------------------------------------


def test_objects_and_their_errors(side: Side) -> None:
    port = side.port
    assert port.served("v1", "Pod") and port.served("example.com/v1", "Widget")
    assert not port.served("example.org/v2", "Gadget")
    created = port.create(configmap("cfg", data={"a": "1", "b": "2"}))
    assert created["metadata"]["uid"] and port.get(cm_ref("cfg")) == created
    with pytest.raises(Conflict) as taken:
        port.create(configmap("cfg"))
    assert (taken.value.reason, taken.value.message) == (
        "AlreadyExists",
        'configmaps "cfg" already exists',
    )
    patched = port.patch(cm_ref("cfg"), {"data": {"b": None, "c": "3"}})
    assert patched["data"] == {"a": "1", "c": "3"}
    with pytest.raises(Invalid, match=r"spec\.size"):
        port.create(widget(size="big"))
    with pytest.raises(NotFound):
        port.get(Ref("example.org/v2", "Gadget", None, "g"))
    with pytest.raises(ValueError, match="needs a namespace"):
        port.create(configmap("cfg", namespace=None))
    port.delete(cm_ref("cfg"), propagation="Foreground")  # kept until its dependents are gone
    side.settle()
    with pytest.raises(NotFound, match='configmaps "cfg" not found'):
        port.get(cm_ref("cfg"))
    with pytest.raises(NotFound):
        port.delete(cm_ref("cfg"))
    side.store.create(GADGET_CRD)
    assert port.served("example.org/v2", "Gadget")


def test_rbac_limited_to_namespaces_refuses_in_the_real_servers_words(side: Side) -> None:
    port, store = side.port, side.store
    with pytest.raises(NotFound, match='namespaces "team-b" not found'):
        port.create(configmap("early", namespace="team-b"))
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    store.access = NamespaceAccess("alice", {NS})
    port.create(configmap("mine"))
    assert names(port.list("v1", "ConfigMap", NS).items) == ["mine"]
    assert port.served("example.com/v1", "Widget")  # discovery is for every user
    with pytest.raises(Forbidden, match='cannot watch resource "pods" in API group "" at the'):
        next(iter(port.watch("v1", "Pod", None, resource_version="0", timeout_seconds=1)))
    with pytest.raises(Forbidden) as elsewhere:
        port.get(cm_ref("theirs", "team-b"))
    assert elsewhere.value.message == (
        'configmaps "theirs" is forbidden: User "alice" cannot get resource "configmaps" in API '
        'group "" in the namespace "team-b"'
    )
    with pytest.raises(Forbidden, match='cannot create resource "configmaps"'):
        port.create(configmap("theirs", namespace="team-b"))


def owned_by(owner: Obj, obj: Obj) -> Obj:
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "blockOwnerDeletion": True,
           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}  # fmt: skip
    obj["metadata"]["ownerReferences"] = [ref]
    return obj


def test_foreground_deletion_waits_for_a_pod_on_a_node_without_kubelet(side: Side) -> None:
    port, store = side.port, side.store
    made = port.create(widget())
    for name, node in (("p1", "node-1"), ("p2", "node-2")):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
               "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}  # fmt: skip
        store.create(owned_by(made, pod))
        store.patch_status("v1", "Pod", NS, name, {"phase": "Running"})
    store.kubelets_down.add("node-1")
    w_ref = Ref("example.com/v1", "Widget", NS, "w")
    port.delete(w_ref, propagation="Foreground")
    side.settle()
    held = port.get(w_ref)["metadata"]
    assert held["deletionTimestamp"] and held["finalizers"] == ["foregroundDeletion"]
    terminating = port.get(Ref("v1", "Pod", NS, "p1"))["metadata"]
    assert terminating["deletionTimestamp"] and terminating["deletionGracePeriodSeconds"] == 30
    with pytest.raises(NotFound):  # its node's kubelet confirmed at once
        port.get(Ref("v1", "Pod", NS, "p2"))
    store.kubelets_down.discard("node-1")
    side.settle()
    for ref in (w_ref, Ref("v1", "Pod", NS, "p1")):
        with pytest.raises(NotFound):
            port.get(ref)


def test_without_a_garbage_collector_a_foreground_deletion_stays(side: Side) -> None:
    port, store = side.port, side.store
    store.create(owned_by(port.create(widget()), configmap("dep")))
    store.gc(running=False)
    w_ref = Ref("example.com/v1", "Widget", NS, "w")
    port.delete(w_ref, propagation="Foreground")
    side.settle()
    assert port.get(w_ref)["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert port.get(cm_ref("dep"))
    store.gc(running=True)
    side.settle()
    for ref in (w_ref, cm_ref("dep")):
        with pytest.raises(NotFound):
            port.get(ref)


def test_a_foreground_deleted_object_stays_until_the_collector_runs(side: Side) -> None:
    """As on a real API server (issue 27, item 6): an object deleted in the foreground keeps
    its ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer until the garbage
    collector, which works apart from the requests, has run, however many requests come first
    (before, the test cluster collected around each request: a read right after the delete
    said 404); deleted in the background, one without finalizers is gone at once."""
    for i in range(20):
        side.port.create(configmap(f"c{i}"))
        side.port.delete(cm_ref(f"c{i}"), propagation="Foreground")
        held = side.port.get(cm_ref(f"c{i}"))["metadata"]
        assert held["deletionTimestamp"] and held["finalizers"] == ["foregroundDeletion"]
    side.settle()
    for i in range(20):
        with pytest.raises(NotFound):
            side.port.get(cm_ref(f"c{i}"))
    side.port.create(configmap("at-once"))
    side.port.delete(cm_ref("at-once"), propagation="Background")
    with pytest.raises(NotFound):
        side.port.get(cm_ref("at-once"))


def test_lists_page_select_and_expire(side: Side) -> None:
    port, store = side.port, side.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    for i in range(5):
        port.create(configmap(f"cm{i}", metadata={"labels": {"app": "x"}}))
    port.create(configmap("elsewhere", namespace="team-b", metadata={"labels": {"app": "x"}}))
    pages, token, seen = 0, None, []
    while True:
        page = port.list("v1", "ConfigMap", NS, label_selector="app=x", limit=2,
                         continue_token=token)  # fmt: skip
        pages, seen, token = pages + 1, seen + names(page.items), page.continue_token
        assert all((i["apiVersion"], i["kind"]) == ("v1", "ConfigMap") for i in page.items)
        if token is None:
            break
    assert (pages, seen) == (3, [f"cm{i}" for i in range(5)])
    by_name = port.list("v1", "ConfigMap", NS, field_selector="metadata.name=cm3")
    assert names(by_name.items) == ["cm3"]
    assert len(port.list("v1", "ConfigMap", None, label_selector="app=x").items) == 6
    with pytest.raises(Invalid):
        port.list("v1", "ConfigMap", NS, label_selector="app in x")
    first = port.list("v1", "ConfigMap", NS, limit=2)
    port.create(configmap("later"))
    store.compact()  # etcd compaction past the first page's version
    with pytest.raises(Gone):
        port.list("v1", "ConfigMap", NS, limit=2, continue_token=first.continue_token)


def test_a_foreground_delete_is_seen_terminating_even_with_no_dependents(side: Side) -> None:
    """The API server adds ``foregroundDeletion`` without knowing of dependents; the collector
    removes it: a watch sees the owner Terminating, then gone (registry/store.go,
    deletionFinalizersForGarbageCollection)."""
    port = side.port
    port.create(configmap("alone"))
    start = port.list("v1", "ConfigMap", NS).resource_version
    port.delete(cm_ref("alone"), propagation="Foreground")
    events = port.watch("v1", "ConfigMap", NS, resource_version=start, timeout_seconds=5)
    first = next(events)
    assert (first.type, first.object["metadata"].get("finalizers")) == (
        "MODIFIED",
        ["foregroundDeletion"],
    )
    side.settle()  # the collector runs
    assert [t for t, _ in until_deleted(events)][-1] == "DELETED"


def test_watches_from_a_version_and_their_end(side: Side) -> None:
    port, store = side.port, side.store
    start = port.list("v1", "ConfigMap", NS).resource_version
    port.create(configmap("a", metadata={"labels": {"x": "1"}}))
    port.create(configmap("b", metadata={"labels": {"x": "2"}}))
    port.patch(cm_ref("a"), {"data": {"v": "2"}})
    port.patch(cm_ref("a"), {"metadata": {"labels": {"x": "2"}}})  # leaves the selection
    events = port.watch("v1", "ConfigMap", NS, resource_version=start, label_selector="x=1",
                        timeout_seconds=5)  # fmt: skip
    assert until_deleted(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    quiet = list(port.watch("v1", "Pod", NS, resource_version=start, timeout_seconds=1))
    assert [e.type for e in quiet] == ["BOOKMARK"]  # the server closes it after its timeout
    store.compact()
    with pytest.raises(Gone, match="too old resource version"):
        list(port.watch("v1", "ConfigMap", NS, resource_version=start, timeout_seconds=5))


def test_pod_logs(side: Side) -> None:
    port, store = side.port, side.store
    running_pod(side, "p", ("main", "side"))
    store.append_log(NS, "p", "main", "old\n", at=store.clock.time() - 100)
    store.append_log(NS, "p", "main", "one\ntwo ✓\n")
    assert list(port.pod_log(NS, "p", container="main")) == ["old", "one", "two ✓"]
    assert list(port.pod_log(NS, "p", container="main", since_seconds=10)) == ["one", "two ✓"]
    stamped = list(port.pod_log(NS, "p", container="main", timestamps=True))
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \S.*", s) for s in stamped)
    with pytest.raises(Invalid, match="choose one of: \\[main side\\]"):
        list(port.pod_log(NS, "p"))
    store.patch_status("v1", "Pod", NS, "p", {"phase": "Succeeded"})
    followed = list(port.pod_log(NS, "p", container="main", follow=True))
    assert followed == ["old", "one", "two ✓"]  # a finished container's follow ends
    waiting = {"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
    store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": NS},
                  "spec": {"containers": [{"name": "main", "image": "x"}]}})  # fmt: skip
    store.patch_status("v1", "Pod", NS, "w", {"phase": "Pending", "containerStatuses": [waiting]})
    with pytest.raises(Invalid, match="is waiting to start: ImagePullBackOff"):
        list(port.pod_log(NS, "w"))


def test_exec_runs_the_fake_commands(side: Side, tmp_path: Path) -> None:
    port, store = side.port, side.store
    running_pod(side, "p")
    src, back = tmp_path / "src", tmp_path / "back"
    src.mkdir()
    make_tree(src)
    files = TarFiles()
    _, packed = drain(files.pack(str(src)))
    script = ["sh", "-c", "mkdir -p /work && tar -x -f - -C /work"]
    put = port.exec(NS, "p", "main", script, files.pack(str(src)))
    assert (put.exit_code, put.stderr) == (0, b"")
    got = port.exec(NS, "p", "main", ["tar", "-c", "-f", "-", "-C", "/work", "."])
    unpacked = files.unpack(got.stdout, str(back))
    assert (unpacked.files, unpacked.size) == (packed.files, packed.size)
    assert tree(back) == tree(src)
    assert port.exec(NS, "p", "main", ["sh", "-c", "false"]).exit_code == 1
    missing = port.exec(NS, "p", "main", ["no-such-tool"])
    assert missing.exit_code == 127 and b"not found" in missing.stderr
    echo = port.exec(NS, "p", "main", ["cat"], b"\x00\xffbinary\n")
    assert (echo.stdout, echo.exit_code) == (b"\x00\xffbinary\n", 0)
    store.patch_status("v1", "Pod", NS, "p", {"phase": "Succeeded"})
    with pytest.raises(Invalid, match="completed pod"):
        port.exec(NS, "p", "main", ["true"])
    with pytest.raises(NotFound, match='pods "nope" not found'):
        port.exec(NS, "nope", "main", ["true"])


# --- the small fake: its clock, its script, its faults --------------------------------------------


def small() -> PortFake:
    fake = PortFake(FakeClock(step=0.5, limit=60))
    fake.objects.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return fake


def pod(fake: PortFake, name: str, node: str | None = "node-1") -> None:
    """A pod running on ``node``; with none, one never scheduled."""
    spec: Obj = {"containers": [{"name": "main"}]} | ({"nodeName": node} if node else {})
    status = {"status": {"phase": "Running"}} if node else {}
    meta = {"name": name, "namespace": NS}
    fake.objects.put({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, **status})


def test_the_fake_clock_ticks_what_it_drives_as_it_is_slept() -> None:
    clock = FakeClock(step=0.5)
    ticks: list[float] = []
    clock.drive(lambda: ticks.append(clock.monotonic()))
    clock.sleep(1.2)
    assert (ticks, clock.monotonic(), clock.slept) == ([0.5, 1.0], 1.2, [1.2])
    clock.idle()  # to the next tick
    assert ticks == [0.5, 1.0, 1.5] and clock.time() == clock.start + 1.5
    with pytest.raises(FakeTimeLimit):
        FakeClock(limit=10).sleep(11)


def test_a_blocked_watch_or_follow_moves_the_clock_along_the_script() -> None:
    fake, ref = small(), Ref("v1", "Pod", NS, "p")
    pod(fake, "p")
    for second in (1, 2):
        fake.at(second, lambda s=second: fake.log(NS, "p", f"at {s}"))
    fake.at(3, lambda: fake.objects.change("v1", "Pod", NS, "p", {"status": {"phase": "Failed"}}))
    fake.log(NS, "p", "first")
    assert list(fake.pod_log(NS, "p", follow=True)) == ["first", "at 1", "at 2"]  # ends with it
    assert fake.clock.monotonic() == 3.0
    assert list(fake.pod_log(NS, "p", tail_lines=1, since_seconds=2)) == ["at 2"]
    [stamped] = fake.pod_log(NS, "p", tail_lines=1, timestamps=True)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z at 2", stamped)
    start = fake.get(ref)["metadata"]["resourceVersion"]
    fake.at(
        1, lambda: fake.objects.change("v1", "Pod", NS, "p", {"metadata": {"labels": {"a": "b"}}})
    )
    events = list(fake.watch("v1", "Pod", NS, resource_version=start, timeout_seconds=2))
    assert [e.type for e in events] == ["MODIFIED", "BOOKMARK"] and fake.clock.monotonic() == 5.0
    assert (
        events[-1].object["metadata"]["resourceVersion"]
        == events[0].object["metadata"]["resourceVersion"]
    )
    pod(fake, "u", node=None)
    assert list(fake.pod_log(NS, "u")) == []  # no node, no kubelet to ask (LogLocation)
    with pytest.raises(FakeTimeLimit):  # a follow of a container that never ends: an error
        pod(fake, "q")
        list(fake.pod_log(NS, "q", follow=True))


def test_its_faults_fire_in_order_and_are_recorded_in_the_one_request_log() -> None:
    fake = small()
    fake.faults.add("create", "ConfigMap", status=503)
    fake.faults.add("create", "ConfigMap", lost=True)
    with pytest.raises(Transient, match="503"):
        fake.create(configmap("a"))
    with pytest.raises(Transient, match="read timed out"):
        fake.create(configmap("a"))  # done, answer lost
    assert fake.get(cm_ref("a"))["metadata"]["name"] == "a"
    fake.faults.add("watch", drop_after=1)
    events = fake.watch("v1", "ConfigMap", NS, resource_version="0", timeout_seconds=5)
    assert next(events).type == "ADDED"
    with pytest.raises(Transient):
        next(events)
    pod(fake, "p")
    fake.faults.add("exec", "Pod/p", lost=True)
    with pytest.raises(Transient, match="read timed out"):  # the command ran, unheard
        fake.exec(NS, "p", "main", ["true"])
    assert fake.exec(NS, "p", "main", ["cat"], b"\x00\xff").stdout == b"\x00\xff"  # fakekube.shell
    fake.faults.add("pod_log", refused=True)
    with pytest.raises(Transient, match="refused"):
        next(fake.pod_log(NS, "p"))
    ops = [c.method for c in fake.calls]
    assert ops == ["create", "create", "get", "watch", "exec", "exec", "pod_log"]
    assert [c.fault is not None for c in fake.calls] == [True, True, False, True, True, False, True]
    assert fake.calls.count("create", "ConfigMap/a") == 2 and fake.faults.pending == []
    with pytest.raises(ValueError, match="the port's"):
        fake.faults.add("get", hang=1.0)

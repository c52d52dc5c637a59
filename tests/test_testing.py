"""The fakes held to the real systems. ``kfcompile.testing``'s job courses to what the real
Trainer v2.3.0 and JobSet v0.12.0 made (``../shared/observed/trainer-v2.3.0``), its Kueue to
what KUBEFLOW.md records of the real Kueue v0.19.2, what they write to the real CRDs; its store
to the API server's rules the lifecycle meets (the same answers through the port and, served
by ``fakekube.server``, through the real client over HTTP); its clock, script and faults."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schema_check
import yaml
from fakekube import FakeKube, RequestRecord
from fakekube.cluster import QUEUE, RELEASES, PortCluster, TwoClusters, install
from test_adapter_kube import GADGET_CRD, NS, WIDGET_CRD, cm_ref, configmap

from kfcompile import lifecycle, structure
from kfcompile.kinds import COMPLETION_INDEX
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
from kfcompile.output import crd as kfcrd
from kfcompile.testing import Calls, FakeClock, FakeCluster, FakeTimeLimit, Store, courses, kueue
from kfcompile_kube import KubeCluster, connect

Obj = dict[str, Any]
SHARED = schema_check.SHARED
RECORDED = sorted((SHARED / "observed/trainer-v2.3.0").glob("*.json")) if SHARED else []
KUBEFLOW = (SHARED / "KUBEFLOW.md").read_text() if SHARED else ""
UID = re.compile(r"uid|job-key")  # label values a recording cannot share with a fake


def facts() -> str:
    if not KUBEFLOW:
        pytest.skip("../shared/KUBEFLOW.md not found: the facts recorded of the real systems")
    return " ".join(KUBEFLOW.split())


def _shape(obj: Obj) -> tuple[Any, ...]:
    """What a fake and a recording share of an object: its kind, name (a pod's but its random
    letters), owners, label and annotation keys, label values but uids, rank, phase, node."""
    meta = obj["metadata"]
    said = {k: v for k, v in (meta.get("labels") or {}).items() if not UID.search(k)}
    owners = [(r["kind"], r["name"]) for r in meta.get("ownerReferences") or []]
    name = meta["name"][:-5] if obj["kind"] == "Pod" else meta["name"]
    notes = meta.get("annotations") or {}
    return (obj["kind"], name, owners, said, sorted(meta.get("labels") or {}), sorted(notes),
            notes.get(COMPLETION_INDEX), (obj.get("status") or {}).get("phase"),
            "nodeName" in (obj.get("spec") or {}))  # fmt: skip


def _said(status: Obj) -> list[tuple[str, ...]]:
    conditions = status.get("conditions") or []
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in conditions]


@pytest.mark.skipif(not RECORDED, reason="../shared/observed/trainer-v2.3.0 not found")
@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_course_makes_what_the_real_trainer_and_jobset_made(path: Path) -> None:
    recorded = json.loads(path.read_text())
    job = recorded["trainJob"]
    ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
    fake = FakeCluster()
    courses.install(fake)
    fake.store.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    fake.store.put({k: v for k, v in job.items() if k != "status"})
    if "deadline" in name:  # the Trainer deleted its JobSet when its deadline passed
        courses.start(fake, ns, name)
        courses.finish(fake, ns, name, reason="DeadlineExceeded")
        fake.clock.advance(1)
    else:
        for suspend in (True, False) if "susp" in name else ():  # suspended, then resumed
            changed = fake.store.change(job["apiVersion"], "TrainJob", ns, name,
                                        {"spec": {"suspend": suspend}})  # fmt: skip
            courses.suspends(fake)(changed)
        courses.pending(fake, ns, name, "NotScheduled")  # no scheduler where it was recorded
    versions = {"JobSet": courses.JOBSET, "Job": "batch/v1", "Pod": "v1"}
    for what, kind in [("jobSet", "JobSet"), ("jobs", "Job"), ("pods", "Pod")]:
        ours = sorted(map(_shape, fake.store.list(versions[kind], kind, ns)), key=repr)
        assert ours == sorted(map(_shape, recorded[what]), key=repr), what
    status = fake.store.items[(job["apiVersion"], "TrainJob", ns, name)]["status"]
    expected = job.get("status") or {}
    assert _said(status) == _said(expected)
    assert status.get("jobsStatus") == expected.get("jobsStatus")


def test_what_the_courses_write_fits_the_real_crds() -> None:
    """A TrainJob's status, pods and Workload as its course leaves them, against the CRDs."""
    with PortCluster(schema_check.require_shared()) as c:
        c.store.on_create.append(courses.queued(c.fake, admits=0.1, steps=2, reports=lambda: True))
        submit_demo(c.session())
        [workload] = c.store.list(kueue.V1BETA2, "Workload", "default")
        c.clock.advance(0.9)
        pods = c.store.list("v1", "Pod", "default")
        c.clock.advance(2)
        [job] = c.store.list("trainer.kubeflow.org/v1alpha1", "TrainJob", "default")
    assert {k for k in job["status"]} == {"conditions", "jobsStatus", "trainerStatus"}
    assert kfcrd.errors(job, schema_check.load_crd("trainjobs-v2.3.0.yaml")) == []
    assert kfcrd.errors(workload, schema_check.load_crd("kueue/workloads-v0.15.8.yaml")) == []
    assert pods and all(schema_check.core_errors(p) == [] for p in pods)


def submit_demo(session: lifecycle.Session) -> Ref:
    """A TrainJob ``demo`` for Trainer v2.3, queued in ``QUEUE``, submitted."""
    spec = {"name": "demo", "image": "python:3.11", "command": ["python"], "queue": QUEUE}
    job = lifecycle.submit(session, structure(spec), "trainjob/v2.3", namespace="default",
                           environ={})  # fmt: skip
    return job.ref


def test_events_are_written_as_the_api_server_records_them() -> None:
    """events.k8s.io/v1's fields (KUBEFLOW.md: a real kube-apiserver 1.32)."""
    fake = FakeCluster()
    courses.install(fake)
    fake.store.put({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                    "metadata": {"name": "x", "namespace": "default"}, "spec": {}})  # fmt: skip
    courses.pending(fake, "default", "x", "Unschedulable")
    [event] = fake.store.list("events.k8s.io/v1", "Event")
    assert {"eventTime", "note", "regarding"} <= set(event) and "message" not in event


def test_kueues_words_are_the_recorded_ones() -> None:
    said = facts()
    entry = "{manager: kueue.x-k8s.io/manager, trainingRuntimeSpec: {template: {spec: {}}}}"
    assert entry in said
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "x", "labels": {kueue.QUEUE_LABEL: "q"}}, "spec": {}}  # fmt: skip
    store = Store(FakeClock())
    kueue.install(store, ["v1beta2"], queue=None)
    store.admission[0](job)
    assert job["spec"] == {"suspend": True, "runtimePatches": [yaml.safe_load(entry)]}
    for fact in (kueue.RESOURCE_IN_USE, kueue.JOB_UID_LABEL, kueue.MULTIKUEUE, kueue.PREBUILT,
                 kueue.ORIGIN_LABEL, "`QuotaReserved=False` reason `Pending`", "generation 1 → 3",
                 "The workload was admitted on \"<cluster>\"", "(the configured origin, default "
                 "`multikueue`)", "`status.nominatedClusterNames`, no `clusterName`"):  # fmt: skip
        assert fact in said, fact
    uid = {"name": "x", "uid": "u", "namespace": "d"}
    assert re.fullmatch(r"trainjob-x-[0-9a-f]{5}", kueue.workload_name({**job, "metadata": uid}))


def test_kueue_holds_admits_and_evicts_a_job_as_recorded() -> None:
    with PortCluster(schema_check.require_shared()) as c:
        c.store.on_create.append(courses.queued(c.fake, admits=1e9, ends=None))
        c.store.on_patch.append(courses.suspends(c.fake))
        ref = submit_demo(c.session())
        job = c.store.get(ref.api_version, ref.kind, "default", "demo")
        assert job is not None and job["spec"]["suspend"] is True
        [workload] = c.store.list(kueue.V1BETA2, "Workload", "default")
        assert workload["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        said = [(c["type"], c["status"], c["reason"]) for c in workload["status"]["conditions"]]
        assert said == [("QuotaReserved", "False", "Pending")]
        admitted = kueue.admit(c.store, job)
        assert admitted["spec"]["suspend"] is False and admitted["metadata"]["generation"] == 3
        courses.start(c.fake, "default", "demo")
        kueue.evict(c.store, admitted)
        assert courses.pods(c.fake, "default", "demo") == []  # the Trainer stopped it
        state = lifecycle.status(c.session(), ref).state
        assert (state.state.value, state.reason) == ("SUSPENDED", "Evicted")
        lifecycle.cancel(c.session(), ref, wait_gone=True, timeout=30)
        c.settle()  # the collector, then Kueue, let the Workload go
        assert c.store.list(kueue.V1BETA2, "Workload", "default") == []


def test_multikueue_nominates_then_mirrors() -> None:
    with TwoClusters(schema_check.require_shared(), scenario="hang") as two:
        ref = submit_demo(two.manager.session())
        [workload] = two.manager.store.list(kueue.V1BETA2, "Workload", "default")
        assert workload["status"]["nominatedClusterNames"] == [kueue.WORKER]
        assert "clusterName" not in workload["status"]
        two.settle(1)
        [workload] = two.manager.store.list(kueue.V1BETA2, "Workload", "default")
        mirror = two.worker.store.get(ref.api_version, ref.kind, "default", "demo")
    assert workload["status"]["clusterName"] == kueue.WORKER and mirror is not None
    assert mirror["metadata"]["annotations"][kueue.PREBUILT] == workload["metadata"]["name"]
    assert mirror["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"


# --- the API server's rules, through the port and over HTTP ----------------------------------


@dataclass
class Side:
    """A way to a fake cluster: the port (the fake itself, or the real adapter over HTTP to it),
    its store, and how to let its collector run."""

    port: Cluster
    store: Store
    settle: Callable[[], None]
    requests: Calls[RequestRecord] | None = None  # over HTTP: what the server was asked


@pytest.fixture(params=["port", "http"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Side]:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    if request.param == "port":
        fake = FakeCluster(FakeClock(step=0.5, limit=60))
        fake.store.create(WIDGET_CRD)
        fake.store.create(namespace)
        yield Side(fake, fake.store, lambda: fake.clock.advance(1.0))
        return
    with FakeKube() as kube:
        kube.store.create(WIDGET_CRD)
        kube.store.create(namespace)
        conn = connect(str(kube.kubeconfig(tmp_path / "kubeconfig", namespace=NS)))
        yield Side(KubeCluster(conn.api_client, request_timeout=5.0), kube.store,
                   kube.store.collect, kube.requests)  # fmt: skip


def pod(name: str, namespace: str, **spec: Any) -> Obj:
    """A pod of one container ``main`` (``spec``: more of its spec)."""
    spec = {"containers": [{"name": "main", "image": "x"}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": spec}  # fmt: skip


def names(items: list[Obj]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


def test_objects_and_their_errors(side: Side) -> None:
    port, store = side.port, side.store
    assert port.served("v1", "Pod") and not port.served("example.org/v2", "Gadget")
    created = port.create(configmap("cfg", data={"a": "1", "b": "2"}))
    assert created["metadata"]["uid"] and port.get(cm_ref("cfg")) == created
    with pytest.raises(Conflict, match='configmaps "cfg" already exists'):
        port.create(configmap("cfg"))
    with pytest.raises(Invalid, match="name or generateName is required"):
        port.create(configmap(""))
    patched = port.patch(cm_ref("cfg"), {"data": {"b": None, "c": "3"}})
    assert patched["data"] == {"a": "1", "c": "3"}
    with pytest.raises(NotFound, match='namespaces "team-b" not found'):
        port.create(configmap("early", namespace="team-b"))
    with pytest.raises(ValueError, match="needs a namespace"):
        port.create(configmap("cfg", namespace=None))
    store.gc(running=False)  # (over HTTP it runs in real time)
    port.delete(cm_ref("cfg"), propagation="Foreground")  # held until the collector runs
    assert "`deletionTimestamp` and the `foregroundDeletion` finalizer" in facts()
    held = port.get(cm_ref("cfg"))["metadata"]
    assert held["finalizers"] == ["foregroundDeletion"] and held["deletionTimestamp"]
    store.gc(running=True)
    side.settle()
    with pytest.raises(NotFound, match='configmaps "cfg" not found'):
        port.get(cm_ref("cfg"))
    store.create(GADGET_CRD)
    assert port.served("example.org/v2", "Gadget")
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    store.namespaces_allowed = {NS}  # alice's Role
    port.create(configmap("mine"))
    with pytest.raises(Forbidden) as elsewhere:
        port.get(cm_ref("theirs", "team-b"))
    assert elsewhere.value.message == (
        'configmaps "theirs" is forbidden: User "alice" cannot get resource "configmaps" in API '
        'group "" in the namespace "team-b"')  # fmt: skip


def test_deletions_wait_for_kubelets_and_the_garbage_collector(side: Side) -> None:
    port, store = side.port, side.store
    owner = port.create({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "w", "namespace": NS}})  # fmt: skip
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
           "uid": owner["metadata"]["uid"]}  # fmt: skip
    for name, node in (("p1", "node-1"), ("p2", "node-2")):
        store.create(pod(name, NS, nodeName=node) | {"metadata": {
            "name": name, "namespace": NS, "ownerReferences": [ref]}})  # fmt: skip
        store.patch_status("v1", "Pod", NS, name, {"phase": "Running"})
    store.kubelets_down.add("node-1")
    store.gc(running=False)
    widget = Ref("example.com/v1", "Widget", NS, "w")
    port.delete(widget, propagation="Foreground")
    side.settle()
    assert port.get(widget)["metadata"]["finalizers"] == ["foregroundDeletion"]  # no collector
    store.gc(running=True)
    side.settle()
    assert port.get(widget)["metadata"]["deletionTimestamp"]  # p1: Terminating on node-1
    assert port.get(Ref("v1", "Pod", NS, "p1"))["metadata"]["deletionGracePeriodSeconds"] == 30
    with pytest.raises(NotFound):  # its node's kubelet confirmed at once
        port.get(Ref("v1", "Pod", NS, "p2"))
    store.kubelets_down.clear()
    side.settle()
    for gone in (widget, Ref("v1", "Pod", NS, "p1")):
        with pytest.raises(NotFound):
            port.get(gone)


def test_lists_page_and_select(side: Side) -> None:
    port = side.port
    for i in range(5):
        port.create(configmap(f"cm{i}", metadata={"labels": {"app": "x"}}))
    port.create(configmap("other", metadata={"labels": {"app": "y", "tier": "z"}}))
    pages, token, seen = 0, None, []
    while True:
        page = port.list("v1", "ConfigMap", NS, label_selector="app=x", limit=2,
                         continue_token=token)  # fmt: skip
        pages, seen, token = pages + 1, seen + names(page.items), page.continue_token
        if token is None:
            break
    assert (pages, seen) == (3, [f"cm{i}" for i in range(5)])
    assert port.list("v1", "ConfigMap", NS, limit=2).remaining == 4  # said without selectors
    for labels, found in (("app in (y, q),tier=z", ["other"]), ("app in (q)", []),
                          ("app!=x", ["other"])):  # fmt: skip
        assert names(port.list("v1", "ConfigMap", NS, label_selector=labels).items) == found
    assert names(port.list("v1", "ConfigMap", NS, field_selector="metadata.name=cm3").items) == [
        "cm3"]  # fmt: skip
    with pytest.raises(Invalid):  # a selector kfcompile never sends
        port.list("v1", "ConfigMap", NS, label_selector="app notin (x)")


def test_watches_from_a_version_and_their_end(side: Side) -> None:
    port, store = side.port, side.store
    start = port.list("v1", "ConfigMap", NS).resource_version
    port.create(configmap("a", metadata={"labels": {"x": "1"}}))
    port.patch(cm_ref("a"), {"data": {"v": "2"}})
    port.patch(cm_ref("a"), {"metadata": {"labels": {"x": "2"}}})  # leaves the selection
    seen = []
    for event in port.watch("v1", "ConfigMap", NS, resource_version=start, label_selector="x=1",
                            timeout_seconds=5):  # fmt: skip
        seen.append((event.type, event.object["metadata"]["name"]))
        if event.type == "DELETED":
            break
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    store.compact()
    with pytest.raises(Gone, match="too old resource version"):
        list(port.watch("v1", "ConfigMap", NS, resource_version=start, timeout_seconds=5))


def test_pod_logs(side: Side) -> None:
    port, store = side.port, side.store
    containers = [{"name": "main", "image": "x"}, {"name": "side", "image": "x"}]
    store.create(pod("p", NS, nodeName="n", containers=containers))
    running = {"state": {"running": {}}, "image": "x", "imageID": "", "ready": True,
               "restartCount": 0}  # fmt: skip
    store.patch_status("v1", "Pod", NS, "p", {"phase": "Running", "containerStatuses": [
        {"name": "main", **running}, {"name": "side", **running}]})  # fmt: skip
    store.append_log(NS, "p", "main", "old\n", at=store.clock.time() - 100)
    store.append_log(NS, "p", "main", "one\ntwo ✓\n")
    assert list(port.pod_log(NS, "p", container="main")) == ["old", "one", "two ✓"]
    assert list(port.pod_log(NS, "p", container="main", since_seconds=10)) == ["one", "two ✓"]
    assert list(port.pod_log(NS, "p", container="main", tail_lines=1)) == ["two ✓"]
    stamped = list(port.pod_log(NS, "p", container="main", timestamps=True))
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z \S.*", s) for s in stamped)
    with pytest.raises(Invalid, match=r"choose one of: \[main side\]"):
        list(port.pod_log(NS, "p"))
    store.kubelets_down.add("n")
    with pytest.raises(Transient, match="dial tcp n:10250: connect: connection refused"):
        list(port.pod_log(NS, "p", container="main"))
    store.kubelets_down.clear()
    store.patch_status("v1", "Pod", NS, "p", {"phase": "Succeeded"})
    assert list(port.pod_log(NS, "p", container="main", follow=True))[-1] == "two ✓"  # it ends
    store.create(pod("u", NS))
    assert list(port.pod_log(NS, "u", follow=True)) == []  # not scheduled: 204, no kubelet
    said = facts()  # as a real kube-apiserver 1.32 answered
    assert "dial tcp <node>:10250: connect: connection refused" in said
    assert "answered **204 No Content** (empty body), `follow=true` included" in said
    if side.requests is not None:
        codes = [r.status for r in side.requests.matching(verb="log")]
        assert 500 in codes and codes[-1] == 204


# --- the port's own: its clock, its script, its faults ------------------------------------------


def test_the_clock_runs_the_script_as_the_code_under_test_waits() -> None:
    fake = FakeCluster(FakeClock(step=0.5, limit=60))
    ticks: list[float] = []
    fake.clock.on_tick(lambda: ticks.append(fake.clock.monotonic()))
    fake.clock.sleep(1.2)
    assert (ticks, fake.clock.monotonic(), fake.clock.slept) == ([0.5, 1.0], 1.2, [1.2])
    fake.store.create(pod("p", "default", nodeName="n"))
    fake.store.patch_status("v1", "Pod", "default", "p", {"phase": "Running"})
    for second in (1, 2):
        fake.at(second, lambda s=second: fake.log("default", "p", f"at {s}"))
    fake.at(3, lambda: fake.store.change("v1", "Pod", "default", "p",
                                         {"status": {"phase": "Failed"}}))  # fmt: skip
    assert list(fake.pod_log("default", "p", follow=True)) == ["at 1", "at 2"]
    assert fake.clock.monotonic() == 4.5  # the follow waited on the clock to its end (1.2 + 3)
    start = str(fake.store.resource_version)
    events = list(fake.watch("v1", "Pod", "default", resource_version=start, timeout_seconds=2))
    assert [e.type for e in events] == ["BOOKMARK"] and fake.clock.monotonic() == 6.5
    with pytest.raises(FakeTimeLimit):
        FakeClock(limit=10).sleep(11)


def test_faults_fire_in_order_and_are_recorded() -> None:
    fake = FakeCluster()
    fake.faults.add("create", "ConfigMap", status=503)
    fake.faults.add("create", "ConfigMap", lost=True)
    with pytest.raises(Transient, match="503 ServiceUnavailable"):
        fake.create(configmap("a", namespace="default"))
    with pytest.raises(Transient, match="read timed out"):
        fake.create(configmap("a", namespace="default"))  # done, its answer lost
    assert fake.get(cm_ref("a", "default"))["metadata"]["name"] == "a"
    fake.faults.add("watch", drop_after=1)
    events = fake.watch("v1", "ConfigMap", "default", resource_version="0", timeout_seconds=5)
    assert isinstance(next(events), WatchEvent)
    with pytest.raises(Transient, match="stream cut"):
        next(events)
    fake.faults.add("list", refused=True)
    with pytest.raises(Transient, match="refused"):
        fake.list("v1", "ConfigMap", "default")
    faulted = [(c.method, c.fault is not None) for c in fake.calls]
    assert faulted == [("create", True), ("create", True), ("get", False), ("watch", True),
                       ("list", True)]  # fmt: skip
    assert fake.calls.count("create", "ConfigMap/a") == 2 and fake.faults.pending == []


def test_each_release_serves_its_crd_and_says_its_version() -> None:
    shared = schema_check.require_shared()
    for release, version in (("trainjob/v2.0", None), ("trainjob/v2.1", None),
                             ("trainjob/v2.2", "v2.2.1"), ("trainjob/v2.3", "v2.3.0")):  # fmt: skip
        store = Store(FakeClock())
        install(store, shared, RELEASES[release])
        found = store.get("v1", "ConfigMap", "kubeflow-system", "kubeflow-trainer-public")
        assert (found or {}).get("data") == ({"kubeflow_trainer_version": version} if version
                                             else None), release  # fmt: skip
        assert store.served("trainer.kubeflow.org/v1alpha1", "TrainJob") is not None


def test_what_kfcompile_creates_is_held_to_the_real_crds_in_the_servers_words() -> None:
    """KUBEFLOW.md: strict decoding names the kind and version; the CRD's defaults are filled
    in; a dry run stores nothing; generateName gets five characters."""
    store = Store(FakeClock())
    install(store, schema_check.require_shared(), RELEASES["trainjob/v2.1"])
    patch = {"manager": "example.com/x", "trainingRuntimeSpec": {}}
    spec = {"runtimeRef": {"name": "torch-distributed"}, "runtimePatches": [patch]}
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "spec": spec,
           "metadata": {"name": "demo", "namespace": "default"}}  # fmt: skip
    with pytest.raises(Invalid) as refused:
        store.create(job)
    words = ('TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding '
             'error: unknown field "spec.runtimePatches"')  # fmt: skip
    assert refused.value.message == words and words in facts()
    del job["spec"]["runtimePatches"]
    version = store.resource_version
    answer = store.create(job, dry_run=True)
    assert answer["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"  # the CRD's default
    assert store.resource_version == version and "resourceVersion" not in answer["metadata"]
    made = store.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"generateName": "c-", "namespace": "default"}})  # fmt: skip
    assert re.fullmatch(r"c-[a-z0-9]{5}", made["metadata"]["name"])


def test_kfcompile_testing_needs_no_test_framework() -> None:
    code = "import sys, kfcompile.testing; assert 'pytest' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0

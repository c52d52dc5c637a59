"""``status`` shows the events of the job it shows, not those of a job deleted before it under
the same name: events are listed by name, and kept by their object's uid (``regarding.uid`` /
``involvedObject.uid``): the job's, each pod's, and the children's as the pods' labels say
them; a child whose uid nothing says yet, by their time (since the job was created)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import schema_check
import yaml
from fakekube.cluster import NAMESPACE, PortCluster

from kfcompile import lifecycle, structure
from kfcompile.cli import main
from kfcompile.kinds import KINDS
from kfcompile.lifecycle.ports import Ref
from kfcompile.testing import Store, courses
from kfcompile.testing.store import rfc3339

_names = itertools.count()


@pytest.fixture
def local() -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as cluster:
        yield cluster


def submit(local: PortCluster, kind: str = "TrainJob") -> Ref:
    target = "trainjob/v2.3" if kind == "TrainJob" else "pytorchjob/v1"
    spec = structure({"name": "demo", "image": "python:3.11-slim", "command": ["python"],
                      "num_nodes": 2})  # fmt: skip
    return lifecycle.submit(local.session(), spec, target, namespace=NAMESPACE, environ={}).ref


def uid_of(store: Store, kind: str, name: str) -> str:
    api_version = KINDS[kind].api_version if kind in KINDS else "v1"
    found = store.get(api_version, kind, NAMESPACE, name)
    assert found is not None
    return str(found["metadata"]["uid"])


def event(store: Store, kind: str, name: str, uid: str, reason: str, note: str) -> None:
    """An event (events.k8s.io/v1) about the object ``kind/name`` of that uid, now, as a
    controller records it (each event its own name: ``<object>.<random>``)."""
    api_version = KINDS[kind].api_version if kind in KINDS else "v1"
    regarding = {"apiVersion": api_version, "kind": kind, "namespace": NAMESPACE, "name": name,
                 "uid": uid}  # fmt: skip
    store.put({"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": f"{name}.{next(_names):x}", "namespace": NAMESPACE},
               "regarding": regarding, "reason": reason, "note": note, "type": "Normal",
               "eventTime": rfc3339(store.clock.time(), nano=True),
               "reportingController": "kueue-admission", "reportingInstance": "kueue",
               "action": reason})  # fmt: skip


def said(observed: lifecycle.Observation) -> list[str]:
    return [f"{e.reason} {e.about}: {e.message}" for e in observed.events]


def again(local: PortCluster, ref: Ref, kind: str = "TrainJob") -> Ref:
    """``cancel --wait``, then the same job submitted again."""
    local.clock.advance(2)
    lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=30)
    local.clock.advance(2)
    return submit(local, kind)


def test_a_job_submitted_again_shows_none_of_the_deleted_ones_events(local: PortCluster) -> None:
    """As Kueue records them about a queued job (jobframework's events on the job itself)."""
    ref = submit(local)
    old = uid_of(local.store, "TrainJob", "demo")
    event(local.store, "TrainJob", "demo", old, "CreatedWorkload",
          "Created Workload: default/trainjob-demo-7c9e1")  # fmt: skip
    event(local.store, "TrainJob", "demo", old, "Started", "Admitted by clusterQueue cq")
    event(local.store, "Job", "demo-node-0", "job-uid-1", "SuccessfulCreate",
          "Created pod: demo-node-0-0-x7k2p")  # fmt: skip
    assert len(lifecycle.status(local.session(), ref).events) == 3
    ref = again(local, ref)
    assert said(lifecycle.status(local.session(), ref)) == []  # not dispatched yet: nothing
    new = uid_of(local.store, "TrainJob", "demo")
    event(local.store, "TrainJob", "demo", new, "CreatedWorkload",
          "Created Workload: default/trainjob-demo-0d4f2")  # fmt: skip
    assert said(lifecycle.status(local.session(), ref)) == [
        "CreatedWorkload trainjob/demo: Created Workload: default/trainjob-demo-0d4f2"
    ]


def test_a_pod_of_the_same_name_shows_its_own_events(local: PortCluster) -> None:
    """A PyTorchJob's pods are named after it (``demo-master-0``): the new one's events, not
    the deleted one's."""
    local.fake.at(0.2, lambda: courses.pending(local.fake, NAMESPACE, "demo", "ContainerCreating",
                                            "PyTorchJob"))  # fmt: skip
    ref = submit(local, "PyTorchJob")
    local.clock.advance(1)
    old = uid_of(local.store, "Pod", "demo-master-0")
    event(local.store, "Pod", "demo-master-0", old, "Failed", "Failed to pull image: not found")
    ref = again(local, ref, "PyTorchJob")
    local.fake.at(0.2, lambda: courses.pending(local.fake, NAMESPACE, "demo", "ContainerCreating",
                                            "PyTorchJob"))  # fmt: skip
    local.clock.advance(1)
    new = uid_of(local.store, "Pod", "demo-master-0")
    assert new != old
    event(local.store, "Pod", "demo-master-0", new, "Pulling", "Pulling image python:3.11-slim")
    assert said(lifecycle.status(local.session(), ref)) == [
        "Pulling pod/demo-master-0: Pulling image python:3.11-slim"
    ]


def test_the_childrens_events_go_by_the_uids_their_pods_carry(local: PortCluster) -> None:
    """The pods' labels name their Job's and JobSet's uids (as the real ones do: observed):
    an event about an earlier Job of that name, however recent, is not this one's."""
    local.fake.at(0.2, lambda: courses.pending(local.fake, NAMESPACE, "demo", "ContainerCreating"))
    ref = submit(local)
    local.clock.advance(1)
    owners = {"batch.kubernetes.io/job-name": "demo-node-0",
              "batch.kubernetes.io/controller-uid": "job-uid-2",
              "jobset.sigs.k8s.io/jobset-uid": "jobset-uid-2"}  # fmt: skip
    for pod in courses.pods(local.fake, NAMESPACE, "demo"):
        labels: dict[str, Any] = {**pod["metadata"]["labels"], **owners}
        local.store.change("v1", "Pod", NAMESPACE, pod["metadata"]["name"],
                           {"metadata": {"labels": labels}})  # fmt: skip
    event(local.store, "Job", "demo-node-0", "job-uid-1", "SuccessfulDelete", "Deleted pod: a")
    event(local.store, "Job", "demo-node-0", "job-uid-2", "SuccessfulCreate", "Created pod: b")
    event(local.store, "JobSet", "demo", "jobset-uid-2", "Created", "Created job demo-node-0")
    assert said(lifecycle.status(local.session(), ref)) == [
        "SuccessfulCreate job/demo-node-0: Created pod: b",
        "Created jobset/demo: Created job demo-node-0",
    ]


def test_status_of_a_job_submitted_again_through_the_cli(
    local: PortCluster, tmp_path: Any, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"name": "demo", "image": "python:3.11-slim",
                                    "command": ["true"]}))  # fmt: skip
    local.wire(monkeypatch)
    assert main(["submit", str(spec)]) == 0
    old = uid_of(local.store, "TrainJob", "demo")
    event(local.store, "TrainJob", "demo", old, "Started", "Admitted by clusterQueue cq")
    assert main(["cancel", "demo", "--wait"]) == 0
    local.clock.advance(1.5)  # a second later: another second on the clock
    assert main(["submit", str(spec)]) == 0
    capsys.readouterr()
    assert main(["status", "demo"]) == 0
    out = capsys.readouterr().out
    assert "Admitted by clusterQueue" not in out and "events:" not in out

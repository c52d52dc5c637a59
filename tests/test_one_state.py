"""One state everywhere: what ``status`` (the job and its pods), ``list`` / ``list -A`` and
``watch_jobs`` (the jobs alone) say of a job agrees, held to what the real Trainer v2.3.0 and
JobSet v0.12.0 controllers wrote (``../shared/observed/trainer-v2.3.0``: each TrainJob with its
pods, which never started there: no scheduler, no kubelet)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from contextlib import closing
from itertools import islice
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import schema_check
from fakekube.cluster import LocalCluster, PortCluster

from kfcompile import lifecycle
from kfcompile.cli import main
from kfcompile.kinds import TRAINJOB
from kfcompile.lifecycle import MANAGED_BY_LABEL, MANAGER
from kfcompile.lifecycle.ports import Ref
from kfcompile.status import JobState, State
from kfcompile.testing import Store

SERVICE = Path(__file__).resolve().parents[1] / "examples" / "service.py"


def recordings() -> list[Path]:
    """The recorded jobs (none when ../shared is absent: the tests then skip, saying why)."""
    if schema_check.SHARED is None:
        return []
    return sorted((schema_check.SHARED / "observed" / "trainer-v2.3.0").glob("*.json"))


RECORDED = recordings()
skip_without_recordings = pytest.mark.skipif(
    not RECORDED,
    reason="../shared/observed/trainer-v2.3.0 not found: the objects the real Trainer made "
    "(../shared/README, or set KFCOMPILE_SHARED)",
)


def load(path: Path, store: Store) -> Ref:
    """The recorded TrainJob and its pods, stored as the controllers left them; the job with
    the label kfcompile's submit gave it (the recording keeps no bookkeeping), the pods
    without their owners (the recording has no uids: the collector would take them)."""
    recorded: dict[str, Any] = json.loads(path.read_text())
    job = recorded["trainJob"]
    labels = {**(job["metadata"].get("labels") or {}), MANAGED_BY_LABEL: MANAGER}
    namespace = job["metadata"]["namespace"]
    if store.get("v1", "Namespace", None, namespace) is None:
        store.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    store.put({**job, "metadata": {**job["metadata"], "labels": labels}})
    for pod in recorded["pods"]:
        meta = {k: v for k, v in pod["metadata"].items() if k != "ownerReferences"}
        store.put({**pod, "metadata": meta})
    return Ref(TRAINJOB.api_version, TRAINJOB.name, namespace, job["metadata"]["name"])


def said(state: JobState) -> tuple[State, str]:
    return state.state, state.reason


@pytest.fixture
def cluster() -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as local:
        yield local


@skip_without_recordings
@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_status_list_and_watch_jobs_say_the_same_state(cluster: PortCluster, path: Path) -> None:
    ref = load(path, cluster.store)
    session = cluster.session()
    status = lifecycle.status(session, ref).state
    [listed] = [j.state for j in lifecycle.list_jobs(session, None) if j.ref == ref]
    with closing(lifecycle.watch_jobs(session, None)) as events:
        [watched] = [e.state for e in islice(events, 1) if e.ref == ref]
    assert said(listed) == said(watched) == said(status), path.name
    if status.finished:  # the deadline one: its JobSet and pods deleted by the Trainer
        assert said(status) == (State.FAILED, "DeadlineExceeded")
    else:  # pods that never started: no surface may call that running
        assert said(status) == (State.PENDING, "PodsPending")


@skip_without_recordings
def test_the_commands_say_the_same_state(capsys: pytest.CaptureFixture[str]) -> None:
    """``kfcompile status`` of each, and the STATE column of ``kfcompile list -A``, through the
    real client and the local API server."""
    with LocalCluster(schema_check.require_shared(), scenario=None) as local:
        refs = [load(path, local.store) for path in RECORDED]
        config = ["--kubeconfig", str(local.kubeconfig)]
        assert main(["list", "-A", *config]) == 0
        head, *rows = capsys.readouterr().out.splitlines()
        column = slice(head.index("STATE"), head.index("PROGRESS"))
        listed = {tuple(r.split()[:2]): r[column].strip() for r in rows}
        for ref in refs:
            assert main(["status", ref.name, "-n", str(ref.namespace), *config]) == 0
            first = capsys.readouterr().out.splitlines()[0]
            said = first.removeprefix(f"{ref}: ")
            # the row says the state, and for a job that waits, why (as status does)
            assert said.startswith(f"{listed[ref.namespace, ref.name]} "), first
            assert said.split()[0] in ("PENDING", "FAILED"), first


# --- Trainer v2.0: the pods alone tell whether the job runs --------------------------------------


def as_trainer_v20(store: Store, ref: Ref, pods: str) -> None:
    """The recorded job as Trainer v2.0 leaves it: no status at all (v2.0 never writes
    ``jobsStatus``, and no condition to a job that neither waits in Kueue nor ended), with its
    pods ``running`` (as a kubelet starts them), ``pending`` (as recorded: no node) or ``none``
    (not made yet)."""
    job = store.get(ref.api_version, ref.kind, ref.namespace, ref.name)
    assert job is not None
    store.put({k: v for k, v in job.items() if k != "status"})
    selector = TRAINJOB.pods.format(name=ref.name)
    for pod in store.list("v1", "Pod", ref.namespace, selector):
        name = pod["metadata"]["name"]
        if pods == "none":
            store.remove(("v1", "Pod", ref.namespace, name))
        elif pods == "running":
            [container] = pod["spec"]["containers"]
            started = {"running": {"startedAt": "2026-12-04T21:06:00Z"}}
            up = {"name": container["name"], "ready": True, "restartCount": 0, "state": started}
            store.put({**pod, "status": {"phase": "Running", "containerStatuses": [up]}})


# What each surface must say of a Trainer v2.0 job, by its pods.
V20_SAYS = {
    "running": (State.RUNNING, "PodsRunning"),
    "pending": (State.PENDING, "NoStatus"),
    "none": (State.PENDING, "NoStatus"),
}


def recorded(stem: str) -> Path:
    [path] = [p for p in RECORDED if p.stem == stem]
    return path


@skip_without_recordings
@pytest.mark.parametrize("pods", list(V20_SAYS))
def test_a_trainer_v20_job_is_in_one_state_everywhere(cluster: PortCluster, pods: str) -> None:
    """Without counts in the job's status, ``status`` decides from the pods, and so must
    ``list`` and ``watch_jobs``: running pods are RUNNING on every surface."""
    ref = load(recorded("default_demo"), cluster.store)
    as_trainer_v20(cluster.store, ref, pods)
    session = cluster.session()
    status = lifecycle.status(session, ref).state
    [listed] = [j.state for j in lifecycle.list_jobs(session, None) if j.ref == ref]
    with closing(lifecycle.watch_jobs(session, None)) as events:
        [watched] = [e.state for e in islice(events, 1) if e.ref == ref]
    assert said(listed) == said(watched) == said(status) == V20_SAYS[pods]


@skip_without_recordings
def test_list_reads_pods_only_for_the_jobs_that_need_them(cluster: PortCluster) -> None:
    """The recorded jobs (Trainer v2.3: ``jobsStatus`` counts their pods) cost ``list`` and
    ``watch_jobs`` no pod request; the same jobs as Trainer v2.0 leaves them, one pod list
    per namespace for all of them, which says each job's state as ``status`` does."""
    refs = [load(path, cluster.store) for path in RECORDED]
    session = cluster.session()
    lifecycle.list_jobs(session, None)
    with closing(lifecycle.watch_jobs(session, None)) as events:
        assert len(list(islice(events, len(refs)))) == len(refs)
    assert cluster.calls.count("list", "Pod") == 0
    for ref in refs:
        if ref.name != "deadline-job":  # failed: its condition decides, pods or none
            as_trainer_v20(cluster.store, ref, "running")
    listed = {j.ref: j.state for j in lifecycle.list_jobs(session, None)}
    namespaces = {ref.namespace for ref in refs if ref.name != "deadline-job"}
    assert cluster.calls.count("list", "Pod") == len(namespaces) < len(refs)
    for ref in refs:
        assert said(listed[ref]) == said(lifecycle.status(session, ref).state), ref
    assert sum(s.state is State.RUNNING for s in listed.values()) == len(refs) - 1


@skip_without_recordings
def test_watch_jobs_tells_a_trainer_v20_job_running_on_its_next_event(
    cluster: PortCluster,
) -> None:
    """Trainer v2.0 writes nothing to the job when its pods start: the watch tells it running
    with the job's next event (here a label someone adds), as ``status`` would then."""
    ref = load(recorded("default_demo"), cluster.store)
    as_trainer_v20(cluster.store, ref, "pending")

    def pods_start_then_job_changes() -> None:
        as_trainer_v20(cluster.store, ref, "running")
        job = cluster.store.get(ref.api_version, ref.kind, ref.namespace, ref.name)
        assert job is not None
        labels = {**job["metadata"]["labels"], "team": "a"}
        cluster.store.put({**job, "metadata": {**job["metadata"], "labels": labels}})

    cluster.fake.at(1.0, pods_start_then_job_changes)
    session = cluster.session()
    with closing(lifecycle.watch_jobs(session, None)) as events:
        got = [(e.what.value, *said(e.state)) for e in islice(events, 2)]
    assert got == [
        ("listed", State.PENDING, "NoStatus"),
        ("running", State.RUNNING, "PodsRunning"),
    ]
    assert said(lifecycle.status(session, ref).state) == (State.RUNNING, "PodsRunning")


# --- the service example prints what ``status`` says --------------------------------------------


def service_module() -> ModuleType:
    """``examples/service.py``, imported afresh (its ``say`` prints to the stdout of now)."""
    spec = importlib.util.spec_from_file_location("kfcompile_example_service", SERVICE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@skip_without_recordings
@pytest.mark.parametrize("trainer", ["v2.3", "v2.0"])
def test_the_service_example_prints_the_state_status_says(
    cluster: PortCluster, capsys: pytest.CaptureFixture[str], trainer: str
) -> None:
    """The recorded workers of ``examples/service.py`` (``svc-0``, ``svc-1``), as the real
    Trainer v2.3 left them (pods Pending: PENDING) and as Trainer v2.0 would with their pods
    running (no ``jobsStatus``: RUNNING), fed to the service's own event handling from its own
    watch: each line it prints says the state ``status`` says."""
    refs = [load(recorded(f"default_svc-{i}"), cluster.store) for i in (0, 1)]
    if trainer == "v2.0":
        for ref in refs:
            as_trainer_v20(cluster.store, ref, "running")
    session = cluster.session()
    example = service_module()
    args = example.parser().parse_args(["--workers", "2"])
    service = example.Service(session, "default", args)
    with closing(lifecycle.watch_jobs(session, "default", service.selector)) as events:
        for event in islice(events, len(refs)):
            service.on_event(event)
    printed = capsys.readouterr().out.splitlines()
    expected = []
    for ref in refs:
        state = lifecycle.status(session, ref).state
        expected.append(f"service: {ref.name}: listed ({state.state.value} {state.reason})")
    assert sorted(printed) == expected
    assert all(("RUNNING" in line) == (trainer == "v2.0") for line in printed), printed

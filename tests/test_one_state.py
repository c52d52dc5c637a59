"""One state everywhere: what ``status`` (the job and its pods), ``list`` / ``list -A`` and
``watch_jobs`` (the jobs alone) say of a job agrees, held to what the real Trainer v2.3.0 and
JobSet v0.12.0 controllers wrote (``../shared/observed/trainer-v2.3.0``: each TrainJob with its
pods, which never started there: no scheduler, no kubelet)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from itertools import islice
from pathlib import Path
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

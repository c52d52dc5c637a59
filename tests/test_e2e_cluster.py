"""The whole lifecycle on a real cluster with Kubeflow installed (opt-in: ``pytest -m cluster``).

Skipped unless ``KFCOMPILE_E2E_KUBECONFIG`` names a kubeconfig. Optional settings:
``KFCOMPILE_E2E_TARGET`` (default ``trainjob/v2.3``; ``pytorchjob/v1`` for Training Operator v1),
``KFCOMPILE_E2E_NAMESPACE`` (default: the context's), ``KFCOMPILE_E2E_IMAGE`` (default
``python:3.11-slim``) and ``KFCOMPILE_E2E_PVC`` (an existing claim, for the work-dir test).
The job runs plain Python on CPU: no GPU is needed.
"""

from __future__ import annotations

import os
import random
import secrets
from pathlib import Path

import pytest

from kfcompile import lifecycle, structure
from kfcompile.spec.model import JobSpec
from kfcompile.status import State

KUBECONFIG = os.environ.get("KFCOMPILE_E2E_KUBECONFIG")
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not KUBECONFIG, reason="set KFCOMPILE_E2E_KUBECONFIG to run on a cluster"),
]


@pytest.fixture(scope="module")
def ctx() -> tuple[lifecycle.Session, str]:
    from kfcompile_kube import KubeCluster, connect
    from kfcompile_local import SystemClock

    conn = connect(KUBECONFIG)
    session = lifecycle.Session(KubeCluster(conn.api_client), SystemClock(), jitter=random.random)
    return session, os.environ.get("KFCOMPILE_E2E_NAMESPACE") or conn.namespace


def _spec(name: str, **extra: object) -> JobSpec:
    return structure(
        {
            "name": name,
            "image": os.environ.get("KFCOMPILE_E2E_IMAGE", "python:3.11-slim"),
            "num_nodes": 2,
            "command": [
                "python",
                "-c",
                "import os; print('hello from', os.environ.get('HOSTNAME'))",
            ],
            **extra,
        }
    )


def test_submit_wait_logs_cancel(ctx: tuple[lifecycle.Session, str]) -> None:
    session, namespace = ctx
    target = os.environ.get("KFCOMPILE_E2E_TARGET", "trainjob/v2.3")
    name = f"kfc-e2e-{secrets.token_hex(3)}"
    spec = _spec(name)
    first = lifecycle.submit(session, spec, target, namespace=namespace, environ={})
    try:
        assert first.created
        again = lifecycle.submit(session, spec, target, namespace=namespace, environ={})
        assert not again.created  # idempotent
        done = lifecycle.wait(session, first.ref, "done", timeout=600)
        assert done.state.state is State.SUCCEEDED, done.state
        lines = list(lifecycle.logs(session, first.ref))
        assert any("hello from" in line.text for line in lines), lines
        assert [j.ref for j in lifecycle.list_jobs(session, namespace) if j.ref == first.ref]
    finally:
        gone = lifecycle.cancel(session, first.ref, wait_gone=True, timeout=300)
    assert gone.existed
    assert not lifecycle.cancel(session, first.ref).existed


@pytest.mark.skipif(not os.environ.get("KFCOMPILE_E2E_PVC"), reason="set KFCOMPILE_E2E_PVC")
def test_work_dir_round_trip(ctx: tuple[lifecycle.Session, str], tmp_path: Path) -> None:
    from kfcompile_local import TarFiles

    session, namespace = ctx
    claim = os.environ["KFCOMPILE_E2E_PVC"]
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "train.py").write_text("print('hi')\n")
    where = f"/kfc-e2e-{secrets.token_hex(3)}"
    up = lifecycle.sync_up(
        session, TarFiles(), namespace=namespace, pvc=claim, path=where, local=str(tmp_path / "up")
    )
    down = lifecycle.sync_down(
        session, TarFiles(), namespace=namespace, pvc=claim, path=where, local=str(tmp_path / "dn")
    )
    assert (up.files, down.files) == (1, 1)
    assert (tmp_path / "dn" / "train.py").read_text() == "print('hi')\n"

"""The cluster lifecycle against the local API server (tests/fakekube): latency, request counts,
and the cold start of `kfcompile status`.

    python bench/cluster.py [RUNS]

1. Latency from a status change on the server to `wait` returning (RUNS changes).
2. API requests, counted at the server, for submit -> running -> succeeded -> logs ->
   cancel --wait of a 4-node job; for `status` and `cancel --wait` on a 4-node and a 1,000-pod
   job; and for the CLI's `kfcompile status` of a healthy 4-node job and of one whose four pods
   are pending, with no discovery cache on disk and with the one the first run left.
(What a cold `kfcompile status` costs in time, beside kubectl: bench/cold.py.)

Needs ../shared/crds (the reference CRDs), as the tests do.
"""

from __future__ import annotations

import collections
import contextlib
import io
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import schema_check  # noqa: E402
from fakekube.cluster import NAMESPACE, LocalCluster  # noqa: E402

from kfcompile import JobSpec, lifecycle, structure  # noqa: E402
from kfcompile.cli import main as cli  # noqa: E402
from kfcompile.lifecycle.ports import Ref  # noqa: E402

TRAINJOB = "trainer.kubeflow.org/v1alpha1"


def _spec(nodes: int, scenario: str) -> JobSpec:
    return structure(
        {
            "name": "bench",
            "image": "python:3.11-slim",
            "command": ["python", "train.py"],
            "num_nodes": nodes,
            "annotations": {"fake.kfcompile.dev/scenario": scenario},
        }
    )


def _submit(local: LocalCluster, nodes: int, scenario: str) -> Ref:
    spec = _spec(nodes, scenario)
    session = local.session()
    return lifecycle.submit(session, spec, "trainjob/v2.3", namespace=NAMESPACE, environ={}).ref


def _wait_done(session: lifecycle.Session, ref: Ref, returned: list[float]) -> None:
    lifecycle.wait(session, ref, "done", timeout=10)
    returned.append(time.perf_counter())


def latency(shared: Path, runs: int) -> list[float]:
    """Seconds from the Complete condition landing in the store to `wait` returning. The local
    server's clock ticks each millisecond here (its default, 10 ms, is what a watch of it waits
    between looks at its store: it would be measured instead)."""
    found = []
    with LocalCluster(shared, scenario="hang", step=0.001) as local:
        for i in range(runs):
            ref = _submit(local, 1, "hang")
            lifecycle.wait(local.session(), ref, "running", timeout=10)
            returned: list[float] = []
            waiter = threading.Thread(target=_wait_done, args=(local.session(), ref, returned))
            waiter.start()
            time.sleep(0.2)  # the waiter is watching
            job = local.store.get(TRAINJOB, "TrainJob", NAMESPACE, ref.name)
            assert job is not None
            status = dict(job.get("status") or {})
            status["conditions"] = [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "JobSetCompleted",
                    "message": "done",
                    "lastTransitionTime": "2026-11-29T00:00:00Z",
                }
            ]
            changed = time.perf_counter()
            local.store.patch_status(TRAINJOB, "TrainJob", NAMESPACE, ref.name, status)
            waiter.join(10)
            found.append(returned[0] - changed)
            lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=10)
            print(f"\r  latency run {i + 1}/{runs}", end="", file=sys.stderr)
    print(file=sys.stderr)
    return found


def _count(local: LocalCluster) -> str:
    verbs = collections.Counter(r.verb for r in local.kube.requests)
    total = sum(verbs.values())
    return f"{total:4d}  ({', '.join(f'{v} {n}' for v, n in sorted(verbs.items()))})"


def lifecycle_requests(shared: Path) -> None:
    with LocalCluster(shared) as local:
        local.kube.requests.clear()
        ref = _submit(local, 4, "succeeds")
        lifecycle.wait(local.session(), ref, "running", timeout=20)
        lifecycle.wait(local.session(), ref, "done", timeout=20)
        lines = list(lifecycle.logs(local.session(), ref))
        lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=20)
        print(f"  4-node submit..cancel --wait ({len(lines)} log lines): {_count(local)}")
    for nodes in (4, 1000):
        with LocalCluster(shared, scenario="hang") as local:
            ref = _submit(local, nodes, "hang")
            lifecycle.wait(local.session(), ref, "running", timeout=30)
            while lifecycle.status(local.session(), ref).nodes_ready < nodes:
                time.sleep(0.05)
            local.kube.requests.clear()
            lifecycle.status(local.session(), ref)
            print(f"  status, {nodes:4d} pods:        {_count(local)}")
            local.kube.requests.clear()
            lifecycle.cancel(local.session(), ref, wait_gone=True, timeout=30)
            print(f"  cancel --wait, {nodes:4d} pods: {_count(local)}")


def cli_status_requests(shared: Path) -> None:
    """``kfcompile status`` in this process, twice: the first run finds no discovery cache."""
    for scenario, label in (("hang", "healthy"), ("unschedulable", "4 pods pending")):
        with LocalCluster(shared, scenario=scenario, auto=False) as local:
            _submit(local, 4, scenario)
            local.clock.advance(1.0)
            with tempfile.TemporaryDirectory() as cache:
                os.environ["KFCOMPILE_CACHE_DIR"] = cache
                for run in ("no cache", "cached"):
                    local.kube.requests.clear()
                    with contextlib.redirect_stdout(io.StringIO()):
                        cli(["status", "bench", "--kubeconfig", str(local.kubeconfig)])
                    print(f"  kfcompile status, 4 nodes, {label}, {run}: {_count(local)}")
            del os.environ["KFCOMPILE_CACHE_DIR"]


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    shared = schema_check.require_shared()
    found = sorted(latency(shared, runs))
    print("status change -> wait returns:")
    print(
        f"  median {statistics.median(found) * 1000:.1f} ms, "
        f"p90 {found[int(len(found) * 0.9) - 1] * 1000:.1f} ms, max {found[-1] * 1000:.1f} ms"
    )
    print("API requests counted at the server:")
    lifecycle_requests(shared)
    cli_status_requests(shared)


if __name__ == "__main__":
    main()

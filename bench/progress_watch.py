"""``kfcompile list -w`` over 1,000 running TrainJobs whose training progress changes every
second: the requests it makes and the CPU it takes per minute (one watch per kind, no polling).

    python bench/progress_watch.py [JOBS] [SECONDS]     # default 1000 jobs, 60 s

The real CLI in its own process, against the local API server of the tests (tests/fakekube);
every second, each job's ``status.trainerStatus`` is written straight into the server's store,
as Trainer v2.2+ copies what a training process reports. Counted: the requests the CLI made
(at the server), the lines it printed (one per job per change), and its CPU time (user + system,
from /proc), all over the measured seconds. Needs ../shared/crds, as the tests do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import schema_check  # noqa: E402
from fakekube.cluster import NAMESPACE, LocalCluster  # noqa: E402

from kfcompile import lifecycle  # noqa: E402
from kfcompile.testing import Store  # noqa: E402

API = "trainer.kubeflow.org/v1alpha1"
RUNNING = {"jobsStatus": [{"name": "node", "active": 1, "ready": 1, "succeeded": 0, "failed": 0}]}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def report(store: Store, second: int, names: list[str]) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name in names:
        status = {
            **RUNNING,
            "trainerStatus": {
                "progressPercentage": min(second, 100),
                "estimatedRemainingSeconds": max(100 - second, 0) * 60,
                "metrics": [{"name": "loss", "value": f"{0.99**second:.4f}"}],
                "lastUpdatedTime": now,
            },
        }
        store.patch_status(API, "TrainJob", NAMESPACE, name, status)


def main(jobs: int = 1000, seconds: int = 60) -> None:
    with LocalCluster(schema_check.require_shared(), auto=False, scenario=None) as local:
        names = [f"job-{i:04d}" for i in range(jobs)]
        labels = {lifecycle.MANAGED_BY_LABEL: lifecycle.MANAGER}
        for name in names:
            meta = {"name": name, "namespace": NAMESPACE, "labels": labels}
            local.store.create({"apiVersion": API, "kind": "TrainJob", "metadata": meta})
            local.store.patch_status(API, "TrainJob", NAMESPACE, name, RUNNING)
        env = {**os.environ, "KUBECONFIG": str(local.kubeconfig)}
        cli = subprocess.Popen(
            [sys.executable, "-m", "kfcompile", "list", "-w"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert cli.stdout is not None
        lines = Counter[str]()

        def read() -> None:
            assert cli.stdout is not None
            for line in cli.stdout:
                words = line.split()
                lines[words[3] if len(words) > 3 else "table"] += 1

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        while not all(
            local.kube.requests.count("GET", f"/{p}", watch=True)
            for p in ("trainjobs", "pytorchjobs")
        ):
            time.sleep(0.05)  # the table is printed and both kinds are watched
        local.kube.requests.clear()
        cpu_before, started = cpu_seconds(cli.pid), time.monotonic()
        behind = 0.0
        for second in range(1, seconds + 1):
            report(local.store, second, names)
            pause = started + second - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                behind = max(behind, -pause)
        time.sleep(2)  # what was sent is read
        cpu = cpu_seconds(cli.pid) - cpu_before
        elapsed = time.monotonic() - started
        requests = Counter(f"{r.verb}" for r in local.kube.requests)
        cli.terminate()
        cli.wait(timeout=30)
    minutes, asked, said = elapsed / 60, sum(requests.values()), lines["progressed"]
    print(f"{jobs} jobs, progress written every second for {seconds} s ({elapsed:.1f} s measured)")
    if behind:
        print(f"  the writer fell behind by up to {behind:.1f} s (the fake server's cost)")
    print(f"  requests by the CLI: {asked} ({dict(requests)}), {asked / minutes:.1f}/min")
    print(f"  lines printed: {said} progressed ({said / elapsed:.0f}/s)")
    print(
        f"  CPU of the CLI: {cpu:.1f} s, {cpu / minutes:.1f} s/min ({cpu / elapsed:.0%} of a core)"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))

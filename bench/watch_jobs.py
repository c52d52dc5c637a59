"""API requests made by ``lifecycle.watch_jobs`` for 10 and for 1,000 jobs, each going through
three changes of state (queued by Kueue, admitted, finished) after it appears. The goal: the
same number for both, apart from list pages.

    python bench/watch_jobs.py

1. At the port: the port-level fake (kfcompile.testing) on a fake clock, every call
   of the ``Cluster`` port counted.
2. Over HTTP: the real adapter (``kfcompile_kube``) against the local API server, every request
   counted at the server.

Each twice: jobs created while the watch runs (its first list is empty), and jobs there before
it starts (its first list takes a page per ``LIST_PAGE`` jobs; they have no status yet, as on
Trainer v2.0, so their pods decide: a pod list per 100 of them). The statuses are written
straight into the store, as a controller would, so only ``watch_jobs`` makes requests. Next to
it, what polling each job once per change would take, as a service that reconciles by reading
every job does. No Kueue is installed: no job is queued, so only the jobs are watched.
Needs ../shared/crds (the reference CRDs), as the tests do.

3. CPU per event with 1,000 and 10,000 jobs watched (the goal: the same): the ``Watcher``
   machine alone, fed a change of each job it listed; and ``watch_jobs`` at the port, the
   fake's writes of the changes and its watch included (process time from the first change to
   the last event, over the events).
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable, Generator
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import schema_check  # noqa: E402
from fakekube.cluster import NAMESPACE, LocalCluster, install  # noqa: E402

from kfcompile import lifecycle  # noqa: E402
from kfcompile.kinds import TRAINJOB  # noqa: E402
from kfcompile.lifecycle.job_events import Changed, PageListed, Watcher  # noqa: E402
from kfcompile.testing import FakeClock, FakeCluster, Store, fixed_jitter  # noqa: E402

API = "trainer.kubeflow.org/v1alpha1"
# As Trainer v2.1+ writes them: its JobSet's count of the Job beside each condition (made
# suspended, then active). Without counts (Trainer v2.0) a job that only says Resumed is decided
# by its pods, which costs a pod list per such change.
_NODE = {"name": "node", "ready": 0, "succeeded": 0, "failed": 0}
CHANGES = (
    {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended"}],
     "jobsStatus": [_NODE | {"active": 0, "suspended": 1}]},
    {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed"}],
     "jobsStatus": [_NODE | {"active": 1, "suspended": 0}]},
    {"conditions": [{"type": "Complete", "status": "True", "reason": "JobSetCompleted"}],
     "jobsStatus": [_NODE | {"active": 0, "succeeded": 1, "suspended": 0}]},
)  # fmt: skip
LABELS = {lifecycle.MANAGED_BY_LABEL: lifecycle.MANAGER}


def _create(store: Store, names: list[str]) -> None:
    for name in names:
        meta = {"name": name, "namespace": NAMESPACE, "labels": dict(LABELS)}
        store.create({"apiVersion": API, "kind": "TrainJob", "metadata": meta})


def _change(write: Callable[[str, dict[str, Any]], object], names: list[str], status: Any) -> None:
    """``write(name, status)``: the status written to the job, as its controller does."""
    for name in names:
        write(name, status)


def _consume(events: Generator[lifecycle.JobEvent, None, None], count: int) -> None:
    with closing(events):
        for seen, _ in enumerate(events, start=1):
            if seen == count:
                return
    raise RuntimeError(f"the watch ended before {count} events")


def at_the_port(jobs: int, before: bool) -> collections.Counter[str]:
    clock = FakeClock(step=1.0)
    cluster = FakeCluster(clock)
    store = cluster.store
    install(
        store, schema_check.require_shared(), ("trainjobs-v2.3.0.yaml",), runtime=False, serves=None
    )  # no Kueue: these jobs are not queued
    names = [f"job-{i:04d}" for i in range(jobs)]

    def write(name: str, status: dict[str, Any]) -> None:
        store.change(API, "TrainJob", NAMESPACE, name, {"status": status})

    waves: list[Callable[[], None]] = [] if before else [lambda: _create(store, names)]
    waves += [partial(_change, write, names, status) for status in CHANGES]
    if before:
        _create(store, names)
    clock.on_tick(lambda: waves.pop(0)() if waves else None)
    session = lifecycle.Session(cluster, clock, jitter=fixed_jitter)
    _consume(lifecycle.watch_jobs(session), jobs * (1 + len(CHANGES)))
    return collections.Counter(call.method for call in cluster.calls)


def over_http(jobs: int, before: bool) -> collections.Counter[str]:
    with LocalCluster(
        schema_check.require_shared(), auto=False, scenario=None, kueue=None
    ) as local:
        names = [f"job-{i:04d}" for i in range(jobs)]
        if before:
            _create(local.store, names)
        session = local.session()  # connects: its requests are not the watch's
        local.kube.requests.clear()

        def drive() -> None:  # once both kinds are watched, every job's life in waves
            while not all(
                local.kube.requests.count("GET", f"/{p}", watch=True)
                for p in ("trainjobs", "pytorchjobs")
            ):
                time.sleep(0.01)
            if not before:
                _create(local.store, names)
            for status in CHANGES:
                _change(
                    partial(local.store.patch_status, API, "TrainJob", NAMESPACE), names, status
                )

        threading.Thread(target=drive, daemon=True).start()
        _consume(lifecycle.watch_jobs(session), jobs * (1 + len(CHANGES)))
        return collections.Counter(r.verb for r in local.kube.requests)


def machine_cpu_per_event(jobs: int) -> float:
    """Microseconds of CPU per ``Watcher.receive`` of a change, ``jobs`` jobs known."""
    items = [_job(f"job-{i:05d}", CHANGES[0]) for i in range(jobs)]
    watcher = Watcher.start(TRAINJOB, 0.0, 60.0).receive(PageListed(items, "1"), 0.0)
    changes = [Changed(_job(f"job-{i:05d}", CHANGES[1])) for i in range(jobs)]
    start = time.process_time()
    for change in changes:
        watcher = watcher.receive(change, 0.0)
    return (time.process_time() - start) / jobs * 1e6


def port_cpu_per_event(jobs: int) -> float:
    """Microseconds of CPU per event of ``watch_jobs`` at the port, fake included: ``jobs``
    there before it starts, then each changed once."""
    clock = FakeClock(step=1.0)
    cluster = FakeCluster(clock)
    store = cluster.store
    install(
        store, schema_check.require_shared(), ("trainjobs-v2.3.0.yaml",), runtime=False, serves=None
    )  # no Kueue: these jobs are not queued
    names = [f"job-{i:05d}" for i in range(jobs)]
    _create(store, names)
    session = lifecycle.Session(cluster, clock, jitter=fixed_jitter)
    with closing(lifecycle.watch_jobs(session)) as events:
        for _ in zip(range(jobs), events, strict=False):  # LISTED, each
            pass

        def change_each() -> None:  # at the next tick, every job once
            while names:
                store.change(API, "TrainJob", NAMESPACE, names.pop(), {"status": CHANGES[1]})

        clock.on_tick(change_each)
        start = time.process_time()
        for _ in zip(range(jobs), events, strict=False):
            pass
        return (time.process_time() - start) / jobs * 1e6


def _job(name: str, status: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": NAMESPACE, "uid": name, "resourceVersion": "2"}
    return {"apiVersion": API, "kind": "TrainJob", "metadata": meta, "status": status}


def _line(counts: collections.Counter[str]) -> str:
    total = sum(counts.values())
    return f"{total:4d}  ({', '.join(f'{what} {n}' for what, n in sorted(counts.items()))})"


def main() -> None:
    for label, count in (("at the port", at_the_port), ("over HTTP", over_http)):
        print(f"requests {label} ({len(CHANGES)} changes of state per job):")
        for before in (False, True):
            when = "there before the watch" if before else "created while watching"
            for jobs in (10, 1000):
                print(f"  {jobs:5d} jobs {when:<24} {_line(count(jobs, before))}")
    print("for comparison, reading each job once per change (the least a poller makes):")
    for jobs in (10, 1000):
        print(f"  {jobs:5d} jobs {jobs * len(CHANGES):28d}")
    print("CPU per event, us (one change of each job, every job listed first):")
    for jobs in (1000, 10_000):
        machine, port = machine_cpu_per_event(jobs), port_cpu_per_event(jobs)
        print(f"  {jobs:6d} jobs: the Watcher {machine:.1f}, watch_jobs at the port {port:.1f}")


if __name__ == "__main__":
    main()

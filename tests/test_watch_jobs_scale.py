"""What one ``watch_jobs`` event costs does not grow with the jobs watched: the ``Watcher`` does
not copy its map of every job per event (it did: 75 µs at 1,000 jobs, 170 µs at 10,000).
Time is measured in ``bench/watch_jobs.py``; here, the memory an event takes, which a copy of the
map would make grow with it (deterministic, whatever the machine's load)."""

from __future__ import annotations

import tracemalloc
from typing import Any

from kfcompile.kinds import TRAINJOB
from kfcompile.lifecycle.job_events import Changed, PageListed, Removed, Watcher

QUEUED = {"conditions": [{"type": "Suspended", "status": "True", "reason": "Suspended"}]}
RESUMED = {"conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed"}]}


def tj(name: str, version: str, status: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default", "uid": name, "resourceVersion": version}
    return {"apiVersion": TRAINJOB.api_version, "kind": "TrainJob", "metadata": meta,
            "status": status}  # fmt: skip


def watching(jobs: int) -> Watcher:
    """A watcher that has listed ``jobs`` queued jobs and watches them."""
    items = [tj(f"job-{i:05d}", "1", QUEUED) for i in range(jobs)]
    return Watcher.start(TRAINJOB, 0.0, 60.0).receive(PageListed(items, "1"), 0.0)


def allocated(watcher: Watcher, answer: Changed | Removed) -> tuple[Watcher, int]:
    """The watcher after ``answer``, and the most memory the answer took at once (bytes)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        after = watcher.receive(answer, 0.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return after, peak - before


def test_an_event_takes_the_same_memory_with_10_000_jobs_as_with_100() -> None:
    taken = {}
    for jobs in (100, 10_000):
        watcher = watching(jobs)
        changed, on_change = allocated(watcher, Changed(tj("job-00042", "7", RESUMED)))
        assert [(e.ref.name, e.what.value) for e in changed.events] == [("job-00042", "admitted")]
        removed, on_removal = allocated(changed, Removed(tj("job-00043", "8", QUEUED)))
        assert [(e.ref.name, e.what.value) for e in removed.events] == [("job-00043", "deleted")]
        assert len(removed.known) == jobs - 1
        taken[jobs] = max(on_change, on_removal)
    # a copy of 10,000 entries is some 300 KiB; an event's own objects a few KiB
    assert taken[10_000] < taken[100] + 32 * 1024, taken

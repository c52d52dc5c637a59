"""``kfcompile list -w``: after the table, a line for each change of a job, as ``kubectl get -w``
prints them, from ``lifecycle.watch_jobs`` (one list and one watch per kind)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from contextlib import closing

from kfcompile.kinds import Kind
from kfcompile.lifecycle import Happened, JobEvent, Session, watch_jobs
from kfcompile.lifecycle.watcher import happened
from kfcompile.ports import Ref
from kfcompile.status import JobState


def news(event: JobEvent, shown: Mapping[Ref, JobState]) -> Happened | None:
    """What the line says; ``None`` when the table already said it (a job the watch lists as
    the table showed it: the watch lists once more before it watches)."""
    if event.what is not Happened.LISTED:
        return event.what
    before = shown.get(event.ref)
    if before is None:
        return Happened.CREATED  # between the table and the watch
    if (before.state, before.reason) == (event.state.state, event.state.reason):
        return None
    return happened(event.state, before)


def line(event: JobEvent, what: Happened, widths: Sequence[int]) -> str:
    """The job's columns as the table has them, then what happened and the state now."""
    ref, state = event.ref, event.state
    cells = (ref.namespace or "", ref.name, ref.kind)
    head = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))
    return f"{head}  {what.value}  {state.state.value} ({state.reason})"


def _skipped(kind: Kind) -> None:
    print(
        f"kfcompile: not watching {kind.name}s: this cluster does not serve them", file=sys.stderr
    )


def print_changes(
    session: Session, namespace: str | None, shown: Mapping[Ref, JobState], widths: Sequence[int]
) -> None:
    """A line per change until Ctrl-C (closing the watch on the way out, whichever it is)."""
    with closing(watch_jobs(session, namespace, on_skipped=_skipped)) as events:
        for event in events:
            what = news(event, shown)
            if what is not None:
                print(line(event, what, widths), flush=True)

"""``kfcompile list [-A] [-w]``: the jobs kfcompile created, as a table, and with ``-w``, after
the table, a line for each change of a job, as ``kubectl get -w`` prints them, from
``lifecycle.watch_jobs`` (one list and one watch per kind)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from contextlib import closing
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from kfcompile import lifecycle
from kfcompile.cli.common import say
from kfcompile.cli.context import Context, cluster_errors
from kfcompile.kinds import Kind
from kfcompile.lifecycle.ports import Forbidden, Ref
from kfcompile.lifecycle.session import Session
from kfcompile.status import JobState, State
from kfcompile.terminal import printable

if TYPE_CHECKING:  # the watch machine: -w's alone
    from kfcompile.lifecycle.job_events import Happened, JobEvent


def news(event: JobEvent, shown: Mapping[Ref, JobState]) -> Happened | None:
    """What the line says; ``None`` when the table already said it (a job the watch lists as
    the table showed it: the watch lists once more before it watches)."""
    from kfcompile.lifecycle.job_events import Happened, happened

    if event.what is not Happened.LISTED:
        return event.what
    before = shown.get(event.ref)
    if before is None:
        return Happened.CREATED  # between the table and the watch
    if (before.state, before.reason) == (event.state.state, event.state.reason):
        return None
    return happened(event.state, before)


def line(event: JobEvent, what: Happened, widths: Sequence[int]) -> str:
    """The job's columns as the table has them, then what happened, the state now and the
    progress its training process last reported."""
    ref, state = event.ref, event.state
    cells = (ref.namespace or "", ref.name, ref.kind)
    head = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False))
    told = f"{head}  {what.value}  {state.state.value} ({state.reason})"
    if event.cluster is not None:  # MultiKueue dispatched it
        told += f"  to worker cluster {event.cluster}"
    if event.progress is not None:
        told += f"  {event.progress.line(datetime.now(UTC))}"
    return told


def _skipped(kind: Kind) -> None:
    say(f"kfcompile: not watching {kind.name}s: this cluster does not serve them", err=True)


def print_changes(
    session: Session, namespace: str | None, shown: Mapping[Ref, JobState], widths: Sequence[int]
) -> None:
    """A line per change until Ctrl-C (closing the watch on the way out, whichever it is)."""
    from kfcompile.lifecycle.job_events import watch_jobs  # `list -w` only: it loads the log merger

    with closing(watch_jobs(session, namespace, on_skipped=_skipped)) as events:
        for event in events:
            what = news(event, shown)
            if what is not None:
                say(line(event, what, widths))


def cmd_list(args: argparse.Namespace) -> int:
    ctx = Context(args)
    with cluster_errors():
        jobs, namespace = _list(ctx, args.all_namespaces, args.watch)
    rows = [
        tuple(
            printable(cell)  # escaped before the columns are measured
            for cell in (
                j.ref.namespace or "",
                j.ref.name,
                j.ref.kind,
                j.target,
                _state_cell(j.state),
                "-" if j.progress is None else j.progress.cell(),
                j.created,
            )
        )
        for j in jobs
    ]
    head = ("NAMESPACE", "NAME", "KIND", "TARGET", "STATE", "PROGRESS", "CREATED")
    table = _with_clusters(jobs, [head, *rows])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for row in table:
        say("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if args.watch:
        with cluster_errors():
            print_changes(ctx.session, namespace, {j.ref: j.state for j in jobs}, widths)
    return 0


def _list(
    ctx: Context, all_namespaces: bool, watch: bool
) -> tuple[list[lifecycle.Listed], str | None]:
    """The jobs of every namespace, or of this one, and the namespace listed (``None``: all),
    which the watch then watches; where RBAC allows only namespaces (a Role, no ClusterRole),
    this one, said once (for the table and the watch) with the permission that is missing."""
    if not all_namespaces:
        return lifecycle.list_jobs(ctx.session, ctx.namespace), ctx.namespace
    try:
        return lifecycle.list_jobs(ctx.session, None), None
    except Forbidden as exc:
        doing = "listing and watching" if watch else "listing"
        say(
            f"kfcompile: listing jobs in all namespaces is forbidden ({exc.message}): it needs "
            f"list at the cluster scope (a ClusterRole); {doing} namespace {ctx.namespace} "
            "instead",
            err=True,
        )
        return lifecycle.list_jobs(ctx.session, ctx.namespace), ctx.namespace


def _with_clusters(
    jobs: Sequence[lifecycle.Listed], table: list[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """On a MultiKueue manager, a CLUSTER column: the worker each job was dispatched to (``-``:
    none yet, or not MultiKueue's)."""
    if all(j.dispatch is None for j in jobs):
        return table
    cells = ["CLUSTER", *((j.dispatch.cluster if j.dispatch else None) or "-" for j in jobs)]
    return [(*row, cell) for row, cell in zip(table, cells, strict=True)]


# States whose reason says why the job waits (Kueue's: Queued, Evicted...) or what holds its
# deletion: the table shows it.
WAITING: Final = (State.SUSPENDED, State.PENDING, State.DELETING)


def _state_cell(state: JobState) -> str:
    """A job's state in a table, with why it waits or what holds its deletion."""
    if state.state in WAITING:
        return f"{state.state.value} ({state.reason})"
    return str(state.state.value)

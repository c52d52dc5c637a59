"""The ``kfcompile`` commands that talk to a cluster: submit, status, wait, logs, events, cancel,
suspend, resume, sync and list.

Argument parsing and printing only: the work is ``kfcompile.lifecycle``, and the Kubernetes
adapter (which imports the ``kubernetes`` client, ~300 ms) is imported only when one of these
commands runs, never for ``render``. Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Generator, Iterable
from contextlib import closing
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from kfcompile import lifecycle
from kfcompile.cli.common import (
    INTERRUPTED,
    TERMINATED,
    Terminated,
    UsageError,
    say,
)
from kfcompile.cli.context import Context, cluster_errors, target_for
from kfcompile.cli.workers import (
    WorkerPods,
    followed_workers,
    observed,
    reach_worker,
    remote,
)
from kfcompile.kinds import KINDS, MULTIKUEUE
from kfcompile.lifecycle.kueue import multikueue_managed
from kfcompile.lifecycle.multikueue import multikueue_check
from kfcompile.lifecycle.ports import Ref
from kfcompile.progress import absent_reason
from kfcompile.progress import bar as progress_bar
from kfcompile.status import State
from kfcompile.terminal import log_line, printable

if TYPE_CHECKING:  # a command loads only the lifecycle modules (and spec layer) it runs
    from kfcompile.lifecycle import LogLine, Observation, Waiting
    from kfcompile.lifecycle.deleting import Remaining
    from kfcompile.spec.model import JobSpec


class _Progress:
    """What ``wait`` and ``submit --wait`` show on stderr: a line per change of the job's state
    or of its training progress; on a terminal, a progress bar redrawn in place while only the
    progress changes."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.open = False  # a bar is on the last line, without its newline
        self.last: tuple[object, ...] | None = None  # the state part of the last line
        self.said_none = False

    def __call__(self, obs: Observation, elapsed: float) -> None:
        state = obs.state
        line = f"[{elapsed:6.1f}s] {obs.ref.name}: {state.state.value} ({state.reason})"
        line += f" nodes {obs.nodes_ready}/{obs.nodes_total} ready"
        if state.message and state.state is not State.RUNNING:
            line += f": {state.message}"
        head = (state.state, state.reason, obs.nodes_ready, obs.nodes_total)
        progress = obs.progress
        if progress is not None:
            bar = f"{progress_bar(progress.percent)} " if self.tty else ""
            line += f" {bar}{progress.line(datetime.now(UTC))}"
        line = printable(line)  # the redrawing's own controls are added below
        if self.tty and self.open and head == self.last and progress is not None:
            self.out.write(f"\r{line}\x1b[K")
        else:
            self.close()
            self.out.write(line if self.tty and progress is not None else f"{line}\n")
            # said once, of a TrainJob (a PyTorchJob never reports any: `status` says so)
            running = state.state is State.RUNNING and obs.ref.kind == "TrainJob"
            if progress is None and running and not self.said_none:
                self.said_none = True
                self.out.write(f"  progress: {absent_reason(obs.ref.kind)}\n")
        self.open = self.tty and progress is not None
        self.last = head
        self.out.flush()

    def close(self) -> None:
        """End the bar's line, before anything else is printed."""
        if self.open:
            self.out.write("\n")
            self.open = False


def _waiting_on(doing: str) -> Callable[[Remaining, float], None]:
    """A progress line on stderr whenever what a deletion waits on changes; the first one
    also says why it can take a while (the job's state message)."""
    said: list[str] = []

    def show(left: Remaining, elapsed: float) -> None:
        where = "" if left.cluster is None else f", on worker cluster {left.cluster}"
        line = f"[{elapsed:6.1f}s] {left.ref.name}: {doing}{where}: waiting for {left}"
        if left.job is not None and left.job.message and not said:
            line += f": {left.job.message}"
        said.append(line)
        say(line, err=True)

    return show


def _finish(obs: Observation) -> int:
    """Exit status for where a wait ended: 1 when the job failed."""
    state = obs.state
    say(f"{obs.ref}: {state.state.value} ({state.reason}) {state.message}".rstrip())
    return 1 if state.state is State.FAILED else 0


def _save_logs(session: lifecycle.Session | None, ref: Ref, directory: str) -> None:
    """Every rank's complete log to DIR/rank-N.log (logs vanish with the pods), written as it
    is read; a rank whose log cannot be read says why (its file is empty). None: the cluster
    that ran the job cannot be reached (said)."""
    if session is None:
        return
    folder = Path(directory)
    from kfcompile.lifecycle.pod_logs import ranks

    chosen = ranks(session, ref)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with closing(lifecycle.logs(session, ref, on_waiting=_say_waiting)) as lines:
            _write_ranks(folder, chosen, lines)
    except OSError as exc:
        raise UsageError(f"cannot write logs to {folder}: {exc.strerror or exc}") from None
    say(f"saved logs of {ref} to {folder}/", err=True)


def _write_ranks(folder: Path, chosen: list[int], lines: Iterable[LogLine]) -> None:
    """Each line to its rank's file, one file open at a time (the ranks are read one after
    the other, each rank's lines together); every chosen rank has its file."""
    written: set[int | None] = set()
    for rank, together in groupby(lines, key=lambda line: line.rank):
        mode = "a" if rank in written else "w"
        written.add(rank)
        with (folder / f"rank-{rank}.log").open(mode, encoding="utf-8") as out:
            for line in together:
                out.write(f"{line.text}\n")
    for empty in set(chosen) - written:
        (folder / f"rank-{empty}.log").write_text("", encoding="utf-8")


def _say_waiting(notice: Waiting) -> None:
    say(f"kfcompile: {notice}", err=True)


# Characters of log lines written at once when not following: one write per line costs a
# system call each where stdout is unbuffered (PYTHONUNBUFFERED, common in containers).
_BATCH = 64 * 1024


def _print_logs(lines: Generator[LogLine, None, None], prefix: bool, follow: bool) -> int:
    """Print the lines (how many: the return), escaped on a terminal (``log_line``), each at
    once when ``follow``ed, else a batch at a time; closing them on every way out (the end,
    Ctrl-C, a closed pipe, an error) stops the streams a followed log reads, with their
    threads. The lines read before an error are printed before it is said."""
    terminal = sys.stdout.isatty()
    batch: list[str] = []
    printed = held = 0
    try:
        with closing(lines):
            for line in lines:
                text = log_line(line.text, terminal)
                batch.append(f"[rank {line.rank}] {text}\n" if prefix else f"{text}\n")
                printed, held = printed + 1, held + len(batch[-1])
                if follow or held >= _BATCH:
                    sys.stdout.write("".join(batch))
                    sys.stdout.flush()
                    batch, held = [], 0
    finally:
        sys.stdout.write("".join(batch))
        sys.stdout.flush()
    return printed


def cmd_submit(args: argparse.Namespace) -> int:
    # The spec layer and the targets' registry: submit's alone.
    from kfcompile.cli.common import compile_for, load
    from kfcompile.lifecycle.cluster_target import crd_name

    spec = load(args.spec)
    if args.target is not None:
        compile_for(args.spec, args.target, spec)  # what the target cannot express, named by file
    dry_run = args.dry_run == "server"
    if dry_run and (args.wait or args.follow):
        raise UsageError("--dry-run=server creates nothing to wait for or follow")
    if spec.work_dir is not None and args.spec != "-":
        # A relative work dir is relative to the spec file, not to where kfcompile runs.
        local = Path(args.spec).parent / spec.work_dir.local
        spec = attrs.evolve(spec, work_dir=attrs.evolve(spec.work_dir, local=str(local)))
    ctx = Context(args, spec.namespace)
    with cluster_errors():
        chosen = target_for(ctx, args.target)
        if args.target is None:
            compile_for(args.spec, chosen.target, spec)
        # Whether Kueue's MultiKueue will run it on a worker cluster (its pods are there).
        far = spec.managed_by == MULTIKUEUE
        if spec.queue is not None:
            far = _say_multikueue(ctx, spec.queue) or far
        from kfcompile.lifecycle.submitting import DELETING_WAIT

        done = lifecycle.submit(
            ctx.session,
            spec,
            chosen.target,
            namespace=ctx.namespace,
            environ=os.environ,
            files=ctx.files,
            sync_image=args.sync_image,
            sync_timeout=_helper_timeout(args),
            on_deleting=_waiting_on(
                f"being deleted; submit creates it again once it is gone "
                f"(waiting up to {DELETING_WAIT:g}s)"
            ),
            dry_run=dry_run,
            against=chosen.crd,
            force=args.force,
        )
        for line in done.warnings:
            say(f"kfcompile: warning (--force): {line}", err=True)
        if chosen.newer:
            served = crd_name(KINDS[done.ref.kind])
            say(f"kfcompile: the job fits the {served} CRD the cluster serves", err=True)
        if done.dry_run:
            _dry_run_done(done, spec)
            return 0
        if done.uploaded is not None:
            say(
                f"uploaded {done.uploaded.files} files ({done.uploaded.size} bytes) "
                f"to {spec.work_dir.pvc if spec.work_dir else '?'}",
                err=True,
            )
        how = "created" if done.created else "unchanged (this spec was already submitted)"
        if done.repaired:
            how = "already submitted; its companions were repaired"
        for line in done.repaired:
            say(f"kfcompile: repaired: {line}", err=True)
        say(f"{done.ref}: {how}")
        if not (args.wait or args.follow):
            return 0
        try:
            return _watch(ctx, done.ref, args, far)
        except KeyboardInterrupt as exc:
            return _interrupted(ctx, done.ref, exc)


def _say_multikueue(ctx: Context, queue: str) -> bool:
    """A MultiKueue queue: the job will run on a worker cluster, not on this one (the manager);
    said, and True."""
    check = multikueue_check(ctx.session, ctx.namespace, queue)
    if check is not None:
        say(
            f"kfcompile: queue {queue} is a MultiKueue queue (its ClusterQueue has the "
            f"AdmissionCheck {check}): Kueue dispatches the job from this manager cluster to a "
            "worker cluster; status, logs and events follow it there",
            err=True,
        )
    return check is not None


def _dry_run_done(done: lifecycle.Submitted, spec: JobSpec) -> None:
    if spec.work_dir is not None and done.created:
        say("kfcompile: dry run: the work dir was not uploaded", err=True)
    how = (
        "accepted by the server" if done.created else "unchanged (this spec was already submitted)"
    )
    say(f"{done.ref}: {how} (dry run: nothing was created)")


def _watch(ctx: Context, ref: Ref, args: argparse.Namespace, far: bool = False) -> int:
    """``far``: MultiKueue runs it on a worker, where its logs are: once Kueue has dispatched it
    (its state on the manager moves on), they are read there."""
    session: lifecycle.Session | None = ctx.session
    pods_on = WorkerPods(ctx, args)  # a job MultiKueue dispatched: judged by a worker's pods
    if far and (args.follow or args.save_logs):
        session = _dispatched(ctx, ref, args, pods_on)
    if args.follow:
        if session is not None:
            lines = lifecycle.logs(session, ref, follow=True, on_waiting=_say_waiting)
            _print_logs(lines, prefix=True, follow=True)
        until: lifecycle.Until = "done"
    else:
        until = args.wait
    shown = _Progress()
    try:
        obs = lifecycle.wait(
            ctx.session, ref, until, timeout=args.timeout, on_change=shown, pods_on=pods_on
        )
    finally:
        shown.close()
    if args.save_logs and obs.state.finished:
        _save_logs(session, ref, args.save_logs)
    return _finish(obs)


def _dispatched(
    ctx: Context, ref: Ref, args: argparse.Namespace, pods_on: WorkerPods
) -> lifecycle.Session | None:
    """Wait on the manager until the job runs (by its pods on the worker it was dispatched to:
    ``pods_on``); the worker's session, or None when it cannot be reached (said)."""
    shown = _Progress()
    try:
        timeout = getattr(args, "timeout", None)  # logs has none
        lifecycle.wait(
            ctx.session, ref, "running", timeout=timeout, on_change=shown, pods_on=pods_on
        )
    finally:
        shown.close()
    where = pods_on.found
    if where is None:
        job = lifecycle.find(ctx.session, ctx.namespace, ref.name, ref.kind)
        where = remote(ctx, args, job)
        if where is None:  # not MultiKueue's after all: its pods are here
            return ctx.session
        where.say()
    return where.session


def _interrupted(ctx: Context, ref: Ref, how: KeyboardInterrupt) -> int:
    """Ctrl-C while waiting: ask whether to cancel, never leave a job behind silently. SIGTERM
    asks nothing (no one is there to answer)."""
    answer = ""
    terminated = isinstance(how, Terminated)
    if sys.stdin.isatty() and not terminated:
        try:
            answer = input("\n" + printable(f"interrupted: cancel {ref}? [y/N] "))
            answer = answer.strip().lower()
        except (EOFError, KeyboardInterrupt):
            answer = ""
    if answer in ("y", "yes"):
        with cluster_errors():
            lifecycle.cancel(ctx.session, ref)
        say(f"{ref}: cancelled", err=True)
    else:
        say(err=True)
        cancel = f"kfcompile cancel {ref.name} -n {ref.namespace}"
        say(f"{ref} keeps running; cancel it with: {cancel}", err=True)
    return TERMINATED if terminated else INTERRUPTED


def cmd_status(args: argparse.Namespace) -> int:
    ctx = Context(args)
    with cluster_errors():
        obs, far = observed(ctx, args, ctx.find_job(args.name, args.kind))
    if args.output == "json":
        # json escapes every control and non-ASCII character itself (ensure_ascii): what
        # the cluster said, as it said it, harmless on a terminal
        doc = _status_doc(obs)
        doc = doc if far is None else {**doc, "multikueue": far.as_json()}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    state = obs.state
    say(f"{obs.ref}: {state.state.value} ({state.reason}) {state.message}".rstrip())
    if far is not None:
        say(f"cluster: {far.dispatch}")
        if far.problem:
            say(f"worker: {far.problem}")
    say(f"nodes: {obs.nodes_ready}/{obs.nodes_total} ready")
    progress = obs.progress
    if progress is None:
        say(f"progress: {absent_reason(obs.ref.kind)}")
    else:
        say(f"progress: {progress.line(datetime.now(UTC), metrics=len(progress.metrics))}")
    if obs.nodes:
        say(f"  {'rank':<5} {'pod':<40} {'phase':<10} {'ready':<6} {'restarts':<9} reason")
        for n in obs.nodes:
            rank = "-" if n.rank is None else str(n.rank)
            ready = "yes" if n.ready else "no"
            say(f"  {rank:<5} {n.pod:<40} {n.phase:<10} {ready:<6} {n.restarts:<9} {n.reason}")
    if obs.events:
        say("events:")
        for event in obs.events:
            say(f"  {event}")
    if far is not None and far.events:
        say(f"events on worker cluster {far.cluster}:")
        for event in far.events:
            say(f"  {event}")
    return 0


def _status_doc(obs: Observation) -> dict[str, Any]:
    return {
        "kind": obs.ref.kind,
        "name": obs.ref.name,
        "namespace": obs.ref.namespace,
        "state": obs.state.state.value,
        "reason": obs.state.reason,
        "message": obs.state.message,
        "nodesReady": obs.nodes_ready,
        "nodesTotal": obs.nodes_total,
        "nodes": [
            {
                "rank": n.rank,
                "pod": n.pod,
                "phase": n.phase,
                "ready": n.ready,
                "restarts": n.restarts,
                "reason": n.reason,
            }
            for n in obs.nodes
        ],
        "events": [attrs.asdict(e) for e in obs.events],
        "progress": None if obs.progress is None else obs.progress.as_json(datetime.now(UTC)),
    }


def cmd_wait(args: argparse.Namespace) -> int:
    ctx = Context(args)
    with cluster_errors():
        job = ctx.find_job(args.name, args.kind)
        ref = Ref.of(job)
        shown, pods_on = _Progress(), WorkerPods(ctx, args)  # judged by a worker's pods
        try:
            obs = lifecycle.wait(
                ctx.session, ref, args.until, timeout=args.timeout, on_change=shown, pods_on=pods_on
            )
        finally:
            shown.close()
        far = pods_on.found  # where it ran (said); no request unless MultiKueue manages it
        if far is None and (far := remote(ctx, args, job)) is not None:
            far.say()
        if args.save_logs and obs.state.finished:
            _save_logs(ctx.session if far is None else far.session, ref, args.save_logs)
    return _finish(obs)


def cmd_logs(args: argparse.Namespace) -> int:
    """Exit status 1 when no line could be read and a rank is not going to start (or is gone
    with its job); a rank that will start soon only says so."""
    ctx = Context(args)
    told: list[Waiting] = []

    def tell(notice: Waiting) -> None:
        told.append(notice)
        _say_waiting(notice)

    with cluster_errors():
        job = ctx.find_job(args.name, args.kind)
        ref = Ref.of(job)
        far = remote(ctx, args, job)
        session = ctx.session
        if far is not None and far.cluster is None and not far.problem and args.follow:
            worker = _dispatched(ctx, ref, args, WorkerPods(ctx, args))  # then follow
            if worker is None:
                return 1
            session = worker
        elif far is not None:  # MultiKueue runs it on a worker: its pods are there
            far.say()
            if far.session is None:
                return 1
            session = far.session
        lines = lifecycle.logs(
            session,
            ref,
            rank=None if args.all_ranks else args.rank,
            follow=args.follow,
            since_seconds=None if args.since is None else max(1, int(args.since)),
            tail_lines=args.tail,
            on_waiting=tell,
        )
        try:
            printed = _print_logs(lines, prefix=args.all_ranks, follow=args.follow)
        except lifecycle.NoSuchRank as exc:
            raise UsageError(f"--rank {args.rank}: {exc}") from None
    return 1 if printed == 0 and any(n.stuck for n in told) else 0


def cmd_events(args: argparse.Namespace) -> int:
    ctx = Context(args)
    with cluster_errors():
        obs, far = observed(ctx, args, ctx.find_job(args.name, args.kind))
    for event in obs.events:
        say(str(event))
    if far is not None:
        far.say()
        for event in far.events:
            say(f"[{far.cluster}] {event}")
    if not obs.events and (far is None or not far.events):
        say(f"{obs.ref}: no events", err=True)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    ctx = Context(args)
    with cluster_errors():
        try:
            job = ctx.find_job(args.name, args.kind)
        except lifecycle.JobNotFound as exc:
            say(f"{exc}: nothing to cancel", err=True)
            return 0
        ref = Ref.of(job)
        # a job MultiKueue dispatched: the wait follows it to the worker the user mapped
        mapped = followed_workers(ctx, args) if args.wait and multikueue_managed(job) else None
        done = lifecycle.cancel(
            ctx.session,
            ref,
            wait_gone=args.wait,
            timeout=args.timeout,
            on_change=_waiting_on("cancel --wait"),
            job=job,
            workers=mapped,
            reach=reach_worker(args, ref),
        )
    if not done.existed:
        say(f"{ref}: already gone, nothing to cancel", err=True)
    elif not args.wait:
        say(f"{ref}: deleting")
    elif done.all_gone:
        say(f"{ref}: deleted, with all its pods")
    else:
        say(f"{ref}: deleted, with all its pods on this cluster")
    far = done.mirror
    if far is not None and far.checked and far.cluster is not None:
        say(f"{ref}: its mirror on worker cluster {far.cluster} is gone, with its pods")
    elif far is not None:
        why = far.problem or "the job was never dispatched to a worker cluster"
        say(f"kfcompile: not checked on a worker cluster: {why}", err=True)
    return 0


def _set_suspended(args: argparse.Namespace, value: bool) -> int:
    ctx = Context(args)
    with cluster_errors():
        ref = ctx.find(args.name, args.kind)
        lifecycle.set_suspended(ctx.session, ref, value)
    say(f"{ref}: {'suspended' if value else 'resumed'}")
    return 0


def cmd_suspend(args: argparse.Namespace) -> int:
    return _set_suspended(args, True)


def cmd_resume(args: argparse.Namespace) -> int:
    return _set_suspended(args, False)


def _helper_timeout(args: argparse.Namespace) -> float:
    """How long the sync helper pod may take to start: ``--timeout``, the one its message
    names."""
    from kfcompile.lifecycle.sync import SYNC_TIMEOUT

    return SYNC_TIMEOUT if args.timeout is None else float(args.timeout)


def cmd_sync(args: argparse.Namespace) -> int:
    ctx = Context(args)
    move = lifecycle.sync_up if args.direction == "up" else lifecycle.sync_down
    with cluster_errors():
        done = move(
            ctx.session,
            ctx.files,
            namespace=ctx.namespace,
            pvc=args.pvc,
            path=args.path,
            local=args.local,
            image=args.sync_image,
            timeout=_helper_timeout(args),
        )
    arrow = f"{args.local} -> {args.pvc}:{args.path}"
    if args.direction == "down":
        arrow = f"{args.pvc}:{args.path} -> {args.local}"
    say(f"{arrow}: {done.files} files, {done.size} bytes")
    return 0

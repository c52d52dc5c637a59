"""Following a job that Kueue's MultiKueue dispatched from the manager cluster (the one the
command connects to) to the worker cluster that runs it: which worker (from the job's Workload
on the manager, ``lifecycle.multikueue``), and a session to it, made only when needed.

A worker cluster's name (``status.clusterName``, a MultiKueueCluster's name) is the manager's
word, so it is followed only to the kubeconfig context the user mapped it to for this manager:
``--cluster NAME=CONTEXT`` (repeatable), or the mapping file (``kfcompile_local.clusters``),
in the same kubeconfig as the manager's context; never to a context merely named like it. An
unmapped worker, or one its context does not reach, is said once with how to fix it, and
nothing is asked of any other cluster.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import attrs
from attrs import evolve, frozen

from kfcompile import lifecycle
from kfcompile.cli.common import Failed, UsageError, say
from kfcompile.cli.context import Context
from kfcompile.lifecycle import Event, Observation, Session
from kfcompile.lifecycle.kueue import multikueue_managed
from kfcompile.lifecycle.multikueue import (
    Dispatch,
    Workers,
    find_mirror,
    on_worker,
    unreachable,
)
from kfcompile.lifecycle.ports import ApiError, Obj, Ref


def cluster_contexts(values: list[str] | None) -> dict[str, str]:
    """``--cluster NAME=CONTEXT`` options as a mapping; a malformed one is a usage error."""
    found: dict[str, str] = {}
    for value in values or []:
        name, sep, context = value.partition("=")
        if not (sep and name.strip() and context.strip()):
            raise UsageError(f"--cluster {value!r}: expected WORKER=CONTEXT, e.g. worker1=ctx-1")
        found[name.strip()] = context.strip()
    return found


@frozen(repr=False, eq=False)
class Remote:
    """Where a MultiKueue job runs, as this command can reach it: the dispatch read on the
    manager, the worker's session (None: not dispatched yet, unmapped, unreachable, or what is
    there is not this job's mirror), MultiKueue's mirror of the job read there (None: not
    there), and, when the worker cannot be read, why, in one line for the user."""

    ref: Ref
    dispatch: Dispatch
    session: Session | None
    problem: str = ""
    mirror: Obj | None = None
    events: tuple[Event, ...] = ()  # the job's and its pods' on the worker, once read

    @property
    def cluster(self) -> str | None:
        return self.dispatch.cluster

    @property
    def pods(self) -> Session | None:
        """The worker's session once its mirror of the job is there (its pods are the job's)."""
        return self.session if self.mirror is not None else None

    def say(self) -> None:
        """The dispatch on stderr, and why the worker cannot be read if it cannot."""
        say(f"kfcompile: {self.ref.name}: {self.dispatch}", err=True)
        if self.problem:
            say(f"kfcompile: {self.problem}", err=True)

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "workload": self.dispatch.workload,
            "kueueApi": self.dispatch.api,
            "admissionChecks": [
                {"name": c.name, "state": c.state, "message": c.message}
                for c in self.dispatch.checks
            ],
            "workerReachable": self.session is not None,
            "workerProblem": self.problem or None,
            "workerEvents": [attrs.asdict(e) for e in self.events],
        }


def remote(ctx: Context, args: argparse.Namespace, job: Obj) -> Remote | None:
    """Where MultiKueue runs ``job`` (None: MultiKueue does not manage it), with its mirror
    read on the worker when that is mapped and reached (``multikueue.find_mirror``)."""
    ref = Ref.of(job)
    found = find_mirror(ctx.session, job, followed_workers(ctx, args), reach_worker(args, ref))
    if found is None:
        return None
    dispatched = found.dispatch or Dispatch("", None)
    return Remote(ref, dispatched, found.session, found.problem, found.obj)


def workers(ctx: Context, args: argparse.Namespace) -> Workers:
    """The worker clusters mapped for this command's manager context: the mapping file's and
    ``--cluster``'s (which win)."""
    from kfcompile_local.clusters import mapped_workers

    given = cluster_contexts(getattr(args, "cluster", None))
    return mapped_workers(ctx.kube_context, given, how="--cluster NAME=CONTEXT")


def followed_workers(ctx: Context, args: argparse.Namespace) -> Workers:
    """``workers``, or, when the mapping file cannot be read, ``--cluster``'s alone with why
    (``Workers.problem``): a command that can do without the worker still does its work."""
    try:
        return workers(ctx, args)
    except lifecycle.ClusterError as exc:
        given = cluster_contexts(getattr(args, "cluster", None))
        why = "; ".join(str(exc).splitlines())
        return Workers(ctx.kube_context, given, "--cluster NAME=CONTEXT", problem=why)


def reach_worker(args: argparse.Namespace, ref: Ref) -> Callable[[str, str], Session]:
    """A worker's session through its mapped ``context``, as this command's options reach a
    cluster (``lifecycle.cancel``'s ``reach``, for the job ``ref``): one it cannot reach is a
    ``ClusterError`` saying why."""

    def reach(cluster: str, context: str) -> Session:
        worker_args = argparse.Namespace(**{**vars(args), "context": context})
        try:
            return Context(worker_args).session
        except Failed as exc:
            raise lifecycle.ClusterError(
                unreachable(ref, cluster, context, " ".join(exc.problems))
            ) from None

    return reach


def observed(ctx: Context, args: argparse.Namespace, job: Obj) -> tuple[Observation, Remote | None]:
    """The job's state and events on the manager (the command's cluster), and, for a job
    MultiKueue dispatched to a worker this command reaches, its state and nodes as the pods of
    its mirror there say (``on_worker``: as on one cluster), and its events there
    (``Remote.events``)."""
    obs = lifecycle.status(ctx.session, job)  # the job as read: not read again
    far = remote(ctx, args, job)
    if far is None or far.session is None or far.mirror is None:
        return obs, far
    try:
        there = on_worker(job, far.session, far.mirror)
    except (lifecycle.ClusterError, ApiError) as exc:  # the manager's answer still stands
        return obs, evolve(far, problem=f"worker cluster {far.cluster}: {exc}")
    judged = evolve(obs, state=there.state, nodes=there.nodes, nodes_total=there.nodes_total)
    return judged, evolve(far, events=there.events)


class WorkerPods:
    """For ``wait``: the session whose pods judge the job as last seen (``lifecycle.wait``'s
    ``pods_on``): on a MultiKueue manager, once the job is dispatched to a mapped worker that
    has its mirror, the worker's (said once, ``found``); until then, and for any other job,
    the manager's."""

    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        self.ctx, self.args = ctx, args
        self.found: Remote | None = None

    def __call__(self, job: Obj) -> Session:
        if not multikueue_managed(job):
            return self.ctx.session
        if self.found is None:
            far = remote(self.ctx, self.args, job)
            if far is not None and far.cluster and (far.mirror or far.session is None):
                self.found = far  # the worker's mirror, or why the worker cannot be read
                far.say()
        return (self.found.pods if self.found else None) or self.ctx.session

"""A small service on kfcompile's public API: a pool of single-GPU workers, each its own
TrainJob queued through Kueue with its own token in a Secret the job owns, reconciled from one
watch of every job (``lifecycle.watch_jobs``) instead of a poll of each.

    python examples/service.py --workers 3 --queue team-a --archive logs/ [--kubeconfig FILE]

What it does, one method of ``Service`` each:

1. ``provision``: submits each worker (``lifecycle.submit`` renders the spec for the target and
   creates the token Secret first, owned by the job: deleting the job deletes its token). A
   worker already there is left as it is, so a restarted service picks its pool up again.
2. ``on_event``: prints each change of a worker's state as the watch reports it (queued,
   admitted, running, finished, deleted); when a worker ends, its logs (every rank) go to
   ``ARCHIVE/<worker>.log``. Once every worker has ended, the service stops.
3. ``cancel``: on a request (a line ``cancel NAME`` on stdin, read by a thread as a service's
   request handler would be), the worker's logs so far are archived and the worker deleted;
   the watch then reports it gone.

``--dry-run`` prints the objects of each worker (``kfcompile.render``) instead, without a
cluster. Exit status 1 when a worker failed.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import threading
from collections.abc import Iterable, Sequence
from contextlib import closing
from pathlib import Path
from typing import TextIO

import kfcompile
from kfcompile import lifecycle
from kfcompile.lifecycle.ports import Ref

SERVICE_LABEL = "example.kfcompile.dev/service"  # which service's workers a job is
TOKEN = "WORKER_TOKEN"  # the variable each worker reads its token from


def worker_spec(name: str, args: argparse.Namespace) -> kfcompile.JobSpec:
    """One worker: one node, one GPU, queued through Kueue, its token from a Secret."""
    return kfcompile.JobSpec(
        name=name,
        image=args.image,
        command=("python", "-m", "worker"),
        num_nodes=1,
        gpus_per_node=1,
        queue=args.queue,
        labels={SERVICE_LABEL: args.service},
        secret_env=(TOKEN,),
    )


class Service:
    """The reconciler: the workers it runs, and what it does on each event."""

    def __init__(
        self, session: lifecycle.Session, namespace: str, args: argparse.Namespace
    ) -> None:
        self.session = session
        self.namespace = namespace
        self.args = args
        self.archive = Path(args.archive)
        self.workers = [f"{args.service}-{i}" for i in range(args.workers)]
        self.ended: dict[str, kfcompile.State | None] = {}  # None: cancelled (deleted)
        self.lock = threading.Lock()  # the request thread and the watch share what ended

    @property
    def selector(self) -> str:
        """This service's workers, among every job kfcompile created."""
        managed = f"{lifecycle.MANAGED_BY_LABEL}={lifecycle.MANAGER}"
        return f"{managed},{SERVICE_LABEL}={self.args.service}"

    def provision(self) -> None:
        for name in self.workers:
            token = secrets.token_urlsafe(24)  # each worker its own, never printed
            done = lifecycle.submit(
                self.session,
                worker_spec(name, self.args),
                self.args.target,
                namespace=self.namespace,
                environ={TOKEN: token},
            )
            say(f"{name}: {'submitted' if done.created else 'already there'}")

    def run(self) -> int:
        """Reconcile from the watch until every worker has ended."""
        self.provision()
        events = lifecycle.watch_jobs(self.session, self.namespace, self.selector)
        with closing(events):
            for event in events:
                self.on_event(event)
                if self.all_ended():
                    break
        failed = sorted(n for n, s in self.ended.items() if s is kfcompile.State.FAILED)
        say(f"all {len(self.workers)} workers ended; failed: {', '.join(failed) or 'none'}")
        return 1 if failed else 0

    def on_event(self, event: lifecycle.JobEvent) -> None:
        name, state = event.ref.name, event.state
        say(f"{name}: {event.what.value} ({state.state.value} {state.reason})")
        if event.what is lifecycle.Happened.DELETED:
            with self.lock:
                self.ended.setdefault(name, None)
        elif state.finished:  # finished just now, or already when the service started
            self.archive_logs(event.ref)
            with self.lock:
                self.ended[name] = state.state

    def all_ended(self) -> bool:
        with self.lock:
            return all(name in self.ended for name in self.workers)

    def archive_logs(self, ref: Ref) -> None:
        self.archive.mkdir(parents=True, exist_ok=True)
        path = self.archive / f"{ref.name}.log"
        with path.open("w", encoding="utf-8") as out:
            for line in lifecycle.logs(self.session, ref):
                out.write(f"[rank {line.rank}] {line.text}\n")
        say(f"{ref.name}: logs archived to {path}")

    def cancel(self, name: str) -> None:
        if name not in self.workers:
            say(f"cancel {name}: not one of this service's workers")
            return
        ref = lifecycle.locate(self.session, self.namespace, name, "TrainJob")
        self.archive_logs(ref)
        # Said first: the job goes at once (Background) and the service may end with it.
        say(f"{name}: cancel requested")
        lifecycle.cancel(self.session, ref)

    def serve_requests(self, requests: Iterable[str]) -> None:
        """``cancel NAME`` lines, until the input ends."""
        for request in requests:
            match request.split():
                case ["cancel", name]:
                    try:
                        self.cancel(name)
                    except (lifecycle.ClusterError, lifecycle.ApiError) as exc:
                        say(f"cancel {name}: {exc}")
                case []:
                    pass
                case _:
                    say(f"unknown request {request.strip()!r}: expected 'cancel NAME'")


_printing = threading.Lock()


def say(text: str, out: TextIO = sys.stdout) -> None:
    with _printing:
        print(f"service: {text}", file=out, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Run a pool of single-GPU workers on Kubeflow.")
    p.add_argument("--service", default="svc", help="name of the pool (its workers' prefix)")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--queue", default="team-a", help="Kueue LocalQueue")
    p.add_argument("--image", default="pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime")
    p.add_argument("--target", default="trainjob/v2.3", choices=list(kfcompile.TARGETS))
    p.add_argument("--archive", default="archive", help="directory for the workers' logs")
    p.add_argument("--kubeconfig", help="default: as kubectl finds it")
    p.add_argument("--dry-run", action="store_true", help="print the objects, talk to no cluster")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.dry_run:
        items = []
        for i in range(args.workers):
            items += kfcompile.render(worker_spec(f"{args.service}-{i}", args), args.target)
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, indent=2)
        print()
        return 0
    import kfcompile_kube

    try:  # a kubeconfig that is missing or broken is one line too (ConfigError)
        session, connection = kfcompile_kube.session(args.kubeconfig)
        service = Service(session, connection.namespace, args)
        threading.Thread(target=service.serve_requests, args=(sys.stdin,), daemon=True).start()
        return service.run()
    except (lifecycle.ClusterError, kfcompile.KfcompileError, lifecycle.ApiError) as exc:
        say(str(exc), sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""What a cluster command stands on: its session (the adapter connected), the namespace it acts
in, the target it renders for, and how API trouble is said. Only a cluster command's module
imports this one, and with it the adapter (the kubernetes client), when the command runs: as
part of its start-up (``cli.run``)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import kfcompile_kube
import kfcompile_local
from kfcompile import lifecycle
from kfcompile.cli.common import Failed, say
from kfcompile.lifecycle import ClusterError, locate
from kfcompile.lifecycle.ports import ApiError, LocalFiles, Obj, Ref, Transient
from kfcompile.spec.errors import KfcompileError

if TYPE_CHECKING:
    from kfcompile.lifecycle.cluster_target import Found


class Context:
    """The session for this command and the namespace it acts in."""

    def __init__(self, args: argparse.Namespace, spec_namespace: str | None = None) -> None:
        try:
            self.session, connection = kfcompile_kube.session(
                args.kubeconfig,
                args.context,
                request_timeout=args.request_timeout,
                retry_for=RETRY_FOR,
                on_retry=_retrying,
                cache_discovery=True,  # kubectl's too: a cold command skips its round trips
            )
        except kfcompile_kube.ConfigError as exc:
            raise Failed("kfcompile", str(exc).splitlines()) from None
        self.files: LocalFiles = kfcompile_local.TarFiles()
        self.kube_context = connection.context  # the manager's, on a MultiKueue manager
        # Namespace: the flag, then the spec, then the kubeconfig context, then "default".
        flag = getattr(args, "namespace", None)  # validate --cluster has none
        self.namespace: str = flag or spec_namespace or connection.namespace

    def find(self, name: str, kind: str | None = None) -> Ref:
        return locate(self.session, self.namespace, name, kind)

    def find_job(self, name: str, kind: str | None = None) -> Obj:
        """The job itself, as ``find`` reads it (a command that needs it reads it once)."""
        return lifecycle.find(self.session, self.namespace, name, kind)


RETRY_FOR = 60.0  # seconds of transient API trouble a command rides out


def _retrying(what: str, error: ApiError) -> None:
    """Said once per call: transient trouble is ridden out for RETRY_FOR; a watch that keeps
    expiring (its message says what is done) for as long as the command waits."""
    if isinstance(error, Transient):
        say(f"kfcompile: {what}: {error}; retrying for up to {RETRY_FOR:g}s", err=True)
    else:
        say(f"kfcompile: {what}: {error}", err=True)


@contextmanager
def cluster_errors() -> Iterator[None]:
    """Lifecycle and API errors as one line each, exit status 1; never a traceback."""
    try:
        yield
    except (ClusterError, KfcompileError) as exc:
        raise Failed("kfcompile", str(exc).splitlines()) from None
    except ApiError as exc:
        raise Failed("kfcompile", [str(exc)]) from None


def target_for(ctx: Context, requested: str | None) -> Found:
    """The target given with ``--target``, or the one detected from the cluster (said on
    stderr, with the evidence; a newer Trainer than kfcompile knows is said too)."""
    from kfcompile.lifecycle.cluster_target import Found  # the targets' registry: not for status

    if requested is not None:
        return Found(requested, "given with --target")
    found = lifecycle.detect_target(ctx.session)
    line = f"kfcompile: target {found.target}, detected from the cluster: {found.evidence}"
    if found.newer:
        line += (
            f"; a release newer than kfcompile knows, so {found.target} (the newest shape it "
            "knows) is used only once the job fits the TrainJob CRD the cluster serves"
        )
    say(line, err=True)
    return found

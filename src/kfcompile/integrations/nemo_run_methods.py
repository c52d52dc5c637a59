"""The methods NeMo-Run 0.11's ``KubeflowExecutor`` has besides the ``Executor`` interface
(``nemo_run/core/execution/kubeflow.py``), with its signatures and meanings, on kfcompile's
lifecycle: ``launch``, ``status``, ``cancel``, ``fetch_logs``, ``get_job_body``, ``package``
and ``materialize_launch_script``; and NeMo-Run's log layout, which ``fetch_logs`` and the
scheduler's ``log_iter`` share (``tee``).

NeMo-Run's log layout: every rank's lines go to ``<job_dir>/log-allranks_0.out`` (which
Megatron-Bridge's CI parses), the console shows rank 0 and the last rank only.
"""

import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from nemo_run.core.execution.kubeflow import KubeflowExecutor, KubeflowJobState
from nemo_run.core.packaging.base import Packager
from torchx.specs import Role

import kfcompile
from kfcompile import lifecycle
from kfcompile.integrations.launchers import NEMO_RUN, configured, reworded
from kfcompile.integrations.nemo_run_task import ExecutorError
from kfcompile.lifecycle.cluster_target import Found
from kfcompile.lifecycle.kueue import multikueue_managed
from kfcompile.lifecycle.multikueue import Workers, running_on, unreachable
from kfcompile.lifecycle.pod_logs import ranks
from kfcompile.lifecycle.ports import ApiError, Obj, Ref
from kfcompile.progress import Progress
from kfcompile.spec.errors import Problem
from kfcompile.terminal import log_line, printable_lines

ALL_RANKS = "log-allranks_0.out"  # NeMo-Run's file of every rank's lines, in the job dir
UID = re.compile(r"-[0-9a-f]{6}$")  # the suffix ``k8s_job_name`` puts after the task's name
log = logging.getLogger("kfcompile.integrations.nemo_run")

# kfcompile's states as NeMo-Run's: a job that exists and has not started is CREATED.
STATES: Mapping[kfcompile.State, KubeflowJobState] = {
    kfcompile.State.PENDING: KubeflowJobState.CREATED,
    kfcompile.State.SUSPENDED: KubeflowJobState.CREATED,
    kfcompile.State.RUNNING: KubeflowJobState.RUNNING,
    kfcompile.State.SUCCEEDED: KubeflowJobState.SUCCEEDED,
    kfcompile.State.FAILED: KubeflowJobState.FAILED,
    kfcompile.State.DELETING: KubeflowJobState.UNKNOWN,
}


def task_of(job_name: str) -> str:
    """The task a job was made for, from its name (``<task>-<6 hex>``)."""
    return UID.sub("", job_name) or job_name


def tee(
    lines: Iterable[lifecycle.LogLine], job_dir: str | None, task: str, shown: Sequence[int]
) -> Iterator[lifecycle.LogLine]:
    """NeMo-Run's layout: every line to ``<job_dir>/log-allranks_0.out`` as ``<task>/<rank>
    text``, the lines of the ranks in ``shown`` (rank 0 and the last) passed on."""
    if not job_dir:
        yield from (line for line in lines if line.rank in shown)
        return
    os.makedirs(job_dir, exist_ok=True)
    with open(os.path.join(job_dir, ALL_RANKS), "a", encoding="utf-8") as out:
        for line in lines:
            out.write(f"{task}/{line.rank} {line.text}\n")
            out.flush()
            if line.rank in shown:
                yield line


def shown_ranks(nodes: int) -> tuple[int, ...]:
    """Rank 0 (setup and config) and the last (Megatron's per-step loss), as NeMo-Run shows."""
    return tuple(sorted({0, max(nodes - 1, 0)}))


# --- the cluster --------------------------------------------------------------------------------


def connect() -> tuple[lifecycle.Session, str]:
    """A lifecycle session on the cluster of the current kubeconfig (or the pod's service
    account), as KubeflowExecutor finds it, and the kubeconfig's namespace. Every scheduler
    makes its own: the state is on the cluster. None configured: ``ExecutorError``, saying
    how in NeMo-Run's terms (``KUBECONFIG``)."""
    import kfcompile_kube

    try:
        wired, connection = kfcompile_kube.session()
    except kfcompile_kube.ConfigError as exc:
        raise ExecutorError([Problem("", reworded(str(exc), NEMO_RUN))]) from None
    return wired, connection.namespace


def session() -> lifecycle.Session:
    return connect()[0]


def detect_target() -> Found:
    """The target of the cluster of the current kubeconfig, said in the log; with no cluster
    configured (a dry run without one), the default, said too. ``ExecutorError`` at
    ``target`` when the cluster cannot be reached or cannot tell."""
    if not configured(None, os.environ):
        log.warning(
            "target %s (the default): no cluster configured to detect it from; give "
            "KfcompileExecutor(target=...) to choose",
            kfcompile.DEFAULT_TARGET,
        )
        return Found(kfcompile.DEFAULT_TARGET, "the default")
    try:
        found = lifecycle.detect_target(session())
    except ExecutorError as exc:
        raise ExecutorError([Problem("target", f"not given, and {exc}")]) from None
    except (lifecycle.ClusterError, ApiError) as exc:
        said = printable_lines(reworded(str(exc), NEMO_RUN))  # the server's words among them
        raise ExecutorError([Problem("target", said)]) from None
    log.info("target %s, detected from the cluster: %s", found.target, found.evidence)
    return found


class _Executor(Protocol):
    """What the methods need of ``KfcompileExecutor``, which they are mixed into."""

    namespace: str
    workdir_pvc: str | None
    env_vars: dict[str, str]
    job_dir: str  # set by ``assign``

    @property
    def code_dir(self) -> str: ...
    def job_spec(self, role: Role, name: str) -> kfcompile.JobSpec: ...
    def chosen_target(self) -> Found: ...
    def k8s_job_name(self, fallback: str) -> str: ...
    def stage_workdir(self) -> None: ...
    def copy_to_workspace(
        self, local_path: str, remote_path: str, label: str = "datamover"
    ) -> None: ...


class NemoRunMethods:
    """``KubeflowExecutor``'s own methods, for ``KfcompileExecutor``."""

    # --- the job body and its submission ------------------------------------------------------

    def get_job_body(self: _Executor, name: str, command: list[str]) -> dict[str, Any]:
        """The job object kfcompile creates for ``command`` under the name ``name``, for
        ``target`` (KubeflowExecutor's is always a TrainJob)."""
        spec = _spec_of(self, name, command)
        job: dict[str, Any] = kfcompile.render(spec, self.chosen_target().target)[-1]
        return job

    def launch(
        self: _Executor,
        name: str,
        cmd: list[str],
        wait: bool = False,
        timeout: int = 300,
        poll_interval: int = 10,
    ) -> tuple[str, KubeflowJobState]:
        """Submit the job for ``cmd`` as ``<name>-<6 hex>`` and return ``(job name, state)``:
        ``CREATED``, or with ``wait`` the state once it runs or ends. ``RuntimeError`` if it
        does neither within ``timeout`` seconds. The wait watches the job (``poll_interval``
        is kept for the signature). The same job submitted again creates nothing; a job of
        that name that kfcompile did not make from this spec is an error, never replaced."""
        job_name = self.k8s_job_name(name)
        spec = _spec_of(self, job_name, cmd)
        cluster = session()
        chosen = self.chosen_target()
        submitted = lifecycle.submit(
            cluster,
            spec,
            chosen.target,
            namespace=self.namespace,
            environ=os.environ,
            against=chosen.crd,
        )
        if not wait:
            return job_name, KubeflowJobState.CREATED
        try:
            seen = lifecycle.wait(cluster, submitted.ref, "running", timeout=float(timeout))
        except lifecycle.TimedOut as exc:
            message = f"{job_name} did not reach RUNNING within {timeout}s: {exc}"
            raise RuntimeError(printable_lines(message)) from None
        return job_name, STATES[seen.state.state]

    def status(self: _Executor, job_name: str) -> KubeflowJobState | None:
        """The job's state (from its conditions and pods), or None when there is no such job."""
        found = _located(self, job_name)
        if found is None:
            return None
        return STATES[lifecycle.status(*found).state.state]

    def progress(self: _Executor, job_name: str) -> Progress | None:
        """What the job's training process last reported (Trainer v2.2+ with the TrainJobStatus
        gate: percentage, time left, metrics, when), or None: no such job, or nothing reported.
        Not KubeflowExecutor's: its status has no room for it."""
        found = _located(self, job_name)
        return None if found is None else lifecycle.status(*found).progress

    def cancel(
        self: _Executor,
        job_name: str,
        wait: bool = False,
        timeout: int = 300,
        poll_interval: int = 5,
    ) -> bool | None:
        """Delete the job. With ``wait``: True once the job and its pods are gone, False if
        they are still there after ``timeout`` seconds. None when not waiting or when there was
        no such job. The wait watches (``poll_interval`` is kept for the signature).

        On a Kueue MultiKueue manager the pods run on the worker cluster the job was dispatched
        to, in Kueue's mirror of the job: the wait goes on there, within the same ``timeout``,
        through the kubeconfig context the cluster mapping file maps that worker to for the
        current context (``$KFCOMPILE_CLUSTERS``, else ``~/.config/kfcompile/clusters.yaml``,
        as the ``kfcompile`` CLI reads it); nothing is deleted there. A worker that is not
        mapped, cannot be reached, or holds no mirror of this job is never waited on: False,
        with a warning saying why."""
        found = _found(self, job_name)
        if found is None:
            return None
        cluster, job = found
        ref = Ref.of(job)
        far = _followed(ref) if wait and multikueue_managed(job) else {}
        try:
            done = lifecycle.cancel(
                cluster, ref, wait_gone=wait, timeout=float(timeout), job=job, **far
            )
        except lifecycle.StillDeleting as exc:
            log.warning("%s", printable_lines(str(exc)))
            return False
        if not wait:
            return None
        if done.mirror is not None and not done.mirror.checked:
            said = f"{ref}: deleted; not checked on a worker cluster: {done.mirror.problem}"
            log.warning("%s", said)
            return False
        return True

    # --- logs -----------------------------------------------------------------------------------

    def fetch_logs(
        self: _Executor,
        job_name: str,
        stream: bool = False,
        lines: int = 100,
        timeout: int = 60,
    ) -> Iterable[str]:
        """Every rank's log into ``<job_dir>/log-allranks_0.out``; the lines of rank 0 and of
        the last rank returned (``stream``: followed until the job ends). As in NeMo-Run 0.11,
        the whole log is read (``lines`` and ``timeout`` are kept for the signature)."""
        found = _located(self, job_name)
        if found is None:
            return
        cluster, ref = found
        nodes = len(ranks(cluster, ref))
        task = getattr(self, "job_name", "") or task_of(job_name)
        read = lifecycle.logs(pods_session(cluster, ref), ref, follow=stream)
        terminal = sys.stdout.isatty()  # what NeMo-Run prints: escaped there, as `logs` does
        for line in tee(read, self.job_dir, task, shown_ranks(nodes)):
            yield log_line(line.text, terminal)

    # --- the work directory ---------------------------------------------------------------------

    def package(self: _Executor, packager: Packager, job_name: str) -> None:
        """Copy the job directory (``workdir_local_path`` merged in) to ``code_dir`` on
        ``workdir_pvc``; nothing when it is unset. The claim is mounted by the job itself."""
        if not self.workdir_pvc or not self.job_dir:
            return
        self.stage_workdir()
        self.copy_to_workspace(self.job_dir, self.code_dir)

    def materialize_launch_script(self, cmd: list[str], max_retries: int = 0) -> None:
        """``<job_dir>/launch.sh`` exactly as KubeflowExecutor writes it (its own template):
        kfcompile's job runs the command itself, so only callers that ship the file use it."""
        KubeflowExecutor.materialize_launch_script(self, cmd, max_retries)


def _spec_of(executor: _Executor, name: str, command: list[str]) -> kfcompile.JobSpec:
    """The spec of ``command`` as NeMo-Run's packaging would have made it a role."""
    role = Role(name, "", entrypoint=command[0], args=list(command[1:]), env=executor.env_vars)
    return executor.job_spec(role, name)


def _found(executor: _Executor, job_name: str) -> tuple[lifecycle.Session, Obj] | None:
    """The job as read now, and the session it was read through (None: no such job)."""
    cluster = session()
    try:
        return cluster, lifecycle.find(cluster, executor.namespace, job_name)
    except lifecycle.JobNotFound:
        return None


def _followed(ref: Ref) -> dict[str, Any]:
    """``lifecycle.cancel``'s ``workers`` and ``reach`` for the job ``ref`` on a MultiKueue
    manager: the workers the mapping file maps for the current context (one it cannot read is
    said as the reason a worker is not followed), each reached through its context."""
    from kfcompile_local.clusters import mapped_workers

    context, reach = _mapping(ref)
    try:
        workers = mapped_workers(context)
    except lifecycle.ClusterError as exc:
        workers = Workers(context, problem="; ".join(str(exc).splitlines()))
    return {"workers": workers, "reach": reach}


def _mapping(ref: Ref) -> tuple[str | None, Callable[[str, str], lifecycle.Session]]:
    """The current kubeconfig context (the manager's: the mapping file maps workers per
    manager) and how a worker of the job ``ref`` is reached through the context it is mapped
    to: one that cannot be is a ``ClusterError`` saying why."""
    import kfcompile_kube

    manager = kfcompile_kube.connect()
    manager.close()  # only its context's name was wanted

    def reach(worker: str, context: str) -> lifecycle.Session:
        try:
            return kfcompile_kube.session(context=context)[0]
        except kfcompile_kube.ConfigError as exc:
            raise lifecycle.ClusterError(unreachable(ref, worker, context, str(exc))) from None

    return manager.context, reach


def _located(executor: _Executor, job_name: str) -> tuple[lifecycle.Session, Ref] | None:
    cluster = session()
    try:
        return cluster, lifecycle.locate(cluster, executor.namespace, job_name)
    except lifecycle.JobNotFound:
        return None


def pods_session(cluster: lifecycle.Session, ref: Ref) -> lifecycle.Session:
    """The session with the job's pods and logs: on a MultiKueue manager, the worker's, through
    the kubeconfig context the mapping file maps it to for the current context (the
    manager's)."""
    from kfcompile_local.clusters import mapped_workers

    context, reach = _mapping(ref)
    job = lifecycle.find(cluster, ref.namespace or "default", ref.name)
    return running_on(cluster, job, mapped_workers(context), reach)

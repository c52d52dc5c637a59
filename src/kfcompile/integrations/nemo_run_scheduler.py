"""The torchx scheduler NeMo-Run drives for ``KfcompileExecutor`` (entry point ``kfcompile_nemo``
in the group ``torchx.schedulers``).

NeMo-Run builds a new scheduler for every status, log and cancel, in whatever process asks, so
nothing is kept here: an app id is ``<namespace>:<job name>``, and everything else is read from
the cluster through ``kfcompile.lifecycle`` (state from conditions and pods, logs per rank over
the API, ``list`` of every job kfcompile created).
"""

import datetime
import json
import os
import tempfile
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nemo_run.config import get_nemorun_home
from nemo_run.run.torchx_backend.schedulers.api import SchedulerMixin
from torchx.schedulers.api import (
    AppDryRunInfo,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
)
from torchx.specs import AppDef, AppState, Role, RoleStatus, runopts

import kfcompile
from kfcompile import lifecycle
from kfcompile.integrations.nemo_run import SCHEDULER, KfcompileExecutor, connect
from kfcompile.integrations.nemo_run_methods import pods_session, shown_ranks, task_of, tee
from kfcompile.integrations.nemo_run_task import ExecutorError
from kfcompile.integrations.torchx import APP_STATES, log_lines, replicas, since_seconds
from kfcompile.lifecycle.pod_logs import ranks
from kfcompile.lifecycle.ports import Forbidden, Ref
from kfcompile.progress import note
from kfcompile.spec.errors import Problem
from kfcompile.terminal import printable

GONE = "the job is no longer on the cluster (cancelled or deleted)"


@dataclass
class KfcompileJobRequest:
    """What a dryrun made: the spec and the exact objects ``schedule`` will create."""

    app: AppDef
    executor: KfcompileExecutor
    spec: kfcompile.JobSpec
    objects: list[dict[str, Any]]
    written: str | None = None  # the file that holds the objects, for kubectl

    def __str__(self) -> str:
        from kfcompile.spec import yamlio

        target = self.executor.chosen_target().target
        head = f"# {target}: {self.spec.name} in namespace {self.executor.namespace}"
        if self.written:
            head += f"\n# written to {self.written}"
        return f"{head}\n{yamlio.dump_all(self.objects)}"


def write_objects(executor: KfcompileExecutor, name: str, objects: list[dict[str, Any]]) -> str:
    """The objects as ``<name>.yaml``, which ``kubectl apply -f`` takes (NeMo-Run's console
    wraps what it prints), beside the experiment's directory: ``run.run(dryrun=True)`` deletes
    that directory (``Experiment.dryrun(delete_exp_dir=True)``), the job dir with it; where
    they went."""
    from kfcompile.spec import yamlio

    folder = os.path.dirname(executor.experiment_dir.rstrip(os.sep))
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(yamlio.dump_all(objects))
    return path


def app_id(ref: Ref) -> str:
    return f"{ref.namespace}:{ref.name}"


class KfcompileScheduler(SchedulerMixin, Scheduler[dict[str, str]]):  # type: ignore[misc]
    def __init__(self, session_name: str, **kwargs: object) -> None:
        super().__init__(SCHEDULER, session_name)
        self._session: lifecycle.Session | None = None
        self._namespace = "default"

    # --- the cluster, made on first use -------------------------------------------------------

    def _cluster(self) -> lifecycle.Session:
        if self._session is None:
            self._session, self._namespace = connect()
        return self._session

    def _ref(self, app_id: str) -> Ref | None:
        namespace, sep, name = app_id.rpartition(":")
        if not sep or not namespace or not name:
            raise ValueError(f"{app_id!r}: not an app id of {SCHEDULER} (<namespace>:<name>)")
        try:
            return lifecycle.locate(self._cluster(), namespace, name)
        except lifecycle.JobNotFound:
            return None

    # --- torchx -------------------------------------------------------------------------------

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("job_dir", type_=str, help="The directory to place the job code and outputs.")
        return opts

    def _submit_dryrun(
        self, app: AppDef, cfg: KfcompileExecutor
    ) -> AppDryRunInfo[KfcompileJobRequest]:
        if not isinstance(cfg, KfcompileExecutor):
            raise TypeError(f"{SCHEDULER} runs KfcompileExecutor jobs, not {type(cfg).__name__}")
        if len(app.roles) != 1:
            raise ExecutorError([Problem("task", "one role per job (run.Experiment adds tasks)")])
        macros = cfg.macro_values()
        role = macros.apply(app.roles[0]) if macros else app.roles[0]
        spec = cfg.job_spec(role, cfg.k8s_job_name(role.name))
        objects = kfcompile.render(spec, cfg.chosen_target().target)
        experiment_dir = getattr(cfg, "experiment_dir", "")  # set by `assign`
        written = write_objects(cfg, spec.name, objects) if experiment_dir else None
        request = KfcompileJobRequest(app, cfg, spec, objects, written)
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo[KfcompileJobRequest]) -> str:
        request = dryrun_info.request
        executor = request.executor
        session = self._cluster()
        executor.package(executor.packager, executor.job_name)
        chosen = executor.chosen_target()
        submitted = lifecycle.submit(
            session,
            request.spec,
            chosen.target,
            namespace=executor.namespace,
            environ=os.environ,
            against=chosen.crd,
        )
        handle = app_id(submitted.ref)
        remember(handle, task=request.app.roles[0].name, job_dir=executor.job_dir)
        return handle

    def describe(self, app_id: str) -> DescribeAppResponse | None:
        ref = self._ref(app_id)
        if ref is None:  # app ids come from schedule: the job was there
            return DescribeAppResponse(app_id=app_id, state=AppState.CANCELLED, msg=GONE)
        obs = lifecycle.status(self._cluster(), ref)
        state = APP_STATES[obs.state.state]
        task = recalled(app_id).get("task") or task_of(ref.name)
        message = " ".join(p for p in (obs.state.reason, obs.state.message) if p)
        message += note(obs.progress, datetime.datetime.now(datetime.UTC))
        return DescribeAppResponse(
            app_id=app_id,
            state=state,
            msg=printable(message),  # what NeMo-Run's experiment status prints
            roles=[Role(name=task, image="", num_replicas=obs.nodes_total)],
            roles_statuses=[RoleStatus(task, replicas(obs, task, state))],
        )

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime.datetime | None = None,
        until: datetime.datetime | None = None,
        should_tail: bool = False,
        streams: Stream | None = None,
    ) -> Iterable[str]:
        """Rank ``k``'s log (stdout and stderr together, as Kubernetes keeps them), laid out as
        NeMo-Run does: into ``<job_dir>/log-allranks_0.out``, and for the console only when
        ``k`` is rank 0 or the last rank."""
        if until is not None:
            raise ValueError(f"{SCHEDULER}: logs cannot end at a time (until)")
        ref = self._ref(app_id)
        if ref is None:
            return []
        session = self._cluster()
        shown = shown_ranks(len(ranks(session, ref)))
        record = recalled(app_id)
        if k not in shown and not record.get("job_dir"):
            return []  # neither on the console nor in a file: not read
        read = lifecycle.logs(
            pods_session(session, ref),
            ref,
            rank=k,
            follow=should_tail,
            since_seconds=since_seconds(since),
        )
        task = record.get("task") or task_of(ref.name)
        lines = log_lines(tee(read, record.get("job_dir"), task, shown))
        return filter_regex(regex, lines) if regex else lines

    def _cancel_existing(self, app_id: str) -> None:
        ref = self._ref(app_id)
        if ref is not None:
            lifecycle.cancel(self._cluster(), ref)

    def list(self) -> list[ListAppResponse]:
        """Every job kfcompile created that these credentials may list: in all namespaces, or
        else in the kubeconfig's namespace."""
        session = self._cluster()
        try:
            jobs = lifecycle.list_jobs(session, None)
        except Forbidden:
            jobs = lifecycle.list_jobs(session, self._namespace)
        return [ListAppResponse(printable(app_id(j.ref)), APP_STATES[j.state.state]) for j in jobs]

    def _validate(self, app: AppDef, scheduler: str) -> None:
        pass

    def close(self) -> None:
        self._session = None


# --- what NeMo-Run knows of a job and the cluster does not: its task and job directory ------

# One file per job, in NeMo-Run's home: launches in many threads or processes at once each write
# their own, so none is lost (one shared file, read, changed and written back by each, kept 111
# of 800 entries). The one file of kfcompile before that is still read.
JOBS = ".kfcompile_jobs"
OLD_JOBS = ".kfcompile_jobs.json"  # beside NeMo-Run's own `.kubeflow_jobs.json`


def _entry_file(app_id: str) -> str:
    return os.path.join(get_nemorun_home(), JOBS, urllib.parse.quote(app_id, safe="") + ".json")


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def recalled(app_id: str) -> dict[str, str]:
    """The task name and job directory ``schedule`` noted for the app (nothing if none)."""
    entry: Any = _read(_entry_file(app_id))
    if not entry:  # noted in the one file of kfcompile before
        entry = _read(os.path.join(get_nemorun_home(), OLD_JOBS)).get(app_id)
    if not isinstance(entry, dict):
        return {}
    return {k: v for k, v in entry.items() if isinstance(k, str) and isinstance(v, str)}


def remember(app_id: str, **entry: str) -> None:
    """Note the app's task and job directory in its own file (written whole and renamed:
    readers in other processes see the old file or the new one)."""
    path = _entry_file(app_id)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(entry, f)
    os.replace(temp, path)


def create_scheduler(session_name: str, **kwargs: object) -> KfcompileScheduler:
    return KfcompileScheduler(session_name, **kwargs)

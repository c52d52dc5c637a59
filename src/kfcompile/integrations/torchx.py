"""The TorchX scheduler ``kfcompile``: TorchX apps run as Kubeflow jobs compiled by kfcompile.

    pip install 'kfcompile[torchx]'
    torchx run -s kfcompile -cfg namespace=team-a,target=trainjob/v2.3 \\
        dist.ddp -j 2x8 --gpu 8 --script train.py
    torchx status kfcompile://torchx/team-a:train-x7k2p9

A thin layer over kfcompile's public API: the app becomes a ``JobSpec``
(``torchx_app.build``), ``--dryrun`` prints ``lifecycle.prepare``'s objects as YAML for
``kubectl apply -f -``, and running, status, logs, list and cancel are ``kfcompile.lifecycle``
calls through the Kubernetes adapter (``kfcompile_kube``, imported only when a call needs the
cluster). Nothing is kept between calls: every command can run in a new process, the cluster is
the only state. App ids are ``NAMESPACE:NAME`` (TorchX splits handles on their last ``/``).

The registered entry point is ``create_scheduler``; torchx loads this module only for it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import string
import sys
import threading
import typing
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import torchx
from attrs import frozen
from torchx.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
)
from torchx.specs import AppDryRunInfo, AppState, ReplicaStatus, Role, RoleStatus, runopts
from torchx.specs.finder import ComponentValidationException

from kfcompile import lifecycle
from kfcompile.integrations.launchers import TORCHX, configured, reworded
from kfcompile.integrations.torchx_app import (
    ROLE_NAME,
    SUFFIX_LENGTH,
    NotExpressible,
    Options,
    build,
    from_app,
    to_role,
)
from kfcompile.kinds import KINDS
from kfcompile.lifecycle.cluster_target import Found
from kfcompile.lifecycle.multikueue import running_on, unreachable
from kfcompile.lifecycle.ports import ApiError, Obj, Ref
from kfcompile.progress import note
from kfcompile.spec import yamlio
from kfcompile.spec.errors import KfcompileError
from kfcompile.spec.k8s_schema import unknown_field
from kfcompile.spec.model import JobSpec
from kfcompile.status import State
from kfcompile.targets import DEFAULT_TARGET, TARGETS, canonical_name
from kfcompile.terminal import log_line, printable, printable_lines

if TYPE_CHECKING:
    from kfcompile_kube import Connection

logger = logging.getLogger(__name__)

BACKEND: Final = "kfcompile"

# (name, type, default, help): ``torchx runopts kfcompile``. typing.List, not list: torchx 0.7
# recognises list options by equality with it.
RUN_OPTS: Final = (
    ("namespace", str, "default", "Kubernetes namespace of the job"),
    (
        "target",
        str,
        None,
        f"what the cluster runs, one of: {', '.join(TARGETS)} (default: detected from the "
        f"cluster; {DEFAULT_TARGET} where none is configured)",
    ),
    ("queue", str, None, "Kueue LocalQueue to submit to"),
    ("priority_class", str, None, "Kueue WorkloadPriorityClass of the job"),
    ("service_account", str, None, "service account the pods run as"),
    ("runtime", str, None, "TrainJob: ClusterTrainingRuntime to run on (torch-distributed)"),
    ("image_pull_secrets", typing.List[str], None, "secrets for pulling the image"),  # noqa: UP006
    ("shm_size", str, None, "size of a memory-backed /dev/shm, e.g. 16Gi"),
    ("kubeconfig", str, None, "kubeconfig file ($KUBECONFIG, ~/.kube/config, in-cluster)"),
    ("context", str, None, "kubeconfig context (default: its current one)"),
)

# kfcompile's normalized state -> TorchX's. SUSPENDED is a wait (Kueue queues by suspending);
# a job deleted before it finished was cancelled.
APP_STATES: Final[Mapping[State, Any]] = {
    State.PENDING: AppState.PENDING,
    State.SUSPENDED: AppState.PENDING,
    State.RUNNING: AppState.RUNNING,
    State.SUCCEEDED: AppState.SUCCEEDED,
    State.FAILED: AppState.FAILED,
    State.DELETING: AppState.CANCELLED,
}
# A pod's phase -> its replica's state (TorchX's ReplicaState is AppState).
POD_PHASES: Final[Mapping[str, Any]] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}
# Of a rank's pods (a replaced pod stays Failed beside its successor), the one that counts.
CURRENT_FIRST: Final = ("Running", "Pending", "Succeeded", "Failed", "Unknown")


class SchedulerError(ComponentValidationException, ValueError):  # type: ignore[misc]
    """What kfcompile could not do, one line per problem. A ComponentValidationException, so
    that ``torchx run`` prints the lines without a traceback."""


@frozen
class KfcompileRequest:
    """What ``schedule`` submits; ``str()`` is the YAML ``kubectl apply -f -`` takes."""

    spec: JobSpec
    target: str
    namespace: str
    objects: tuple[Obj, ...]
    kubeconfig: str | None = None
    context: str | None = None
    against: Obj | None = None  # a Trainer newer than kfcompile knows: the CRD it serves

    def __str__(self) -> str:
        return yamlio.dump_all(self.objects)


class RunOpts(runopts):  # type: ignore[misc]
    """The scheduler's run options. torchx 0.7's ``cfg_from_str`` drops ``-cfg`` keys that
    are no option (``-cfg namespce=team-a`` would run in ``default``), nightlies refuse them
    with a traceback: here each is a line with the option it may mean."""

    def cfg_from_str(self, cfg_str: str) -> dict[str, Any]:
        from torchx.specs.api import to_dict

        unknown = unknown_options(to_dict(cfg_str))
        if unknown:
            raise SchedulerError("\n".join(unknown))
        result: dict[str, Any] = super().cfg_from_str(cfg_str)
        return result

    def resolve(self, cfg: Mapping[str, Any]) -> Any:
        """What the Runner checks a ``cfg`` mapping with (0.7 drops unknown keys here too)."""
        unknown = unknown_options(cfg)
        if unknown:
            raise SchedulerError("\n".join(unknown))
        return super().resolve(cfg)


def unknown_options(cfg: Mapping[str, Any]) -> list[str]:
    """A line for each key of ``cfg`` that is no run option, with the option it may mean."""
    names = [name for name, *_ in RUN_OPTS]
    return [f"-cfg {k}: {unknown_field(k, names, 'kfcompile -cfg')}" for k in cfg if k not in names]


def _suffix() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(SUFFIX_LENGTH))


def dryrun(app: Any, cfg: Mapping[str, Any], suffix: str) -> KfcompileRequest:
    """The request for ``app`` with run options ``cfg`` (checked by ``RunOpts``); no cluster
    is consulted."""
    try:
        options = Options.of(cfg)
        spec = build(app, options, suffix, torchx.__version__)
        prepared = lifecycle.prepare(spec, options.target, options.namespace, environ={})
    except NotExpressible as exc:
        raise SchedulerError(str(exc)) from None
    except KfcompileError as exc:  # what the target cannot express, pointed back at the app
        raise SchedulerError(str(from_app(exc))) from None
    return KfcompileRequest(
        spec,
        canonical_name(options.target),
        options.namespace,
        prepared.objects,
        options.kubeconfig,
        options.context,
    )


def split_app_id(app_id: str) -> tuple[str | None, str]:
    """``NAMESPACE:NAME`` (a bare ``NAME`` is in the kubeconfig context's namespace)."""
    namespace, sep, name = app_id.rpartition(":")
    if not name or (sep and not namespace):
        raise SchedulerError(f"app id {app_id!r}: expected NAMESPACE:NAME")
    return namespace or None, name


def role_name(job: Obj) -> str:
    """The TorchX role the job runs: as submitted, else the name of its training container."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    name = annotations.get(ROLE_NAME)
    return name if isinstance(name, str) and name else KINDS[job["kind"]].container


def describe_job(app_id: str, job: Obj, seen: lifecycle.Observation) -> Any:
    """TorchX's view of the job: its state, and one replica per rank with its pod's state."""
    state = seen.state
    app_state = APP_STATES[state.state]
    if (job.get("metadata") or {}).get("deletionTimestamp") and not state.finished:
        app_state = AppState.CANCELLED  # being deleted: its pods go first
    role = role_name(job)
    message = f"{state.state.value} ({state.reason}) {state.message}".rstrip()
    message += note(seen.progress, datetime.now(UTC))  # what the training process reports
    return DescribeAppResponse(
        app_id=app_id,
        state=app_state,
        num_restarts=max((n.restarts for n in seen.nodes), default=0),
        msg=printable(message),  # what `torchx status` prints
        roles_statuses=[RoleStatus(role, replicas(seen, role, app_state))],
        roles=[job_role(job, role, seen.nodes_total)],
    )


def replicas(seen: lifecycle.Observation, role: str, app_state: Any) -> list[Any]:
    """One ``ReplicaStatus`` per rank of the job (``app_state``): its current pod's phase
    and name, or, with no pod (yet, or any more), pending or how the job ended."""
    by_rank: dict[int, list[lifecycle.Node]] = {}
    for node in seen.nodes:
        if node.rank is not None:
            by_rank.setdefault(node.rank, []).append(node)
    found = []
    for rank in seen.ranks:  # not range(numNodes): the server's number
        pods = sorted(
            by_rank.get(rank, []),
            key=lambda n: CURRENT_FIRST.index(n.phase) if n.phase in CURRENT_FIRST else 9,
        )
        if pods:
            replica_state = POD_PHASES.get(pods[0].phase, AppState.UNKNOWN)
            host = printable(pods[0].pod)
        else:
            replica_state = app_state if seen.state.finished else AppState.PENDING
            host = ""
        found.append(ReplicaStatus(id=rank, state=replica_state, role=role, hostname=host))
    return found


def job_role(job: Obj, name: str, nodes: int) -> Any:
    """The role as the job holds it (image, program, env, resources per node), read back
    through kfcompile's importer; a job no spec describes (not made by kfcompile, or changed
    since) shows its name and size only."""
    from kfcompile.importer import import_manifest_lossy

    try:
        spec = import_manifest_lossy(job).spec
    except KfcompileError:
        return Role(name=name, image="", num_replicas=nodes)
    return to_role(spec, name)


def log_lines(lines: Iterable[lifecycle.LogLine]) -> Iterator[str]:
    """What `torchx log` (and NeMo-Run) print: escaped on a terminal, as kfcompile's `logs`
    does."""
    terminal = sys.stdout.isatty()
    for line in lines:
        yield f"{log_line(line.text, terminal)}\n"


def since_seconds(since: datetime | None) -> int | None:
    """A log's ``since`` as the seconds the API takes (at least one: none reads it all)."""
    if since is None:
        return None
    return max(1, math.ceil((datetime.now(since.tzinfo) - since).total_seconds()))


class KfcompileScheduler(Scheduler):  # type: ignore[misc]
    """``torchx run -s kfcompile``; see the module docstring."""

    def __init__(
        self,
        session_name: str,
        kubeconfig: str | None = None,
        context: str | None = None,
        clusters: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(BACKEND, session_name)
        self._given = {"kubeconfig": kubeconfig, "context": context}
        # MultiKueue: worker cluster -> kubeconfig context, beside the mapping file's
        self._clusters = dict(clusters or {})
        # Where this scheduler last submitted: torchx asks for the status right after `run`.
        self._submitted: dict[str, str | None] = {}
        self._connections: dict[tuple[str | None, str | None], Connection] = {}
        self._sessions: dict[tuple[str | None, str | None], lifecycle.Session] = {}
        self._targets: dict[tuple[str | None, str | None], Found] = {}  # detected

    # --- options and connections --------------------------------------------------------------

    def _run_opts(self) -> Any:
        opts = RunOpts()
        for name, type_, default, help_ in RUN_OPTS:
            opts.add(name, type_=type_, default=default, help=help_)
        return opts

    def _configured(self, cfg: Mapping[str, Any] | None) -> dict[str, Any]:
        """Run options for calls torchx gives none (status, log, cancel; list on 0.7): those
        given, then where this scheduler last submitted, then its arguments, then the
        ``.torchxconfig`` file."""
        from torchx.runner import config

        found: dict[str, Any] = {}
        # torchx's own default, [$HOME, $CWD], is taken when torchx is imported: ask for now's.
        config.apply(scheduler=self.backend, cfg=found, dirs=[str(Path.home()), os.getcwd()])
        for layer in (self._given, self._submitted, cfg or {}):
            found.update({k: v for k, v in layer.items() if v is not None})
        return found

    def _session(self, kubeconfig: str | None, context: str | None) -> lifecycle.Session:
        key = (kubeconfig, context)
        if key not in self._sessions:
            import kfcompile_kube

            try:
                wired, connection = kfcompile_kube.session(kubeconfig, context, on_retry=_retrying)
            except kfcompile_kube.ConfigError as exc:
                raise SchedulerError(reworded(str(exc), TORCHX)) from None
            self._connections[key], self._sessions[key] = connection, wired
        return self._sessions[key]

    def _detected(self, kubeconfig: str | None, context: str | None) -> Found:
        """The target of the cluster the run options name, as ``kfcompile submit`` detects it:
        read once per kubeconfig and context, and said in the log; with no cluster
        configured (a dry run without one), the default, said too."""
        if not configured(kubeconfig, os.environ):
            logger.warning(
                "target %s (the default): no cluster configured to detect it from; give "
                "-cfg target=TARGET to choose",
                DEFAULT_TARGET,
            )
            return Found(DEFAULT_TARGET, "the default")
        key = (kubeconfig, context)
        if key not in self._targets:
            with _errors():
                found = lifecycle.detect_target(self._session(kubeconfig, context))
            logger.info("target %s, detected from the cluster: %s", found.target, found.evidence)
            self._targets[key] = found
        return self._targets[key]

    def _cluster(self, cfg: Mapping[str, Any] | None = None) -> tuple[lifecycle.Session, str]:
        """A session, and the namespace to act in when the app id names none."""
        options = self._configured(cfg)
        kubeconfig, context = options.get("kubeconfig"), options.get("context")
        session = self._session(kubeconfig, context)
        namespace = options.get("namespace") or self._connections[(kubeconfig, context)].namespace
        return session, namespace

    def _pods_on(self, session: lifecycle.Session, job: Obj) -> lifecycle.Session:
        """Where ``job``'s pods and logs are: on a MultiKueue manager, the worker cluster it
        was dispatched to, through the context mapped for it (``running_on``): the
        scheduler's ``clusters`` and the mapping file's for the manager's context."""
        from kfcompile_local.clusters import mapped_workers

        options = self._configured(None)
        kubeconfig, context = options.get("kubeconfig"), options.get("context")
        manager = self._connections[(kubeconfig, context)].context
        workers = mapped_workers(manager, self._clusters, how="clusters={'NAME': CONTEXT}")

        def reach(cluster: str, worker_context: str) -> lifecycle.Session:
            try:
                return self._session(kubeconfig, worker_context)
            except SchedulerError as exc:
                why = unreachable(Ref.of(job), cluster, worker_context, str(exc))
                raise SchedulerError(why) from None

        return running_on(session, job, workers, reach)

    def _job(self, app_id: str) -> tuple[lifecycle.Session, Obj | None]:
        namespace, name = split_app_id(app_id)
        session, default = self._cluster()
        try:
            return session, lifecycle.find(session, namespace or default, name)
        except lifecycle.JobNotFound:
            return session, None

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        self._sessions.clear()

    # --- the Scheduler API --------------------------------------------------------------------

    def _validate(self, app: Any, scheduler: str, cfg: Any = None) -> None:
        """Nothing to check before the dry run, which checks everything (an app without
        resources asks for none)."""

    def _submit_dryrun(self, app: Any, cfg: Mapping[str, Any]) -> Any:
        if cfg.get("target"):
            return AppDryRunInfo(dryrun(app, cfg, _suffix()), str)
        found = self._detected(cfg.get("kubeconfig"), cfg.get("context"))
        request = dryrun(app, {**cfg, "target": found.target}, _suffix())
        return AppDryRunInfo(attrs.evolve(request, against=found.crd), str)

    def schedule(self, dryrun_info: Any) -> str:
        request: KfcompileRequest = dryrun_info.request
        with _errors():
            session = self._session(request.kubeconfig, request.context)
            submitted = lifecycle.submit(
                session,
                request.spec,
                request.target,
                namespace=request.namespace,
                environ={},
                against=request.against,
            )
        self._submitted = {"kubeconfig": request.kubeconfig, "context": request.context}
        return f"{submitted.ref.namespace}:{submitted.ref.name}"

    def describe(self, app_id: str) -> Any:
        with _errors():
            session, job = self._job(app_id)
            if job is None:
                return None
            pods_on = self._pods_on(session, job)
            return describe_job(app_id, job, lifecycle.observe.observe(pods_on, job))

    def list(self, cfg: Mapping[str, Any] | None = None) -> list[Any]:
        with _errors():
            session, namespace = self._cluster(cfg)
            found = lifecycle.list_jobs(session, namespace)
        named = "name" in getattr(ListAppResponse, "__dataclass_fields__", {})  # nightlies
        return [
            ListAppResponse(
                app_id=printable(f"{job.ref.namespace}:{job.ref.name}"),
                state=APP_STATES[job.state.state],
                **({"name": printable(job.ref.name)} if named else {}),
            )
            for job in found
        ]

    def _cancel_existing(self, app_id: str) -> None:
        """Delete the job; torchx's ``cancel`` does not wait (``Scheduler.cancel`` never
        blocks), so neither does this, nor is a MultiKueue worker read for it (``kfcompile
        cancel --wait``, or ``lifecycle.cancel`` with ``workers``, waits there)."""
        with _errors():
            session, job = self._job(app_id)
            if job is not None:
                lifecycle.cancel(session, Ref.of(job))

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        should_tail: bool = False,
        streams: Any = None,
    ) -> Iterable[str]:
        """Rank ``k``'s log; with ``should_tail``, followed until the job ends."""
        if until is not None:
            raise SchedulerError("kfcompile reads logs up to now or follows them: no `until`")
        if streams not in (None, Stream.COMBINED):
            raise SchedulerError("kfcompile reads the combined stream (Kubernetes keeps one log)")
        with _errors():
            session, job = self._job(app_id)
            if job is not None:  # on a MultiKueue manager, the logs are the worker's
                session = self._pods_on(session, job)
        if job is None:
            raise SchedulerError(f"{app_id}: no such job")
        role, total = _role_of(job), lifecycle.observe.nodes_total(job)
        if role_name != role:
            raise SchedulerError(f"{app_id} runs one role, {role!r} (not {role_name!r})")
        if not 0 <= k < total:
            raise SchedulerError(f"{app_id} has replicas 0 to {total - 1} (not {k})")
        read = lifecycle.logs(
            session, Ref.of(job), rank=k, follow=should_tail, since_seconds=since_seconds(since)
        )
        lines = log_lines(read)
        return filter_regex(regex, lines) if regex else lines


_role_of = role_name  # log_iter's parameter `role_name` shadows the function


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Cluster and configuration failures as ``SchedulerError``: one line each."""
    try:
        yield
    except (lifecycle.ClusterError, KfcompileError, ApiError) as exc:
        raise SchedulerError(printable_lines(reworded(str(exc), TORCHX))) from None


def _retrying(what: str, error: Exception) -> None:
    logger.warning("%s: %s; retrying", what, error)


def create_scheduler(
    session_name: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    **kwargs: Any,
) -> KfcompileScheduler:
    """The ``torchx.schedulers`` entry point: ``factory(session_name, **kwargs)``. Other
    keyword arguments (torchx and NeMo-Run pass some) are not for this scheduler."""
    if _in_torchx_cli():
        _end_with_one_line()
    clusters = kwargs.get("clusters")
    return KfcompileScheduler(
        session_name, kubeconfig=kubeconfig, context=context, clusters=clusters
    )


def _in_torchx_cli() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return Path(sys.argv[0]).name == "torchx" or getattr(spec, "name", "") == "torchx.cli.main"


def _end_with_one_line() -> None:
    """torchx's CLI lets a scheduler's exception end ``status``, ``describe``, ``log`` and
    ``cancel`` with a traceback (``run`` prints ours as lines): under the CLI, an uncaught
    ``SchedulerError`` ends the command with its lines, logged as torchx logs its errors."""
    previous = sys.excepthook
    if getattr(previous, "kfcompile", False):
        return

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if isinstance(error, SchedulerError):
            logger.error("%s", error)
        else:
            previous(kind, error, tb)

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        # `torchx log` reads each replica in a thread that re-raises, then raises the error
        # again in the main thread: said there, once.
        if not isinstance(args.exc_value, SchedulerError):
            previous_thread_hook(args)

    previous_thread_hook = threading.excepthook
    hook.kfcompile = True  # type: ignore[attr-defined]
    sys.excepthook = hook
    threading.excepthook = thread_hook

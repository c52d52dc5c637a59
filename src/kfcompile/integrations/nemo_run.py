"""NeMo-Run on kfcompile: ``KfcompileExecutor``, a drop-in for NeMo-Run 0.11's
``KubeflowExecutor`` (``pip install kfcompile[nemo]``).

    from kfcompile.integrations.nemo_run import KfcompileExecutor as KubeflowExecutor

It takes every parameter of ``KubeflowExecutor`` with the same meaning, plus ``target`` (any
kfcompile target: ``trainjob/v2.0`` ... ``trainjob/v2.3``, ``pytorchjob/v1``; by default the
one the cluster of the current kubeconfig runs, detected as ``kfcompile submit`` does). The job is a
``kfcompile.JobSpec`` rendered for that target, so what the target cannot hold is an error
naming the parameter, never a silent drop; jobs are created with strict field validation, their
state is read from conditions and pods, and logs, listing and work-dir copies go through
``kfcompile.lifecycle`` over the API (no ``kubectl``). The torchx scheduler that NeMo-Run drives
is ``kfcompile.integrations.nemo_run_scheduler`` (entry point ``kfcompile_nemo``).

NeMo-Run has no public registration for executors: ``register()`` below puts the class in the
tables NeMo-Run reads, and runs at import of this module (fiddle imports it again when it loads
a saved experiment, so a new process knows the class too).
"""

import copy
import getpass
import logging
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_run.core.execution.base import Executor, ExecutorMacros
from nemo_run.core.execution.launcher import Launcher, Torchrun
from nemo_run.core.packaging.base import Packager
from torchx.specs import Role

import kfcompile
from kfcompile import lifecycle
from kfcompile.integrations.nemo_run_methods import (
    NemoRunMethods,
    connect,
    detect_target,
    session,
)
from kfcompile.integrations.nemo_run_task import (
    NEMO_RUNDIR,
    ExecutorError,
    checked,
    from_manifest,
    program_of,
    spec_fields,
)
from kfcompile.kinds import KINDS, TRAINJOB
from kfcompile.lifecycle.cluster_target import Found
from kfcompile.spec import object_paths, torchrun
from kfcompile.spec.errors import Problem
from kfcompile.spec.model import DEFAULT_RUNTIME
from kfcompile.targets import target as find_target

__all__ = ["FDL_RUNNER", "SCHEDULER", "ExecutorError", "KfcompileExecutor", "connect", "register"]

SCHEDULER = "kfcompile_nemo"
"""The torchx scheduler NeMo-Run drives the executor's jobs through (its entry point), and the
executor's key in NeMo-Run's tables."""
# KubeflowExecutor's default (nemo_run/core/execution/kubeflow.py): NeMo-Run's, which the
# Training Operator's for a PyTorchJob replica (importer/shapes.py) happens to equal.
DEFAULT_RESTART_POLICY = "OnFailure"
WORKDIR_VOLUME = "nemo-run-workdir"  # the volume name KubeflowExecutor gives the work-dir claim
FDL_RUNNER = "nemo_run.core.runners.fdl_runner"
"""The module a ``run.Partial`` runs as (``launcher.module``), its config passed by value."""
MAX_NAME = 33  # KubeflowExecutor's cap: fits every upstream runtime's pod-name budget
log = logging.getLogger(__name__)


def register(executor_cls: type[Executor], name: str = SCHEDULER) -> None:
    """Make NeMo-Run know ``executor_cls`` as the executor of torchx scheduler ``name``.

    NeMo-Run reads these tables by class, with no public way to extend them (nemo_run 0.11):
    ``EXECUTOR_MAPPING`` (class -> scheduler, for submitting), ``REVERSE_EXECUTOR_MAPPING``
    (scheduler -> class, for ``nemo experiment logs``), and the executors ``Experiment`` lets
    run in parallel or detached (the job's state lives on the cluster, so both are safe).
    """
    from nemo_run.run.experiment import Experiment
    from nemo_run.run.torchx_backend.schedulers import api

    api.EXECUTOR_MAPPING[executor_cls] = name
    api.REVERSE_EXECUTOR_MAPPING[name] = executor_cls
    for table in ("_PARALLEL_SUPPORTED_EXECUTORS", "_DETACH_SUPPORTED_EXECUTORS"):
        known = getattr(Experiment, table)
        if executor_cls not in known:
            setattr(Experiment, table, (*known, executor_cls))


@dataclass(kw_only=True)
class KfcompileExecutor(NemoRunMethods, Executor):  # type: ignore[misc]
    """NeMo-Run's ``KubeflowExecutor`` (0.11) parameters, rendered by kfcompile for ``target``.

    The documentation's NeMo-Run page (``docs/nemo-run.md``) says what each parameter does on
    each target.
    """

    runtime_ref: str = DEFAULT_RUNTIME
    namespace: str = "default"
    image: str = ""
    num_nodes: int = 1
    nprocs_per_node: int | None = None  # defaults to gpus_per_node, else 1
    gpus_per_node: int | None = None
    cpu_requests: str | None = None
    memory_requests: str | None = None
    cpu_limits: str | None = None
    memory_limits: str | None = None
    extra_resource_requests: dict[str, str] = field(default_factory=dict)
    extra_resource_limits: dict[str, str] = field(default_factory=dict)
    volume_mounts: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    pod_annotations: dict[str, Any] = field(default_factory=dict)
    pod_labels: dict[str, Any] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    affinity: dict[str, Any] = field(default_factory=dict)
    env_list: list[dict[str, Any]] = field(default_factory=list)
    pod_spec_overrides: dict[str, Any] = field(default_factory=dict)
    data_mover_image: str = "alpine:3.19"
    restart_policy: str = DEFAULT_RESTART_POLICY
    image_pull_secrets: list[str] = field(default_factory=list)
    spec_kwargs: dict[str, Any] = field(default_factory=dict)
    container_kwargs: dict[str, Any] = field(default_factory=dict)
    workdir_pvc: str | None = None
    workdir_pvc_path: str = NEMO_RUNDIR
    workdir_local_path: str | None = None
    train_job_basename: str | None = None
    # kfcompile's own: which CR shape (and Trainer / Training Operator release) to write; None:
    # the one the cluster runs (``chosen_target``).
    target: str | None = None

    # --- the Executor interface ---------------------------------------------------------------

    def assign(self, exp_id: str, exp_dir: str, task_id: str, task_dir: str) -> None:
        self.experiment_id = exp_id
        self.experiment_dir = exp_dir
        self.job_name = task_id
        self.job_dir = os.path.join(exp_dir, task_dir)

    def nnodes(self) -> int:
        return self.num_nodes

    def nproc_per_node(self) -> int:
        if self.nprocs_per_node is not None:
            return self.nprocs_per_node
        return self.gpus_per_node if self.gpus_per_node is not None else 1

    def macro_values(self) -> ExecutorMacros | None:
        """The variables both Kubeflow kinds set in every pod (a PyTorchJob with a Master, which
        kfcompile always writes for a fixed-size job), in the form Kubernetes expands: NeMo-Run
        writes a macro as ``$`` + name, so the name ``(VAR)`` gives ``$(VAR)``, where ``$VAR``
        would reach the program as it is, without a shell."""
        return ExecutorMacros(
            head_node_ip_var=f"({torchrun.MASTER_ADDR.env})",
            nproc_per_node_var=f"({torchrun.NPROC_PER_NODE.env})",
            num_nodes_var=f"({torchrun.NNODES.env})",
            node_rank_var=f"({torchrun.NODE_RANK.env})",
            het_group_host_var=f"({torchrun.MASTER_ADDR.env})",
        )

    def package_configs(self, *cfgs: tuple[str, str]) -> list[str]:
        """Write the configs into the job directory, as every executor does, and return how the
        pod reads them: through the work-dir claim, or else as the serialized text itself
        (NeMo-Run's runner takes either a file or the text)."""
        files = super().package_configs(*cfgs)
        if self.workdir_pvc:
            return [self._pod_path(f) for f in files]
        return [text for _, text in cfgs]

    @property
    def code_dir(self) -> str:
        """Where the job directory lands on the claim, as the pod sees it (KubeflowExecutor's
        ``<workdir_pvc_path>/<user>/<experiment>/<job>/code``)."""
        parts = (getattr(self, "experiment_id", None), getattr(self, "job_name", None))
        scope = "/".join([getpass.getuser(), *(p for p in parts if p)])
        return f"{self.workdir_pvc_path.rstrip('/')}/{scope}/code"

    def _pod_path(self, local: str) -> str:
        rel = os.path.relpath(local, self.job_dir)
        return f"{self.code_dir}/{rel}" if not rel.startswith("..") else local

    # --- the job --------------------------------------------------------------------------------

    def chosen_target(self) -> Found:
        """``target``; or, without one, the one the cluster of the current kubeconfig runs, as
        ``kfcompile submit`` detects it: read once per executor and said in the log (with no
        cluster configured, a dry run, the default: said too)."""
        if self.target:
            return Found(self.target, "given as target")
        found: Found | None = getattr(self, "_detected", None)
        if found is None:
            found = self._detected = detect_target()
        return found

    def k8s_job_name(self, fallback: str) -> str:
        """``<basename>-<6 hex>``, at most 33 characters, made once: unique per launch, an RFC
        1035 label (kfcompile checks each target's pod-name budget on top)."""
        cached: str | None = getattr(self, "_k8s_job_name", None)
        if cached is not None:
            return cached
        if self.train_job_basename and not self.train_job_basename[0].isalpha():
            raise ExecutorError(  # a TrainJob/PyTorchJob name is an RFC 1035 label
                [Problem("train_job_basename", f"{self.train_job_basename!r}: must start with "
                         "a letter (the job name is an RFC 1035 label)")]
            )  # fmt: skip
        base = re.sub(r"[^a-z0-9-]+", "-", (self.train_job_basename or fallback or "").lower())
        uid = uuid.uuid4().hex[:6]
        base = re.sub(r"^[^a-z]+", "", base)[: MAX_NAME - len(uid) - 1].strip("-") or "job"
        self._k8s_job_name = f"{base}-{uid}"
        return self._k8s_job_name

    def job_spec(self, role: Role, name: str) -> kfcompile.JobSpec:
        """The ``JobSpec`` for one NeMo-Run role (what its packaging made of the task), checked
        against ``target``: every parameter the target cannot hold is one problem line."""
        problems = list(self._unsupported())
        data: dict[str, Any] = {}
        if any(p.path == "target" for p in problems):
            raise ExecutorError(problems)
        try:
            data = self._fields(role, name)
        except ExecutorError as exc:
            problems += exc.problems
        if problems:
            raise ExecutorError(problems)
        spec: kfcompile.JobSpec = checked(lambda: kfcompile.structure(data), {})
        changed: dict[str, str] = {}
        if self.spec_kwargs:
            spec, changed = self._with_spec_kwargs(spec)
        checked(lambda: kfcompile.render(spec, self.chosen_target().target), changed)
        return spec

    def _unsupported(self) -> Iterator[Problem]:
        """Parameters and NeMo-Run features whose meaning kfcompile cannot keep anywhere."""
        if type(self.packager) is not Packager:
            yield Problem(
                "packager",
                f"{type(self.packager).__name__} is not supported: ship the code in the image, "
                "or put it in workdir_local_path (copied to workdir_pvc)",
            )
        launcher = self.get_launcher()
        if type(launcher) not in (Launcher, Torchrun):
            yield Problem("launcher", f"{type(launcher).__name__} is not supported: use torchrun")
        elif launcher.nsys_profile:
            yield Problem("launcher.nsys_profile", "not supported")
        if not self.image:
            yield Problem("image", "required: the training image")
        runtime_default = self.runtime_ref == DEFAULT_RUNTIME
        try:
            target = self.chosen_target().target
            pytorchjob = find_target(target).kind == "PyTorchJob"
        except ValueError as exc:
            yield Problem("target", str(exc))
            return
        except ExecutorError as exc:  # the cluster could not tell
            yield from exc.problems
            return
        if pytorchjob and not runtime_default:
            yield Problem("runtime_ref", f"a TrainJob runtime: {target} has none")
        if self.workdir_local_path and not self.workdir_pvc:
            yield Problem("workdir_local_path", "needs workdir_pvc (the claim it is copied to)")

    def _fields(self, role: Role, name: str) -> dict[str, Any]:
        pod_copy = (self.workdir_local_path, self.code_dir) if self.workdir_pvc else None
        program, script, command = program_of(role, job_dir=self.job_dir, pod_copy=pod_copy)
        data: dict[str, Any] = {
            "name": name,
            "env": dict(role.env),
            "pod_spec_overrides": self._pod_overrides(),
            **spec_fields(self),
        }
        if program is not None:
            data["launcher"] = program
        else:
            data["command"] = command
        if script is not None:
            data["script"] = script
        # The default is what NeMo-Run writes for every job: only a chosen policy must land.
        pytorchjob = find_target(self.chosen_target().target).kind == "PyTorchJob"
        if self.restart_policy != DEFAULT_RESTART_POLICY or pytorchjob:
            data["restart_policy"] = self.restart_policy
        if self.workdir_pvc:
            self._mount_workdir(data)
        return {k: v for k, v in data.items() if v not in ({}, [])}

    def _pod_overrides(self) -> dict[str, Any]:
        """``pod_spec_overrides``, where NeMo-Run's name for the training container (``node``,
        the Trainer runtime's) is the target's training container (PyTorchJob's ``pytorch``)."""
        overrides = copy.deepcopy(self.pod_spec_overrides)
        container = KINDS[find_target(self.chosen_target().target).kind].container
        containers = overrides.get("containers")
        for item in containers if isinstance(containers, list) else []:
            if isinstance(item, dict) and item.get("name") == TRAINJOB.container:
                item["name"] = container
        return overrides

    def _mount_workdir(self, data: dict[str, Any]) -> None:
        """The claim mounted at ``workdir_pvc_path``, as KubeflowExecutor mounts it: a volume
        already naming the claim is reused, a mount already at the path is kept."""
        volumes: list[dict[str, Any]] = data["volumes"]
        claim = {"claimName": self.workdir_pvc}
        volume = next(
            (v for v in volumes if (v.get("persistentVolumeClaim") or {}).get("claimName")
             == self.workdir_pvc),
            None,
        )  # fmt: skip
        if volume is None:
            volumes.append({"name": WORKDIR_VOLUME, "persistentVolumeClaim": claim})
            if not any(m.get("mountPath") == self.workdir_pvc_path for m in data["volume_mounts"]):
                data["volume_mounts"].append(
                    {"name": WORKDIR_VOLUME, "mountPath": self.workdir_pvc_path}
                )

    def _with_spec_kwargs(
        self, spec: kfcompile.JobSpec
    ) -> tuple[kfcompile.JobSpec, dict[str, str]]:
        """``spec_kwargs`` merged deeply into the job's ``spec`` (mappings key by key; a list
        or scalar replaced, each list so replaced logged as a warning), read back into the
        JobSpec by kfcompile's importer: what no spec field holds is an error at its
        ``spec_kwargs`` key. Also: the spec fields they set, by that key.

        Not KubeflowExecutor's shallow update: ``{"trainer": {"image": "x"}}`` there replaces
        the whole ``spec.trainer``, and the job silently loses its command, ``numNodes`` and
        ``numProcPerNode`` (it would run the image's entrypoint)."""
        target = self.chosen_target().target
        managers = KINDS[find_target(target).kind].managers
        if self.spec_kwargs.get("managedBy", managers[0]) not in managers:
            allowed = f"{target} accepts only: {', '.join(managers)}"
            raise ExecutorError([Problem("spec_kwargs.managedBy", allowed)])
        objects = checked(lambda: kfcompile.render(spec, target), {})
        job = objects[-1]
        job["spec"] = self._merged_spec(job["spec"])
        try:
            imported = kfcompile.import_manifest_lossy(job, objects[:-1])
        except kfcompile.NotImportable as exc:
            raise ExecutorError(from_manifest(exc.problems)) from None
        if imported.losses:
            raise ExecutorError(from_manifest(imported.losses))
        old, new = kfcompile.unstructure(spec), kfcompile.unstructure(imported.spec)
        changed = {
            k: from_manifest([Problem(imported.source_of(k), "")])[0].path
            for k in set(old) | set(new)
            if old.get(k) != new.get(k)
        }
        return imported.spec, changed

    def _merged_spec(self, job_spec: dict[str, Any]) -> dict[str, Any]:
        """The job's ``spec`` with ``spec_kwargs`` merged in (``_with_spec_kwargs``). A key
        whose shape cannot merge (a string given for a mapping) is an error at that key."""
        out, problems = dict(job_spec), []
        for key, value in self.spec_kwargs.items():
            try:
                out[key], replaced = object_paths.merged(job_spec.get(key), value)
            except object_paths.MergeConflict as exc:
                problems.append(Problem(object_paths.format(("spec_kwargs", key)), str(exc)))
                continue
            for path in replaced:
                if isinstance(object_paths.get(job_spec[key], path), list):
                    log.warning(
                        "%s: replaces the job's %s (a list is replaced, not merged)",
                        object_paths.format(("spec_kwargs", key, *path)),
                        object_paths.format(("spec", key, *path)),
                    )
        if problems:
            raise ExecutorError(problems)
        return out

    # --- the work directory ---------------------------------------------------------------------

    def stage_workdir(self) -> None:
        """Copy ``workdir_local_path`` into the job directory (files it has win), as
        KubeflowExecutor's ``package`` does with rsync. Symlinks are copied as links, and only
        ones that stay inside the work dir: nothing from outside it is uploaded."""
        if self.workdir_local_path:
            problems = list(_links_out(self.workdir_local_path))
            if problems:
                raise ExecutorError(problems)
            os.makedirs(self.job_dir, exist_ok=True)
            shutil.copytree(
                self.workdir_local_path, self.job_dir, symlinks=True, dirs_exist_ok=True
            )

    def claim_path(self, pod_path: str) -> str:
        """A directory on the claim as the pods see it, as the path inside the claim."""
        root = self.workdir_pvc_path.rstrip("/")
        if pod_path != root and not pod_path.startswith(root + "/"):
            raise ExecutorError(
                [Problem("remote_path", f"{pod_path} is not under workdir_pvc_path {root}")]
            )
        return pod_path[len(root) :] or "/"

    def copy_to_workspace(
        self, local_path: str, remote_path: str, label: str = "datamover"
    ) -> None:
        """Copy the local directory to ``remote_path`` (a pod path under ``workdir_pvc_path``);
        nothing when ``workdir_pvc`` is unset."""
        self._sync(lifecycle.sync_up, remote_path, local_path)

    def copy_from_workspace(
        self, remote_path: str, local_path: str, label: str = "datamover"
    ) -> None:
        """Copy ``remote_path`` (a pod path under ``workdir_pvc_path``) into the local
        directory; nothing when ``workdir_pvc`` is unset."""
        self._sync(lifecycle.sync_down, remote_path, local_path)

    def _sync(self, direction: Any, remote_path: str, local_path: str) -> None:
        """``lifecycle.sync_up``/``sync_down`` between the claim and a local directory: a tar
        stream over exec in a helper pod of ``data_mover_image``."""
        if not self.workdir_pvc:
            return
        from kfcompile_local import TarFiles

        direction(
            session(),
            TarFiles(),
            namespace=self.namespace,
            pvc=self.workdir_pvc,
            path=self.claim_path(remote_path),
            local=local_path,
            image=self.data_mover_image,
        )

    def pull_results(self, job_name: str = "", dest_dir: str | None = None) -> None:
        """The job's directory on the claim back into ``dest_dir`` (default: the job dir)."""
        if not self.workdir_pvc:
            return
        local = dest_dir or self.job_dir
        if not local:
            raise ExecutorError([Problem("dest_dir", "required: this executor has no job_dir")])
        self.copy_from_workspace(self.code_dir, local)


def _links_out(root: str) -> Iterator[Problem]:
    """A problem for each symlink below ``root`` that leads out of it, round in a loop, or to
    nothing outside it."""
    top = Path(root).resolve()
    for where, dirs, files in os.walk(root):  # into no symlinked directory
        for name in sorted([*dirs, *files]):
            link = Path(where, name)
            if not link.is_symlink():
                continue
            shown = f"{link.relative_to(root)} -> {os.readlink(link)}"
            try:
                target = link.resolve(strict=True)
            except FileNotFoundError:  # dangling: harmless while it names a place inside
                target = Path(os.path.normpath(link.parent.resolve() / os.readlink(link)))
            except (RuntimeError, OSError):  # a loop: RuntimeError before Python 3.13
                yield Problem("workdir_local_path", f"{shown}: a symlink loop")
                continue
            if not target.is_relative_to(top):
                yield Problem(
                    "workdir_local_path", f"{shown}: leads outside the work dir (not uploaded)"
                )


def end_with_one_line() -> None:
    """An ``ExecutorError`` that ends the program is its lines, not a traceback of NeMo-Run's
    and kfcompile's frames (NeMo-Run logs "Error running job ..." and raises it again into
    the user's script: without a kubeconfig, 54 lines). Every other exception ends as
    before."""
    previous = sys.excepthook
    if getattr(previous, "kfcompile", False):
        return

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        if isinstance(error, ExecutorError):
            print(f"{kind.__name__}: {error}", file=sys.stderr)
        else:
            previous(kind, error, tb)

    hook.kfcompile = True  # type: ignore[attr-defined]
    sys.excepthook = hook


register(KfcompileExecutor)
end_with_one_line()

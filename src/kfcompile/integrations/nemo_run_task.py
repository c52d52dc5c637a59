"""What NeMo-Run's packaging made of a task, as a kfcompile launcher: the torchx ``Role`` that
NeMo-Run's launcher and packager wrote (torchrun with its rendezvous flags, ``python -m``, an
inline script written to the job dir) read back into the spec's launcher, script and command;
and the spec's problems told by the executor parameters the user set (``ExecutorError``).
"""

import copy
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from torchx.specs import Role

from kfcompile.spec import torchrun
from kfcompile.spec.errors import KfcompileError, Problem
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.model import DEFAULT_RUNTIME

NEMO_RUNDIR = "/nemo_run"  # where NeMo-Run says its run directory is in the pod
NEMO_SCRIPTS = f"{NEMO_RUNDIR}/scripts/"
NEMO_SHEBANG = "#!/usr/bin/bash\n"  # NeMo-Run puts it before an inline script it writes out
MAX_ARG_BYTES = 128 * 1024  # Linux refuses to exec a program with a longer single argument
# The torchrun options with a value NeMo-Run's component writes before the program (spelled
# with dashes); kfcompile writes the target's own rendezvous instead (NeMo-Run's
# `$PET_MASTER_ADDR` is never expanded without a shell).
TORCHRUN_VALUE_FLAGS = frozenset(o.flag for o in torchrun.OPTIONS if o.takes_value)
PYTHONS = re.compile(r"(?:.*/)?python[0-9.]*")


# --- the table: each executor parameter and the spec field it fills, both ways ----------------


def _as_given(value: Any) -> Any:
    """Values as given (deep copies): Kubernetes takes strings only, and a non-string is the
    spec's error naming the parameter (True as "True" would be a guess)."""
    return copy.deepcopy(value)


def _set(value: Any) -> Any:
    """A value that means "not set" when false (0, None): it writes nothing."""
    return value or None


class Parameter(NamedTuple):
    """One ``KfcompileExecutor`` parameter and the spec field it fills. Forward, ``read``
    converts its value (None: nothing is written); a parameter without ``read`` is filled by the
    code beside the table (from the role, or from the target). Backward, a problem at the spec
    field is told by the parameter."""

    parameter: str
    field: str
    read: Callable[[Any], Any] | None = _as_given


PARAMETERS: tuple[Parameter, ...] = (
    Parameter("train_job_basename", "name", None),  # ``k8s_job_name``
    Parameter("namespace", "namespace"),
    Parameter("image", "image"),
    Parameter("num_nodes", "num_nodes"),
    Parameter("labels", "labels"),
    Parameter("annotations", "annotations"),
    Parameter("pod_labels", "pod_labels"),
    Parameter("pod_annotations", "pod_annotations"),
    Parameter("env_vars", "env", None),  # the role's: what NeMo-Run's packaging set
    Parameter("env_list", "env_list"),
    Parameter("extra_resource_requests", "extra_resource_requests"),
    Parameter("extra_resource_limits", "extra_resource_limits"),
    Parameter("volumes", "volumes"),  # with the work-dir claim's (``_mount_workdir``)
    Parameter("volume_mounts", "volume_mounts"),
    Parameter("tolerations", "tolerations"),
    Parameter("image_pull_secrets", "image_pull_secrets"),
    Parameter("pod_spec_overrides", "pod_spec_overrides", None),  # ``_pod_overrides``
    Parameter("container_kwargs", "container_overrides"),
    Parameter(
        "runtime_ref",
        "runtime_ref",
        lambda runtime: {"name": runtime} if runtime != DEFAULT_RUNTIME else None,
    ),
    Parameter("nprocs_per_node", "nprocs_per_node"),
    Parameter("gpus_per_node", "gpus_per_node", _set),
    Parameter("cpu_requests", "cpu_request"),
    Parameter("cpu_limits", "cpu_limit"),
    Parameter("memory_requests", "memory_request"),
    Parameter("memory_limits", "memory_limit"),
    Parameter("affinity", "affinity"),
    Parameter("retries", "backoff_limit", _set),
    Parameter("restart_policy", "restart_policy", None),  # by target (``_fields``)
)
# The JobSpec field each problem names, as the executor parameter a user set.
PARAMETER_OF: Mapping[str, str] = {
    p.field: p.parameter for p in PARAMETERS if p.field != p.parameter
}


def spec_fields(executor: Any) -> dict[str, Any]:
    """The table forward: the spec fields the executor's parameters set."""
    found = ((p, p.read(getattr(executor, p.parameter))) for p in PARAMETERS if p.read)
    return {p.field: value for p, value in found if value is not None}


class ExecutorError(KfcompileError, RuntimeError):
    """A ``KfcompileExecutor`` parameter that cannot be kept, or the cluster it cannot reach:
    one line per problem. A ``RuntimeError``, as NeMo-Run's own executors raise."""


def program_of(
    role: Role, *, job_dir: str | None, pod_copy: tuple[str | None, str] | None
) -> tuple[dict[str, Any] | None, str | None, list[str]]:
    """The role as (launcher, inline script, command): NeMo-Run's torchrun flags are dropped
    (kfcompile writes the target's rendezvous), its ``-m`` is ``launcher.module``, its inline
    script file is the spec's ``script``."""
    if role.entrypoint == "torchrun":
        kind = "torchrun"
        words = _torchrun_program([_unquoted(a) for a in role.args])
        python = words[:1] != [torchrun.NO_PYTHON.flag]
        words = words[1:] if not python else words
    else:
        kind = "python"
        words = list(role.args)
        python = bool(PYTHONS.fullmatch(role.entrypoint))
    words = [_local_to_pod(w, pod_copy) for w in words]
    if not words:
        raise ExecutorError([Problem("task", "nothing to run")])
    script = _inline_script(words[0], job_dir)
    if not python and kind != "torchrun":
        if script is not None:  # no launcher: the shell runs the text, as NeMo-Run's `-c`;
            # Kubernetes reads `$$` and `$(VAR)` in args: `$$` everywhere keeps the text as is
            text = _body(script).replace("$", "$$")
            return None, None, [role.entrypoint, "-c", text, *words[1:]]
        return None, None, [role.entrypoint, *words]
    for w in words:
        if len(w.encode()) > MAX_ARG_BYTES:
            raise ExecutorError(
                [Problem("task", f"an argument of {len(w.encode())} bytes is longer than a "
                         "program may take (128 KiB): set workdir_pvc, which ships configs as "
                         "files")]
            )  # fmt: skip
    if not python:  # torchrun --no-python: each process executes the file
        return _no_python(words, script)
    if words[0] == torchrun.MODULE.short and len(words) > 1:
        return {"kind": kind, "module": words[1], "args": words[2:]}, None, []
    if script is not None:
        name = _file_name(words[0])
        return {"kind": kind, "entrypoint": name, "args": words[1:]}, _body(script), []
    return {"kind": kind, "entrypoint": words[0], "args": words[1:]}, None, []


def _no_python(
    words: list[str], script: str | None
) -> tuple[dict[str, Any], str | None, list[str]]:
    """NeMo-Run's ``torchrun --no-python``: a file torchrun executes. An inline script keeps
    the interpreter line NeMo-Run wrote (``#!/usr/bin/bash``) and ships as an executable."""
    launcher = {"kind": "torchrun", "no_python": True, "args": words[1:]}
    if script is not None:
        return {**launcher, "entrypoint": _file_name(words[0])}, script, []
    return {**launcher, "entrypoint": words[0]}, None, []


def _torchrun_program(words: list[str]) -> list[str]:
    """What follows NeMo-Run's torchrun flags: ``[--no-python] program args`` or ``-m m args``."""
    i = 0
    while i < len(words) and words[i] in TORCHRUN_VALUE_FLAGS:
        i += 2
    return words[i:]


def _unquoted(arg: str) -> str:
    """NeMo-Run's torchrun component shell-quotes each argument (for Slurm's shell)."""
    try:
        parts = shlex.split(arg)
    except ValueError:
        return arg
    return parts[0] if len(parts) == 1 else arg


def _local_to_pod(word: str, pod_copy: tuple[str | None, str] | None) -> str:
    """KubeflowExecutor rewrites local ``workdir_local_path`` references to the claim's copy
    (``pod_copy``: that local path and where the pod sees it)."""
    if pod_copy is None:
        return word
    local, pod = (pod_copy[0] or "").rstrip(os.sep), pod_copy[1]
    return word.replace(local, pod.rstrip("/")) if local and local in word else word


def _inline_script(word: str, job_dir: str | None) -> str | None:
    """The text of a ``run.Script(inline=...)``: NeMo-Run wrote it to ``<job_dir>/scripts``
    and names it by its pod path under ``/nemo_run/scripts``."""
    if not word.startswith(NEMO_SCRIPTS) or not job_dir:
        return None
    local = os.path.join(job_dir, "scripts", word[len(NEMO_SCRIPTS) :])
    if not os.path.isfile(local):
        return None
    with open(local, encoding="utf-8") as f:
        return f.read()


def _body(script: str) -> str:
    """The script without the interpreter line NeMo-Run writes (python and ``-c`` need none)."""
    return script[len(NEMO_SHEBANG) :] if script.startswith(NEMO_SHEBANG) else script


def _file_name(path: str) -> str:
    name = re.sub(r"[^-._a-zA-Z0-9]+", "_", os.path.basename(path))
    return name or "train.py"


# --- problems, named by the executor's parameters -----------------------------------------------


def _parameter(at: FieldPath, changed: Mapping[str, str]) -> str:
    if at.top in changed:
        return changed[at.top]
    if at.top in PARAMETER_OF:
        return str(FieldPath((PARAMETER_OF[at.top], *at.parts[1:]), at.note))
    return str(at)


def checked(make: Any, changed: Mapping[str, str]) -> Any:
    """``make()``, its spec problems named by executor parameter (or ``spec_kwargs`` key)."""
    try:
        return make()
    except KfcompileError as exc:
        raise ExecutorError(
            Problem(_parameter(p.at, changed), p.message) for p in exc.problems
        ) from None


def from_manifest(problems: Sequence[Problem]) -> list[Problem]:
    """Importer problems (at ``spec.<key>`` paths of the job) as ``spec_kwargs`` problems."""
    kwargs = FieldPath.of("spec_kwargs")
    return [Problem(kwargs.join(_below_spec(p.at)), p.message) for p in problems]


def _below_spec(at: FieldPath) -> FieldPath:
    return FieldPath(at.parts[1:], at.note) if at.top == "spec" else at

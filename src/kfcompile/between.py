"""The rules between a spec's fields, run once every field has the right type: one program to
run, resources as render merges them (``resource_rules``), env names given once, volumes and
mounts that refer to each other and to what kfcompile adds (``generated``), a label set in one
place, elastic bounds around ``num_nodes``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from kfcompile import resource_rules, rules
from kfcompile.errors import Problem
from kfcompile.generated import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    SCRIPT_DIR,
    SCRIPT_VOLUME,
    SHM_DIR,
    SHM_VOLUME,
    WORKDIR_VOLUME,
)

if TYPE_CHECKING:
    from kfcompile.spec import JobSpec


def _program(s: JobSpec) -> Iterator[tuple[str, str]]:
    """The launcher runs exactly one program: a file (``entrypoint``), a module (``module``) or
    the inline ``script`` (whose file name ``entrypoint`` may give)."""
    launcher = s.launcher
    if s.script is not None:
        if launcher is None:
            yield "script", "needs a launcher to run it"
        elif launcher.module is not None:
            yield "launcher.module", "an inline script runs as a file: set either module or script"
        elif launcher.entrypoint and not rules.CONFIGMAP_KEY.fullmatch(launcher.entrypoint):
            yield "launcher.entrypoint", "must be a file name (letters, digits, '-', '_', '.')"
        if len(s.script.encode()) > rules.CONFIGMAP_MAX_BYTES:
            yield "script", "larger than a ConfigMap holds (1 MiB): ship it in the image"
    elif launcher is None:
        return
    elif launcher.module is not None:
        if launcher.entrypoint is not None:
            yield "launcher.module", "set either entrypoint (a file) or module, not both"
    elif not launcher.entrypoint:
        yield "launcher.entrypoint", "required (or launcher.module, or an inline script)"
    elif launcher.entrypoint.startswith("-"):
        # python and torchrun would read it as an option: `-m` is what `module` is for.
        yield "launcher.entrypoint", "must not start with '-' (for `-m module` use launcher.module)"


def _no_python(s: JobSpec) -> Iterator[tuple[str, str]]:
    """torchrun's ``--no-python`` runs the program file itself: a module cannot be run so
    (torch/distributed/run.py ``config_from_args`` refuses ``--no-python`` with ``-m``), and an
    inline script must say its interpreter (execve(2) fails with ENOEXEC without ``#!``)."""
    launcher = s.launcher
    if launcher is None or not launcher.no_python:
        return
    if launcher.kind != "torchrun":
        yield "launcher.no_python", "torchrun's mode: for another program set command instead"
    if launcher.module is not None:
        yield "launcher.module", "torchrun runs no module with no_python: set entrypoint"
    if s.script is not None and not s.script.startswith("#!"):
        yield "script", "runs as a program itself (launcher.no_python): start it with '#!'"


def between_fields(s: JobSpec) -> Iterator[Problem]:
    """Rules that relate fields to each other (run once every field has the right type)."""
    for path, message in _related(s):
        yield Problem(path, message)


def _related(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.launcher is not None and s.command:
        yield "command", "set either command or launcher, not both"
    if s.args and not s.command:
        yield "args", "needs command (for launcher programs use launcher.args)"
    yield from _program(s)
    yield from _no_python(s)

    yield from resource_rules.resources_consistent(s)
    yield from rules.env_unique(s.env, s.env_list, s.secret_env)
    defined = {v.get("name") for v in s.volumes if isinstance(v, Mapping)}
    generated = {  # what kfcompile adds itself, and which field makes it
        "shm_size": (SHM_VOLUME, SHM_DIR) if s.shm_size else None,
        "script": (SCRIPT_VOLUME, SCRIPT_DIR) if s.script is not None else None,
        "work_dir": (WORKDIR_VOLUME, s.work_dir.mount_path) if s.work_dir else None,
    }
    for owner, made in generated.items():
        if made and made[0] in defined:
            yield "volumes", f"the name {made[0]!r} is used by {owner}"
    mounted_by = {made[1]: owner for owner, made in generated.items() if made}
    for i, m in enumerate(s.volume_mounts):
        name, path = m.get("name"), m.get("mountPath")
        if isinstance(name, str) and name not in defined:
            yield f"volume_mounts[{i}].name", f"no volume named {name!r} in volumes"
        if isinstance(path, str) and path in mounted_by:
            yield f"volume_mounts[{i}].mountPath", f"already mounted by {mounted_by[path]}"
    for label, field_name in ((QUEUE_LABEL, "queue"), (PRIORITY_LABEL, "priority_class")):
        if label in s.labels and getattr(s, field_name):
            yield f"labels[{label!r}]", f"set by {field_name}; give it in one place"

    if s.elastic is not None:
        e = s.elastic
        if e.min_nodes > e.max_nodes:
            yield "elastic.min_nodes", "must not exceed elastic.max_nodes"
        if not e.min_nodes <= s.num_nodes <= e.max_nodes:
            yield "num_nodes", "must lie between elastic.min_nodes and elastic.max_nodes"

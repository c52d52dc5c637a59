"""The rules between a spec's fields, each run on its own (skipped only where it reads a field
of the wrong type): one program to run, resources as render merges them (``resource_rules``),
env names given once, volumes and mounts that refer to each other and to what kfcompile adds
(``additions``), a label set in one place, elastic bounds around ``num_nodes``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kfcompile.spec import resource_rules, rules
from kfcompile.spec.additions import (
    PRIORITY_LABEL,
    QUEUE_LABEL,
    mount_point,
    reserved_mounts,
    reserved_names,
)

if TYPE_CHECKING:
    from kfcompile.spec.model import JobSpec


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


def _items(value: Any, at: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The mappings of a list given in an override, each with its path."""
    for i, item in enumerate(value if isinstance(value, list | tuple) else ()):
        if isinstance(item, Mapping):
            yield f"{at}[{i}]", item


def _storage(s: JobSpec) -> Iterator[tuple[str, str]]:
    """Mounts refer to volumes; what kfcompile adds is reserved (``generated.reserved_names``,
    ``reserved_mounts``): no other volume takes its name, no other mount its place, compared as
    directories (``/dev/shm/`` is ``/dev/shm``), or one would silently replace the other."""
    defined = {v.get("name") for v in s.volumes if isinstance(v, Mapping)}
    volumes = [*_items(s.volumes, "volumes")]
    volumes += _items(s.pod_spec_overrides.get("volumes"), "pod_spec_overrides.volumes")
    yield from reserved_names(s, volumes)
    for at, m in _items(s.volume_mounts, "volume_mounts"):
        name = m.get("name")
        if isinstance(name, str) and name not in defined:
            yield f"{at}.name", f"no volume named {name!r} in volumes"
    yield from mount_points(s)


def mount_points(s: JobSpec, training: str | None = None) -> Iterator[tuple[str, str]]:
    """One mount per place in the training container, compared as directories: those
    kfcompile adds first, then ``volume_mounts`` and ``container_overrides``; and, where the
    target names its training container ``training``, that container's mounts in
    ``pod_spec_overrides.containers`` (the target checks those)."""
    mounted: dict[str, str] = {}  # mount point -> the field that mounts it
    yield from reserved_mounts(s, mounted)
    mounts = [*_items(s.volume_mounts, "volume_mounts")]
    mounts += _items(s.container_overrides.get("volumeMounts"), "container_overrides.volumeMounts")
    for at, item in _items(s.pod_spec_overrides.get("containers"), "pod_spec_overrides.containers"):
        if training is not None and item.get("name") == training:
            mounts += _items(item.get("volumeMounts"), f"{at}.volumeMounts")
    for at, m in mounts:
        path = m.get("mountPath")
        if isinstance(path, str) and path.startswith("/"):
            owner = mounted.setdefault(mount_point(path), at)
            if owner != at:
                yield f"{at}.mountPath", f"already mounted by {owner}"


def _command_or_launcher(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.launcher is not None and s.command:
        yield "command", "set either command or launcher, not both"


def _args_need_command(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.args and not s.command:
        yield "args", "needs command (for launcher programs use launcher.args)"


def _env_unique(s: JobSpec) -> Iterator[tuple[str, str]]:
    return rules.env_unique(s.env, s.env_list, s.secret_env)


def _label_in_one_place(s: JobSpec) -> Iterator[tuple[str, str]]:
    for label, field_name in ((QUEUE_LABEL, "queue"), (PRIORITY_LABEL, "priority_class")):
        if label in s.labels and getattr(s, field_name):
            yield f"labels[{label!r}]", f"set by {field_name}; give it in one place"


def _elastic_bounds(s: JobSpec) -> Iterator[tuple[str, str]]:
    if s.elastic is not None and s.elastic.min_nodes > s.elastic.max_nodes:
        yield "elastic.min_nodes", "must not exceed elastic.max_nodes"


def _nodes_within_elastic_bounds(s: JobSpec) -> Iterator[tuple[str, str]]:
    e = s.elastic
    if e is not None and not e.min_nodes <= s.num_nodes <= e.max_nodes:
        yield "num_nodes", "must lie between elastic.min_nodes and elastic.max_nodes"


# The rules that relate fields to each other. Each runs on its own, skipped only when it reads
# a field of the wrong type (``structuring.between``): one pass reports all the others.
RULES: tuple[Callable[[JobSpec], Iterable[tuple[str, str]]], ...] = (
    _command_or_launcher,
    _args_need_command,
    _program,
    _no_python,
    resource_rules.resources_consistent,
    _env_unique,
    _storage,
    _label_in_one_place,
    _elastic_bounds,
    _nodes_within_elastic_bounds,
)

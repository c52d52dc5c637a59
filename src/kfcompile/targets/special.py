"""The parts of the field table that are code, not rows: the program (a launcher's command is
each target's own), processes per node (derived), the environment (one list from three
fields), GPUs (request equal to limit) and the volumes kfcompile adds itself (shared memory,
the inline script, the work directory). Each renders where the table places it; the importer
reads each back with code of its own (``importer/special.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from kfcompile.fieldpath import FieldPath
from kfcompile.generated import companion_volumes
from kfcompile.paths import copied, key, select
from kfcompile.spec import JobSpec
from kfcompile.targets.codecs import Entry, Plain, env_var, secret_env_var

Render = Callable[[JobSpec, "list[str] | None", list[Entry]], None]  # appends its entries


class Special(Plain):
    """A step of the table written as code: what it feeds (spec field, slot) and how it
    renders; the importer reads it back with code of its own."""

    __slots__ = ("feeds", "name", "render")

    def __init__(self, name: str, feeds: tuple[tuple[str, str], ...], render: Render) -> None:
        self.name, self.feeds, self.render = name, feeds, render


_SPECIAL_FIELDS = ("launcher", "command", "args", "nprocs_per_node", "gpus_per_node", "env")
_AT = {
    f: FieldPath.of(f)
    for f in (*_SPECIAL_FIELDS, "env_list", "secret_env", "shm_size", "script", "work_dir")
}


def _program(spec: JobSpec, command: list[str] | None, out: list[Entry]) -> None:
    """The launcher's command (each target builds its own), or command and args as written."""
    if command is not None:
        out.append(Entry("launcher", "container.command", command, "", False, _AT["launcher"]))
    elif spec.command:
        words = list(spec.command)
        out.append(Entry("command", "container.command", words, "", False, _AT["command"]))
        if spec.args:
            args = list(spec.args)
            out.append(Entry("args", "container.args", args, "", False, _AT["args"]))


def _nprocs(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    at = _AT["nprocs_per_node"]
    out.append(Entry("nprocs_per_node", "scale.nprocPerNode", spec.nprocs, "", False, at))


def _env(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    """One env list, in this order: ``env``, ``env_list``, ``secret_env``."""
    env, listed, secret = _AT["env"], _AT["env_list"], _AT["secret_env"]
    for k, v in spec.env.items():
        value, sub = env_var(k, v), select("name", k)
        out.append(Entry(f"env{key(k)}", "container.env", value, sub, False, env))
    for i, item in enumerate(spec.env_list):
        sub = select("name", item["name"])
        out.append(Entry(f"env_list[{i}]", "container.env", copied(item), sub, False, listed))
    for i, name in enumerate(spec.secret_env):
        value, sub = secret_env_var(name, spec.secret_name), select("name", name)
        out.append(Entry(f"secret_env[{i}]", "container.env", value, sub, False, secret))


def _gpus(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    """GPUs cannot be overcommitted: the limit is required, the request must equal it."""
    if spec.gpus_per_node:
        gpu, count, at = key(spec.gpu_resource), str(spec.gpus_per_node), _AT["gpus_per_node"]
        for group in (".requests", ".limits"):
            out.append(Entry("gpus_per_node", "container.resources", count, group + gpu, False, at))


def _mounts(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    for source, mount, _volume in companion_volumes(spec):
        sub = select("mountPath", mount["mountPath"])
        out.append(Entry(source, "container.volumeMounts", mount, sub, False, _AT[source]))


def _volumes(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    for source, _mount, volume in companion_volumes(spec):
        sub = select("name", volume["name"])
        out.append(Entry(source, "pod.volumes", volume, sub, False, _AT[source]))


COMPANIONS = ("shm_size", "script", "work_dir")
COMMAND = "container.command"
PROGRAM = Special(
    "program", (("launcher", COMMAND), ("command", COMMAND), ("args", "container.args")), _program
)
NPROCS = Special("nprocs", (("nprocs_per_node", "scale.nprocPerNode"),), _nprocs)
ENV = Special(
    "env",
    (("env", "container.env"), ("env_list", "container.env"), ("secret_env", "container.env")),
    _env,
)
GPUS = Special("gpus", (("gpus_per_node", "container.resources"),), _gpus)
MOUNTS = Special("mounts", tuple((f, "container.volumeMounts") for f in COMPANIONS), _mounts)
VOLUMES = Special("volumes", tuple((f, "pod.volumes") for f in COMPANIONS), _volumes)

"""The parts of the field table that are code, not rows, each one object with both directions:
the program (a launcher's command is each target's own), processes per node (derived), the
environment (one list from three fields), GPUs (request equal to limit) and the volumes
kfcompile adds itself (shared memory, the inline script, the work directory). ``render`` writes
a special where the table places it; ``read`` takes it back out of a manifest's slots (the
importer runs the reads in ``importer/special.py``'s order: each reads what those before it
found, so the GPUs decide the default processes per node, the job's name the Secret of
``secret_env``, the scale the launcher's command).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from attrs import frozen

from kfcompile.kinds import PYTORCHJOB
from kfcompile.spec import additions, rules, torchrun
from kfcompile.spec.additions import (
    DEFAULT_GPU,
    GPU_RESOURCES,
    PROVISIONING_PREFIX,
    SCRIPT_DIR,
    SHM_DIR,
    script_configmap,
    script_volume,
)
from kfcompile.spec.errors import SpecError
from kfcompile.spec.fieldpath import FieldPath
from kfcompile.spec.load import structure
from kfcompile.spec.model import JobSpec
from kfcompile.spec.object_paths import Select, copied, find_named, key, select
from kfcompile.targets.codecs import (
    GONE,
    MISSING,
    Entry,
    Part,
    Reader,
    Values,
    env_var,
    plain_env,
    present,
    secret_env_var,
)

Render = Callable[[JobSpec, "list[str] | None", list[Entry]], None]  # appends its entries
Read = Callable[[Reader, Values], None]  # takes its parts of the slots, puts spec values


@frozen(repr=False, eq=False, slots=False)
class Special:
    """A step of the table written as code: what it feeds (spec field, slot), how it renders
    and how it is read back (None: another special reads it with its own)."""

    name: str
    feeds: tuple[tuple[str, str], ...]
    render: Render
    read: Read | None


_SPECIAL_FIELDS = ("launcher", "command", "args", "nprocs_per_node", "gpus_per_node", "env")
_AT = {
    f: FieldPath.of(f)
    for f in (
        *_SPECIAL_FIELDS,
        "env_list",
        "secret_env",
        "shm_size",
        "script",
        "work_dir",
        "provisioning_parameters",
    )
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


def _companion_volumes(spec: JobSpec) -> Iterator[tuple[str, additions.Object, additions.Object]]:
    """The volumes kfcompile adds itself (``JobSpec.companions``): (spec field, mount, volume)."""
    for made in spec.companions:
        if made.field == "script":
            executable = spec.launcher is not None and spec.launcher.no_python
            yield made.field, *script_volume(spec.name, executable)
            continue
        if made.field == "shm_size":
            volume = additions.shm_volume(made.volume, spec.shm_size)
        else:
            assert spec.work_dir is not None
            claim = {"claimName": spec.work_dir.pvc}
            volume = {"name": made.volume, "persistentVolumeClaim": claim}
        yield made.field, additions.mount(made.volume, made.mount_path), volume


def _mounts(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    for source, mount, _volume in _companion_volumes(spec):
        sub = select("mountPath", mount["mountPath"])
        out.append(Entry(source, "container.volumeMounts", mount, sub, False, _AT[source]))


def _volumes(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    for source, _mount, volume in _companion_volumes(spec):
        sub = select("name", volume["name"])
        out.append(Entry(source, "pod.volumes", volume, sub, False, _AT[source]))


def _provisioning(spec: JobSpec, _: list[str] | None, out: list[Entry]) -> None:
    """Each ProvisioningRequest parameter as the job annotation Kueue passes on."""
    at = _AT["provisioning_parameters"]
    for k, v in spec.provisioning_parameters.items():
        sub = key(PROVISIONING_PREFIX + k)
        out.append(Entry(f"provisioning_parameters{key(k)}", "job.annotations", v, sub, False, at))


# --- reading back -------------------------------------------------------------------------------

LAUNCHERS = ("torchrun", "python")
OLD_NPROCS = "nProcPerNode"  # where the Training Operator once read processes per node


def _read_program(r: Reader, values: Values) -> None:
    """``command``/``args``, or the ``launcher`` (and inline ``script``) written as them."""
    volumes, mounts = values.get("pod.volumes"), values.get("container.volumeMounts")
    command = r.one("container.command")
    args = r.one("container.args")
    launcher = None
    if command is not None and args is None and _words(command[1]):
        launcher = _launcher(r, command[1])
    if command is not None and launcher is not None:
        _script(r, launcher, volumes, mounts)
        if not launcher["args"]:
            del launcher["args"]
        r.put("launcher", launcher, command[0])
        return
    if command is not None:
        r.put("command", command[1], command[0])
    if args is not None:
        r.put("args", args[1], args[0])


def _words(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(w, str) for w in value)


def _entrypoint(word: str) -> bool:
    return bool(word.strip()) and not word.startswith("-")


def _launcher(r: Reader, command: list[str]) -> dict[str, Any] | None:
    kind = command[0]
    if kind not in LAUNCHERS:
        return None
    start = 1
    torchrun_flags = r.kind == PYTORCHJOB.name and kind == "torchrun"
    module, no_python_flag = torchrun.MODULE.short, torchrun.NO_PYTHON.flag
    if torchrun_flags:  # the rendezvous flags come first
        start = next(
            (i for i, w in enumerate(command) if i and (w == module or not w.startswith("-"))),
            len(command),
        )
    if torchrun_flags:
        no_python = command[start - 1] == no_python_flag  # the last flag, as the target writes it
    else:
        no_python = kind == "torchrun" and command[1:2] == [no_python_flag]
        start += no_python
    program = _launched(command[start:])
    if program is None or (no_python and "module" in program):
        return None
    launcher = {"kind": kind, **program, **({"no_python": True} if no_python else {})}
    if torchrun_flags:
        return launcher if _renders_as(r, launcher, command) else None
    return launcher


def _launched(words: list[str]) -> dict[str, Any] | None:
    """A launcher's program as kfcompile writes it: ``-m module args`` or ``file args``."""
    if words[:1] == [torchrun.MODULE.short]:
        if len(words) < 2 or any(rules.python_module(words[1])):
            return None
        return {"module": words[1], "args": words[2:]}
    if not words or not _entrypoint(words[0]):
        return None
    return {"entrypoint": words[0], "args": words[1:]}


def _renders_as(r: Reader, launcher: dict[str, Any], command: list[str]) -> bool:
    """Whether the manifest's target writes exactly ``command`` for this launcher."""
    keys = ("name", "num_nodes", "nprocs_per_node", "gpus_per_node", "elastic")
    data = {k: r.data[k] for k in keys if k in r.data}
    try:
        spec = structure({**data, "image": "image", "launcher": launcher})
    except SpecError:
        return False
    return r.command(spec) == command


Slot = tuple[FieldPath, Part] | None  # where a slot was read, its working copy


def _script(r: Reader, launcher: dict[str, Any], volumes: Slot, mounts: Slot) -> None:
    """The inline script: its ConfigMap, volume and mount, exactly as kfcompile writes them."""
    entry: str | None = launcher.get("entrypoint")
    if entry is None or not entry.startswith(SCRIPT_DIR + "/") or volumes is None or mounts is None:
        return
    file_name, job, namespace = (
        entry[len(SCRIPT_DIR) + 1 :],
        r.data["name"],
        r.data.get("namespace"),
    )
    mount, volume = script_volume(job, bool(launcher.get("no_python")))
    at_volume, at_mount = _index(volumes[1], volume), _index(mounts[1], mount)
    if at_volume is None or at_mount is None:
        return
    meta = script_configmap(job, namespace, file_name, None)["metadata"]
    for c in r.companions:
        if c.get("kind") == "ConfigMap" and c.get("metadata") == meta:
            data = c.get("data")
            text = data.get(file_name) if isinstance(data, dict) else None
            if c == script_configmap(job, namespace, file_name, text):
                volumes[1].take((at_volume,))
                mounts[1].take((at_mount,))
                r.companions.remove(c)
                launcher["entrypoint"] = file_name
                at = FieldPath((), f"ConfigMap {meta['name']}.data")
                r.put("script", text, at)
            return


def _index(doc: Part, item: dict[str, Any]) -> int | None:
    """Where ``item`` is in a list slot's working copy, if it is."""
    items = doc.root if isinstance(doc.root, list) else []
    return next((i for i, v in enumerate(items) if v is not GONE and v == item), None)


def _read_nprocs(r: Reader, values: Values) -> None:
    """Processes per node, left out where the spec derives the same number. Absent from the
    manifest it is ``auto``: the default of every Trainer release and of the operator (an
    elastic policy's ``nProcPerNode``, where the operator once read it, is read then)."""
    found = r.one("scale.nprocPerNode")
    if found is None and "run.elastic" in values:
        where, doc = values["run.elastic"]
        old = doc.take((OLD_NPROCS,))
        found = None if old is MISSING else (where / OLD_NPROCS, old)
    value: Any = "auto" if found is None else found[1]
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if found is not None and value in ("cpu", "gpu"):
        r.lose(found[0], f"{value!r} has no spec equivalent: written as 'auto'")
        value = "auto"
    gpus = r.data.get("gpus_per_node") or 0
    if value != (gpus or 1) or (gpus > 1 and _python_launcher(r)):
        r.put("nprocs_per_node", value, found[0] if found else "")


def _python_launcher(r: Reader) -> bool:
    """Whether a PyTorchJob's command reads as a ``python`` launcher: there the target refuses
    the default processes per node of more than one GPU (one process, a WORLD_SIZE of one per
    GPU), so the number the manifest says is kept."""
    command = r.one(COMMAND)
    return (
        r.kind == PYTORCHJOB.name
        and command is not None
        and r.one("container.args") is None
        and _words(command[1])
        and command[1][0] == "python"
        and _launcher(r, command[1]) is not None
    )


def _read_env(r: Reader, _: Values) -> None:
    """The container's env list split as ``_env`` renders it: plain values first (``env``),
    ``secret_env`` references last, anything else between (``env_list``)."""
    items: list[tuple[FieldPath, Any]] = []
    seen: dict[str, FieldPath] = {}
    first: FieldPath | None = None
    for at, value in r.found.get("container.env", []):
        if not isinstance(value, list):
            r.lose(at, "must be a list: dropped")
            continue
        first = first or at
        for item in value:
            name = item.get("name") if isinstance(item, dict) else None
            here = at / Select("name", name) if isinstance(name, str) else at
            if isinstance(name, str) and name in seen:
                r.lose(here, f"also set in {seen[name]}: dropped")
                continue
            if isinstance(name, str):
                seen[name] = at
            items.append((here, item))
    if first is None:
        return
    start = 0
    while start < len(items) and plain_env(items[start][1]):
        start += 1
    end = len(items)
    secret = additions.secret_name(r.data["name"])
    while end > start and _secret_ref(items[end - 1][1], secret):
        end -= 1
    if start:
        r.put("env", {item["name"]: item["value"] for _, item in items[:start]}, first)
    if end > start:
        r.put("env_list", [item for _, item in items[start:end]], first)
    if end < len(items):
        r.put("secret_env", [item["name"] for _, item in items[end:]], first)
    for at, item in items[:start]:
        r.note(FieldPath.of("env", item["name"]), at)
    for i, (at, _) in enumerate(items[start:end]):
        r.note(FieldPath.of("env_list", i), at)
    for i, (at, _) in enumerate(items[end:]):
        r.note(FieldPath.of("secret_env", i), at)


def _secret_ref(item: Any, secret: str) -> bool:
    """An entry as ``secret_env`` renders it: the job's Secret, key = name."""
    name = item.get("name") if isinstance(item, dict) else None
    return isinstance(name, str) and item == secret_env_var(name, secret)


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _read_gpus(r: Reader, values: Values) -> None:
    """A known accelerator whose limit is a count and whose request, if any, equals it."""
    if "container.resources" not in values:
        return
    where, doc = values["container.resources"]
    requests, limits = (doc.get((group,)) for group in ("requests", "limits"))
    requests = requests if isinstance(requests, dict) else {}
    limits = limits if isinstance(limits, dict) else {}
    for gpu in GPU_RESOURCES:
        count = _count(limits.get(gpu))
        if count and (gpu not in requests or _count(requests[gpu]) == count):
            doc.take(("requests", gpu))
            doc.take(("limits", gpu))
            r.put("gpus_per_node", count, where / "limits" / gpu)
            if gpu != DEFAULT_GPU:
                r.put("gpu_resource", gpu, where / "limits" / gpu)
            return


def _read_shm(r: Reader, values: Values) -> None:
    """The memory-backed /dev/shm that ``shm_size`` writes: a mount there of an ``emptyDir``
    with ``medium: Memory`` and a size limit (whatever its volume's name). The inline script's
    volume and mount are the program's (``_script``), the work directory's are rows'."""
    if "pod.volumes" not in values or "container.volumeMounts" not in values:
        return
    (where, volumes), (_, mounts) = values["pod.volumes"], values["container.volumeMounts"]
    if not isinstance(volumes.root, list) or not isinstance(mounts.root, list):
        return
    for i, m in enumerate(mounts.root):
        if isinstance(m, dict) and m == additions.mount(m.get("name"), SHM_DIR):
            size = _shm_size(find_named(present(volumes.root), m["name"]))
            if size is not None:
                mounts.take((i,))
                volumes.take((Select("name", m["name"]),))
                at = where / Select("name", m["name"]) / "emptyDir" / "sizeLimit"
                r.put("shm_size", size, at)
            return


def _shm_size(volume: Any) -> Any:
    """The size of a memory-backed emptyDir with a size limit (what ``shm_size`` renders)."""
    empty = volume.get("emptyDir") if isinstance(volume, dict) else None
    if not isinstance(empty, dict) or "sizeLimit" not in empty:
        return None
    size = empty["sizeLimit"]
    return size if volume == additions.shm_volume(volume.get("name"), size) else None


def _read_provisioning(r: Reader, values: Values) -> None:
    """The job annotations with Kueue's ProvisioningRequest prefix: each a parameter."""
    if "job.annotations" not in values:
        return
    where, doc = values["job.annotations"]
    annotations = doc.root if isinstance(doc.root, dict) else {}
    found = {
        k.removeprefix(PROVISIONING_PREFIX): doc.take((k,))
        for k in list(annotations)
        if isinstance(k, str) and k.startswith(PROVISIONING_PREFIX)
    }
    if found:
        r.put("provisioning_parameters", found, where)
        for k in found:
            r.note(FieldPath.of("provisioning_parameters", k), where / (PROVISIONING_PREFIX + k))


COMPANIONS = ("shm_size", "script", "work_dir")
COMMAND = "container.command"
PROGRAM = Special(
    "program",
    (("launcher", COMMAND), ("command", COMMAND), ("args", "container.args")),
    _program,
    _read_program,
)
NPROCS = Special("nprocs", (("nprocs_per_node", "scale.nprocPerNode"),), _nprocs, _read_nprocs)
ENV = Special(
    "env",
    (("env", "container.env"), ("env_list", "container.env"), ("secret_env", "container.env")),
    _env,
    _read_env,
)
GPUS = Special("gpus", (("gpus_per_node", "container.resources"),), _gpus, _read_gpus)
# The mounts are read with their volumes: ``shm_size`` by ``VOLUMES``, the script by ``PROGRAM``.
MOUNTS = Special("mounts", tuple((f, "container.volumeMounts") for f in COMPANIONS), _mounts, None)
VOLUMES = Special("volumes", tuple((f, "pod.volumes") for f in COMPANIONS), _volumes, _read_shm)
PROVISIONING = Special(
    "provisioning",
    (("provisioning_parameters", "job.annotations"),),
    _provisioning,
    _read_provisioning,
)
# The slots whose parts the specials take before the rows that take the rest.
TAKES_PARTS = frozenset(slot for s in (GPUS, MOUNTS, VOLUMES, PROVISIONING) for _, slot in s.feeds)

"""The program read back: ``command``/``args``, or the ``launcher`` (and inline ``script``) that
kfcompile writes as them. The inverse of the targets' launcher commands (``targets/special.py``
places them; ``pytorchjob_v1.command`` and ``trainjob.command`` build them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from kfcompile import rules, torchrun
from kfcompile.errors import SpecError
from kfcompile.fieldpath import FieldPath
from kfcompile.generated import SCRIPT_DIR, script_configmap, script_volume
from kfcompile.importer.document import GONE, Doc
from kfcompile.load import structure
from kfcompile.targets import pytorchjob_v1

if TYPE_CHECKING:
    from kfcompile.importer.state import Reading

LAUNCHERS: Final = ("torchrun", "python")
Slot = tuple[FieldPath, Doc] | None  # where a slot was read, its working copy


def read_program(r: Reading, volumes: Slot, mounts: Slot) -> None:
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


def _launcher(r: Reading, command: list[str]) -> dict[str, Any] | None:
    kind = command[0]
    if kind not in LAUNCHERS:
        return None
    start = 1
    torchrun_flags = r.kind == pytorchjob_v1.KIND and kind == "torchrun"
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
    program = _program(command[start:])
    if program is None or (no_python and "module" in program):
        return None
    launcher = {"kind": kind, **program, **({"no_python": True} if no_python else {})}
    if torchrun_flags:
        return launcher if _renders_as(r, launcher, command) else None
    return launcher


def _program(words: list[str]) -> dict[str, Any] | None:
    """A launcher's program as kfcompile writes it: ``-m module args`` or ``file args``."""
    if words[:1] == [torchrun.MODULE.short]:
        if len(words) < 2 or any(rules.python_module(words[1])):
            return None
        return {"module": words[1], "args": words[2:]}
    if not words or not _entrypoint(words[0]):
        return None
    return {"entrypoint": words[0], "args": words[1:]}


def _renders_as(r: Reading, launcher: dict[str, Any], command: list[str]) -> bool:
    """Whether the PyTorchJob target writes exactly ``command`` for this launcher."""
    keys = ("name", "num_nodes", "nprocs_per_node", "gpus_per_node", "elastic")
    data = {k: r.data[k] for k in keys if k in r.data}
    try:
        spec = structure({**data, "image": "image", "launcher": launcher})
    except SpecError:
        return False
    return pytorchjob_v1.command(spec) == command


def _script(r: Reading, launcher: dict[str, Any], volumes: Slot, mounts: Slot) -> None:
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


def _index(doc: Doc, item: dict[str, Any]) -> int | None:
    """Where ``item`` is in a list slot's working copy, if it is."""
    items = doc.root if isinstance(doc.root, list) else []
    return next((i for i, v in enumerate(items) if v is not GONE and v == item), None)

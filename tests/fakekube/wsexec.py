"""Exec into a fake pod over the Kubernetes channel websocket protocol.

Speaks ``v5.channel.k8s.io`` (the client ends stdin with a close frame ``[255, 0]``) and
``v4.channel.k8s.io``: every message starts with a channel byte, 0 stdin, 1 stdout, 2 stderr,
3 error (a ``Status``: ``Success``, or ``Failure`` with the exit code in
``details.causes[{reason: ExitCode}]``). Commands run in-process against the pod's volumes:
a path under a ``volumeMounts`` entry lives in that volume (a PersistentVolumeClaim's is
``Store.volume(ns, claim)``, honouring ``subPath``), any other path in a per-container scratch
filesystem. Supported: ``tar`` (``-x``/``-c``/``-t`` with ``-f -``, ``-C DIR``, ``-z``),
``mkdir [-p]``, ``rm [-rf]``, ``cat``, ``test -d/-e/-f``, ``true``, ``false``, and
``sh -c`` / ``bash -c`` scripts chaining those with ``&&``, ``;`` and ``cd``. Anything else
exits 127. Directories exist only implicitly (through their files) or once made by ``mkdir`` or
``tar -x``; file modes are not kept.
"""

from __future__ import annotations

import asyncio
import io
import json
import posixpath
import shlex
import tarfile
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from .store import Store

Obj = dict[str, Any]

__all__ = ["Filesystem", "exec_handler", "run_command"]

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
_FRAME = 1 << 20  # stdout/stderr frame size


@dataclass
class _Mount:
    path: str  # absolute mount path in the container
    files: dict[str, bytes]
    dirs: set[str]
    prefix: str  # subPath inside the volume


class Filesystem:
    """The container's view of its volumes (paths are absolute container paths)."""

    def __init__(self, store: Store, pod: Obj, container: str) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta.get("namespace", "default"), meta["name"]
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        entry: Obj = next(
            (
                c
                for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
                if c.get("name") == container
            ),
            {},
        )
        self.workdir = entry.get("workingDir") or "/"
        root_files, root_dirs = store.filesystem(("pod", ns, name, f"container:{container}"))
        self._mounts = [_Mount("/", root_files, root_dirs, "")]
        for mount in entry.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name")) or {}
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            key = ("pvc", ns, claim) if claim else ("pod", ns, name, f"volume:{mount['name']}")
            files, dirs = store.filesystem(key)
            prefix = posixpath.normpath(mount.get("subPath") or ".").strip("/")
            self._mounts.append(
                _Mount(posixpath.normpath(mount["mountPath"]), files, dirs, prefix.strip("."))
            )

    def locate(self, path: str, cwd: str) -> tuple[_Mount, str]:
        """The mount holding ``path`` and the path inside its volume (``""``: volume root)."""
        full = posixpath.normpath(posixpath.join(cwd, path))
        best = max(
            (
                m
                for m in self._mounts
                if m.path == "/" or full == m.path or full.startswith(m.path + "/")
            ),
            key=lambda m: len(m.path),
        )
        inner = full[len(best.path) :].strip("/") if best.path != "/" else full.strip("/")
        return best, "/".join(p for p in (best.prefix, inner) if p)

    @staticmethod
    def is_dir(mount: _Mount, rel: str) -> bool:
        if rel in ("", mount.prefix) or rel in mount.dirs:
            return True
        return any(f.startswith(rel + "/") for f in mount.files)

    @staticmethod
    def make_dirs(mount: _Mount, rel: str) -> None:
        parts = rel.split("/") if rel else []
        for i in range(1, len(parts) + 1):
            mount.dirs.add("/".join(parts[:i]))


@dataclass
class _Result:
    # Chunks, not one buffer: a file's content goes out as a view of the volume's bytes, so a
    # large `tar -c` costs no copy (tests measure the client's memory in this process).
    stdout: list[bytes | memoryview] = field(default_factory=list)
    stderr: bytearray = field(default_factory=bytearray)

    def out(self, data: bytes | memoryview) -> None:
        if data:
            self.stdout.append(data)

    def err(self, text: str) -> None:
        self.stderr += text.encode()


Command = Callable[[list[str], bytes, _Result, "_Shell"], int]


@dataclass
class _Shell:
    fs: Filesystem
    cwd: str


def _tar(argv: list[str], stdin: bytes, out: _Result, sh: _Shell) -> int:
    mode, directory, archive, gzip = "", sh.cwd, None, False
    members: list[str] = []
    args = list(argv[1:])
    if args and not args[0].startswith("-"):  # old style: tar xf - ...
        args[0] = "-" + args[0]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            if name in ("extract", "get", "create", "list"):
                mode = {"extract": "x", "get": "x", "create": "c", "list": "t"}[name]
            elif name in ("file", "directory"):
                if not value:
                    value, i = args[i], i + 1
                if name == "file":
                    archive = value
                else:
                    directory = posixpath.join(directory, value)
            elif name in ("gzip", "gunzip", "ungzip"):
                gzip = True
            elif name not in (
                "no-same-owner",
                "no-same-permissions",
                "touch",
                "overwrite",
                "verbose",
                "preserve-permissions",
                "same-permissions",
                "warning",
                "numeric-owner",
            ):
                out.err(f"tar: unrecognized option '{arg}'\n")
                return 2
        elif arg.startswith("-") and len(arg) > 1:
            for flag in arg[1:]:
                if flag in "xct":
                    mode = flag
                elif flag == "f":
                    archive, i = args[i], i + 1
                elif flag == "C":
                    directory, i = posixpath.join(directory, args[i]), i + 1
                elif flag == "z":
                    gzip = True
                elif flag not in "vpmo":
                    out.err(f"tar: invalid option -- '{flag}'\n")
                    return 2
        else:
            members.append(arg)
    if not mode:
        out.err("tar: You must specify one of the '-Acdtrux' options\n")
        return 2
    if archive != "-":
        out.err("tar: fakekube supports only -f - (stdin/stdout)\n")
        return 2
    mount, base = sh.fs.locate(directory, "/")
    if not sh.fs.is_dir(mount, base):
        out.err(f"tar: {directory}: Cannot open: No such file or directory\n")
        out.err("tar: Error is not recoverable: exiting now\n")
        return 2
    if mode == "c":
        return _tar_create(mount, base, members or [], out, gzip)
    return _tar_read(mount, base, members, stdin, out, extract=mode == "x")


def _tar_read(
    mount: Any, base: str, members: list[str], data: bytes, out: _Result, *, extract: bool
) -> int:
    failed = False
    wanted = [m.strip("/").removeprefix("./") for m in members]
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as archive:
            for member in archive:
                name = member.name
                if name.startswith("/"):
                    out.err("tar: Removing leading `/' from member names\n")
                    name = name.lstrip("/")
                clean = posixpath.normpath(name) if name else "."
                if ".." in clean.split("/"):
                    out.err(f"tar: {member.name}: Member name contains '..'\n")
                    failed = True
                    continue
                if wanted and not any(clean == w or clean.startswith(w + "/") for w in wanted):
                    continue
                if not extract:
                    out.out((member.name + "\n").encode())
                    continue
                rel = "/".join(p for p in (base, "" if clean == "." else clean) if p)
                if member.isdir():
                    Filesystem.make_dirs(mount, rel)
                elif member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None
                    mount.files[rel] = source.read()
                    Filesystem.make_dirs(mount, posixpath.dirname(rel))
                elif member.islnk():  # a hard link: the same content under a second name
                    target = posixpath.normpath(member.linkname.lstrip("/"))
                    content = mount.files.get("/".join(p for p in (base, target) if p))
                    if content is None:
                        out.err(f"tar: {member.name}: Cannot hard link to '{target}'\n")
                        failed = True
                        continue
                    mount.files[rel] = content
                    Filesystem.make_dirs(mount, posixpath.dirname(rel))
    except tarfile.TarError:
        out.err("tar: This does not look like a tar archive\n")
        out.err("tar: Exiting with failure status due to previous errors\n")
        return 2
    if failed:
        out.err("tar: Exiting with failure status due to previous errors\n")
        return 2
    return 0


def _tar_create(mount: Any, base: str, members: list[str], out: _Result, gzip: bool) -> int:
    if not members:
        out.err("tar: Cowardly refusing to create an empty archive\n")
        return 2
    failed = False
    now = time.time()
    chunks: list[bytes | memoryview] = []

    def add(name: str, data: bytes | None = None) -> None:
        entry = tarfile.TarInfo(name)
        entry.type = tarfile.REGTYPE if data is not None else tarfile.DIRTYPE
        entry.mode = 0o644 if data is not None else 0o755
        entry.size, entry.mtime = len(data or b""), int(now)
        entry.uname = entry.gname = "root"
        chunks.append(entry.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
        if data:
            chunks.append(memoryview(data))
            chunks.append(bytes(-len(data) % tarfile.BLOCKSIZE))

    for member in members:
        clean = posixpath.normpath(member)
        rel = "/".join(p for p in (base, "" if clean == "." else clean) if p)
        shown = member.rstrip("/") or member
        if rel in mount.files:
            add(shown, mount.files[rel])
            continue
        if not Filesystem.is_dir(mount, rel):
            out.err(f"tar: {member}: Cannot stat: No such file or directory\n")
            failed = True
            continue
        prefix = rel + "/" if rel else ""
        subdirs = {d[len(prefix) :] for d in mount.dirs if d.startswith(prefix)}
        files = {f[len(prefix) :]: c for f, c in mount.files.items() if f.startswith(prefix)}
        for sub in files:
            parts = sub.split("/")[:-1]
            subdirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        add(shown.rstrip("/") + "/")
        for sub in sorted(subdirs | set(files)):
            path = f"{shown.rstrip('/')}/{sub}"
            if sub in files:
                add(path, files[sub])
            else:
                add(path + "/")
    # The end: two zero blocks, padded to a whole record as GNU tar does.
    size = sum(len(c) for c in chunks) + 2 * tarfile.BLOCKSIZE
    chunks.append(bytes(2 * tarfile.BLOCKSIZE + -size % tarfile.RECORDSIZE))
    if gzip:
        packer = zlib.compressobj(wbits=31)  # gzip framing
        chunks = [*(packer.compress(c) for c in chunks), packer.flush()]
    for chunk in chunks:
        out.out(chunk)
    if failed:
        out.err("tar: Exiting with failure status due to previous errors\n")
        return 2
    return 0


def _mkdir(argv: list[str], stdin: bytes, out: _Result, sh: _Shell) -> int:
    parents = any(a in ("-p", "--parents") for a in argv[1:])
    code = 0
    for path in (a for a in argv[1:] if not a.startswith("-")):
        mount, rel = sh.fs.locate(path, sh.cwd)
        exists = sh.fs.is_dir(mount, rel) or rel in mount.files
        parent_ok = sh.fs.is_dir(mount, posixpath.dirname(rel))
        if (exists and not parents) or (not parents and not parent_ok):
            why = "File exists" if exists else "No such file or directory"
            out.err(f"mkdir: cannot create directory '{path}': {why}\n")
            code = 1
            continue
        if rel in mount.files:
            out.err(f"mkdir: cannot create directory '{path}': File exists\n")
            code = 1
            continue
        Filesystem.make_dirs(mount, rel)
    return code


def _rm(argv: list[str], stdin: bytes, out: _Result, sh: _Shell) -> int:
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
    recursive, force = "r" in flags or "R" in flags, "f" in flags
    code = 0
    for path in (a for a in argv[1:] if not a.startswith("-")):
        mount, rel = sh.fs.locate(path, sh.cwd)
        if rel in mount.files:
            del mount.files[rel]
        elif sh.fs.is_dir(mount, rel) and rel:
            if not recursive:
                out.err(f"rm: cannot remove '{path}': Is a directory\n")
                code = 1
                continue
            for name in [f for f in mount.files if f.startswith(rel + "/")]:
                del mount.files[name]
            mount.dirs.difference_update(
                [d for d in mount.dirs if d == rel or d.startswith(rel + "/")]
            )
        elif not force:
            out.err(f"rm: cannot remove '{path}': No such file or directory\n")
            code = 1
    return code


def _cat(argv: list[str], stdin: bytes, out: _Result, sh: _Shell) -> int:
    code = 0
    for path in argv[1:] or ["-"]:
        if path == "-":
            out.out(stdin)
            continue
        mount, rel = sh.fs.locate(path, sh.cwd)
        if rel in mount.files:
            out.out(memoryview(mount.files[rel]))
        else:
            why = "Is a directory" if sh.fs.is_dir(mount, rel) else "No such file or directory"
            out.err(f"cat: {path}: {why}\n")
            code = 1
    return code


def _test(argv: list[str], stdin: bytes, out: _Result, sh: _Shell) -> int:
    if len(argv) != 3 or argv[1] not in ("-d", "-e", "-f"):
        out.err("test: fakekube supports only -d, -e and -f PATH\n")
        return 2
    mount, rel = sh.fs.locate(argv[2], sh.cwd)
    is_file, is_dir = rel in mount.files, sh.fs.is_dir(mount, rel)
    ok = {"-d": is_dir, "-f": is_file, "-e": is_file or is_dir}[argv[1]]
    return 0 if ok else 1


_COMMANDS: dict[str, Command] = {
    "tar": _tar,
    "mkdir": _mkdir,
    "rm": _rm,
    "cat": _cat,
    "test": _test,
    "true": lambda argv, stdin, out, sh: 0,
    "false": lambda argv, stdin, out, sh: 1,
}
_SHELLS = ("sh", "bash")


def _script(script: str, stdin: bytes, out: _Result, sh: _Shell) -> int:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    tokens = list(lexer)
    code, command, skip = 0, [], False  # skip: a failed `&&` chain
    for token in [*tokens, ";"]:
        if token not in ("&&", ";"):
            if token in ("|", "||", ">", ">>", "<", "&", "(", ")"):
                out.err(f"sh: fakekube does not support {token!r}\n")
                return 2
            command.append(token)
            continue
        if command and not skip:
            if command[0] == "cd":
                where = command[1] if len(command) > 1 else "/"
                mount, rel = sh.fs.locate(where, sh.cwd)
                if sh.fs.is_dir(mount, rel):
                    sh.cwd = posixpath.normpath(posixpath.join(sh.cwd, where))
                    code = 0
                else:
                    out.err(f"sh: cd: can't cd to {where}\n")
                    code = 2
            else:
                code = _run(command, stdin, out, sh)
        skip = (token == "&&" and code != 0) or (skip and token == "&&")
        command = []
    return code


def _run(argv: list[str], stdin: bytes, out: _Result, sh: _Shell) -> int:
    program = posixpath.basename(argv[0])
    if program in _SHELLS and len(argv) >= 3 and argv[1] == "-c":
        return _script(argv[2], stdin, out, sh)
    command = _COMMANDS.get(program)
    if command is None:
        out.err(f"{argv[0]}: command not found\n")
        return 127
    return command(argv, stdin, out, sh)


def run_command(
    fs: Filesystem, argv: list[str], stdin: bytes = b""
) -> tuple[list[bytes | memoryview], bytes, int]:
    """Run ``argv`` against ``fs``: ``(stdout chunks, stderr, exit code)``."""
    out = _Result()
    code = _run(argv, stdin, out, _Shell(fs, fs.workdir))
    return out.stdout, bytes(out.stderr), code


def _tar_mode(args: list[str]) -> str:
    """``x``, ``c`` or ``t``: what a tar command line asks for (``""`` if nothing)."""
    long = {"--create": "c", "--extract": "x", "--get": "x", "--list": "t"}
    for i, arg in enumerate(args):
        if arg in long:
            return long[arg]
        if (arg[:1] == "-" and arg[:2] != "--") or (i == 0 and arg[:1] != "-"):
            for mode in "xct":
                if mode in arg:
                    return mode
    return ""


def _commands(script: str) -> list[list[str]]:
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    out: list[list[str]] = [[]]
    for token in lexer:
        if token in ("&&", ";"):
            out.append([])
        else:
            out[-1].append(token)
    return [c for c in out if c]


def _reads_stdin(argv: list[str]) -> bool:
    """Whether the command consumes stdin (so its end is awaited before running it)."""
    program = posixpath.basename(argv[0]) if argv else ""
    if program in _SHELLS and len(argv) >= 3 and argv[1] == "-c":
        return any(_reads_stdin(command) for command in _commands(argv[2]))
    if program == "tar":
        return _tar_mode(argv[1:]) in ("x", "t")
    return program == "cat" and (len(argv) == 1 or "-" in argv[1:])


def _exit_status(code: int, argv: list[str]) -> Obj:
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command "
        f"{argv}, exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def _on(request: web.Request, stream: str) -> bool:
    return request.query.get(stream, "").lower() in ("true", "1")


async def exec_handler(
    request: web.Request,
    store: Store,
    pod: Obj,
    container: str,
    *,
    answer: bytes | Iterable[bytes] | None = None,
    drop_after: int | None = None,
) -> web.StreamResponse:
    """Upgrade to the channel websocket, run the command, stream its output and exit status.

    ``answer``: send this as stdout (exit 0) instead of running the command. ``drop_after``:
    cut the connection after that many stdout frames, with no exit status."""
    argv = request.query.getall("command")
    ws = web.WebSocketResponse(protocols=(V5, V4), max_msg_size=0, autoping=True)
    await ws.prepare(request)
    stdin = bytearray()
    if _on(request, "stdin") and _reads_stdin(argv):
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                data: bytes = message.data
            elif message.type == WSMsgType.TEXT:
                data = message.data.encode()
            else:
                break
            if not data:
                continue
            if data[0] == 0:
                stdin += data[1:]
            elif data[0] == 255 and data[1:2] == b"\x00" and ws.ws_protocol == V5:
                break
    stdout: Iterable[bytes | memoryview]
    if answer is not None:
        stdout, stderr, code = [answer] if isinstance(answer, bytes) else answer, b"", 0
    else:
        fs = Filesystem(store, pod, container)
        stdout, stderr, code = await asyncio.to_thread(run_command, fs, argv, bytes(stdin))
    del stdin
    try:
        if _on(request, "stdout"):  # else the output is discarded
            frames = 0
            for chunk in stdout:
                view = memoryview(chunk)
                for start in range(0, len(view), _FRAME):
                    if frames == drop_after:
                        assert request.transport is not None
                        request.transport.abort()
                        return ws
                    await ws.send_bytes(b"\x01" + view[start : start + _FRAME])
                    frames += 1
        if _on(request, "stderr"):
            for start in range(0, len(stderr), _FRAME):
                await ws.send_bytes(b"\x02" + stderr[start : start + _FRAME])
        status = json.dumps(_exit_status(code, argv)).encode()
        await ws.send_bytes(b"\x03" + status)
        await ws.close()
    except ConnectionError:
        pass
    return ws

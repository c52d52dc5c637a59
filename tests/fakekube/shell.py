"""The commands a fake pod runs, in-process against its volumes (for exec, over HTTP or not).

A path under a ``volumeMounts`` entry lives in that volume (a PersistentVolumeClaim's is
``volume(ns, claim)`` of the store, ``fakekube.port.Objects``), any other path in a
per-container scratch filesystem. Supported: what the work-dir sync and the adapter's tests run:
``tar -x``/``-c`` with ``-f -`` and ``-C DIR`` (flags alone or combined: ``-xf``, ``-x -f``),
``mkdir [-p]``, ``cat`` (its stdin), ``true``, ``false``, and ``sh -c`` / ``bash -c`` scripts
chaining those with ``&&`` and ``;``. Anything else exits 127. Directories exist only implicitly
(through their files) or once made by ``mkdir`` or ``tar -x``; file modes are not kept.
"""

from __future__ import annotations

import io
import posixpath
import shlex
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .port import Objects

Obj = dict[str, Any]

__all__ = ["Filesystem", "reads_stdin", "run_command"]


@dataclass
class _Mount:
    path: str  # absolute mount path in the container
    files: dict[str, bytes]
    dirs: set[str]

    def is_dir(self, rel: str) -> bool:
        return rel == "" or rel in self.dirs or any(f.startswith(rel + "/") for f in self.files)

    def make_dirs(self, rel: str) -> None:
        parts = rel.split("/") if rel else []
        self.dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))

    def write(self, rel: str, content: bytes) -> None:
        self.files[rel] = content
        self.make_dirs(posixpath.dirname(rel))


def _join(base: str, name: str) -> str:
    """``name`` (normalized; ``.``: ``base`` itself) under ``base``, inside one volume."""
    clean = posixpath.normpath(name) if name else "."
    return "/".join(p for p in (base, "" if clean == "." else clean) if p)


class Filesystem:
    """The container's view of its volumes (paths are absolute container paths)."""

    def __init__(self, store: Objects, pod: Obj, container: str) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ns, name = meta.get("namespace", "default"), meta["name"]
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        containers = spec.get("containers") or []
        entry: Obj = next((c for c in containers if c.get("name") == container), {})
        self.workdir = entry.get("workingDir") or "/"
        self._mounts = [_Mount("/", *store.filesystem(("pod", ns, name, f"container:{container}")))]
        for mount in entry.get("volumeMounts") or []:
            volume = volumes.get(mount.get("name")) or {}
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            key = ("pvc", ns, claim) if claim else ("pod", ns, name, f"volume:{mount['name']}")
            path = posixpath.normpath(mount["mountPath"])
            self._mounts.append(_Mount(path, *store.filesystem(key)))

    def locate(self, path: str, cwd: str) -> tuple[_Mount, str]:
        """The mount holding ``path`` and the path inside its volume (``""``: volume root)."""
        full = posixpath.normpath(posixpath.join(cwd, path))
        best = max((m for m in self._mounts
                    if m.path == "/" or full == m.path or full.startswith(m.path + "/")),
                   key=lambda m: len(m.path))  # fmt: skip
        return best, full[len(best.path) :].strip("/") if best.path != "/" else full.strip("/")


@dataclass
class _Result:
    # Chunks, not one buffer: a file's content goes out as a view of the volume's bytes, so a
    # large `tar -c` costs no copy (tests measure the client's memory in this process).
    stdout: list[bytes | memoryview] = field(default_factory=list)
    stderr: bytearray = field(default_factory=bytearray)

    def err(self, text: str) -> None:
        self.stderr += text.encode()


Command = Callable[[list[str], bytes, _Result, Filesystem], int]
_FAILED = "tar: Exiting with failure status due to previous errors\n"


def _tar(argv: list[str], stdin: bytes, out: _Result, fs: Filesystem) -> int:
    mode, archive, directory, members = "", None, fs.workdir, []
    args = iter(argv[1:])
    for arg in args:
        if not arg.startswith("-") or arg == "-":
            members.append(arg)
            continue
        for flag in arg[1:]:
            if flag in "xc":
                mode = flag
            elif flag == "f":
                archive = next(args, None)
            elif flag == "C":
                directory = posixpath.join(directory, next(args, ""))
            else:
                out.err(f"tar: invalid option -- '{flag}'\n")
                return 2
    if not mode:
        out.err("tar: You must specify one of the '-Acdtrux' options\n")
        return 2
    if archive != "-":
        out.err("tar: fakekube supports only -f - (stdin/stdout)\n")
        return 2
    mount, base = fs.locate(directory, "/")
    if not mount.is_dir(base):
        out.err(f"tar: {directory}: Cannot open: No such file or directory\n")
        out.err("tar: Error is not recoverable: exiting now\n")
        return 2
    if mode == "c" and not members:
        out.err("tar: Cowardly refusing to create an empty archive\n")
        return 2
    failed = (_tar_create if mode == "c" else _tar_extract)(mount, base, members, stdin, out)
    if failed:
        out.err(_FAILED)
    return 2 if failed else 0


def _tar_extract(mount: _Mount, base: str, _: list[str], data: bytes, out: _Result) -> bool:
    """Whether it failed."""
    failed = False
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as archive:
            for member in archive:
                name = member.name
                if name.startswith("/"):
                    out.err("tar: Removing leading `/' from member names\n")
                    name = name.lstrip("/")
                if ".." in (posixpath.normpath(name) if name else ".").split("/"):
                    out.err(f"tar: {member.name}: Member name contains '..'\n")
                    failed = True
                    continue
                rel = _join(base, name)
                if member.isdir():
                    mount.make_dirs(rel)
                elif member.isfile():
                    source = archive.extractfile(member)
                    assert source is not None
                    mount.write(rel, source.read())
                elif member.islnk():  # a hard link: the same content under a second name
                    target = posixpath.normpath(member.linkname.lstrip("/"))
                    content = mount.files.get(_join(base, target))
                    if content is None:
                        out.err(f"tar: {member.name}: Cannot hard link to '{target}'\n")
                        failed = True
                        continue
                    mount.write(rel, content)
    except tarfile.TarError:
        out.err("tar: This does not look like a tar archive\n")
        failed = True
    return failed


def _tar_create(mount: _Mount, base: str, members: list[str], _: bytes, out: _Result) -> bool:
    """Whether it failed."""
    failed = False
    chunks: list[bytes | memoryview] = []

    def add(name: str, data: bytes | None = None) -> None:
        entry = tarfile.TarInfo(name)
        entry.type = tarfile.REGTYPE if data is not None else tarfile.DIRTYPE
        entry.mode = 0o644 if data is not None else 0o755
        entry.size = len(data or b"")
        entry.uname = entry.gname = "root"
        chunks.append(entry.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape"))
        if data:
            chunks.extend((memoryview(data), bytes(-len(data) % tarfile.BLOCKSIZE)))

    for member in members:
        rel, shown = _join(base, member), member.rstrip("/") or member
        if rel in mount.files:
            add(shown, mount.files[rel])
            continue
        if not mount.is_dir(rel):
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
            add(path, files[sub]) if sub in files else add(path + "/")
    # The end: two zero blocks, padded to a whole record as GNU tar does.
    size = sum(len(c) for c in chunks) + 2 * tarfile.BLOCKSIZE
    chunks.append(bytes(2 * tarfile.BLOCKSIZE + -size % tarfile.RECORDSIZE))
    out.stdout.extend(chunk for chunk in chunks if chunk)
    return failed


def _mkdir(argv: list[str], stdin: bytes, out: _Result, fs: Filesystem) -> int:
    parents, code = "-p" in argv[1:], 0
    for path in (a for a in argv[1:] if not a.startswith("-")):
        mount, rel = fs.locate(path, fs.workdir)
        if rel in mount.files or (mount.is_dir(rel) and not parents):
            out.err(f"mkdir: cannot create directory '{path}': File exists\n")
            code = 1
        elif not parents and not mount.is_dir(posixpath.dirname(rel)):
            out.err(f"mkdir: cannot create directory '{path}': No such file or directory\n")
            code = 1
        else:
            mount.make_dirs(rel)
    return code


def _cat(argv: list[str], stdin: bytes, out: _Result, fs: Filesystem) -> int:
    if argv[1:] not in ([], ["-"]):
        out.err("cat: fakekube copies only its stdin\n")
        return 2
    out.stdout.extend([stdin] if stdin else [])
    return 0


_COMMANDS: dict[str, Command] = {
    "tar": _tar,
    "mkdir": _mkdir,
    "cat": _cat,
    "true": lambda argv, stdin, out, fs: 0,
    "false": lambda argv, stdin, out, fs: 1,
}


def _script(argv: list[str]) -> list[tuple[list[str], str]] | None:
    """A ``sh -c`` script as ``(command, the operator after it)``: ``&&`` or ``;`` (None: not a
    script). ValueError names any other operator (pipes, redirections, subshells)."""
    if not (len(argv) >= 3 and posixpath.basename(argv[0]) in ("sh", "bash") and argv[1] == "-c"):
        return None
    lexer = shlex.shlex(argv[2], posix=True, punctuation_chars=";&|<>()")
    lexer.whitespace_split = True
    steps: list[tuple[list[str], str]] = []
    command: list[str] = []
    for token in [*lexer, ";"]:
        if token in ("&&", ";"):
            if command:
                steps.append((command, token))
            command = []
        elif token in ("|", "||", ">", ">>", "<", "&", "(", ")"):
            raise ValueError(token)
        else:
            command.append(token)
    return steps


def _run(argv: list[str], stdin: bytes, out: _Result, fs: Filesystem) -> int:
    try:
        steps = _script(argv)
    except ValueError as exc:
        out.err(f"sh: fakekube does not support {exc}\n")
        return 2
    if steps is not None:
        code, skip = 0, False  # skip: the rest of a failed `&&` chain
        for step, then in steps:
            if not skip:
                code = _run(step, stdin, out, fs)
            skip = then == "&&" and (code != 0 or skip)
        return code
    run = _COMMANDS.get(posixpath.basename(argv[0]))
    if run is None:
        out.err(f"{argv[0]}: command not found\n")
        return 127
    return run(argv, stdin, out, fs)


def run_command(
    fs: Filesystem, argv: list[str], stdin: bytes = b""
) -> tuple[list[bytes | memoryview], bytes, int]:
    """Run ``argv`` against ``fs``: ``(stdout chunks, stderr, exit code)``."""
    out = _Result()
    code = _run(argv, stdin, out, fs)
    return out.stdout, bytes(out.stderr), code


def reads_stdin(argv: list[str]) -> bool:
    """Whether the command consumes stdin (so its end is awaited before running it)."""
    try:
        steps = _script(argv)
    except ValueError:
        return False
    if steps is not None:
        return any(reads_stdin(command) for command, _ in steps)
    program = posixpath.basename(argv[0]) if argv else ""
    if program == "tar":
        return any(a.startswith("-") and "x" in a and not a.startswith("--") for a in argv[1:])
    return program == "cat"

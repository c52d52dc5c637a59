"""The submitting machine, as ports: the real clock, and directories as tar streams that flow
to and from disk in chunks (memory stays flat whatever their size)."""

from __future__ import annotations

import collections
import contextlib
import os
import secrets
import shutil
import stat
import tarfile
import time
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import partial
from typing import IO, Final, cast

from attrs import frozen

from kfcompile.ports import Packed

CHUNK: Final = 1 << 20  # bytes per chunk of a stream, and per read or write of a file
NAME_MAX: Final = 255  # bytes of one path component (Linux)
PATH_MAX: Final = 4096  # bytes of a member's path or a link's target (Linux)
HEADER_MAX: Final = 1 << 20  # bytes of headers (pax, GNU long names) before one member
TRAILING_MAX: Final = 1 << 20  # bytes accepted after the end of the archive
LINK_HOPS: Final = 40  # symlinks followed resolving one target (Linux gives up there too)
LINK_WORK: Final = 50_000_000  # steps for resolving all of a stream's links (~10 s at worst)
OPEN_DIRS: Final = 16  # directory descriptors kept open while extracting
MAX_BYTES: Final = 64 << 30
MAX_ENTRIES: Final = 1_000_000
STAGING: Final = ".kfcompile-unpack-"

_DIR_OPEN: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class SystemClock:
    """``kfcompile.ports.Clock`` on ``time.monotonic`` and ``time.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@frozen
class TarFiles:
    """``kfcompile.ports.LocalFiles`` with ``tarfile``'s header parsing and nothing else of it.

    ``unpack`` treats the stream as hostile (it comes from a pod): it never relies on
    tarfile's extraction filters (``os.path.realpath`` gives up past PATH_MAX, CPython
    gh-135034), but creates every path component itself relative to an open directory, never
    following a symlink, in a fresh staging directory that only moves into place once the whole
    stream has been read and checked. ``max_bytes`` (file content) and ``max_entries`` (files,
    directories and links) stop bombs while they stream.
    """

    max_bytes: int = MAX_BYTES
    max_entries: int = MAX_ENTRIES

    def pack(self, directory: str) -> Generator[bytes, None, Packed]:
        """Regular files, directories, hard links and symlinks under ``directory``, depth first
        with names in sorted order; owners are dropped. Symlinks leading outside ``directory``
        (and sockets, FIFOs, devices) are left out: ``unpack`` on the other side would refuse
        them. Files are read as the chunks are drawn."""
        if not os.path.isdir(directory):
            raise NotADirectoryError(f"{directory}: not a directory")
        return _pack(directory)

    def unpack(self, chunks: Iterable[bytes] | bytes, directory: str) -> Packed:
        """Extract a tar stream (plain or gzip) into ``directory``, created if missing; an
        existing directory is merged into (files replaced, others kept). All or nothing: on
        any refusal or error nothing has changed in or around ``directory`` (only a disk error
        while the checked result moves into place could leave part of it moved).

        Refused, as ``ValueError`` naming the member: absolute paths, ``..``, names over 255 or
        paths over 4096 bytes, a path through a symlink (the stream's or the destination's),
        a member given twice, symlinks that lead outside the tree (resolved through the
        stream's other links, as the kernel would), hard links to anything but a regular file
        of the stream, devices and FIFOs, sparse or unknown member types, more than
        ``max_bytes`` of content or ``max_entries`` entries, over 1 MiB of headers for one
        member or after the end. Modes keep only ``rwxr-xr-x`` bits; owners are ignored."""
        stream = [chunks] if isinstance(chunks, bytes) else chunks
        dest = os.path.abspath(directory)
        existed = os.path.isdir(dest)
        if not existed and os.path.lexists(dest):
            raise NotADirectoryError(f"{directory}: not a directory")
        staging = _staging_dir(dest if existed else _nearest_dir(dest))
        try:
            root = os.open(staging, _DIR_OPEN)
            try:
                packed = _Extraction(root, self.max_bytes, self.max_entries).run(stream)
            finally:
                os.close(root)
            if existed:
                _merge(staging, dest, check=True)
                _merge(staging, dest, check=False)
                shutil.rmtree(staging)
            else:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.rename(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return packed


# --- pack ---------------------------------------------------------------------------------------


def _pack(directory: str) -> Generator[bytes, None, Packed]:
    out = _Buffer()
    files = size = 0
    first_name: dict[tuple[int, int], str] = {}  # (device, inode) -> name, for hard links
    for rel, st in _walk(directory):
        path = os.path.join(directory, rel)
        info = tarfile.TarInfo(rel)
        info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
        if stat.S_ISDIR(st.st_mode):
            info.type = tarfile.DIRTYPE
        elif stat.S_ISLNK(st.st_mode):
            info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
            if not _inside(rel, info.linkname):
                continue
        elif not stat.S_ISREG(st.st_mode):
            continue  # sockets, FIFOs, devices
        elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in first_name:
            info.type, info.linkname = tarfile.LNKTYPE, first_name[st.st_dev, st.st_ino]
            files += 1
        else:
            if st.st_nlink > 1:
                first_name[st.st_dev, st.st_ino] = rel
            info.size = st.st_size
            files += 1
            size += st.st_size
        out.data += info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        if info.isreg():
            yield from _content(path, info.size, out)
        if out.full():
            yield out.take()
    # The end of the archive: two zero blocks, padded to a whole record as tar writes it.
    end = out.sent + len(out.data) + 2 * tarfile.BLOCKSIZE
    out.data += bytes(2 * tarfile.BLOCKSIZE + -end % tarfile.RECORDSIZE)
    yield out.take()
    return Packed(files, size)


class _Buffer:
    """Bytes on their way out, sent in chunks of about CHUNK."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.sent = 0

    def full(self) -> bool:
        return len(self.data) >= CHUNK

    def take(self) -> bytes:
        chunk = bytes(self.data)
        self.data.clear()
        self.sent += len(chunk)
        return chunk


def _content(path: str, size: int, out: _Buffer) -> Iterator[bytes]:
    """``size`` bytes of the file into ``out``, sent as it fills, then padded to a block."""
    with open(path, "rb") as f:
        left = size
        while left:
            data = f.read(min(CHUNK, left))
            if not data:
                raise OSError(f"{path}: shrank while it was being packed")
            out.data += data
            left -= len(data)
            if out.full():
                yield out.take()
    out.data += bytes(-size % tarfile.BLOCKSIZE)


def _walk(directory: str) -> Iterator[tuple[str, os.stat_result]]:
    """``(relative path, lstat)`` under ``directory``, depth first, each directory's names in
    sorted order; an explicit stack, so depth is no limit."""
    stack = [iter(_listing(directory, ""))]
    while stack:
        for rel, st in stack[-1]:
            yield rel, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(iter(_listing(directory, rel)))
                break
        else:
            stack.pop()


def _listing(directory: str, rel: str) -> list[tuple[str, os.stat_result]]:
    found = []
    with os.scandir(os.path.join(directory, rel)) as entries:
        for entry in entries:
            try:
                found.append((os.path.join(rel, entry.name), entry.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue  # gone since the listing: nothing to send
    return sorted(found)


def _inside(rel: str, target: str) -> bool:
    if os.path.isabs(target):
        return False
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return resolved != ".." and not resolved.startswith("../")


# --- unpack: reading the stream -----------------------------------------------------------------


class Refused(ValueError):
    """A member that is not extracted, and why (the message is one line for the user)."""

    def __init__(self, name: str | None, why: str) -> None:
        what = _shown(name) if name is not None else "the stream"
        super().__init__(f"refusing to unpack {what}: {why}")


def _shown(name: str) -> str:
    """A hostile name, safe to print: escaped by ``repr`` and cut short."""
    text = repr(name)
    return text if len(text) <= 120 else text[:100] + "..." + text[-12:]


class _Source:
    """The stream as a file for ``tarfile``'s stream mode, gunzipped here (so that what is
    counted is what tarfile reads) and drawn from the chunks only as tarfile asks. ``cap``
    bounds the bytes read until it is lifted: tarfile reads a header whole into memory."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._pieces = _gunzipped(iter(chunks))
        self._buffer = memoryview(b"")
        self.read_bytes = 0
        self.cap: int | None = None
        self.over_cap: Callable[[], Exception] = _after_the_end

    def read(self, size: int = -1) -> bytes:
        while not self._buffer:
            piece = next(self._pieces, None)
            if piece is None:
                return b""
            self._buffer = memoryview(piece)
        n = len(self._buffer) if size < 0 else min(size, len(self._buffer))
        if self.cap is not None and self.read_bytes + n > self.cap:
            raise self.over_cap()
        data, self._buffer = bytes(self._buffer[:n]), self._buffer[n:]
        self.read_bytes += n
        return data

    def limit(self, size: int, over: Callable[[], Exception]) -> None:
        """From here, refuse with ``over()`` once ``size`` more bytes have been read."""
        self.cap, self.over_cap = self.read_bytes + size, over

    def drain(self) -> None:
        """Read to the end (so the chunks' own end is reached); refuse endless trailing data."""
        self.limit(TRAILING_MAX, _after_the_end)
        while self.read(CHUNK):
            pass


def _gunzipped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks, gunzipped if they start as gzip, inflated at most CHUNK bytes at a time."""
    first = b""
    for chunk in chunks:
        first += chunk
        if len(first) >= 2:
            break
    if first[:2] != b"\x1f\x8b":
        yield first
        yield from chunks
        return
    inflate = zlib.decompressobj(wbits=31)
    trailing = 0  # bytes after the gzip stream: read to the end, but not forever
    for chunk in _chain(first, chunks):
        if inflate.eof:
            trailing += len(chunk)
        else:
            data = chunk
            while True:
                try:
                    out = inflate.decompress(data, CHUNK)
                except zlib.error as e:
                    raise ValueError(f"not a readable tar stream: broken gzip data ({e})") from None
                if out:
                    yield out
                data = inflate.unconsumed_tail
                if inflate.eof or (not data and len(out) < CHUNK):
                    break
            if inflate.eof:
                trailing += len(inflate.unused_data)
        if trailing > TRAILING_MAX:
            raise _after_the_end()
    if not inflate.eof:
        raise ValueError("not a readable tar stream: the gzip data ends early")


def _after_the_end() -> Refused:
    return Refused(None, f"more than {TRAILING_MAX:,} bytes after the end of the archive")


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


# --- unpack: the tree ---------------------------------------------------------------------------


class _Extraction:
    """One stream extracted below the directory open as ``root``: every path component is
    opened relative to its parent's descriptor with ``O_NOFOLLOW``, so nothing is ever written
    through a symlink, whatever the stream holds."""

    def __init__(self, root: int, max_bytes: int, max_entries: int) -> None:
        self._root = root
        self._max_bytes = max_bytes
        self._max_entries = max_entries
        self._dirs: collections.OrderedDict[tuple[str, ...], int] = collections.OrderedDict()
        self._links: dict[tuple[str, ...], str] = {}  # every symlink written, by path
        self.files = self.size = self.entries = 0

    def run(self, chunks: Iterable[bytes]) -> Packed:
        source = _Source(chunks)
        try:
            source.limit(HEADER_MAX + CHUNK, partial(_headers_too_long, None))
            # Stream mode only calls read(); opening reads the first header.
            with tarfile.open(fileobj=cast(IO[bytes], source), mode="r|") as archive:
                while True:
                    member = archive.next()
                    source.cap = None
                    if member is None:
                        break
                    # tarfile keeps every header it read (memory grows with the count); we need none
                    archive.members.clear()  # type: ignore[attr-defined]
                    self._member(archive, member)
                    source.limit(HEADER_MAX + CHUNK, partial(_headers_too_long, member.name))
            source.drain()
            self._check_links()
        except tarfile.TarError as e:
            raise ValueError(f"not a readable tar stream: {e}") from None
        finally:
            for fd in self._dirs.values():
                os.close(fd)
            self._dirs.clear()
        return Packed(self.files, self.size)

    def _check_links(self) -> None:
        """Each symlink resolved through all the others, now that the tree is complete: links
        that each stay inside may still leave it together (``x -> .``, ``y -> x/..``)."""
        tree = _LinkTree(self._links)
        budget = [LINK_WORK]
        for path, target in self._links.items():
            if not tree.stays_inside(path[:-1], target, budget):
                why = "too tangled to check" if budget[0] <= 0 else "leads outside the tree"
                raise Refused("/".join(path), f"symlink to {_shown(target)} {why}")

    def _member(self, archive: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        name = member.name
        parts = _parts(name)
        if not parts:
            return  # the archive's own top directory, "./"
        self.entries += 1
        if self.entries > self._max_entries:
            raise Refused(name, f"more than {self._max_entries:,} entries")
        if member.isdir():
            self._mkdir(name, parts, (member.mode & 0o755) | 0o700)
        elif member.issparse():
            raise Refused(name, "sparse files are not accepted")
        elif member.isreg():
            if member.size < 0:  # base-256 sizes can be negative
                raise Refused(name, f"negative size {member.size}")
            if self.size + member.size > self._max_bytes:
                raise Refused(
                    name,
                    f"{member.size:,} more bytes would pass the limit of {self._max_bytes:,} "
                    f"bytes of files",
                )
            source = archive.extractfile(member)
            assert source is not None
            self._write(name, parts, source, member)
            self.files += 1
            self.size += member.size
        elif member.issym():
            self._symlink(name, parts, member.linkname)
        elif member.islnk():
            self._hardlink(name, parts, member.linkname)
            self.files += 1
        elif member.ischr() or member.isblk() or member.isfifo():
            raise Refused(name, "device files and FIFOs are not accepted")
        else:
            raise Refused(name, f"member type {member.type!r} is not accepted")

    def _mkdir(self, name: str, parts: tuple[str, ...], mode: int) -> None:
        parent = self._dir(name, parts[:-1])
        try:
            os.mkdir(parts[-1], 0o700, dir_fd=parent)
        except FileExistsError:
            st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise Refused(
                    name, "given twice (a directory where there is already a file)"
                ) from None
        fd = self._dir(name, parts)
        os.fchmod(fd, mode)

    def _write(
        self,
        name: str,
        parts: tuple[str, ...],
        source: IO[bytes],
        member: tarfile.TarInfo,
    ) -> None:
        parent = self._dir(name, parts[:-1])
        try:
            fd = os.open(parts[-1], _FILE_CREATE, 0o600, dir_fd=parent)
        except FileExistsError:
            raise Refused(name, "given twice (or over a symlink)") from None
        try:
            left = member.size
            while left:
                data = source.read(min(CHUNK, left))
                if not data:
                    raise ValueError(f"not a readable tar stream: {_shown(name)} is cut short")
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                left -= len(data)
            os.fchmod(fd, (member.mode & 0o755) | 0o600)
            with contextlib.suppress(OverflowError, ValueError, OSError):
                os.utime(fd, (member.mtime, member.mtime))  # else: a time the system cannot hold
        finally:
            os.close(fd)

    def _symlink(self, name: str, parts: tuple[str, ...], target: str) -> None:
        if not target or "\x00" in target or len(os.fsencode(target)) > PATH_MAX:
            raise Refused(name, "symlink target is empty, has a NUL byte or is over 4096 bytes")
        if target.startswith("/") or not _stays_inside(parts[:-1], target):
            raise Refused(name, f"symlink to {target!r} leads outside the tree")
        parent = self._dir(name, parts[:-1])
        try:
            os.symlink(target, parts[-1], dir_fd=parent)
        except FileExistsError:
            raise Refused(name, "given twice") from None
        self._links[parts] = target

    def _hardlink(self, name: str, parts: tuple[str, ...], target: str) -> None:
        try:
            source = _parts(target)
        except Refused as e:
            why = str(e).partition(": ")[2]
            raise Refused(name, f"hard link to {_shown(target)}: {why}") from None
        if not source:
            raise Refused(name, "hard link to the top directory")
        target_dir = self._dir(name, parts[:-1])
        source_dir = self._dir(name, source[:-1], create=False)  # the cache keeps both open
        try:
            st = os.stat(source[-1], dir_fd=source_dir, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            raise Refused(name, f"hard link to {_shown(target)}, not a regular file of the stream")
        try:
            os.link(
                source[-1],
                parts[-1],
                src_dir_fd=source_dir,
                dst_dir_fd=target_dir,
                follow_symlinks=False,
            )
        except FileExistsError:
            raise Refused(name, "given twice") from None

    def _dir(self, name: str, parts: tuple[str, ...], *, create: bool = True) -> int:
        """The directory ``parts`` below the root, opened (and made, when ``create``) one
        component at a time without following symlinks; the last few opened stay open."""
        if not parts:
            return self._root
        cached = self._dirs.get(parts)
        if cached is not None:
            self._dirs.move_to_end(parts)
            return cached
        parent = self._dirs.get(parts[:-1])  # the usual case: a sibling came just before
        start = len(parts) - 1 if parent is not None else 0
        fd = parent if parent is not None else self._root
        for depth in range(start, len(parts)):
            child = self._open_dir(name, fd, parts[: depth + 1], create)
            if fd != self._root and fd != parent:
                os.close(fd)
            fd = child
        self._dirs[parts] = fd
        if len(self._dirs) > OPEN_DIRS:
            os.close(self._dirs.popitem(last=False)[1])
        return fd

    @staticmethod
    def _open_dir(name: str, parent: int, parts: tuple[str, ...], create: bool) -> int:
        try:
            return os.open(parts[-1], _DIR_OPEN, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise Refused(name, f"{_shown('/'.join(parts))} is not in the stream") from None
            os.mkdir(parts[-1], 0o755, dir_fd=parent)
            return os.open(parts[-1], _DIR_OPEN, dir_fd=parent)
        except OSError:  # ELOOP: a symlink; ENOTDIR: a file
            mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                raise
            kind = "symlink" if stat.S_ISLNK(mode) else "file"
            raise Refused(name, f"goes through the {kind} {_shown('/'.join(parts))}") from None


def _headers_too_long(previous: str | None) -> Refused:
    what = f"the member after {_shown(previous)}" if previous is not None else "the first member"
    return Refused(None, f"the headers of {what} take more than {HEADER_MAX:,} bytes")


def _parts(name: str) -> tuple[str, ...]:
    """A member's path as components below the top; ``Refused`` when it could leave it."""
    if "\x00" in name:
        raise Refused(name, "the name has a NUL byte")
    if name.startswith("/"):
        raise Refused(name, "absolute path")
    if len(os.fsencode(name)) > PATH_MAX:
        raise Refused(name, f"path longer than {PATH_MAX} bytes")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise Refused(name, "'..' in the path")
    if any(len(os.fsencode(p)) > NAME_MAX for p in parts):
        raise Refused(name, f"a name longer than {NAME_MAX} bytes")
    return parts


def _stays_inside(where: tuple[str, ...], target: str) -> bool:
    """Whether ``target``, a link in directory ``where``, stays inside the tree as written
    (``..`` never above the top); other links on the way are ``_LinkTree``'s business."""
    return _LinkTree({}).stays_inside(where, target, [LINK_WORK])


class _Node:
    __slots__ = ("children", "target")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.target: str | None = None


class _LinkTree:
    """The tree's symlinks by path, to resolve a target as the kernel would."""

    def __init__(self, links: dict[tuple[str, ...], str]) -> None:
        self._top = _Node()
        for path, target in links.items():
            node = self._top
            for part in path:
                node = node.children.setdefault(part, _Node())
            node.target = target

    def stays_inside(self, where: tuple[str, ...], target: str, budget: list[int]) -> bool:
        """Whether ``target``, a link in directory ``where``, resolves inside the tree when
        the links on the way are followed and ``..`` goes up from where they led. Names that
        are not links count as directories (the worst case). More than LINK_HOPS links, or
        more steps than ``budget[0]`` holds (shared by all calls), count as leaving."""
        stack: list[_Node | None] = [self._top]
        for part in where:
            stack.append(self._child(stack[-1], part))
        pending = collections.deque(target.split("/"))
        hops = 0
        while pending:
            budget[0] -= 1
            if budget[0] <= 0:
                return False
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) == 1:
                    return False
                stack.pop()
                continue
            node = self._child(stack[-1], part)
            if node is None or node.target is None:
                stack.append(node)
                continue
            hops += 1
            if hops > LINK_HOPS or node.target.startswith("/"):
                return False
            pending.extendleft(reversed(node.target.split("/")))
        return True

    @staticmethod
    def _child(node: _Node | None, name: str) -> _Node | None:
        return None if node is None else node.children.get(name)


# --- unpack: into place -------------------------------------------------------------------------


def _nearest_dir(path: str) -> str:
    parent = os.path.dirname(path)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    return parent


def _staging_dir(where: str) -> str:
    """A fresh directory in ``where`` (so it moves into place with a rename), named at random."""
    while True:
        path = os.path.join(where, STAGING + secrets.token_hex(8))
        try:
            os.mkdir(path, 0o777)  # the umask applies, as to any directory the user makes
            return path
        except FileExistsError:
            continue


def _merge(staging: str, dest: str, *, check: bool) -> None:
    """Move what ``staging`` holds into the existing ``dest``: a new name moves whole, a file
    replaces a file or symlink, a directory merges into a directory. With ``check`` nothing
    moves, but each other meeting (a directory over a file or a symlink, a file over a
    directory) is refused first, so that the moves cannot stop half way on a conflict."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(staging, rel)) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in sorted(names):
            path = os.path.join(rel, name)
            there = os.path.join(dest, path)
            try:
                mode = os.lstat(there).st_mode
            except FileNotFoundError:
                mode = None
            if mode is not None and is_dir and stat.S_ISDIR(mode):
                stack.append(path)
            elif check:
                if mode is not None and (is_dir or stat.S_ISDIR(mode)):
                    kind = (
                        "symlink"
                        if stat.S_ISLNK(mode)
                        else "directory"
                        if stat.S_ISDIR(mode)
                        else "file"
                    )
                    mine = "a directory" if is_dir else "a file"
                    raise Refused(path, f"{dest} has a {kind} there, the stream {mine}")
            else:
                os.replace(os.path.join(staging, path), there)

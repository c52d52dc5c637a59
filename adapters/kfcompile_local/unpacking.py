"""``TarFiles.unpack``: a hostile tar stream extracted relative to open directories, never
following a symlink, into a staging directory (see ``TarFiles``)."""

from __future__ import annotations

import collections
import contextlib
import os
import stat
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import IO, cast

from kfcompile.lifecycle.ports import Packed
from kfcompile_local.staging import _LinkTree
from kfcompile_local.tarlimits import (
    _DIR_OPEN,
    _FILE_CREATE,
    CHUNK,
    HEADER_MAX,
    LINK_WORK,
    NAME_MAX,
    OPEN_DIRS,
    PATH_MAX,
    TRAILING_MAX,
    Refused,
    _shown,
)

# --- unpack: reading the stream -----------------------------------------------------------------


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

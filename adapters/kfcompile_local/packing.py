"""``TarFiles.pack``: a directory as a tar stream read from disk as its chunks are drawn."""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Generator, Iterator

from kfcompile.lifecycle.ports import Packed
from kfcompile_local.tarlimits import (
    CHUNK,
)

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

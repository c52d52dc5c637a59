"""The submitting machine's directories as tar streams that flow to and from disk in chunks
(memory stays flat whatever their size)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterable

from attrs import frozen

from kfcompile.lifecycle.ports import Packed
from kfcompile_local.packing import _pack
from kfcompile_local.staging import _merge, _nearest_dir, _staging_dir
from kfcompile_local.tarlimits import _DIR_OPEN, MAX_BYTES, MAX_ENTRIES
from kfcompile_local.unpacking import _Extraction


@frozen
class TarFiles:
    """``kfcompile.lifecycle.ports.LocalFiles`` with ``tarfile``'s header parsing and nothing else
    of it.

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

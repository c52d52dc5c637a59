"""The submitting machine, as ports: the real clock, and directories as in-memory tar streams."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

from kfcompile.ports import Packed


class SystemClock:
    """``kfcompile.ports.Clock`` on ``time.monotonic`` and ``time.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class TarFiles:
    """``kfcompile.ports.LocalFiles`` with ``tarfile``, all in memory."""

    def pack(self, directory: str) -> Packed:
        """Regular files, directories and symlinks under ``directory``, by relative path in sorted
        order; owners are dropped. Symlinks leading outside ``directory`` (and sockets, FIFOs,
        devices) are left out: ``unpack`` on the other side would refuse them."""
        root = Path(directory)
        if not root.is_dir():
            raise NotADirectoryError(f"{directory}: not a directory")
        paths = sorted(
            (Path(top) / name).relative_to(root).as_posix()
            for top, dirs, files in os.walk(root)
            for name in (*dirs, *files)
        )
        buffer = io.BytesIO()
        files = size = 0
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for rel in paths:
                info = tar.gettarinfo(str(root / rel), arcname=rel)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.isreg():
                    with open(root / rel, "rb") as f:
                        tar.addfile(info, f)
                    files += 1
                    size += info.size
                elif info.isdir() or (info.issym() and _inside(root, rel, info.linkname)):
                    tar.addfile(info)
        return Packed(buffer.getvalue(), files, size)

    def unpack(self, data: bytes, directory: str) -> Packed:
        """Extract ``data`` into ``directory`` (created if missing) and count the regular files
        written. Every member is checked first (no absolute paths; tarfile's ``data`` filter:
        no ``..`` leading out, links leading out, or device files), so a bad tar writes
        nothing; ``ValueError`` names the offending member."""
        dest = Path(directory)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                members = tar.getmembers()
                for member in members:
                    try:
                        if member.name.startswith("/"):  # the filter would quietly strip it
                            raise tarfile.AbsolutePathError(member)
                        tarfile.data_filter(member, str(dest))
                    except tarfile.FilterError as e:
                        raise ValueError(f"refusing to unpack {member.name!r}: {e}") from None
                dest.mkdir(parents=True, exist_ok=True)
                tar.extractall(dest, filter="data")
        except tarfile.TarError as e:
            raise ValueError(f"not a readable tar stream: {e}") from None
        regular = [m for m in members if m.isreg()]
        return Packed(data, len(regular), sum(m.size for m in regular))


def _inside(root: Path, rel: str, target: str) -> bool:
    if os.path.isabs(target):
        return False
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return resolved != ".." and not resolved.startswith("../")

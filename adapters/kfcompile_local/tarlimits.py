"""Limits and open flags for tar streams to and from pods (Linux's own where it has them), and
the error a refused member raises."""

from __future__ import annotations

import os
from typing import Final

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


class Refused(ValueError):
    """A member that is not extracted, and why (the message is one line for the user)."""

    def __init__(self, name: str | None, why: str) -> None:
        what = _shown(name) if name is not None else "the stream"
        super().__init__(f"refusing to unpack {what}: {why}")


def _shown(name: str) -> str:
    """A hostile name, safe to print: escaped by ``repr`` and cut short."""
    text = repr(name)
    return text if len(text) <= 120 else text[:100] + "..." + text[-12:]

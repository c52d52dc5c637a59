"""Discovery documents kept on disk between commands, as kubectl keeps them: one file per
server and group version, ``<root>/discovery/<server>/<group>/<version>/serverresources.json``,
trusted for ``TTL`` after it was written (client-go's ``discovery/cached/disk``, with the TTL
kubectl gives it in cli-runtime's ``genericclioptions/config_flags.go`` ``toDiscoveryClient``).

Unlike kubectl's (0750 directories, 0660 files), this cache is the user's own: directories
0700, files 0600, and a file is read only when it is a regular file (no symlink, no second
link) owned by the user, writable by no one else, written within the TTL (not in the future),
within ``OBJECT_LIMIT`` and a discovery document of the group version asked; any other file is
ignored, and the server asked. A failed write is silent: the cache only saves round trips.
A document the server has shown wrong (a 404 for a path it gave: a CRD removed since) is
forgotten (``paths``).

The root is ``$KFCOMPILE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kfcompile``, else
``~/.cache/kfcompile``: its own, so kubectl's group-writable files are never trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from attrs import frozen

from kfcompile.lifecycle.ports import Obj
from kfcompile_kube.answers import OBJECT_LIMIT

TTL: Final = 6 * 3600.0  # seconds: kubectl's `time.Duration(6*time.Hour)`
FILE: Final = "serverresources.json"
# Anything but letters, digits, dot, dash and underscore (kubectl's overlyCautiousIllegal-
# FileCharacters, without its "/" so that a server's path cannot climb out of the root).
_UNSAFE: Final = re.compile(r"[^\w.-]")


def cache_root(environ: Mapping[str, str]) -> Path | None:
    """Where kfcompile keeps its cache (the module's docstring); None without a home (a pod's
    user may have none): no cache then."""
    if root := environ.get("KFCOMPILE_CACHE_DIR"):
        return Path(root)
    if xdg := environ.get("XDG_CACHE_HOME"):
        return Path(xdg) / "kfcompile"
    try:
        return Path.home() / ".cache" / "kfcompile"
    except RuntimeError:  # "Could not determine home directory"
        return None


def server_dir(server: str, anchor: bytes = b"") -> str:
    """The server's directory name: its host, port and path made safe (as kubectl's
    ``computeDiscoverCacheDir``), and a digest of its whole URL and the CA it is trusted by
    (``compat.trust_anchor``), so that no two servers share one, nor a cluster re-created on
    the same URL (kind, minikube: a new CA) the old one's."""
    schemeless = server.removeprefix("https://").removeprefix("http://")
    digest = hashlib.sha256(server.encode() + (b"\n" + anchor if anchor else b"")).hexdigest()
    return f"{_UNSAFE.sub('_', schemeless).strip('.')}-{digest[:12]}"


@frozen(repr=False, eq=False)
class DiskDiscovery:
    """The discovery documents of one server (``server_dir``) under ``root``."""

    root: Path
    server: str
    ttl: float = TTL
    now: Callable[[], float] = time.time
    anchor: bytes = b""

    @classmethod
    def of(
        cls, server: str, anchor: bytes = b"", environ: Mapping[str, str] = os.environ
    ) -> DiskDiscovery | None:
        root = cache_root(environ)
        return None if root is None else cls(root, server, anchor=anchor)

    def _file(self, api_version: str) -> Path | None:
        parts = [_UNSAFE.sub("_", part) for part in api_version.split("/")]
        if any(part in ("", ".", "..") for part in parts):
            return None
        return self.root.joinpath("discovery", server_dir(self.server, self.anchor), *parts, FILE)

    def read(self, api_version: str) -> Obj | None:
        """The cached document of ``api_version``, or None (absent, stale or not trusted)."""
        file = self._file(api_version)
        if file is None:
            return None
        try:
            # No link followed; a FIFO planted there would block an open without O_NONBLOCK.
            fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (OSError, ValueError):
            return None
        with os.fdopen(fd, "rb") as f:
            found = os.fstat(f.fileno())
            age = self.now() - found.st_mtime
            if not (
                stat.S_ISREG(found.st_mode)
                and found.st_uid == os.getuid()
                and found.st_mode & 0o077 == 0
                and found.st_nlink == 1
                and 0 <= age < self.ttl
                and found.st_size <= OBJECT_LIMIT
            ):
                return None
            try:
                doc = json.loads(f.read(OBJECT_LIMIT + 1))
            except (OSError, ValueError, RecursionError):
                return None
        if not isinstance(doc, dict) or doc.get("groupVersion") != api_version:
            return None
        return doc

    def write(self, api_version: str, doc: Obj) -> None:
        """Keep ``doc``, the server's answer, for the next command; silently not on failure."""
        file = self._file(api_version)
        if file is None:
            return
        try:
            _private_dirs(self.root, file.parent)
            fd, name = tempfile.mkstemp(dir=file.parent, prefix=f"{FILE}.")  # mode 0600
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(doc, f)
                os.replace(name, file)
            except BaseException:
                os.unlink(name)
                raise
        except (OSError, ValueError, TypeError, RecursionError):
            return

    def forget(self, api_version: str) -> None:
        """Remove what is kept of ``api_version`` (the server has shown it wrong)."""
        file = self._file(api_version)
        if file is not None:
            with contextlib.suppress(OSError):
                file.unlink()


def _private_dirs(root: Path, leaf: Path) -> None:
    """``root`` and the directories under it down to ``leaf``, each made owner-only (0700) when
    made (``mkdir(parents=True)`` would give all but the last the default mode)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    directory = root
    directory.mkdir(mode=0o700, exist_ok=True)
    for part in leaf.relative_to(root).parts:
        directory = directory / part
        directory.mkdir(mode=0o700, exist_ok=True)

"""The worker clusters a user mapped for each MultiKueue manager, from the file
``$KFCOMPILE_CLUSTERS`` names, else ``$XDG_CONFIG_HOME/kfcompile/clusters.yaml``
(``XDG_CONFIG_HOME`` defaults to ``~/.config``); its shape is ``lifecycle.multikueue``'s
(``read_clusters``). No file is no mapping; a file named in
``$KFCOMPILE_CLUSTERS`` must be there."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from kfcompile.lifecycle.multikueue import Workers, read_clusters
from kfcompile.lifecycle.session import ClusterError

MAX_BYTES: Final = 1024 * 1024  # a mapping of a few clusters is a few hundred bytes


def clusters_path(environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The mapping file, and whether ``$KFCOMPILE_CLUSTERS`` named it."""
    if named := environ.get("KFCOMPILE_CLUSTERS"):
        return Path(named).expanduser(), True
    config = Path(environ.get("XDG_CONFIG_HOME") or "~/.config")
    with contextlib.suppress(RuntimeError):  # no home: no file there
        config = config.expanduser()
    return config / "kfcompile" / "clusters.yaml", False


def _text(path: Path, named: bool) -> str | None:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_BYTES + 1)
    except FileNotFoundError:
        if named:
            raise ClusterError(f"{path} (from KFCOMPILE_CLUSTERS): no such file") from None
        return None
    except OSError as exc:
        raise ClusterError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise ClusterError(f"{path}: larger than {MAX_BYTES:,} bytes: not a cluster mapping")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ClusterError(f"{path}: not UTF-8 text") from None


def mapped_workers(
    manager: str | None,
    given: Mapping[str, str] | None = None,
    *,
    how: str = "",
    environ: Mapping[str, str] = os.environ,
) -> Workers:
    """The workers mapped for the manager context ``manager``: the file's, then ``given``
    (the caller's own: ``--cluster``), which win. The file is read only when it can matter
    (a manager context is known)."""
    contexts: dict[str, str] = {}
    path, named = clusters_path(environ)
    if manager is not None:
        text = _text(path, named)
        if text is not None:
            contexts = read_clusters(text, str(path)).get(manager, {})
    return Workers(manager, {**contexts, **(given or {})}, how, str(path))

"""What kfcompile adds to a job itself, by name: the volumes and mount paths of ``shm_size`` (a
memory-backed ``/dev/shm``), the inline ``script`` (its ConfigMap) and ``work_dir`` (its
claim), and the Kueue labels that ``queue`` and ``priority_class`` become. Render writes these
(``targets/special.py``) and the rules reserve them (``between``) from this one table: a spec
may not use the names or mount paths for anything else."""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kfcompile.spec import JobSpec

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SHM_VOLUME, SHM_DIR = "dshm", "/dev/shm"
SCRIPT_VOLUME, SCRIPT_DIR = "kfcompile-script", "/opt/kfcompile/scripts"
WORKDIR_VOLUME = "workdir"


class Companion(NamedTuple):
    """A volume kfcompile adds and where the training container mounts it."""

    field: str  # the spec field that makes it
    volume: str
    mount_path: str


def companions(s: JobSpec) -> tuple[Companion, ...]:
    """The volumes this spec makes kfcompile add, in the order render writes them."""
    made = (
        Companion("shm_size", SHM_VOLUME, SHM_DIR) if s.shm_size else None,
        Companion("script", SCRIPT_VOLUME, SCRIPT_DIR) if s.script is not None else None,
        Companion("work_dir", WORKDIR_VOLUME, s.work_dir.mount_path) if s.work_dir else None,
    )
    return tuple(c for c in made if c is not None)


def mount_point(path: str) -> str:
    """The directory a mount path names: ``/dev/shm/``, ``/dev//shm`` and ``/dev/./shm`` are
    one place (``posixpath.normpath``, and a leading ``//`` is ``/`` on Linux)."""
    return posixpath.normpath("/" + path.lstrip("/"))

"""kfcompile's ports on the submitting machine: the real clock (``clock``), directories as tar
streams to and from disk (``files``), and streams merged with a thread each (``fanout``)."""

from __future__ import annotations

from kfcompile_local.clock import SystemClock
from kfcompile_local.fanout import Threads
from kfcompile_local.files import TarFiles

__all__ = ["SystemClock", "TarFiles", "Threads"]

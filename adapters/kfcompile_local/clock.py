"""The real clock."""

from __future__ import annotations

import time


class SystemClock:
    """``kfcompile.lifecycle.ports.Clock`` on ``time.monotonic`` and ``time.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

"""A fake clock for the ``Clock`` port: time passes only when something waits (``sleep``: the
code under test backing off or polling; ``idle``: a watch or a followed log with nothing to
say), and every ``step`` seconds of it the clock ticks what it drives (the cluster's script and
garbage collector), so a job lives its course as the code waits and no test sleeps."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["T0", "FakeClock", "FakeTimeLimit", "fixed_jitter"]

T0 = datetime(2025, 6, 2, 9, 14, 3, tzinfo=UTC).timestamp()  # the wall time a clock starts at
_LEAST = 1e-6  # the least a wait takes: a loop that waits always gets somewhere


def fixed_jitter() -> float:
    """The middle of the jitter's range (``Session(jitter=fixed_jitter)``): the same pauses on
    every run."""
    return 0.5


class FakeTimeLimit(RuntimeError):
    """The code under test waited past the clock's ``limit``: for a change that never comes."""


class FakeClock:
    """Fake time from ``start`` (wall time, seconds since 1970), ticking every ``step`` seconds;
    waiting past ``limit`` seconds in all raises ``FakeTimeLimit``. ``slept`` is what the code
    under test asked to sleep, in order."""

    def __init__(self, *, step: float = 0.1, start: float = T0, limit: float = 3600.0) -> None:
        self.step, self.start, self.limit = step, start, limit
        self.slept: list[float] = []
        self._ticks, self._elapsed = 0, 0.0
        self._tickers: list[Callable[[], object]] = []
        self._lock = threading.RLock()  # one advance at a time (several threads may wait)

    def monotonic(self) -> float:
        """Seconds of fake time since the clock started."""
        return self._elapsed

    def time(self) -> float:
        """Fake wall time: what timestamps and ``sinceSeconds`` go by."""
        return self.start + self._elapsed

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (recorded in ``slept``)."""
        self.slept.append(seconds)
        self.advance(max(seconds, _LEAST))

    def on_tick(self, ticker: Callable[[], object]) -> None:
        """Call ``ticker()`` at every tick, after those given before."""
        self._tickers.append(ticker)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of fake time pass, ticking at each ``step`` on the way."""
        with self._lock:
            target = self._elapsed + max(seconds, 0.0)
            if target > self.limit:
                raise FakeTimeLimit(f"fake clock: waited past {self.limit:g}s of fake time")
            while (self._ticks + 1) * self.step <= target:
                self._ticks += 1
                self._elapsed = self._ticks * self.step
                for tick in list(self._tickers):
                    tick()
            self._elapsed = target

    def idle(self, until: float | None = None) -> None:
        """Wait for the next tick, but not past ``until`` (a ``monotonic`` time)."""
        with self._lock:
            end = (self._ticks + 1) * self.step
            self.advance(max((end if until is None else min(end, until)) - self._elapsed, _LEAST))

"""A fake clock for the ``kfcompile.lifecycle.ports.Clock`` port that runs the fake cluster as it
goes. Time passes only when something waits: ``sleep(s)`` (the code under test backing off or
polling) or ``idle()`` (a watch or followed log with nothing to say). Every ``step`` seconds of
fake time it ticks what it drives (the cluster's scripts and garbage collector), then the test's
``on_tick`` hooks: a job lives its script while the lifecycle waits, however fast the machine,
and no test sleeps in real time. Waiting past ``limit`` s of fake time is an error (something
waits for a change that never comes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["T0", "FakeClock", "FakeTimeLimit"]

T0 = datetime(2025, 6, 2, 9, 14, 3, tzinfo=UTC).timestamp()  # wall time when a clock starts
# The least a wait takes, as on a real machine: a loop that waits always gets somewhere, even
# when what it waits for is a rounding error away.
_LEAST = 1e-6


def fixed_jitter() -> float:
    """The middle of the jitter's range: a test's pauses are the same on every run."""
    return 0.5


class FakeTimeLimit(RuntimeError):
    """The code under test waited past the clock's limit."""


class FakeClock:
    def __init__(self, *, step: float = 0.1, start: float = T0, limit: float = 3600.0) -> None:
        self.step = step
        self.start = start
        self.limit = limit
        self.slept: list[float] = []  # what the code under test asked to sleep, in order
        self._ticks = 0  # ticks done: fake time has passed ticks * step
        self._elapsed = 0.0
        self._tickers: list[Callable[[], object]] = []
        self._hooks: list[Callable[[], object]] = []
        self._lock = threading.RLock()  # one advance at a time (several threads may wait)

    # --- the Clock port ------------------------------------------------------------------------

    def monotonic(self) -> float:
        return self._elapsed

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(max(seconds, _LEAST))

    # --- for the fake cluster and the tests ----------------------------------------------------

    def time(self) -> float:
        """Wall time (seconds since 1970): what timestamps and ``sinceSeconds`` go by."""
        return self.start + self._elapsed

    def drive(self, ticker: Callable[[], object]) -> None:
        """Call ``ticker()`` at every tick (the fake cluster's parts, in the order given)."""
        self._tickers.append(ticker)

    def on_tick(self, hook: Callable[[], object]) -> None:
        """Call ``hook()`` at every tick, after the cluster moved (a test's own doing)."""
        self._hooks.append(hook)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of fake time pass, ticking at each ``step`` on the way."""
        with self._lock:
            target = self._elapsed + max(seconds, 0.0)
            if target > self.limit:
                message = f"waited past {self.limit:g}s of fake time for a change that never came"
                raise FakeTimeLimit(f"fake clock: {message}")
            while (self._ticks + 1) * self.step <= target:
                self._ticks += 1
                self._elapsed = self._ticks * self.step
                for call in [*self._tickers, *self._hooks]:
                    call()
            self._elapsed = target

    def idle(self, until: float | None = None) -> None:
        """Wait for the next tick (not past ``until``, a monotonic time): what a stream does
        when it has nothing to send yet."""
        with self._lock:
            next_tick = (self._ticks + 1) * self.step
            end = next_tick if until is None else min(next_tick, until)
            self.advance(max(end - self._elapsed, _LEAST))

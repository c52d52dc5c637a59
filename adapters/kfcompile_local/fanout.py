"""``kfcompile.lifecycle.ports.Merge`` with one thread per stream, for streams that block (followed
logs).

Closing the merged generator stops every thread before it returns: a thread blocked in a read
has its stream cut (``cut_on_stop``: the code that opened the stream says how to cut it, e.g.
by shutting its socket), a thread in a sleep wakes, and each one then unwinds with ``Stopped``,
which no retry loop takes for trouble. A stream that fails stops the others the same way before
its error is raised to the reader.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final, Generic, TypeVar

from attrs import frozen

from kfcompile.lifecycle.ports import Clock
from kfcompile_local.clock import SystemClock

K = TypeVar("K")
T = TypeVar("T")

QUEUE_SIZE: Final = 1024  # items read ahead of the consumer; a full queue holds the threads back


class Stopped(BaseException):
    """Raised in a stream's thread when its merge is stopped (not an ``Exception``, so that no
    ``except Exception`` or retry on the way takes it for trouble)."""


class _Stop:
    """What the threads of one merge share: whether it is stopping, and how to cut the streams
    they are reading."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._lock = threading.Lock()
        self._cuts: dict[int, Callable[[], None]] = {}

    def stop(self) -> None:
        with self._lock:
            self.event.set()
            cuts = list(self._cuts.values())
        for cut in cuts:
            with suppress(Exception):  # already closed, or closing on its own
                cut()

    @contextmanager
    def reading(self, cut: Callable[[], None]) -> Iterator[None]:
        key = id(cut)
        with self._lock:
            self._cuts[key] = cut
            stopped = self.event.is_set()
        if stopped:
            with suppress(Exception):
                cut()
        try:
            yield
        except GeneratorExit:
            raise  # the reader closed the stream itself
        except Exception:
            if self.event.is_set():
                raise Stopped from None  # the cut made the read fail
            raise
        finally:
            with self._lock:
                self._cuts.pop(key, None)
        if self.event.is_set():
            raise Stopped  # the stream ended because it was cut


_here = threading.local()  # .stop: the _Stop of the merge whose thread this is


@contextmanager
def cut_on_stop(cut: Callable[[], None]) -> Iterator[None]:
    """Around the reading of a stream: on one of a merge's threads, stopping the merge calls
    ``cut`` (from another thread, so it must be safe to call from one) and the block ends with
    ``Stopped``; on any other thread this does nothing."""
    stop: _Stop | None = getattr(_here, "stop", None)
    if stop is None:
        yield
        return
    with stop.reading(cut):
        yield


@frozen(repr=False, eq=False)
class _Clock:
    """The clock a stream sleeps on: a stop ends its sleep (at once on the real clock)."""

    inner: Clock
    stop: threading.Event

    def monotonic(self) -> float:
        return self.inner.monotonic()

    def sleep(self, seconds: float) -> None:
        if isinstance(self.inner, SystemClock):
            self.stop.wait(seconds)
        elif not self.stop.is_set():
            self.inner.sleep(seconds)
        if self.stop.is_set():
            raise Stopped


@frozen(repr=False, eq=False)
class _Item(Generic[K, T]):
    key: K
    value: T


@frozen(repr=False, eq=False)
class _Ended:
    error: BaseException | None = None


def _pump(
    stop: _Stop, key: Any, start: Callable[[Clock], Iterator[Any]], clock: Clock, out: Any
) -> None:
    _here.stop = stop
    ended = _Ended()
    try:
        stream = start(_Clock(clock, stop.event))
        try:
            for value in stream:
                out.put(_Item(key, value))
                if stop.event.is_set():
                    break
        finally:
            closer = getattr(stream, "close", None)
            if callable(closer):
                closer()
    except Stopped:
        pass
    except BaseException as exc:  # handed to the reader, who raises it
        ended = _Ended(exc)
    out.put(ended)


class Threads:
    """``Merge``: one daemon thread per stream."""

    def merge(
        self, streams: Mapping[K, Callable[[Clock], Iterator[T]]], clock: Clock
    ) -> Generator[tuple[K, T], None, None]:
        stop = _Stop()
        out: queue.Queue[_Item[K, T] | _Ended] = queue.Queue(QUEUE_SIZE)
        threads = [
            threading.Thread(
                target=_pump,
                args=(stop, key, start, clock, out),
                name=f"kfcompile-merge-{key}",
                daemon=True,
            )
            for key, start in streams.items()
        ]
        for thread in threads:
            thread.start()
        running = len(threads)
        try:
            while running:
                item = out.get()
                if isinstance(item, _Item):
                    yield item.key, item.value
                    continue
                running -= 1
                if item.error is not None:
                    raise item.error
        finally:
            stop.stop()
            while running:  # drain, so that no thread stays blocked on a full queue
                if isinstance(out.get(), _Ended):
                    running -= 1
            for thread in threads:
                thread.join()

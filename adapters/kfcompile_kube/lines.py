"""Lines out of a stream's chunks, in linear time and bounded memory: pod logs and watch events.

A line is held only up to a bound, whatever comes: bytes past it are dropped as they arrive
(never appended, then split again), so a stream costs time in proportion to its length and holds
no more than a few bounds of memory, even when its newline never comes.

A log line holds at most ``LOG_LINE`` bytes before its first carriage return and as many after
its last: ``\\r`` does not end a line (the server's timestamps, and ``tailLines``, count lines by
``\\n``), but what it overwrites is what a terminal would no longer show, so of a progress bar
(tqdm redraws its line after a ``\\r``) only the first part (the timestamp) and the last drawing
are kept. What a bound cuts off is said at the end of the line.

A watch event is one JSON object per line; a line past ``EVENT_LINE`` is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

# 64 KiB: four times the 16 KiB at which container runtimes split a long line (CRI's partial
# lines, Docker's json-file); far more than a terminal shows, small enough that 1,024 followed
# ranks hold at most a few hundred MiB, not a GiB per line.
LOG_LINE: Final = 64 * 1024
# 4 MiB: an object is at most 1.5 MiB in etcd, and the API server decodes at most 3 MiB of JSON
# for one (MaxRequestBodyBytes, "2x" etcd's limit: k8s.io/apiserver/pkg/server/config.go,
# NewConfig); with the event's envelope, a longer line holds no object the server stored.
EVENT_LINE: Final = 4 * 1024 * 1024


def cut_note(cut: int) -> bytes:
    """What ends a line a bound cut short."""
    return f" [kfcompile: {cut} more bytes of this line not shown]".encode()


class _Part:
    """Part of a line, kept up to ``limit`` bytes; ``cut``: the bytes past it, dropped."""

    def __init__(self, limit: int, data: bytes | memoryview = b"") -> None:
        self.limit = limit
        self.data = bytearray()
        self.cut = 0
        self.add(data)

    def add(self, data: bytes | memoryview) -> None:
        room = max(self.limit - len(self.data), 0)
        self.data += data[:room]
        self.cut += max(len(data) - room, 0)

    @property
    def empty(self) -> bool:
        return not (self.data or self.cut)


class _Line:
    """One log line as it arrives: its part up to its first ``\r``, the drawing after its last
    one, and the last drawing before that which was not empty (shown when the last is empty).
    The drawings between are found from the end of each chunk, never copied."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.first = _Part(limit)
        self.drawing: _Part | None = None  # None until a carriage return has come
        self.drawn: _Part | None = None

    def add(self, data: bytes) -> None:
        current = self.first if self.drawing is None else self.drawing
        cr = data.find(b"\r")
        if cr < 0:
            current.add(data)
            return
        view = memoryview(data)
        current.add(view[:cr])
        last = data.rfind(b"\r")
        for drawn in (self.drawing, self._between(data, view, cr, last)):
            if drawn is not None and not drawn.empty:
                self.drawn = drawn
        self.drawing = _Part(self.limit, view[last + 1 :])

    def _between(self, data: bytes, view: memoryview, cr: int, last: int) -> _Part | None:
        """The last drawing that is not empty between the carriage returns at ``cr`` and
        ``last``, looked for from the end."""
        end = last
        while end > cr:
            start = data.rfind(b"\r", cr, end) + 1
            if start < end:
                return _Part(self.limit, view[start:end])
            end = start - 1
        return None

    def end(self) -> bytes:
        line, cut = bytes(self.first.data), self.first.cut
        if self.drawing is not None:
            shown = self.drawn if self.drawing.empty else self.drawing
            line += b"\r" + (bytes(shown.data) if shown else b"")
            cut += shown.cut if shown else 0
        return line + cut_note(cut) if cut else line


def log_lines(chunks: Iterable[bytes], limit: int = LOG_LINE) -> Iterator[bytes]:
    """The lines of a log (without newlines) as they arrive; a last unterminated line too."""
    line = _Line(limit)
    pending = False  # something of ``line`` has come
    for chunk in chunks:
        *ended, rest = chunk.split(b"\n")  # at most a chunk's worth of parts
        if ended:
            line.add(ended[0])
            yield line.end()
            for whole in ended[1:]:  # the lines whole in this chunk, most of a log
                yield _short(whole, limit) if b"\r" in whole or len(whole) > limit else whole
            line, pending = _Line(limit), False
        if rest:
            line.add(rest)
            pending = True
    if pending:
        yield line.end()


def _short(whole: bytes, limit: int) -> bytes:
    line = _Line(limit)
    line.add(whole)
    return line.end()


def event_lines(
    chunks: Iterable[bytes], too_long: Callable[[int], Exception], limit: int = EVENT_LINE
) -> Iterator[bytes]:
    """The lines of a watch (without newlines) as they arrive; a line past ``limit`` bytes
    raises ``too_long(limit)`` as soon as it is past it."""
    parts: list[bytes] = []
    held = 0
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if held + end - start > limit:
                raise too_long(limit)
            parts.append(chunk[start:end])
            yield b"".join(parts)
            parts, held, start = [], 0, end + 1
        held += len(chunk) - start
        if held > limit:
            raise too_long(limit)
        parts.append(chunk[start:])
    if held:
        yield b"".join(parts)

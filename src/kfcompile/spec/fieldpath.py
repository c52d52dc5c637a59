"""A field path as a value: what ``Problem.at`` holds, in the notation of
``kfcompile.spec.object_paths``.

Code that reports a problem builds its path from segments (``FieldPath.of("env", name)``, ``at /
"name"``) and code that reads one looks at its ``top`` or ``parts``: a path is formatted once, by
``paths.format``, and never split again.
"""

from __future__ import annotations

import functools

from kfcompile.spec.object_paths import Path, Segment, format, parse

KEY_NOTE = " (key)"  # after a path: the problem is the mapping key itself, not its value


class FieldPath:
    """A field path as a value (what ``Problem.at`` holds), formatted by ``format``.

    ``note`` is text after the segments that is no segment (``KEY_NOTE``). A place that is no
    field path at all (``line 3, column 1``, ``ConfigMap job-script``) is all note.

    Immutable, compared and hashed by value. Written by hand rather than as an attrs class:
    ``kfcompile render`` imports it at start-up, where an attrs class costs ~1.5 ms to make.
    """

    __slots__ = ("note", "parts")
    parts: Path
    note: str

    def __init__(self, parts: Path = (), note: str = "") -> None:
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "note", note)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"FieldPath is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldPath):
            return NotImplemented
        return self.parts == other.parts and self.note == other.note

    def __hash__(self) -> int:
        return hash((self.parts, self.note))

    def __repr__(self) -> str:
        note = f", {self.note!r}" if self.note else ""
        return f"FieldPath({self.parts!r}{note})"

    @classmethod
    def of(cls, *parts: Segment) -> FieldPath:
        return cls(parts)

    @property
    def top(self) -> str:
        """The first key (a spec's top-level field); "" for a place that is no path."""
        first = self.parts[0] if self.parts else ""
        return first if type(first) is str else ""

    @property
    def parent(self) -> FieldPath:
        return FieldPath(self.parts[:-1])

    def __truediv__(self, seg: Segment) -> FieldPath:
        return self.join(FieldPath((seg,)))

    def join(self, below: FieldPath) -> FieldPath:
        """``below`` under this path; where either is text, the texts joined."""
        if not self.note and (below.parts or not below.note):
            return FieldPath((*self.parts, *below.parts), below.note)
        left, right = str(self), str(below)
        return FieldPath((), f"{left}{'' if right.startswith('[') or not left else '.'}{right}")

    def __str__(self) -> str:
        return format(self.parts) + self.note


@functools.lru_cache(maxsize=4096)
def _field_path(text: str) -> FieldPath:
    body = text.removesuffix(KEY_NOTE)
    try:
        parts = parse(body)
    except ValueError:
        return FieldPath((), text)
    if format(parts) != body:  # not as this notation writes it: keep the text as it is
        return FieldPath((), text)
    return FieldPath(parts, text[len(body) :])


def field_path(at: str | FieldPath) -> FieldPath:
    """``at`` as a value: parsed where it is a path in this notation, kept as text where not."""
    return at if isinstance(at, FieldPath) else _field_path(at)

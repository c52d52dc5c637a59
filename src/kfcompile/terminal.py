"""Text from a cluster as a terminal shows it: every string a cluster sends that is printed (a
condition's reason and message, an annotation, an event, an API error, a training metric, a
MultiKueue check, a pod's log line on a terminal) goes through ``printable`` first, so none can
move the cursor, retitle or clear the window, or hide or reorder what follows it.

Escaped, visibly (``\\x1b``, ``\\u202e``, ``\\U000e0041``): Unicode's control characters (Cc:
C0 with ESC, BEL and newline, DEL, C1 with CSI), its format characters (Cf: the bidirectional
controls U+061C, U+200E, U+200F, U+202A-U+202E and U+2066-U+2069, the zero-width U+200B-U+200D,
U+2060 and U+FEFF, the tags), the line and paragraph separators (Zl, Zp) and lone surrogates
(Cs: no terminal's encoding carries one). Every other character is shown as it is, in any
script. What is returned to a program (``-o json``, the objects) is what the cluster said.
"""

from __future__ import annotations

import re
from typing import Final

# Every code point of categories Cc, Cf, Cs, Zl and Zp up to Unicode 15.1, as ranges
# (tests/test_terminal.py checks them against the running Python's unicodedata).
UNSAFE_RANGES: Final = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xD800, 0xDFFF),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def _class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")


UNSAFE: Final = _class(UNSAFE_RANGES)
# A program's own log keeps its tabs: a tab moves to the next column and does nothing else.
_UNSAFE_IN_LOGS: Final = _class(((0x00, 0x08), (0x0A, 0x1F), *UNSAFE_RANGES[1:]))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` as one harmless line: each character ``UNSAFE`` matches shown as its escape."""
    # isprintable(): none of Unicode's "Other" or "Separator" characters, the common case,
    # checked in C (the class, per character, costs ten times as much)
    return text if text.isprintable() else UNSAFE.sub(_escaped, text)


def printable_lines(text: str) -> str:
    """Text of several lines (an error's), each made ``printable``."""
    return "\n".join(printable(line) for line in text.split("\n"))


def last_drawing(text: str) -> str:
    """What a terminal shows of a log line at its end: a carriage return draws the line again
    (a progress bar), so the last drawing that is not empty. A ``\\r`` ends no line."""
    if "\r" not in text:
        return text
    return next((part for part in reversed(text.split("\r")) if part), "")


def log_line(text: str, terminal: bool) -> str:
    """A line of a pod's log (the user's own program wrote it) as it is printed: its last
    drawing; on a ``terminal``, escaped as ``printable`` escapes (tabs kept), elsewhere (a pipe,
    a file) as the program wrote it."""
    shown = last_drawing(text)
    if not terminal or shown.isprintable():
        return shown
    return _UNSAFE_IN_LOGS.sub(_escaped, shown)

"""The code blocks of the README and the documentation pages, and how each kind is run.

A page's blocks run in order, in a directory of its own: a ```` ```yaml title="F" ```` block is
written there as ``F``; a ``console`` block's ``$`` lines run there and what follows each is the
output it must print (``...`` alone on a line: any lines; within a line: any text); ``$ echo
$?`` prints the exit status of the command before, as a shell does, and a command whose output
is shown as ``...`` alone must succeed unless one follows; ``sh`` lines must succeed; ``python``
blocks run in a process of their own. The cluster commands reach the tests' local API server
(``KUBECONFIG``). ``text`` blocks are illustrations, or output a page cannot make kfcompile
print (``test_docs``: each line of kfcompile's is printed in its situation there, or the block
is marked ``<!-- illustration: WHY -->``), and ``mermaid`` blocks are diagrams (drawn by
``docs/hooks/diagrams.py``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Every page with code blocks: the README, ARCHITECTURE.md and the site's own pages.
PAGES = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts),
]
LANGUAGES = {"yaml", "console", "sh", "python", "text", "mermaid", ""}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)(?P<attrs>[^\n`]*)$")


class Block(NamedTuple):
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    title: str  # the ``title="..."`` attribute, if any
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    """The fenced code blocks of a page, in order, their indentation (inside a list) removed."""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = m["indent"], i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        title = re.search(r'title="([^"]+)"', m["attrs"])
        yield Block(page, start + 1, m["lang"], title[1] if title else "", "\n".join(body) + "\n")
        i += 1


def expected(output: str) -> re.Pattern[str]:
    """The pattern a console block's shown output stands for: ``...`` alone on a line is any
    lines (none too), ``...`` within a line any text; trailing spaces are not compared."""
    parts = []
    for line in output.rstrip("\n").splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(map(re.escape, line.rstrip().split("..."))) + r"\n")
    return re.compile("".join(parts))


def matches(output: str, printed: str) -> bool:
    text = "".join(line.rstrip() + "\n" for line in printed.splitlines())
    return expected(output).fullmatch(text) is not None


def commands(block: Block) -> list[tuple[str, str]]:
    """A console block's commands, each with the output shown after it."""
    found: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"{block.where}: output before the first $ command")
    return [(command, "".join(f"{line}\n" for line in out)) for command, out in found]


def sh_lines(block: Block) -> list[str]:
    """An sh block's commands: one a line (a trailing backslash continues it), comments and
    blank lines left out."""
    joined = block.text.replace("\\\n", " ")
    return [
        line.split(" #")[0].strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


SHELL = re.compile(r"[|&;<>()$`*?]")


def kfcompile_argv(command: str) -> list[str] | None:
    """The arguments of a plain ``kfcompile ...`` command (no pipe, no glob, no redirection),
    which the tests run in their own process; None for anything a shell must run."""
    if SHELL.search(command):
        return None
    words = shlex.split(command)
    return words[1:] if words and words[0] == "kfcompile" else None


def needs_cluster(command: str) -> bool:
    """Whether a command line talks to a cluster: a cluster command of kfcompile's (its
    function in ``cli/cluster.py`` or ``cli/listing.py``), or ``validate --cluster``."""
    words = shlex.split(command.split("|")[0].split(">")[0])
    if len(words) < 2 or words[0] != "kfcompile":
        return False
    return words[1] in cluster_commands() or "--cluster" in words


def cluster_commands() -> set[str]:
    """The commands whose module talks to a cluster."""
    from kfcompile.cli import parser

    cluster = (parser._in_cluster, parser._in_listing)
    return {name for name, (_, _, functions) in parser.COMMANDS.items() if functions in cluster}

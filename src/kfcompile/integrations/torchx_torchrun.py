"""The torchrun line of TorchX's ``dist.ddp``/``dist.torchrun`` components, read through
torchrun's option table (``kfcompile.spec.torchrun``): what kfcompile's own torchrun launcher takes
from it, and what it drops because the target wires it. Pure."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from attrs import frozen

from kfcompile.spec import torchrun
from kfcompile.spec.errors import Problem
from kfcompile.spec.torchrun import Option

# --- the torchrun line --------------------------------------------------------------------------


@frozen
class Word:
    """One word of a shell line, and whether it means itself without a shell (no expansion,
    globbing or substitution would touch it)."""

    text: str
    literal: bool


_OPERATORS = frozenset("|&;<>()")
_EXPANDS = frozenset("$`")
_GLOB = frozenset("*?[{")  # `{a,b}` is brace expansion


def shell_words(line: str) -> list[Word] | None:
    """The words of a POSIX shell line, as ``bash -c`` would split them; None when it is more
    than one simple command (operators, comments, an unclosed quote)."""
    words: list[Word] = []
    text: list[str] = []
    literal, started, i = True, False, 0

    def end() -> None:
        nonlocal literal, started
        if started:
            words.append(Word("".join(text), literal))
        text.clear()
        literal, started = True, False

    while i < len(line):
        c = line[i]
        if c in " \t\n":
            end()
        elif c == "'":
            close = line.find("'", i + 1)
            if close < 0:
                return None
            text.append(line[i + 1 : close])
            started, i = True, close
        elif c == '"':
            i += 1
            while i < len(line) and line[i] != '"':
                if line[i] == "\\" and i + 1 < len(line) and line[i + 1] in '$`"\\\n':
                    i += 1
                elif line[i] in _EXPANDS:
                    literal = False
                text.append(line[i])
                i += 1
            if i >= len(line):
                return None
            started = True
        elif c == "\\":
            if i + 1 < len(line) and line[i + 1] != "\n":
                text.append(line[i + 1])
                started = True
            i += 1
        elif c in _OPERATORS or (c == "#" and not started):
            return None
        else:
            if c in _EXPANDS or c in _GLOB or (c == "~" and not started):
                literal = False
            text.append(c)
            started = True
        i += 1
    end()
    return words


@frozen
class Torchrun:
    """What a torchrun line asks kfcompile's own torchrun launcher for."""

    nnodes: str | None
    nproc_per_node: str | None
    max_restarts: str | None
    program: tuple[Word, ...]  # the script (or module) and its arguments
    module: bool = False  # `-m`: the program is a module
    no_python: bool = False  # `--no-python`: the program is an executable


def torchrun_words(entrypoint: str, args: Sequence[str]) -> list[Word] | None:
    """The words after ``torchrun`` when a role runs torchrun, else None: ``torchrun ...``,
    ``python -m torch.distributed.run ...`` or ``bash -c "torchrun ..."``."""
    program = posixpath.basename(entrypoint)
    rest = [Word(a, literal=True) for a in args]  # no shell: every word means itself
    if program in ("bash", "sh") and len(args) == 2 and args[0] == "-c":
        words = shell_words(args[1])
        if not words or not words[0].literal:
            return None
        program, rest = posixpath.basename(words[0].text), words[1:]
    if program == "torchrun":
        return rest
    if re.fullmatch(r"python[\d.]*", program) and [w.text for w in rest[:2]] == [
        "-m",
        "torch.distributed.run",
    ]:
        return rest[2:]
    return None


def torchrun_line(words: Sequence[Word], at: str) -> tuple[Torchrun | None, list[Problem]]:
    """Read torchrun's options up to the program; every option kfcompile cannot carry is a
    problem (``at`` names the field the line came from)."""
    found: dict[str, str] = {}
    problems: list[Problem] = []
    i = 0
    while i < len(words) and words[i].text.startswith("-") and words[i].text != "-":
        word = words[i].text
        if word == "--":
            i += 1
            break
        name, eq, value = word.partition("=")
        option = torchrun.option(name)
        if option is None:
            problems.append(
                Problem(at, f"torchrun {name}: kfcompile's torchrun launcher cannot pass it")
            )
            option = Option("", bool(i + 1 < len(words) and not eq), None, False)
        if option.takes_value and not eq:
            i += 1
            if i >= len(words):
                problems.append(Problem(at, f"torchrun {name}: needs a value"))
                break
            value = words[i].text
            if option.field is not None and not words[i].literal:
                problems.append(Problem(at, f"torchrun {name} {value}: needs a shell to expand"))
        if option.field is not None:
            found[option.name] = value
        i += 1
    program = tuple(words[i:])
    if not program:
        problems.append(Problem(at, "torchrun: no script to run"))
    for w in program:
        if not w.literal:
            problems.append(
                Problem(
                    at,
                    f"{w.text!r}: needs a shell to expand; kfcompile's torchrun launcher "
                    "runs no shell (write the value itself)",
                )
            )
    if problems:
        return None, problems
    line = Torchrun(
        found.get(torchrun.NNODES.name),
        found.get(torchrun.NPROC_PER_NODE.name),
        found.get(torchrun.MAX_RESTARTS.name),
        program,
        torchrun.MODULE.name in found,
        torchrun.NO_PYTHON.name in found,
    )
    return line, []

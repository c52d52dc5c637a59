"""A torchrun line read through torchrun's option table (``kfcompile.spec.torchrun``): what
kfcompile's own torchrun launcher takes from it, and what it drops because the target wires it.
Read for the TorchX mapping (the line of ``dist.ddp``/``dist.torchrun``) and by the importer (a
PyTorchJob's command, where Kubernetes expands ``$(VAR)`` before any shell). Pure; not loaded by
``render``."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection, Sequence

from attrs import frozen

from kfcompile.spec import torchrun
from kfcompile.spec.errors import Problem
from kfcompile.spec.torchrun import Option

# --- the torchrun line --------------------------------------------------------------------------


@frozen(repr=False)
class Word:
    """One word of a shell line, and whether it means itself without a shell (no expansion,
    globbing or substitution would touch it)."""

    text: str
    literal: bool


_OPERATORS = frozenset("|&;<>()")
_EXPANDS = frozenset("$`")
_GLOB = frozenset("*?[{")  # `{a,b}` is brace expansion


# What the kubelet does to a command word before any shell sees it: ``$$`` is ``$``, ``$(NAME)``
# of a variable the container defines is its value (k8s.io/kubernetes third_party expansion).
_KUBE_EXPANSION = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# Private-use characters stand in for ``$(NAME)`` while the shell splits the line.
_HIDDEN = range(0xE000, 0xF900)


def shell_words(line: str, kube_env: Collection[str] | None = None) -> list[Word] | None:
    """The words of a POSIX shell line, as ``bash -c`` would split them; None when it is more
    than one simple command (operators, comments, an unclosed quote).

    With ``kube_env`` (the variables the container defines) the line is a Kubernetes command
    word: the kubelet expands ``$(NAME)`` of those and ``$$`` first, and each literal word is
    given back as a Kubernetes word again (``$(NAME)`` kept, ``$`` as ``$$``), to be written
    into a command that no shell runs."""
    if kube_env is None:
        return _shell_words(line)
    if any(ord(c) in _HIDDEN for c in line):
        return None  # its own would be taken for stand-ins
    refs: list[str] = []

    def hide(m: re.Match[str]) -> str:
        if m[1] is None:
            return "$"
        if m[1] not in kube_env or len(refs) == len(_HIDDEN):
            return m[0]  # the kubelet leaves it: a shell substitutes a command
        refs.append(m[0])
        return chr(_HIDDEN[len(refs) - 1])

    words = _shell_words(_KUBE_EXPANSION.sub(hide, line))
    if words is None:
        return None

    def shown(w: Word) -> str:
        text = w.text.replace("$", "$$") if w.literal else w.text
        for i, ref in enumerate(refs):
            text = text.replace(chr(_HIDDEN[i]), ref)
        return text

    return [Word(shown(w), w.literal) for w in words]


def _shell_words(line: str) -> list[Word] | None:
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


@frozen(repr=False, eq=False)
class Torchrun:
    """What a torchrun line asks kfcompile's own torchrun launcher for."""

    nnodes: str | None
    nproc_per_node: str | None
    max_restarts: str | None
    program: tuple[Word, ...]  # the script (or module) and its arguments
    module: bool = False  # `-m`: the program is a module
    no_python: bool = False  # `--no-python`: the program is an executable
    dropped: tuple[tuple[Option, Word], ...] = ()  # options with no spec field, and their values


def torchrun_words(
    entrypoint: str, args: Sequence[str], kube_env: Collection[str] | None = None
) -> list[Word] | None:
    """The words after ``torchrun`` when a role runs torchrun, else None: ``torchrun ...``,
    ``python -m torch.distributed.run ...`` or ``bash -c "torchrun ..."`` (``kube_env``: as
    ``shell_words`` takes it)."""
    program = posixpath.basename(entrypoint)
    rest = [Word(a, literal=True) for a in args]  # no shell: every word means itself
    if program in ("bash", "sh") and len(args) == 2 and args[0] == "-c":
        words = shell_words(args[1], kube_env)
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


Supplied = Callable[[Option, Word], bool]  # whether the target sets this value itself


def _nothing_supplied(option: Option, value: Word) -> bool:
    return False


def torchrun_line(
    words: Sequence[Word], at: str, supplied: Supplied = _nothing_supplied
) -> tuple[Torchrun | None, list[Problem]]:
    """Read torchrun's options up to the program; every option kfcompile cannot carry is a
    problem (``at`` names the field the line came from). An option whose value ``supplied``
    says the target sets itself is dropped, whatever it is; the other values of options that
    carry no spec field are kept in ``Torchrun.dropped`` for a caller that checks them."""
    found: dict[str, str] = {}
    dropped: list[tuple[Option, Word]] = []
    problems: list[Problem] = []
    i = 0
    while i < len(words) and words[i].text.startswith("-") and words[i].text != "-":
        word = words[i]
        if word.text == "--":
            i += 1
            break
        name, eq, text = word.text.partition("=")
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
            word, text = words[i], words[i].text
        value = Word(text, word.literal)
        if not option.name or supplied(option, value):
            pass
        elif option.field is None:
            dropped.append((option, value))
        elif not value.literal:
            problems.append(Problem(at, f"torchrun {name} {text}: needs a shell to expand"))
        else:
            found[option.name] = text
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
        tuple(dropped),
    )
    return line, []

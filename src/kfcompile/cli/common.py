"""What every ``kfcompile`` command shares: its two failures, reading specs and files, rendering
one for a target, and printing problems. Exit status: 0 success, 1 a problem with a spec, its
output or the cluster (one line per problem on stderr, ``<file>: <field path>: <message>``), 2 a
usage error, 130 Ctrl-C, 143 SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

# The spec layer and the targets are imported by the functions that use them: a cluster
# command (``status``) needs neither.
if TYPE_CHECKING:
    from kfcompile.spec.errors import Problem
    from kfcompile.spec.model import JobSpec
    from kfcompile.targets import Rendered


class UsageError(Exception):
    """Bad arguments or unreadable files: exit status 2."""


class Failed(Exception):
    """Problems to print, each prefixed with where they come from: exit status 1."""

    def __init__(self, label: str, problems: Iterable[Problem | str]) -> None:
        super().__init__(label)
        self.label = label
        self.problems = [str(p) for p in problems]


INTERRUPTED: Final = 130  # 128 + SIGINT
TERMINATED: Final = 143  # 128 + SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is: every way out that Ctrl-C cleans up (the sync helper pod
    deleted, a half-done submit rolled back, followed streams closed) SIGTERM cleans up too."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated("terminated (SIGTERM)")


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While the command runs, SIGTERM raises ``Terminated`` (in the main thread, where signals
    are handled; elsewhere nothing changes); the previous handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def read(path: str) -> str:
    """The file's text. A file that cannot be read is a usage error; one that is not UTF-8 text
    (a binary file) is a malformed file."""
    try:
        return _text(path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        bad = f"0x{exc.object[exc.start]:02x}"
        raise Failed(path, [f"not UTF-8 text: {exc.reason} {bad} at byte {exc.start}"]) from None


def _text(path: str) -> str:
    if path != "-":
        return Path(path).read_text(encoding="utf-8")
    raw = getattr(sys.stdin, "buffer", None)  # bytes, whatever the locale's encoding
    return sys.stdin.read() if raw is None else raw.read().decode("utf-8")


def load(path: str, namespace: str | None = None) -> JobSpec:
    """The spec in ``path``; ``namespace`` (``-n``): in place of its ``namespace``."""
    import attrs

    from kfcompile.spec.errors import SpecError
    from kfcompile.spec.load import load_spec

    try:
        spec = load_spec(read(path))
    except SpecError as exc:
        raise Failed(path, exc.problems) from None
    return spec if namespace is None else attrs.evolve(spec, namespace=namespace)


def compile_for(
    path: str, target_name: str, spec: JobSpec | None = None, namespace: str | None = None
) -> Rendered:
    from kfcompile.spec.errors import UnsupportedFeature
    from kfcompile.targets import target

    spec = spec or load(path, namespace)
    try:
        return target(target_name).render(spec)
    except UnsupportedFeature as exc:
        raise Failed(f"{path} ({target_name})", exc.problems) from None


def format_objects(objects: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        doc = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        return json.dumps(doc, indent=2) + "\n"
    from kfcompile.spec import yamlio

    return yamlio.dump_all(objects)


def outcome(spec: JobSpec, target_name: str, output: str = "yaml") -> tuple[str, str]:
    """(file suffix, text) of rendering ``spec`` for one target: the objects, or why not."""
    from kfcompile.spec.errors import UnsupportedFeature
    from kfcompile.targets import target

    try:
        return output, format_objects(target(target_name).render(spec).objects, output)
    except UnsupportedFeature as exc:
        return "err", str(exc) + "\n"


def file_stem(target_name: str) -> str:
    return target_name.replace("/", "-")


def one_writer_each(outputs: Iterable[tuple[str, Path]]) -> None:
    """``(input, what it writes)`` pairs: two inputs that would write the same output (the
    second over the first, both reported done) are a usage error, before anything is written."""
    seen: dict[Path, str] = {}
    for label, destination in outputs:
        if destination in seen:
            raise UsageError(f"{label} and {seen[destination]} would both write {destination}")
        seen[destination] = label


def write_file(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def name_of(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def target_arg(text: str) -> str:
    """The type of every ``--target``: a known name or a patch release of a known line becomes
    its registered name; anything else is left as it is for ``choices`` to refuse with the
    list."""
    from kfcompile.targets import canonical_name

    try:
        return canonical_name(text)
    except ValueError:
        return text


def say(line: str = "", *, err: bool = False) -> None:
    """One line on stdout (``err``: stderr), flushed. Anything in it from a cluster is escaped
    here (``terminal.printable``), the one way the cluster commands print a line."""
    from kfcompile.terminal import printable  # its patterns: 13 M instructions a render needs not

    print(printable(line), file=sys.stderr if err else sys.stdout, flush=True)


def print_failure(exc: Failed) -> None:
    for problem in exc.problems:
        say(f"{exc.label}: {problem}", err=True)

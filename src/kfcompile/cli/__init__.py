"""``kfcompile`` command line: argument parsing and printing around the pure core.

``parser`` declares every command; ``compile`` (render, validate, explain, targets, schema),
``manifests`` (import, convert) and ``cluster`` (submit ... list) do them, on the helpers of
``common``. Exit status: 0 success, 1 a problem with a spec, its output or the cluster (one line
per problem on stderr), 2 a usage error, 130 Ctrl-C, 143 SIGTERM (which, like Ctrl-C, deletes
what a command was in the middle of, such as the sync helper pod).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kfcompile.cli.common import (
    INTERRUPTED,
    TERMINATED,
    Failed,
    Terminated,
    UsageError,
    file_stem,
    outcome,
    print_failure,
    say,
    sigterm_interrupts,
)

if TYPE_CHECKING:
    from kfcompile.cli.parser import Run

__all__ = ["Failed", "UsageError", "file_stem", "main", "outcome"]


def run() -> int:
    """The ``kfcompile`` command (its console script, ``python -m kfcompile``): ``main`` in a
    process of its own. What its start-up makes (the modules of the command, its arguments)
    lives as long as the process, so the collector is off while it is made and it is frozen
    after: no collection walks it again (they spent 59 M of a cold render's 549 M
    instructions on it); nor, at exit, what the command made, which goes with the process."""
    gc.disable()
    command, args = _parsed(None)
    gc.freeze()
    gc.enable()
    try:
        return _performed(command, args)
    finally:
        gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    return _performed(*_parsed(argv))


def _parsed(argv: Sequence[str] | None) -> tuple[Run, argparse.Namespace]:
    """The command's function (its module imported) and its arguments; exit 2 on bad ones."""
    from kfcompile.cli import parser

    args = parser.build(argv).parse_args(argv)
    return parser.command(args), args


def _performed(command: Run, args: argparse.Namespace) -> int:
    """The command run: its exit status, its failures printed."""
    try:
        with sigterm_interrupts():
            return int(command(args))
    except UsageError as exc:
        say(f"kfcompile: {exc}", err=True)
        return 2
    except Failed as exc:
        print_failure(exc)
        return 1
    except BrokenPipeError:  # `kfcompile render ... | head`
        sys.stderr.close()
        return 0
    except Terminated:
        print("kfcompile: terminated (SIGTERM)", file=sys.stderr)
        return TERMINATED
    except KeyboardInterrupt:
        return INTERRUPTED

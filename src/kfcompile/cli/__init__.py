"""``kfcompile`` command line: argument parsing and printing around the pure core.

``parser`` declares every command; ``compile`` (render, validate, explain, targets, schema),
``manifests`` (import, convert) and ``cluster`` (submit ... list) do them, on the helpers of
``common``. Exit status: 0 success, 1 a problem with a spec, its output or the cluster (one line
per problem on stderr), 2 a usage error, 130 Ctrl-C, 143 SIGTERM (which, like Ctrl-C, deletes
what a command was in the middle of, such as the sync helper pod).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from kfcompile.cli import parser
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

__all__ = ["Failed", "UsageError", "file_stem", "main", "outcome"]


def run() -> int:
    """The ``kfcompile`` command (its console script, ``python -m kfcompile``)."""
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    args = parser.build(argv).parse_args(argv)
    module, _, name = args.func.partition(":")
    try:
        command = getattr(importlib.import_module(f"kfcompile.cli.{module}"), name)
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

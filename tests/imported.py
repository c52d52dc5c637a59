"""What a fresh interpreter imports: for tests of start-up paths that must stay light."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Mapping
from pathlib import Path


def imported_after(
    code: str, roots: Collection[str], cwd: Path, env: Mapping[str, str] | None = None
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Run ``code`` in a new interpreter; the modules under ``roots`` it left imported, and the
    finished process (whose last stdout line is the list)."""
    probe = (
        f"{code}\nimport json as _j, sys as _s\n"
        f"print(_j.dumps(sorted(m for m in _s.modules if m.split('.')[0] in {sorted(roots)!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found, done

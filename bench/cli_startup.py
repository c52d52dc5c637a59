"""Cold start of `kfcompile render` next to `python -c pass`: median wall time and CPU time.

    python bench/cli_startup.py [N]

Wall time is what the issue names; CPU time (user + system of the child) is shown beside it
because it is steadier on a shared, noisy machine.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "examples" / "llama-4x8-efa.yaml"
# As on a user's machine: bytecode is cached after the first run (some sandboxes disable that).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], runs: int, env: dict[str, str] = ENV) -> tuple[float, float]:
    """(median wall ms, median CPU ms) over ``runs`` runs after one warm-up."""
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        cpu, start = _cpu(), time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((_cpu() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    # The console script installed with this interpreter (not whatever `kfcompile` is on PATH).
    script = str(Path(sys.executable).with_name("kfcompile"))
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("kfcompile render <full example>", [script, "render", str(FULL)]),
        ("kfcompile render -t pytorchjob/v1", [script, "render", str(FULL), "-t", "pytorchjob/v1"]),
    ]
    print(f"median of {runs} cold runs{'':>12}wall      cpu")
    for label, argv in rows:
        wall, cpu = measure(argv, runs)
        print(f"{label:<36} {wall:7.1f} ms {cpu:6.1f} ms")


if __name__ == "__main__":
    main()

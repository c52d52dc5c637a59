"""Cold `torchx run --dryrun -s kfcompile ... dist.ddp -j 2x8 --gpu 8 --script train.py`, next
to what it is made of: `python -c pass`, importing torchx's CLI, and the same dry run on
torchx's own `local_cwd` scheduler. Median wall time and CPU time (user + system) of the child.

    python bench/torchx_dryrun.py [N]     # with torchx installed in this interpreter

Run it with the interpreter of the environment to measure (torchx 0.7.0, or a nightly). The
goal is under 0.5 s wall for the kfcompile dry run with torchx 0.7.0 on the project's machine.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
DDP = ["dist.ddp", "-j", "2x8", "--gpu", "8", "--script", "train.py", "--", "--lr", "0.1"]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], runs: int, cwd: str) -> tuple[float, float]:
    """(median wall ms, median CPU ms) over ``runs`` runs after one warm-up."""
    env = {**ENV, "HOME": cwd}  # no user .torchxconfig
    subprocess.run(argv, check=True, capture_output=True, cwd=cwd, env=env)
    walls, cpus = [], []
    for _ in range(runs):
        cpu, start = _cpu(), time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=cwd, env=env)
        walls.append((time.perf_counter() - start) * 1000)
        cpus.append((_cpu() - cpu) * 1000)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    import torchx

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    # The console script installed with this interpreter (not whatever `torchx` is on PATH).
    script = str(Path(sys.executable).with_name("torchx"))
    cfg = "namespace=team-a,target=trainjob/v2.3"
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("python -c 'import torchx.cli.main'", [sys.executable, "-c", "import torchx.cli.main"]),
        ("torchx run --dryrun -s local_cwd", [script, "run", "--dryrun", "-s", "local_cwd", *DDP]),
        ("torchx run --dryrun -s kfcompile", [script, "run", "--dryrun", "-s", "kfcompile",
                                              "-cfg", cfg, *DDP]),
    ]  # fmt: skip
    print(f"torchx {torchx.__version__}, median of {runs} cold runs{'':>10}wall      cpu")
    with tempfile.TemporaryDirectory() as cwd:
        for label, argv in rows:
            wall, cpu = measure(argv, runs, cwd)
            print(f"{label:<44} {wall:7.1f} ms {cpu:6.1f} ms")


if __name__ == "__main__":
    main()

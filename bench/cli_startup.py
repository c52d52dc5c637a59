"""Cold wall time of `kfcompile render` next to `python -c pass` (median of N runs).

python bench/cli_startup.py [N]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "examples" / "llama-4x8-efa.yaml"


def median_ms(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    script = shutil.which("kfcompile") or str(Path(sys.executable).with_name("kfcompile"))
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("kfcompile render <full example>", [script, "render", str(FULL)]),
        ("kfcompile render -t pytorchjob/v1", [script, "render", str(FULL), "-t", "pytorchjob/v1"]),
        (
            "python -m kfcompile render <full>",
            [sys.executable, "-m", "kfcompile", "render", str(FULL)],
        ),
    ]
    print(f"median of {runs} cold runs")
    for label, argv in rows:
        print(f"{label:<36} {median_ms(argv, runs):7.1f} ms")


if __name__ == "__main__":
    main()

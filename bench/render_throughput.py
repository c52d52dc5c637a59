"""In-process `render(spec, target)` calls per second, for each example and target.

python bench/render_throughput.py [seconds-per-cell]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kfcompile import TARGETS, UnsupportedFeature, load_spec, render

ROOT = Path(__file__).resolve().parents[1]


def rate(spec: object, target: str, seconds: float) -> float:
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while (now := time.perf_counter()) < deadline:
        for _ in range(100):
            render(spec, target)  # type: ignore[arg-type]
        calls += 100
    return calls / (now - start)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    print(f"{'example':<22}" + "".join(f"{t:>15}" for t in TARGETS) + "   (render calls/s)")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        spec = load_spec(path.read_text(encoding="utf-8"))
        cells = []
        for target in TARGETS:
            try:
                render(spec, target)
            except UnsupportedFeature:
                cells.append("unsupported")
                continue
            cells.append(f"{rate(spec, target, seconds):,.0f}")
        print(f"{path.stem:<22}" + "".join(f"{c:>15}" for c in cells))


if __name__ == "__main__":
    main()

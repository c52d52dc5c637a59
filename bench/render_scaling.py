"""Seconds to load, render and print a spec with 10,000 and 40,000 `env` entries.

    python bench/render_scaling.py [N ...]

Linear work shows as four times the seconds for four times the entries
(`tests/test_render_scaling.py` checks the same by counting calls).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from kfcompile import load_spec, render
from kfcompile.spec import yamlio

TARGETS = ["trainjob/v2.3", "pytorchjob/v1"]


def spec_text(n: int) -> str:
    env = "".join(f"  VAR_{i}: 'value {i}'\n" for i in range(n))
    return f"name: many-env\nimage: img:1\ncommand: [python, train.py]\nenv:\n{env}"


def seconds(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [10_000, 40_000]
    print(
        f"{'env entries':>11}  {'load_spec':>9}"
        + "".join(f"  {t + ' render':>20}  {'dump':>6}" for t in TARGETS)
    )
    for n in sizes:
        text = spec_text(n)
        spec = load_spec(text)
        cells = [f"{seconds(lambda: load_spec(text)):9.2f}"]  # noqa: B023 (called right here)
        for target in TARGETS:
            objects = render(spec, target)
            cells.append(f"{seconds(lambda: render(spec, target)):20.2f}")  # noqa: B023
            cells.append(f"{seconds(lambda: yamlio.dump_all(objects)):6.2f}")  # noqa: B023
        print(f"{n:>11,}  " + "  ".join(cells))


if __name__ == "__main__":
    main()

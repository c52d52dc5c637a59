"""Golden files pin complete outputs: every example for every target, byte for byte.

Regenerate deliberately with ``pytest tests/test_golden.py --update-golden`` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kfcompile import TARGETS, load_spec
from kfcompile.cli import file_stem, outcome

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
GOLDEN = ROOT / "golden"


def expected_files() -> dict[Path, str]:
    files = {}
    for example in EXAMPLES:
        spec = load_spec(example.read_text(encoding="utf-8"))
        for name in TARGETS:
            suffix, text = outcome(spec, name)
            files[GOLDEN / example.stem / f"{file_stem(name)}.{suffix}"] = text
    return files


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_golden(example: Path, request: pytest.FixtureRequest) -> None:
    wanted = {p: t for p, t in expected_files().items() if p.parent.name == example.stem}
    folder = GOLDEN / example.stem
    if request.config.getoption("--update-golden"):
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for path, text in wanted.items():
            path.write_text(text, encoding="utf-8")
    present = set(folder.iterdir()) if folder.is_dir() else set()
    assert present == set(wanted), "golden files differ from targets; run with --update-golden"
    for path, text in wanted.items():
        assert path.read_text(encoding="utf-8") == text, f"{path} drifted"


def test_no_golden_without_example() -> None:
    rendered = {p.name for p in GOLDEN.iterdir() if p.name != "conversions"}  # test_import's
    assert rendered == {e.stem for e in EXAMPLES}


def test_full_example_renders_on_current_releases() -> None:
    """The flagship example must work on every release that can express it, and the golden
    error for v2.0 must name exactly what v2.0 lacks."""
    files = expected_files()
    full = GOLDEN / "llama-4x8-efa"
    for name in ("pytorchjob/v1", "trainjob/v2.1", "trainjob/v2.2", "trainjob/v2.3"):
        assert full / f"{file_stem(name)}.yaml" in files
    err = files[full / "trainjob-v2.0.err"]
    assert {line.split(":")[0] for line in err.splitlines()} == {"pod_labels", "image_pull_secrets"}

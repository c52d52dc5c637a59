"""Generated documentation and schema files must match the code that generates them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from kfcompile.spec import yamlio
from kfcompile.spec.json_schema import json_schema
from kfcompile.spec.model import JobSpec
from kfcompile.targets.reference import field_slots, slot_table, spec_reference, support_table

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SCHEMA_FILE = ROOT / "schemas" / "jobspec.schema.json"


GENERATED = {"support": support_table, "slots": slot_table, "spec": spec_reference}


def section(name: str) -> str:
    m = re.search(rf"<!-- reference:{name} -->\n(.*?)<!-- /reference:{name} -->", README, re.S)
    assert m, f"README lacks the {name} section"
    return m.group(1)


@pytest.mark.parametrize("name", GENERATED)
def test_readme_generated_section_is_current(name: str, request: pytest.FixtureRequest) -> None:
    """Regenerate with `pytest tests/test_docs.py --update-golden` and review the diff."""
    wanted = GENERATED[name]()
    if request.config.getoption("--update-golden"):
        text = (ROOT / "README.md").read_text(encoding="utf-8")
        start, end = f"<!-- reference:{name} -->\n", f"<!-- /reference:{name} -->"
        head, rest = text.split(start)
        (ROOT / "README.md").write_text(head + start + wanted + end + rest.split(end)[1])
        return
    assert section(name) == wanted, "stale: run pytest tests/test_docs.py --update-golden"


def test_reference_covers_every_field() -> None:
    import attrs

    slots = field_slots()
    assert set(slots) == {a.name for a in attrs.fields(JobSpec)}
    # gpu_resource only names the GPU key; every other field feeds at least one slot
    assert [f for f, s in slots.items() if not s] == ["gpu_resource"]
    for name in slots:
        assert f"| `{name}` |" in section("spec")


def test_schema_file_is_current(request: pytest.FixtureRequest) -> None:
    if request.config.getoption("--update-golden"):
        SCHEMA_FILE.write_text(json.dumps(json_schema(), indent=2) + "\n", encoding="utf-8")
    on_disk = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert on_disk == json_schema(), "stale: run pytest tests/test_docs.py --update-golden"


@pytest.mark.parametrize(
    "example", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.stem
)
def test_examples_match_schema(example: Path) -> None:
    jsonschema.validate(yamlio.parse(example.read_text(encoding="utf-8")), json_schema())


def test_schema_rejects_unknown_fields() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "a", "image": "b", "replicas": 2}, json_schema())


def test_readme_starts_with_the_two_setup_commands_ci_runs() -> None:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block and README.index(block.group(0)) < README.index("##")
    commands = block.group(1).strip().splitlines()
    assert len(commands) == 2
    # Each works where pip installs nothing outside a virtual environment (PEP 668: Debian's and
    # Ubuntu's Python): it makes one and runs every later step from it.
    for command in commands:
        first, *rest = command.split(" && ")
        assert first == "python3 -m venv .venv" and rest, command
        assert all(step.startswith(".venv/bin/") for step in rest), command
    assert "kfcompile render examples/*.yaml --target all --out" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci  # the test command, verbatim, a line of its own
    # ... on a clone with no environment yet, as a new user's
    before = [line for line in ci[: ci.index(commands[1])] if not line.startswith("#")]
    assert not [line for line in before if re.search(r"\b(venv|pip)\b", line)]


def test_without_the_reference_crds_the_skips_are_one_line_saying_where_to_get_them(
    tmp_path: Path,
) -> None:
    """Not a line per test location (pytest's -ra gave about 100, all one reason)."""
    env = {k: v for k, v in os.environ.items() if k != "KFCOMPILE_REQUIRE_SHARED"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cli.py",
         "-k", "crd or minimal"],
        cwd=ROOT, env={**env, "KFCOMPILE_SHARED": str(tmp_path)}, capture_output=True,
        text=True, timeout=50, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    [summary] = [line for line in lines if "skipped: " in line]
    assert re.fullmatch(r"\d+ skipped: \.\./shared/crds not found: .*KFCOMPILE_SHARED\)", summary)
    assert '"The reference CRDs"' in summary and "### The reference CRDs" in README
    assert not [line for line in lines if line.startswith("SKIPPED")]

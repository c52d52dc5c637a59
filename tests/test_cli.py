"""The ``kfcompile`` command line, driven in-process (``main(argv)``) and once as a real process.

Outputs are checked against the library (``kfcompile.render``/``explain``), never against text
copied from a previous run: YAML/JSON on stdout must parse back to the same objects.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import schema_check
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfcompile import (
    DEFAULT_TARGET,
    TARGETS,
    SpecError,
    UnsupportedFeature,
    explain,
    load_spec,
    render,
)
from kfcompile.cli import main
from kfcompile.spec import object_paths

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
EXAMPLE_NAMES = [p.name for p in EXAMPLES]
V23_CRD = "trainjobs-v2.3.0.yaml"
TRACEBACK = "Traceback (most recent call last)"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the repository root so file names print as ``examples/<name>.yaml``."""
    monkeypatch.chdir(ROOT)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``kfcompile argv``; argparse's exits count as status."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def example(name: str) -> str:
    return f"examples/{name}"


def rendered(name: str, target: str = DEFAULT_TARGET) -> list[dict[str, Any]]:
    return render(load_spec((ROOT / "examples" / name).read_text(encoding="utf-8")), target)


def outcome(name: str, target: str) -> list[dict[str, Any]] | UnsupportedFeature:
    try:
        return rendered(name, target)
    except UnsupportedFeature as exc:
        return exc


def stem(target: str) -> str:
    return target.replace("/", "-")


MALFORMED = "name: Bad_Name\nimage: img:1\nnum_nodes: 0\ncpu_request: 1GB\nmanaged_by: argo\n"


# --- render ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_render_yaml_parses_back_to_render(
    capsys: pytest.CaptureFixture[str], name: str, target: str
) -> None:
    code, out, err = run(capsys, "render", example(name), "--target", target)
    expected = outcome(name, target)
    if isinstance(expected, UnsupportedFeature):
        assert code == 1 and out == ""
        prefix = f"{example(name)} ({target}): "
        assert err.splitlines() == [prefix + str(p) for p in expected.problems]
        return
    assert (code, err) == (0, "")
    assert list(yaml.safe_load_all(out)) == expected


def test_render_defaults_to_newest_trainjob(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", example("minimal.yaml"))
    assert code == 0
    assert DEFAULT_TARGET == "trainjob/v2.3"
    assert list(yaml.safe_load_all(out)) == rendered("minimal.yaml", "trainjob/v2.3")


def test_render_short_target_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", "-t", "pytorchjob/v1", example("minimal.yaml"))
    assert code == 0
    assert list(yaml.safe_load_all(out)) == rendered("minimal.yaml", "pytorchjob/v1")


def test_render_json_single_object(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", "-o", "json", example("minimal.yaml"))
    assert code == 0
    objects = rendered("minimal.yaml")
    assert len(objects) == 1
    assert json.loads(out) == objects[0]


@pytest.mark.parametrize("target", list(TARGETS))
def test_render_json_list_with_configmap(capsys: pytest.CaptureFixture[str], target: str) -> None:
    code, out, _ = run(capsys, "render", "-o", "json", "-t", target, example("inline-script.yaml"))
    assert code == 0
    doc = json.loads(out)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    assert doc["items"] == rendered("inline-script.yaml", target)
    assert [o["kind"] for o in doc["items"]] == ["ConfigMap", TARGETS[target].kind]
    assert set(doc) == {"apiVersion", "kind", "items"}


def test_render_many_specs_yaml_concatenated(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["minimal.yaml", "inline-script.yaml", "kueue-queued.yaml"]
    code, out, _ = run(capsys, "render", *map(example, names))
    assert code == 0
    assert list(yaml.safe_load_all(out)) == [o for n in names for o in rendered(n)]


def test_render_many_specs_json_is_one_list(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["minimal.yaml", "inline-script.yaml"]
    code, out, _ = run(capsys, "render", "-o", "json", *map(example, names))
    assert code == 0
    doc = json.loads(out)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    assert doc["items"] == rendered("minimal.yaml") + rendered("inline-script.yaml")


def test_render_many_specs_stops_at_a_bad_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(MALFORMED, encoding="utf-8")
    code, _, err = run(capsys, "render", example("minimal.yaml"), str(bad))
    assert code == 1
    assert err and all(line.startswith(f"{bad}: ") for line in err.splitlines())


def _yaml_read_back(capsys: pytest.CaptureFixture[str], tmp_path: Path, values: list[str]) -> None:
    """Env and label values survive ``render`` -> a YAML 1.1 reader (PyYAML, like kubectl)."""
    env = ", ".join(f"V{i}: {json.dumps(v)}" for i, v in enumerate(values))
    labels = ", ".join(f"l{i}: {json.dumps(v)}" for i, v in enumerate(values) if v.isalnum())
    text = f"name: job\nimage: img:1\nenv: {{{env}}}\nlabels: {{{labels}}}\n"
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(text, encoding="utf-8")
    for target in TARGETS:
        code, out, _ = run(capsys, "render", "-t", target, str(spec_file))
        assert code == 0
        assert list(yaml.safe_load_all(out)) == render(load_spec(text), target), target


def test_render_yaml_quotes_strings_that_look_like_other_types(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    values = ["true", "False", "null", "NULL", "~", "", "123", "0777", "1e3", "1.5", ".inf"]
    _yaml_read_back(capsys, tmp_path, [*values, "0x1F", "- x", "a: b", "#c"])


def test_render_yaml_quotes_yaml_1_1_booleans(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _yaml_read_back(capsys, tmp_path, ["yes", "no", "on", "off"])


def test_render_all_targets_needs_out(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "render", "--target", "all", example("minimal.yaml"))
    assert code == 2 and out == ""
    assert "--out" in err


def test_render_all_targets_to_a_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, out, err = run(
        capsys, "render", "--target", "all", "--out", str(out_dir), *map(example, EXAMPLE_NAMES)
    )
    assert (code, err) == (0, "")
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(p.stem for p in EXAMPLES)
    for path in EXAMPLES:
        folder = out_dir / path.stem
        written = sorted(p.name for p in folder.iterdir())
        wanted = []
        for target in TARGETS:
            expected = outcome(path.name, target)
            if isinstance(expected, UnsupportedFeature):
                wanted.append(f"{stem(target)}.err")
                err_text = (folder / f"{stem(target)}.err").read_text(encoding="utf-8")
                assert err_text.splitlines() == [str(p) for p in expected.problems]
            else:
                wanted.append(f"{stem(target)}.yaml")
                text = (folder / f"{stem(target)}.yaml").read_text(encoding="utf-8")
                assert list(yaml.safe_load_all(text)) == expected
        assert written == sorted(wanted)

    # The table: a header naming every target, then one row per spec with a cell per target;
    # then where the reasons are (tests/test_cli_help.py).
    lines = out.split("\n\n")[0].splitlines()
    assert lines[0].split() == ["spec", *TARGETS]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == set(EXAMPLE_NAMES)
    for name, line in rows.items():
        cells = re.split(r"\s{2,}", line.strip())[1:]
        assert len(cells) == len(TARGETS), line
        for target, cell in zip(TARGETS, cells, strict=True):
            expected = outcome(name, target)
            if isinstance(expected, UnsupportedFeature):
                assert cell == f"{len(expected.problems)} unsupported"
            else:
                assert cell == "ok"


def test_render_out_json_writes_json_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, _ = run(
        capsys, "render", "-o", "json", "--out", str(tmp_path), example("inline-script.yaml")
    )
    assert code == 0
    written = list((tmp_path / "inline-script").iterdir())
    assert [p.name for p in written] == [f"{stem(DEFAULT_TARGET)}.json"]
    assert json.loads(written[0].read_text())["items"] == rendered("inline-script.yaml")


@pytest.mark.parametrize(
    "argv", [["render", "--target", "all"], ["convert", "--to", DEFAULT_TARGET]], ids=str
)
def test_out_refuses_two_inputs_that_write_one_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    """Same file name, other folders: the second would overwrite the first, both said ok."""
    text = (ROOT / "examples" / "minimal.yaml").read_text(encoding="utf-8")
    if argv[0] == "convert":
        text = yaml.safe_dump_all(rendered("minimal.yaml"))
    first, second = tmp_path / "a" / "job.yaml", tmp_path / "b" / "job.yaml"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
    out_dir = tmp_path / "out"
    code, out, err = run(capsys, *argv, "--out", str(out_dir), str(first), str(second))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"kfcompile: {second} and {first} would both write {out_dir}/job"
        + ("" if argv[0] == "render" else ".yaml")
    ]
    assert not out_dir.exists()  # nothing written


# --- render --check -------------------------------------------------------------------------


def _goldens() -> list[Any]:
    out = []
    for path in EXAMPLES:
        for target in TARGETS:
            golden = ROOT / "golden" / path.stem / f"{stem(target)}.yaml"
            if golden.exists():
                out.append(pytest.param(path.name, target, id=f"{path.stem}-{stem(target)}"))
    return out


@pytest.mark.parametrize(("name", "target"), _goldens())
def test_check_matching_golden(capsys: pytest.CaptureFixture[str], name: str, target: str) -> None:
    golden = f"golden/{Path(name).stem}/{stem(target)}.yaml"
    code, out, err = run(capsys, "render", example(name), "-t", target, "--check", golden)
    assert (code, out, err) == (0, "", "")


def test_check_modified_golden_prints_a_diff(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = ROOT / "golden" / "minimal" / "trainjob-v2.3.yaml"
    golden = tmp_path / "trainjob-v2.3.yaml"
    original = source.read_text(encoding="utf-8")
    assert "numNodes: 1\n" in original
    golden.write_text(original.replace("numNodes: 1\n", "numNodes: 3\n"), encoding="utf-8")
    code, out, err = run(capsys, "render", example("minimal.yaml"), "--check", str(golden))
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"--- {golden}"
    assert lines[1].startswith("+++ ")
    assert any(line.startswith("@@ ") for line in lines)
    changed = [line for line in lines[2:] if line[:1] in "+-" and not line.startswith("@@")]
    assert sorted(changed) == ["+    numNodes: 1", "-    numNodes: 3"]
    assert str(golden) in err


def test_check_missing_golden_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.yaml"
    code, out, err = run(capsys, "render", example("minimal.yaml"), "--check", str(missing))
    assert code == 2 and out == ""
    assert str(missing) in err


# --- validate -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_validate_ok(capsys: pytest.CaptureFixture[str], name: str) -> None:
    target = "pytorchjob/v1"  # every example renders for it
    code, out, err = run(capsys, "validate", "-t", target, example(name))
    assert (code, err) == (0, "")
    assert out == f"{example(name)}: valid for {target}\n"  # the verdict on stdout


def test_validate_reports_unsupported_features(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", "-t", "trainjob/v2.0", example("llama-4x8-efa.yaml"))
    assert code == 1 and out == ""
    expected = outcome("llama-4x8-efa.yaml", "trainjob/v2.0")
    assert isinstance(expected, UnsupportedFeature)
    prefix = f"{example('llama-4x8-efa.yaml')} (trainjob/v2.0): "
    assert err.splitlines() == [prefix + str(p) for p in expected.problems]


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_validate_against_the_v2_3_crd(capsys: pytest.CaptureFixture[str], name: str) -> None:
    crd_file = schema_check.require_shared() / "crds" / V23_CRD
    expected = outcome(name, DEFAULT_TARGET)
    code, out, err = run(capsys, "validate", example(name), "--crd", str(crd_file))
    if isinstance(expected, UnsupportedFeature):
        assert code == 1
        return
    # The independent check of the same output agrees that it is valid.
    assert schema_check.crd_errors(expected[-1], V23_CRD) == []
    assert (code, err) == (0, "")
    assert out == f"{example(name)}: valid for {DEFAULT_TARGET} against {crd_file}\n"


@pytest.mark.parametrize("target", ["trainjob/v2.1", "trainjob/v2.2"])
def test_validate_against_another_release_s_crd_says_whose_it_is(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """Not the schema errors of another release's shape: which release the CRD is."""
    crd_file = schema_check.require_shared() / "crds" / V23_CRD
    name = "llama-4x8-efa.yaml"
    if target == "trainjob/v2.1":  # the schema errors this would have been
        assert schema_check.crd_errors(rendered(name, target)[-1], V23_CRD)
    code, out, err = run(capsys, "validate", "-t", target, example(name), "--crd", str(crd_file))
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    assert line.startswith(f"{crd_file}: this CRD is trainjob/v2.3's (it has spec.runtimePatches.")
    assert line.endswith(f"not {target}'s: give --target trainjob/v2.3, or {target}'s CRD")


@pytest.mark.parametrize("crd", sorted(set(schema_check.CRD_FILES.values())))
def test_validate_against_each_release_s_own_crd(
    capsys: pytest.CaptureFixture[str], crd: str
) -> None:
    crd_file = schema_check.require_shared() / "crds" / crd
    [target] = [t for t, f in schema_check.CRD_FILES.items() if f == crd]
    code, out, err = run(
        capsys, "validate", "-t", target, example("minimal.yaml"), "--crd", str(crd_file)
    )
    assert (code, err) == (0, "")
    assert out == f"{example('minimal.yaml')}: valid for {target} against {crd_file}\n"


def test_validate_crd_that_is_not_yaml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text("kind: [CustomResourceDefinition\n", encoding="utf-8")
    code, out, err = run(capsys, "validate", example("minimal.yaml"), "--crd", str(crd_file))
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{crd_file}: line ")


@pytest.mark.parametrize("content", ["just some words\n", "apiVersion: v1\nkind: ConfigMap\n"])
def test_validate_crd_without_the_kind_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str
) -> None:
    crd_file = tmp_path / "crd.yaml"
    crd_file.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, "validate", example("minimal.yaml"), "--crd", str(crd_file))
    assert (code, out) == (1, "")
    assert "valid for" not in err


# --- explain --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", list(TARGETS))
def test_explain_json_rows_match_the_library(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    name = "inline-script.yaml"
    code, out, _ = run(capsys, "explain", "-t", target, "-o", "json", example(name))
    assert code == 0
    rows = json.loads(out)
    objects = rendered(name, target)
    placements = explain(load_spec((ROOT / "examples" / name).read_text()), target)
    assert len(rows) == len(placements) > 0
    for row, p in zip(rows, placements, strict=True):
        assert {"source", "object", "path", "value"} <= set(row)
        obj = objects[p.doc]
        assert row["object"] == f"{obj['kind']}/{obj['metadata']['name']}"
        assert (row["source"], row["path"], row["value"]) == (p.source, p.path, p.value)
        if not p.merge:  # the value is really there in the rendered object
            found = object_paths.get(obj, object_paths.parse(row["path"]))
            if "*" in row["path"]:
                assert found and all(v == row["value"] for v in found)
            else:
                assert found == row["value"]


def test_explain_text_one_line_per_placement(capsys: pytest.CaptureFixture[str]) -> None:
    name = "llama-4x8-efa.yaml"
    code, out, _ = run(capsys, "explain", example(name))
    assert code == 0
    placements = explain(load_spec((ROOT / "examples" / name).read_text()))
    lines = out.splitlines()
    assert len(lines) == len(placements)
    job = rendered(name)[-1]
    for line, p in zip(lines, placements, strict=True):
        assert line.split()[0] == p.source
        assert f" TrainJob/{job['metadata']['name']} {p.path} = " in line
        assert line.split(" = ", 1)[1].removesuffix(" (merged)") == json.dumps(
            p.value, separators=(",", ":")
        )


def test_explain_takes_one_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, "explain", example("minimal.yaml"), example("minimal.yaml"))
    assert code == 2


# --- targets and schema ---------------------------------------------------------------------


# Support is listed per spec field (``affinity``) or per neutral slot (``pod.affinity``).
AFFINITY = ("affinity", "pod.affinity")
GRACE = ("termination_grace_period_seconds", "pod.terminationGracePeriodSeconds")


def _row(rows: dict[str, Any], names: tuple[str, ...]) -> Any:
    found = [rows[n] for n in names if n in rows]
    assert found, f"none of {names} listed"
    return found[0]


def test_targets_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "targets")
    assert code == 0
    lines = out.splitlines()
    for name, t in TARGETS.items():
        line = next(x for x in lines if x.startswith(name + " "))
        assert t.kind in line and t.api_version in line
    header = next(i for i, x in enumerate(lines) if x.split()[-len(TARGETS) :] == list(TARGETS))
    rows = {x.split()[0]: x.split()[1:] for x in lines[header + 1 :] if x.strip()}
    # columns in TARGETS order: pytorchjob/v1, v2.0, v2.1, v2.2, v2.3 (KUBEFLOW.md)
    assert _row(rows, AFFINITY) == ["yes", "-", "yes", "yes", "yes"]
    assert _row(rows, GRACE) == ["yes", "-", "-", "-", "yes"]


def test_targets_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "targets", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {
        "pytorchjob/v1",
        "trainjob/v2.0",
        "trainjob/v2.1",
        "trainjob/v2.2",
        "trainjob/v2.3",
    }
    assert doc["pytorchjob/v1"]["kind"] == "PyTorchJob"
    assert doc["pytorchjob/v1"]["apiVersion"] == "kubeflow.org/v1"
    for name in ("trainjob/v2.0", "trainjob/v2.1", "trainjob/v2.2", "trainjob/v2.3"):
        assert doc[name]["kind"] == "TrainJob"
        assert doc[name]["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert _row(doc["trainjob/v2.0"]["supports"], AFFINITY) is False
    assert _row(doc["trainjob/v2.1"]["supports"], AFFINITY) is True
    # KUBEFLOW.md: terminationGracePeriodSeconds is patchable from v2.3 only.
    grace = {n: _row(d["supports"], GRACE) for n, d in doc.items()}
    assert grace == {
        "pytorchjob/v1": True,
        "trainjob/v2.0": False,
        "trainjob/v2.1": False,
        "trainjob/v2.2": False,
        "trainjob/v2.3": True,
    }
    for name, d in doc.items():
        # an escape hatch may be "partial": some of its keys only (see d["overrides"])
        assert all(isinstance(v, bool) or v == "partial" for v in d["supports"].values()), name


def test_schema_is_json_schema_accepting_every_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from jsonschema import Draft202012Validator

    code, out, _ = run(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    for path in EXAMPLES:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        errors = [e.message for e in validator.iter_errors(data)]
        assert errors == [], (path.name, errors)
    # and it is not vacuous: what load_spec refuses for shape, the schema refuses too
    for bad in ({"image": "x"}, {"name": "a", "image": "x", "tolerationz": []}):
        assert not validator.is_valid(bad)
        with pytest.raises(SpecError):
            load_spec(json.dumps(bad))


# --- errors ---------------------------------------------------------------------------------


def test_malformed_spec_one_line_per_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(MALFORMED, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(MALFORMED)
    assert len(info.value.problems) == 4
    for command in ("render", "validate", "explain"):
        code, out, err = run(capsys, command, str(spec_file))
        assert code == 1 and out == ""
        assert err.splitlines() == [f"{spec_file}: {p}" for p in info.value.problems]
        assert TRACEBACK not in err


def test_yaml_syntax_error_names_line_and_column(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text("name: job\n  image: x\n", encoding="utf-8")
    code, _, err = run(capsys, "render", str(spec_file))
    assert code == 1
    assert err.splitlines()[0].startswith(f"{spec_file}: line 2, column 8: ")


@pytest.mark.parametrize(
    "around", [("", "---\n"), ("---\n", "---\n...\n---\n"), ("", "--- null\n")]
)
def test_empty_documents_around_a_spec_are_ignored_as_kubectl_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, around: tuple[str, str]
) -> None:
    spec_file = tmp_path / "job.yaml"
    text = (ROOT / "examples" / "minimal.yaml").read_text(encoding="utf-8")
    spec_file.write_text(around[0] + text + around[1], encoding="utf-8")
    code, out, err = run(capsys, "render", str(spec_file))
    assert (code, err) == (0, "")
    assert list(yaml.safe_load_all(out)) == rendered("minimal.yaml")


def test_two_specs_in_one_file_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    spec_file = tmp_path / "job.yaml"
    text = (ROOT / "examples" / "minimal.yaml").read_text(encoding="utf-8")
    spec_file.write_text(f"{text}---\n{text}", encoding="utf-8")
    code, out, err = run(capsys, "render", str(spec_file))
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{spec_file}: 2 YAML documents: a spec is one"]


def test_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    code, out, err = run(capsys, "render", str(missing))
    assert code == 2 and out == ""
    assert str(missing) in err and TRACEBACK not in err


def test_directory_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "render", str(tmp_path))
    assert code == 2 and TRACEBACK not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--target", "trainjob/v9", "examples/minimal.yaml"],
        ["explain", "--target", "all", "examples/minimal.yaml"],
        ["frobnicate", "examples/minimal.yaml"],
        [],
        ["render"],
        ["render", "-o", "toml", "examples/minimal.yaml"],
    ],
    ids=["unknown-target", "all-for-explain", "unknown-command", "no-command", "no-spec", "bad-o"],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert "usage:" in err


def test_render_takes_f_as_kubectl_does(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["minimal.yaml", "kueue-queued.yaml"]
    code, out, err = run(capsys, "render", "-t", "pytorchjob/v1", "-f", *map(example, names[:1]),
                         "--filename", example(names[1]))  # fmt: skip
    assert (code, err) == (0, "")
    assert list(yaml.safe_load_all(out)) == [o for n in names for o in rendered(n, "pytorchjob/v1")]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["render", "examples/minimal.yaml", "-n", "Team_A"],
            "argument -n/--namespace: 'Team_A': ",
        ),
        (["validate", "--namespace=", "examples/minimal.yaml"], "argument -n/--namespace: '': "),
        (["render", "examples/minimal.yaml", "--frobnicate"], "unrecognized arguments: "),
        (["explain", "examples/minimal.yaml", "-f", "examples/minimal.yaml"], "give one spec"),
        (["render", "-t", "pytorchjob/v1"], "give a spec file: SPEC or -f SPEC"),
    ],
)
def test_a_command_s_usage_error_shows_its_own_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"usage: kfcompile {argv[0]} "), err
    assert f"kfcompile {argv[0]}: error: {message}" in err


def test_stdin_dash(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "examples" / "kueue-queued.yaml").read_text(encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code, out, _ = run(capsys, "render", "-t", "pytorchjob/v1", "-")
    assert code == 0
    assert list(yaml.safe_load_all(out)) == rendered("kueue-queued.yaml", "pytorchjob/v1")


def test_stdin_dash_malformed_is_labelled(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("name: job\n"))
    code, _, err = run(capsys, "render", "-")
    assert code == 1
    assert err.splitlines() == ["-: image: required"]


# --- as a real process ----------------------------------------------------------------------


def _process(*args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kfcompile", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **kwargs,
    )


def test_subprocess_render_and_errors(tmp_path: Path) -> None:
    done = _process("render", "-t", "trainjob/v2.1", "examples/llama-4x8-efa.yaml")
    assert done.returncode == 0, done.stderr
    assert list(yaml.safe_load_all(done.stdout)) == rendered("llama-4x8-efa.yaml", "trainjob/v2.1")

    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(MALFORMED, encoding="utf-8")
    bad = _process("render", str(spec_file))
    assert bad.returncode == 1 and bad.stdout == ""
    assert TRACEBACK not in bad.stderr
    assert len(bad.stderr.splitlines()) == 4

    piped = _process("render", "-", input=(ROOT / "examples" / "minimal.yaml").read_text())
    assert piped.returncode == 0
    assert list(yaml.safe_load_all(piped.stdout)) == rendered("minimal.yaml")

    usage = _process("render", "--target", "nope", "examples/minimal.yaml")
    assert usage.returncode == 2 and TRACEBACK not in usage.stderr


def test_render_never_imports_kubernetes_jsonschema_the_importer_or_the_lifecycle() -> None:
    """ARCHITECTURE.md's claim: render loads only what it uses."""
    unused = (
        "kubernetes",
        "jsonschema",
        "kfcompile_kube",
        "kfcompile.importer",
        "kfcompile.lifecycle",
    )
    code = (
        "import sys, kfcompile.cli as c; c.main(['render','examples/llama-4x8-efa.yaml']); "
        f"loaded = sorted(m for m in sys.modules if m.startswith({unused!r})); "
        "assert not loaded, loaded"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_broken_pipe_is_quiet() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kfcompile", "render", "-t", "pytorchjob/v1"]
        + [f"examples/{n}" for n in EXAMPLE_NAMES],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before anything is written
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) in (0, 1)
    assert TRACEBACK not in err


def test_console_script_is_installed() -> None:
    exe = shutil.which("kfcompile", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("kfcompile console script not installed next to this interpreter")
    done = subprocess.run(
        [exe, "targets", "-o", "json"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert set(json.loads(done.stdout)) == set(TARGETS)


def test_validate_reports_every_spec_and_fails_if_any_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = ["elastic-pytorchjob.yaml", "minimal.yaml", "kueue-queued.yaml"]
    code, out, err = run(capsys, "validate", "-t", "trainjob/v2.1", *map(example, names))
    assert code == 1
    assert out == "examples/minimal.yaml: valid for trainjob/v2.1\n"
    lines = err.splitlines()
    assert any(
        line.startswith("examples/elastic-pytorchjob.yaml (trainjob/v2.1): elastic:")
        for line in lines
    )
    assert any(
        line.startswith("examples/kueue-queued.yaml (trainjob/v2.1): active_deadline")
        for line in lines
    )
    code, out, err = run(capsys, "validate", "-t", "pytorchjob/v1", *map(example, names))
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{example(n)}: valid for pytorchjob/v1" for n in names]


def test_out_dir_that_cannot_be_written_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run(
        capsys, "render", example("minimal.yaml"), "-t", "all", "--out", str(blocker)
    )
    assert code == 2
    assert err.startswith("kfcompile: cannot write ") and "Traceback" not in err


# --- version, target names, flags that do not combine ------------------------------------------


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, err = run(capsys, "--version")
    assert (code, out, err) == (0, f"kfcompile {version('kfcompile')}\n", "")


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ("trainjob/v2.3.0", "trainjob/v2.3"),
        ("trainjob/v2.3.1", "trainjob/v2.3"),
        ("trainjob/v2.1.0", "trainjob/v2.1"),
        ("pytorchjob/v1", "pytorchjob/v1"),
    ],
)
def test_a_patch_release_names_its_line(
    capsys: pytest.CaptureFixture[str], given: str, line: str
) -> None:
    spec = load_spec((ROOT / "examples" / "minimal.yaml").read_text(encoding="utf-8"))
    assert render(spec, given) == render(spec, line)  # the library takes it too
    assert [p.path for p in explain(spec, given)] == [p.path for p in explain(spec, line)]
    code, out, _ = run(capsys, "render", "-t", given, example("minimal.yaml"))
    assert code == 0 and list(yaml.safe_load_all(out)) == render(spec, line)
    code, out, _ = run(capsys, "validate", "-t", given, example("minimal.yaml"))
    assert code == 0 and out == f"examples/minimal.yaml: valid for {line}\n"  # canonical name


@pytest.mark.parametrize(
    "given", ["trainjob/v2.4.0", "trainjob/v2.3.x", "trainjob/v2.3.", "pytorchjob/v1.2", "v2.3.0"]
)
def test_an_unknown_line_is_still_refused_with_the_choices(
    capsys: pytest.CaptureFixture[str], given: str
) -> None:
    spec = load_spec((ROOT / "examples" / "minimal.yaml").read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match=re.escape("choose one of: pytorchjob/v1, trainjob/v2.0")):
        render(spec, given)
    code, out, err = run(capsys, "render", "-t", given, example("minimal.yaml"))
    assert (code, out) == (2, "")
    assert "invalid choice" in err and "trainjob/v2.3" in err


@pytest.mark.parametrize(
    "flag", [["--out", "OUT"], ["--check", "golden/minimal/trainjob-v2.3.yaml"]]
)
def test_with_secrets_is_refused_where_nothing_goes_to_stdout(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flag: list[str],
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_value_not_to_write")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: j\nimage: python:3.11\ncommand: [python, -c, '1']\nsecret_env: [HF_TOKEN]\n"
    )
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in flag]
    code, out, err = run(capsys, "render", str(spec), *argv, "--with-secrets")
    assert (code, out) == (2, "")
    assert err == (
        f"kfcompile: --with-secrets prints the Secret to stdout only and cannot be used with "
        f"{flag[0]}\n"
    )
    assert not (tmp_path / "out").exists()


# --- -n on the commands that render (issue 27, item 7) -------------------------------------------

NAMESPACES = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
SECRET_SPEC = "name: j\nimage: python:3.11\ncommand: [python, -c, '1']\nsecret_env: [HF_TOKEN]\n"


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(namespace=NAMESPACES)
def test_render_n_sets_the_namespace_of_the_job_and_its_companions(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    namespace: str,
) -> None:
    """Over the spec's own (kueue-queued.yaml says team-a), on every object: the inline
    script's ConfigMap and secret_env's Secret too. (Before: a usage error, exit 2.)"""
    monkeypatch.setenv("HF_TOKEN", "hf_value")
    secret = tmp_path / "secret-env.yaml"
    secret.write_text(SECRET_SPEC)
    for path, more, kinds in (
        (example("kueue-queued.yaml"), [], ["TrainJob"]),
        (example("inline-script.yaml"), [], ["ConfigMap", "TrainJob"]),
        (str(secret), ["--with-secrets"], ["Secret", "TrainJob"]),
    ):
        code, out, err = run(capsys, "render", path, "-n", namespace, "-o", "json", *more)
        assert code == 0, err
        doc = json.loads(out)
        objects = doc["items"] if doc["kind"] == "List" else [doc]
        assert [o["kind"] for o in objects] == kinds
        assert {o["metadata"]["namespace"] for o in objects} == {namespace}, path


@pytest.mark.parametrize("command", ["validate", "explain"])
def test_validate_and_explain_take_n(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, err = run(capsys, command, example("minimal.yaml"), "-n", "team-b")
    assert code == 0, err
    if command == "explain":
        assert 'metadata.namespace = "team-b"' in out
    else:
        assert out == f"{example('minimal.yaml')}: valid for {DEFAULT_TARGET}\n"


def test_render_out_and_check_take_n(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = example("kueue-queued.yaml")
    code, _, err = run(capsys, "render", spec, "-n", "team-b", "--out", str(tmp_path))
    assert code == 0, err
    written = tmp_path / "kueue-queued" / "trainjob-v2.3.yaml"
    [job] = yaml.safe_load_all(written.read_text())
    assert job["metadata"]["namespace"] == "team-b"
    code, out, err = run(capsys, "render", spec, "-n", "team-b", "--check", str(written))
    assert (code, out, err) == (0, "", "")
    assert run(capsys, "render", spec, "--check", str(written))[0] == 1  # team-a, the spec's

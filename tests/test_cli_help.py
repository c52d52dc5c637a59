"""Help that teaches: every command's ``--help`` ends with examples, and every example runs (the
cluster ones against the local API server), as written, on the files it names; ``explain
FIELD``; ``validate --target all``; ``render --out``'s table says where the reasons are."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import schema_check
import yaml
from docblocks import cluster_commands, kfcompile_argv

from kfcompile.cli import main, parser
from kfcompile.spec import model
from kfcompile.targets import TARGETS
from kfcompile.targets.reference import KUBERNETES_SHAPED, RULES, UnknownField, describe

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SPEC = {
    "name": "demo",
    "image": "python:3.12-slim",
    "num_nodes": 2,
    "command": ["python", "-c", "print('hello')"],
}
# How the local cluster's job lives, for the commands whose examples need it running.
SCENARIO = {"suspend": "hang", "resume": "hang"}
BEFORE = {"resume": ["suspend", "demo"]}  # what the examples start from


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


def help_text(command: str) -> str:
    code, text = run_help(command)
    assert code == 0
    return text


def run_help(command: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    return int(exited.value.code or 0), out.getvalue()


@pytest.mark.parametrize("command", parser.COMMANDS)
def test_every_help_ends_with_its_examples(command: str) -> None:
    text = help_text(command)
    examples = text.split("\nExamples:\n", 1)[1]
    assert parser.EXAMPLES[command], command
    for comment, line in parser.EXAMPLES[command]:
        assert f"  # {comment}\n  {line}\n" in examples
        assert f"{line} ".startswith(f"kfcompile {command} "), line


def test_the_top_level_help_ends_with_a_jobs_course() -> None:
    text = subprocess.run([str(BIN / "kfcompile"), "--help"], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    examples = text.split("\nExamples:\n", 1)[1]
    for command in parser.COURSE:  # each its command's first example, which runs (below)
        comment, line = parser.EXAMPLES[command][0]
        assert f"  # {comment}\n  {line}\n" in examples
    assert examples.rstrip().endswith("kfcompile COMMAND --help")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The files the examples name: a spec job.yaml of a job demo, golden.yaml (its output),
    manifests, a directory to sync, the examples, a release's CRD."""
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name in ("minimal", "kueue-queued"):
        shutil.copy(ROOT / "golden" / name / "pytorchjob-v1.yaml", manifests / f"{name}.yaml")
    shutil.copy(manifests / "minimal.yaml", tmp_path / "pytorchjob.yaml")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('train')\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-cluster"))
    code, out = run(["render", "job.yaml"])
    assert code == 0
    (tmp_path / "golden.yaml").write_text(out, encoding="utf-8")
    return tmp_path


@contextlib.contextmanager
def cluster_for(command: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The local API server, with demo submitted and settled, when the command needs it."""
    from fakekube.cluster import LocalCluster

    with LocalCluster(
        schema_check.require_shared(), scenario=SCENARIO.get(command, "succeeds")
    ) as local:
        monkeypatch.setenv("KUBECONFIG", str(local.kubeconfig))
        if command != "submit":
            until = "running" if command in SCENARIO else "done"
            code, out = run(["submit", "job.yaml", "--wait", until])
            assert code == 0, out
        for before in [BEFORE.get(command)] if command in BEFORE else []:
            code, out = run(before)
            assert code == 0, out
        yield


def run_example(line: str, env: dict[str, str]) -> tuple[int, str]:
    """An example as written: in this process when it is plain, else through a shell (a
    `| kubectl apply -f -` at its end is left out: its input is checked to be objects)."""
    applied = line.endswith(" | kubectl apply -f -")
    line = line.removesuffix(" | kubectl apply -f -")
    argv = kfcompile_argv(line)
    if argv is not None:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        printed, said = out.getvalue(), err.getvalue()
    else:
        done = subprocess.run(
            ["bash", "-c", line], env=env, capture_output=True, text=True, timeout=120,
            check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        code, printed, said = done.returncode, done.stdout, done.stderr
    if applied:  # what kubectl would read: objects
        assert all(d["apiVersion"] and d["kind"] for d in yaml.safe_load_all(printed)), printed
    return code, printed + said


@pytest.mark.parametrize("command", parser.COMMANDS)
def test_every_example_runs(command: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [line for _, line in parser.EXAMPLES[command]]
    if any("--crd trainjobs-v2.3.0.yaml" in line for line in lines):
        shared = schema_check.require_shared()
        shutil.copy(shared / "crds" / "trainjobs-v2.3.0.yaml", workdir)
    cluster = command in cluster_commands() or any("--cluster" in line for line in lines)
    with cluster_for(command, monkeypatch) if cluster else contextlib.nullcontext():
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        for line in lines:
            code, out = run_example(line, env)
            assert code == 0, f"{line}\n{out}"


# --- explain FIELD --------------------------------------------------------------------------------


def every_field() -> Iterator[str]:
    def walk(cls: type, prefix: str) -> Iterator[str]:
        for a in attrs.fields(cls):
            yield prefix + a.name
            for t in (a.type, *getattr(a.type, "__args__", ())):
                if isinstance(t, type) and attrs.has(t):
                    yield from walk(t, f"{prefix}{a.name}.")

    hints = attrs.resolve_types(model.JobSpec)
    yield from walk(hints, "")


@pytest.mark.parametrize("field", list(every_field()))
def test_explain_knows_every_spec_field(field: str) -> None:
    doc = describe(field)
    assert doc.path == field and doc.type and set(doc.lands) == set(TARGETS)


def test_every_rule_of_a_spec_field_is_said_in_words() -> None:
    used = set()
    for cls in (model.JobSpec, model.Launcher, model.RuntimeRef, model.InitializerSource,
                model.ElasticPolicy, model.SchedulingPolicy, model.WorkDir):  # fmt: skip
        used |= {a.metadata["rule"].__name__ for a in attrs.fields(cls) if "rule" in a.metadata}
    assert used - set(RULES) == set()


@pytest.mark.parametrize(("field", "definition"), list(KUBERNETES_SHAPED.items()))
def test_the_kubernetes_shaped_fields_are_checked_as_that_object(
    field: str, definition: str
) -> None:
    """What explain says a field holds is what the spec's rules check it against: a key of the
    object's is accepted, one it lacks is not (with the object's keys for a hint)."""
    from kfcompile import SpecError
    from kfcompile.spec import k8s_schema

    a = attrs.fields_dict(model.JobSpec)[field]
    listed = str(a.type).startswith("tuple")
    bogus = {"claimNameX": 1}
    with pytest.raises(SpecError, match=f"{field}.*claimNameX: unknown field"):
        model.JobSpec(name="a", image="b", **{field: [bogus] if listed else bogus})
    assert k8s_schema.properties(definition)


def test_explain_field_prints_type_default_rules_and_every_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "num_nodes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("FIELD:    num_nodes <int>\nDEFAULT:  1\n")
    assert "    - a whole number of at least 1\n" in out
    for name, target in TARGETS.items():
        [path] = [r.paths for r in target.fields if r.source == "num_nodes"]
        shown = path[0] if path else "(no place of its own)"
        assert f"    {name:<13}  {shown}\n" in out


def test_explain_a_field_inside_a_kubernetes_object(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "volumes.persistentVolumeClaim", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["type"] == "PersistentVolumeClaimVolumeSource"
    assert [f[:3] for f in doc["fields"]] == [
        ["claimName", "string", "required"], ["readOnly", "boolean", ""],
    ]  # fmt: skip
    assert doc["lands"]["trainjob/v2.1"] == [
        "spec.podTemplateOverrides[0].spec.volumes[*].persistentVolumeClaim"
    ]


def test_explain_an_override_key_says_which_targets_take_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "pod_spec_overrides.hostIPC", "-o", "json"]) == 0
    lands = json.loads(capsys.readouterr().out)["lands"]
    assert lands["pytorchjob/v1"] == ["spec.pytorchReplicaSpecs.*.template.spec.hostIPC"]
    assert [n for n, p in lands.items() if p is None] == [
        n for n in TARGETS if n != "pytorchjob/v1"
    ]


def test_explain_a_field_for_one_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "launcher", "-t", "trainjob/v2.0"]) == 0
    out = capsys.readouterr().out
    assert "    trainjob/v2.0  spec.trainer.command\n" in out and "pytorchjob/v1" not in out
    assert "    kind <torchrun | python>  required\n" in out


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("lanucher", "a spec has no field 'lanucher' (did you mean 'launcher'?)"),
        ("volumes.persistentVolumeClam", "(did you mean 'persistentVolumeClaim'?)"),
        ("num_nodes.x", "num_nodes has no fields (it is int)"),
    ],
)
def test_explain_an_unknown_field_is_a_usage_error_with_a_hint(
    asked: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", asked]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kfcompile: explain {asked}: no such file, and ") and said in err
    with pytest.raises(UnknownField):
        describe(asked)


def test_explain_a_file_still_shows_where_its_values_land(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path that exists is a file, even one named like a field; a missing *.yaml is a
    missing file, not an unknown field."""
    monkeypatch.chdir(tmp_path)
    Path("launcher").write_text(yaml.safe_dump(SPEC), encoding="utf-8")
    assert main(["explain", "launcher"]) == 0
    assert capsys.readouterr().out.startswith("name ")
    assert main(["explain", "missing.yaml"]) == 2
    assert "no field" not in capsys.readouterr().err


# --- validate --target all, render --out ---------------------------------------------------------


def test_validate_target_all_gives_a_verdict_per_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "active_deadline_seconds": 60}), encoding="utf-8")
    assert main(["validate", str(spec), "--target", "all"]) == 1
    out, err = capsys.readouterr()
    can = ["pytorchjob/v1", "trainjob/v2.2", "trainjob/v2.3"]
    assert out.splitlines() == [f"{spec}: valid for {n}" for n in can]
    assert err.splitlines() == [
        f"{spec} ({n}): active_deadline_seconds: not supported by {n} (supported by: "
        f"{', '.join(can)})"
        for n in ("trainjob/v2.0", "trainjob/v2.1")
    ]


def test_validate_target_all_reports_a_malformed_spec_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({**SPEC, "num_nodes": 0}), encoding="utf-8")
    assert main(["validate", str(spec), "--target", "all"]) == 1
    assert capsys.readouterr().err.splitlines() == [f"{spec}: num_nodes: must be at least 1"]


@pytest.mark.parametrize("flag", [["--cluster"], ["--crd", "crd.yaml"]])
def test_validate_target_all_against_one_crd_is_a_usage_error(
    flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "examples/minimal.yaml", "--target", "all", *flag]) == 2
    assert "give that release's --target" in capsys.readouterr().err


def test_render_out_says_where_the_reasons_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "out"
    example = str(ROOT / "examples" / "elastic-pytorchjob.yaml")
    assert main(["render", example, "--target", "all", "--out", str(out_dir)]) == 0
    out = capsys.readouterr().out
    listed = out.split("a line per spec field the target cannot express:\n", 1)[1].split()
    written = sorted(str(p) for p in out_dir.rglob("*.err"))
    assert sorted(listed) == written and len(written) == len(TARGETS) - 1

"""YAML input is bounded in size, nesting and aliases before anything is built from it, and a
file that is not UTF-8 text is a malformed file: each such input is one line and exit status 1.

Every YAML entry point goes through ``yamlio.parse``/``yamlio.load_all`` (specs, manifests for
``import``/``convert``, CRD files for ``validate --crd``), so each is driven here at least once.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kfcompile import SpecError, load_spec, render
from kfcompile.cli import main
from kfcompile.spec import yamlio
from kfcompile.spec.yamlio import MAX_ALIAS_NODES, MAX_ALIASES, MAX_CHARS, MAX_DEPTH

ROOT = Path(__file__).resolve().parents[1]
CRDS = Path("/work/shared/crds")
HEAD = "name: hello\nimage: img:1\ncommand: [python, train.py]\n"
TRACEBACK = "Traceback (most recent call last)"
WHERE = re.compile(r"line \d+, column \d+")
EXPANDS = f"aliases expand to more than {MAX_ALIAS_NODES:,} extra nodes"


def bomb(indent: str) -> str:
    """The "billion laughs" as block-mapping lines: nine levels of nine aliases, 9**9 strings."""
    lines = [f"{indent}a: &a [{','.join(['lol'] * 9)}]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{indent}{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def nested(levels: int) -> str:
    """A flow mapping ``levels`` deep: ``{a: {a: 1}}`` is 2."""
    return "{a: " * levels + "1" + "}" * levels


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def only_problem(text: str) -> tuple[str, str]:
    with pytest.raises(SpecError) as info:
        yamlio.load_all(text)
    [problem] = info.value.problems
    return problem.path, problem.message


# --- alias bombs, in every free-form field -------------------------------------------------

BOMBED_SPECS = {
    "affinity": HEAD + "affinity:\n" + bomb("  "),
    "pod_spec_overrides": HEAD + "pod_spec_overrides:\n  affinity:\n" + bomb("    "),
    "env_list.valueFrom": HEAD + "env_list:\n  - name: X\n    valueFrom:\n" + bomb("      "),
}


@pytest.mark.parametrize("field", list(BOMBED_SPECS))
def test_alias_bomb_in_a_spec_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, field: str
) -> None:
    text = BOMBED_SPECS[field]
    assert len(text.encode()) < 700  # the bomb is 601 bytes
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "render", str(spec_file))
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    prefix, where, message = line.split(": ", 2)
    assert prefix == str(spec_file) and WHERE.fullmatch(where) and message == EXPANDS


def test_alias_bomb_in_a_manifest_status_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = render(load_spec(HEAD), "pytorchjob/v1")
    manifest = tmp_path / "job.k8s.yaml"
    manifest.write_text(yamlio.dump_all(job) + "status:\n" + bomb("  "), encoding="utf-8")
    for argv in (["import", str(manifest)], ["convert", str(manifest), "--to", "trainjob/v2.3"]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (1, "")
        [line] = err.splitlines()
        assert line.startswith(f"{manifest}: line ") and line.endswith(EXPANDS)


def test_alias_bomb_in_a_crd_file_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    crd = tmp_path / "crd.yaml"
    crd.write_text("kind: CustomResourceDefinition\nspec:\n" + bomb("  "), encoding="utf-8")
    code, _, err = run(
        capsys, "validate", str(ROOT / "examples" / "minimal.yaml"), "--crd", str(crd)
    )
    assert code == 1
    [line] = err.splitlines()
    assert line.startswith(f"{crd}: line ") and line.endswith(EXPANDS)


def test_aliases_may_add_exactly_the_limit() -> None:
    """The bound is on nodes aliases add: each alias of a k-node anchor adds k - 1."""
    written = 1000
    copies, rest = divmod(MAX_ALIAS_NODES, written)
    text = (
        f"x: &x [{', '.join(['1'] * written)}]\n"  # 1,001 nodes: each alias adds 1,000
        f"r: &r [{', '.join(['1'] * rest)}]\n"
        f"y: [{', '.join(['*x'] * copies)}, *r]\n"
    )
    [doc] = yamlio.load_all(text)
    assert len(doc["y"]) == copies + 1
    where, message = only_problem(text + "w: &w [1]\nz: *w\n")
    assert (where, message) == ("line 5, column 4", EXPANDS)


def test_many_aliases_are_bounded_even_when_each_is_small() -> None:
    def text(count: int) -> str:
        return f"s: &s 1\nl: [{', '.join(['*s'] * count)}]\n"

    assert yamlio.parse(text(MAX_ALIASES))["l"] == [1] * MAX_ALIASES
    over = text(MAX_ALIASES + 1)
    column = over.splitlines()[1].rindex("*s") + 1
    assert only_problem(over) == (f"line 2, column {column}", f"more than {MAX_ALIASES:,} aliases")


@pytest.mark.parametrize(
    "text, column",
    [("affinity: &a {x: *a}\n", 18), ("affinity: {l: &l [1, [*l]]}\n", 23)],
    ids=["mapping", "sequence"],
)
def test_recursive_alias_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, column: int
) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(HEAD + text, encoding="utf-8")
    code, _, err = run(capsys, "render", str(spec_file))
    assert code == 1
    name = text.split("&")[1][0]
    assert err.splitlines() == [
        f"{spec_file}: line 4, column {column}: recursive alias: *{name} is inside the node it "
        "names"
    ]


def test_an_alias_after_its_anchor_closed_is_no_recursion() -> None:
    doc = yamlio.parse("a: &a [1, 2]\nb: [*a, [*a]]\n")
    assert doc["b"] == [[1, 2], [[1, 2]]]


def test_anchors_belong_to_their_document() -> None:
    """An alias cannot name an anchor of an earlier document: the size of that one is forgotten,
    and the composer reports the undefined alias."""
    first = f"x: &x [{', '.join(['1'] * 1000)}]\n"  # each alias of it would add 1,000 nodes
    second = f"z: [{', '.join(['*x'] * (MAX_ALIAS_NODES // 1000 + 1))}]\n"
    where, message = only_problem(first + "---\n" + second)
    assert where == "line 3, column 5" and "undefined alias" in message


# --- nesting ------------------------------------------------------------------------------------


def test_nesting_up_to_the_limit_loads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """At the limit a document still loads: a manifest whose status nests that deep imports and
    converts (status is dropped), and a spec nesting that deep inside a Kubernetes object gets
    the one schema line any misshapen object gets."""
    job = render(load_spec(HEAD), "pytorchjob/v1")
    manifest = tmp_path / "job.k8s.yaml"
    status = f"status: {nested(MAX_DEPTH - 1)}\n"  # the document's root is the first level
    manifest.write_text(yamlio.dump_all(job) + status, encoding="utf-8")
    for argv in (["import", str(manifest)], ["convert", str(manifest), "--to", "trainjob/v2.3"]):
        code, out, err = run(capsys, *argv)
        assert code == 0 and err == f"{manifest}: detected PyTorchJob kubeflow.org/v1\n", argv
        assert list(yaml.safe_load_all(out))
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(HEAD + f"affinity: {nested(MAX_DEPTH - 1)}\n", encoding="utf-8")
    code, out, err = run(capsys, "render", str(spec_file))
    assert (code, out) == (1, "")
    known = "Affinity has nodeAffinity, podAffinity, podAntiAffinity"
    assert err == f"{spec_file}: affinity.a: unknown field ({known})\n"


@pytest.mark.parametrize("levels", [MAX_DEPTH, 500])
def test_deeper_nesting_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, levels: int
) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(HEAD + f"affinity: {nested(levels)}\n", encoding="utf-8")
    code, _, err = run(capsys, "render", str(spec_file))
    assert code == 1
    column = len("affinity: ") + len("{a: ") * (MAX_DEPTH - 1) + 1  # the brace at level 101
    assert err.splitlines() == [
        f"{spec_file}: line 4, column {column}: nested more than {MAX_DEPTH} levels deep"
    ]


def test_30000_levels_do_not_reach_the_c_parser(tmp_path: Path) -> None:
    """A real process: this used to overflow the C stack of ruamel's composer (SIGSEGV)."""
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(HEAD + "affinity: " + "[" * 30000 + "]" * 30000 + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "kfcompile", "render", str(spec_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, "")
    column = len("affinity: ") + MAX_DEPTH
    assert done.stderr.splitlines() == [
        f"{spec_file}: line 4, column {column}: nested more than {MAX_DEPTH} levels deep"
    ]


# --- size ---------------------------------------------------------------------------------------


def test_text_over_the_size_limit_is_refused_before_parsing() -> None:
    text = HEAD + "script: |\n  " + "x" * (MAX_CHARS - len(HEAD) - 12) + "\n"
    assert len(text) == MAX_CHARS + 1
    with pytest.raises(SpecError) as info:
        load_spec(text)
    assert [str(p) for p in info.value.problems] == [
        f"{MAX_CHARS + 1:,} characters of YAML: more than the {MAX_CHARS:,} accepted"
    ]


@pytest.mark.skipif(not CRDS.is_dir(), reason="needs the CRD files of /work/shared/crds")
def test_the_largest_crd_files_are_within_the_limits() -> None:
    largest = sorted(CRDS.glob("*.yaml"), key=lambda p: p.stat().st_size)[-2:]
    for path in largest:
        docs = yamlio.load_all(path.read_text(encoding="utf-8"))
        assert docs[0]["kind"] == "CustomResourceDefinition"


# --- encoding -----------------------------------------------------------------------------------

BINARY = b"name: h\xff\xfeimage: x\n"
NOT_UTF8 = "not UTF-8 text: invalid start byte 0xff at byte 7"


@pytest.mark.parametrize("command", ["render", "validate", "explain"])
def test_binary_spec_is_a_malformed_spec(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_bytes(BINARY)
    code, out, err = run(capsys, command, str(spec_file))
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{spec_file}: {NOT_UTF8}"]


def test_binary_spec_on_stdin_is_a_malformed_spec(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BINARY), encoding="ascii"))
    code, out, err = run(capsys, "render", "-")
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"-: {NOT_UTF8}"]


def test_binary_crd_file_is_a_malformed_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    crd = tmp_path / "crd.yaml"
    crd.write_bytes(BINARY)
    code, _, err = run(
        capsys, "validate", str(ROOT / "examples" / "minimal.yaml"), "--crd", str(crd)
    )
    assert code == 1
    assert err.splitlines() == [f"{crd}: {NOT_UTF8}"]


def test_unreadable_spec_stays_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "render", str(tmp_path / "missing.yaml"))
    assert code == 2 and TRACEBACK not in err

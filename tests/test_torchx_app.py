"""The pure parts of the TorchX scheduler (``kfcompile.integrations.torchx_app``): how a shell
line splits, what a torchrun line asks for, how names are made. No torchx needed; the scheduler
itself, through the real torchx, is ``test_torchx.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from imported import imported_after

from kfcompile.integrations.torchx_app import job_name
from kfcompile.integrations.torchx_torchrun import (
    Word,
    shell_words,
    torchrun_line,
    torchrun_words,
)

ROOT = Path(__file__).resolve().parents[1]

# dist.ddp's line (torchx 0.7.0 and the nightlies) after torchx's macro substitution.
DDP_LINE = (
    "torchrun --rdzv_backend c10d --rdzv_endpoint ${RANK0:=localhost}:29500 --rdzv_id "
    "'team-a:train-abc123' --nnodes 2 --nproc_per_node 8 --tee 3 --role '' train.py "
    "--lr 0.1 'two words' '$HOME'"
)


def words(*pairs: tuple[str, bool]) -> list[Word]:
    return [Word(text, literal) for text, literal in pairs]


def test_shell_words_split_as_bash_and_say_what_a_shell_would_expand() -> None:
    got = shell_words(DDP_LINE)
    assert got is not None
    assert [w.text for w in got] == [
        "torchrun", "--rdzv_backend", "c10d", "--rdzv_endpoint", "${RANK0:=localhost}:29500",
        "--rdzv_id", "team-a:train-abc123", "--nnodes", "2", "--nproc_per_node", "8",
        "--tee", "3", "--role", "", "train.py", "--lr", "0.1", "two words", "$HOME",
    ]  # fmt: skip
    # Only the unquoted expansion needs a shell; quoted text means itself.
    assert [w.text for w in got if not w.literal] == ["${RANK0:=localhost}:29500"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('a "b $X" c', words(("a", True), ("b $X", False), ("c", True))),
        ('a "b \\$X"', words(("a", True), ("b $X", True))),
        ("a\\ b 'c'd", words(("a b", True), ("cd", True))),
        ("a *.py ~/x b=~", words(("a", True), ("*.py", False), ("~/x", False), ("b=~", True))),
        ("a {x,y} `id`", words(("a", True), ("{x,y}", False), ("`id`", False))),
        ("a ''", words(("a", True), ("", True))),
        ("a\\\nb", words(("ab", True))),
    ],
)
def test_shell_words_cases(line: str, expected: list[Word]) -> None:
    assert shell_words(line) == expected


@pytest.mark.parametrize(
    "line", ["a && b", "a | b", "a; b", "a > f", "(a)", "a 'open", 'a "open', "a # note"]
)
def test_more_than_one_simple_command_is_not_split(line: str) -> None:
    assert shell_words(line) is None


@pytest.mark.parametrize(
    ("entrypoint", "args", "rest"),
    [
        ("bash", ["-c", "torchrun --nnodes 2 t.py"], ["--nnodes", "2", "t.py"]),
        ("/bin/sh", ["-c", "/usr/bin/torchrun t.py"], ["t.py"]),
        ("torchrun", ["--nnodes", "2", "t.py", "$X"], ["--nnodes", "2", "t.py", "$X"]),
        ("python3", ["-m", "torch.distributed.run", "t.py"], ["t.py"]),
        ("bash", ["-c", "pip install x && torchrun t.py"], None),
        ("bash", ["-c", "torchrun t.py", "arg0"], None),  # $0 given: a script, not a line
        ("bash", ["-c", "$TORCHRUN t.py"], None),
        ("python", ["train.py"], None),
    ],
)
def test_torchrun_words_find_torchrun_however_it_is_started(
    entrypoint: str, args: list[str], rest: list[str] | None
) -> None:
    found = torchrun_words(entrypoint, args)
    assert (None if found is None else [w.text for w in found]) == rest
    if entrypoint == "torchrun":  # no shell: `$X` means itself
        assert found is not None and all(w.literal for w in found)


def test_the_ddp_line_asks_for_nodes_processes_and_a_script() -> None:
    found = torchrun_words("bash", ["-c", DDP_LINE])
    assert found is not None
    line, problems = torchrun_line(found, "roles[0].args")
    assert problems == [] and line is not None
    assert (line.nnodes, line.nproc_per_node, line.max_restarts) == ("2", "8", None)
    assert [w.text for w in line.program] == ["train.py", "--lr", "0.1", "two words", "$HOME"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--log_dir /tmp t.py", "torchrun --log_dir: kfcompile's torchrun launcher cannot pass it"),
        ("--redirects 3 t.py", "torchrun --redirects: kfcompile's torchrun launcher cannot pass"),
        ("--nnodes", "torchrun --nnodes: needs a value"),
        ("--nnodes 2", "torchrun: no script to run"),
        ("--nproc_per_node $N t.py", "torchrun --nproc_per_node $N: needs a shell to expand"),
        ("t.py $HOME", "'$HOME': needs a shell to expand"),
    ],
)
def test_what_the_launcher_cannot_carry_is_named(line: str, message: str) -> None:
    found = torchrun_words("bash", ["-c", f"torchrun {line}"])
    assert found is not None
    result, problems = torchrun_line(found, "roles[0].args")
    assert result is None
    assert any(p.path == "roles[0].args" and p.message.startswith(message) for p in problems), (
        problems
    )


@pytest.mark.parametrize("flag", ["-m", "--module"])
def test_a_module_is_the_program_after_the_module_flag(flag: str) -> None:
    found = torchrun_words("torchrun", ["--nnodes", "2", flag, "pkg.train", "--lr", "1"])
    assert found is not None
    line, problems = torchrun_line(found, "at")
    assert problems == [] and line is not None and line.module
    assert [w.text for w in line.program] == ["pkg.train", "--lr", "1"]


@pytest.mark.parametrize("flag", ["--no-python", "--no_python"])
def test_no_python_is_the_launchers_no_python(flag: str) -> None:
    found = torchrun_words("torchrun", ["--nnodes", "2", flag, "run.sh", "-x"])
    assert found is not None
    line, problems = torchrun_line(found, "at")
    assert problems == [] and line is not None and line.no_python and not line.module
    assert [w.text for w in line.program] == ["run.sh", "-x"]


def test_option_spellings_and_the_end_of_options() -> None:
    found = torchrun_words(
        "torchrun",
        ["--nproc-per-node=4", "--nnodes=1:3", "--max_restarts", "2", "-t", "3", "--", "-x.py"],
    )
    assert found is not None
    line, problems = torchrun_line(found, "at")
    assert problems == [] and line is not None
    assert (line.nnodes, line.nproc_per_node, line.max_restarts) == ("1:3", "4", "2")
    assert [w.text for w in line.program] == ["-x.py"]


@pytest.mark.parametrize(
    ("app", "limit", "name"),
    [
        ("train", 47, "train-abc123"),
        ("My_Model.v2", 47, "my-model-v2-abc123"),
        ("3d-unet", 47, "d-unet-abc123"),
        ("???", 47, "torchx-abc123"),
        ("a" * 80, 20, "a" * 13 + "-abc123"),
        ("ab-cd", 10, "ab-abc123"),  # never ends a part with '-'
    ],
)
def test_job_names_are_dns_labels_within_the_limit(app: str, limit: int, name: str) -> None:
    got = job_name(app, limit, "abc123")
    assert got == name and len(got) <= limit


def test_importing_kfcompile_or_rendering_never_imports_a_launcher() -> None:
    """torchx and nemo_run register entry points kfcompile's own start must never load."""
    code = (
        "import kfcompile, kfcompile.cli as c; c.main(['render', 'examples/minimal.yaml'])\n"
        "kfcompile.render(kfcompile.load_spec(open('examples/minimal.yaml').read()))"
    )
    found, done = imported_after(code, {"torchx", "nemo_run"}, ROOT)
    assert found == [] and "kind: TrainJob" in done.stdout

"""The pure parts of the TorchX scheduler (``kfcompile.integrations.torchx_app``): how a shell
line splits, what a torchrun line asks for, how names are made, and the AppDef table both ways
(that one with torchx, in CI's launcher environment). The scheduler itself, through the real
torchx, is ``test_torchx.py``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from imported import imported_after

from kfcompile.integrations.torchx_app import ROWS, Options, job_name, to_role, to_spec
from kfcompile.spec.torchrun_line import (
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


# --- the AppDef table, both ways ------------------------------------------------------------------

TORCHRUN = "torchrun"
# For each row the Role has room for: Role values (attribute paths) that a job keeps, and what
# the spec holds for them, stated here independently of the table. Taken forward (``to_spec``)
# and back (``to_role``) each value returns unchanged, so a row right one way and wrong the
# other fails.
ROUND_TRIPS: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {
    "roles[0].image": [({"image": "ghcr.io/team/train:1"}, {"image": "ghcr.io/team/train:1"})],
    "roles[0].entrypoint": [
        ({"entrypoint": "/bin/echo"}, {"command": ("/bin/echo",)}),
        ({"entrypoint": "$SHELL"}, {"command": ("$$SHELL",)}),
    ],
    "roles[0].args": [
        ({"args": ["t.py", "--out", "$HOME"]}, {"args": ("t.py", "--out", "$$HOME")}),
        (
            {"entrypoint": TORCHRUN, "args": ["--nnodes", "2", "--nproc_per_node", "4", "t.py"]},
            {"nprocs_per_node": 4, "launcher.entrypoint": "t.py", "launcher.args": ()},
        ),
        (
            {
                "entrypoint": TORCHRUN,
                "args": ["--nnodes", "2", "--nproc_per_node", "auto", "-m", "pkg.train", "$X"],
            },
            {"nprocs_per_node": "auto", "launcher.module": "pkg.train", "launcher.args": ("$$X",)},
        ),
        (
            {
                "entrypoint": TORCHRUN,
                "args": ["--nnodes", "2", "--nproc_per_node", "1", "--no-python", "run.sh"],
            },
            {"launcher.no_python": True, "launcher.entrypoint": "run.sh"},
        ),
    ],
    "roles[0].num_replicas": [({"num_replicas": 3}, {"num_nodes": 3, "elastic": None})],
    "roles[0].min_replicas": [
        ({"num_replicas": 4, "min_replicas": 1}, {"elastic.min_nodes": 1, "elastic.max_nodes": 4}),
        (
            {
                "num_replicas": 4,
                "min_replicas": 2,
                "entrypoint": TORCHRUN,
                "args": ["--nnodes", "2:4", "--nproc_per_node", "1", "--max_restarts", "3", "t"],
            },
            {"elastic.min_nodes": 2, "elastic.max_nodes": 4, "elastic.max_restarts": 3},
        ),
    ],
    "roles[0].env": [({"env": {"MODE": "$fast", "A": "b"}}, {"env": {"MODE": "$$fast", "A": "b"}})],
    "roles[0].max_retries": [
        ({"max_retries": 3}, {"backoff_limit": 3}),
        ({"max_retries": 0}, {"backoff_limit": None}),
    ],
    "roles[0].resource.cpu": [
        ({"resource.cpu": 0.5}, {"cpu_request": "500m", "cpu_limit": "500m"}),
        ({"resource.cpu": 8.0}, {"cpu_request": "8", "cpu_limit": "8"}),
        ({"resource.cpu": -1}, {"cpu_request": None, "cpu_limit": None}),
    ],
    "roles[0].resource.memMB": [
        ({"resource.memMB": 2048}, {"memory_request": "2048Mi", "memory_limit": "2048Mi"}),
        ({"resource.memMB": -1}, {"memory_request": None}),
    ],
    "roles[0].resource.gpu": [
        ({"resource.gpu": 4}, {"gpus_per_node": 4}),
        ({"resource.gpu": 0}, {"gpus_per_node": 0}),
    ],
    "roles[0].resource.devices": [
        (
            {"resource.devices": {"vpc.amazonaws.com/efa": 2}},
            {
                "extra_resource_requests": {"vpc.amazonaws.com/efa": "2"},
                "extra_resource_limits": {"vpc.amazonaws.com/efa": "2"},
            },
        )
    ],
    "roles[0].resource.capabilities": [
        ({"resource.capabilities": {"zone": "a"}}, {"node_selector": {"zone": "a"}}),
    ],
}
# Run options, which a Role has no room for: forward only.
FORWARD_ONLY: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "-cfg namespace": ({"namespace": "team-a"}, {"namespace": "team-a"}),
    "-cfg queue": ({"queue": "q"}, {"queue": "q"}),
    "-cfg priority_class": ({"priority_class": "high"}, {"priority_class": "high"}),
    "-cfg service_account": ({"service_account": "sa"}, {"service_account_name": "sa"}),
    "-cfg runtime": ({"runtime": "rt"}, {"runtime_ref.name": "rt"}),
    "-cfg image_pull_secrets": ({"image_pull_secrets": ["a"]}, {"image_pull_secrets": ("a",)}),
    "-cfg shm_size": ({"shm_size": "16Gi"}, {"shm_size": "16Gi"}),
}


def _role(values: dict[str, Any]) -> Any:
    specs = pytest.importorskip(
        "torchx.specs", reason="torchx is not installed (CI's launcher env)"
    )
    resource = {"cpu": -1, "gpu": 0, "memMB": -1}
    resource |= {k.removeprefix("resource."): v for k, v in values.items() if "." in k}
    base = {"image": "img", "entrypoint": "python", "args": ["t.py"], "num_replicas": 2}
    base |= {k: v for k, v in values.items() if "." not in k}
    return specs.Role("train", resource=specs.Resource(**resource), **base)


def _at(obj: Any, path: str) -> Any:
    return functools.reduce(
        lambda o, name: None if o is None else getattr(o, name), path.split("."), obj
    )


def _spec(values: dict[str, Any], options: dict[str, Any] | None = None) -> Any:
    specs = pytest.importorskip(
        "torchx.specs", reason="torchx is not installed (CI's launcher env)"
    )
    return to_spec(
        specs.AppDef("app", roles=[_role(values)]), Options.of(options or {}), "app", "0"
    )


def test_every_row_is_tested_both_ways_or_forward() -> None:
    both = {row.appdef for row in ROWS if row.write is not None}
    forward = {row.appdef for row in ROWS if row.write is None and row.read is not None}
    assert set(ROUND_TRIPS) == both
    assert set(FORWARD_ONLY) == forward


@pytest.mark.parametrize(
    ("values", "expected"),
    [pytest.param(*case, id=row) for row, cases in ROUND_TRIPS.items() for case in cases],
)
def test_a_role_value_goes_to_the_spec_and_back_unchanged(
    values: dict[str, Any], expected: dict[str, Any]
) -> None:
    spec = _spec(values)
    assert {path: _at(spec, path) for path in expected} == expected
    back = to_role(spec, "train")
    assert {path: _at(back, path) for path in values} == values


@pytest.mark.parametrize(("options", "expected"), FORWARD_ONLY.values(), ids=list(FORWARD_ONLY))
def test_a_run_option_goes_to_its_spec_field(
    options: dict[str, Any], expected: dict[str, Any]
) -> None:
    spec = _spec({}, options)
    assert {path: _at(spec, path) for path in expected} == expected

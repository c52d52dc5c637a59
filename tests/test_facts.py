"""Each fact once (issue 17 §1): torchrun's options are one table (``kfcompile.spec.torchrun``) that
the PyTorchJob target renders from, the importer reads back through and the TorchX and NeMo-Run
mappings read their lines with; no other module spells an option. The table itself is checked
against torchrun's own parser. Each special case of the field table is one object that renders
and reads back. What kfcompile adds to a job (names, paths, the resources it
counts as GPUs) is spelled in ``additions.py`` only.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from schema_check import require_shared

from kfcompile import TARGETS, kinds, render
from kfcompile.importer import import_manifest, special
from kfcompile.spec import additions, torchrun
from kfcompile.spec.load import structure
from kfcompile.targets import fields, pytorchjob_v1, trainjob
from kfcompile.targets.special import MOUNTS, Special

SRC = Path(__file__).resolve().parents[1] / "src" / "kfcompile"

# torch/distributed/run.py ``get_args_parser`` (pytorch/pytorch main): each option's spellings,
# and whether it takes a value (``action=env`` with a type) or is a switch (``check_env``).
UPSTREAM: dict[tuple[str, ...], bool] = {
    ("--nnodes",): True,
    ("--nproc-per-node", "--nproc_per_node"): True,
    ("--rdzv-backend", "--rdzv_backend"): True,
    ("--rdzv-endpoint", "--rdzv_endpoint"): True,
    ("--rdzv-id", "--rdzv_id"): True,
    ("--rdzv-conf", "--rdzv_conf"): True,
    ("--standalone",): False,
    ("--max-restarts", "--max_restarts"): True,
    ("--monitor-interval", "--monitor_interval"): True,
    ("--start-method", "--start_method"): True,
    ("--role",): True,
    ("-m", "--module"): False,
    ("--no-python", "--no_python"): False,
    ("--run-path", "--run_path"): False,
    ("--log-dir", "--log_dir"): True,
    ("-r", "--redirects"): True,
    ("-t", "--tee"): True,
    ("--node-rank", "--node_rank"): True,
    ("--master-addr", "--master_addr"): True,
    ("--master-port", "--master_port"): True,
    ("--local-addr", "--local_addr"): True,
}
SPELLINGS = {s: takes for names, takes in UPSTREAM.items() for s in names}


@pytest.mark.parametrize("option", torchrun.OPTIONS, ids=lambda o: o.name)
def test_each_row_is_torchruns_own(option: torchrun.Option) -> None:
    spellings = [option.flag, option.underscored, *([option.short] if option.short else [])]
    for word in spellings:
        assert SPELLINGS.get(word) == option.takes_value, word
        assert torchrun.option(word) == option
    assert (option.field is None) == bool(option.dropped)


def _lines() -> list[list[str]]:
    """The torchrun lines the PyTorchJob target renders: static and elastic, a file, a module and
    an executable."""
    base = {"name": "j", "image": "i", "num_nodes": 2}
    launchers = [
        {"kind": "torchrun", "entrypoint": "train.py"},
        {"kind": "torchrun", "module": "pkg.train"},
        {"kind": "torchrun", "entrypoint": "/bin/train", "no_python": True},
    ]
    elastic = {"elastic": {"min_nodes": 1, "max_nodes": 2, "max_restarts": 3}}
    lines = []
    for launcher in launchers:
        for extra in ({}, elastic):
            command = pytorchjob_v1.command(structure({**base, **extra, "launcher": launcher}))
            assert command is not None and command[0] == "torchrun"
            lines.append(command[1:])
    return lines


def test_render_writes_exactly_the_written_rows() -> None:
    seen = set()
    for words in _lines():
        for word in words:
            if not word.startswith("-"):
                break  # the program
            option = torchrun.option(word.partition("=")[0])
            assert option is not None and option.written, word
            seen.add(option)
            if option is torchrun.MODULE:
                break
    assert seen == {o for o in torchrun.OPTIONS if o.written}


# A string in the code that is (or begins) one of torchrun's long options: a spelling of it.
_OPTION_WORD = re.compile(r"--?([a-z][-_a-z]*)(=.*)?", re.S)
LONG = {s for s in SPELLINGS if s.startswith("--")}


def _option_words(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr) and node.values:
            node = node.values[0]  # an f-string's leading text
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _OPTION_WORD.fullmatch(node.value)
            if m and node.value.partition("=")[0] in LONG:
                found.append((node.lineno, node.value))
    return found


def test_no_module_but_the_table_spells_an_option() -> None:
    spelled = {
        f"{path.relative_to(SRC)}:{line}: {word}"
        for path in SRC.rglob("*.py")
        if path != SRC / "spec" / "torchrun.py"
        for line, word in _option_words(path)
    }
    assert not spelled


def test_each_option_names_the_variable_torchrun_reads_it_from() -> None:
    """The Kubeflow controllers set torchrun's options as the variables it reads them from: the
    ones the real Trainer's Torch plugin set in the pods recorded are each an option's ``env``,
    and those are what a TrainJob may not set."""
    pods = (require_shared() / "observed" / "trainer-v2.3.0").glob("*.json")
    seen = {m for path in pods for m in re.findall(r"PET_[A-Z_]+", path.read_text())}
    by_env = {o.env: o for o in torchrun.OPTIONS}
    assert seen and seen <= set(by_env)
    assert seen == trainjob.RESERVED_ENV


def test_no_module_but_the_table_spells_a_variable_torchrun_reads() -> None:
    """``PET_NNODES`` and the rest are ``Option.env``, spelled by no module (a NeMo-Run macro
    ``(PET_MASTER_ADDR)`` included)."""
    spelled = {
        f"{path.relative_to(SRC)}: {value}"
        for path in SRC.rglob("*.py")
        for value in _constants(path)
        if re.fullmatch(r"\(?PET_[A-Z_]+\)?", value)
    }
    assert not spelled


def _constants(path: Path) -> set[str]:
    """Every string constant of a module, an f-string's literal parts included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


# What kfcompile adds, by value, and the one module that states it.
ADDED = {
    "-env": "spec/additions.py",  # the Secret of secret_env
    "-script": "spec/additions.py",  # the ConfigMap of the inline script
    "dshm": "spec/additions.py",
    "/dev/shm": "spec/additions.py",
    "kfcompile-script": "spec/additions.py",
    "/opt/kfcompile/scripts": "spec/additions.py",
    "workdir": "spec/additions.py",
    "Memory": "spec/additions.py",  # the emptyDir medium of /dev/shm
    **{gpu: "spec/additions.py" for gpu in additions.GPU_RESOURCES},
    "torch-distributed": "spec/model.py",  # the default runtime
}
ALSO = {("torch-distributed", "targets/trainjob.py")}  # another fact: the upstream runtimes' jobs


def test_what_kfcompile_adds_is_stated_once() -> None:
    found = {
        (value, str(path.relative_to(SRC)))
        for path in SRC.rglob("*.py")
        for value in _constants(path) & set(ADDED)
    }
    assert found - ALSO == set(ADDED.items())


def test_the_job_kinds_managers_are_stated_once() -> None:
    """The controllers that may manage a job (``managed_by``) are its kind's row in ``kinds``;
    the TrainJob CRD's rule on them (``output.limits``) is built from the row (and checked
    against the CRD's text by ``test_output_limits``). ``kfcompile.testing`` is the fake
    cluster's own account of the API server, kept apart."""
    managers = {m for kind in (kinds.TRAINJOB, kinds.PYTORCHJOB) for m in kind.managers}
    controllers = managers - {kinds.MULTIKUEUE}  # Kueue's name is also its label prefix's
    found = {
        (value, str(path.relative_to(SRC)))
        for path in SRC.rglob("*.py")
        if path.parent.name != "testing"
        for value in _constants(path)
        if value in managers or any(m in value for m in controllers)
    }
    assert {where for _, where in found} == {"kinds.py"}, found


# --- the specials: one object each, both ways --------------------------------------------------


def test_the_importer_reads_each_special_through_its_own_read() -> None:
    readers = [step for step in special.ORDER if isinstance(step, Special)]
    assert len(readers) == len(set(readers))
    for s in fields.SPECIALS:
        assert (s in readers) == (s.read is not None), s.name
    assert [s for s in fields.SPECIALS if s.read is None] == [MOUNTS]  # read with VOLUMES


# A spec for each special (what its render writes and its read takes back), on every target.
BY_SPECIAL = {
    "program": {"launcher": {"kind": "torchrun", "module": "pkg.train", "args": ["--lr", "1"]}},
    "program (script)": {
        "launcher": {"kind": "torchrun", "entrypoint": "run.sh", "no_python": True},
        "script": "#!/bin/sh\necho hi\n",
    },
    "program (command)": {"command": ["bash", "-c"], "args": ["echo hi"]},
    "nprocs": {"launcher": {"kind": "torchrun", "entrypoint": "t.py"}, "nprocs_per_node": 3},
    "env": {
        "command": ["run"],
        "env": {"A": "1"},
        "env_list": [{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "secret_env": ["TOKEN"],
    },
    "gpus": {"command": ["run"], "gpus_per_node": 2, "gpu_resource": "amd.com/gpu"},
    "volumes": {"command": ["run"], "shm_size": "8Gi"},  # work_dir reads back as volumes
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", BY_SPECIAL)
def test_each_special_reads_back_what_it_renders(case: str, target: str) -> None:
    spec = structure({"name": "job", "image": "img", "num_nodes": 2, **BY_SPECIAL[case]})
    objects = render(spec, target)
    assert import_manifest(objects[-1], companions=objects[:-1]) == spec


def test_the_rule_that_reserves_what_kfcompile_adds_is_beside_it() -> None:
    spec = structure(
        {
            "name": "job",
            "image": "img",
            "launcher": {"kind": "torchrun"},
            "script": "print(1)\n",
            "shm_size": "1Gi",
            "work_dir": {"local": "code", "pvc": "claim", "mount_path": "/code"},
        }
    )
    made = spec.companions
    names = [c.volume for c in made] + [additions.TRAINER_TOKEN_VOLUME]  # and the Trainer's
    volumes = [(f"volumes[{i}]", {"name": name}) for i, name in enumerate(names)]
    assert [at for at, _ in additions.reserved_names(spec.name, made, volumes)] == [
        f"volumes[{i}].name" for i in range(len(names))
    ]
    mounted: dict[str, str] = {}
    assert not list(additions.reserved_mounts(made, mounted))
    trainer = additions.mount_point(additions.TRAINER_TOKEN_DIR)
    assert mounted == {
        trainer: additions.TRAINER_TOKEN.format("mount"),
        **{additions.mount_point(c.mount_path): c.field for c in made},
    }

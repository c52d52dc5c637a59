"""A PyTorchJob's torchrun line (issue 23 §5): ``import`` and ``convert`` read the line
``kubectl get -o yaml`` gives for most v1 jobs (``torchrun``, ``python -m torch.distributed.run``,
``bash -c "torchrun ..."`` with ``$(RANK)``, ``$(MASTER_ADDR)``, ``$(MASTER_PORT)``) as the spec's
torchrun launcher, dropping the rendezvous flags the target supplies; a TrainJob is never
written with variables only the Training Operator sets, even with ``allow_lossy``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kfcompile.importer import NotImportable, convert_manifest, import_manifest
from kfcompile.spec.torchrun_line import Word, shell_words, torchrun_words

PT = "pytorchjob/v1"
TRAINJOB = tuple(f"trainjob/v2.{i}" for i in range(4))
WHERE = "spec.pytorchReplicaSpecs.Master.template.spec.containers[name=pytorch].command"
Obj = dict[str, Any]


def job(command: list[str], args: list[str] | None = None, **spec: Any) -> Obj:
    """A Master and a Worker running ``command``; ``spec`` merged into the job's spec."""
    container: Obj = {"name": "pytorch", "image": "img:1", "command": command}
    if args is not None:
        container["args"] = args
    replica = {"replicas": 1, "template": {"spec": {"containers": [container]}}}
    out: Obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "ns"},
        "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": copy.deepcopy(replica)}},
    }
    out["spec"].update(spec)
    return out


RDZV = ["--node_rank=$(RANK)", "--master_addr=$(MASTER_ADDR)", "--master_port=$(MASTER_PORT)"]
PROGRAM = ["t.py", "--lr", "1"]
SHELL_RDZV = "--node_rank $(RANK) --master_addr $(MASTER_ADDR) --master_port $(MASTER_PORT)"
C10D = ["--rdzv_backend=c10d", "--rdzv_id=pt"]
MODULE = ["-m", "torch.distributed.run"]
LINES: dict[str, tuple[list[str], list[str] | None]] = {
    "torchrun": (["torchrun", "--nnodes=2", "--nproc_per_node=4", *RDZV, *PROGRAM], None),
    "command and args": (["torchrun"], ["--nnodes=2", "--nproc-per-node=4", *RDZV, *PROGRAM]),
    "module": (["python", *MODULE, "--nproc_per_node", "4", *RDZV, *PROGRAM], None),
    "python3 module": (["python3", *MODULE, "--nnodes", "2", "--nproc_per_node=4", *PROGRAM], None),
    "bash -c": (
        ["bash", "-c", f"torchrun --nnodes 2 --nproc_per_node 4 {SHELL_RDZV} t.py --lr 1"],
        None,
    ),
    "sh -c, shell variables": (
        [
            "sh",
            "-c",
            "torchrun --nnodes=$PET_NNODES --nproc_per_node=4 --node_rank=${RANK} "
            "--master_addr=$MASTER_ADDR --master_port=$MASTER_PORT t.py --lr 1",
        ],
        None,
    ),
    "c10d at the master": (
        [
            "torchrun",
            "--nnodes=$(WORLD_SIZE)",
            "--nproc_per_node=4",
            *C10D,
            "--rdzv_endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
            *PROGRAM,
        ],
        None,
    ),
    "c10d at the master's pod": (
        [
            "torchrun",
            "--nnodes=2",
            "--nproc_per_node=$(PET_NPROC_PER_NODE)",
            *C10D,
            "--rdzv_endpoint=pt-master-0:29400",
            "--standalone",
            *PROGRAM,
        ],
        None,
    ),
}


@pytest.mark.parametrize("form", LINES)
def test_a_torchrun_line_is_the_launcher_on_every_target(form: str) -> None:
    command, args = LINES[form]
    # WORLD_SIZE is the nodes when nprocPerNode is no number (absent: the operator's auto).
    restated = any(name in " ".join(command) for name in ("PET_NPROC_PER_NODE", "WORLD_SIZE"))
    manifest = job(command, args, **({} if restated else {"nprocPerNode": "4"}))
    spec = import_manifest(manifest)
    assert spec.launcher is not None
    assert (spec.launcher.kind, spec.launcher.entrypoint, spec.launcher.args) == (
        "torchrun",
        "t.py",
        ("--lr", "1"),
    )
    assert (spec.command, spec.args, spec.num_nodes) == ((), (), 2)
    assert spec.nprocs == ("auto" if "PET_NPROC_PER_NODE" in " ".join(command) else 4)
    assert convert_manifest(manifest, PT).losses == ()
    for t in TRAINJOB:
        converted = convert_manifest(manifest, t)  # without allow_lossy: nothing lost
        assert converted.losses == (), t
        trainer = converted.objects[-1]["spec"]["trainer"]
        assert trainer["command"] == ["torchrun", "t.py", "--lr", "1"], t
        assert "args" not in trainer


def test_a_module_and_kubernetes_words_are_carried_as_the_kubelet_reads_them() -> None:
    """``$$`` is the kubelet's ``$``; ``$(NAME)`` of a defined variable its value, in the
    launcher as on the line; a quoted ``$HOME`` means itself."""
    line = (
        "torchrun --nnodes=$(PET_NNODES) --nproc_per_node=2 --node_rank=$(RANK) "
        "--master_addr=$(MASTER_ADDR) --master_port=$(MASTER_PORT) -m pkg.train "
        "--out '$HOME/ckpt' --data $(DATA) --cost '$$5'"
    )
    manifest = job(["bash", "-c", line])
    container = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    for replica in manifest["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["env"] = [{"name": "DATA", "value": "/d"}]
    assert container["containers"][0]["env"]
    spec = import_manifest(manifest)
    assert spec.launcher is not None and spec.launcher.module == "pkg.train"
    assert spec.launcher.args == ("--out", "$$HOME/ckpt", "--data", "$(DATA)", "--cost", "$$5")
    assert spec.nprocs == 2


def test_a_flag_that_says_other_processes_than_the_job_is_what_runs() -> None:
    manifest = job(["torchrun", "--nnodes=2", "--nproc_per_node=2", *RDZV, "t.py"])
    manifest["spec"]["nprocPerNode"] = "8"
    converted = convert_manifest(manifest, TRAINJOB[-1], allow_lossy=True)
    assert converted.imported.spec.nprocs == 2
    assert [str(p) for p in converted.losses] == [
        "spec.nprocPerNode: torchrun runs 2 per node: written so"
    ]
    assert converted.objects[-1]["spec"]["trainer"]["numProcPerNode"] == 2


def test_an_elastic_line_restating_the_policy_is_the_launcher() -> None:
    command = [
        "torchrun", "--nnodes=1:3", "--nproc-per-node=2", "--rdzv-backend=$(PET_RDZV_BACKEND)",
        "--rdzv-endpoint=pt-worker-0:29400", "--rdzv-id=pt", "--max-restarts=5", "t.py",
    ]  # fmt: skip
    manifest = job(command, elasticPolicy={"minReplicas": 1, "maxReplicas": 3})
    del manifest["spec"]["pytorchReplicaSpecs"]["Master"]
    spec = import_manifest(manifest)
    assert spec.launcher is not None and spec.launcher.entrypoint == "t.py"
    assert spec.elastic is not None
    assert (spec.elastic.min_nodes, spec.elastic.max_nodes, spec.elastic.max_restarts) == (1, 3, 5)


CANNOT = {
    "an option torchrun's launcher cannot pass": (
        ["--nnodes=2", "--rdzv_conf=join_timeout=900", *RDZV, "t.py"],
        [f"{WHERE}: torchrun --rdzv_conf: kfcompile's torchrun launcher cannot pass it"],
    ),
    "other nodes than the replicas": (
        ["--nnodes=3", *RDZV, "t.py"],
        [f"{WHERE}: torchrun --nnodes 3: the job's nodes are 2"],
    ),
    "a rendezvous of its own": (
        ["--rdzv_backend=etcd", "--rdzv_endpoint=etcd:2379", *RDZV, "t.py"],
        [
            f"{WHERE}: torchrun --rdzv-backend etcd: not the rendezvous the operator sets up, "
            "which kfcompile's launcher uses",
            f"{WHERE}: torchrun --rdzv-endpoint etcd:2379: not the rendezvous the operator sets "
            "up, which kfcompile's launcher uses",
        ],
    ),
    "a module python cannot name": (
        ["--nnodes=2", *RDZV, "-m", "not a module!"],
        [
            f"{WHERE}: must be a Python module name: identifiers joined by '.' (e.g. pkg.train) "
            "(spec field launcher.module)"
        ],
    ),
    "restarts without an elastic policy": (
        ["--max_restarts=3", *RDZV, "t.py"],
        [
            f"{WHERE}: torchrun --max-restarts: kfcompile's launcher passes it to elastic jobs "
            "(elasticPolicy.maxRestarts) only"
        ],
    ),
}


@pytest.mark.parametrize("case", CANNOT)
def test_what_cannot_be_carried_keeps_the_line_and_refuses_a_trainjob(case: str) -> None:
    args, why = CANNOT[case]
    manifest = job(["torchrun"], args)
    spec = import_manifest(manifest)  # on its own kind nothing is lost: kept as written
    assert (spec.launcher, spec.command, spec.args) == (None, ("torchrun",), tuple(args))
    assert convert_manifest(manifest, PT).losses == ()
    for t in TRAINJOB:
        with pytest.raises(NotImportable) as raised:
            convert_manifest(manifest, t, allow_lossy=True)
        first, *rest = [str(p) for p in raised.value.problems]
        assert first == (
            f"{WHERE}: uses MASTER_ADDR, MASTER_PORT, RANK, which a TrainJob never sets, so the "
            f"job would fail (for {t}); kfcompile reads torchrun lines as its launcher without "
            "them, but not this one:"
        )
        assert rest == why


@pytest.mark.parametrize(
    "command",
    [
        ["bash", "-c", "cd /app && torchrun --node_rank=$(RANK) --master_addr=$(MASTER_ADDR) t.py"],
        ["python", "t.py", "--rank=$(RANK)", "--master=$(MASTER_ADDR)"],
    ],
    ids=["more than one command", "no torchrun"],
)
def test_a_program_naming_the_operators_variables_is_refused_for_a_trainjob(
    command: list[str],
) -> None:
    manifest = job(command)
    assert convert_manifest(manifest, PT).losses == ()
    for t in TRAINJOB:
        with pytest.raises(NotImportable) as raised:
            convert_manifest(manifest, t, allow_lossy=True)
        assert [str(p) for p in raised.value.problems] == [
            f"{WHERE}: uses MASTER_ADDR, RANK, which a TrainJob never sets, so the job would "
            f"fail (for {t}): a TrainJob's runtime sets PET_NNODES, PET_NODE_RANK, "
            "PET_MASTER_ADDR and PET_MASTER_PORT instead"
        ]


def test_shell_words_of_a_kubernetes_command_word() -> None:
    """The kubelet expands ``$(NAME)`` of a defined variable and ``$$`` before the shell; a
    literal word comes back as a Kubernetes word, a shell expansion as the shell's text."""
    got = shell_words("a $(RANK) '$$X' $$Y \"$(RANK):$(P)\" $(undefined_cmd)", {"RANK", "P"})
    assert got is None  # `$(undefined_cmd)` is left to the shell: a command substitution
    got = shell_words("a $(RANK) '$$X' $$Y \"$(RANK):$(P)\" c\ue000", {"RANK", "P"})
    assert got is None  # the line's own private-use characters would be taken for references
    got = shell_words("a $(RANK) '$$X' $$Y \"$(RANK):$(P)\"", {"RANK", "P"})
    assert got == [
        Word("a", True),
        Word("$(RANK)", True),
        Word("$$X", True),
        Word("$Y", False),
        Word("$(RANK):$(P)", True),
    ]
    assert shell_words("a $(RANK)") is None  # without Kubernetes: a command substitution
    assert torchrun_words("torchrun", ["$(RANK)", "$$X"], {"RANK"}) == [
        Word("$(RANK)", True),
        Word("$$X", True),
    ]

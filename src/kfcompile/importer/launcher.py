"""A PyTorchJob's torchrun line as the spec's torchrun ``launcher``.

``kubectl get -o yaml`` gives most Training Operator v1 jobs as a hand-written torchrun line
(``torchrun``, ``python -m torch.distributed.run`` or ``bash -c "torchrun ..."``) whose
rendezvous flags name what the operator sets: ``--node_rank=$(RANK)``, ``--master_addr=
$(MASTER_ADDR)``, ``--master_port=$(MASTER_PORT)``. Kept as written, such a line cannot go to a
TrainJob, which never sets those. Read through torchrun's option table
(``kfcompile.spec.torchrun_line``) it becomes the launcher: the nodes, processes per node and
restarts it asks for are checked against the job's replicas and policies, and every flag the
target supplies itself is dropped (the node rank, the master's address and port, the
rendezvous id, and a backend or endpoint that only restates the operator's). What cannot be
carried keeps the line as written, each reason one problem in ``Imported.kept_torchrun``:
``convert`` tells them when the line then cannot run on the target.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

import attrs

from kfcompile.importer.state import Reading, source_of
from kfcompile.kinds import PYTORCHJOB
from kfcompile.spec import torchrun
from kfcompile.spec.errors import Problem, SpecError, UnsupportedFeature
from kfcompile.spec.model import JobSpec
from kfcompile.spec.torchrun import Option
from kfcompile.spec.torchrun_line import Torchrun, Word, torchrun_line, torchrun_words
from kfcompile.targets import TARGETS, pytorchjob_v1

TORCHRUN_MODULE: Final = "torch.distributed.run"
# A value that is one variable: ``$(NAME)`` as the kubelet expands it (a word no shell reads),
# ``$NAME`` or ``${NAME}`` as a shell does.
_KUBE_REF: Final = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL_REF: Final = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# The operator's variable that says what each option says (training-operator envvar.go,
# master.go, elastic.go); WORLD_SIZE is the nodes only at one process per node (below).
RESTATED: Final = {
    o.name: o.env
    for o in (
        torchrun.NNODES,
        torchrun.NPROC_PER_NODE,
        torchrun.MAX_RESTARTS,
        torchrun.RDZV_BACKEND,
        torchrun.RDZV_ENDPOINT,
    )
}
# The rendezvous kfcompile's launcher gets from a PyTorchJob with a Master: torchrun's static
# one at MASTER_ADDR, which a c10d backend there only restates.
STATIC_BACKENDS: Final = ("static", "c10d")


def torchrun_launcher(r: Reading, spec: JobSpec) -> JobSpec:
    """``spec`` with a PyTorchJob's torchrun line read as its launcher, or as it is (the
    reasons in ``r.kept_torchrun``)."""
    words = _words(spec) if r.kind == PYTORCHJOB.name else None
    if not words:
        return spec
    defined = _defined(spec)
    found = torchrun_words(words[0], words[1:], defined)
    if found is None:
        return spec
    at = source_of(r.sources, "launcher" if spec.launcher else "command")
    line, problems = torchrun_line(found, at, _Supplied(spec, defined))
    if line is not None:
        problems = [Problem(at, m) for m in _uncarried(spec, line)]
    read = problems if line is None or problems else _read(r, spec, line, at)
    if isinstance(read, list):
        r.kept_torchrun = read
        return spec
    for gone in ("command", "args"):
        r.sources.pop(gone, None)
    r.sources["launcher"] = at
    return read


def _words(spec: JobSpec) -> list[str] | None:
    """The program as written: its command and args, or ``python -m torch.distributed.run``,
    which reads as a python launcher running that module."""
    launcher = spec.launcher
    if launcher is None:
        return [*spec.command, *spec.args]
    if launcher.kind == "python" and launcher.module == TORCHRUN_MODULE:
        return ["python", torchrun.MODULE.short, TORCHRUN_MODULE, *launcher.args]
    return None


def _defined(spec: JobSpec) -> frozenset[str]:
    """The variables the training container has: the spec's and the operator's."""
    own = {*spec.env, *(str(i.get("name")) for i in spec.env_list), *spec.secret_env}
    return frozenset(own) | pytorchjob_v1.operator_env(spec)


def _variable(value: Word, defined: frozenset[str]) -> str | None:
    """The variable a value is, if it is one the container defines."""
    m = (_KUBE_REF if value.literal else _SHELL_REF).fullmatch(value.text)
    name = None if m is None else next(g for g in m.groups() if g)
    return name if name in defined else None


@attrs.frozen(repr=False, eq=False)
class _Supplied:
    """Whether a flag's value is one the operator sets anyway (dropped, whatever it says)."""

    spec: JobSpec
    defined: frozenset[str]

    def __call__(self, option: Option, value: Word) -> bool:
        spec, elastic = self.spec, self.spec.elastic
        name = _variable(value, self.defined)
        if name is not None and name == RESTATED.get(option.name):
            return True
        if option == torchrun.NNODES:  # WORLD_SIZE = replicas x nprocPerNode (an int, else 1)
            return name == "WORLD_SIZE" and not (isinstance(spec.nprocs, int) and spec.nprocs > 1)
        if option == torchrun.RDZV_BACKEND and value.literal:
            return value.text in ((elastic.rdzv_backend,) if elastic else STATIC_BACKENDS)
        if option == torchrun.RDZV_ENDPOINT:
            host, colon, port = value.text.rpartition(":")
            host = host if colon else value.text
            if elastic is not None:  # the operator's Service in front of worker 0
                return value.literal and (host, port) == (
                    f"{spec.name}-worker-0",
                    str(elastic.rdzv_port),
                )
            hosted = Word(host, value.literal)
            return _variable(hosted, self.defined) == "MASTER_ADDR" or (
                value.literal and host == f"{spec.name}-master-0"
            )
        return False


def _uncarried(spec: JobSpec, line: Torchrun) -> Iterator[str]:
    """What the line asks for that kfcompile's launcher and the job's policies cannot say."""
    for option, value in line.dropped:
        if option in (torchrun.RDZV_BACKEND, torchrun.RDZV_ENDPOINT):
            yield (
                f"torchrun {option.flag} {value.text}: not the rendezvous the operator sets up, "
                "which kfcompile's launcher uses"
            )
    if line.nnodes is not None:
        nodes = re.fullmatch(r"(\d+)(?::(\d+))?", line.nnodes)
        span = None if nodes is None else (int(nodes[1]), int(nodes[2] or nodes[1]))
        e = spec.elastic
        wanted = (e.min_nodes, e.max_nodes) if e else (spec.num_nodes, spec.num_nodes)
        if span != wanted:
            says = f"{e.min_nodes}:{e.max_nodes} (elasticPolicy)" if e else str(spec.num_nodes)
            yield f"torchrun {torchrun.NNODES.flag} {line.nnodes}: the job's nodes are {says}"
    if line.max_restarts is not None:
        if spec.elastic is None:
            yield (
                f"torchrun {torchrun.MAX_RESTARTS.flag}: kfcompile's launcher passes it to "
                "elastic jobs (elasticPolicy.maxRestarts) only"
            )
        elif not line.max_restarts.isdigit():
            yield f"torchrun {torchrun.MAX_RESTARTS.flag} {line.max_restarts}: must be a number"
    if line.nproc_per_node is not None and _nprocs(spec, line.nproc_per_node) is None:
        yield (
            f"torchrun {torchrun.NPROC_PER_NODE.flag} {line.nproc_per_node}: must be a number, "
            "auto, or gpu with GPUs"
        )


def _nprocs(spec: JobSpec, value: str) -> int | str | None:
    if value.isdigit() and int(value) > 0:
        return int(value)
    if value == "auto":
        return value
    return spec.gpus_per_node if value == "gpu" and spec.gpus_per_node else None


def _read(r: Reading, spec: JobSpec, line: Torchrun, at: str) -> JobSpec | list[Problem]:
    """The spec with the launcher, the processes and restarts the line sets (what the flag
    says is what runs: a manifest field it overrides is a loss), if it renders; else why not."""
    script, *args = (w.text for w in line.program)
    program = {"module": script} if line.module else {"entrypoint": script}
    launcher = {"kind": "torchrun", "args": args, "no_python": line.no_python, **program}
    changes: dict[str, Any] = {"command": (), "args": (), "launcher": launcher}
    losses: list[Problem] = []
    nprocs = spec.nprocs if line.nproc_per_node is None else _nprocs(spec, line.nproc_per_node)
    if nprocs != spec.nprocs:
        found = r.found.get("scale.nprocPerNode")
        if found:
            losses.append(Problem(found[0][0], f"torchrun runs {nprocs} per node: written so"))
    changes["nprocs_per_node"] = None if nprocs == (spec.gpus_per_node or 1) else nprocs
    if line.max_restarts is not None and spec.elastic is not None:
        restarts = int(line.max_restarts)
        if spec.elastic.max_restarts not in (None, restarts):
            policy = source_of(r.sources, "elastic.max_restarts")
            losses.append(Problem(policy, f"torchrun restarts {restarts} times: written so"))
        changes["elastic"] = attrs.evolve(spec.elastic, max_restarts=restarts)
    try:
        read = attrs.evolve(spec, **changes)
        TARGETS[r.target].render(read)
    except (SpecError, UnsupportedFeature) as exc:
        return [Problem(at, f"{p.message} (spec field {p.path})") for p in exc.problems]
    r.losses += losses
    return read

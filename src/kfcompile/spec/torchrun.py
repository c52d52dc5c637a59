"""torchrun's options (torch/distributed/run.py ``get_args_parser``), once: how each is spelled,
whether it takes a value, the spec field it carries and whether kfcompile writes it. The
PyTorchJob target renders its torchrun line from these rows, the importer reads that line back
through them, and the TorchX and NeMo-Run mappings read their users' torchrun lines with them.
"""

# Annotations are evaluated (no `from __future__ import annotations`): a NamedTuple compiles
# each field's string annotation, at every cold start.
from collections.abc import Mapping
from typing import Final, NamedTuple

# Why kfcompile drops an option that carries no spec field (a TorchX line that sets it).
WIRED: Final = "the target wires the rendezvous"
CONSOLE: Final = "Kubernetes keeps the console as the pod log"
ROLE: Final = "it only names torchrun's worker group in its own log lines"


class Option(NamedTuple):
    """One torchrun option. torchrun takes ``_`` for ``-`` in every long name. (A named tuple,
    not an attrs class: ``kfcompile render`` imports it and an attrs class costs ~1.7 ms.)"""

    name: str  # the long name, with dashes
    takes_value: bool
    field: str | None  # the spec field a line's value is read into; None: ``dropped`` says why
    written: bool  # kfcompile writes it in the torchrun line it renders (PyTorchJob)
    dropped: str = ""
    short: str = ""

    @property
    def flag(self) -> str:
        """``--nproc-per-node``: how kfcompile (and NeMo-Run) spell it."""
        return f"--{self.name}"

    @property
    def underscored(self) -> str:
        """``--nproc_per_node``: how TorchX's components spell it."""
        return "--" + self.name.replace("-", "_")

    @property
    def env(self) -> str:
        """``PET_NPROC_PER_NODE``: the variable torchrun reads the option from when the line
        lacks it (torch/distributed/argparse_util.py ``env``: ``PET_`` + its dest, upper case),
        which the Kubeflow controllers set in the pods."""
        return "PET_" + self.name.replace("-", "_").upper()

    def __call__(self, value: object) -> str:
        """The option with its value, as one word: ``--nnodes=2``."""
        return f"{self.flag}={value}"


NNODES: Final = Option("nnodes", True, "num_nodes", True)  # N, or MIN:MAX (elastic)
NPROC_PER_NODE: Final = Option("nproc-per-node", True, "nprocs_per_node", True)
MAX_RESTARTS: Final = Option("max-restarts", True, "elastic.max_restarts", True)
RDZV_BACKEND: Final = Option("rdzv-backend", True, None, True, WIRED)
RDZV_ENDPOINT: Final = Option("rdzv-endpoint", True, None, True, WIRED)
RDZV_ID: Final = Option("rdzv-id", True, None, True, WIRED)
NODE_RANK: Final = Option("node-rank", True, None, True, WIRED)
MASTER_ADDR: Final = Option("master-addr", True, None, True, WIRED)
MASTER_PORT: Final = Option("master-port", True, None, True, WIRED)
STANDALONE: Final = Option("standalone", False, None, False, WIRED)
TEE: Final = Option("tee", True, None, False, CONSOLE, short="-t")
ROLE_NAME: Final = Option("role", True, None, False, ROLE)
MODULE: Final = Option("module", False, "launcher.module", True, short="-m")
# Each process runs the program file itself; torchrun's last option, as kfcompile writes it.
NO_PYTHON: Final = Option("no-python", False, "launcher.no_python", True)

OPTIONS: Final = (
    NNODES,
    NPROC_PER_NODE,
    MAX_RESTARTS,
    RDZV_BACKEND,
    RDZV_ENDPOINT,
    RDZV_ID,
    NODE_RANK,
    MASTER_ADDR,
    MASTER_PORT,
    STANDALONE,
    TEE,
    ROLE_NAME,
    MODULE,
    NO_PYTHON,
)
_BY_NAME: Final[Mapping[str, Option]] = {o.name: o for o in OPTIONS}
_BY_SHORT: Final[Mapping[str, Option]] = {o.short: o for o in OPTIONS if o.short}


def option(word: str) -> Option | None:
    """The option a word before ``=`` names (``-m``, ``--nproc_per_node``), if it is one."""
    return _BY_SHORT.get(word) or _BY_NAME.get(word.lstrip("-").replace("_", "-"))

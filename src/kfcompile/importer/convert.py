"""Converting: a manifest imported and rendered for another target, with every loss on the way.

What the target cannot hold is dropped (the spec without the fields it refused, found by their
paths as values) and listed; a PyTorchJob program that may need what only the Training Operator
gives it is flagged when it goes to a TrainJob, and one that names those variables is refused
there (a TrainJob never sets them: the job would fail).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from kfcompile.importer.read import import_manifest_lossy
from kfcompile.importer.state import Imported, LossyImport, NotImportable
from kfcompile.spec.errors import Problem, SpecError, UnsupportedFeature
from kfcompile.spec.load import structure, unstructure
from kfcompile.spec.model import JobSpec
from kfcompile.targets import TARGETS, Target, base, canonical_name, pytorchjob_v1, trainjob

# Variables the Training Operator injects into PyTorchJob pods (with a Master) and TrainJob lacks.
OPERATOR_ENV: Final = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
_OPERATOR_REF = re.compile(
    r"\$(?:\((?P<a>[A-Z_]+)\)|\{(?P<b>[A-Z_]+)\}|(?P<c>[A-Z_]+)\b)"  # $(X), ${X}, $X
)


@frozen
class Converted:
    """A manifest imported and rendered for another target, with every loss on the way."""

    objects: list[dict[str, Any]]
    imported: Imported
    losses: tuple[Problem, ...] = ()


def convert_manifest(
    obj: Mapping[str, Any],
    target_name: str,
    companions: Iterable[Mapping[str, Any]] = (),
    *,
    allow_lossy: bool = False,
) -> Converted:
    """Import ``obj`` and render it for ``target_name``.

    What the target cannot hold is dropped and listed as a loss (input field path: why), after
    the import's own losses. Without ``allow_lossy`` any loss raises ``LossyImport``; a loss that
    cannot be dropped (the job's name, image, program or scale) raises ``NotImportable``, as
    does a PyTorchJob program naming what only the Training Operator sets, for a TrainJob.
    """
    target_name = canonical_name(target_name)  # ValueError naming the choices
    target = TARGETS[target_name]
    imported = import_manifest_lossy(obj, companions)
    unrunnable = list(_unrunnable(imported, target, target_name))
    if unrunnable:
        raise NotImportable(unrunnable)
    losses = [*imported.losses, *_program_losses(imported, target)]
    try:
        objects = target.render(imported.spec).objects
    except UnsupportedFeature as exc:  # drop every misfit at once, then it renders
        losses += [Problem(imported.source_of(p.at), f"{p.message}: dropped") for p in exc.problems]
        objects = target.render(
            _without(imported.spec, exc.problems, imported, target_name)
        ).objects
    if losses and not allow_lossy:
        raise LossyImport(losses)
    return Converted(objects, imported, tuple(losses))


# Fields a conversion never drops: without them there is no job to write.
ESSENTIAL: Final = frozenset(
    {"name", "image", "num_nodes", "command", "args", "launcher", "script"}
)


def _without(
    spec: JobSpec, problems: Sequence[Problem], imported: Imported, target: str
) -> JobSpec:
    """``spec`` without the fields ``target`` refused (see ``convert_manifest``)."""
    data = unstructure(spec)
    hard = []
    for p in problems:
        top, parts = p.at.top, p.at.parts
        below = parts[1] if len(parts) > 1 else None
        if top in ESSENTIAL or top not in data:
            hard.append(Problem(imported.source_of(p.at), f"{p.message} (for {target})"))
        elif top == "env" and isinstance(below, str):
            data["env"].pop(below, None)
        elif top in ("env_list", "secret_env", "volume_mounts") and isinstance(below, int):
            data[top][below] = None
        elif top in ("pod_spec_overrides", "container_overrides") and isinstance(below, str):
            data[top].pop(below, None)
        elif top == "topology" and below in ("group_name", "slice_size"):
            # what Kueue refuses of the pod sets alone: a group, or a slice with its level
            for k in ("slice_required", "slice_size") if below == "slice_size" else (below,):
                data["topology"].pop(k, None)
        elif top == "initializer" and len(parts) == 2 and below in ("dataset", "model"):
            data["initializer"].pop(below, None)
            if not data["initializer"]:
                del data["initializer"]
        else:
            del data[top]
    if hard:
        raise NotImportable(hard)
    for key in (
        "env",
        "env_list",
        "secret_env",
        "volume_mounts",
        "pod_spec_overrides",
        "container_overrides",
    ):
        if key in data:
            kept = (
                [v for v in data[key] if v is not None]
                if isinstance(data[key], list)
                else data[key]
            )
            data[key] = kept
            if not kept:
                del data[key]
    try:
        return structure(data)
    except SpecError as exc:
        raise NotImportable(
            [Problem(imported.source_of(p.at), p.message) for p in exc.problems]
        ) from None


def _unrunnable(imported: Imported, target: Target, target_name: str) -> Iterator[Problem]:
    """A PyTorchJob program naming variables only the Training Operator sets, on a TrainJob:
    they would reach the program unexpanded and the job fail, so no lossy flag writes it."""
    spec = imported.spec
    if imported.target != pytorchjob_v1.NAME or target.kind != trainjob.KIND:
        return
    where = imported.source_of("launcher" if spec.launcher else "command")
    words = [*spec.command, *spec.args, *(spec.launcher.args if spec.launcher else ())]
    words += list(spec.env.values())
    used = sorted(
        {
            name
            for w in words
            for m in _OPERATOR_REF.finditer(w)
            if (name := m["a"] or m["b"] or m["c"]) in OPERATOR_ENV
        }
    )
    if not used:
        return
    fails = f"uses {', '.join(used)}, which a TrainJob never sets, so the job would fail"
    if imported.kept_torchrun:
        yield Problem(
            where,
            f"{fails} (for {target_name}); kfcompile reads torchrun lines as its launcher "
            "without them, but not this one:",
        )
    else:
        yield Problem(
            where,
            f"{fails} (for {target_name}): a TrainJob's runtime sets PET_NNODES, "
            "PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT instead",
        )
    yield from imported.kept_torchrun


def _program_losses(imported: Imported, target: Target) -> Iterator[Problem]:
    """A multi-node PyTorchJob program without torchrun, on a TrainJob: it may rendezvous
    through the variables only the Training Operator sets."""
    spec = imported.spec
    if imported.target != pytorchjob_v1.NAME or target.kind != trainjob.KIND:
        return
    if spec.num_nodes > 1 and not _runs_torchrun(spec):
        where = imported.source_of("launcher" if spec.launcher else "command")
        program = _program_words(spec)
        shown = " ".join(program)
        shown = repr(shown if len(shown) <= 80 else shown[:77] + "...")
        yield Problem(
            where,
            f"runs {shown} on {spec.num_nodes} nodes without torchrun: a PyTorchJob sets "
            "MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE for it, a TrainJob sets only the "
            "PET_* variables torchrun reads, so the nodes cannot rendezvous (run it with "
            "torchrun, or use launcher kind torchrun): kept as written",
        )


_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_PYTHON: Final = re.compile(r"python[0-9.]*")
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
# torchrun, or its module form, as a command inside a shell script.
_TORCHRUN_IN_SCRIPT: Final = re.compile(
    r"(?:^|[\s;&|(`/])(?:torchrun|-m\s*torch\.distributed\.(?:run|launch))(?:\s|$|[;&|)`])"
)


def _program_words(spec: JobSpec) -> list[str]:
    if spec.launcher is not None:
        if spec.launcher.module is not None:
            return [spec.launcher.kind, "-m", spec.launcher.module]
        return [spec.launcher.kind, *(spec.launcher.entrypoint or "",)]
    return [*spec.command, *spec.args]


def _runs_torchrun(spec: JobSpec) -> bool:
    """Whether the job's program is torchrun (directly, as ``python -m torch.distributed.run``,
    after ``env VAR=...``, or inside a ``sh -c`` script): the one launcher that reads PET_*."""
    words = [*spec.command, *spec.args]
    if spec.launcher is not None:  # `python -m torch.distributed.run` is torchrun too
        words = [spec.launcher.kind, *base.program(spec)]
    if words and posixpath.basename(words[0]) == "env":
        words = words[1:]
        while words and (_ASSIGNMENT.fullmatch(words[0]) or words[0].startswith("-")):
            words = words[1:]
    if not words:
        return False
    program = posixpath.basename(words[0])
    if program == "torchrun":
        return True
    if _PYTHON.fullmatch(program):
        for i, w in enumerate(words[1:], 1):
            if w == "-m":
                return words[i + 1 : i + 2] in (
                    ["torch.distributed.run"],
                    ["torch.distributed.launch"],
                )
            if w.startswith("-m"):
                return w[2:] in ("torch.distributed.run", "torch.distributed.launch")
            if not w.startswith("-"):
                return False  # a script file: python train.py
        return False
    if program in _SHELLS:
        for i, w in enumerate(words[1:], 1):
            if w.startswith("-") and "c" in w[1:] and not w.startswith("--"):
                script = words[i + 1] if i + 1 < len(words) else ""
                return bool(_TORCHRUN_IN_SCRIPT.search(script))
        return False
    return False

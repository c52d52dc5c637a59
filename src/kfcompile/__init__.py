"""kfcompile: one typed training-job spec in, the exact Kubeflow custom resources out.

>>> from kfcompile import load_spec, render
>>> objects = render(load_spec(open("job.yaml").read()), "trainjob/v2.3")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kfcompile.importer import (
        Converted,
        Imported,
        LossyImport,
        NotImportable,
        convert_manifest,
        import_manifest,
        import_manifest_lossy,
    )
    from kfcompile.spec.errors import KfcompileError, Problem, SpecError, UnsupportedFeature
    from kfcompile.spec.load import dump_spec, load_spec, structure, unstructure
    from kfcompile.spec.model import (
        ElasticPolicy,
        Initializer,
        InitializerSource,
        JobSpec,
        Launcher,
        RuntimeRef,
        SchedulingPolicy,
        WorkDir,
    )
    from kfcompile.status import JobState, State, job_state
    from kfcompile.targets import DEFAULT_TARGET, TARGETS, Placement

# Each name from its module on first use: importing any part of kfcompile runs this file, and a
# cluster command (``kfcompile status``) needs none of the spec layer, the targets or the
# importer.
_LAZY = {
    "kfcompile.spec.errors": ("KfcompileError", "Problem", "SpecError", "UnsupportedFeature"),
    "kfcompile.spec.load": ("dump_spec", "load_spec", "structure", "unstructure"),
    "kfcompile.spec.model": (
        "ElasticPolicy",
        "Initializer",
        "InitializerSource",
        "JobSpec",
        "Launcher",
        "RuntimeRef",
        "SchedulingPolicy",
        "WorkDir",
    ),
    "kfcompile.targets": ("DEFAULT_TARGET", "TARGETS", "Placement"),
    "kfcompile.status": ("JobState", "State", "job_state"),
    "kfcompile.importer": (
        "Converted",
        "Imported",
        "LossyImport",
        "NotImportable",
        "convert_manifest",
        "import_manifest",
        "import_manifest_lossy",
    ),
}


def __getattr__(name: str) -> Any:
    for module, names in _LAZY.items():
        if name in names:
            value = getattr(importlib.import_module(module), name)
            globals()[name] = value  # found here from now on
            return value
    raise AttributeError(f"module 'kfcompile' has no attribute {name!r}")


def render(spec: JobSpec, target_name: str | None = None) -> list[dict[str, Any]]:
    """The objects to apply for ``spec`` on ``target_name`` (the default target if None), in
    apply order (companions first).

    Raises ``UnsupportedFeature`` naming every spec field the target cannot express.
    """
    from kfcompile import targets

    return targets.target(target_name or targets.DEFAULT_TARGET).render(spec).objects


def explain(spec: JobSpec, target_name: str | None = None) -> list[Placement]:
    """Where each spec value lands in the rendered objects, in render order."""
    from kfcompile import targets

    return targets.target(target_name or targets.DEFAULT_TARGET).render(spec).placements


__all__ = [
    "DEFAULT_TARGET",
    "TARGETS",
    "Converted",
    "ElasticPolicy",
    "Imported",
    "Initializer",
    "InitializerSource",
    "JobSpec",
    "JobState",
    "KfcompileError",
    "Launcher",
    "LossyImport",
    "NotImportable",
    "Placement",
    "Problem",
    "RuntimeRef",
    "SchedulingPolicy",
    "SpecError",
    "State",
    "UnsupportedFeature",
    "WorkDir",
    "convert_manifest",
    "dump_spec",
    "explain",
    "import_manifest",
    "import_manifest_lossy",
    "job_state",
    "load_spec",
    "render",
    "structure",
    "unstructure",
]

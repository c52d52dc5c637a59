"""kfcompile's TorchX registration, for every torchx line.

- torchx 0.7 reads the ``torchx.schedulers`` entry points (pyproject.toml) and, once any
  package adds one, shows only those: so kfcompile's entry points list 0.7's ten built-ins
  beside its own, in torchx's order (the first is ``torchx run``'s default; ``setup.py`` keeps
  the order, which setuptools would sort). Each built-in's factory below loads it from the
  torchx that is installed, and says so in one line where that torchx has no such scheduler
  (nightlies dropped six of the ten).
- Nightlies also read this namespace package (``torchx_plugins.schedulers``) and list its
  plugins first. They read the entry points too unless ``TORCHX_PLUGINS_SOURCE=1``, and a
  name registered both ways is a clash they warn of: so this module registers kfcompile's
  schedulers only when entry points are not read, and then registers torchx's own default
  first, so that installing kfcompile does not change it.

Nothing here imports kfcompile until a kfcompile scheduler is made: a built-in costs no more.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any, Final

# torchx 0.7.0's DEFAULT_SCHEDULER_MODULES, in its order (pyproject's entry points list these).
BUILTINS: Final = (
    "local_docker",
    "local_cwd",
    "slurm",
    "kubernetes",
    "kubernetes_mcad",
    "aws_batch",
    "aws_sagemaker",
    "gcp_batch",
    "ray",
    "lsf",
)
# TORCHX_PLUGINS_SOURCE is a bit mask of the channels nightlies read: 1 this namespace
# package, 2 entry points; unset, both.
_ENTRY_POINTS: Final = 2


def _builtin(name: str) -> Callable[..., Any]:
    def create_scheduler(session_name: str, **kwargs: Any) -> Any:
        import torchx
        from torchx.schedulers import DEFAULT_SCHEDULER_MODULES

        module = DEFAULT_SCHEDULER_MODULES.get(name)
        if module is None:
            from kfcompile.integrations.torchx import SchedulerError

            have = ", ".join(DEFAULT_SCHEDULER_MODULES)
            raise SchedulerError(
                f"torchx {torchx.__version__} has no built-in scheduler {name!r} (it has {have})"
            )
        return importlib.import_module(module).create_scheduler(session_name, **kwargs)

    create_scheduler.__qualname__ = f"{name}.create_scheduler"
    return create_scheduler


local_docker = _builtin("local_docker")
local_cwd = _builtin("local_cwd")
slurm = _builtin("slurm")
kubernetes = _builtin("kubernetes")
kubernetes_mcad = _builtin("kubernetes_mcad")
aws_batch = _builtin("aws_batch")
aws_sagemaker = _builtin("aws_sagemaker")
gcp_batch = _builtin("gcp_batch")
ray = _builtin("ray")
lsf = _builtin("lsf")


def _entry_points_read() -> bool:
    source = os.environ.get("TORCHX_PLUGINS_SOURCE", "")
    return not source.isdigit() or bool(int(source) & _ENTRY_POINTS)


if not _entry_points_read():
    from torchx.plugins import register
    from torchx.schedulers import DEFAULT_SCHEDULER_MODULES

    _DEFAULT: Final = next(iter(DEFAULT_SCHEDULER_MODULES))

    # Plugins are collected in the order of their names here: this one sorts first.
    @register.scheduler(name=_DEFAULT)
    def default_scheduler(session_name: str, **kwargs: Any) -> Any:
        module = importlib.import_module(DEFAULT_SCHEDULER_MODULES[_DEFAULT])
        return module.create_scheduler(session_name, **kwargs)

    @register.scheduler(name="kfcompile")
    def kfcompile_scheduler(session_name: str, **kwargs: Any) -> Any:
        from kfcompile.integrations.torchx import create_scheduler

        return create_scheduler(session_name, **kwargs)

    @register.scheduler(name="kfcompile_nemo")
    def kfcompile_nemo_scheduler(session_name: str, **kwargs: Any) -> Any:
        from kfcompile.integrations.nemo_run_scheduler import create_scheduler

        return create_scheduler(session_name, **kwargs)

"""How kfcompile registers with TorchX: beside every built-in, without changing torchx's default,
on torchx 0.7 (entry points only) and on nightlies (entry points and ``torchx_plugins``).

The torchx tests run in CI's launcher environment (torchx 0.7.0) and its nightly environment."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from torchx_plugins.schedulers import kfcompile as registration

GROUP = "torchx.schedulers"
OURS = ["kfcompile", "kfcompile_nemo"]
HAVE_TORCHX = importlib.util.find_spec("torchx") is not None
NIGHTLY = HAVE_TORCHX and importlib.util.find_spec("torchx.plugins") is not None
needs_torchx = pytest.mark.skipif(
    not HAVE_TORCHX, reason="torchx is not installed (CI's launcher env)"
)
nightly_only = pytest.mark.skipif(not NIGHTLY, reason="torchx nightlies only (torchx.plugins)")


def test_the_entry_points_are_installed_in_torchx_order() -> None:
    """setuptools sorts a group's entry points by name; torchx 0.7 takes the first as its
    default scheduler. The installed group keeps pyproject's order: 0.7's built-ins, then ours."""
    eps = importlib.metadata.distribution("kfcompile").entry_points.select(group=GROUP)
    assert [ep.name for ep in eps] == [*registration.BUILTINS, *OURS]
    module = "torchx_plugins.schedulers.kfcompile"
    assert {ep.value for ep in eps if ep.name in registration.BUILTINS} == {
        f"{module}:{name}" for name in registration.BUILTINS
    }


def _torchx() -> tuple[Any, Any]:
    from torchx import schedulers

    return schedulers.DEFAULT_SCHEDULER_MODULES, schedulers.get_scheduler_factories()


@needs_torchx
def test_torchx_keeps_its_own_default_scheduler() -> None:
    from torchx.schedulers import get_default_scheduler_name

    builtins, _ = _torchx()
    # torchx's default is the first of its built-ins (0.7 and nightlies alike)
    assert get_default_scheduler_name() == next(iter(builtins))


@needs_torchx
def test_every_builtin_of_this_torchx_is_there_and_is_torchx_own() -> None:
    builtins, factories = _torchx()
    assert set(builtins) | set(OURS) <= set(factories)
    local = factories["local_cwd"](session_name="t")
    assert type(local).__module__ == builtins["local_cwd"]


@needs_torchx
@pytest.mark.skipif(NIGHTLY, reason="torchx 0.7 only: nightlies dropped some built-ins")
def test_the_builtins_listed_are_torchx_0_7s() -> None:
    builtins, _ = _torchx()
    assert tuple(builtins) == registration.BUILTINS


@nightly_only
def test_a_builtin_this_torchx_dropped_is_one_line() -> None:
    from kfcompile.integrations.torchx import SchedulerError

    builtins, factories = _torchx()
    dropped = [name for name in registration.BUILTINS if name not in builtins]
    assert dropped
    with pytest.raises(SchedulerError, match=r"^torchx \S+ has no built-in scheduler '"):
        factories[dropped[0]](session_name="t")


def _in_a_new_process(plugins_source: str | None) -> dict[str, list[str]]:
    code = (
        "import json\n"
        "from torchx import plugins\n"
        "from torchx.schedulers import get_scheduler_factories\n"
        "names = list(get_scheduler_factories())\n"
        "print(json.dumps({'names': names, 'errors': [str(e) for e in plugins.registry().errors]}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TORCHX_PLUGINS_SOURCE"}
    if plugins_source is not None:
        env["TORCHX_PLUGINS_SOURCE"] = plugins_source
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    got: dict[str, list[str]] = json.loads(done.stdout)
    return got


@nightly_only
@pytest.mark.parametrize("source", [None, "1", "3"])
def test_nightlies_find_kfcompile_through_either_channel_without_a_clash(
    source: str | None,
) -> None:
    """Entry points and the ``torchx_plugins`` namespace package, or the namespace package
    alone (``TORCHX_PLUGINS_SOURCE=1``): kfcompile's schedulers are there, torchx's default
    stays first, and nothing is registered twice (torchx records that as an error)."""
    builtins, _ = _torchx()
    got = _in_a_new_process(source)
    assert got["names"][0] == next(iter(builtins))
    assert set(OURS) <= set(got["names"])
    assert got["errors"] == []

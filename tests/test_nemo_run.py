"""``KfcompileExecutor`` against the real NeMo-Run (``pip install kfcompile[nemo]``; CI installs
it in the launcher environment).

What it proves: every parameter of NeMo-Run's own ``KubeflowExecutor`` is accepted with its
default; NeMo-Run knows the class (its tables, the torchx entry point); NeMo-Run's dryrun gives
objects the destination release's CRD accepts, on every target, with every value in place (the
volumes, tolerations, pull secrets and mounts NeMo-Run's executor loses outside v2.1, its
``container_kwargs`` and ``pod_spec_overrides``); ``run.Partial`` and ``run.Script(inline=...)``
run as ``-m`` module and inline script with a torchrun that rendezvouses; what a target cannot
hold is an error naming the parameter; and a whole life through ``run.run``/``run.Experiment``
and ``nemo experiment status/logs/cancel`` in new processes against the local API server, with
status from conditions (queued, deadline) and ``list`` over the API.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import logging
import math
import multiprocessing
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import schema_check

run = pytest.importorskip(
    "nemo_run", reason="nemo_run is not installed (pip install -e '.[nemo]'; CI's launcher env)"
)

import fiddle as fdl  # noqa: E402  (nemo_run's own dependency)
from nemo_run.config import get_nemorun_home, set_nemorun_home  # noqa: E402
from nemo_run.core.execution.kubeflow import KubeflowExecutor  # noqa: E402
from nemo_run.core.packaging.git import GitArchivePackager  # noqa: E402
from nemo_run.core.serialization.zlib_json import ZlibJSONSerializer  # noqa: E402
from nemo_run.run.experiment import Experiment  # noqa: E402
from nemo_run.run.torchx_backend.schedulers import api as nemo_api  # noqa: E402
from torchx.schedulers import get_scheduler_factories  # noqa: E402
from torchx.specs import AppState  # noqa: E402

from kfcompile.integrations.nemo_run import (  # noqa: E402
    FDL_RUNNER,
    SCHEDULER,
    ExecutorError,
    KfcompileExecutor,
    register,
)
from kfcompile.integrations.nemo_run_scheduler import (  # noqa: E402
    KfcompileScheduler,
    recalled,
    remember,
)
from kfcompile.spec import yamlio  # noqa: E402

CRDS = {
    "pytorchjob/v1": "pytorchjobs-v1.9.4.yaml",
    "trainjob/v2.0": "trainjobs-v2.0.1.yaml",
    "trainjob/v2.1": "trainjobs-v2.1.0.yaml",
    "trainjob/v2.2": "trainjobs-v2.2.1.yaml",
    "trainjob/v2.3": "trainjobs-v2.3.0.yaml",
}
TARGETS = sorted(CRDS)
V23 = "trainjob/v2.3"
ROOT = Path(__file__).resolve().parents[1]


def train(steps: int = 1) -> None:
    """A function for ``run.Partial`` (it only has to serialize)."""
    print(steps)


@pytest.fixture(autouse=True)
def _no_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cluster but the test's own (``cluster`` sets KUBECONFIG): an executor without a
    ``target`` detects one from the cluster it finds, which must never be the machine's."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture(autouse=True)
def nemo_home(tmp_path: Path) -> Iterator[Path]:
    """NeMo-Run keeps experiments under its home: one per test."""
    before = get_nemorun_home()
    home = tmp_path / "nemo_home"
    set_nemorun_home(str(home))
    yield home
    set_nemorun_home(before)


def dryrun(executor: KfcompileExecutor, task: Any) -> list[dict[str, Any]]:
    """The objects NeMo-Run's own dryrun makes for ``task`` (Experiment -> runner -> the
    scheduler of the entry point)."""
    with Experiment("dry", executor=executor, enable_goodbye_message=False) as exp:
        exp.add(task, name="task")
        exp.dryrun(log=False, delete_exp_dir=False)
        [job] = exp.jobs
        objects: list[dict[str, Any]] = job._dryrun_info.request.objects
    return objects


def command_of(job: dict[str, Any]) -> list[str]:
    if job["kind"] == "PyTorchJob":
        replica = next(iter(job["spec"]["pytorchReplicaSpecs"].values()))
        return list(replica["template"]["spec"]["containers"][0]["command"])
    return list(job["spec"]["trainer"]["command"])


def executor(**kwargs: Any) -> KfcompileExecutor:
    return KfcompileExecutor(**{"image": "nvcr.io/nvidia/nemo:25.02", **kwargs})


# --- the same parameters, and NeMo-Run knows the class -----------------------------------------


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def test_every_kubeflow_executor_parameter_is_accepted_with_its_default() -> None:
    theirs = {f.name: f for f in dataclasses.fields(KubeflowExecutor) if f.init}
    ours = {f.name: f for f in dataclasses.fields(KfcompileExecutor) if f.init}
    assert set(ours) - set(theirs) == {"target"}
    assert set(theirs) <= set(ours)
    assert {n: _default(ours[n]) for n in theirs} == {n: _default(f) for n, f in theirs.items()}


def test_nemo_run_knows_the_executor_from_its_tables_and_the_scheduler_from_its_entry_point() -> (
    None
):
    assert nemo_api.get_executor_str(executor()) == SCHEDULER
    assert nemo_api.REVERSE_EXECUTOR_MAPPING[SCHEDULER] is KfcompileExecutor
    assert KfcompileExecutor in Experiment._PARALLEL_SUPPORTED_EXECUTORS
    assert KfcompileExecutor in Experiment._DETACH_SUPPORTED_EXECUTORS
    register(KfcompileExecutor)  # again: the tables do not grow
    assert Experiment._PARALLEL_SUPPORTED_EXECUTORS.count(KfcompileExecutor) == 1
    assert isinstance(get_scheduler_factories()[SCHEDULER]("s"), KfcompileScheduler)


def test_registration_happens_at_import_in_a_new_process() -> None:
    """fiddle imports the module again when a saved experiment is loaded: that alone must
    register the class (the tables are read before anything else of ours runs)."""
    code = textwrap.dedent(
        """
        import fiddle as fdl
        from nemo_run.core.serialization.zlib_json import ZlibJSONSerializer
        from nemo_run.run.torchx_backend.schedulers import api
        from nemo_run.run.experiment import Experiment
        executor = fdl.build(ZlibJSONSerializer().deserialize(%r))
        assert api.get_executor_str(executor) == %r
        assert type(executor) in Experiment._PARALLEL_SUPPORTED_EXECUTORS
        print(type(executor).__name__)
        """
    ) % (ZlibJSONSerializer().serialize(executor(num_nodes=2).to_config()), SCHEDULER)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "KfcompileExecutor"


def test_importing_kfcompile_or_rendering_never_imports_the_launchers(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: demo\nimage: img\nlauncher: {kind: torchrun, module: pkg.train}\n")
    code = textwrap.dedent(
        f"""
        import sys
        import kfcompile
        from kfcompile import cli
        try:
            cli.main(["render", {str(spec)!r}, "--out", {str(tmp_path / "out")!r}])
        except SystemExit as exc:
            assert not exc.code, exc.code
        loaded = {{m.split(".")[0] for m in sys.modules}}
        print(sorted(loaded & {{"torchx", "nemo_run", "fiddle"}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"


# --- dryrun: every target, every value, the destination CRD ---------------------------------------

EVERYWHERE: dict[str, Any] = {
    "num_nodes": 2,
    "gpus_per_node": 4,
    "cpu_requests": "8",
    "memory_requests": "32Gi",
    "cpu_limits": "16",
    "memory_limits": "64Gi",
    "extra_resource_requests": {"vpc.amazonaws.com/efa": "1"},
    "extra_resource_limits": {"vpc.amazonaws.com/efa": "1"},
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
    "volume_mounts": [{"name": "data", "mountPath": "/data"}],
    "labels": {"team": "llm"},
    "annotations": {"owner": "me"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "env_vars": {"NCCL_DEBUG": "INFO"},
    "env_list": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}}}],
    "pod_spec_overrides": {"nodeSelector": {"pool": "h100"}},
    "launcher": "torchrun",
}
# What Trainer v2.0 cannot hold (no pod metadata, affinity, pull secrets, container
# securityContext).
FROM_V21: dict[str, Any] = {
    "image_pull_secrets": ["ngc"],
    "pod_labels": {"app": "llm"},
    "pod_annotations": {"networking.gke.io/interfaces": "[]"},
    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
}
CONTAINER = {"securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
CONTAINER_TARGETS = ("pytorchjob/v1", "trainjob/v2.2", "trainjob/v2.3")


def _parameters(target: str) -> dict[str, Any]:
    params = {**EVERYWHERE, "target": target}
    if target != "trainjob/v2.0":
        params.update(FROM_V21)
    if target in CONTAINER_TARGETS:
        params["container_kwargs"] = CONTAINER
    return params


def _values(params: dict[str, Any]) -> Iterator[Any]:
    """The values a user set, each of which must appear in the rendered job."""
    for key in ("volumes", "volume_mounts", "tolerations", "env_list"):
        yield from params[key]
    yield params["pod_spec_overrides"]["nodeSelector"]
    yield from ({"name": s} for s in params.get("image_pull_secrets", ()))
    yield {"name": "NCCL_DEBUG", "value": "INFO"}
    for key in ("pod_labels", "pod_annotations", "affinity", "container_kwargs"):
        if key in params:
            yield from ({k: v} for k, v in params[key].items())  # each entry, inside its parent map


def _contains(haystack: Any, needle: Any) -> bool:
    """Whether ``needle`` (a map: as a sub-map of some map) occurs anywhere in ``haystack``."""
    if haystack == needle:
        return True
    if isinstance(haystack, dict):
        if isinstance(needle, dict) and all(
            k in haystack and haystack[k] == v for k, v in needle.items()
        ):
            return True
        return any(_contains(v, needle) for v in haystack.values())
    if isinstance(haystack, list):
        return any(_contains(v, needle) for v in haystack)
    return False


@pytest.mark.parametrize("target", TARGETS)
def test_dryrun_passes_the_release_crd_with_every_value_in_place(target: str) -> None:
    params = _parameters(target)
    objects = dryrun(executor(**params), run.Partial(train, steps=3))
    job = objects[-1]
    assert schema_check.crd_errors(job, CRDS[target]) == []
    missing = [v for v in _values(params) if not _contains(job, v)]
    assert missing == []
    assert job["metadata"]["labels"] == {"team": "llm"}
    assert job["metadata"]["namespace"] == "default"


class Tier(enum.StrEnum):
    GOLD = "gold"


def test_a_dryrun_with_str_enums_in_labels_and_env_has_plain_strings() -> None:
    """A str Enum in the executor's labels or env (a config built in Python): the job NeMo-Run's
    dryrun makes holds plain strings, which YAML dumps (it raised RepresenterError)."""
    given = executor(labels={"tier": Tier.GOLD}, pod_labels={Tier.GOLD: Tier.GOLD},
                     env_vars={"TIER": Tier.GOLD})  # fmt: skip
    objects = dryrun(given, run.Partial(train, steps=1))
    job = objects[-1]
    assert type(job["metadata"]["labels"]["tier"]) is str
    assert "tier: gold" in yamlio.dump_all(objects)


@pytest.mark.parametrize("target", TARGETS)
def test_a_partial_with_torchrun_runs_the_fdl_runner_module_and_rendezvouses(target: str) -> None:
    objects = dryrun(
        executor(target=target, num_nodes=2, launcher="torchrun"), run.Partial(train, steps=3)
    )
    command = command_of(objects[-1])
    assert command[0] == "torchrun"
    i = command.index("-m")
    assert command[i : i + 4] == ["-m", FDL_RUNNER, "-n", "task"]
    config = ZlibJSONSerializer().deserialize(command[i + 4])  # the task travels by value
    assert fdl.build(config).func is train
    flags = command[1:i]
    # Kubernetes expands only $(VAR) of variables the pod has; the Training Operator sets
    # MASTER_ADDR, MASTER_PORT and RANK, a TrainJob's torchrun reads PET_* itself.
    shell_style = [w for w in command if re.search(r"\$(?!\()", w)]
    assert shell_style == []
    if target == "pytorchjob/v1":
        assert "--master-addr=$(MASTER_ADDR)" in flags and "--node-rank=$(RANK)" in flags
    else:
        assert flags == []


@pytest.mark.parametrize("target", TARGETS)
def test_an_inline_python_script_ships_in_a_configmap_and_runs_under_torchrun(target: str) -> None:
    text = "import os\nprint('rank', os.environ.get('RANK'))\n"
    objects = dryrun(
        executor(target=target, launcher="torchrun"),
        run.Script(inline=text, entrypoint="python"),
    )
    config_map, job = objects
    assert config_map["kind"] == "ConfigMap"
    assert list(config_map["data"].values()) == [text]
    assert schema_check.configmap_errors(config_map) == []
    assert schema_check.crd_errors(job, CRDS[target]) == []
    [file_name] = config_map["data"]
    assert command_of(job)[0] == "torchrun"
    assert command_of(job)[-1] == f"/opt/kfcompile/scripts/{file_name}"


def test_an_inline_shell_script_without_a_launcher_runs_in_its_shell() -> None:
    """Kubernetes turns ``$$`` into ``$`` and expands ``$(VAR)`` in args: every ``$`` of the
    text is doubled, so the shell gets it exactly."""
    text = "echo hello $HOSTNAME $$ $(date) $(PET_NODE_RANK)"
    objects = dryrun(executor(), run.Script(inline=text))
    command = command_of(objects[-1])
    assert command == ["bash", "-c", text.replace("$", "$$")]
    assert _kubernetes_expands(command[2], {"PET_NODE_RANK": "1"}) == text


def _kubernetes_expands(word: str, env: dict[str, str]) -> str:
    """What the kubelet makes of ``$`` in a container's args (k8s.io/kubernetes
    third_party/forked/golang/expansion): ``$$`` is ``$``, ``$(VAR)`` of a defined variable its
    value, anything else stays."""
    out, i = [], 0
    while i < len(word):
        if word.startswith("$$", i):
            out.append("$")
            i += 2
        elif (m := re.match(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", word[i:])) and m[1] in env:
            out.append(env[m[1]])
            i += m.end()
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def test_nemo_run_macros_in_arguments_become_variables_kubernetes_expands() -> None:
    from nemo_run.core.execution.base import ExecutorMacros

    # as NeMo-Run's own components write them: `$` + the macro, `$` doubled for the template
    master = f"--master=$${ExecutorMacros.HEAD_NODE_IP_VAR}:$${ExecutorMacros.NODE_RANK_VAR}"
    script = run.Script(path="/app/x.py", entrypoint="python", args=[master])
    command = command_of(dryrun(executor(), script)[-1])
    assert command[-1] == "--master=$(PET_MASTER_ADDR):$(PET_NODE_RANK)"
    env = {"PET_MASTER_ADDR": "job-node-0-0.job", "PET_NODE_RANK": "1"}
    assert _kubernetes_expands(command[-1], env) == "--master=job-node-0-0.job:1"


def test_a_module_script_and_a_file_script_keep_their_arguments() -> None:
    module = dryrun(
        executor(), run.Script(path="pkg.train", m=True, entrypoint="python", args=["--lr", "1"])
    )
    assert command_of(module[-1]) == ["python", "-m", "pkg.train", "--lr", "1"]
    file = dryrun(
        executor(launcher="torchrun"),
        run.Script(path="/app/train.py", entrypoint="python", args=["--name", "a b"]),
    )
    assert command_of(file[-1]) == ["torchrun", "/app/train.py", "--name", "a b"]


def test_spec_kwargs_reach_the_job_spec() -> None:
    objects = dryrun(
        executor(spec_kwargs={"suspend": True, "activeDeadlineSeconds": 600}),
        run.Partial(train),
    )
    assert objects[-1]["spec"]["suspend"] is True
    assert objects[-1]["spec"]["activeDeadlineSeconds"] == 600


@contextmanager
def warnings_logged(level: int = logging.WARNING) -> Iterator[list[str]]:
    """What the executor logs at ``level`` and above (NeMo-Run replaces the root logger's
    handlers, and with them pytest's ``caplog``)."""
    said: list[str] = []
    handler = logging.Handler(level)
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("kfcompile.integrations.nemo_run")
    logger.addHandler(handler)
    before = logger.level
    logger.setLevel(min(level, logger.getEffectiveLevel()))
    try:
        yield said
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def test_spec_kwargs_merge_deeply_into_the_job_spec() -> None:
    """Issue 27, item 5: NeMo-Run's shallow update replaced the whole ``spec.trainer`` with
    ``{"image": "other:2"}``: the job had no command, one node and no numProcPerNode, and said
    nothing. Merged deeply, the rest of what the executor wrote stays."""
    ex = executor(
        num_nodes=2, nprocs_per_node=4, spec_kwargs={"trainer": {"image": "other:2"}}, target=V23
    )
    with warnings_logged() as said:
        job = dryrun(ex, run.Script(path="/app/train.py", entrypoint="python"))[-1]
    trainer = job["spec"]["trainer"]
    assert trainer["image"] == "other:2"
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 4)
    assert trainer["command"] == ["python", "/app/train.py"]
    assert said == []  # a value set: nothing to say


def test_a_list_spec_kwargs_replace_is_said() -> None:
    """A list is replaced, not merged (as in a JSON merge patch): the warning names it."""
    env = [{"name": "B", "value": "2"}]
    ex = executor(env_vars={"A": "1"}, spec_kwargs={"trainer": {"env": env}}, target=V23)
    with warnings_logged() as said:
        job = dryrun(ex, run.Partial(train))[-1]
    assert job["spec"]["trainer"]["env"] == env
    assert said == [
        "spec_kwargs.trainer.env: replaces the job's spec.trainer.env (a list is replaced, not "
        "merged)"
    ]


@pytest.mark.parametrize("target", ["pytorchjob/v1", "trainjob/v2.3"])
def test_an_override_of_the_node_container_is_the_training_container(target: str) -> None:
    """NeMo-Run names the training container ``node`` (the Trainer runtime's name): on a
    PyTorchJob that is the ``pytorch`` container, never a second one without an image."""
    mount = {"name": "data", "mountPath": "/data"}
    params = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
        "pod_spec_overrides": {"containers": [{"name": "node", "volumeMounts": [mount]}]},
    }
    job = dryrun(executor(target=target, num_nodes=2, **params), run.Partial(train))[-1]
    assert schema_check.crd_errors(job, CRDS[target]) == []
    if target == "pytorchjob/v1":
        for replica in job["spec"]["pytorchReplicaSpecs"].values():
            [container] = replica["template"]["spec"]["containers"]
            assert container["name"] == "pytorch" and container["image"]
            assert container["volumeMounts"] == [mount]
    else:
        assert _contains(job, {"name": "node", "volumeMounts": [mount]})


# --- what a target cannot hold is an error naming the parameter ----------------------------------

REFUSED = [
    ("trainjob/v2.0", {"pod_labels": {"a": "b"}}, "pod_labels: not supported by trainjob/v2.0"),
    ("trainjob/v2.0", {"affinity": FROM_V21["affinity"]}, "affinity: not supported"),
    ("trainjob/v2.0", {"image_pull_secrets": ["ngc"]}, "image_pull_secrets: not supported"),
    (
        "trainjob/v2.1",
        {"container_kwargs": CONTAINER},
        "container_kwargs.securityContext: not supported by trainjob/v2.1",
    ),
    ("pytorchjob/v1", {"runtime_ref": "my-runtime"}, "runtime_ref: a TrainJob runtime"),
    ("trainjob/v2.3", {"retries": 2}, "retries: not supported by trainjob/v2.3"),
    ("trainjob/v2.3", {"restart_policy": "Never"}, "restart_policy: not supported"),
    (
        "trainjob/v2.1",
        {"spec_kwargs": {"activeDeadlineSeconds": 60}},
        "spec_kwargs.activeDeadlineSeconds: not supported by trainjob/v2.1",
    ),
    ("trainjob/v2.3", {"spec_kwargs": {"colour": "red"}}, "spec_kwargs.colour: "),
    (
        "trainjob/v2.3",
        {"spec_kwargs": {"trainer": "other:2"}},
        "spec_kwargs.trainer: must be a mapping: it merges into the generated one",
    ),
    ("trainjob/v2.3", {"image": ""}, "image: required"),
    ("trainjob/v2.3", {"train_job_basename": "8b-llama"}, "train_job_basename: '8b-llama': must"),
    (
        "trainjob/v2.3",
        {"spec_kwargs": {"managedBy": "kubeflow.org/training-operator"}},
        "spec_kwargs.managedBy: trainjob/v2.3 accepts only: trainer.kubeflow.org/trainjob-"
        "controller, kueue.x-k8s.io/multikueue",
    ),
    (
        "pytorchjob/v1",
        {"spec_kwargs": {"managedBy": "trainer.kubeflow.org/trainjob-controller"}},
        "spec_kwargs.managedBy: pytorchjob/v1 accepts only: kubeflow.org/training-operator",
    ),
    ("trainjob/v2.3", {"cpu_requests": "lots"}, "cpu_requests: "),
    ("trainjob/v2.3", {"packager": GitArchivePackager()}, "packager: GitArchivePackager"),
    ("trainjob/v9", {}, "target: unknown target 'trainjob/v9'"),
    # Kubernetes takes string values only: never "True" or "None" in their place
    ("trainjob/v2.3", {"labels": {"on": True}}, "labels.on: must be a string, got a boolean"),
    ("pytorchjob/v1", {"pod_annotations": {"a": None}}, "pod_annotations.a: must be a string"),
    # container_kwargs.command was appended to the torchrun line (`torchrun ... -m x python b`)
    (
        "pytorchjob/v1",
        {"container_kwargs": {"command": ["python", "/b.py"]}},
        "container_kwargs.command: would replace what launcher writes",
    ),
    (
        "trainjob/v2.3",
        {"container_kwargs": {"command": ["python", "/b.py"]}},
        "container_kwargs.command: would replace what launcher writes",
    ),
    (
        "trainjob/v2.3",
        {"container_kwargs": {"args": ["--epochs", "1"]}},
        "container_kwargs.args: launcher writes the training container's whole command line",
    ),
]


@pytest.mark.parametrize(("target", "params", "line"), REFUSED)
def test_what_the_target_cannot_hold_is_an_error_naming_the_parameter(
    target: str, params: dict[str, Any], line: str
) -> None:
    with pytest.raises(ExecutorError) as raised:
        dryrun(executor(target=target, **params), run.Partial(train))
    lines = str(raised.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), lines


@pytest.mark.parametrize("target", TARGETS)
def test_a_shell_script_under_torchrun_runs_as_torchrun_no_python(target: str) -> None:
    """NeMo-Run runs a script whose entrypoint is not python as ``torchrun --no-python``: the
    file NeMo-Run wrote (with its ``#!`` line) ships executable, as a path does unchanged."""
    config_map, job = dryrun(
        executor(target=target, launcher="torchrun"), run.Script(inline="echo hi")
    )
    assert schema_check.crd_errors(job, CRDS[target]) == []
    assert schema_check.configmap_errors(config_map) == []
    [(file_name, text)] = config_map["data"].items()
    assert text == "#!/usr/bin/bash\necho hi"
    assert command_of(job)[-2:] == ["--no-python", f"/opt/kfcompile/scripts/{file_name}"]
    assert _contains(job, {"defaultMode": 0o755, "name": config_map["metadata"]["name"]})
    path = dryrun(executor(target=target, launcher="torchrun"), run.Script("/app/run.sh"))
    assert command_of(path[-1])[-2:] == ["--no-python", "/app/run.sh"]


def test_the_work_dir_is_staged_without_following_a_symlink_out(tmp_path: Path) -> None:
    """Links inside the work dir are copied as links; one that leads out of it (its file would
    be uploaded) or round in a loop is a line naming it, and nothing is copied."""
    code, outside = tmp_path / "code", tmp_path / "secret.txt"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('trained')\n")
    outside.write_text("token\n")
    (code / "latest.py").symlink_to("train.py")
    (code / "pkg" / "up").symlink_to("..")
    ex = executor(workdir_pvc="claim", workdir_local_path=str(code))
    ex.assign("exp", str(tmp_path / "exp"), "task", "task")
    ex.stage_workdir()
    staged = Path(ex.job_dir)
    assert os.readlink(staged / "latest.py") == "train.py"
    assert os.readlink(staged / "pkg" / "up") == ".."

    (code / "pkg" / "key").symlink_to(outside)
    (code / "a").symlink_to("b")
    (code / "b").symlink_to("a")
    ex.assign("exp", str(tmp_path / "exp"), "task2", "task2")
    with pytest.raises(ExecutorError) as raised:
        ex.stage_workdir()
    assert str(raised.value).splitlines() == [
        "workdir_local_path: a -> b: a symlink loop",
        "workdir_local_path: b -> a: a symlink loop",
        f"workdir_local_path: pkg/key -> {outside}: leads outside the work dir (not uploaded)",
    ]
    assert not Path(ex.job_dir).exists()


# --- a whole life on the local API server -------------------------------------------------------


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from fakekube.cluster import LocalCluster

    with LocalCluster(schema_check.require_shared()) as local:
        monkeypatch.setenv("KUBECONFIG", str(local.kubeconfig))
        yield local


# What the `nemo` console script runs (`python -m nemo_run` builds the app but never calls it).
NEMO = "import sys; from nemo_run.__main__ import app; sys.argv[0] = 'nemo'; app()"


def nemo(home: Path, kubeconfig: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The ``nemo`` command line, in a new process."""
    env = {**os.environ, "NEMORUN_HOME": str(home), "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(
        [sys.executable, "-c", NEMO, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def _experiment_id(home: Path, title: str) -> str:
    [exp_dir] = [p for p in (home / "experiments" / title).iterdir() if p.is_dir()]
    return exp_dir.name


# Each `nemo` process imports NeMo-Run (seconds of CPU): these tests get more than the default.
SLOW = pytest.mark.timeout(300)


@SLOW
def test_run_status_logs_and_list_through_nemo_run(
    cluster: Any, nemo_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = run.Script(inline="print('hello')\n", entrypoint="python")
    run.run(script, executor=executor(num_nodes=2, launcher="torchrun"), name="hello")
    out = capfd.readouterr().out
    assert "rank 1 step 3" in out  # run.run tails every rank's log while it waits

    [job] = cluster.objects("TrainJob", "trainer.kubeflow.org/v1alpha1")
    creates = cluster.kube.requests.matching("POST", "/trainjobs")
    assert creates and all(r.query.get("fieldValidation") == "Strict" for r in creates)
    name = job["metadata"]["name"]
    assert name.startswith("hello-")

    exp_id = _experiment_id(nemo_home, "hello")
    status = nemo(nemo_home, cluster.kubeconfig, "experiment", "status", exp_id)
    assert status.returncode == 0, status.stderr
    assert "SUCCEEDED" in status.stdout + status.stderr
    logs = nemo(nemo_home, cluster.kubeconfig, "experiment", "logs", exp_id, "0")
    assert logs.returncode == 0, logs.stderr
    said = logs.stdout + logs.stderr
    assert "rank 0 step 3" in said and "rank 1 step 3" in said

    listed = KfcompileScheduler("test").list()
    assert [(a.app_id, a.state) for a in listed] == [(f"default:{name}", AppState.SUCCEEDED)]


@SLOW
def test_a_detached_job_is_cancelled_from_a_new_process(cluster: Any, nemo_home: Path) -> None:
    hang = executor(annotations={"fake.kfcompile.dev/scenario": "hang"}, target="pytorchjob/v1")
    with Experiment("hang", executor=hang, enable_goodbye_message=False) as exp:
        exp.add(run.Partial(train), name="train")
        exp.run(detach=True)
    exp_id = _experiment_id(nemo_home, "hang")
    [pytorchjob] = cluster.objects("PyTorchJob", "kubeflow.org/v1")
    cancel = nemo(nemo_home, cluster.kubeconfig, "experiment", "cancel", exp_id, "0")
    assert cancel.returncode == 0, cancel.stderr
    assert cluster.objects("PyTorchJob", "kubeflow.org/v1") == []
    status = Experiment.from_id(exp_id).status(return_dict=True)
    assert status is not None
    assert status["train"]["status"] == AppState.CANCELLED
    assert pytorchjob["metadata"]["name"].startswith("train-")


def _note_launches(process: int) -> None:
    """Four threads, each noting 50 launches at once, as parallel NeMo-Run runs do."""

    def note(thread: int) -> None:
        for i in range(50):
            remember(f"default:job-{process}-{thread}-{i}", task="train", job_dir=f"/d/{i}")

    threads = [threading.Thread(target=note, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_concurrent_launches_keep_every_note(nemo_home: Path) -> None:
    """Issue 24, item 11: every launch notes its task and job directory for status and logs;
    one shared file read, changed and written back by each kept 111 of 800 notes. Four
    processes (forked: NeMo-Run is imported already) of four threads."""
    forked = multiprocessing.get_context("fork")
    procs = [forked.Process(target=_note_launches, args=(p,)) for p in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    kept = [
        recalled(f"default:job-{p}-{t}-{i}") == {"task": "train", "job_dir": f"/d/{i}"}
        for p in range(4)
        for t in range(4)
        for i in range(50)
    ]
    assert (sum(kept), len(kept)) == (800, 800)


def test_a_note_of_kfcompile_before_is_still_read(nemo_home: Path) -> None:
    nemo_home.mkdir(parents=True)
    (nemo_home / ".kfcompile_jobs.json").write_text(
        '{"default:old": {"task": "t", "job_dir": "/j"}}'
    )
    assert recalled("default:old") == {"task": "t", "job_dir": "/j"}
    remember("default:old", task="t2", job_dir="/j2")  # the new note wins
    assert recalled("default:old") == {"task": "t2", "job_dir": "/j2"}
    assert recalled("default:none") == {}


def _submitted(**params: Any) -> str:
    """Submit through NeMo-Run, detached: the app id."""
    with Experiment("one", executor=executor(**params), enable_goodbye_message=False) as exp:
        exp.add(run.Partial(train), name="task")
        exp.run(detach=True)
        [job] = exp.jobs
    return str(job.handle.rpartition("/")[2])


def test_the_work_dir_goes_to_the_claim_and_back_without_kubectl(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``workdir_local_path`` is merged into the job directory, which goes to ``code_dir`` on
    ``workdir_pvc`` (over the API), the claim is mounted at ``workdir_pvc_path``, and paths
    under ``workdir_local_path`` in the command point at the copy; ``pull_results`` brings the
    job directory back."""
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # no kubectl, no rsync
    from fakekube.cluster import CLAIM, members

    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('trained')\n")
    ex = executor(workdir_pvc=CLAIM, workdir_local_path=str(code))
    script = run.Script(path=str(code / "train.py"), entrypoint="python")
    with Experiment("wd", executor=ex, enable_goodbye_message=False) as exp:
        exp.add(script, name="task")
        exp.run(detach=True)
        [job] = exp.jobs
        code_dir = job.executor.code_dir
    assert code_dir.startswith("/nemo_run/") and code_dir.endswith("/task/code")
    where = "/mnt/pvc/" + code_dir[len("/nemo_run/") :]  # the claim, in the sync's helper pod
    files = members(cluster.sent[where])  # what its tar read
    assert files["train.py"] == b"print('trained')\n"
    [trainjob] = cluster.objects("TrainJob", "trainer.kubeflow.org/v1alpha1")
    assert trainjob["spec"]["trainer"]["command"] == ["python", f"{code_dir}/train.py"]
    assert _contains(trainjob, {"name": "nemo-run-workdir", "mountPath": "/nemo_run"})
    assert _contains(trainjob, {"persistentVolumeClaim": {"claimName": CLAIM}})

    cluster.sent[where] = archive({**files, "result.txt": b"loss 0.1\n"})  # the job wrote it
    back = tmp_path / "back"
    job.executor.pull_results(dest_dir=str(back))
    assert (back / "result.txt").read_bytes() == b"loss 0.1\n"
    assert (back / "train.py").read_text() == "print('trained')\n"


def test_its_scheduler_describes_each_rank_as_the_torchx_one_does(
    monkeypatch: pytest.MonkeyPatch, nemo_home: Path
) -> None:
    """NeMo-Run's scheduler builds on TorchX's tables: the same state for the job and for each
    rank (a rank's current pod, not the one it replaced; a rank without a pod waits while the
    job runs)."""
    from test_torchx import JOB, node, observation

    from kfcompile import lifecycle
    from kfcompile.integrations import torchx as kfx
    from kfcompile.status import State

    current, replaced = node(1, "Running", "demo-node-0-1-new"), node(1, "Failed", "old")
    seen = observation(State.RUNNING, node(0, "Running"), current, replaced, total=3)
    monkeypatch.setattr(KfcompileScheduler, "_cluster", lambda self: None)
    monkeypatch.setattr(KfcompileScheduler, "_ref", lambda self, app_id: seen.ref)
    monkeypatch.setattr(lifecycle, "status", lambda session, ref: seen)
    nemo = KfcompileScheduler("test").describe("ns:demo")
    assert nemo is not None
    torchx_described = kfx.describe_job("ns:demo", JOB, seen)

    def ranks(described: Any) -> list[tuple[int, AppState, str]]:
        return [(r.id, r.state, r.hostname) for r in described.roles_statuses[0].replicas]

    assert (
        ranks(nemo)
        == ranks(torchx_described)
        == [
            (0, AppState.RUNNING, "demo-node-0-0-x"),
            (1, AppState.RUNNING, "demo-node-0-1-new"),
            (2, AppState.PENDING, ""),
        ]
    )
    assert nemo.state == torchx_described.state == AppState.RUNNING


def test_status_reads_conditions_queued_and_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue-queued is a waiting job with the reason why; a deadline is a failure, not
    ``Unknown`` (NeMo-Run's executor reads only jobsStatus)."""
    from fakekube.cluster import QUEUE, LocalCluster

    shared = schema_check.require_shared()
    with LocalCluster(shared, auto=False) as local:
        monkeypatch.setenv("KUBECONFIG", str(local.kubeconfig))
        local.admits = math.inf  # Kueue keeps it waiting
        queued = _submitted(labels={"kueue.x-k8s.io/queue-name": QUEUE})
        local.clock.advance(10.0)
        described = KfcompileScheduler("test").describe(queued)
        assert described is not None
        # the reason Kueue gives (its Workload), as status says it
        assert (described.state, described.msg.split()[0]) == (AppState.PENDING, "Queued")
        assert f"Kueue: waiting in queue {QUEUE}: " in described.msg

        late = _submitted(annotations={"fake.kfcompile.dev/scenario": "deadline"})
        local.clock.advance(10.0)
        described = KfcompileScheduler("test").describe(late)
        assert described is not None
        assert described.state == AppState.FAILED
        assert "DeadlineExceeded" in described.msg


def test_run_dryrun_writes_the_objects_to_a_file_and_says_where(
    nemo_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import yaml

    text = "#!/usr/bin/bash\necho hi\n"
    run.run(
        run.Script(inline=text), executor=executor(launcher="torchrun"), name="dry", dryrun=True
    )
    out = capfd.readouterr().out
    [written] = list(
        (nemo_home / "experiments" / "dry").glob("dry-*.yaml")
    )  # the run's dir is gone
    assert f"writtento{written}" in "".join(out.split())  # the console pads and wraps lines
    config_map, job = yaml.safe_load_all(written.read_text())
    assert (config_map["kind"], job["kind"]) == ("ConfigMap", "TrainJob")
    assert job["metadata"]["name"] == written.stem
    assert schema_check.crd_errors(job, CRDS["trainjob/v2.3"]) == []


def test_dryrun_output_is_printable_yaml() -> None:
    with Experiment("dry", executor=executor(), enable_goodbye_message=False) as exp:
        exp.add(run.Partial(train), name="task")
        exp.dryrun(log=False, delete_exp_dir=False)
        text = str(exp.jobs[0]._dryrun_info.request)
    assert text.startswith("# trainjob/v2.3: task-")
    assert "kind: TrainJob" in text


# --- NeMo-Run's own Kubeflow examples, run with only the import changed ----------------------
# `from kfcompile.integrations.nemo_run import KfcompileExecutor as KubeflowExecutor`: each test
# builds the executor with exactly the parameters of its example and runs it as the example
# does, through NeMo-Run, against the local API server (which runs the pods' rendezvous).


def _claim(cluster: Any, namespace: str, name: str) -> None:
    """What the examples expect the cluster to have: their namespace, and the claim they name."""
    if cluster.store.get("v1", "Namespace", None, namespace) is None:
        cluster.store.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
    meta = {"name": name, "namespace": namespace}
    cluster.store.create(
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
    )


def _trainjob(cluster: Any, namespace: str) -> dict[str, Any]:
    [job] = cluster.store.list("trainer.kubeflow.org/v1alpha1", "TrainJob", namespace)
    assert job["status"]["conditions"][-1]["type"] == "Complete"
    return dict(job)


@SLOW
def test_the_minimal_example_of_the_issue_runs_a_bash_script_under_torchrun(
    cluster: Any,
) -> None:
    """``run.Script("train.py")`` has entrypoint ``bash``: NeMo-Run runs it as ``torchrun
    --no-python train.py`` (each process executes the file), and so does the job."""
    _claim(cluster, "my-namespace", "my-pvc")
    KubeflowExecutor = KfcompileExecutor  # the example's import, renamed
    executor = KubeflowExecutor(
        namespace="my-namespace",
        image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
        num_nodes=2,
        gpus_per_node=8,
        launcher=run.Torchrun(),
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "my-pvc"}}],
        volume_mounts=[{"name": "data", "mountPath": "/data"}],
    )
    run.run(run.Script("train.py"), executor=executor, name="my-training-job")
    job = _trainjob(cluster, "my-namespace")
    assert schema_check.crd_errors(job, CRDS["trainjob/v2.3"]) == []
    assert job["spec"]["trainer"]["command"] == ["torchrun", "--no-python", "train.py"]
    assert _contains(job, {"name": "data", "mountPath": "/data"})


# NVIDIA-NeMo/Run docs/guides/executors/kubeflow.md (and docs/guides/execution.md), "Executor
# configuration": volume setup, secret injection, work-dir PVC sync.
DOCS_EXAMPLE: dict[str, Any] = {
    "runtime_ref": "torch-distributed",
    "namespace": "my-namespace",
    "image": "nvcr.io/nvidia/nemo:25.04",
    "num_nodes": 4,
    "gpus_per_node": 8,
    "cpu_requests": "16",
    "memory_requests": "64Gi",
    "image_pull_secrets": ["ngc-registry-secret"],
    "env_vars": {"NCCL_DEBUG": "INFO", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "env_list": [
        {
            "name": "WANDB_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "my-secrets", "key": "WANDB_API_KEY"}},
        },
    ],
    "labels": {"app": "my-training-job"},
    "tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}],
    "volumes": [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "model-cache"}},
    ],
    "volume_mounts": [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model-cache", "mountPath": "/nemo-workspace"},
    ],
    "workdir_pvc": "model-cache",
    "workdir_pvc_path": "/nemo-workspace",
}


@SLOW
def test_the_docs_executor_example_runs_with_its_secret_volumes_and_work_dir(
    cluster: Any, nemo_home: Path
) -> None:
    _claim(cluster, "my-namespace", "model-cache")
    executor = KfcompileExecutor(launcher=run.Torchrun(), **DOCS_EXAMPLE)
    text = "#!/usr/bin/bash\necho rank $RANK\n"
    run.run(run.Script(inline=text), executor=executor, name="docs")
    job = _trainjob(cluster, "my-namespace")
    assert schema_check.crd_errors(job, CRDS["trainjob/v2.3"]) == []
    for value in (
        *DOCS_EXAMPLE["env_list"],
        *DOCS_EXAMPLE["volumes"],
        *DOCS_EXAMPLE["tolerations"],
    ):
        assert _contains(job, value), value
    assert _contains(job, {"name": "ngc-registry-secret"})
    # the claim the work dir syncs to is the example's own volume: mounted once
    mounts = [m for m in _items_at(job, "volumeMounts") if m["name"] == "model-cache"]
    assert mounts == [{"name": "model-cache", "mountPath": "/nemo-workspace"}]
    command = job["spec"]["trainer"]["command"]
    assert command[:2] == ["torchrun", "--no-python"]
    # the job directory (with NeMo-Run's script file) is on the claim, under code_dir
    from fakekube.cluster import members

    [upload] = [e for e in cluster.fake.execs if e.command[:2] == ("tar", "-xf")]
    assert upload.namespace == "my-namespace" and upload.command[-1].endswith("/code")
    assert "scripts/docs.sh" in members(upload.stdin), sorted(members(upload.stdin))


def archive(files: Mapping[str, bytes]) -> bytes:
    """A tar stream of ``files`` (name: bytes), as the pod's tar writes one."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            tar.addfile(entry, io.BytesIO(data))
    return out.getvalue()


def _items_at(tree: Any, key: str) -> list[Any]:
    """Every item of the lists at ``key`` anywhere in ``tree``."""
    if isinstance(tree, dict):
        here = list(tree.get(key, []))
        return here + [v for k, x in tree.items() if k != key for v in _items_at(x, key)]
    if isinstance(tree, list):
        return [v for x in tree for v in _items_at(x, key)]
    return []


@SLOW
@pytest.mark.parametrize("pvc", [None, "model-cache"])
def test_hello_kubeflow_runs_its_inline_script_with_and_without_a_pvc(
    cluster: Any, pvc: str | None
) -> None:
    """NVIDIA-NeMo/Run examples/kubeflow/hello_kubeflow.py with its defaults (``--image`` and
    optionally ``--pvc``): an inline bash script (nvidia-smi, a Python heredoc) on 2 nodes of 8
    GPUs under torchrun, a memory-backed /dev/shm, the work dir synced when a claim is given."""
    if pvc:
        _claim(cluster, "default", pvc)
    executor = KfcompileExecutor(
        launcher=run.Torchrun(),
        runtime_ref="torch-distributed",
        namespace="default",
        image="nvcr.io/nvidia/nemo:25.04",
        num_nodes=2,
        gpus_per_node=8,
        cpu_requests="8",
        memory_requests="32Gi",
        env_vars={"NCCL_DEBUG": "INFO", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        env_list=[],
        tolerations=[{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}],
        volumes=[
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            *([{"name": "workdir", "persistentVolumeClaim": {"claimName": pvc}}] if pvc else []),
        ],
        volume_mounts=[
            {"name": "dshm", "mountPath": "/dev/shm"},
            *([{"name": "workdir", "mountPath": "/nemo-workspace"}] if pvc else []),
        ],
        workdir_pvc=pvc,
        workdir_pvc_path="/nemo-workspace",
        labels={"app": "hello-kubeflow"},
    )
    inline = "nvidia-smi\npython - <<'PY'\nimport os\nprint(os.environ.get('RANK', 0))\nPY\n"
    run.run(run.Script(inline=inline), executor=executor, name="hello-kubeflow")
    job = _trainjob(cluster, "default")
    assert job["metadata"]["name"].startswith("hello-kubeflow-")
    assert schema_check.crd_errors(job, CRDS["trainjob/v2.3"]) == []
    [config_map] = [
        c for c in cluster.objects("ConfigMap") if c["metadata"]["name"].endswith("-script")
    ]
    [(file_name, text)] = config_map["data"].items()
    assert text.startswith("#!") and text.endswith(inline)  # NeMo-Run's interpreter line kept
    command = job["spec"]["trainer"]["command"]
    assert command == ["torchrun", "--no-python", f"/opt/kfcompile/scripts/{file_name}"]
    assert _contains(
        job, {"configMap": {"name": config_map["metadata"]["name"], "defaultMode": 0o755}}
    )


# --- KubeflowExecutor's own methods ---------------------------------------------------------

METHODS = (
    "launch", "status", "cancel", "fetch_logs", "get_job_body", "package",
    "materialize_launch_script", "copy_to_workspace", "copy_from_workspace",
)  # fmt: skip


@pytest.mark.parametrize("method", METHODS)
def test_every_kubeflow_executor_method_is_there_with_its_signature(method: str) -> None:
    """Each parameter of NeMo-Run's method, in its place and with its default (a parameter
    NeMo-Run requires may have a default here)."""
    import inspect

    theirs = inspect.signature(getattr(KubeflowExecutor, method)).parameters
    ours = inspect.signature(getattr(KfcompileExecutor, method)).parameters
    assert list(ours) == list(theirs)
    for name, p in theirs.items():
        if p.default is not inspect.Parameter.empty:
            assert ours[name].default == p.default, name


def test_get_job_body_is_the_job_for_a_command() -> None:
    body = executor(num_nodes=2, target="trainjob/v2.1").get_job_body(
        "train-abc123", ["python", "/app/train.py", "--lr", "1"]
    )
    assert schema_check.crd_errors(body, CRDS["trainjob/v2.1"]) == []
    assert body["metadata"]["name"] == "train-abc123"
    assert body["spec"]["trainer"]["command"] == ["python", "/app/train.py", "--lr", "1"]
    assert body["spec"]["trainer"]["numNodes"] == 2


def test_materialize_launch_script_writes_kubeflow_executors_launch_sh(tmp_path: Path) -> None:
    ex = executor(env_vars={"A": "1"})
    ex.assign("exp", str(tmp_path), "train", "train")
    ex.materialize_launch_script(["torchrun", "/app/train.py"])
    text = (tmp_path / "train" / "launch.sh").read_text()
    assert "torchrun /app/train.py" in text and "export A=1" in text


@SLOW
def test_launch_status_logs_and_cancel_as_kubeflow_executor_has_them(
    cluster: Any, tmp_path: Path
) -> None:
    from nemo_run.core.execution.kubeflow import KubeflowJobState

    ex = executor(num_nodes=3, launcher="torchrun")
    ex.assign("exp", str(tmp_path), "train", "train")
    assert ex.cancel("nothing-here", wait=True) is None  # no such job: nothing to wait for
    assert ex.status("nothing-here") is None
    name, state = ex.launch("train", ["torchrun", "/app/train.py"], wait=True)
    assert name.startswith("train-") and state in (
        KubeflowJobState.RUNNING,
        KubeflowJobState.SUCCEEDED,
    )
    [job] = cluster.objects("TrainJob", "trainer.kubeflow.org/v1alpha1")
    assert job["metadata"]["name"] == name
    assert job["spec"]["trainer"]["command"] == ["torchrun", "/app/train.py"]
    assert ex.launch("train", ["torchrun", "/app/train.py"]) == (name, KubeflowJobState.CREATED)
    assert len(cluster.objects("TrainJob", "trainer.kubeflow.org/v1alpha1")) == 1  # same job

    shown = list(ex.fetch_logs(name, stream=True))  # followed until the job ends
    assert ex.status(name) is KubeflowJobState.SUCCEEDED
    assert any(line.startswith("rank 0 ") for line in shown)
    assert any(line.startswith("rank 2 ") for line in shown)
    assert not any(line.startswith("rank 1 ") for line in shown)  # rank 0 and the last only
    every = (tmp_path / "train" / "log-allranks_0.out").read_text().splitlines()
    for rank in range(3):
        assert any(line.startswith(f"train/{rank} rank {rank} step") for line in every), rank

    assert ex.cancel(name, wait=True) is True  # the job and its pods are gone
    assert cluster.objects("TrainJob", "trainer.kubeflow.org/v1alpha1") == []
    assert ex.status(name) is None
    assert ex.cancel(name) is None


def test_cancel_wait_of_a_job_kueue_manages_returns(cluster: Any, tmp_path: Path) -> None:
    """Issue 28, item 1: deleted in the foreground, a TrainJob Kueue manages never went (the
    Trainer re-created its JobSet while it waited for it): ``cancel(wait=True)`` said False
    after its timeout. Deleted in the background, it and all it made are gone."""
    from fakekube.cluster import QUEUE

    hang = {"fake.kfcompile.dev/scenario": "hang"}
    ex = executor(labels={"kueue.x-k8s.io/queue-name": QUEUE}, annotations=hang)
    ex.assign("exp", str(tmp_path), "train", "train")
    name, _ = ex.launch("train", ["python", "/app/train.py"], wait=True)
    assert ex.cancel(name, wait=True, timeout=10) is True
    for api_version, kind in (
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
    ):
        assert cluster.objects(kind, api_version) == [], kind


def test_an_executor_without_a_target_renders_for_the_release_the_cluster_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 23, 5: the executor rendered trainjob/v2.3 unless told otherwise, which a Trainer
    v2.1 cluster refuses (strict decoding: unknown fields). It detects the release as
    ``kfcompile submit`` does, once per executor, and says which it chose."""
    from fakekube.cluster import RELEASES, LocalCluster

    shared = schema_check.require_shared()
    with LocalCluster(shared, scenario="hang", crds=RELEASES["trainjob/v2.1"]) as local:
        monkeypatch.setenv("KUBECONFIG", str(local.kubeconfig))
        ex = executor()
        ex.assign("exp", str(tmp_path), "train", "train")
        with warnings_logged(logging.INFO) as said:
            ex.launch("train", ["python", "/app/train.py"])
            asked = local.kube.requests.count("GET", "/customresourcedefinitions/")
            ex.launch("train", ["python", "/app/train.py"])  # the same job: unchanged
            assert local.kube.requests.count("GET", "/customresourcedefinitions/") == asked
        [made] = local.objects("TrainJob", "trainer.kubeflow.org/v1alpha1")
    assert made["metadata"]["annotations"]["kfcompile.dev/target"] == "trainjob/v2.1"
    assert said == [
        "target trainjob/v2.1, detected from the cluster: the served TrainJob CRD has "
        "spec.podTemplateOverrides"
    ]


RUN_WITHOUT_A_CLUSTER = """
import nemo_run as run
from kfcompile.integrations.nemo_run import KfcompileExecutor

def train():
    pass

if __name__ == "__main__":
    run.run(run.Partial(train), executor=KfcompileExecutor(image="python:3.11"), name="t1")
"""


def test_a_run_without_a_kubeconfig_ends_with_one_executor_error_line(tmp_path: Path) -> None:
    """Issue 23, 5: a 54-line traceback, whose last line said ``pass --kubeconfig`` (a flag
    NeMo-Run does not have). Now NeMo-Run's own "Error running job" line and one
    ``ExecutorError`` line, saying what NeMo-Run reads: ``KUBECONFIG``."""
    script = tmp_path / "train.py"
    script.write_text(RUN_WITHOUT_A_CLUSTER)
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env |= {"HOME": str(tmp_path), "NEMORUN_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in out, out
    last = done.stderr.splitlines()[-1]
    assert last.startswith("ExecutorError: no cluster configuration: kubeconfig "), out
    assert "file not found (set KUBECONFIG);" in last and "--kubeconfig" not in out


def test_executor_errors_are_runtime_errors_as_nemo_run_s_own() -> None:
    with pytest.raises(RuntimeError, match="image: required"):
        dryrun(executor(image="", target=V23), run.Partial(train))


def test_the_progress_the_training_process_reports_reaches_nemo_run(
    cluster: Any, tmp_path: Path
) -> None:
    """Trainer v2.2+ with the TrainJobStatus gate: ``progress()`` and the scheduler's describe
    (what NeMo-Run's experiment status shows) carry what the process last reported."""
    from kfcompile.integrations.nemo_run_scheduler import create_scheduler

    cluster.trainer_status = True
    ex = executor(num_nodes=2)
    ex.assign("exp", str(tmp_path), "train", "train")
    name, _ = ex.launch("train", ["python", "/app/train.py"], wait=True)
    list(ex.fetch_logs(name, stream=True))  # followed until the job ends
    got = ex.progress(name)
    assert got is not None and (got.percent, got.metrics) == (90, (("loss", "0.729"),))
    described = create_scheduler("s").describe(f"default:{name}")
    assert described is not None and "; progress 90% ETA 0s · loss 0.729 · " in described.msg
    assert ex.progress("nothing-here") is None


@SLOW
def test_run_run_shows_rank_0_and_the_last_rank_prefixed_by_the_task_and_keeps_every_rank(
    cluster: Any, nemo_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    run.run(run.Partial(train), executor=executor(num_nodes=3), name="readme")
    out = capfd.readouterr().out
    [job] = cluster.objects("TrainJob", "trainer.kubeflow.org/v1alpha1")
    name = job["metadata"]["name"]
    assert re.search(r"readme/0\S* rank 0 step", out) and re.search(r"readme/2\S* rank 2 step", out)
    assert "rank 1 step" not in out
    assert f"{name[-10:]}/" not in out  # not the last ten characters of the job name
    exp_dir = nemo_home / "experiments" / "readme" / _experiment_id(nemo_home, "readme")
    every = (exp_dir / "readme" / "log-allranks_0.out").read_text()
    assert all(f"readme/{r} rank {r} step" in every for r in range(3))

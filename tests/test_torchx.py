"""The TorchX scheduler ``kfcompile`` through the real torchx package: its registration, the
dry run of dist.ddp for every target checked against the destination release's CRD, how an
AppDef maps (and what cannot be mapped), and run -> status -> log -> list -> cancel through the
``torchx`` CLI, one process per command, against the local API server."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import schema_check
import yaml
from imported import imported_after

torchx = pytest.importorskip(
    "torchx", reason="torchx is not installed (CI installs it in its launcher environment)"
)

from fakekube.cluster import NAMESPACE, QUEUE, RELEASES, LocalCluster  # noqa: E402
from torchx import specs  # noqa: E402
from torchx.components import dist  # noqa: E402
from torchx.runner import get_runner  # noqa: E402
from torchx.schedulers import get_scheduler_factories  # noqa: E402

from kfcompile import TARGETS, lifecycle  # noqa: E402
from kfcompile.integrations import torchx as kfx  # noqa: E402
from kfcompile.lifecycle.ports import Ref  # noqa: E402
from kfcompile.status import JobState, State  # noqa: E402
from kfcompile.targets import target  # noqa: E402
from kfcompile.testing import courses  # noqa: E402

TRAINJOB = "trainer.kubeflow.org/v1alpha1"
MARKER = "=== SCHEDULER REQUEST ===\n"
TRACEBACK = "Traceback (most recent call last)"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory and home: no user .torchxconfig or kubeconfig leaks in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    return tmp_path


def torchx_process(
    cwd: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The ``torchx`` CLI in a new process: nothing survives between two of them."""
    return subprocess.run(
        [sys.executable, "-m", "torchx.cli.main", *argv],
        cwd=cwd,
        env=env or clean_env(cwd),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "TORCHXCONFIG")}
    return {**env, "HOME": str(home), **extra}


def request(out: str) -> list[dict[str, Any]]:
    """The objects ``--dryrun`` prints after torchx's request marker."""
    assert MARKER in out, out
    return [d for d in yaml.safe_load_all(out.split(MARKER, 1)[1]) if d]


def dryrun(app: Any, **cfg: Any) -> list[dict[str, Any]]:
    """The objects the scheduler would create for ``app``, through torchx's Runner."""
    with get_runner() as runner:
        info = runner.dryrun(app, "kfcompile", cfg=cfg)
    return [dict(o) for o in info.request.objects]


def role(**kwargs: Any) -> Any:
    base: dict[str, Any] = {"name": "trainer", "image": "ghcr.io/me/train:1"}
    return specs.Role(**{**base, **kwargs})


# --- registration -------------------------------------------------------------------------------


def test_the_scheduler_is_registered_beside_every_builtin() -> None:
    """torchx 0.7 shows only entry points once one exists: the built-ins must still be there,
    and work; nightlies merge them with their own."""
    from torchx.schedulers import DEFAULT_SCHEDULER_MODULES

    factories = get_scheduler_factories()
    assert "kfcompile" in factories
    assert set(DEFAULT_SCHEDULER_MODULES) <= set(factories)
    local = factories["local_cwd"](session_name="t")
    assert type(local).__module__ == "torchx.schedulers.local_scheduler"
    # torchx and NeMo-Run pass keyword arguments of their own
    ours = factories["kfcompile"](session_name="t", cache_size=3, docker_client=None)
    assert isinstance(ours, kfx.KfcompileScheduler) and ours.session_name == "t"
    assert {name for name, _ in ours.run_opts()} >= {
        "namespace", "target", "queue", "priority_class", "service_account", "runtime",
        "image_pull_secrets", "shm_size", "kubeconfig", "context",
    }  # fmt: skip


# --- the dry run --------------------------------------------------------------------------------


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_ddp_dryrun_through_the_cli_passes_the_release_crd(target_name: str, workdir: Path) -> None:
    schema_check.require_shared()
    done = torchx_process(
        workdir, "run", "--dryrun", "-s", "kfcompile",
        "-cfg", f"namespace=team-a,target={target_name},queue=q1",
        "dist.ddp", "-j", "2x8", "--gpu", "8", "--script", "train.py", "--", "--lr", "0.1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [job] = request(done.stdout)
    assert schema_check.crd_errors(job, schema_check.CRD_FILES[target_name]) == []
    meta = job["metadata"]
    assert meta["namespace"] == "team-a" and meta["name"].startswith("train-")
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "q1"
    assert meta["annotations"]["torchx.pytorch.org/role-name"] == "train"
    if job["kind"] == "TrainJob":
        trainer = job["spec"]["trainer"]
        assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 8)
        assert trainer["command"] == ["torchrun", "train.py", "--lr", "0.1"]
        assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "8"
        env = {e["name"]: e["value"] for e in trainer["env"]}
    else:
        replicas = job["spec"]["pytorchReplicaSpecs"]
        assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 1)
        assert job["spec"]["nprocPerNode"] == "8"
        [container] = replicas["Master"]["template"]["spec"]["containers"]
        assert container["command"][0] == "torchrun" and "--nnodes=2" in container["command"]
        assert container["command"][-3:] == ["train.py", "--lr", "0.1"]
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        env = {e["name"]: e["value"] for e in container["env"]}
    # torchx's own macro: the handle this job will have
    assert env["TORCHX_JOB_ID"] == f"kfcompile://torchx/team-a:{meta['name']}"


def test_the_dry_run_never_imports_the_kubernetes_client(workdir: Path) -> None:
    """It is a start-up path: the client and the adapter load only when a cluster is used."""
    code = (
        "from torchx.cli.main import main\n"
        "main(['run', '--dryrun', '-s', 'kfcompile', 'dist.ddp', '-j', '2x8', '--script', 't.py'])"
    )
    found, done = imported_after(
        code, {"kubernetes", "kfcompile_kube"}, workdir, clean_env(workdir)
    )
    assert found == [] and "kind: TrainJob" in done.stdout


def test_dryrun_is_what_kubectl_applies_and_what_run_creates(workdir: Path) -> None:
    """The printed YAML holds the objects exactly as ``schedule`` creates them (namespaced,
    labelled, with the spec hash), so applying it and submitting agree."""
    app = specs.AppDef("demo", roles=[role(entrypoint="python", args=["-c", "print(1)"])])
    with get_runner() as runner:
        info = runner.dryrun(app, "kfcompile", cfg={"namespace": "ns1"})
    request_ = info.request
    prepared = lifecycle.prepare(request_.spec, request_.target, "ns1", environ={})
    assert list(request_.objects) == list(prepared.objects)
    assert list(yaml.safe_load_all(str(info))) == list(prepared.objects)


def test_appdef_fields_land_in_the_job() -> None:
    schema_check.require_shared()
    app = specs.AppDef(
        "Big Model!",
        roles=[
            role(
                entrypoint="torchrun",
                args=[
                    "--nnodes",
                    "1:4",
                    "--nproc-per-node=4",
                    "--max_restarts=3",
                    "/app/t.py",
                    "--out",
                    "/ckpt/${app_id}",
                    "$(HOME)",
                ],
                num_replicas=4,
                min_replicas=1,
                env={"MODE": "$fast"},
                max_retries=2,
                resource=specs.Resource(
                    cpu=0.5,
                    gpu=4,
                    memMB=2048,
                    devices={"vpc.amazonaws.com/efa": 2},
                    capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
                ),
                mounts=[
                    specs.BindMount(src_path="/data", dst_path="/data", read_only=True),
                    specs.VolumeMount(src="ckpt", dst_path="/ckpt"),
                    specs.DeviceMount(src_path="/dev/infiniband", dst_path="/dev/infiniband"),
                ],
            )
        ],
    )
    [job] = dryrun(app, target="pytorchjob/v1", service_account="trainer", shm_size="16Gi",
                   image_pull_secrets=["regcred"], priority_class="high")  # fmt: skip
    assert schema_check.crd_errors(job, schema_check.CRD_FILES["pytorchjob/v1"]) == []
    name = job["metadata"]["name"]
    assert name.startswith("big-model-") and job["metadata"]["namespace"] == "default"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    spec = job["spec"]
    assert spec["runPolicy"]["backoffLimit"] == 2  # max_retries
    assert "Master" not in spec["pytorchReplicaSpecs"]  # elastic: workers only
    assert spec["elasticPolicy"]["minReplicas"] == 1 and spec["elasticPolicy"]["maxReplicas"] == 4
    assert spec["elasticPolicy"]["maxRestarts"] == 3
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert spec["nprocPerNode"] == "4"
    pod = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert schema_check.pod_template_errors({"spec": pod}) == []
    [container] = pod["containers"]
    # torchx's values mean themselves: Kubernetes' $(VAR) expansion is escaped
    assert container["command"][-4:] == ["/app/t.py", "--out", f"/ckpt/default:{name}", "$$(HOME)"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MODE"] == "$$fast"
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "2048Mi", "nvidia.com/gpu": "4",
                     "vpc.amazonaws.com/efa": "2"},
        "limits": {"cpu": "500m", "memory": "2048Mi", "nvidia.com/gpu": "4",
                   "vpc.amazonaws.com/efa": "2"},
    }  # fmt: skip
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert pod["serviceAccountName"] == "trainer"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["mount-0"]["hostPath"] == {"path": "/data"}
    assert volumes["mount-1"]["persistentVolumeClaim"] == {"claimName": "ckpt"}
    assert volumes["mount-2"]["hostPath"] == {"path": "/dev/infiniband"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["mount-0"] == {"name": "mount-0", "mountPath": "/data", "readOnly": True}
    assert "readOnly" not in mounts["mount-1"] and "readOnly" not in mounts["mount-2"]
    assert container["securityContext"] == {"privileged": True}  # a device mount


def test_a_non_torchrun_role_runs_verbatim() -> None:
    # torchx's macros read `$$` as `$`, so bash is to get `echo $HOSTNAME $$`; Kubernetes reads
    # `$$` as `$` too, so kfcompile writes each `$` twice.
    app = specs.AppDef("echo", roles=[role(entrypoint="bash", args=["-c", "echo $HOSTNAME $$$$"])])
    [job] = dryrun(app)
    trainer = job["spec"]["trainer"]
    assert trainer["command"] == ["bash"] and trainer["args"] == ["-c", "echo $$HOSTNAME $$$$"]
    assert trainer["numNodes"] == 1


def _command(job: dict[str, Any]) -> list[str]:
    if job["kind"] == "TrainJob":
        return list(job["spec"]["trainer"]["command"])
    replica = job["spec"]["pytorchReplicaSpecs"]["Master"]
    return list(replica["template"]["spec"]["containers"][0]["command"])


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_ddp_with_a_module_runs_it_with_torchrun_m(target_name: str) -> None:
    schema_check.require_shared()
    app = dist.ddp("--lr", "0.1", m="pkg.train", j="2x4", gpu=4)
    [job] = dryrun(app, target=target_name)
    assert schema_check.crd_errors(job, schema_check.CRD_FILES[target_name]) == []
    command = _command(job)
    assert command[0] == "torchrun" and command[-4:] == ["-m", "pkg.train", "--lr", "0.1"]


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_a_ddp_line_with_no_python_runs_the_file_itself(target_name: str) -> None:
    """dist.ddp's torchrun line with ``--no-python`` (each process executes the script, as
    NeMo-Run's torchrun runs a shell script) is the launcher's ``no_python``."""
    schema_check.require_shared()
    line = dist.ddp("--x", script="train.sh", j="2x4").roles[0].args[1]
    program = line.rindex(" train.sh")
    ddp = f"{line[:program]} --no-python{line[program:]}"
    app = specs.AppDef("sh", roles=[role(entrypoint="bash", args=["-c", ddp], num_replicas=2)])
    [job] = dryrun(app, target=target_name)
    assert schema_check.crd_errors(job, schema_check.CRD_FILES[target_name]) == []
    command = _command(job)
    assert command[0] == "torchrun" and command[-3:] == ["--no-python", "train.sh", "--x"]


@pytest.mark.parametrize(
    ("nnodes", "min_replicas", "elastic"),
    [("1:4", None, (1, 4)), ("2:4", 2, (2, 4)), ("4", 1, None), ("1:4", 2, "mismatch")],
)
def test_torchrun_nnodes_and_min_replicas_agree(
    nnodes: str, min_replicas: int | None, elastic: Any
) -> None:
    app = specs.AppDef(
        "e",
        roles=[
            role(
                entrypoint="torchrun",
                args=["--nnodes", nnodes, "t.py"],
                num_replicas=4,
                min_replicas=min_replicas,
            )
        ],
    )
    if elastic == "mismatch":
        with pytest.raises(kfx.SchedulerError, match="torchrun --nnodes 1:4 does not match"):
            dryrun(app, target="pytorchjob/v1")
        return
    [job] = dryrun(app, target="pytorchjob/v1")
    policy = job["spec"].get("elasticPolicy")
    got = (policy["minReplicas"], policy["maxReplicas"]) if policy else None
    assert got == elastic  # what torchrun waits for is what runs


def test_torchrun_runs_one_process_per_node_unless_told() -> None:
    app = specs.AppDef(
        "t",
        roles=[
            role(
                entrypoint="torchrun",
                args=["t.py"],
                resource=specs.Resource(cpu=1, gpu=8, memMB=1024),
            )
        ],
    )
    [job] = dryrun(app)
    assert job["spec"]["trainer"]["numProcPerNode"] == 1  # torchrun's default, not one per GPU


def test_the_name_fits_the_pods_of_the_target() -> None:
    """JobSet names pods `<job>-node-0-<rank>-<5>`: a long app name is cut to what fits for
    that many nodes, so the job really gets pods."""
    schema_check.require_shared()
    app = specs.AppDef(
        "x" * 80, roles=[role(entrypoint="python", args=["t.py"], num_replicas=1000)]
    )
    for target_name in ("trainjob/v2.3", "pytorchjob/v1"):
        [job] = dryrun(app, target=target_name)
        name = job["metadata"]["name"]
        limit = target(target_name).name_limit(kfx.dryrun(app, {"target": target_name}, "s").spec)
        assert len(name) == limit < 63
        assert schema_check.crd_errors(job, schema_check.CRD_FILES[target_name]) == []


@pytest.mark.parametrize(
    ("app", "cfg", "line"),
    [
        (
            specs.AppDef(
                "two", roles=[role(name="a", entrypoint="x"), role(name="b", entrypoint="y")]
            ),
            {},
            "roles: kfcompile runs one role per job; this app has a, b",
        ),
        (
            specs.AppDef("m", roles=[role(entrypoint="torchrun", args=["-m", "pkg/train"])]),
            {},
            "roles[0].args (torchrun line) (launcher.module): must be a Python module name",
        ),
        (
            specs.AppDef("m", roles=[role(entrypoint="x")]),
            {"runtime": "Not_A_Name"},
            "-cfg runtime (runtime_ref.name): ",
        ),
        (
            specs.AppDef("r", roles=[role(entrypoint="echo", args=[specs.macros.replica_id])]),
            {},
            "roles[0].args[0]: ${replica_id} differs by replica",
        ),
        (
            specs.AppDef("p", roles=[role(entrypoint="x", env={"PET_NODE_RANK": "1"})]),
            {},
            "roles[0].env (env.PET_NODE_RANK): reserved on TrainJob",
        ),
        (
            specs.AppDef("d", roles=[role(entrypoint="x", max_retries=3)]),
            {"target": "trainjob/v2.3"},
            "roles[0].max_retries (backoff_limit): not supported by trainjob/v2.3",
        ),
        (
            specs.AppDef("q", roles=[role(entrypoint="x")]),
            {"queue": "not a label"},
            "-cfg queue (queue): ",
        ),
        (
            specs.AppDef("n", roles=[role(entrypoint="x")]),
            {"namespace": "Team A"},
            "-cfg namespace (namespace): ",
        ),
        (
            specs.AppDef("m", roles=[role(entrypoint="x", metadata={"k": "v"})]),
            {},
            "roles[0].metadata: kfcompile reads no scheduler metadata",
        ),
        (
            specs.AppDef("t", roles=[role(entrypoint="x")]),
            {"target": "trainjob/v9"},
            "-cfg target: unknown target 'trainjob/v9'",
        ),
        (
            specs.AppDef(
                "c",
                roles=[
                    role(
                        entrypoint="x",
                        resource=specs.Resource(
                            cpu=1, gpu=0, memMB=1, capabilities={"zone": ["a"]}
                        ),
                    )
                ],
            ),
            {},
            "roles[0].resource.capabilities.zone: must be a node label value",
        ),
    ],
)
def test_what_cannot_run_is_one_line_naming_the_app_field(
    app: Any, cfg: dict[str, Any], line: str
) -> None:
    with pytest.raises(kfx.SchedulerError) as caught:
        dryrun(app, **cfg)
    lines = str(caught.value).splitlines()
    assert any(text.startswith(line) for text in lines), lines


def test_the_cli_prints_what_cannot_run_without_a_traceback(workdir: Path) -> None:
    done = torchx_process(
        workdir, "run", "--dryrun", "-s", "kfcompile", "-cfg", "target=trainjob/v2.1",
        "dist.ddp", "-j", "2x8", "--env", "PET_MASTER_ADDR=x", "--script", "train.py",
    )  # fmt: skip
    assert done.returncode == 1 and TRACEBACK not in done.stderr
    assert "roles[0].env (env.PET_MASTER_ADDR): reserved on TrainJob" in done.stderr


def test_an_unknown_cfg_key_is_refused_with_the_option_it_may_mean(workdir: Path) -> None:
    """torchx 0.7 drops unknown -cfg keys before the scheduler sees them: the job would run
    in `default`, not team-a."""
    done = torchx_process(
        workdir, "run", "--dryrun", "-s", "kfcompile", "-cfg", "namespce=team-a,Target=x,zzz=1",
        "dist.ddp", "-j", "1x1", "--script", "train.py",
    )  # fmt: skip
    assert done.returncode == 1 and TRACEBACK not in done.stderr and MARKER not in done.stdout
    assert "-cfg namespce: unknown field (did you mean 'namespace'?)" in done.stderr
    assert "-cfg Target: unknown field (did you mean 'target'?)" in done.stderr
    assert "-cfg zzz: unknown field (not a kfcompile -cfg field)" in done.stderr
    app = dist.ddp(script="train.py", j="1x1")
    with pytest.raises(kfx.SchedulerError) as caught:  # the Runner's callers too
        dryrun(app, namespace="team-a", queue_name="q")
    assert str(caught.value) == "-cfg queue_name: unknown field (did you mean 'queue'?)"


# --- describe -----------------------------------------------------------------------------------


def observation(state: State, *nodes: lifecycle.Node, total: int = 2) -> lifecycle.Observation:
    ref = Ref(TRAINJOB, "TrainJob", "ns", "demo")
    return lifecycle.Observation(ref, JobState(state, "Why", "what"), tuple(nodes), total)


def node(rank: int, phase: str, pod: str = "", restarts: int = 0) -> lifecycle.Node:
    return lifecycle.Node(rank, pod or f"demo-node-0-{rank}-x", phase, phase == "Running", restarts)


JOB = {"apiVersion": TRAINJOB, "kind": "TrainJob", "metadata": {"name": "demo"}}


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (State.PENDING, specs.AppState.PENDING),
        (State.SUSPENDED, specs.AppState.PENDING),  # Kueue queues by suspending
        (State.RUNNING, specs.AppState.RUNNING),
        (State.SUCCEEDED, specs.AppState.SUCCEEDED),
        (State.FAILED, specs.AppState.FAILED),
    ],
)
def test_job_states_map_to_torchx_app_states(state: State, expected: Any) -> None:
    described = kfx.describe_job("ns:demo", JOB, observation(state))
    assert described.state == expected
    assert described.msg == f"{state.value} (Why) what"


def test_each_rank_is_a_replica_with_the_state_of_its_current_pod() -> None:
    replaced = node(1, "Failed", "demo-node-0-1-old", restarts=0)
    current = node(1, "Running", "demo-node-0-1-new", restarts=2)
    seen = observation(State.RUNNING, node(0, "Running"), replaced, current, total=3)
    described = kfx.describe_job("ns:demo", JOB, seen)
    [status] = described.roles_statuses
    assert status.role == "node"  # no torchx role recorded: the training container's name
    assert [(r.id, r.state, r.hostname) for r in status.replicas] == [
        (0, specs.AppState.RUNNING, "demo-node-0-0-x"),
        (1, specs.AppState.RUNNING, "demo-node-0-1-new"),
        (2, specs.AppState.PENDING, ""),  # no pod yet
    ]
    assert described.num_restarts == 2
    assert [(r.name, r.num_replicas) for r in described.roles] == [("node", 3)]
    done = kfx.describe_job("ns:demo", JOB, observation(State.SUCCEEDED, total=1))
    assert done.roles_statuses[0].replicas[0].state == specs.AppState.SUCCEEDED  # pod is gone


def test_describe_carries_the_progress_the_training_process_reports() -> None:
    from datetime import UTC, datetime

    from kfcompile.progress import Progress

    seen = attrs.evolve(
        observation(State.RUNNING),
        progress=Progress(42, 90, (("loss", "0.31"),), datetime.now(UTC)),
    )
    described = kfx.describe_job("ns:demo", JOB, seen)
    assert described.msg.startswith("RUNNING (Why) what; progress 42% ETA 1m30s · loss 0.31 · ")


def test_a_job_being_deleted_is_cancelled() -> None:
    meta = {
        "name": "demo",
        "deletionTimestamp": "2026-12-01T00:00:00Z",
        "annotations": {"torchx.pytorch.org/role-name": "train"},
    }
    deleting = {**JOB, "metadata": meta}
    described = kfx.describe_job("ns:demo", deleting, observation(State.RUNNING))
    assert described.state == specs.AppState.CANCELLED
    assert described.roles_statuses[0].role == "train"


@pytest.mark.parametrize(
    ("app_id", "parts"), [("ns:demo", ("ns", "demo")), ("demo", (None, "demo"))]
)
def test_app_ids_are_namespace_and_name(app_id: str, parts: tuple[str | None, str]) -> None:
    assert kfx.split_app_id(app_id) == parts


@pytest.mark.parametrize("app_id", [":demo", "ns:", ""])
def test_a_malformed_app_id_is_refused(app_id: str) -> None:
    with pytest.raises(kfx.SchedulerError, match="expected NAMESPACE:NAME"):
        kfx.split_app_id(app_id)


# --- on a cluster -------------------------------------------------------------------------------


@pytest.fixture
def local() -> Iterator[LocalCluster]:
    # Time passes only when the test says; jobs run and then hang.
    with LocalCluster(schema_check.require_shared(), auto=False, scenario="hang") as cluster:
        yield cluster


def test_run_status_log_list_cancel_through_the_torchx_cli(
    local: LocalCluster, tmp_path: Path
) -> None:
    kubeconfig = str(local.kubeconfig)
    done = torchx_process(
        tmp_path, "run", "-s", "kfcompile", "-cfg", f"kubeconfig={kubeconfig}",
        "dist.ddp", "-j", "2x1", "--script", "train.py", "--", "--epochs", "3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [handle] = done.stdout.split()
    scheme, _, app_id = handle.rpartition("/")
    assert scheme == "kfcompile://torchx" and app_id.startswith(f"{NAMESPACE}:train-")
    name = app_id.split(":")[1]
    [job] = local.store.list(TRAINJOB, "TrainJob", NAMESPACE)
    assert job["metadata"]["name"] == name
    assert job["spec"]["trainer"]["command"] == ["torchrun", "train.py", "--epochs", "3"]

    local.clock.advance(1.0)  # running, one step logged, then hanging
    env = clean_env(tmp_path, KUBECONFIG=kubeconfig)  # the other commands: kubectl's way
    status = torchx_process(tmp_path, "status", handle, env=env)
    assert status.returncode == 0, status.stderr
    assert "State: RUNNING" in status.stdout
    assert "train[0]:RUNNING" in status.stdout and "train[1]:RUNNING" in status.stdout

    log = torchx_process(tmp_path, "log", f"{handle}/train/1", env=env)
    assert log.returncode == 0, log.stderr
    assert log.stdout.splitlines() == [
        "train/1 rank 1: starting",
        "train/1 rank 1 step 1 loss 0.9",
    ]

    tail = subprocess.Popen(
        [sys.executable, "-m", "torchx.cli.main", "log", "--tail", f"{handle}/train/0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert tail.stdout is not None
        seen = [tail.stdout.readline() for _ in range(2)]  # what the rank had logged so far
        assert seen[1] == "train/0 rank 0 step 1 loss 0.9\n", seen
        local.fake.log(NAMESPACE, courses.pod_name(name, 0), "rank 0 step 2 loss 0.81")
        assert tail.stdout.readline() == "train/0 rank 0 step 2 loss 0.81\n"  # as it comes

        listed = torchx_process(tmp_path, "list", "-s", "kfcompile", env=env)
        assert listed.returncode == 0, listed.stderr
        [row] = [line.split() for line in listed.stdout.splitlines() if handle in line]
        assert row[0] == handle and row[-1] == "RUNNING"

        cancel = torchx_process(tmp_path, "cancel", handle, env=env)
        assert cancel.returncode == 0, cancel.stderr
        local.clock.advance(1.0)  # the garbage collector deletes its pods
        _, err = tail.communicate(timeout=60)  # the job is gone: the tail ends
    finally:
        tail.kill()
    assert tail.returncode == 0, err
    local.store.collect()
    assert local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    assert local.store.list("v1", "Pod", NAMESPACE) == []
    gone = torchx_process(tmp_path, "status", handle, env=env)
    assert gone.returncode == 1 and "does not exist" in gone.stderr


def test_cancel_of_a_job_kueue_manages_ends_it(local: LocalCluster, workdir: Path) -> None:
    """Issue 28, item 1: deleted in the foreground, a TrainJob Kueue manages never went (the
    Trainer re-created its JobSet while it waited for it); deleted in the background, it goes
    at once, and its JobSet, Job and pods after it."""
    app = specs.AppDef("demo", roles=[role(entrypoint="python", args=["-c", "1"])])
    with get_runner() as runner:
        handle = runner.run(
            app, "kfcompile", cfg={"kubeconfig": str(local.kubeconfig), "queue": QUEUE}
        )
        local.clock.advance(1.0)  # admitted, running
        assert local.store.list("v1", "Pod", NAMESPACE) != []
        runner.cancel(handle)
    assert local.store.list(TRAINJOB, "TrainJob", NAMESPACE) == []
    local.clock.advance(1.0)
    for api_version, kind in (
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
    ):
        assert local.store.list(api_version, kind, NAMESPACE) == [], kind


def test_run_without_a_target_renders_for_the_release_the_cluster_runs(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 23, 5: the scheduler rendered trainjob/v2.3 unless told otherwise, which a Trainer
    v2.1 cluster refuses (strict decoding: unknown fields). It detects the release as
    ``kfcompile submit`` does, once per kubeconfig and context, and says which it chose."""
    shared = schema_check.require_shared()
    with LocalCluster(shared, auto=False, scenario="hang", crds=RELEASES["trainjob/v2.1"]) as local:
        app = specs.AppDef("demo", roles=[role(entrypoint="python", args=["-c", "1"])])
        cfg = {"kubeconfig": str(local.kubeconfig)}
        with (
            caplog.at_level(logging.INFO, logger="kfcompile.integrations.torchx"),
            get_runner() as runner,
        ):
            runner.run(app, "kfcompile", cfg=cfg)
            asked = local.kube.requests.count("GET", "/customresourcedefinitions/")
            runner.run(app, "kfcompile", cfg=cfg)
            assert (
                local.kube.requests.count("GET", "/customresourcedefinitions/") == asked
            )  # cached
        jobs_made = local.store.list(TRAINJOB, "TrainJob", NAMESPACE)
    assert [j["metadata"]["annotations"]["kfcompile.dev/target"] for j in jobs_made] == [
        "trainjob/v2.1"
    ] * 2
    said = [r.getMessage() for r in caplog.records if r.name == "kfcompile.integrations.torchx"]
    assert said == [
        "target trainjob/v2.1, detected from the cluster: the served TrainJob CRD has "
        "spec.podTemplateOverrides"
    ], said


def test_a_dry_run_with_no_cluster_configured_says_it_uses_the_default(workdir: Path) -> None:
    done = torchx_process(workdir, "run", "--dryrun", "-s", "kfcompile", "utils.echo")
    assert done.returncode == 0, done.stderr
    assert "kind: TrainJob" in done.stdout and "kfcompile.dev/target: trainjob/v2.3" in done.stdout
    assert (
        "target trainjob/v2.3 (the default): no cluster configured to detect it from; give -cfg "
        "target=TARGET to choose"
    ) in done.stderr


@pytest.mark.parametrize(
    ("argv", "env", "said"),
    [
        (  # no kubeconfig anywhere: what TorchX takes, not the kfcompile CLI's --kubeconfig
            ["status", "kfcompile://torchx/default:demo"],
            {},
            "file not found (set KUBECONFIG or give -cfg kubeconfig=PATH or kubeconfig = PATH "
            "in .torchxconfig's [kfcompile] section)",
        ),
        (
            ["run", "-s", "kfcompile", "-cfg", "kubeconfig=missing.yaml", "utils.echo"],
            {},
            "kubeconfig missing.yaml: file not found (from -cfg kubeconfig or .torchxconfig)",
        ),
    ],
)
def test_hints_name_what_torchx_takes(
    workdir: Path, argv: list[str], env: dict[str, str], said: str
) -> None:
    done = torchx_process(workdir, *argv, env=clean_env(workdir, **env))
    assert done.returncode == 1 and TRACEBACK not in done.stderr, done.stderr
    assert said in done.stderr and "--kubeconfig" not in done.stderr, done.stderr


def test_status_reads_the_kubeconfig_from_torchxconfig(local: LocalCluster, workdir: Path) -> None:
    """Commands torchx passes no run options (status, log, cancel) read them from the
    ``[kfcompile]`` section of .torchxconfig, as ``run`` does."""
    app = specs.AppDef("demo", roles=[role(entrypoint="python", args=["-c", "1"])])
    (workdir / ".torchxconfig").write_text(f"[kfcompile]\nkubeconfig = {local.kubeconfig}\n")
    with get_runner() as runner:
        handle = runner.run(app, "kfcompile", cfg={"kubeconfig": str(local.kubeconfig)})
    local.clock.advance(1.0)
    with get_runner() as runner:  # a new scheduler: nothing of the run is left in it
        status = runner.status(handle)
    assert status is not None and status.state == specs.AppState.RUNNING


def test_cluster_trouble_in_the_torchx_cli_is_one_line(workdir: Path) -> None:
    """torchx's CLI lets a scheduler's exception end status/describe/log/cancel with a
    traceback: kfcompile's end with their one line, and exit 1."""
    env = clean_env(workdir, KUBECONFIG=str(workdir / "nonexistent"))
    handle = "kfcompile://torchx/default:demo"
    for argv in (["status", handle], ["describe", handle], ["log", f"{handle}/train/0"]):
        done = torchx_process(workdir, *argv, env=env)
        assert done.returncode == 1, (argv, done.stderr)
        assert TRACEBACK not in done.stderr, (argv, done.stderr)
        [line] = [line for line in done.stderr.splitlines() if "ERROR" in line]
        assert "no cluster configuration: kubeconfig" in line, (argv, line)


def test_describe_and_log_through_the_cli_on_a_two_replica_job(
    local: LocalCluster, tmp_path: Path
) -> None:
    """``describe`` fills the role from what the job holds; a replica the job does not have
    is one line."""
    env = clean_env(tmp_path, KUBECONFIG=str(local.kubeconfig))
    done = torchx_process(
        tmp_path, "run", "-s", "kfcompile", "dist.ddp", "-j", "2x4", "--gpu", "4",
        "--cpu", "8", "--memMB", "32768", "--env", "MODE=fast", "--script", "train.py",
        "--", "--epochs", "3", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [handle] = done.stdout.split()
    described = torchx_process(tmp_path, "describe", handle, env=env)
    assert described.returncode == 0, described.stderr
    role = " ".join(described.stdout.split())  # torchx pretty-prints the AppDef
    assert "'image': 'ghcr.io/pytorch/torchx:" in role, role
    assert "'entrypoint': 'torchrun'" in role, role
    args = "'--nnodes', '2', '--nproc_per_node', '4', 'train.py', '--epochs', '3'"
    assert f"'args': [ {args}]" in role, role
    assert "'num_replicas': 2" in role and "'MODE': 'fast'" in role, role
    assert "'cpu': 8.0, 'devices': {}, 'gpu': 4, 'memMB': 32768" in role, role

    log = torchx_process(tmp_path, "log", f"{handle}/train/5", env=env)
    assert log.returncode == 1 and TRACEBACK not in log.stderr, log.stderr
    [line] = log.stderr.splitlines()
    assert line.endswith("ERROR    " + handle.rpartition("/")[2] + " has replicas 0 to 1 (not 5)")

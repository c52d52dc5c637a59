"""Whole clusters with Kubeflow installed, for the suite (``install``: the upstream CRDs and
runtimes of ``../shared``, what is created held to them, a claim and a Kueue queue); each job
lives a row of ``LIVES`` (``live``). ``PortCluster``: behind the port on the fake clock (the CLI
too: ``wired``); ``LocalCluster``: over HTTP, its clock in step with real time; ``TwoClusters``:
a MultiKueue manager and its worker. Every call the commands make to them is recorded for the
RBAC audit (``audit.AUDIT``)."""

from __future__ import annotations

import functools
import io
import json
import random
import re
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Self

import pytest
import schema_check
import yaml

import kfcompile_kube
from kfcompile.lifecycle import Session
from kfcompile.testing import Exec, ExecAnswer, FakeClock, FakeCluster, FakeConnection, courses
from kfcompile.testing import kueue as fake_kueue
from kfcompile.testing.store import Store
from kfcompile_kube import KubeCluster, connect
from kfcompile_local import SystemClock

from .audit import AUDIT
from .server import FakeKube, PacedClock, checked, write_kubeconfig

NAMESPACE, CLAIM, QUEUE = "default", "work", "team-a"
CRDS: Final = ("trainjobs-v2.3.0.yaml", "pytorchjobs-v1.9.4.yaml")
RELEASES: Final = {"trainjob/v2.0": ("trainjobs-v2.0.1.yaml",),
                   "trainjob/v2.1": ("trainjobs-v2.1.0.yaml",),
                   "trainjob/v2.2": ("trainjobs-v2.2.1.yaml",),
                   "trainjob/v2.3": ("trainjobs-v2.3.0.yaml",),
                   "pytorchjob/v1": ("pytorchjobs-v1.9.4.yaml",)}  # fmt: skip
SERVES: Final = {"v1beta2": ("v1beta2",), "both": ("v1beta2", "v1beta1"), "v1beta1": ("v1beta1",)}
FROM_CRDS: Final = "from the CRDs"  # trainer=: the release of the TrainJob CRD installed
# How a job of each scenario lives (``courses.runs``' arguments): in a cluster of that
# scenario, or annotated ``SCENARIO_ANNOTATION`` with its name (``live``).
LIVES: Final[dict[str, dict[str, Any]]] = {
    "succeeds": {"steps": 3},
    "fails": {"steps": 1, "reason": "FailedJobs"},
    "hang": {"steps": 1, "ends": None},  # runs, logs a training step, and never ends
    "unschedulable": {"waits": "Unschedulable"},
    "image_pull": {"waits": "ImagePullBackOff"},
    "invalid_image": {"waits": "InvalidImageName"},
    "deadline": {"steps": 1, "reason": "DeadlineExceeded"},
    "restarts": {"steps": 1, "ends": 1.5, "restarts": 0.6},  # a PyTorchJob's Restarting
}
SCENARIO_ANNOTATION: Final = "fake.kfcompile.dev/scenario"
PACE: Final = 0.1  # over HTTP jobs live ten times as fast as LIVES says (in real time)


@functools.cache
def upstream_runtime(shared: Path, name: str) -> dict[str, Any]:
    """The upstream ClusterTrainingRuntime ``name``, as Trainer v2.3.0 installs it (one object:
    a store keeps a copy of what is created)."""
    path = shared / "crds/runtimes" / f"{name.replace('-', '_')}-v2.3.0.yaml"
    runtime: dict[str, Any] = yaml.safe_load(path.read_text())
    return runtime


def install(store: Store, shared: Path, crds: tuple[str, ...], runtime: bool = True,
            trainer: str | None = FROM_CRDS, serves: str | None = "v1beta2") -> None:  # fmt: skip
    """What a cluster with Kubeflow has before a test starts: ``crds`` (with the runtimes'),
    the Trainer's ConfigMap saying ``trainer`` (by default the release of the TrainJob CRD, none
    before v2.2), the upstream runtimes, the claim ``CLAIM``, Kueue serving ``SERVES[serves]``
    with the LocalQueue ``QUEUE`` (None: no Kueue); what is created is ``checked``."""
    for name in (*crds, "clustertrainingruntimes-v2.3.0.yaml", "trainingruntimes-v2.3.0.yaml"):
        store.create(schema_check.load_crd(name))
    if trainer == FROM_CRDS:
        found = next((m[1] for c in crds if (m := re.fullmatch(r"trainjobs-(v[\d.]+)\.yaml", c))),
                     None)  # fmt: skip
        trainer = found if found and not found.startswith(("v2.0.", "v2.1.")) else None
    if trainer is not None:
        courses.release(store, trainer)
    for name in ("torch-distributed", "torch-distributed-with-cache") if runtime else ():
        store.create(upstream_runtime(shared, name))
    store.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                  "metadata": {"name": CLAIM, "namespace": NAMESPACE},
                  "spec": {"accessModes": ["ReadWriteMany"],
                           "resources": {"requests": {"storage": "1Gi"}}}})  # fmt: skip
    if serves is not None:
        patches = any(re.fullmatch(r"trainjobs-v2\.[2-9].*", c) for c in crds)
        fake_kueue.install(store, SERVES[serves], patches=patches, queue=QUEUE)
    checked(store)


def live(fake: FakeCluster, job: dict[str, Any], scenario: str, *, admits: float = 0.5,
         reports: Callable[[], bool] = lambda: False, pace: float = 1.0) -> None:  # fmt: skip
    """What happens to a job just created: the row of ``LIVES`` its annotation names (else
    ``scenario``), after Kueue admits it (``admits`` seconds later) if it is queued; ``pace``:
    each of its times so many times as long."""
    annotations = job["metadata"].get("annotations") or {}
    lives = {"starts": 0.2, "ends": 1.0, **LIVES[annotations.get(SCENARIO_ANNOTATION, scenario)]}
    for when in ("starts", "ends", "restarts"):
        lives[when] = lives[when] * pace if lives.get(when) is not None else None
    lives["reports"] = reports
    if fake_kueue.queue_of(job) is not None:
        courses.queued(fake, admits=admits * pace, **lives)(job)
    else:
        courses.runs(fake, **lives)(job)


def helper_tar(fake: FakeCluster) -> dict[str, bytes]:
    """The sync helper pod's ``tar``, as ``fake.on_exec``: the stream a ``tar -xf - -C DIR``
    reads is kept (the dict returned, by DIR), a ``tar -cf - -C DIR .`` answers what DIR was
    last sent (exit 2, tar's words, when nothing was); ``mkdir -p`` succeeds, any other command
    is not found (127)."""
    sent: dict[str, bytes] = {}

    def run(call: Exec) -> ExecAnswer:
        match list(call.command):
            case ["mkdir", "-p", _]:
                return ExecAnswer()
            case ["tar", "-xf", "-", "-C", where]:
                sent[where] = call.stdin
                return ExecAnswer()
            case ["tar", "-cf", "-", "-C", where, "."] if where in sent:
                return ExecAnswer(stdout=sent[where])
            case ["tar", "-cf", "-", "-C", where, "."]:
                said = f"tar: {where}: Cannot open: No such file or directory\n"
                return ExecAnswer(stderr=said.encode(), exit_code=2)
        return ExecAnswer(stderr=f"sh: {call.command[0]}: not found\n".encode(), exit_code=127)

    fake.on_exec = run
    return sent


def members(stream: bytes) -> dict[str, bytes]:
    """The regular files of a tar stream (hard links with their target's bytes), by name."""
    with tarfile.open(fileobj=io.BytesIO(stream)) as tar:
        return {m.name: (tar.extractfile(m) or io.BytesIO()).read() for m in tar
                if m.isfile() or m.islnk()}  # fmt: skip


class _Kubeflow:
    """Kubeflow installed in ``fake`` (a ``FakeCluster`` on ``clock``), its sync helper pods'
    ``tar`` answering (``sent``), every call audited."""

    def __init__(self, shared: Path, clock: FakeClock, crds: tuple[str, ...], runtime: bool,
                 trainer: str | None, kueue: str | None) -> None:  # fmt: skip
        self.clock = clock
        self.fake = FakeCluster(clock)
        self.store, self.calls = self.fake.store, self.fake.calls
        install(self.store, shared, crds, runtime, trainer, kueue)
        self.sent = helper_tar(self.fake)
        AUDIT.calls(self.calls, self.store)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def objects(self, kind: str, api_version: str = "v1") -> list[dict[str, Any]]:
        return self.store.list(api_version, kind, NAMESPACE)


class PortCluster(_Kubeflow):
    """Kubeflow behind the port on a ``FakeClock``: nothing moves a job but what the test
    scripts, or, given a ``scenario``, each job lives that row of ``LIVES``; ``controllers``:
    sync helper pods start, a suspended job stops."""

    def __init__(self, shared: Path, *, step: float = 0.1, crds: tuple[str, ...] = CRDS,
                 runtime: bool = True, trainer: str | None = FROM_CRDS,
                 kueue: str | None = "v1beta2", clock: FakeClock | None = None,
                 scenario: str | None = None, controllers: bool = False) -> None:  # fmt: skip
        super().__init__(shared, clock or FakeClock(step=step), crds, runtime, trainer, kueue)
        self.faults = self.fake.faults
        if scenario is not None:
            self.store.on_create.append(lambda job: live(self.fake, job, scenario))
        if controllers:
            self.store.on_create.append(courses.helpers(self.fake))
            self.store.on_patch.append(courses.suspends(self.fake))

    def wire(self, monkeypatch: pytest.MonkeyPatch, namespace: str = "default") -> Self:
        """The CLI, TorchX and NeMo-Run reach this cluster (``wired``)."""
        wired(monkeypatch, {"fake": self.fake}, "fake", namespace)
        return self

    def settle(self) -> None:
        """Let the garbage collector finish what it can (two of its ticks)."""
        self.clock.advance(2 * self.clock.step)

    def session(self, retry_for: float = 5.0) -> Session:
        return self.fake.session(retry_for=retry_for)


def cli(monkeypatch: pytest.MonkeyPatch, *, namespace: str = "default",
        scenario: str | None = "succeeds", **options: Any) -> PortCluster:  # fmt: skip
    """A ``PortCluster`` the CLI reaches, its clock at the wall time (the CLI shows ages), its
    jobs living ``scenario``, its controllers running (``options``: ``PortCluster``'s)."""
    clock = FakeClock(start=time.time())
    found = PortCluster(schema_check.require_shared(), clock=clock, scenario=scenario,
                        controllers=True, **options)  # fmt: skip
    return found.wire(monkeypatch, namespace)


def wired(monkeypatch: pytest.MonkeyPatch, contexts: Mapping[str, FakeCluster], current: str,
          namespace: str = "default") -> None:  # fmt: skip
    """``kfcompile_kube.session`` and ``connect`` (the CLI's, TorchX's and NeMo-Run's way to a
    cluster) reach these fakes by kubeconfig context (``current`` when none is given), in
    ``namespace``; another context is a ``ConfigError``, as a kubeconfig without it."""

    def session(kubeconfig: str | None = None, context: str | None = None,
                **options: Any) -> tuple[Session, FakeConnection]:  # fmt: skip
        if (context or current) not in contexts:  # (the adapter's words)
            raise kfcompile_kube.ConfigError(f"kubeconfig (the fakes'): no context {context!r} "
                                             f"(available: {', '.join(contexts)})")  # fmt: skip
        found, connection = contexts[context or current].connect(kubeconfig, context or current,
                                                                 **options)  # fmt: skip
        connection.namespace = namespace
        return found, connection

    def connected(kubeconfig: str | None = None, context: str | None = None,
                  **options: Any) -> FakeConnection:  # fmt: skip
        return session(kubeconfig, context)[1]

    monkeypatch.setattr(kfcompile_kube, "session", session)
    monkeypatch.setattr(kfcompile_kube, "connect", connected)


class LocalCluster(_Kubeflow):
    """Kubeflow over HTTP (``kube``, ``kubeconfig``): each job lives ``scenario`` (None: only
    what the test adds to ``store.on_create``), ten times as fast; sync helper pods start, a
    suspended job stops; the clock runs in step with real time (``auto=False``: only as the
    test advances it)."""

    def __init__(
        self,
        shared: Path,
        *,
        step: float = 0.01,
        scenario: str | None = "succeeds",
        crds: tuple[str, ...] = CRDS,
        runtime: bool = True,
        auto: bool = True,
        trainer: str | None = FROM_CRDS,
        kueue: str | None = "v1beta2",
    ) -> None:
        super().__init__(shared, PacedClock(step), crds, runtime, trainer, kueue)
        self.kube = FakeKube(fake=self.fake, ticking=auto)
        self.trainer_status = False  # the Trainer's TrainJobStatus gate: steps reported
        self.admits = 0.5  # seconds Kueue takes to admit a queued job (math.inf: never)
        self.store.on_create.append(courses.helpers(self.fake, after=0.0))
        self.store.on_patch.append(courses.suspends(self.fake))
        if scenario is not None:
            self.store.on_create.append(lambda job: live(
                self.fake, job, scenario, admits=self.admits, pace=PACE,
                reports=lambda: self.trainer_status))  # fmt: skip
        self._tmp = tempfile.TemporaryDirectory(prefix="kfcompile-cluster-")
        self.kubeconfig = Path(self._tmp.name) / "kubeconfig"

    def __enter__(self) -> Self:
        self.kube.__enter__()
        self.kube.kubeconfig(self.kubeconfig, namespace=NAMESPACE)
        return self

    def __exit__(self, *exc: object) -> None:
        self.kube.__exit__()
        self._tmp.cleanup()

    def run_once_watched(self, *plurals: str, seconds: float = 60.0) -> threading.Thread:
        """Let ``seconds`` of fake time pass once each of ``plurals`` is watched (``auto=False``):
        a waiter sees each change as it happens, whatever the machine's speed."""

        def run() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not all(
                self.kube.requests.count("GET", f"/{plural}", watch=True) for plural in plurals
            ):
                time.sleep(0.01)
            self.clock.advance(seconds)

        ran = threading.Thread(target=run, daemon=True)
        ran.start()
        return ran

    def session(self, retry_for: float = 5.0, request_timeout: float = 5.0) -> Session:
        conn = connect(str(self.kubeconfig))
        cluster = KubeCluster(conn.api_client, request_timeout=request_timeout)
        return Session(cluster, SystemClock(), jitter=random.random, retry_for=retry_for)


@contextmanager
def with_demo(shared: Path, *, running: bool = False) -> Iterator[LocalCluster]:
    """A local cluster whose jobs never end, with a job ``demo`` submitted through the CLI
    (``running``: once it runs, its pod's log started)."""
    from kfcompile.cli import main

    with LocalCluster(shared, scenario="hang") as cluster, tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "job.yaml"
        spec.write_text(yaml.safe_dump({"name": "demo", "image": "python:3.11-slim",
                                        "command": ["true"]}))  # fmt: skip
        submit = ["submit", str(spec), "--kubeconfig", str(cluster.kubeconfig)]
        assert main([*submit, "--wait", "running"] if running else submit) == 0
        yield cluster


class TwoClusters:
    """A MultiKueue manager and its worker (``WORKER``) behind the port, on one clock: each job
    of ``QUEUE`` on the manager is mirrored to the worker, where it lives ``scenario``. ``wire``
    makes the CLI reach the manager as context ``manager`` and the worker as
    ``worker_context`` (None: no way to it), with a cluster mapping file (``clusters_file``,
    for ``$KFCOMPILE_CLUSTERS``) that maps the worker for the manager when ``mapped``."""

    WORKER: Final = fake_kueue.WORKER

    def __init__(
        self,
        shared: Path,
        *,
        worker_context: str | None = fake_kueue.WORKER,
        scenario: str = "succeeds",
        kueue: str = "v1beta2",
        mapped: bool = True,
    ) -> None:
        self.clock, self.scenario = FakeClock(start=time.time()), scenario
        self.manager = PortCluster(shared, kueue=kueue, clock=self.clock)
        self.worker = PortCluster(shared, kueue=kueue, clock=self.clock)
        fake_kueue.multikueue(self.manager.store, QUEUE)
        self.worker.store.on_create.append(lambda job: live(self.worker.fake, job, self.scenario))
        dispatches = fake_kueue.dispatches(self.manager.fake, self.worker.fake)
        self.manager.store.on_create.append(dispatches)
        self.worker_context, self.mapped = worker_context, mapped and worker_context is not None
        self._tmp = tempfile.TemporaryDirectory(prefix="kfcompile-two-")
        self.clusters_file = Path(self._tmp.name) / "clusters.yaml"
        workers = {fake_kueue.WORKER: worker_context} if self.mapped else {}
        self.clusters_file.write_text(json.dumps({"managers": {"manager": workers}}))
        # A kubeconfig naming the contexts (where a launcher looks for one): never connected
        # to (the fakes are ``wire``d in), its servers resolve nowhere (RFC 6761).
        names = ["manager", *([worker_context] if worker_context else [])]
        self.kubeconfig = write_kubeconfig(Path(self._tmp.name) / "kubeconfig",
                                           {n: f"https://{n}.invalid" for n in names},
                                           token="never-sent", namespace=NAMESPACE)  # fmt: skip

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._tmp.cleanup()

    def wire(self, monkeypatch: pytest.MonkeyPatch) -> None:
        contexts = {"manager": self.manager.fake}
        if self.worker_context is not None:
            contexts[self.worker_context] = self.worker.fake
        wired(monkeypatch, contexts, "manager")

    def settle(self, seconds: float = 5.0) -> None:
        """Let ``seconds`` pass on both."""
        self.clock.advance(seconds)

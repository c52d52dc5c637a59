"""A whole local "cluster" for lifecycle tests and benchmarks, with what a Kubeflow install
provides (its CRDs, the ``torch-distributed`` runtimes, the Trainer's public ConfigMap), plus a
claim and a Kueue queue; each job's life scripted by ``fakekube.jobs`` on a ``FakeClock``.
``PortCluster``: behind the ``Cluster`` port (``PortFake``), on the fake clock alone;
``LocalCluster``: the same store over real HTTP (``kubeconfig`` for the CLI), its clock in step
with real time. One release: ``crds=RELEASES["trainjob/v2.1"]``; from v2.2 the Trainer's
ConfigMap says the release (``trainer="v2.4.0"``: one newer than any CRD file here).
"""

from __future__ import annotations

import functools
import math
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, Self

import yaml

from kfcompile.lifecycle import Session
from kfcompile.spec.additions import QUEUE_LABEL
from kfcompile_kube import KubeCluster, connect
from kfcompile_local import SystemClock

from . import jobs
from . import kueue as fake_kueue
from .audit import AUDIT
from .clock import FakeClock, fixed_jitter
from .port import PortFake
from .server import FakeKube

NAMESPACE = "default"
CLAIM = "work"
QUEUE = "team-a"
CRDS = ("trainjobs-v2.3.0.yaml", "pytorchjobs-v1.9.4.yaml")
# What a cluster of each release serves: the upstream CRD files in ../shared/crds.
RELEASES: dict[str, tuple[str, ...]] = {
    "trainjob/v2.0": ("trainjobs-v2.0.1.yaml",),
    "trainjob/v2.1": ("trainjobs-v2.1.0.yaml",),
    "trainjob/v2.2": ("trainjobs-v2.2.1.yaml",),
    "trainjob/v2.3": ("trainjobs-v2.3.0.yaml",),
    "pytorchjob/v1": ("pytorchjobs-v1.9.4.yaml",),
}
# The Trainer's public ConfigMap (from v2.2), in the Trainer's namespace.
TRAINER_NAMESPACE = "kubeflow-system"
TRAINER_CONFIGMAP = "kubeflow-trainer-public"
FROM_CRDS = "from the CRDs"  # trainer=: the version of the TrainJob CRD file installed
# How a job of each scenario lives (``jobs.runs``'s arguments; ``live``): in a LocalCluster of
# that scenario, or annotated ``SCENARIO_ANNOTATION`` with its name.
LIVES: dict[str, dict[str, Any]] = {
    "succeeds": {"steps": 3},
    "fails": {"steps": 1, "reason": "FailedJobs"},
    "hang": {"steps": 1, "ends": None},  # runs, logs a training step, and never ends
    "unschedulable": {"waits": "Unschedulable"},
    "image_pull": {"waits": "ImagePullBackOff"},
    "invalid_image": {"waits": "InvalidImageName"},
    "deadline": {"steps": 1, "reason": "DeadlineExceeded"},
    "restarts": {"steps": 1, "ends": 1.5, "restarts": 0.6},  # a PyTorchJob's Restarting
}
# A LocalCluster's jobs live ten times as fast as LIVES says (a life of 0.1 s: as short as the
# CLI's tests can wait for, in real time, on a clock in step with it).
PACE = 0.1
SCENARIO_ANNOTATION = "fake.kfcompile.dev/scenario"


# The upstream ClusterTrainingRuntimes a cluster has (../shared/crds/runtimes): the default, and
# one whose dataset initializer runs before the nodes.
RUNTIMES = ("torch-distributed", "torch-distributed-with-cache")


def upstream_runtime(shared: Path, name: str) -> dict[str, Any]:
    """The upstream ClusterTrainingRuntime ``name``, as Trainer v2.3.0 installs it."""
    path = shared / "crds/runtimes" / f"{name.replace('-', '_')}-v2.3.0.yaml"
    runtime: dict[str, Any] = yaml.safe_load(path.read_text())
    return runtime


@functools.cache
def load_crd(path: Path) -> dict[str, Any]:
    """The parsed CRD file, one object per file (validators are cached per CRD object)."""
    crd: dict[str, Any] = yaml.load(path.read_text(), Loader=yaml.CSafeLoader)
    return crd


def trainer_configmap(version: str) -> dict[str, Any]:
    """The ConfigMap a Trainer from v2.2 installs, which says its release."""
    meta = {"name": TRAINER_CONFIGMAP, "namespace": TRAINER_NAMESPACE}
    data = {"kubeflow_trainer_version": version}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def live(fake: jobs.Fake, job: dict[str, Any], scenario: str, *, admits: float = 0.5,
         reports: Callable[[], bool] = lambda: False, pace: float = 1.0) -> None:  # fmt: skip
    """What happens to a job just created: the row of ``LIVES`` its annotation names (else
    ``scenario``), after Kueue admits it (``admits`` s later) if it is queued; ``pace``: each
    of its times so many times as long (its pods run 0.2 s after its create, by default)."""
    annotations = job["metadata"].get("annotations") or {}
    lives = {"starts": 0.2, "ends": 1.0, **LIVES[annotations.get(SCENARIO_ANNOTATION, scenario)]}
    for when in ("starts", "ends", "restarts"):
        if lives.get(when) is not None:
            lives[when] *= pace
    lives["reports"] = reports
    if QUEUE_LABEL in (job["metadata"].get("labels") or {}):
        jobs.kueue(fake, admits=admits * pace, **lives)(job)
    else:
        jobs.runs(fake, **lives)(job)


class Seeded(Protocol):
    def create(self, obj: dict[str, Any]) -> object: ...


def install(store: Seeded, shared: Path, crds: tuple[str, ...], runtime: bool,
            trainer: str | None = FROM_CRDS, serves: str | None = "v1beta2") -> None:  # fmt: skip
    """What a cluster with Kubeflow has before a test starts. ``trainer``: the version the
    Trainer's public ConfigMap says (by default that of the TrainJob CRD installed, and none
    before v2.2, which had no such ConfigMap); None: no ConfigMap. ``serves``: the Kueue API
    versions served (a key of ``kueue.SERVES``: by default only v1beta2, as Kueue v0.20 on;
    None: no Kueue), with the LocalQueue ``QUEUE``."""
    for name in (*crds, "clustertrainingruntimes-v2.3.0.yaml", "trainingruntimes-v2.3.0.yaml"):
        store.create(load_crd(shared / "crds" / name))
    if trainer == FROM_CRDS:
        pattern = r"trainjobs-(v\d+\.\d+\.\d+)\.yaml"
        found = next((m[1] for c in crds if (m := re.fullmatch(pattern, Path(c).name))), None)
        trainer = found if found and not found.startswith(("v2.0.", "v2.1.")) else None
    if trainer is not None:
        meta = {"name": TRAINER_NAMESPACE}
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        store.create(trainer_configmap(trainer))
    if runtime:
        for name in RUNTIMES:
            store.create(upstream_runtime(shared, name))
    claim = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
    seeded = [("v1", "PersistentVolumeClaim", CLAIM, claim)]
    if serves is not None:
        fake_kueue.install(store, shared, serves)
        queues = (
            fake_kueue.V1BETA2 if "v1beta2" in fake_kueue.SERVES[serves] else fake_kueue.V1BETA1
        )
        seeded.append((queues, "LocalQueue", QUEUE, {"clusterQueue": fake_kueue.CLUSTER_QUEUE}))
    for api_version, kind, name, spec in seeded:
        meta = {"name": name, "namespace": NAMESPACE}
        store.create({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec})


class _Kubeflow:
    """Kubeflow installed in a ``PortFake``'s store (``store``) on ``clock``."""

    def __init__(self, shared: Path, clock: FakeClock, crds: tuple[str, ...], runtime: bool,
                 trainer: str | None, kueue: str | None) -> None:  # fmt: skip
        self.clock = clock
        self.fake = PortFake(clock)
        self.store = self.fake.objects
        install(self.store, shared, crds, runtime, trainer, kueue)
        if kueue is not None:  # its webhook, and its controller letting Workloads go
            self.store.admission.append(fake_kueue.webhook(self.store))
            self.store.controllers.append(fake_kueue.releases(self.store))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def objects(self, kind: str, api_version: str = "v1") -> list[dict[str, Any]]:
        return self.store.list(api_version, kind, NAMESPACE)


class PortCluster(_Kubeflow):
    """Kubeflow behind the port (``PortFake``) on a ``FakeClock``: nothing moves a job but what
    the test scripts (``fake.at``, ``fakekube.jobs``)."""

    def __init__(self, shared: Path, *, step: float = 0.1, crds: tuple[str, ...] = CRDS,
                 runtime: bool = True, trainer: str | None = FROM_CRDS,
                 kueue: str | None = "v1beta2") -> None:  # fmt: skip
        super().__init__(shared, FakeClock(step=step), crds, runtime, trainer, kueue)
        self.faults, self.calls = self.fake.faults, self.fake.calls
        AUDIT.calls(self.calls, self.store.kind)  # what the commands ask, checked against the Role

    def settle(self) -> None:
        """Let the garbage collector finish what it can (two of its ticks)."""
        self.clock.advance(2 * self.clock.step)

    def session(self, retry_for: float = 5.0) -> Session:
        return Session(self.fake, self.clock, jitter=fixed_jitter, retry_for=retry_for)


class LocalCluster(_Kubeflow):
    """Kubeflow behind the fake API server (``kube``). What happens to each job is scripted
    (``scenario``: a row of ``LIVES``; None: only what the test appends to ``fake.on_create``),
    sync helper pods start (``jobs.helpers``), a suspended job stops (``jobs.suspends``), on
    the fake clock, which a thread advances in step with real time (``auto=False``: only
    ``advance`` does)."""

    def __init__(self, shared: Path, *, step: float = 0.01, scenario: str | None = "succeeds",
                 crds: tuple[str, ...] = CRDS, runtime: bool = True, auto: bool = True,
                 trainer: str | None = FROM_CRDS,
                 kueue: str | None = "v1beta2") -> None:  # fmt: skip
        clock = FakeClock(step=step, start=time.time(), limit=math.inf)
        super().__init__(shared, clock, crds, runtime, trainer, kueue)
        self.kube = FakeKube(fake=self.fake)
        AUDIT.requests(self.kube.requests)  # what the commands ask, checked against the Role
        # Trainer's TrainJobStatus feature gate (v2.2+): training steps reported in trainerStatus
        self.trainer_status = False
        self.admits = 0.5  # seconds Kueue takes to admit a queued job (math.inf: never)
        self.fake.on_create.append(jobs.helpers(self.fake, after=0.0))  # never late
        self.fake.on_patch.append(jobs.suspends(self.fake))
        if scenario is not None:
            self.fake.on_create.append(functools.partial(self._lives, scenario))
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True) if auto else None
        self._tmp = tempfile.TemporaryDirectory(prefix="kfcompile-cluster-")
        self.kubeconfig = Path(self._tmp.name) / "kubeconfig"

    def __enter__(self) -> Self:
        self.kube.start()
        self.kube.kubeconfig(self.kubeconfig, namespace=NAMESPACE)
        if self._ticker is not None:
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        self.kube.stop()
        self._tmp.cleanup()

    def _lives(self, scenario: str, job: dict[str, Any]) -> None:
        reports = lambda: self.trainer_status  # noqa: E731
        live(self.fake, job, scenario, admits=self.admits, reports=reports, pace=PACE)

    def _tick(self) -> None:
        while not self._stop.wait(self.clock.step):
            self.clock.advance(self.clock.step)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of fake time pass: the scripted changes due meanwhile happen."""
        self.clock.advance(seconds)

    def run_once_watched(self, plural: str, seconds: float = 60.0) -> threading.Thread:
        """Let ``seconds`` of fake time pass once a watch of ``plural`` has started
        (auto=False), so a waiter sees each change as it happens, whatever the machine's
        speed."""

        def run() -> None:
            for _ in range(3000):
                if self.kube.requests.count("GET", f"/{plural}", watch=True):
                    break
                time.sleep(0.01)
            self.advance(seconds)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def session(self, retry_for: float = 5.0, request_timeout: float = 5.0) -> Session:
        conn = connect(str(self.kubeconfig))
        cluster = KubeCluster(conn.api_client, request_timeout=request_timeout)
        return Session(cluster, SystemClock(), jitter=random.random, retry_for=retry_for)


@contextmanager
def with_demo(shared: Path, *, running: bool = False) -> Iterator[LocalCluster]:
    """The local cluster (jobs never end) with a job ``demo`` submitted through the CLI (and
    ``running``: once it runs, its pod's log started)."""
    from kfcompile.cli import main

    with LocalCluster(shared, scenario="hang") as cluster, tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "job.yaml"
        demo = {"name": "demo", "image": "python:3.11-slim", "command": ["true"]}
        spec.write_text(yaml.safe_dump(demo))
        submit = ["submit", str(spec), "--kubeconfig", str(cluster.kubeconfig)]
        assert main([*submit, "--wait", "running"] if running else submit) == 0
        yield cluster

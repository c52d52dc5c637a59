"""A whole local "cluster" for lifecycle tests and benchmarks: the fake API server with the
Kubeflow CRDs, the simulated controller, a kubelet for bare pods, and what a Kubeflow install
provides (the ``torch-distributed`` runtime), plus a claim and a Kueue queue to use.

    with LocalCluster(shared_dir) as c:
        session = c.session()          # kfcompile.lifecycle.Session over the real adapter
        c.kubeconfig                   # for the CLI: --kubeconfig
"""

from __future__ import annotations

import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from kfcompile.lifecycle import Session
from kfcompile_kube import KubeCluster, SystemClock, connect

from .controller import Controller
from .kubelet import Kubelet
from .server import FakeKube

NAMESPACE = "default"
CLAIM = "work"
QUEUE = "team-a"


class LocalCluster:
    def __init__(
        self,
        shared: Path,
        *,
        step: float = 0.01,
        scenario: str = "succeeds",
        crds: tuple[str, ...] = ("trainjobs-v2.3.0.yaml", "pytorchjobs-v1.9.4.yaml"),
        runtime: bool = True,
        auto: bool = True,
    ) -> None:
        crd_dir = shared / "crds"
        files = [crd_dir / name for name in crds]
        files.append(crd_dir / "clustertrainingruntimes-v2.3.0.yaml")
        # A real server keeps about five minutes of changes; 1,000-pod jobs make many events.
        self.kube = FakeKube(crd_files=files, history=100_000)
        self.store = self.kube.store
        # auto=False: the controller moves only when a test ticks it (advance/run_until_idle).
        self.controller = Controller(self.store, step=step, auto=auto, default_scenario=scenario)
        self.kubelet = Kubelet(self.store)
        self._tmp = tempfile.TemporaryDirectory(prefix="kfcompile-cluster-")
        self.kubeconfig = Path(self._tmp.name) / "kubeconfig"
        self._runtime = runtime
        self._shared = shared

    def __enter__(self) -> LocalCluster:
        self.kube.start()
        self.kube.kubeconfig(self.kubeconfig, namespace=NAMESPACE)
        if self._runtime:
            text = (self._shared / "crds/runtimes/torch_distributed-v2.3.0.yaml").read_text()
            self.store.create(yaml.safe_load(text))
        self.store.create(_object("v1", "PersistentVolumeClaim", CLAIM, spec=_CLAIM_SPEC))
        self.store.create(_object("kueue.x-k8s.io/v1beta1", "LocalQueue", QUEUE, spec=_QUEUE))
        if self.controller.auto:
            self.controller.start()
        self.kubelet.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kubelet.__exit__()
        self.controller.stop()
        self.kube.stop()
        self._tmp.cleanup()

    def run_once_watched(self, plural: str) -> threading.Thread:
        """Run every job to its end once a watch of ``plural`` has started (auto=False), so a
        waiter sees each change as it happens, whatever the machine's speed."""

        def run() -> None:
            for _ in range(3000):
                if self.kube.requests.count("GET", f"/{plural}", watch=True):
                    break
                time.sleep(0.01)
            self.controller.run_until_idle()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def session(self, retry_for: float = 5.0, read_timeout: float = 5.0) -> Session:
        conn = connect(str(self.kubeconfig))
        cluster = KubeCluster(conn.api_client, read_timeout=read_timeout)
        return Session(cluster, SystemClock(), jitter=random.random, retry_for=retry_for)

    def objects(self, kind: str, api_version: str = "v1") -> list[dict[str, Any]]:
        return self.store.list(api_version, kind, NAMESPACE)


_CLAIM_SPEC = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
_QUEUE = {"clusterQueue": "cluster-queue"}


def _object(api_version: str, kind: str, name: str, **body: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        **body,
    }

"""Local fake Kubernetes clusters for tests, two of them:

- the API server over real HTTP, for the real adapter (``server``, ``FakeKube``);
- a small fake behind the ``kfcompile.lifecycle.ports.Cluster`` port, for the lifecycle tests
  (``port``: ``PortFake``, on the fake clock ``clock``).

Both answer from one object store (``port.Objects``), and what happens to each job on either is
scripted with ``jobs`` on it. Both take faults the same way (``faults``) and record what they
are asked in a request log (``requestlog``). ``cluster`` wires either into a whole cluster with
Kubeflow installed.

Import it as ``from fakekube import FakeKube`` (``tests/`` is on ``sys.path`` under pytest, as
for ``schema_check``).

    with FakeKube(crds=[schema_check.load_crd("trainjobs-v2.3.0.yaml")]) as kube:
        api = kubernetes.config.new_client_from_config(str(kube.kubeconfig(tmp / "kc")))
        kube.store.create({...})        # seed objects directly
        kube.faults.add("POST", "/trainjobs", status=500)
        kube.requests.count("POST", "/trainjobs")

What a real cluster does to deletions and access, switchable per test on the store (both fronts
answer alike): ``store.gc(lag=30)`` (the garbage collector notices its work 30 s of the store's
time late, as a real one does a newly installed kind), ``store.gc(running=False)`` (no garbage
collector: a foreground deletion stays), ``store.kubelet_down("gpu-node-1")`` (that node's pods,
once deleted, stay Terminating), ``store.access = NamespaceAccess("alice", {"team-a"})`` (RBAC
that grants only those namespaces: 403 in the real server's words elsewhere and at the cluster
scope).
"""

from .faults import Body, Fault, Faults, Fired, error_status
from .port import Objects, PortFake
from .resources import ResourceKind, StoreError
from .server import FakeKube, RequestLog, RequestRecord

__all__ = [
    "Body",
    "FakeKube",
    "Fault",
    "Faults",
    "Fired",
    "Objects",
    "PortFake",
    "RequestLog",
    "RequestRecord",
    "ResourceKind",
    "StoreError",
    "error_status",
]

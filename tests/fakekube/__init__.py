"""Local fake Kubernetes clusters for tests, two of them:

- the API server over real HTTP, for the real adapter (``server``, ``FakeKube``): one object
  store (``store``) answering as ``api`` says;
- a small fake behind the ``kfcompile.lifecycle.ports.Cluster`` port, for the lifecycle tests
  (``port``: a dict of objects on the fake clock ``clock``).

What happens to each job on either is scripted with ``jobs`` (over the HTTP store through
``scripted``). Both share one fault injector (``faults``) and one request log
(``requestlog``). ``cluster`` wires either into a whole cluster with Kubeflow installed.

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
from .resources import ResourceKind, StoreError
from .server import FakeKube, RequestLog, RequestRecord
from .store import Store

__all__ = [
    "Body",
    "FakeKube",
    "Fault",
    "Faults",
    "Fired",
    "RequestLog",
    "RequestRecord",
    "ResourceKind",
    "Store",
    "StoreError",
    "error_status",
]

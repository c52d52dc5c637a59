"""Local fake Kubernetes for tests: one object store (``port.Objects``) behind the
``kfcompile.lifecycle.ports.Cluster`` port (``port.PortFake``, on the fake clock ``clock``) and
over real HTTP for the real adapter (``server.FakeKube``). What happens to each job is scripted
with ``jobs``; faults (``faults``) and the request log (``requestlog``) work alike on both;
``cluster`` makes a whole cluster with Kubeflow installed. Import it as ``from fakekube import
FakeKube`` (``tests/`` is on ``sys.path`` under pytest).

    with FakeKube(crds=[schema_check.load_crd("trainjobs-v2.3.0.yaml")]) as kube:
        api = kubernetes.config.new_client_from_config(str(kube.kubeconfig(tmp / "kc")))
        kube.store.create({...})        # seed objects directly
        kube.faults.add("POST", "/trainjobs", status=500)
        kube.requests.count("POST", "/trainjobs")

What a real cluster does to deletions and access, per test on the store (both fronts alike):
``store.gc(lag=30)`` (the garbage collector 30 s late), ``store.gc(running=False)`` (none),
``store.kubelets_down.add("gpu-node-1")`` (that node's deleted pods stay Terminating, and its
pods' logs are answered 500 with the dial error, as a real server that cannot reach a kubelet),
``store.access = NamespaceAccess("alice", {"team-a"})`` (RBAC granting only those namespaces).
"""

from .faults import Body, Fault, Faults, error_status
from .port import Objects, PortFake
from .resources import ResourceKind, StoreError
from .server import FakeKube, RequestLog, RequestRecord

__all__ = ["Body", "FakeKube", "Fault", "Faults", "Objects", "PortFake", "RequestLog",
           "RequestRecord", "ResourceKind", "StoreError", "error_status"]  # fmt: skip

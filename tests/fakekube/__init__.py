"""A local fake Kubernetes API server for tests (real HTTP, real ``kubernetes`` client).

Import it as ``from fakekube import FakeKube`` (``tests/`` is on ``sys.path`` under pytest, as
for ``schema_check``). Fixtures: add ``pytest_plugins = ["fakekube.fixtures"]`` to a test module
(or to ``tests/conftest.py``) to get ``fake_kube`` (a running server with the newest Kubeflow
CRDs installed) and ``kube_client`` (a ``kubernetes.client.ApiClient`` for it).

    with FakeKube(crd_files=[crds / "trainjobs-v2.3.0.yaml"]) as kube:
        api = kubernetes.config.new_client_from_config(str(kube.kubeconfig(tmp / "kc")))
        kube.store.create({...})        # seed objects directly
        kube.faults.add("POST", "/trainjobs", status=500)
        kube.requests.count("POST", "/trainjobs")
"""

from .faults import Fault, Faults, Fired, error_status
from .server import FakeKube, RequestLog, RequestRecord, load_crd
from .store import ResourceKind, Store, StoreError

__all__ = [
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
    "load_crd",
]

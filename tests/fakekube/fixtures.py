"""Pytest fixtures for the fake API server: ``pytest_plugins = ["fakekube.fixtures"]``.

``fake_kube``: a running :class:`FakeKube` with the newest release of each Kubeflow CRD in
``../shared/crds`` installed (TrainJob v2.3, PyTorchJob v1.9, ClusterTrainingRuntime), or none
when the reference CRDs are absent (call ``schema_check.require_shared()`` in tests that need
them). ``kube_client``: a ``kubernetes.client.ApiClient`` configured by a kubeconfig for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
from kubernetes import client, config

from .server import FakeKube

__all__ = ["fake_kube", "kube_client"]


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    with FakeKube(crd_dir=schema_check.CRDS) as kube:
        yield kube


@pytest.fixture
def kube_client(fake_kube: FakeKube, tmp_path: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(str(fake_kube.kubeconfig(tmp_path / "kubeconfig")))
    try:
        yield api
    finally:
        api.close()

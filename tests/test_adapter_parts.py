"""The adapter's rooms: ``KubeCluster`` is one part per family of the port's calls, each in the
module named for it, and only ``compat`` reaches into the ``kubernetes`` client's internals (and
urllib3's beneath them), so a new client line is met in one module."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from kfcompile.lifecycle.ports import Cluster
from kfcompile_kube import KubeCluster

ADAPTER = Path(__file__).resolve().parents[1] / "adapters" / "kfcompile_kube"

# Each call of the port, by the module of its family.
FAMILIES = {
    "objects": {"served", "get", "create", "patch", "delete", "list"},
    "watch": {"watch"},
    "logs": {"pod_log"},
    "podexec": {"exec"},
}

# What belongs to the client's internals: its REST layer and the pool manager it holds, the
# Configuration's token storage and the settings some lines lack, urllib3's private hooks and
# its responses' line-dependent reads. Named as attributes, or as strings (getattr, hasattr).
INTERNALS = {
    "RESTClientObject",
    "rest_client",
    "pool_manager",
    "connection_pool_kw",
    "api_key",
    "refresh_api_key_hook",
    "auth_settings",
    "ca_cert_data",
    "tls_server_name",
    "_connection",
    "_get_conn",
    "_new_conn",
    "read1",
    "get_websocket_url",
}


def test_each_call_of_the_port_is_in_its_familys_module() -> None:
    calls = {name for name, _ in inspect.getmembers(Cluster) if not name.startswith("_")}
    assert calls == set().union(*FAMILIES.values())  # every call has a family
    for module, names in FAMILIES.items():
        for name in names:
            assert getattr(KubeCluster, name).__module__ == f"kfcompile_kube.{module}", name
    # KubeCluster itself only puts the parts together.
    assert [name for name in vars(KubeCluster) if not name.startswith("__")] == []


def _internals_named(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in INTERNALS:
            found.add(node.attr)
        elif isinstance(node, ast.Constant) and node.value in INTERNALS:
            found.add(str(node.value))
    return found


def test_only_compat_reaches_into_the_clients_internals() -> None:
    named = {path.name: _internals_named(path) for path in sorted(ADAPTER.glob("*.py"))}
    outside = {name: found for name, found in named.items() if found and name != "compat.py"}
    assert outside == {}
    assert named["compat.py"] == INTERNALS - {"get_websocket_url"}  # the list is not stale

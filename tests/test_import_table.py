"""The importer walks the field table backward: cases the round-trip properties of
``test_import.py`` cannot reach, because ``render`` never writes them."""

from __future__ import annotations

from typing import Any

from kfcompile.importer import import_manifest, import_manifest_lossy


def elastic_job(**policy: Any) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "img:1", "command": ["python", "/t.py"]}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt"},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 2, **policy},
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}
            },
        },
    }


def test_the_deprecated_elastic_nprocs_is_read_where_the_new_place_is_empty() -> None:
    """KUBEFLOW.md: ``elasticPolicy.nProcPerNode`` is the deprecated place, forbidden together
    with ``spec.nprocPerNode``: alone, it is the job's processes per node."""
    imported = import_manifest_lossy(elastic_job(nProcPerNode=4))
    assert imported.losses == ()
    assert imported.spec.nprocs_per_node == 4
    assert imported.source_of("nprocs_per_node") == "spec.elasticPolicy.nProcPerNode"
    assert import_manifest(elastic_job()).nprocs_per_node == "auto"


def test_what_the_rows_leave_of_a_slot_is_lost_at_its_input_path() -> None:
    imported = import_manifest_lossy(elastic_job(rdzvConf=[{"key": "k", "value": "v"}]))
    assert [str(p) for p in imported.losses] == [
        "spec.elasticPolicy.rdzvConf: no JobSpec field holds it: dropped"
    ]
    assert imported.spec.elastic is not None and imported.spec.elastic.max_nodes == 2

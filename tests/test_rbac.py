"""``kfcompile rbac``: the Role the cluster commands need, valid for Kubernetes, scoped to one
kind when asked, with bindings to a service account or a user."""

from __future__ import annotations

from typing import Any

import pytest
import schema_check
import yaml

from kfcompile.cli import main
from kfcompile.lifecycle import rbac


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["rbac", *argv]) == 0
    return list(yaml.safe_load_all(capsys.readouterr().out))


def test_the_role_and_its_binding_are_valid_objects(capsys: pytest.CaptureFixture[str]) -> None:
    docs = run(capsys, "-n", "team-a", "--service-account", "trainer", "--cluster-reads")
    kinds = ["Role", "ClusterRole", "Role", "RoleBinding", "ClusterRoleBinding", "RoleBinding"]
    assert [d["kind"] for d in docs] == kinds
    for doc in docs:
        assert schema_check.core_errors(doc) == [], doc["kind"]
    role, _, trainer, binding, _, trainer_binding = docs
    # The Trainer's version ConfigMap, by name, in the Trainer's namespace, bound there.
    assert trainer["metadata"]["namespace"] == trainer_binding["metadata"]["namespace"]
    assert trainer["metadata"]["namespace"] == "kubeflow-system"
    assert trainer["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get"],
        }
    ]
    assert role["metadata"] == {"name": "kfcompile", "namespace": "team-a"}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "trainer", "namespace": "team-a"}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "kfcompile",
    }


def test_a_target_keeps_only_its_kinds_rules(capsys: pytest.CaptureFixture[str]) -> None:
    [pytorch] = run(capsys, "-t", "pytorchjob/v1")
    resources = {r for rule in pytorch["rules"] for r in rule["resources"]}
    assert "pytorchjobs" in resources and not {"trainjobs", "trainingruntimes"} & resources
    [trainjob] = run(capsys, "-t", "trainjob/v2.1")
    resources = {r for rule in trainjob["rules"] for r in rule["resources"]}
    assert "trainjobs" in resources and "pytorchjobs" not in resources


def test_no_rule_grants_everything() -> None:
    for rule in (*rbac.NAMESPACED, *rbac.CLUSTER, *rbac.TRAINER):
        assert "*" not in (rule.group, rule.resource, *rule.verbs)
        assert rule.verbs and len(set(rule.verbs)) == len(rule.verbs)
    assert rbac.allows(rbac.NAMESPACED, "get", "", "pods/log")
    assert not rbac.allows(rbac.NAMESPACED, "update", "", "pods")

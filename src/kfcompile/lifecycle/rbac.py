"""The Kubernetes permissions the cluster commands use, as data: exactly the verbs and resources
their requests need, nothing more. ``kfcompile rbac`` prints them as a Role (and a RoleBinding);
a test checks every request the commands make in the test suite against these rules, and that
every rule is used.

Cluster-scoped reads are optional: without them preflight skips what it may not read (the
namespace, a ClusterTrainingRuntime), target detection works only from the Trainer's public
ConfigMap (v2.2 on; before that, give ``--target``) and ``validate --cluster`` cannot read the
CRDs, and ``list -A`` lists the current namespace. That ConfigMap (``TRAINER``) is granted to
every authenticated user by the Trainer's own Role; where such a binding is refused (GKE
Autopilot), grant it with the Role ``trainer_role`` prints. Kueue's rules name its API group
only: they hold for the version read (``kueue.served_api``: v1beta2, or v1beta1 before Kueue
v0.15).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from attrs import frozen

from kfcompile.kinds import KINDS, TRAINJOB, Kind
from kfcompile.lifecycle.target_evidence import TRAINER_CONFIGMAP, TRAINER_NAMESPACE


@frozen(repr=False, eq=False)
class Rule:
    group: str  # "" is the core group
    resource: str  # with its subresource: pods/log
    verbs: tuple[str, ...]
    why: str
    kind: str | None = None  # only for this job kind (TrainJob, PyTorchJob)
    names: tuple[str, ...] = ()  # only these objects (resourceNames); () is any


JOB_VERBS: Final = ("get", "list", "watch", "create", "patch", "delete")


def _group(kind: Kind) -> str:
    return kind.api_version.rpartition("/")[0]


# In the job's namespace.
NAMESPACED: Final[tuple[Rule, ...]] = (
    *(
        Rule(
            _group(k),
            k.plural,
            JOB_VERBS,
            "submit, status, wait, logs, cancel, suspend, list",
            k.name,
        )
        for k in KINDS.values()
    ),
    Rule(
        "trainer.kubeflow.org",
        "trainingruntimes",
        ("get",),
        "preflight: the runtime, its replicated jobs and containers",
        kind=TRAINJOB.name,
    ),
    Rule("", "configmaps", ("get", "create", "patch", "delete"), "the inline script"),
    Rule("", "secrets", ("get", "create", "patch", "delete"), "secret_env values"),
    Rule(
        "",
        "pods",
        ("get", "list", "watch", "create", "delete"),
        "status, logs (--follow watches a pod that has not started); the sync helper pod",
    ),
    Rule("", "pods/log", ("get",), "logs"),
    # cancel --wait: a TrainJob goes at once (Background), then its JobSet (named like it), its
    # Jobs and pods (by label).
    Rule("jobset.x-k8s.io", "jobsets", ("get",), "cancel --wait", kind=TRAINJOB.name),
    Rule("batch", "jobs", ("list",), "cancel --wait", kind=TRAINJOB.name),
    # Exec runs over a WebSocket, which starts as a GET: authorized as `get` up to Kubernetes
    # 1.34, as `create` from 1.35 (KEP-4006).
    Rule("", "pods/exec", ("get", "create"), "work-dir sync (tar over exec)"),
    # Events are read through events.k8s.io/v1 (served since Kubernetes 1.19); core/v1 only
    # where that is not served or a Role other than this one does not grant it.
    Rule("events.k8s.io", "events", ("list",), "status, events, wait (why a job is stuck)"),
    Rule("", "persistentvolumeclaims", ("get",), "preflight of work_dir"),
    Rule("kueue.x-k8s.io", "localqueues", ("get",), "preflight of queue"),
    Rule(
        "kueue.x-k8s.io",
        "workloads",
        ("list", "watch"),
        "Kueue's reason a job waits (status, wait, list, watch_jobs); MultiKueue manager: the "
        "worker cluster a job was dispatched to (status, logs, list)",
    ),
)

# In the Trainer's namespace: the one ConfigMap that says the Trainer's release (see above).
TRAINER: Final[tuple[Rule, ...]] = (
    Rule(
        "",
        "configmaps",
        ("get",),
        "target detection: the Trainer's release",
        kind=TRAINJOB.name,
        names=(TRAINER_CONFIGMAP,),
    ),
)

# Cluster-wide, optional (see the module docstring).
CLUSTER: Final[tuple[Rule, ...]] = (
    Rule("", "namespaces", ("get",), "preflight: the namespace exists"),
    Rule(
        "trainer.kubeflow.org",
        "clustertrainingruntimes",
        ("get",),
        "preflight: the runtime, its replicated jobs and containers",
        kind=TRAINJOB.name,
    ),
    Rule(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        ("get",),
        "target detection, validate --cluster; submit: which Kueue release (its Workload CRD)",
    ),
    Rule(
        "kueue.x-k8s.io",
        "workloads",
        ("list", "watch"),
        "list -A, list -A -w, watch_jobs: Kueue's reason a job waits; MultiKueue's worker",
    ),
    Rule(
        "kueue.x-k8s.io",
        "clusterqueues",
        ("get",),
        "submit: whether the queue is a MultiKueue queue",
    ),
    Rule(
        "kueue.x-k8s.io",
        "admissionchecks",
        ("get",),
        "submit: whether the queue is a MultiKueue queue",
    ),
    *(
        Rule(_group(k), k.plural, ("list", "watch"), "list -A, list -A -w, watch_jobs", k.name)
        for k in KINDS.values()
    ),
)


# What `kfcompile rbac` says of many clusters (Kueue's MultiKueue), beside the Role it prints.
MULTIKUEUE_NOTE: Final = (
    "on a MultiKueue manager, this Role reads the jobs' Kueue Workloads (list and watch "
    "workloads: status, logs, list) and --cluster-reads adds get of clusterqueues and "
    "admissionchecks (submit's MultiKueue hint); on each worker cluster, bind the same Role "
    "in the same namespace: status, logs, events and cancel --wait read the job's mirror, its "
    "pods, their logs and events there"
)


def rules(scope: tuple[Rule, ...], kind: str | None = None) -> tuple[Rule, ...]:
    """The rules of ``scope``, only those of one job kind's commands when ``kind`` is given."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    return tuple(r for r in scope if kind is None or r.kind in (None, kind))


def allows(
    scope: Iterable[Rule], verb: str, group: str, resource: str, name: str | None = None
) -> bool:
    """Whether a rule of ``scope`` allows ``verb`` on ``resource`` (the object ``name``)."""
    return any(
        r.group == group
        and r.resource == resource
        and verb in r.verbs
        and (not r.names or name in r.names)
        for r in scope
    )


def _policy_rules(scope: Iterable[Rule]) -> list[dict[str, Any]]:
    return [
        {
            "apiGroups": [r.group],
            "resources": [r.resource],
            **({"resourceNames": list(r.names)} if r.names else {}),
            "verbs": list(r.verbs),
        }
        for r in scope
    ]


NAME: Final = "kfcompile"


def role(namespace: str, kind: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": NAME, "namespace": namespace},
        "rules": _policy_rules(rules(NAMESPACED, kind)),
    }


def trainer_role(kind: str | None = None) -> dict[str, Any] | None:
    """The Role that reads the Trainer's version ConfigMap (None when ``kind`` needs none)."""
    chosen = rules(TRAINER, kind)
    if not chosen:
        return None
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": f"{NAME}-trainer-version", "namespace": TRAINER_NAMESPACE},
        "rules": _policy_rules(chosen),
    }


def cluster_role(kind: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"{NAME}-cluster-reads"},
        "rules": _policy_rules(rules(CLUSTER, kind)),
    }


def subject(service_account: str | None, user: str | None, namespace: str) -> dict[str, Any]:
    if service_account is not None:
        return {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
    return {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}


def binding(granted: dict[str, Any], who: dict[str, Any], namespace: str) -> dict[str, Any]:
    """A RoleBinding (or ClusterRoleBinding, for the ClusterRole) of ``granted`` to ``who``,
    in the Role's own namespace."""
    cluster = granted["kind"] == "ClusterRole"
    meta: dict[str, Any] = {"name": granted["metadata"]["name"]}
    if not cluster:
        meta["namespace"] = granted["metadata"].get("namespace", namespace)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding" if cluster else "RoleBinding",
        "metadata": meta,
        "subjects": [who],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": granted["kind"],
            "name": granted["metadata"]["name"],
        },
    }

"""The Role ``kfcompile rbac`` prints is exactly what the cluster commands use: a tour of every
cluster command (both job kinds, each optional step: companions, a queue, a work dir, a
namespaced runtime, a resubmit that mends, a rollback, a dry run, detection and the CRD read of
``validate --cluster``) at the port, with every request recorded as the authorizer sees it
(``fakekube.audit``). Each request is allowed by the tables of ``kfcompile.lifecycle.rbac``, and
each
verb of each rule is needed by some request. Every request of the whole test suite is checked
too, at the end of the session (``tests/conftest.py``)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import schema_check
import yaml
from fakekube.audit import Access, Seen, denied, of_call, recording, unused
from fakekube.cluster import CLAIM, NAMESPACE, QUEUE, PortCluster
from test_lifecycle import ENV, spec

from kfcompile import lifecycle
from kfcompile.kinds import MULTIKUEUE, TRAINJOB
from kfcompile.lifecycle import LeftBehind, multikueue
from kfcompile.lifecycle.ports import Forbidden, Ref
from kfcompile.testing import Call, Store, courses
from kfcompile.testing.kueue import CHECK, CLUSTER_QUEUE
from kfcompile.testing.kueue import V1BETA2 as KUEUE
from kfcompile_local import TarFiles


def namespaced_runtime(shared: Path) -> dict[str, Any]:
    """The torch-distributed runtime, as a TrainingRuntime in the job's namespace."""
    runtime = yaml.safe_load((shared / "crds/runtimes/torch_distributed-v2.3.0.yaml").read_text())
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {"name": "team-torch", "namespace": NAMESPACE}
    return runtime


def install_manager(store: Store) -> None:
    """What a MultiKueue manager has: the ClusterQueue of the LocalQueue ``QUEUE`` names the
    MultiKueue AdmissionCheck (``spec.controllerName``)."""
    check = {"metadata": {"name": CHECK}, "spec": {"controllerName": MULTIKUEUE}}
    store.put({"apiVersion": KUEUE, "kind": "AdmissionCheck", **check})
    queue = {"metadata": {"name": CLUSTER_QUEUE}, "spec": {"admissionChecks": [CHECK]}}
    store.put({"apiVersion": KUEUE, "kind": "ClusterQueue", **queue})


def tour(shared: Path, tmp_path: Path) -> Seen:
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print(1)\n")
    with recording() as seen, PortCluster(shared) as c:
        c.store.on_create += [courses.runs(c.fake, ends=None), courses.helpers(c.fake)]
        c.store.on_patch.append(courses.suspends(c.fake))
        c.store.create(namespaced_runtime(shared))
        session = c.session()
        found = lifecycle.detect_target(session)  # the Trainer's ConfigMap
        lifecycle.served_crd(session, TRAINJOB)  # validate --cluster
        full = spec(
            launcher={"kind": "torchrun", "entrypoint": "train.py"},
            command=(),
            script="print('x')",
            secret_env=["HF_TOKEN"],
            queue=QUEUE,
            work_dir={"local": str(work), "pvc": CLAIM, "mount_path": "/workspace"},
        )
        files = TarFiles()
        lifecycle.submit(
            session, full, found.target, namespace=NAMESPACE, environ=ENV, dry_run=True
        )
        done = lifecycle.submit(
            session, full, found.target, namespace=NAMESPACE, environ=ENV, files=files
        )
        c.store.delete("v1", "Secret", NAMESPACE, "demo-env")
        lifecycle.submit(session, full, found.target, namespace=NAMESPACE, environ=ENV)  # mends
        c.clock.advance(1.0)  # the job runs; it ends once both kinds are watched
        ends: list[bool] = []

        def end_once_watched(call: Call) -> None:
            if (call.method, call.kind) == ("watch", "PyTorchJob") and not ends:
                ends.append(True)
                c.fake.at(1.0, lambda: courses.finish(c.fake, NAMESPACE, "demo"))

        c.calls.listeners.append(end_once_watched)
        changes = lifecycle.watch_jobs(session)  # list -A -w: every namespace, both kinds
        for event in changes:
            if event.what is not lifecycle.Happened.LISTED:
                break
        changes.close()

        def progress_once_watched(call: Call) -> None:  # list -w: the namespace's jobs, Workloads
            if (call.method, call.kind, call.namespace) == ("watch", "Workload", NAMESPACE):
                c.fake.at(1.0, lambda: courses.progress(c.fake, NAMESPACE, "demo", 50))

        c.calls.listeners.append(progress_once_watched)
        with closing(lifecycle.watch_jobs(session, NAMESPACE)) as here:
            next(e for e in here if e.what is not lifecycle.Happened.LISTED)
        for target, name, extra in (
            (found.target, "demo", {}),
            ("pytorchjob/v1", "torch", {}),
            (
                found.target,
                "own",
                {"runtime_ref": {"name": "team-torch", "kind": "TrainingRuntime"}},
            ),
        ):
            if name != "demo":
                lifecycle.submit(
                    session, spec(name, **extra), target, namespace=NAMESPACE, environ={}
                )
            ref = lifecycle.locate(session, NAMESPACE, name)
            lifecycle.wait(session, ref, "running", timeout=30)
            lifecycle.status(session, ref)
            list(lifecycle.logs(session, ref))
            list(lifecycle.logs(session, ref, rank=None, follow=False))
            lifecycle.set_suspended(session, ref, True)
            lifecycle.set_suspended(session, ref, False)
        late = spec("late")
        ref = lifecycle.submit(session, late, found.target, namespace=NAMESPACE, environ={}).ref
        with closing(lifecycle.logs(session, ref, rank=0, follow=True)) as followed:
            next(followed)  # waits on the watch of its pod until that starts
        lifecycle.list_jobs(session, NAMESPACE)
        lifecycle.list_jobs(session, None)  # list -A
        # Jobs MultiKueue manages: their Workloads say where they run (on a manager).
        for name in ("far", "farther"):
            far = spec(name, managed_by=MULTIKUEUE)
            lifecycle.submit(session, far, found.target, namespace=NAMESPACE, environ={})
        multikueue.dispatch(session, lifecycle.find(session, NAMESPACE, "far"))
        lifecycle.list_jobs(session, None)  # list -A on a manager: every namespace's Workloads
        install_manager(c.store)
        assert multikueue.multikueue_check(session, NAMESPACE, QUEUE) == CHECK
        lifecycle.sync_down(
            session,
            files,
            namespace=NAMESPACE,
            pvc=CLAIM,
            path="/",
            local=str(tmp_path / "down"),
        )
        for name in ("demo", "torch", "own", "late", "far", "farther"):
            lifecycle.cancel(session, lifecycle.locate(session, NAMESPACE, name), wait_gone=True)
        # A submit refused part-way: what it created is deleted again.
        c.faults.add("create", "TrainJob", status=403)
        with pytest.raises((Forbidden, LeftBehind)):
            lifecycle.submit(
                session,
                spec(
                    "refused",
                    launcher={"kind": "python", "entrypoint": "x.py"},
                    command=(),
                    script="x = 1",
                    secret_env=["HF_TOKEN"],
                ),
                found.target,
                namespace=NAMESPACE,
                environ=ENV,
            )
        assert done.ref == Ref(TRAINJOB.api_version, "TrainJob", NAMESPACE, "demo")
    return seen


def test_the_role_is_exactly_what_the_commands_use(tmp_path: Path) -> None:
    seen = tour(schema_check.require_shared(), tmp_path)
    assert denied(seen) == []
    assert unused(seen) == []


def test_calls_map_to_what_the_authorizer_checks() -> None:
    """Each port call as RBAC reads the request it makes: a kind's group and plural, its
    namespace or the cluster scope, the name but for a collection (list, watch, create)."""
    with PortCluster(schema_check.require_shared()) as c:
        store = c.store

        def access(method: str, api_version: str, kind: str, namespace: str | None,
                   name: str | None = None) -> list[Access]:  # fmt: skip
            return of_call(Call(method, api_version, kind, namespace, name), store)

        assert access("served", TRAINJOB.api_version, "TrainJob", None) == []  # discovery
        assert access("get", "example.com/v1", "Gizmo", "team-a", "g") == []  # not served
        assert access("exec", "v1", "Pod", "team-a", "p") == [
            Access("get", "", "pods/exec", "team-a", "p"),
            Access("create", "", "pods/exec", "team-a", "p"),
        ]
        assert access("pod_log", "v1", "Pod", "team-a", "p") == [
            Access("get", "", "pods/log", "team-a", "p")
        ]
        assert access("get", "v1", "Namespace", None, "team-a") == [
            Access("get", "", "namespaces", None, "team-a")
        ]
        assert access("watch", TRAINJOB.api_version, "TrainJob", None) == [
            Access("watch", "trainer.kubeflow.org", "trainjobs", None)
        ]
        assert access("create", "v1", "Secret", "team-a", "x") == [
            Access("create", "", "secrets", "team-a")
        ]


def test_a_request_outside_the_tables_is_named_with_its_test() -> None:
    seen = Seen()
    seen.add(
        [
            Access("update", "", "pods", "team-a", "p"),
            Access("get", "", "configmaps", "kubeflow-system", "other"),
        ]
    )
    assert denied(seen) == [
        "get configmaps other in namespace kubeflow-system: not allowed by the Role for the "
        "Trainer's namespace ("
        + seen.accesses[Access("get", "", "configmaps", "kubeflow-system", "other")]
        + ")",
        "update pods p in namespace team-a: not allowed by the Role for the namespace ("
        + seen.accesses[Access("update", "", "pods", "team-a", "p")]
        + ")",
    ]

"""What a cold ``kfcompile status`` costs the API server, counted at the local fake API server
through the real client: the job read once, events read through one API, and discovery kept on
disk between commands (``kfcompile_kube.discovery``) — safely: per server, owner-only, a file
that is not the cache's own ignored, never trusted past its TTL, a failed write silent."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
import schema_check
from fakekube.cluster import NAMESPACE, SCENARIO_ANNOTATION, LocalCluster
from test_cli_cluster import write_spec

from kfcompile import lifecycle, structure
from kfcompile.cli import main
from kfcompile.lifecycle.ports import Ref
from kfcompile.testing.store import CRD
from kfcompile_kube import KubeCluster, connect
from kfcompile_kube.answers import OBJECT_LIMIT
from kfcompile_kube.discovery import TTL, DiskDiscovery, server_dir

TRAINER = "trainer.kubeflow.org/v1alpha1"
# A healthy job: its read, its pods' list, the events of the job (and JobSet: one name) and of
# its first Job. The first run also asks discovery of the Trainer's group, once.
HEALTHY = 4


def _cluster(scenario: str, nodes: int = 4) -> Iterator[tuple[LocalCluster, Ref]]:
    with LocalCluster(schema_check.require_shared(), scenario=scenario, auto=False) as local:
        spec = structure(
            {
                "name": "bench",
                "image": "python:3.11-slim",
                "command": ["python", "train.py"],
                "num_nodes": nodes,
                "annotations": {SCENARIO_ANNOTATION: scenario},
            }
        )
        done = lifecycle.submit(
            local.session(), spec, "trainjob/v2.3", namespace=NAMESPACE, environ={}
        )
        local.clock.advance(1.0)  # running (hang), or its pods waiting to start
        yield local, done.ref


@pytest.fixture
def healthy() -> Iterator[tuple[LocalCluster, Ref]]:
    yield from _cluster("hang")


def status(local: LocalCluster, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    """``kfcompile status bench``'s requests, as (verb, path) lines."""
    local.kube.requests.clear()
    code = main(["status", "bench", "--kubeconfig", str(local.kubeconfig), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "bench" in out
    return [f"{r.verb} {r.path}" for r in local.kube.requests]


def discoveries(requests: list[str]) -> list[str]:
    return [r for r in requests if r.startswith("discovery ")]


def cache_files(root: Path) -> list[Path]:
    return sorted(root.rglob("serverresources.json"))


def test_status_of_a_healthy_job_makes_four_requests_and_five_cold(
    healthy: tuple[LocalCluster, Ref], capsys: pytest.CaptureFixture[str]
) -> None:
    local, _ = healthy
    assert lifecycle.status(local.session(), Ref.of(_job(local))).nodes_ready == 4
    cold = status(local, capsys)
    assert discoveries(cold) == [f"discovery /apis/{TRAINER}"]
    assert len(cold) == HEALTHY + 1, cold
    warm = status(local, capsys)
    assert len(warm) == HEALTHY, warm
    assert sum(r.startswith("get ") for r in warm) == 1  # the job, read once
    events = [r for r in warm if r.endswith("/events")]
    assert events and all(r.startswith("list /apis/events.k8s.io/v1/") for r in events)


def test_status_of_a_job_with_four_pending_pods_makes_eight_requests(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for local, _ in _cluster("unschedulable"):
        pods = lifecycle.status(local.session(), Ref.of(_job(local))).nodes
        assert len(pods) == 4 and not any(n.ready for n in pods)
        status(local, capsys)
        warm = status(local, capsys)
        # job, pods, then one events list per name: the job, its first Job, its four pods
        assert len(warm) == 2 + 6, warm
        assert not discoveries(warm)


@pytest.mark.parametrize("refusal", ["forbidden", "not served"])
def test_events_are_read_through_core_v1_when_events_v1_is_refused(
    capsys: pytest.CaptureFixture[str], refusal: str
) -> None:
    for local, _ in _cluster("unschedulable", nodes=1):
        status(local, capsys)
        # a Role that grants core/v1 events, not events.k8s.io (as older Roles do); a server
        # before Kubernetes 1.19, which answers its path 404
        code = 403 if refusal == "forbidden" else 404
        local.kube.faults.add("GET", "/apis/events.k8s.io/v1/", status=code, times=100)
        # Neither is a server kfcompile's Role (events.k8s.io only) is written for: not audited.
        local.calls.listeners.clear()
        core_view(local)
        local.kube.requests.clear()
        assert main(["events", "bench", "--kubeconfig", str(local.kubeconfig)]) == 0
        out, _ = capsys.readouterr()
        assert "FailedScheduling" in out
        lists = [r.path for r in local.kube.requests if r.path.endswith("/events")]
        # one refused list through events.k8s.io/v1, then every name through core/v1
        assert lists[0].startswith("/apis/events.k8s.io/v1/")
        assert lists[1:] and all(p.startswith("/api/v1/") for p in lists[1:])


def core_view(local: LocalCluster) -> None:
    """Each event as core/v1 serves it too: two views of one stored object (KUBEFLOW.md), under
    the older names (``pkg/apis/events/v1/conversion.go``)."""
    names = {"regarding": "involvedObject", "note": "message",
             "reportingController": "reportingComponent"}  # fmt: skip
    for event in local.store.list("events.k8s.io/v1", "Event"):
        fields = {names.get(k, k): v for k, v in event.items() if k not in ("apiVersion", "kind")}
        local.store.put({"apiVersion": "v1", "kind": "Event", **fields,
                         "lastTimestamp": event["eventTime"][:19] + "Z"})  # fmt: skip


def test_the_cache_is_kept_per_server_owner_only(
    healthy: tuple[LocalCluster, Ref], capsys: pytest.CaptureFixture[str]
) -> None:
    local, _ = healthy
    root = Path(os.environ["KFCOMPILE_CACHE_DIR"])
    status(local, capsys)
    [file] = cache_files(root)
    server = local.kube.url
    assert file == DiskDiscovery(root, server)._file(TRAINER)
    assert file.stat().st_mode & 0o777 == 0o600
    directory = file.parent
    while directory != root.parent:
        assert directory.stat().st_mode & 0o077 == 0, directory
        directory = directory.parent
    for other, _ in _cluster("hang"):
        assert server_dir(other.kube.url) != server_dir(server)
        assert discoveries(status(other, capsys)) == [f"discovery /apis/{TRAINER}"]  # its own
    assert len(cache_files(root)) == 2


def _plant(file: Path, doc: object, mode: int = 0o600) -> None:
    file.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    file.chmod(mode)


@pytest.mark.parametrize(
    "spoil",
    [
        "garbage",
        "wrong plural, group-writable",
        "another group version",
        "symlink",
        "hard link",
        "a FIFO",
        "too large",
        "another owner",
        "expired",
    ],
)
def test_a_cache_file_that_is_not_to_be_trusted_is_ignored(
    healthy: tuple[LocalCluster, Ref], capsys: pytest.CaptureFixture[str], spoil: str
) -> None:
    local, _ = healthy
    root = Path(os.environ["KFCOMPILE_CACHE_DIR"])
    status(local, capsys)
    [file] = cache_files(root)
    doc = json.loads(file.read_text())
    hostile = {**doc, "resources": [{**r, "name": "evil"} for r in doc["resources"]]}
    if spoil == "garbage":
        _plant(file, '{"groupVersion": "trainer.kubeflow.org/v1alpha1", "resources": [1')
    elif spoil == "wrong plural, group-writable":
        _plant(file, hostile, 0o620)
    elif spoil == "another group version":
        _plant(file, {**hostile, "groupVersion": "example.com/v1"})
    elif spoil == "symlink":
        elsewhere = root / "planted.json"
        _plant(elsewhere, hostile)
        file.unlink()
        file.symlink_to(elsewhere)
    elif spoil == "hard link":  # e.g. another server's file, linked in
        _plant(file, hostile)
        os.link(file, root / "planted.json")
    elif spoil == "a FIFO":  # opening it to read would wait for a writer
        file.unlink()
        os.mkfifo(file, 0o600)
    elif spoil == "too large":
        _plant(file, json.dumps(hostile) + " " * OBJECT_LIMIT)
    elif spoil == "another owner":
        if os.getuid() != 0:
            pytest.skip("only root can give a file to another user")
        _plant(file, hostile)
        os.chown(file, 4242, 4242)
    else:
        old = file.stat().st_mtime - TTL - 1
        _plant(file, hostile)
        os.utime(file, (old, old))
    again = status(local, capsys)
    assert discoveries(again) == [f"discovery /apis/{TRAINER}"]  # the server, asked again
    assert not any("evil" in r for r in again)
    assert json.loads(file.read_text()) == doc  # and its answer kept instead


def test_a_cache_file_written_in_the_future_is_not_trusted(tmp_path: Path) -> None:
    cache = DiskDiscovery(tmp_path, "https://k8s.example:6443", now=lambda: 1_000_000.0)
    doc = {"groupVersion": "example.com/v1", "resources": []}
    cache.write("example.com/v1", doc)
    file = cache._file("example.com/v1")
    assert file is not None
    os.utime(file, (1_000_000.0 - 5, 1_000_000.0 - 5))
    assert cache.read("example.com/v1") == doc
    os.utime(file, (1_000_000.0 + 60, 1_000_000.0 + 60))  # a clock set back cannot pin it
    assert cache.read("example.com/v1") is None
    os.utime(file, (1_000_000.0 - TTL, 1_000_000.0 - TTL))
    assert cache.read("example.com/v1") is None


def test_a_cached_document_without_the_kind_asks_the_server(
    healthy: tuple[LocalCluster, Ref], capsys: pytest.CaptureFixture[str]
) -> None:
    """A CRD installed since the cache was written (here: a TrainJob the cached document of its
    group does not list) is found: the server is asked."""
    local, _ = healthy
    status(local, capsys)
    [file] = cache_files(Path(os.environ["KFCOMPILE_CACHE_DIR"]))
    doc = json.loads(file.read_text())
    _plant(file, {**doc, "resources": [r for r in doc["resources"] if r["kind"] != "TrainJob"]})
    again = status(local, capsys)
    assert discoveries(again) == [f"discovery /apis/{TRAINER}"]
    assert len(again) == HEALTHY + 1


def test_a_cache_that_cannot_be_written_is_silent(
    healthy: tuple[LocalCluster, Ref],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, _ = healthy
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setenv("KFCOMPILE_CACHE_DIR", str(blocked))
    local.kube.requests.clear()
    assert main(["status", "bench", "--kubeconfig", str(local.kubeconfig)]) == 0
    out, err = capsys.readouterr()
    assert "bench" in out and err == ""
    assert len(local.kube.requests) == HEALTHY + 1
    assert blocked.read_text() == ""


def _job(local: LocalCluster) -> dict[str, object]:
    job = local.store.get(TRAINER, "TrainJob", NAMESPACE, "bench")
    assert job is not None
    return job


def test_a_user_without_a_home_has_no_cache(
    healthy: tuple[LocalCluster, Ref],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pod's user may have no home (no $HOME, no passwd entry): the command runs uncached."""
    local, _ = healthy
    for name in ("KFCOMPILE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert DiskDiscovery.of(local.kube.url) is None
    for _ in range(2):
        assert discoveries(status(local, capsys)) == [f"discovery /apis/{TRAINER}"]


# --- a cache the cluster has outlived (issue 23 §4, issue 24 item 14) ----------------------------


def _uninstall(local: LocalCluster, crd: str) -> None:
    """Remove a CRD as ``kubectl delete crd`` does: what it served goes with it (the fake serves
    no DELETE of CRDs, so its store is told directly)."""
    local.store.remove(("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, crd))


def _cli(local: LocalCluster, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    local.kube.requests.clear()
    code = main([*args, "--kubeconfig", str(local.kubeconfig)])
    out, err = capsys.readouterr()
    return code, out + err


def test_a_kind_whose_crd_was_removed_since_the_cache_is_left_out(
    healthy: tuple[LocalCluster, Ref], capsys: pytest.CaptureFixture[str]
) -> None:
    """The move from Training Operator v1 to Trainer v2: the PyTorchJob CRD removed. Listing
    PyTorchJobs through the cached path answers 404 (it ended ``list -A`` for up to 6 h): that
    group version is asked again, forgotten, and the kind left out."""
    local, _ = healthy
    assert _cli(local, capsys, "list", "-A")[0] == 0  # the cache now says PyTorchJobs are served
    _uninstall(local, "pytorchjobs.kubeflow.org")
    code, said = _cli(local, capsys, "list", "-A")
    assert code == 0, said
    assert "bench" in said and "NotFound" not in said
    requests = local.kube.requests.matching(path="/kubeflow.org/")
    # the list through the cached path, then discovery (once): the CRD is gone
    assert [(r.path, r.status) for r in requests] == [
        ("/apis/kubeflow.org/v1/pytorchjobs", 404),
        ("/apis/kubeflow.org/v1", 404),
    ]
    root = Path(os.environ["KFCOMPILE_CACHE_DIR"])
    assert not any("kubeflow.org/v1/" in str(f.relative_to(root)) for f in cache_files(root))
    assert _cli(local, capsys, "list", "-A")[0] == 0  # and no list of them tried again
    assert not local.kube.requests.matching(path="/pytorchjobs")


def test_a_kind_served_on_another_path_since_the_cache_is_asked_there(
    healthy: tuple[LocalCluster, Ref], capsys: pytest.CaptureFixture[str]
) -> None:
    """The PyTorchJob CRD installed again under another plural: the cached path's 404 sends
    discovery back to the server, whose path the list is sent to once more (not a NotFound)."""
    local, _ = healthy
    assert _cli(local, capsys, "list", "-A")[0] == 0  # the cache says .../v1/pytorchjobs
    crd = local.store.items[(*CRD, None, "pytorchjobs.kubeflow.org")]
    _uninstall(local, "pytorchjobs.kubeflow.org")
    names = crd["spec"]["names"] | {"plural": "pytorchtrainings"}
    local.store.create({**crd, "metadata": {"name": "pytorchtrainings.kubeflow.org"},
                        "spec": crd["spec"] | {"names": names}})  # fmt: skip
    local.calls.listeners.clear()  # out of the RBAC audit: no Role names a plural made up here
    code, said = _cli(local, capsys, "list", "-A")
    assert code == 0, said
    requests = local.kube.requests.matching(path="/kubeflow.org/")
    assert [(r.path, r.status) for r in requests] == [
        ("/apis/kubeflow.org/v1/pytorchjobs", 404),
        ("/apis/kubeflow.org/v1", 200),
        ("/apis/kubeflow.org/v1/pytorchtrainings", 200),
    ]


def test_submit_detects_the_target_again_when_the_cached_one_is_gone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The cache said TrainJobs are served; the Trainer is gone since (its ConfigMap never
    there): its CRD's 404 sends discovery back to the server, which serves PyTorchJobs only."""
    with LocalCluster(schema_check.require_shared(), trainer=None, auto=False) as local:
        assert _cli(local, capsys, "list", "-A")[0] == 0
        _uninstall(local, "trainjobs.trainer.kubeflow.org")
        spec = write_spec(tmp_path)
        code, said = _cli(local, capsys, "submit", str(spec), "--namespace", NAMESPACE)
        assert "which Trainer release runs cannot be told" not in said
        assert code == 0, said
        assert "target pytorchjob/v1, detected from the cluster" in said


def test_a_cluster_re_created_on_the_same_url_is_not_told_by_the_old_ones_cache(
    healthy: tuple[LocalCluster, Ref], tmp_path: Path
) -> None:
    """kind and minikube clusters come back on the same URL with a new CA: the cache is kept
    per URL and CA, so the new cluster's discovery is asked (the CA costs no request)."""
    local, _ = healthy
    cas = [tmp_path / "ca-1.crt", tmp_path / "ca-2.crt"]
    for i, ca in enumerate(cas):
        ca.write_text(f"-----BEGIN CERTIFICATE-----\nMIIB{i}\n-----END CERTIFICATE-----\n")

    def discovered(ca: Path) -> int:
        local.kube.requests.clear()
        client = connect(str(local.kubeconfig)).api_client
        client.configuration.ssl_ca_cert = str(ca)  # as a kubeconfig of an https server sets it
        assert KubeCluster(client, cache_discovery=True).served(TRAINER, "TrainJob")
        return len(local.kube.requests.matching(verb="discovery"))

    assert [discovered(cas[0]), discovered(cas[0]), discovered(cas[1])] == [1, 0, 1]

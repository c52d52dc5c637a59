"""A hostile or broken API server gets one clear line, in bounded time and memory (issue 15,
items 13-16): answers of the wrong shape or not JSON at all, a whole request bounded by
``--request-timeout`` (a drip, a TLS handshake that never ends), a list that pages for ever,
answers too large to read. Through the real CLI and adapter, on real sockets, against the local
API server (``fakekube``: a ``Body`` fault answers 200 with the test's own bytes) and the
servers of ``fakekube.unreachable``. Each time-bound test asserts how long it took at most.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schema_check
from fakekube import Body, FakeKube
from fakekube.cluster import LocalCluster, with_demo
from fakekube.unreachable import Dripping, Silent, kubeconfig

from kfcompile.cli import main
from kfcompile.lifecycle import ClusterError
from kfcompile.lifecycle.objects import list_all
from kfcompile.lifecycle.ports import ApiError, Ref, Transient
from kfcompile_kube import KubeCluster, connect

Obj = dict[str, Any]
JOB_PATH = "/trainjobs/demo"
DISCOVERY = re.compile(r"/apis/trainer\.kubeflow\.org/v1alpha1$")
MiB = 1 << 20
OBJECT_LIMIT = 3 * MiB  # the limits the README states
LIST_LIMIT = 64 * MiB


@pytest.fixture(scope="module")
def http() -> Iterator[LocalCluster]:
    """The local API server with a job ``demo`` submitted through the CLI."""
    with with_demo(schema_check.require_shared()) as cluster:
        yield cluster


@pytest.fixture
def fake(http: LocalCluster) -> Iterator[FakeKube]:
    http.kube.faults.clear()
    yield http.kube
    http.kube.faults.clear()


def one_line(capsys: Any, *argv: str, kc: Path) -> str:
    """Run the CLI, which must fail with exit 1 and one line on stderr: that line."""
    capsys.readouterr()
    code = main([*argv, "--kubeconfig", str(kc)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("kfcompile: ")
    return err.strip()


def job(**fields: Any) -> bytes:
    obj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", **fields}
    return json.dumps(obj).encode()


# --- item 13: every answer checked for shape where it is read ----------------------------------

READ_JOB = "kfcompile: read TrainJob default/demo: BadAnswer: "
DISCOVERED = READ_JOB + "discovery of trainer.kubeflow.org/v1alpha1: "
SHAPES = {  # (path, answer) -> the line
    "html login page": (
        JOB_PATH,
        Body(b"<html><form>login</form></html>", "text/html"),
        READ_JOB + "the answer is not JSON (text/html, 31 bytes)",
    ),
    "job a string": (
        JOB_PATH,
        Body(b'"demo"'),
        READ_JOB + "the answer is a string, not a JSON object",
    ),
    "metadata null": (
        JOB_PATH,
        Body(job(metadata=None)),
        READ_JOB + "metadata is null, not an object",
    ),
    "labels a list": (
        JOB_PATH,
        Body(job(metadata={"name": "demo", "labels": ["a"]})),
        READ_JOB + "metadata.labels is a list, not an object",
    ),
    "status a string": (
        JOB_PATH,
        Body(job(metadata={"name": "demo"}, status="Running")),
        READ_JOB + "status is a string, not an object",
    ),
    "discovery a list": (
        DISCOVERY,
        Body(b"[]"),
        DISCOVERED + "the answer is a list, not a JSON object",
    ),
    "discovery resources a string": (
        DISCOVERY,
        Body(b'{"resources": "trainjobs"}'),
        DISCOVERED + "resources is a string, not a list",
    ),
    "pods items a string": (
        "/pods",
        Body(b'{"metadata": {}, "items": "none"}'),
        "kfcompile: list Pod in default: BadAnswer: items is a string, not a list",
    ),
    "annotation an integer": (
        JOB_PATH,
        Body(job(metadata={"name": "demo", "annotations": {"a": 1}})),
        READ_JOB + "metadata.annotations holds an integer, not a string",
    ),
    "continue an integer": (
        "/pods",
        Body(b'{"metadata": {"continue": 7}, "items": []}'),
        "kfcompile: list Pod in default: BadAnswer: metadata.continue is an integer, not a string",
    ),
    "pod not an object": (
        "/pods",
        Body(b'{"metadata": {}, "items": [7]}'),
        "kfcompile: list Pod in default: BadAnswer: items[0] is an integer, not a JSON object",
    ),
}


@pytest.mark.parametrize("case", list(SHAPES))
def test_an_answer_of_the_wrong_shape_is_one_line(
    http: LocalCluster, fake: FakeKube, capsys: Any, case: str
) -> None:
    path, body, line = SHAPES[case]
    fake.faults.add("GET", path, answer=body, watch=False)
    assert one_line(capsys, "status", "demo", kc=http.kubeconfig) == line


NESTED = {  # a pod's field deeper than the adapter checks, of the wrong type: read as absent
    "containerStatuses a string": {"phase": "Running", "containerStatuses": "ready"},
    "phase a list": {"phase": ["Running"]},
}


@pytest.mark.parametrize("case", list(NESTED))
def test_a_nested_field_of_the_wrong_shape_reads_as_absent(
    http: LocalCluster, fake: FakeKube, capsys: Any, case: str
) -> None:
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "demo",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    pod = {"metadata": {"name": "demo-node-0-0", "labels": labels}, "status": NESTED[case]}
    answer = Body(json.dumps({"metadata": {"resourceVersion": "1"}, "items": [pod]}).encode())
    fake.faults.add("GET", "/pods", watch=False, answer=answer)
    capsys.readouterr()
    assert main(["status", "demo", "--kubeconfig", str(http.kubeconfig)]) == 0
    out, err = capsys.readouterr()
    assert "demo-node-0-0" in out and "Traceback" not in err


WATCH_ERRORS = {
    "code a string": (
        {"type": "ERROR", "object": {"kind": "Status", "code": "gone"}},
        "the ERROR event's object.code is a string, not an integer",
    ),
    "event a list": ([1, 2], "a watch event is not a JSON object"),
    "object a string": (
        {"type": "MODIFIED", "object": "demo"},
        "a watch event has no type or no object",
    ),
}


@pytest.mark.parametrize("case", list(WATCH_ERRORS))
def test_a_watch_event_of_the_wrong_shape_is_one_line(
    http: LocalCluster, fake: FakeKube, capsys: Any, case: str
) -> None:
    """``wait`` says the job's state first (a list), then ends on the watch's event."""
    event, words = WATCH_ERRORS[case]
    answer = Body(json.dumps(event).encode() + b"\n")
    fake.faults.add("GET", "/trainjobs", watch=True, answer=answer)
    capsys.readouterr()
    assert main(["wait", "demo", "--timeout", "20", "--kubeconfig", str(http.kubeconfig)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last == f"kfcompile: watch TrainJob default/demo: BadAnswer: {words}", err


# --- item 14: --request-timeout bounds the whole request ----------------------------------------


def drip(data: bytes) -> Iterator[bytes]:
    return (data[i : i + 1] for i in range(len(data)))


def test_a_dripped_body_ends_at_the_request_timeout(http: LocalCluster, fake: FakeKube) -> None:
    """Each byte comes within the timeout, the whole answer not (today: ~8 s, then read)."""
    body = job(metadata={"name": "demo", "namespace": "default"})  # ~100 bytes: 30 s of drip
    fake.faults.add("GET", JOB_PATH, answer=Body(drip(body), length=len(body), drip=0.3))
    kube = KubeCluster(connect(str(http.kubeconfig)).api_client, request_timeout=1.0)
    start = time.monotonic()
    with pytest.raises(Transient) as info:
        kube.get(Ref("trainer.kubeflow.org/v1alpha1", "TrainJob", "default", "demo"))
    assert time.monotonic() - start < 2.5
    assert re.fullmatch(r"the answer from http://127\.0\.0\.1:\d+ took over 1s", info.value.message)


def test_dripped_headers_end_at_the_request_timeout(tmp_path: Path, capsys: Any) -> None:
    with Dripping(drip=0.2) as server:
        start = time.monotonic()
        kc = kubeconfig(tmp_path / "kc", server.url)
        line = one_line(capsys, "status", "demo", "--request-timeout", "1s", kc=kc)
        assert time.monotonic() - start < 3.0
    assert line.endswith(f"cannot reach the API server: no answer from {server.url} within 1s")


def test_a_tls_handshake_that_never_ends_waits_the_request_timeout(tmp_path: Path) -> None:
    """Not the connect timeout (today: 0.3 s here, 5 s by default, whatever the flag says)."""
    with Silent("https") as server:  # its TLS handshake never ends
        api = connect(str(kubeconfig(tmp_path / "kc", server.url))).api_client
        kube = KubeCluster(api, connect_timeout=0.3, request_timeout=1.0)
        start = time.monotonic()
        with pytest.raises(Transient) as info:
            kube.get(Ref("v1", "Namespace", None, "default"))
        assert 0.9 < time.monotonic() - start < 1.8
    assert info.value.message == f"TLS with {server.url} not established within 1s"


def test_the_cli_says_the_tls_handshake_did_not_end(tmp_path: Path, capsys: Any) -> None:
    with Silent("https") as server:  # its TLS handshake never ends
        kc = kubeconfig(tmp_path / "kc", server.url)
        line = one_line(capsys, "status", "demo", "--request-timeout", "0.5", kc=kc)
    assert line.endswith(f"TLS with {server.url} not established within 0.5s"), line


def test_a_stream_is_bounded_only_until_it_starts(http: LocalCluster, fake: FakeKube) -> None:
    """A watch's events may come slower than the request timeout allows a whole request."""
    events = [
        json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(n)}}})
        for n in range(4)
    ]
    lines = [e.encode() + b"\n" for e in events]
    fake.faults.add("GET", "/trainjobs", watch=True, answer=Body(lines, length=None, drip=0.3))
    kube = KubeCluster(connect(str(http.kubeconfig)).api_client, request_timeout=0.5)
    api = "trainer.kubeflow.org/v1alpha1"
    stream = kube.watch(api, "TrainJob", "default", resource_version="1", timeout_seconds=5)
    assert [e.object["metadata"]["resourceVersion"] for e in stream] == ["0", "1", "2", "3"]


def test_a_followed_log_may_start_later_than_the_request_timeout(
    http: LocalCluster, fake: FakeKube
) -> None:
    """Its answer starts with the container's first line, which may be hours away."""
    answer = Body([b"first\n", b"second\n"], "text/plain", length=None)
    fake.faults.add("GET", "/log", answer=answer, hang=0.8)  # its headers come with its line
    kube = KubeCluster(connect(str(http.kubeconfig)).api_client, request_timeout=0.3)
    assert list(kube.pod_log("default", "demo-node-0-0", follow=True)) == ["first", "second"]


# --- item 15: a list that pages for ever --------------------------------------------------------


def page(token: str, remaining: int | None = None, items: int = 1) -> Body:
    meta: Obj = {"resourceVersion": "1", "continue": token}
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    pods = [{"metadata": {"name": f"p-{token}-{i}"}} for i in range(items)]
    return Body(json.dumps({"metadata": meta, "items": pods}).encode())


def test_a_repeated_continue_token_is_an_error(http: LocalCluster, fake: FakeKube) -> None:
    fake.faults.add("GET", "/pods", watch=False, answer=page("again"), times=50)
    fake.requests.clear()
    with pytest.raises(ClusterError, match=r"^list Pod in default: the server gave the same"):
        list_all(http.session(), "v1", "Pod", "default")
    assert fake.requests.count("GET", "/pods") == 2


def test_more_pages_than_the_remaining_items_explain_is_an_error(
    http: LocalCluster, fake: FakeKube
) -> None:
    for n in range(50):  # a fresh token each time, and always "2 items left"
        fake.faults.add("GET", "/pods", watch=False, answer=page(f"t{n}", remaining=2))
    fake.requests.clear()
    with pytest.raises(ClusterError, match="more pages than the items the server said"):
        list_all(http.session(), "v1", "Pod", "default")
    assert fake.requests.count("GET", "/pods") == 3  # the first, and the 2 items it promised


def test_the_cli_names_the_list_that_pages_for_ever(
    http: LocalCluster, fake: FakeKube, capsys: Any
) -> None:
    fake.faults.add("GET", "/pods", watch=False, answer=page("again"), times=50)
    line = one_line(capsys, "status", "demo", kc=http.kubeconfig)
    assert line == "kfcompile: list Pod in default: the server gave the same continue token twice"


def test_list_watch_refuses_a_repeated_continue_token(
    http: LocalCluster, fake: FakeKube, capsys: Any
) -> None:
    """``list -w`` pages through its own machine (``watcher``): the same rule."""
    fake.faults.add("GET", "/trainjobs", watch=False, answer=page("again"), times=50)
    line = one_line(capsys, "list", "--watch", kc=http.kubeconfig)
    assert (
        line == "kfcompile: list TrainJob in default: the server gave the same continue token twice"
    )


# --- item 16: what is read of an answer is bounded ----------------------------------------------


class Counted:
    """``total`` bytes in 64 KiB pieces, drawn only as sent; ``drawn``: how many were."""

    def __init__(self, total: int) -> None:
        self.total, self.drawn = total, 0

    def __iter__(self) -> Iterator[bytes]:
        piece = b" " * (64 * 1024)
        for _ in itertools.repeat(None, self.total // len(piece)):
            self.drawn += len(piece)
            yield piece


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_object_over_the_limit_is_refused_unread(
    http: LocalCluster, fake: FakeKube, capsys: Any, chunked: bool
) -> None:
    body = Counted(64 * MiB)
    length = None if chunked else body.total
    fake.faults.add("GET", JOB_PATH, answer=Body(body, length=length))
    line = one_line(capsys, "status", "demo", kc=http.kubeconfig)
    over = "over" if chunked else "64 MiB, over"
    assert line == READ_JOB + f"the answer is {over} the 3 MiB limit"
    assert body.drawn < 24 * MiB  # the limit, and what the sockets' buffers took in


def test_a_list_over_the_limit_is_refused(http: LocalCluster, fake: FakeKube, capsys: Any) -> None:
    body = Counted(LIST_LIMIT + 16 * MiB)
    fake.faults.add("GET", "/pods", watch=False, answer=Body(body, length=None))
    line = one_line(capsys, "status", "demo", kc=http.kubeconfig)
    assert line == "kfcompile: list Pod in default: BadAnswer: the answer is over the 64 MiB limit"
    assert body.drawn < LIST_LIMIT + 16 * MiB


def test_an_object_at_the_limit_is_read(http: LocalCluster, fake: FakeKube) -> None:
    name = {"metadata": {"name": "demo", "namespace": "default"}}
    padding = OBJECT_LIMIT - len(job(**name, spec={"x": ""}))
    fake.faults.add("GET", JOB_PATH, answer=Body(job(**name, spec={"x": "x" * padding})))
    kube = KubeCluster(connect(str(http.kubeconfig)).api_client)
    got = kube.get(Ref("trainer.kubeflow.org/v1alpha1", "TrainJob", "default", "demo"))
    assert len(got["spec"]["x"]) == padding


def test_a_compressed_answer_is_refused(http: LocalCluster, fake: FakeKube) -> None:
    fake.faults.add("GET", JOB_PATH, answer=Body(b"\x1f\x8b", length=2, encoding="gzip"))
    kube = KubeCluster(connect(str(http.kubeconfig)).api_client)
    with pytest.raises(ApiError, match="the answer is gzip-encoded, which was not asked for"):
        kube.get(Ref("trainer.kubeflow.org/v1alpha1", "TrainJob", "default", "demo"))


def test_an_error_answer_is_read_only_as_far_as_the_limit(
    http: LocalCluster, fake: FakeKube
) -> None:
    """Its Status is what the error says; a huge body is not read for it."""
    body = Counted(64 * MiB)
    fake.faults.add("GET", JOB_PATH, answer=Body(body, length=None, status=500))
    kube = KubeCluster(connect(str(http.kubeconfig)).api_client)
    with pytest.raises(Transient) as info:
        kube.get(Ref("trainer.kubeflow.org/v1alpha1", "TrainJob", "default", "demo"))
    assert info.value.status == 500
    assert body.drawn < 24 * MiB

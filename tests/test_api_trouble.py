"""Trouble with the API server (issue 9, "fail fast, retry only what is transient"):

- before the API has answered anything, a call that gets no answer ends the command at once,
  in the words of what happened and with the server's URL (refused, unknown host, TLS, no
  answer within ``--request-timeout``); once it has answered, the same trouble is retried;
- a 429 or 503 waits at least what its ``Retry-After`` asks;
- a watch answered 410 again and again lists again with backoff, and says so once;
- an error that ends a command names the call that failed.

At the port (the in-memory cluster on a fake clock) for the lifecycle's rules; through the real
CLI and adapter against real sockets for what only the wire shows, asserting what happened (the
words, one connection), never how long it took (``bench/time_to_fail.py`` measures that).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import schema_check
import urllib3.util.connection
from attrs import evolve
from fakekube import FakeKube
from fakekube.cluster import NAMESPACE, PortCluster
from fakekube.unreachable import (
    NO_HOST,
    TOKEN,
    Silent,
    UntrustedTLS,
    closed_port,
    kubeconfig,
)

from kfcompile import lifecycle, structure
from kfcompile.cli import main
from kfcompile.cli.parser import build
from kfcompile.kinds import TRAINJOB
from kfcompile.lifecycle.job_events import watch_kind
from kfcompile.lifecycle.ports import ApiError, Ref, Transient
from kfcompile.testing import Call, courses, fixed_jitter
from kfcompile_kube import KubeCluster, connect

API = TRAINJOB.api_version


@pytest.fixture
def local() -> Iterator[PortCluster]:
    with PortCluster(schema_check.require_shared()) as cluster:  # its jobs never move
        yield cluster


def submitted(local: PortCluster, environ: dict[str, str] | None = None, **extra: Any) -> Ref:
    spec = structure(
        {
            "name": "demo",
            "image": "python:3.11-slim",
            "command": ["python", "train.py"],
            **extra,
        }
    )
    session = local.session()
    done = lifecycle.submit(
        session, spec, "trainjob/v2.3", namespace=NAMESPACE, environ=environ or {}
    )
    return done.ref


def told(session: lifecycle.Session) -> tuple[lifecycle.Session, list[str]]:
    """The session, telling its ``on_retry`` lines to the list returned."""
    lines: list[str] = []

    def say(what: str, error: ApiError) -> None:
        lines.append(f"{what}: {error}")

    return lifecycle.Session(
        session.cluster, session.clock, jitter=fixed_jitter, retry_for=60.0, on_retry=say
    ), lines


def runaway_guard(local: PortCluster, limit: int) -> None:
    """Fail a test whose code under test makes more than ``limit`` calls (without backoff, a
    loop on the fake clock never lets time pass, so it would never end)."""

    def count(call: Call) -> None:
        if len(local.calls) > limit:
            raise AssertionError(f"more than {limit} calls: {call}")

    local.calls.listeners.append(count)


# --- the first contact, at the port -------------------------------------------------------------

NO_ANSWER = {  # a call that got no answer at all, at the port
    "refused": {"refused": True},
    "reset": {"drop": True},
    "timed out": {"lost": True},
}


@pytest.mark.parametrize("fault", list(NO_ANSWER))
def test_a_call_without_an_answer_is_retried_only_once_the_api_has_answered(
    local: PortCluster, fault: str
) -> None:
    ref = submitted(local)
    local.faults.add("get", "TrainJob", **NO_ANSWER[fault])
    local.calls.clear()
    local.clock.slept.clear()
    with pytest.raises(lifecycle.Unreachable) as info:
        lifecycle.status(local.session(), ref)  # nothing answered this session yet
    assert str(info.value).startswith("read TrainJob default/demo: cannot reach the API server: ")
    assert local.calls.count("get", "TrainJob") == 1  # one try, no pause
    assert local.clock.slept == []
    session = local.session()
    lifecycle.list_jobs(session, NAMESPACE)  # the API answers
    local.faults.add("get", "TrainJob", **NO_ANSWER[fault])
    local.calls.clear()
    # The same trouble is retried now, in this session and in the copies evolve makes of it.
    assert lifecycle.status(evolve(session, retry_for=2.0), ref).ref == ref
    assert local.calls.count("get", "TrainJob") == 2


def test_an_error_status_is_an_answer(local: PortCluster) -> None:
    """A 503 comes from something that is there: retried on first contact, and a call that gets
    no answer after it is retried too."""
    ref = submitted(local)
    local.faults.add("get", "TrainJob", status=503)
    local.faults.add("get", "TrainJob", refused=True)
    local.calls.clear()
    assert lifecycle.status(local.session(), ref).ref == ref
    assert local.calls.count("get", "TrainJob") == 3
    local.faults.add("get", "TrainJob", refused=True)
    with pytest.raises(lifecycle.Unreachable):  # without the 503 first
        lifecycle.status(local.session(), ref)


# --- Retry-After --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retry_after", "slept"),
    [
        (429, None, 1.0),  # the API server's own 429 asks for 1 s
        (503, 3, 3.0),
        (429, 100, 5.0),  # never past the retry window (5 s here)
    ],
)
def test_a_pause_is_at_least_what_retry_after_asks(
    local: PortCluster, status: int, retry_after: int | None, slept: float
) -> None:
    ref = submitted(local)
    session = local.session(retry_for=5.0)
    lifecycle.list_jobs(session, NAMESPACE)
    local.faults.add("get", "TrainJob", status=status, retry_after=retry_after)
    local.clock.slept.clear()
    assert lifecycle.status(session, ref).ref == ref
    assert local.clock.slept[:1] == [pytest.approx(slept)]


# --- a watch that keeps expiring ----------------------------------------------------------------


def test_wait_backs_off_when_every_watch_expires_and_says_so_once(local: PortCluster) -> None:
    ref = submitted(local)
    session, lines = told(local.session())
    lifecycle.list_jobs(session, NAMESPACE)
    local.faults.add("watch", "TrainJob", status=410, times=10**6)
    local.calls.clear()
    local.clock.slept.clear()
    runaway_guard(local, 500)
    with pytest.raises(lifecycle.TimedOut):
        lifecycle.wait(session, ref, "done", timeout=60)
    watches = local.calls.count("watch", "TrainJob")
    # The pauses grow to the backoff's cap (5 s, half of it drawn): about one watch in 3.75 s.
    assert 15 <= watches <= 30
    assert local.clock.slept[:4] == pytest.approx([0.075, 0.15, 0.3, 0.6])
    assert max(local.clock.slept) == pytest.approx(3.75)
    assert lines == [
        "watch TrainJob default/demo: 410 Expired: the watch keeps expiring as soon as it "
        "starts (the server no longer has the version just listed): listing again, with backoff"
    ]


def test_a_watch_that_delivers_between_two_410s_lists_again_at_once(
    local: PortCluster,
) -> None:
    ref = submitted(local)
    session = local.session()
    lifecycle.list_jobs(session, NAMESPACE)
    local.faults.add("watch", "TrainJob", status=410, times=2)  # the second pauses first
    local.faults.add("watch", "TrainJob", drop_after=1)  # a change, then cut: trouble
    local.fake.at(1.0, lambda: courses.start(local.fake, NAMESPACE, "demo"))  # the change
    local.faults.add("watch", "TrainJob", status=410)  # after progress: at once again
    local.clock.slept.clear()
    with pytest.raises(lifecycle.TimedOut):
        lifecycle.wait(session, ref, "done", timeout=8)
    assert local.faults.pending == []
    assert local.clock.slept == pytest.approx([0.075, 0.075])  # the second 410, the cut stream


def test_watch_jobs_backs_off_when_every_watch_expires_and_says_so_once(
    local: PortCluster,
) -> None:
    session, lines = told(local.session())
    lifecycle.list_jobs(session, NAMESPACE)
    local.faults.add("watch", "TrainJob", status=410, times=10**6)
    local.clock.slept.clear()
    runaway_guard(local, 500)
    with closing(watch_kind(session, TRAINJOB, NAMESPACE)) as answers:
        for _ in range(40):  # 10 lists and 10 watches, with the pauses between
            next(answers)
    assert local.clock.slept[:4] == pytest.approx([0.075, 0.15, 0.3, 0.6])
    assert lines == [
        "watch TrainJob in default: 410 Expired: the watch keeps expiring as soon as it starts "
        "(the server no longer has the version just listed): listing again, with backoff"
    ]


# --- errors name their call ---------------------------------------------------------------------


def test_an_error_that_ends_a_submit_names_the_call(local: PortCluster) -> None:
    local.faults.add("create", "Secret", status=403)
    with pytest.raises(ApiError) as info:
        submitted(local, {"HF_TOKEN": "hf_not_printed"}, secret_env=["HF_TOKEN"])
    assert str(info.value) == (
        "create Secret default/demo-env: 403 Forbidden: forbidden: injected fault"
    )


def test_an_error_is_named_once_by_the_innermost_call(local: PortCluster) -> None:
    error = ApiError(403, "Forbidden", "no")
    error.named("patch TrainJob default/demo")
    error.named("submit TrainJob default/demo")
    assert str(error) == "patch TrainJob default/demo: 403 Forbidden: no"
    assert error.line == "403 Forbidden: no"


@pytest.fixture
def wired(local: PortCluster, monkeypatch: pytest.MonkeyPatch) -> PortCluster:
    """The CLI on ``local``, with a job ``demo`` submitted."""
    submitted(local)
    return local.wire(monkeypatch)


def test_the_cli_prints_the_call_that_failed(wired: PortCluster, capsys: Any) -> None:
    wired.faults.add("patch", "TrainJob/demo", status=403)
    assert main(["suspend", "demo"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "kfcompile: patch TrainJob default/demo: 403 Forbidden: forbidden: injected fault"
    ]


def test_the_cli_says_once_that_the_watch_keeps_expiring(wired: PortCluster, capsys: Any) -> None:
    wired.faults.add("watch", "TrainJob", status=410, times=10**6)
    main(["wait", "demo", "--timeout", "3"])
    err = capsys.readouterr().err
    assert err.count("the watch keeps expiring") == 1
    assert "kfcompile: watch TrainJob default/demo: 410 Expired: the watch keeps" in err


# --- through the CLI and the adapter, against servers that are not there ------------------------


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every connection urllib3 opens (the real function does the connecting)."""
    made: list[tuple[str, int]] = []
    real = urllib3.util.connection.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> Any:
        made.append(address)
        return real(address, *args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
    return made


def cli(kc: Path, capsys: Any, *extra: str) -> tuple[int, str]:
    code = main(["status", "demo", "--kubeconfig", str(kc), *extra])
    out, err = capsys.readouterr()
    assert out == ""
    return code, err


def first_contact_failed(err: str, words: str) -> None:
    """One line naming the call and what happened; nothing retried, no credentials."""
    assert err.count("\n") == 1, err
    assert err.startswith("kfcompile: ") and "cannot reach the API server: " + words in err
    assert "retrying" not in err and TOKEN not in err and "Traceback" not in err


def test_a_refused_port_fails_at_once(
    tmp_path: Path, capsys: Any, connects: list[tuple[str, int]]
) -> None:
    port = closed_port()
    code, err = cli(kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}"), capsys)
    assert code == 1
    first_contact_failed(err, f"connection refused by https://127.0.0.1:{port}")
    assert connects == [("127.0.0.1", port)]


def test_an_unknown_host_fails_at_once(
    tmp_path: Path, capsys: Any, connects: list[tuple[str, int]]
) -> None:
    code, err = cli(kubeconfig(tmp_path / "kc", f"https://{NO_HOST}:6443"), capsys)
    assert code == 1
    first_contact_failed(err, f"cannot resolve host {NO_HOST} (https://{NO_HOST}:6443)")
    assert connects == [(NO_HOST, 6443)]


def test_a_certificate_the_ca_did_not_sign_fails_at_once(
    tmp_path: Path, capsys: Any, connects: list[tuple[str, int]]
) -> None:
    with UntrustedTLS() as server:
        code, err = cli(kubeconfig(tmp_path / "kc", server.url), capsys)
    assert code == 1
    first_contact_failed(err, f"TLS certificate verify failed for {server.url}: self-signed")
    assert server.accepted == 1 and len(connects) == 1


def test_a_silent_server_fails_after_the_request_timeout(
    tmp_path: Path, capsys: Any, connects: list[tuple[str, int]]
) -> None:
    with Silent() as server:
        code, err = cli(kubeconfig(tmp_path / "kc", server.url), capsys, "--request-timeout", "0.3")
    assert code == 1
    first_contact_failed(err, f"no answer from {server.url} within 0.3s")
    assert server.accepted == 1 and len(connects) == 1


def test_a_timer_that_fires_late_still_names_the_limit_set() -> None:
    """Issue 24, item 15: on a loaded machine the timer fires late, and the message said the
    wait it measured ("within 0.4s" for ``--request-timeout 0.3``): it names the limit the
    user set, however late the request was cut."""
    from kfcompile_kube.deadline import Deadline

    late = Deadline(0.3)
    late._start -= 0.45  # the request began 0.45 s before its timer fired
    late._expire()  # the timer, late
    assert late.expired
    assert late.error("https://api:6443").message == "no answer from https://api:6443 within 0.3s"


def test_a_watch_waits_for_its_answer_only_the_request_timeout(tmp_path: Path) -> None:
    """Its events may take the watch's own timeout (60 s here) to come; its answer may not."""
    with Silent() as server:
        kube = KubeCluster(
            connect(str(kubeconfig(tmp_path / "kc", server.url))).api_client, request_timeout=0.3
        )
        stream = kube.watch("v1", "ConfigMap", "default", resource_version="1", timeout_seconds=60)
        with pytest.raises(Transient, match=r"no answer from .* within 0\.3s"):
            next(stream)
    assert server.accepted == 1


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30.0), ("1m", 60.0), ("90", 90.0), ("0.5", 0.5), ("0", 0.0)]
)
def test_request_timeout_reads_as_kubectl_does(text: str, seconds: float) -> None:
    args = build().parse_args(["status", "demo", "--request-timeout", text])
    assert args.request_timeout == seconds
    assert build().parse_args(["status", "demo"]).request_timeout == 30.0


CLUSTER_COMMANDS = (
    "submit", "status", "wait", "logs", "events", "cancel", "suspend", "resume", "sync", "list",
    "validate",
)  # fmt: skip


def test_every_cluster_command_takes_request_timeout(capsys: Any) -> None:
    for command in CLUSTER_COMMANDS:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--request-timeout DURATION" in capsys.readouterr().out, command


def test_no_request_timeout_is_none(tmp_path: Path) -> None:
    kc = kubeconfig(tmp_path / "kc", "http://127.0.0.1:1")
    assert connect(str(kc), request_timeout=0).request_timeout is None
    assert connect(str(kc), request_timeout=2.5).request_timeout == 2.5


def test_the_adapter_reads_retry_after(tmp_path: Path) -> None:
    asked = [(429, None, 1.0), (503, 7, 7.0), (503, None, None), (500, None, None)]
    with FakeKube() as fake:
        kube = KubeCluster(connect(str(fake.kubeconfig(tmp_path / "kc"))).api_client)
        for status, retry_after, seconds in asked:
            fake.faults.add("GET", "/namespaces/default", status=status, retry_after=retry_after)
            with pytest.raises(Transient) as info:
                kube.get(Ref("v1", "Namespace", None, "default"))
            assert info.value.retry_after == seconds, (status, retry_after)

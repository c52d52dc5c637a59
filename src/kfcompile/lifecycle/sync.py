"""Work-dir sync: a short-lived helper pod that mounts the claim (``await_running``), and a
tar stream over exec (read from disk as it is sent, written to disk as it arrives)."""

from __future__ import annotations

import contextlib
import itertools
import posixpath
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import partial
from typing import Final, TypeVar

from attrs import frozen

from kfcompile import status as job_status
from kfcompile.lifecycle.objects import create, get
from kfcompile.lifecycle.observe import TimedOut, events_about, pod_waiting
from kfcompile.lifecycle.ports import (
    ApiError,
    ExecOutput,
    ExecResult,
    Forbidden,
    LocalFiles,
    NotFound,
    Obj,
    Packed,
    Ref,
)
from kfcompile.lifecycle.session import (
    MANAGED_BY_LABEL,
    MANAGER,
    SPEC_HASH,
    ClusterError,
    Pause,
    Session,
    call,
    named,
    pause,
)

T = TypeVar("T")

SYNC_IMAGE: Final = "busybox:1.36"  # has tar; the helper pod runs nothing else
SYNC_ROOT: Final = "/mnt/pvc"
SYNC_TIMEOUT: Final = 300.0  # seconds the helper pod may take to start, unless --timeout says
HELPER_EVENTS: Final = 5  # events of a helper pod that does not start, said with why


@frozen
class Synced:
    """What a work-dir sync copied: how many files, and their size in bytes."""

    files: int
    size: int


def claim_dir(path: str) -> str:
    """``path`` inside the claim, as the helper pod sees it; it may not leave the claim."""
    if not path.startswith("/"):
        raise ClusterError(f"--path {path}: must be absolute (a directory inside the claim)")
    inside = posixpath.normpath(path).lstrip("/")  # "/.." is "/": never above the claim
    return posixpath.join(SYNC_ROOT, inside).rstrip("/")


def missing(session: Session, ref: Ref) -> bool:
    """Whether ``ref`` does not exist; one we may not read counts as there (the create that
    needs it will tell)."""
    try:
        return get(session, ref) is None
    except Forbidden:
        return False


def claim_missing(session: Session, namespace: str, pvc: str) -> str | None:
    """What is wrong when the claim does not exist (the caller adds how to fix it), else None:
    checked before a helper pod is made, which would otherwise wait unscheduled."""
    if missing(session, Ref("v1", "PersistentVolumeClaim", namespace, pvc)):
        return f"PersistentVolumeClaim {pvc} does not exist in namespace {namespace}"
    return None


def _helper_pod(namespace: str, pvc: str, image: str, token: str) -> Obj:
    # Named by us, not by generateName: a create retried after a lost answer then finds its
    # own pod (same token) instead of leaving a second one behind.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"kfcompile-sync-{token[:10]}",
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGER, "kfcompile.dev/role": "sync"},
            "annotations": {SPEC_HASH: token},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "activeDeadlineSeconds": 3600,  # gone within the hour even if we are killed
            "containers": [
                {
                    "name": "sync",
                    "image": image,
                    "command": ["sleep", "3600"],
                    "volumeMounts": [{"name": "data", "mountPath": SYNC_ROOT}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}],
        },
    }


def _why(session: Session, pod: Obj, head: str) -> str:
    """``head``, then why the helper pod has not started (its status), then its latest events,
    which often say more (a claim that cannot be mounted, an image being pulled)."""
    told = pod_waiting(pod)
    lines = [f"{head}: {told.message}" if told else head]
    ref = Ref.of(pod)
    try:
        found = events_about(session, ref.namespace, [ref.name], recent=HELPER_EVENTS)
    except ApiError:  # events are a help, not a need: the reason above stands alone
        found = ()
    lines += [f"  {event}" for event in found]
    return "\n".join(lines)


# A helper pod's phase -> what it means: Running is what is waited for; one that ended before
# it started will never run (``restartPolicy: Never``).
HELPER_ENDED: Final = frozenset({"Succeeded", "Failed"})


def await_running(session: Session, ref: Ref, timeout: float) -> None:
    """Return once the helper pod runs: looked at, and again after a pause of the session's one
    backoff, for ``timeout`` seconds at most (``TimedOut``, with why it has not started). One
    that disappeared, ended, or is stuck (it will not start without help: its status and
    events say why) is a ``ClusterError`` at once."""
    clock = session.clock
    since = clock.monotonic()
    for pauses in itertools.count():
        pod = get(session, ref)
        if pod is None:
            raise ClusterError(f"sync helper {ref} disappeared before it started")
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            return
        if phase in HELPER_ENDED:
            raise ClusterError(f"sync helper {ref} ended ({phase}) before it started")
        if job_status.stuck_pod([pod]) is not None:
            raise ClusterError(_why(session, pod, "sync helper"))
        waited = clock.monotonic() - since
        if waited >= timeout:
            head = f"sync helper not running after {timeout:g}s (--timeout)"
            raise TimedOut(_why(session, pod, head))
        pause(session, Pause(pauses, at_most=timeout - waited))


def _with_helper(
    session: Session,
    namespace: str,
    pvc: str,
    image: str,
    timeout: float,
    work: Callable[[Ref], T],
) -> T:
    """Run ``work`` with a short-lived pod that mounts ``pvc`` (which must exist); the pod is
    deleted on every path out, errors and Ctrl-C included."""
    absent = claim_missing(session, namespace, pvc)
    if absent:
        raise ClusterError(f"{absent}: create it, or name another with --pvc")
    token = "".join(f"{int(session.jitter() * 2**32):08x}" for _ in range(2))
    pod = create(session, _helper_pod(namespace, pvc, image, token), token)
    ref = Ref.of(pod)
    try:
        await_running(session, ref, timeout)
        return work(ref)
    finally:
        with contextlib.suppress(NotFound):
            call(session, named("delete", ref), lambda: session.cluster.delete(ref, "Background"))


def _exec(
    session: Session,
    pod: Ref,
    command: list[str],
    stdin: bytes | Iterable[bytes] = b"",
    stdout: Callable[[ExecOutput], object] | None = None,
) -> ExecResult:
    """One command in the helper pod (retried whole on transient trouble); ``stdin`` and
    ``stdout`` as the port takes them."""
    return call(
        session,
        named("exec in", pod),
        lambda: session.cluster.exec(
            pod.namespace or "default", pod.name, "sync", command, stdin, stdout=stdout
        ),
    )


def _succeeded(command: list[str], result: ExecResult, doing: str = "") -> None:
    if result.exit_code != 0:
        err = result.stderr.decode("utf-8", "replace").strip()[-500:]
        raise ClusterError(
            f"{doing}{' '.join(command[:2])} failed (exit {result.exit_code}): {err}"
        )


def _packed(
    chunks: Generator[bytes, None, Packed], local: str, into: list[Packed]
) -> Iterator[bytes]:
    """The chunks of ``local``'s tar stream; what it held goes to ``into`` at its end."""
    try:
        into.append((yield from chunks))
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot pack {local}: {exc}") from None


def _ended_well(output: ExecOutput, command: list[str]) -> Iterator[bytes]:
    """The command's output, failing at its end if the command failed: the unpacking reads to
    the end before it keeps anything, so a failed command leaves nothing behind."""
    _succeeded(command, (yield from output))


def sync_up(
    session: Session,
    files: LocalFiles,
    *,
    namespace: str,
    pvc: str,
    path: str,
    local: str,
    image: str = SYNC_IMAGE,
    timeout: float = SYNC_TIMEOUT,
) -> Synced:
    """Copy the local directory into ``path`` of the claim: a tar stream over exec, read from
    disk as it is sent (and read again if the stream has to start over)."""
    target_dir = claim_dir(path)
    command = ["tar", "-xf", "-", "-C", target_dir]
    try:
        first = files.pack(local)  # checks the directory before any pod is made
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot pack {local}: {exc}") from None
    streams = iter([first])
    doing = f"uploading {local} to {pvc}:{path}: "

    def attempt(pod: Ref) -> Synced:
        held: list[Packed] = []
        stream = next(streams, None) or files.pack(local)  # a fresh read on each attempt
        result = session.cluster.exec(
            pod.namespace or "default", pod.name, "sync", command, _packed(stream, local, held)
        )
        _succeeded(command, result, doing)
        if not held:
            raise ClusterError(f"{doing}the helper pod stopped reading before the end")
        return Synced(held[0].files, held[0].size)

    def upload(pod: Ref) -> Synced:
        mkdir = ["mkdir", "-p", target_dir]
        _succeeded(mkdir, _exec(session, pod, mkdir), doing)
        return call(session, named("exec in", pod), partial(attempt, pod))

    return _with_helper(session, namespace, pvc, image, timeout, upload)


def sync_down(
    session: Session,
    files: LocalFiles,
    *,
    namespace: str,
    pvc: str,
    path: str,
    local: str,
    image: str = SYNC_IMAGE,
    timeout: float = SYNC_TIMEOUT,
) -> Synced:
    """Copy ``path`` of the claim into the local directory: the tar stream goes to disk as it
    arrives, and only a whole, safe stream from a command that succeeded is kept."""
    source = claim_dir(path)
    command = ["tar", "-cf", "-", "-C", source, "."]

    def download(pod: Ref) -> Synced:
        got: list[Packed] = []

        def unpack(output: ExecOutput) -> None:
            try:
                got.append(files.unpack(_ended_well(output, command), local))
            except (OSError, ValueError) as exc:
                raise ClusterError(f"cannot unpack into {local}: {exc}") from None

        _succeeded(command, _exec(session, pod, command, stdout=unpack))
        return Synced(got[0].files, got[0].size)

    return _with_helper(session, namespace, pvc, image, timeout, download)

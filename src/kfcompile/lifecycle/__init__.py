"""A job's life on a cluster (submit, status, wait, logs, cancel, suspend, list, work-dir sync),
written against the ports in ``kfcompile.lifecycle.ports`` only.

Nothing here opens a socket, reads a clock, draws a random number or starts a thread: the
``Session`` carries the ``Cluster`` port, the ``Clock`` port, the jitter source and the
``Merge`` port, so tests drive all of them. The loops (waiting for a job, a followed log, every
job watched, a retried call, a list's pages) are machines fed what the API answered that say
what to ask next, each in the module of its command with its driver, the few lines that call
the ports. What runs once (submit's creates, repair and roll-back, a helper pod's start,
waiting for a deleted job to be gone) is straight-line code over the ports.

One module per command:

- ``submitting``: ``prepare``, ``preflight`` and ``submit``: the creates, the repair of a job
  submitted before, the roll-back of a failure (``LeftBehind``: what it could not delete)
- ``observe``: a job's state, its nodes and events (``status``); ``TimedOut``, a wait's end
- ``waiting``: ``wait``, the ``Waiter`` machine and its driver, and the answers of a watch
  the other watching loops share
- ``pod_logs``: ``logs``, ``read_logs`` and ``follow_logs``: the ``Follower`` machine, its
  ``Cursor`` and its driver, and ``InTurn``, a merge without threads
- ``job_events``: ``watch_jobs``, for services that run many jobs: the ``Watcher`` machine
  (every job of one kind) and its driver
- ``manage``: ``find``, ``locate``, ``cancel``, ``set_suspended``, ``list_jobs``
- ``deleting``: ``wait_gone``: waiting for a deleted job (and its pods) to be gone, saying
  what holds it
- ``sync``: ``sync_up`` and ``sync_down``: work-dir sync through a helper pod
- ``cluster_target``: which target a cluster runs (``detect_target``; what its answers mean is
  ``target_evidence``) and the CRD it serves a kind by

And what they share:

- ``session``: the Session, the one ``Backoff``, the errors, the machines' tables and their
  one ``drive``, the retry machine and ``call``
- ``objects``: reading (every page of a list: the ``Lister`` machine) and creating objects
  through ``call``
- ``ports``: the Protocols the lifecycle is written against, and the ``ApiError`` family
- ``kueue``: the Kueue API version the cluster serves (v1beta2, else v1beta1), a job's Workload
- ``multikueue``: on a MultiKueue manager, which worker cluster a job was dispatched to (its
  Kueue Workload), and whether a queue dispatches
- ``runtimes``: the runtime a TrainJob names, checked against what the job asks of it
- ``rbac``: the permissions the cluster commands use

Two rules hold everywhere:

- Trouble on the way to the API server (``Transient``: 429, 5xx, dropped connections, timeouts)
  is retried with capped exponential backoff and jitter (a ``Retry-After`` the least pause), and
  is never reported as the job's state. When it lasts longer than ``Session.retry_for`` it ends
  the command as ``Unavailable``. Before the API has answered anything in the session, a call
  that gets no answer at all ends it at once (``Unreachable``): no server is there to ride out.
  Any other ``ApiError`` that ends a command names the call that failed.
- A job is found again by its name and the spec-hash annotation, never by guessing: submitting
  the same spec twice creates nothing, and a different job holding the name is never touched.

``__all__`` is what a service uses: the commands, the ``Session``, the errors they raise (and
the API's ``Forbidden`` and ``NotFound``), ``Ref`` and the values they return, each imported
from its module on first use (a command loads only the machines it runs). The machines, their
tables and the ports are their modules'.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kfcompile.lifecycle.cluster_target import Found, detect_target, served_crd
    from kfcompile.lifecycle.deleting import StillDeleting, wait_gone
    from kfcompile.lifecycle.job_events import Happened, JobEvent, watch_jobs
    from kfcompile.lifecycle.manage import (
        Cancelled,
        Listed,
        cancel,
        find,
        list_jobs,
        locate,
        set_suspended,
    )
    from kfcompile.lifecycle.observe import (
        Event,
        Node,
        Observation,
        TimedOut,
        Waiting,
        status,
    )
    from kfcompile.lifecycle.pod_logs import (
        CannotRead,
        CannotStart,
        LogLine,
        NoSuchRank,
        follow_logs,
        logs,
        read_logs,
    )
    from kfcompile.lifecycle.ports import ApiError, Forbidden, NotFound, Ref
    from kfcompile.lifecycle.session import (
        MANAGED_BY_LABEL,
        MANAGER,
        SPEC_HASH,
        TARGET_ANNOTATION,
        ClusterError,
        JobDeleted,
        JobNotFound,
        NameTaken,
        PreflightFailed,
        Session,
        Unavailable,
        Unreachable,
    )
    from kfcompile.lifecycle.submitting import (
        LeftBehind,
        Prepared,
        Submitted,
        preflight,
        prepare,
        submit,
    )
    from kfcompile.lifecycle.sync import Synced, sync_down, sync_up
    from kfcompile.lifecycle.waiting import Until, wait

# Each module is imported when one of its names is first used: a command loads only the machines
# it runs (a cold `kfcompile status` needs neither submit's nor the log follower's).
_LAZY = {
    "kfcompile.lifecycle.cluster_target": ("Found", "detect_target", "served_crd"),
    "kfcompile.lifecycle.deleting": ("StillDeleting", "wait_gone"),
    "kfcompile.lifecycle.job_events": ("Happened", "JobEvent", "watch_jobs"),
    "kfcompile.lifecycle.manage": (
        "Cancelled",
        "Listed",
        "cancel",
        "find",
        "list_jobs",
        "locate",
        "set_suspended",
    ),
    "kfcompile.lifecycle.observe": (
        "Event",
        "Node",
        "Observation",
        "TimedOut",
        "Waiting",
        "status",
    ),
    "kfcompile.lifecycle.pod_logs": (
        "CannotRead",
        "CannotStart",
        "LogLine",
        "NoSuchRank",
        "follow_logs",
        "logs",
        "read_logs",
    ),
    "kfcompile.lifecycle.ports": ("ApiError", "Forbidden", "NotFound", "Ref"),
    "kfcompile.lifecycle.session": (
        "MANAGED_BY_LABEL",
        "MANAGER",
        "SPEC_HASH",
        "TARGET_ANNOTATION",
        "ClusterError",
        "JobDeleted",
        "JobNotFound",
        "NameTaken",
        "PreflightFailed",
        "Session",
        "Unavailable",
        "Unreachable",
    ),
    "kfcompile.lifecycle.submitting": (
        "LeftBehind",
        "Prepared",
        "Submitted",
        "preflight",
        "prepare",
        "submit",
    ),
    "kfcompile.lifecycle.sync": ("Synced", "sync_down", "sync_up"),
    "kfcompile.lifecycle.waiting": ("Until", "wait"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}

# Names this package exported before its ``__all__`` was cut to what a service uses: still
# there, from their modules, with a DeprecationWarning saying where (for one release).
_MOVED = {
    name: f"kfcompile.{module}"
    for module, names in {
        "kinds": ("JobState", "KINDS", "Kind", "State"),
        "lifecycle.cluster_target": ("crd_problems",),
        "lifecycle.deleting": ("Remaining",),
        "lifecycle.job_events": ("JOBS_SEGMENT", "Watcher"),
        "lifecycle.objects": ("job_kind",),
        "lifecycle.observe": ("EVENT_APIS", "TROUBLED_PODS", "events", "events_about",
                              "nodes_total", "observation", "rank_of"),
        "lifecycle.pod_logs": ("Cursor", "Follower", "InTurn", "merger", "ranks"),
        "lifecycle.ports": ("Clock", "Cluster", "ExecOutput", "ExecResult", "Gone", "Invalid",
                            "LocalFiles", "Merge", "Obj", "Packed", "Transient"),
        "lifecycle.session": ("BACKOFF_CAP", "BACKOFF_START", "Backoff", "LIST_PAGE",
                              "LIST_RESTARTS", "Retry", "call"),
        "lifecycle.submitting": ("DELETING_WAIT", "Left", "RUNTIME_API",
                                 "removal", "secret", "spec_hash"),
        "lifecycle.sync": ("SYNC_IMAGE", "SYNC_ROOT", "SYNC_TIMEOUT", "claim_dir"),
        "lifecycle.waiting": ("WATCH_SEGMENT", "Waiter", "reached"),
    }.items()
    for name in names
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """A public name from its module; a submodule (``lifecycle.sync``) imported on first use;
    a name that moved, from its module, with a ``DeprecationWarning``."""
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    if name in _MOVED:
        import warnings

        warnings.warn(
            f"kfcompile.lifecycle.{name} is deprecated: import it from {_MOVED[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    try:
        return importlib.import_module(f"kfcompile.lifecycle.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"kfcompile.lifecycle.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = [
    "MANAGED_BY_LABEL",
    "MANAGER",
    "SPEC_HASH",
    "TARGET_ANNOTATION",
    "ApiError",
    "Cancelled",
    "CannotRead",
    "CannotStart",
    "ClusterError",
    "Event",
    "Forbidden",
    "Found",
    "Happened",
    "JobDeleted",
    "JobEvent",
    "JobNotFound",
    "LeftBehind",
    "Listed",
    "LogLine",
    "NameTaken",
    "NoSuchRank",
    "Node",
    "NotFound",
    "Observation",
    "PreflightFailed",
    "Prepared",
    "Ref",
    "Session",
    "StillDeleting",
    "Submitted",
    "Synced",
    "TimedOut",
    "Unavailable",
    "Unreachable",
    "Until",
    "Waiting",
    "cancel",
    "detect_target",
    "find",
    "follow_logs",
    "list_jobs",
    "locate",
    "logs",
    "preflight",
    "prepare",
    "read_logs",
    "served_crd",
    "set_suspended",
    "status",
    "submit",
    "sync_down",
    "sync_up",
    "wait",
    "wait_gone",
    "watch_jobs",
]

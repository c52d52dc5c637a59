"""A job's life on a cluster (submit, status, wait, logs, cancel, suspend, list, work-dir sync),
written against the ports in ``kfcompile.ports`` only.

Nothing here opens a socket, reads a clock, draws a random number or starts a thread: the
``Session`` carries the ``Cluster`` port, the ``Clock`` port, the jitter source and the
``Merge`` port, so tests drive all of them. The loops (``wait``, a followed log, a retried
call, a list's pages, submit's creates and roll-back) are machines fed what the API answered
that say what to ask next; their drivers are a few lines that call the ports.

- ``session``: the Session, the one ``Backoff``, the errors, the retry machine and ``call``
- ``objects``: reading (every page of a list: the ``Lister`` machine) and creating objects
  through ``call``
- ``submitting``: the ``Submitting`` machine, ``repairing``: the ``Repairing`` machine;
  ``submit``: prepare, preflight and their driver; ``rollback``: what a failure leaves (the
  ``RollingBack`` machine)
- ``observe``: a job's state, its nodes and events (``status``)
- ``waiter``: the ``Waiter`` machine; ``wait``: its driver
- ``follow``: the ``Follower`` machine and its ``Cursor``; ``logs``: ``follow_logs`` (its
  driver), ``read_logs``, ``logs`` and ``InTurn``
- ``manage``: ``find``, ``locate``, ``cancel``, ``set_suspended``, ``list_jobs``
- ``deleting``: the ``Vanishing`` machine and ``wait_gone``, its driver: waiting for a deleted
  job (and its pods) to be gone, saying what holds it
- ``sync``: work-dir sync through a helper pod (its start: the ``Starting`` machine)
- ``watcher``: the ``Watcher`` machine (every job of one kind); ``watch``: ``watch_jobs``, its
  driver, for services that run many jobs
- ``target``: which target a cluster runs (``detect_target``) and the CRD it serves a kind by
- ``multikueue``: on a MultiKueue manager, which worker cluster a job was dispatched to (its
  Kueue Workload), and whether a queue dispatches

Two rules hold everywhere:

- Trouble on the way to the API server (``Transient``: 429, 5xx, dropped connections, timeouts)
  is retried with capped exponential backoff and jitter (a ``Retry-After`` the least pause), and
  is never reported as the job's state. When it lasts longer than ``Session.retry_for`` it ends
  the command as ``Unavailable``. Before the API has answered anything in the session, a call
  that gets no answer at all ends it at once (``Unreachable``): no server is there to ride out.
  Any other ``ApiError`` that ends a command names the call that failed.
- A job is found again by its name and the spec-hash annotation, never by guessing: submitting
  the same spec twice creates nothing, and a different job holding the name is never touched.
"""

from __future__ import annotations

from kfcompile.kinds import KINDS, Kind
from kfcompile.lifecycle.deleting import Remaining, StillDeleting, Vanishing, wait_gone
from kfcompile.lifecycle.follow import Cursor, Follower
from kfcompile.lifecycle.logs import (
    CannotStart,
    InTurn,
    LogLine,
    NoSuchRank,
    follow_logs,
    logs,
    merger,
    ranks,
    read_logs,
)
from kfcompile.lifecycle.manage import (
    Cancelled,
    Listed,
    cancel,
    find,
    list_jobs,
    locate,
    set_suspended,
)
from kfcompile.lifecycle.objects import job_kind
from kfcompile.lifecycle.observe import (
    EVENT_APIS,
    TROUBLED_PODS,
    Event,
    Node,
    Observation,
    Waiting,
    events,
    events_about,
    nodes_total,
    observation,
    observe,
    rank_of,
    status,
    waiting,
)
from kfcompile.lifecycle.rollback import Left, LeftBehind, removal
from kfcompile.lifecycle.session import (
    BACKOFF_CAP,
    BACKOFF_START,
    LIST_PAGE,
    LIST_RESTARTS,
    MANAGED_BY_LABEL,
    MANAGER,
    SPEC_HASH,
    TARGET_ANNOTATION,
    Backoff,
    ClusterError,
    JobDeleted,
    JobNotFound,
    NameTaken,
    PreflightFailed,
    Retry,
    Session,
    TimedOut,
    Unavailable,
    Unreachable,
    call,
)
from kfcompile.lifecycle.submit import (
    DELETING_WAIT,
    LOCAL_QUEUE_API,
    RUNTIME_API,
    Prepared,
    Submitted,
    preflight,
    prepare,
    secret,
    spec_hash,
    submit,
)
from kfcompile.lifecycle.sync import (
    SYNC_IMAGE,
    SYNC_ROOT,
    SYNC_TIMEOUT,
    Synced,
    claim_dir,
    sync_down,
    sync_up,
)
from kfcompile.lifecycle.target import Found, crd_problems, detect_target, served_crd
from kfcompile.lifecycle.wait import wait
from kfcompile.lifecycle.waiter import WATCH_SEGMENT, Until, Waiter, reached
from kfcompile.lifecycle.watch import watch_jobs
from kfcompile.lifecycle.watcher import JOBS_SEGMENT, Happened, JobEvent, Watcher
from kfcompile.ports import (
    ApiError,
    Clock,
    Cluster,
    ExecOutput,
    ExecResult,
    Forbidden,
    Gone,
    Invalid,
    LocalFiles,
    Merge,
    NotFound,
    Obj,
    Packed,
    Ref,
    Transient,
)
from kfcompile.status import JobState, State

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_START",
    "DELETING_WAIT",
    "EVENT_APIS",
    "JOBS_SEGMENT",
    "KINDS",
    "LIST_PAGE",
    "LIST_RESTARTS",
    "LOCAL_QUEUE_API",
    "MANAGED_BY_LABEL",
    "MANAGER",
    "RUNTIME_API",
    "SPEC_HASH",
    "SYNC_IMAGE",
    "SYNC_ROOT",
    "SYNC_TIMEOUT",
    "TARGET_ANNOTATION",
    "TROUBLED_PODS",
    "WATCH_SEGMENT",
    "ApiError",
    "Backoff",
    "Cancelled",
    "CannotStart",
    "Clock",
    "Cluster",
    "ClusterError",
    "Cursor",
    "Event",
    "ExecOutput",
    "ExecResult",
    "Follower",
    "Forbidden",
    "Found",
    "Gone",
    "Happened",
    "InTurn",
    "Invalid",
    "JobDeleted",
    "JobEvent",
    "JobNotFound",
    "JobState",
    "Kind",
    "Left",
    "LeftBehind",
    "Listed",
    "LocalFiles",
    "LogLine",
    "Merge",
    "NameTaken",
    "NoSuchRank",
    "Node",
    "NotFound",
    "Obj",
    "Observation",
    "Packed",
    "PreflightFailed",
    "Prepared",
    "Ref",
    "Remaining",
    "Retry",
    "Session",
    "State",
    "StillDeleting",
    "Submitted",
    "Synced",
    "TimedOut",
    "Transient",
    "Unavailable",
    "Unreachable",
    "Until",
    "Vanishing",
    "Waiter",
    "Waiting",
    "Watcher",
    "call",
    "cancel",
    "claim_dir",
    "crd_problems",
    "detect_target",
    "events",
    "events_about",
    "find",
    "follow_logs",
    "job_kind",
    "list_jobs",
    "locate",
    "logs",
    "merger",
    "nodes_total",
    "observation",
    "observe",
    "preflight",
    "prepare",
    "rank_of",
    "ranks",
    "reached",
    "read_logs",
    "removal",
    "secret",
    "served_crd",
    "set_suspended",
    "spec_hash",
    "status",
    "submit",
    "sync_down",
    "sync_up",
    "wait",
    "wait_gone",
    "waiting",
    "watch_jobs",
]

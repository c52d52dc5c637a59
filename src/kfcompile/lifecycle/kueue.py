"""Kueue as the cluster serves it: which version of its API to read (``kueue.x-k8s.io``), and a
job's Workload.

Kueue serves ``v1beta1`` up to v0.19 and ``v1beta2`` from v0.15 (its storage version from
v0.16); v0.20 stops serving ``v1beta1``. So every Kueue object is read through the version
discovery says the cluster serves, ``v1beta2`` first (``served_api``). What kfcompile reads is
the same in both (``apis/kueue/v1beta{1,2}``): Workload ``status.clusterName``,
``nominatedClusterNames``, ``admissionChecks[]`` and ``conditions[]``, LocalQueue
``spec.clusterQueue``, AdmissionCheck ``spec.controllerName``; a ClusterQueue's plain
``spec.admissionChecks`` list is v1beta1's only (v1beta2 has ``admissionChecksStrategy``, which
v1beta1 also has: ``multikueue.check_names`` reads both).

A job's Workload carries the label ``kueue.x-k8s.io/job-uid`` (``pkg/controller/constants``:
``JobUIDLabel``) and a controller owner reference to the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import field, frozen

from kfcompile.kinds import KINDS, MULTIKUEUE
from kfcompile.lifecycle.objects import list_all, meta, served
from kfcompile.lifecycle.ports import Forbidden, NotFound, Obj, Ref
from kfcompile.lifecycle.session import Session
from kfcompile.spec.additions import QUEUE_LABEL
from kfcompile.status import State, job_state

GROUP: Final = "kueue.x-k8s.io"
# The versions read, the preferred first.
VERSIONS: Final = ("v1beta2", "v1beta1")
JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
# Said where no Kueue API is served: which ones kfcompile reads, and the releases serving them.
NOT_SERVED: Final = (
    f"this cluster serves neither {GROUP}/v1beta2 (Kueue v0.15 on) nor {GROUP}/v1beta1 "
    "(Kueue v0.13 to v0.19)"
)


def served_api(session: Session, kind: str) -> str | None:
    """The Kueue API version (``kueue.x-k8s.io/v1beta2``) through which the cluster serves
    ``kind``, the newest of ``VERSIONS`` it serves; None: Kueue is not installed (or too old)."""
    for version in VERSIONS:
        api_version = f"{GROUP}/{version}"
        if served(session, api_version, kind):
            return api_version
    return None


def _owned_by(workload: Mapping[str, Any], uid: str) -> bool:
    owners = meta(workload).get("ownerReferences")
    return any(
        isinstance(o, Mapping) and o.get("uid") == uid and o.get("controller") is True
        for o in (owners if isinstance(owners, list) else [])
    )


def _labelled(workload: Mapping[str, Any], uid: str) -> bool:
    labels = meta(workload).get("labels")
    return isinstance(labels, Mapping) and labels.get(JOB_UID_LABEL) == uid


def held_job(workload: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The job of ours a Workload is for, as (kind, name, uid): its controller owner reference
    (Kueue's ``jobframework`` sets it); None for a Workload of no such job."""
    owners = meta(workload).get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        if not isinstance(owner, Mapping) or owner.get("controller") is not True:
            continue
        kind, name, uid = owner.get("kind"), owner.get("name"), owner.get("uid")
        if isinstance(kind, str) and kind in KINDS and isinstance(name, str) and name:
            return kind, name, str(uid or "")
    return None


def pick_workload(workloads: Sequence[Obj], uid: str) -> Obj | None:
    """The job's Workload among ``workloads``: labelled with its uid, else owned by it."""
    for test in (_labelled, _owned_by):
        for workload in workloads:
            if test(workload, uid):
                return workload
    return None


def workload_of(session: Session, api_version: str, job: Obj) -> Obj | None:
    """The job's Workload (read through ``api_version``), None when Kueue has made none. Two
    lists at most: by the uid label, then (a Workload without it) all of the namespace's."""
    ref = Ref.of(job)
    uid = str(meta(job).get("uid", ""))
    selector = f"{JOB_UID_LABEL}={uid}"
    return pick_workload(
        list_all(session, api_version, "Workload", ref.namespace, label_selector=selector), uid
    ) or pick_workload(list_all(session, api_version, "Workload", ref.namespace), uid)


def multikueue_managed(job: Mapping[str, Any]) -> bool:
    """Whether MultiKueue manages the job (TrainJob ``spec.managedBy``, PyTorchJob
    ``spec.runPolicy.managedBy``)."""
    spec = job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    run = spec.get("runPolicy")
    run = run if isinstance(run, Mapping) else {}
    return MULTIKUEUE in (spec.get("managedBy"), run.get("managedBy"))


def queued(job: Mapping[str, Any]) -> bool:
    """Whether Kueue manages the job: it names a queue (``kueue.x-k8s.io/queue-name``), or
    MultiKueue dispatches it."""
    labels = meta(job).get("labels")
    named = isinstance(labels, Mapping) and bool(labels.get(QUEUE_LABEL))
    return named or multikueue_managed(job)


def _waits(job: Obj) -> bool:
    """A job of Kueue's that its own status says waits: what its Workload says is why."""
    return queued(job) and job_state(job).state in (State.SUSPENDED, State.PENDING)


@frozen(repr=False, eq=False)
class Workloads:
    """The Workloads of some jobs, by job uid, read through ``api`` (None: Kueue is not
    served); ``readable`` False: they may not be read (403), so nothing is known."""

    api: str | None
    by_uid: Mapping[str, Obj] = field(factory=dict)
    readable: bool = True


def workloads_of(session: Session, jobs: Sequence[Obj], namespace: str | None) -> Workloads:
    """The Workloads of those ``jobs`` Kueue holds or MultiKueue dispatches, by job uid: one
    list of ``namespace``'s (None: every namespace), the job's own for one job, none at all
    when there are no such jobs."""
    wanted = [job for job in jobs if multikueue_managed(job) or _waits(job)]
    if not wanted:
        return Workloads(None)
    api = served_api(session, "Workload")
    try:
        if api is None:
            listed = []
        elif len(wanted) == 1:  # (a watch's change): its own, not the whole namespace's
            listed = [found] if (found := workload_of(session, api, wanted[0])) else []
        else:
            listed = list_all(session, api, "Workload", namespace)
    except NotFound:  # Kueue's CRDs went meanwhile
        listed = []
    except Forbidden:
        return Workloads(api, readable=False)
    uids = (str(meta(job).get("uid", "")) for job in wanted)
    return Workloads(api, {uid: found for uid in uids if (found := pick_workload(listed, uid))})


def waiting_workload(session: Session, job: Obj) -> Obj | None:
    """The job's Workload when Kueue may be holding it (``_waits``: a queued job its status
    says waits), to say why; None otherwise, and when it cannot be read (no Kueue, 403)."""
    if not _waits(job):
        return None
    api = served_api(session, "Workload")
    try:
        return None if api is None else workload_of(session, api, job)
    except (Forbidden, NotFound):
        return None


# --- what a Kueue release would break -------------------------------------------------------------

# The Trainer API (its Go module, Kueue's go.mod) each Kueue minor release with a TrainJob
# integration (v0.14 on) is built against:
# admitting a TrainJob, Kueue Updates it as that API's types have it, so a field only a newer
# Trainer has is dropped (written as null): with Kueue v0.19 and Trainer v2.3 a patch's
# terminationGracePeriodSeconds, after which the JobSet webhook refuses the change as immutable
# and the job stays suspended for good (KUBEFLOW.md, Kueue). From v0.20, Trainer v2.3's API.
TRAINER_API: Final = {14: (2, 0), 15: (2, 1), 16: (2, 1), 17: (2, 2), 18: (2, 2), 19: (2, 2)}
NEWEST_TRAINER_API: Final = (2, 3)
# What discovery tells of the release: the versions of Kueue's API served -> its minor
# releases (``None``: and every later one).
SERVING: Final[dict[tuple[str, ...], tuple[int, int | None]]] = {
    ("v1beta2",): (20, None),
    ("v1beta2", "v1beta1"): (15, 19),
    ("v1beta1",): (13, 14),
}


@frozen(repr=False, eq=False)
class KueueRelease:
    """The Kueue releases the cluster may run (minor versions of v0.x, ``high`` None: any
    later), and what told."""

    low: int
    high: int | None
    evidence: str

    def __str__(self) -> str:
        if self.high is None:
            return f"Kueue v0.{self.low} or later"
        return f"Kueue v0.{self.low}" + ("" if self.high == self.low else f" to v0.{self.high}")

    @property
    def trainer_api(self) -> tuple[int, int]:
        """The newest Trainer API any of these releases is built against (those with a TrainJob
        integration: v0.14 on): what every one of them drops is what that one drops."""
        if self.high is None or self.high > max(TRAINER_API):
            return NEWEST_TRAINER_API
        return max(api for minor, api in TRAINER_API.items() if self.low <= minor <= self.high)


def kueue_release(session: Session) -> KueueRelease | None:
    """The Kueue releases the cluster may run, from the versions of its API served
    (discovery of Workloads: cached); None: no Kueue."""
    served_versions = tuple(v for v in VERSIONS if served(session, f"{GROUP}/{v}", "Workload"))
    if served_versions not in SERVING:
        return None
    low, high = SERVING[served_versions]
    told = " and ".join(f"{GROUP}/{v}" for v in served_versions)
    return KueueRelease(low, high, f"it serves {told}")


def kueue_drops(session: Session, job: Obj) -> list[str]:
    """What the cluster's Kueue would break in ``job`` (a TrainJob it queues), one line per
    field: each its Trainer API lacks that the job has (``Mark``s of the Trainer releases)."""
    if job.get("kind") != "TrainJob" or not queued(job):
        return []
    release = kueue_release(session)
    if release is None or release.trainer_api >= NEWEST_TRAINER_API:
        return []
    from kfcompile.targets import trainer_releases  # the targets' registry: submit's alone

    releases = {r.version: r for r in trainer_releases()}
    known = releases[release.trainer_api].marks if release.trainer_api in releases else ()
    newer = {m: None for r in releases.values() if r.version > release.trainer_api for m in r.marks}
    api = "v{}.{}".format(*release.trainer_api)
    return [
        f"{mark.path}: {release} ({release.evidence}) is built against Trainer {api}'s API, "
        f"which has no {mark.label}: Kueue drops it when it admits the job, and the job then "
        "never starts (the JobSet webhook refuses the change); remove it from the spec, or run "
        "Kueue v0.20 or later (submit --force submits it anyway)"
        for mark in newer
        if mark not in known and mark.found_in(job)
    ]

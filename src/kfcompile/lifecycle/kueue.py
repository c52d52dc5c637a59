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
from typing import TYPE_CHECKING, Any, Final

from attrs import evolve, field, frozen

from kfcompile.kinds import KINDS, MULTIKUEUE
from kfcompile.lifecycle.objects import get, list_all, meta, served
from kfcompile.lifecycle.ports import ApiError, Forbidden, NotFound, Obj, Ref
from kfcompile.lifecycle.session import Session
from kfcompile.spec.additions import QUEUE_LABEL
from kfcompile.status import State, job_state

if TYPE_CHECKING:
    from kfcompile.targets.trainjob import Mark

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

Release = tuple[int, int]  # a Kueue release v0.MINOR.PATCH, as (MINOR, PATCH)
Api = tuple[int, int]  # a Trainer API, v2.MINOR, as (2, MINOR)

# The Trainer API (the kubeflow/trainer Go module of Kueue's go.mod) Kueue's TrainJob integration
# is built against: each row, the first Kueue release built against it and the API. Read from
# go.mod at each of Kueue's tags: v0.14.0 to v0.14.4 Trainer v2.0.1, v0.14.5 (a patch release
# moved it) to v0.16.9 v2.1.0, v0.17.0 to v0.19.2 v2.2, main after v0.19 v2.3.0 (KUBEFLOW.md,
# coarser: v0.14-v0.16 pair with Trainer v2.1, v0.17-v0.19 with v2.2).
# Admitting a TrainJob, Kueue Updates it as that API's types have it, so a field only a newer
# Trainer has is dropped (written as null): with Kueue v0.19 and Trainer v2.3 a patch's
# terminationGracePeriodSeconds, after which the JobSet webhook refuses the change as immutable
# and the job stays suspended for good (KUBEFLOW.md, Kueue). v0.13 has no TrainJob integration.
TRAINER_API: Final[tuple[tuple[Release, Api], ...]] = (
    ((14, 0), (2, 0)),
    ((14, 5), (2, 1)),
    ((17, 0), (2, 2)),
    ((20, 0), (2, 3)),
)
# What discovery tells of the release: the versions of Kueue's API served -> its minor
# releases (``None``: and every later one).
SERVING: Final[dict[tuple[str, ...], tuple[int, int | None]]] = {
    ("v1beta2",): (20, None),
    ("v1beta2", "v1beta1"): (15, 19),
    ("v1beta1",): (13, 14),
}
WORKLOAD_CRD: Final = f"workloads.{GROUP}"
# What tells apart the releases discovery cannot: a field of the Workload CRD's schema, as
# (the API version of the schema, the field's path, the minor release that added it). Of all of
# Kueue's CRDs at every tag from v0.15.0 to v0.19.2, only Workload's differs between v0.16 and
# v0.17: v1beta2's spec.preemptionGates, in each of v0.17.0 to v0.19.2 and in no v0.15 or v0.16.
TELLING: Final[tuple[tuple[str, str, int], ...]] = (("v1beta2", "spec.preemptionGates", 17),)
CRD_API: Final = "apiextensions.k8s.io/v1"


def _version(release: Release, patch: bool) -> str:
    return f"v0.{release[0]}.{release[1]}" if patch else f"v0.{release[0]}"


@frozen(repr=False, eq=False)
class Build:
    """The Kueue releases from ``first`` up to ``end`` (not included; None: every later one),
    whose TrainJob integration is built against Trainer ``api``."""

    first: Release
    end: Release | None
    api: Api

    def __str__(self) -> str:
        first = _version(self.first, self.first[1] != 0)
        if self.end is None:
            return f"{first} or later"
        if self.end[1] != 0:  # up to a patch release: patch releases said
            last = (self.end[0], self.end[1] - 1)
            return f"{_version(self.first, True)} to {_version(last, True)}"
        if self.first[0] < self.end[0] - 1:
            return f"{first} to v0.{self.end[0] - 1}"
        if self.first[1]:  # from a patch release to the minor release's last
            return f"{first} and later v0.{self.first[0]}"
        return first  # one minor release

    @property
    def one_release(self) -> bool:
        """Whether these are the patch releases of one minor release (said in the singular)."""
        return self.first[1] == 0 and self.end == (self.first[0] + 1, 0)

    def drops(self, marks: Mapping[Api, Sequence[Mark]]) -> list[Mark]:
        """What of the Trainer releases' ``marks`` (by API) Kueue drops: each mark of a newer
        Trainer that this API lacks. Nothing for the last build (``end`` None), which holds
        the releases to come: what they are built against is not known yet."""
        if self.end is None:
            return []
        known = marks.get(self.api, ())
        newer = {m: None for api, ms in sorted(marks.items()) if api > self.api for m in ms}
        return [m for m in newer if m not in known]


def builds() -> list[Build]:
    """``TRAINER_API`` as ``Build``s, oldest first."""
    ends = [first for first, _ in TRAINER_API[1:]]
    return [
        Build(first, end, api) for (first, api), end in zip(TRAINER_API, [*ends, None], strict=True)
    ]


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
    def builds(self) -> list[Build]:
        """The ``Build``s of these releases (those with a TrainJob integration), each cut to
        them: what any of them drops, one of these releases may drop."""
        low: Release = (self.low, 0)
        high: Release | None = None if self.high is None else (self.high + 1, 0)
        found = []
        for build in builds():
            first = max(build.first, low)
            end = build.end if high is None or build.end is None else min(build.end, high)
            end = high if end is None else end
            if end is None or first < end:
                found.append(Build(first, end, build.api))
        return found


def kueue_release(session: Session) -> KueueRelease | None:
    """The Kueue releases the cluster may run, from the versions of its API served
    (discovery of Workloads: cached); None: no Kueue."""
    served_versions = tuple(v for v in VERSIONS if served(session, f"{GROUP}/{v}", "Workload"))
    if served_versions not in SERVING:
        return None
    low, high = SERVING[served_versions]
    told = f"{GROUP}/" + " and ".join(served_versions)
    return KueueRelease(low, high, f"this cluster serves {told}")


def _has(crd: Mapping[str, Any], version: str, path: str) -> bool | None:
    """Whether the schema of ``crd``'s ``version`` has the field ``path``; None: it has no such
    version (or no schema), so it does not tell."""
    spec = crd.get("spec")
    versions = spec.get("versions") if isinstance(spec, Mapping) else None
    for served_version in versions if isinstance(versions, list) else []:
        if not isinstance(served_version, Mapping) or served_version.get("name") != version:
            continue
        schema = served_version.get("schema")
        node = schema.get("openAPIV3Schema") if isinstance(schema, Mapping) else None
        if not isinstance(node, Mapping):
            return None
        for key in path.split("."):
            properties = node.get("properties")
            node = properties.get(key) if isinstance(properties, Mapping) else None
            if not isinstance(node, Mapping):
                return False
        return True
    return None


def narrowed(session: Session, release: KueueRelease) -> KueueRelease:
    """``release`` narrowed by the Workload CRD (``TELLING``), where it can tell: one read, none
    when nothing in it could tell. As it was when the CRD cannot be read: a cluster-wide read,
    which most users may not do (403), so never a reason to fail."""
    ceiling = release.high if release.high is not None else float("inf")
    tells = [tell for tell in TELLING if release.low < tell[2] <= ceiling]
    if not tells:
        return release
    try:
        crd = get(session, Ref(CRD_API, "CustomResourceDefinition", None, WORKLOAD_CRD)) or {}
    except ApiError as exc:
        unread = f"its CustomResourceDefinition {WORKLOAD_CRD} could not be read: {exc.line}"
        return evolve(release, evidence=f"{release.evidence}; {unread}")
    low, high, said = release.low, release.high, [release.evidence]
    for version, path, since in tells:
        has = _has(crd, version, path)
        if has is None:  # no such version in it (or no CRD): it does not tell
            continue
        if has:
            low = max(low, since)
        else:
            high = since - 1 if high is None else min(high, since - 1)
        said.append(f"its Workload CRD has {'' if has else 'no '}{version} {path}")
    return KueueRelease(low, high, "; ".join(said))


def _marks() -> dict[Api, Sequence[Mark]]:
    from kfcompile.targets import trainer_releases  # the targets' registry: submit's alone

    return {r.version: r.marks for r in trainer_releases()}


def _dropped(
    release: KueueRelease, marks: Mapping[Api, Sequence[Mark]], job: Obj
) -> dict[Mark, list[Build]]:
    """Each field of ``job`` one of the ``release``s drops, and the ``Build``s that drop it."""
    found: dict[Mark, list[Build]] = {}
    for build in release.builds:
        for mark in build.drops(marks):
            if mark.found_in(job):
                found.setdefault(mark, []).append(build)
    return found


def _fixed_from(mark: Mark, marks: Mapping[Api, Sequence[Mark]]) -> str:
    """The first Kueue release from which none drops ``mark`` (at the latest the newest build:
    what releases to come drop is not known, ``Build.drops``)."""
    every = builds()
    fixed = next(
        build
        for i, build in enumerate(every)
        if not any(mark in later.drops(marks) for later in every[i:])
    )
    return _version(fixed.first, fixed.first[1] != 0)


def kueue_drops(session: Session, job: Obj) -> list[str]:
    """What the cluster's Kueue would break in ``job`` (a TrainJob it queues), one line per
    field: each that the Trainer API of one of the releases the cluster may run lacks (``Mark``s
    of the Trainer releases). Where those releases disagree about a field of the job, the
    Workload CRD narrows them when it can (``narrowed``: one read, only then)."""
    if job.get("kind") != "TrainJob" or not queued(job):
        return []
    release = kueue_release(session)
    if release is None:
        return []
    marks = _marks()
    dropped = _dropped(release, marks, job)
    if any(len(by) < len(release.builds) for by in dropped.values()):
        release = narrowed(session, release)
        dropped = _dropped(release, marks, job)
    return [_said(mark, by, release, marks) for mark, by in dropped.items()]


def _said(
    mark: Mark, by: Sequence[Build], release: KueueRelease, marks: Mapping[Api, Sequence[Mark]]
) -> str:
    if len(release.builds) == 1:  # one Trainer API: the release's own
        why = " is built against Trainer v{}.{}'s API, which has no".format(*by[0].api)
    else:  # which of the releases drop it, and why
        which = " and ".join(
            f"{b} (built against Trainer v{b.api[0]}.{b.api[1]}'s API)" for b in by
        )
        why = f": {which} {'has' if len(by) == 1 and by[0].one_release else 'have'} no"
    return (
        f"{mark.path}: {release} ({release.evidence}){why} {mark.label}: Kueue drops it when it "
        "admits the job, and the job then never starts (the JobSet webhook refuses the change); "
        f"remove it from the spec, or run Kueue {_fixed_from(mark, marks)} or later (submit "
        "--force submits it anyway)"
    )

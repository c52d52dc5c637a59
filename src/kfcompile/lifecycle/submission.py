"""Submitting a job: render it for the cluster (namespaced, labelled as ours, with the spec
hash), check the cluster has what it needs, upload the work dir, create companions and the job
(the ``submitting.Submitting`` machine, driven here), and roll back what a failure part-way
leaves (``rollback``: or say what could not be removed); a job of this spec already there is
repaired (``repairing.Repairing``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from attrs import frozen

from kfcompile.kinds import KINDS, TRAINJOB
from kfcompile.lifecycle import runtimes
from kfcompile.lifecycle.cluster_target import crd_problems
from kfcompile.lifecycle.deleting import Remaining, make_way
from kfcompile.lifecycle.kueue import NOT_SERVED, kueue_drops, served_api
from kfcompile.lifecycle.objects import annotation, create, get, meta, served
from kfcompile.lifecycle.ports import Forbidden, LocalFiles, Obj, Ref
from kfcompile.lifecycle.repairing import Mended, NotOurs, Repairing, Unmendable
from kfcompile.lifecycle.rollback import Found, LeftBehind, removal, roll_back
from kfcompile.lifecycle.session import (
    MANAGED_BY_LABEL,
    MANAGER,
    SPEC_HASH,
    TARGET_ANNOTATION,
    ClusterError,
    NameTaken,
    Perform,
    PreflightFailed,
    Session,
    call,
    drive,
    ended,
    finished,
    named,
)
from kfcompile.lifecycle.submitting import (
    AllMade,
    Checked,
    Create,
    Failure,
    Made,
    MakeWay,
    Own,
    Owned,
    Raised,
    Read,
    Repair,
    Submitting,
    Taken,
    Upload,
    Uploaded,
    WayMade,
)
from kfcompile.lifecycle.sync import (
    SYNC_IMAGE,
    SYNC_TIMEOUT,
    Synced,
    claim_missing,
    missing,
    sync_up,
)
from kfcompile.spec.additions import QUEUE_LABEL
from kfcompile.spec.model import JobSpec
from kfcompile.targets import target

RUNTIME_API: Final = TRAINJOB.api_version
# Seconds a submit waits for a job of that name that is being deleted to be gone.
DELETING_WAIT: Final = 60.0


@frozen
class Prepared:
    """The objects ``submit`` creates, in order (companions first, the job last)."""

    objects: tuple[Obj, ...]
    spec_hash: str

    @property
    def job(self) -> Obj:
        return self.objects[-1]

    @property
    def ref(self) -> Ref:
        return Ref.of(self.job)


def spec_hash(objects: Sequence[Obj]) -> str:
    """A short digest of exactly what would be created (Secret values never take part)."""
    text = json.dumps(objects, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def secret(spec: JobSpec, environ: Mapping[str, str], namespace: str | None) -> Obj:
    """The Secret holding ``secret_env`` values, taken from ``environ`` (never printed)."""
    missing = [name for name in spec.secret_env if name not in environ]
    if missing:
        raise ClusterError(
            "\n".join(f"secret_env: {n} is not set in your environment" for n in missing)
        )
    meta: dict[str, Any] = {"name": spec.secret_name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "type": "Opaque",
        "stringData": {name: environ[name] for name in spec.secret_env},
    }


def prepare(
    spec: JobSpec, target_name: str, namespace: str, environ: Mapping[str, str]
) -> Prepared:
    """Render ``spec`` for the cluster: namespaced, labelled as ours, with the spec hash."""
    chosen = target(target_name)
    target_name = chosen.name  # the registered name, also for a patch release like v2.3.1
    objects = [dict(obj) for obj in chosen.render(spec).objects]
    digest = spec_hash(objects)
    if spec.secret_env:
        objects.insert(-1, secret(spec, environ, namespace))
    for obj in objects:
        meta = obj["metadata"] = dict(obj["metadata"], namespace=namespace)
        meta["labels"] = {**meta.get("labels", {}), MANAGED_BY_LABEL: MANAGER}
        meta["annotations"] = {
            **meta.get("annotations", {}),
            SPEC_HASH: digest,
            TARGET_ANNOTATION: target_name,
        }
    return Prepared(tuple(objects), digest)


def preflight(session: Session, spec: JobSpec, prepared: Prepared) -> list[str]:
    """What is missing on the cluster for this job, one line each with how to fix it."""
    job = prepared.job
    kind = KINDS[job["kind"]]
    namespace = prepared.ref.namespace or "default"
    problems: list[str] = []
    if not served(session, kind.api_version, kind.name):
        problems.append(
            f"{kind.name} ({kind.api_version}) is not served by this cluster: its CRD is "
            f"missing; {kind.install}"
        )
    if missing(session, Ref("v1", "Namespace", None, namespace)):
        problems.append(
            f"namespace {namespace} does not exist: create it (kubectl create namespace "
            f"{namespace}) or choose another with -n"
        )
    if kind is TRAINJOB and not problems:
        problems += _runtime(session, spec, job, namespace)
    queue_name = (meta(job).get("labels") or {}).get(QUEUE_LABEL)
    if queue_name:
        queues = served_api(session, "LocalQueue")
        if queues is None:
            problems.append(
                f"the job names Kueue queue {queue_name} but Kueue is not installed "
                f"(LocalQueue: {NOT_SERVED}): install Kueue or remove `queue`"
            )
        elif missing(session, Ref(queues, "LocalQueue", namespace, queue_name)):
            problems.append(
                f"Kueue LocalQueue {queue_name} does not exist in namespace {namespace} "
                f"(read through {queues}): create it or fix `queue` "
                f"(kubectl get localqueues -n {namespace})"
            )
    no_claim = claim_missing(session, namespace, spec.work_dir.pvc) if spec.work_dir else None
    if no_claim:
        problems.append(f"{no_claim}: create it before submitting (work_dir.pvc)")
    return problems


def _runtime(session: Session, spec: JobSpec, job: Obj, namespace: str) -> list[str]:
    """The runtime the TrainJob names, read: it exists, and has what the job asks of it
    (``runtimes.problems``). One this user may not read is left to the Trainer."""
    ref = job["spec"]["runtimeRef"]
    runtime_kind = ref.get("kind", "ClusterTrainingRuntime")
    scope = None if runtime_kind == "ClusterTrainingRuntime" else namespace
    try:
        runtime = get(session, Ref(RUNTIME_API, runtime_kind, scope, ref["name"]))
    except Forbidden:
        return []
    if runtime is None:
        where = f" in namespace {namespace}" if scope else ""
        plural = runtime_kind.lower() + "s"
        return [
            f"{runtime_kind} {ref['name']} does not exist{where}: install the Trainer "
            f"runtimes or set runtime_ref to one listed by `kubectl get {plural}`"
        ]
    return runtimes.problems(spec, job, runtime)


@frozen
class Submitted:
    """What ``submit`` did: the job, whether it created it (False: this very spec was there
    already), the work dir it uploaded, what it repaired, whether it was a dry run."""

    ref: Ref
    created: bool  # False: this very spec was already submitted
    uploaded: Synced | None = None
    # What a resubmit had to mend on the job's companions, one line each ("Secret x ...: ...").
    repaired: tuple[str, ...] = ()
    dry_run: bool = False  # the server checked every object (dryRun=All) and stored none
    # What the cluster's Kueue would break, submitted anyway (``force``), one line each.
    warnings: tuple[str, ...] = ()


def _owner(job: Obj) -> dict[str, Any]:
    about = meta(job)
    return {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": about["name"],
        "uid": about["uid"],
        "controller": False,
        "blockOwnerDeletion": True,
    }


def _own(session: Session, companion: Obj, job: Obj) -> None:
    """Make ``job`` the owner of ``companion``, so deleting the job deletes it."""
    ref = Ref.of(companion)
    owner = {"metadata": {"ownerReferences": [_owner(job)]}}
    call(session, named("patch", ref), partial(session.cluster.patch, ref, owner))


def _perform(session: Session, digest: str, more: Perform | None = None) -> Perform:
    """How ``Submitting`` and ``Repairing`` ask the ports (and ``more``): whatever a call
    raises (a Ctrl-C too) is its answer, ``Raised``, for the machine to say what it leads to."""

    def owned(request: Own) -> Owned:
        _own(session, request.companion, request.job)
        return Owned()

    def made(request: Create) -> Made:
        return Made(create(session, request.obj, digest, dry_run=request.dry_run))

    def found(request: Read) -> Found:
        return Found(get(session, request.ref))

    def answering(how: Callable[[Any], object]) -> Callable[[Any], object]:
        def answer(request: object) -> object:
            try:
                return how(request)
            except BaseException as exc:
                return Raised(exc)

        return answer

    asks: Perform = {Create: made, Own: owned, Read: found, **(more or {})}
    return {request: answering(how) for request, how in asks.items()}


def submit(
    session: Session,
    spec: JobSpec,
    target_name: str,
    *,
    namespace: str,
    environ: Mapping[str, str],
    files: LocalFiles | None = None,
    sync_image: str = SYNC_IMAGE,
    sync_timeout: float = SYNC_TIMEOUT,
    deleting_wait: float = DELETING_WAIT,
    on_deleting: Callable[[Remaining, float], None] | None = None,
    dry_run: bool = False,
    against: Obj | None = None,
    force: bool = False,
) -> Submitted:
    """Check the cluster, upload the work dir (its helper pod may take ``sync_timeout``
    seconds to start), then create companions and the job.

    A job of that name being deleted (a ``cancel`` just before) is never "already submitted":
    this waits up to ``deleting_wait`` seconds for it to be gone, telling ``on_deleting`` what
    holds it, then creates the job anew; still there then, it is ``StillDeleting``.

    Companions (script ConfigMap, Secret) are created first and then owned by the job, so
    deleting the job removes them. A failure part-way deletes what this call created; what it
    cannot delete ends the call as ``LeftBehind``, naming each object and how to remove it.
    Submitting a spec whose job exists makes the job whole again: a missing companion is
    created anew and a companion without its owner gets it back (``Submitted.repaired``).

    ``dry_run``: every object is sent with ``dryRun=All``, so the server's schema, CEL rules and
    webhooks see it, and nothing is created, uploaded or mended. ``against``: a CRD the job
    must fit before anything is sent (the one a Trainer newer than kfcompile knows serves).
    A field the cluster's Kueue would drop when it admits the job (``kueue.kueue_drops``) is
    refused before anything is sent; with ``force`` it is sent, and said in ``warnings``.
    """
    prepared = prepare(spec, target_name, namespace, environ)
    if against is not None:
        misfits = crd_problems(prepared.job, against)
        if misfits:
            raise PreflightFailed(
                [
                    f"{line} (per the {prepared.job['kind']} CRD this cluster serves)"
                    for line in misfits
                ]
            )
    problems = preflight(session, spec, prepared)
    breaks = kueue_drops(session, prepared.job) if not problems else []
    if problems or (breaks and not force):
        raise PreflightFailed(problems or breaks)
    ref, digest = prepared.ref, prepared.spec_hash
    uploads = spec.work_dir is not None and files is not None

    def upload(_: Upload) -> Uploaded:
        assert spec.work_dir is not None and files is not None
        work_dir = spec.work_dir
        return Uploaded(
            sync_up(
                session,
                files,
                namespace=namespace,
                pvc=work_dir.pvc,
                path="/",
                local=work_dir.local,
                image=sync_image,
                timeout=sync_timeout,
            )
        )

    def way(request: MakeWay) -> WayMade:
        make_way(session, request.job, deleting_wait, on_deleting)
        return WayMade()

    perform = _perform(session, digest, {MakeWay: way, Upload: upload})
    machine = Submitting(prepared.objects, digest, dry_run=dry_run, uploads=uploads)
    end = finished(machine, session.clock, perform, Raised)
    if isinstance(end, Failure):
        left = roll_back(session, end.created, end.unsure, digest, end.owned)
        if left:
            raise LeftBehind(end.error, left, ref) from end.error
        raise end.error
    if isinstance(end, Raised):
        raise end.error
    if isinstance(end, Taken):
        raise NameTaken(
            f"{ref} already exists and is a different job (spec hash "
            f"{annotation(end.job, SPEC_HASH) or 'none'}, this spec {digest}): "
            f"rename the job, or cancel the old one first (kfcompile cancel {ref.name})"
        )
    if isinstance(end, Checked):
        return Submitted(ref, created=end.created, dry_run=True, warnings=tuple(breaks))
    if isinstance(end, Repair):
        repaired = _repair(session, prepared, end.job)
        return Submitted(ref, created=False, repaired=repaired, warnings=tuple(breaks))
    assert isinstance(end, AllMade), end
    return Submitted(ref, created=True, uploaded=end.uploaded, warnings=tuple(breaks))


def _repair(session: Session, prepared: Prepared, job: Obj) -> tuple[str, ...]:
    """Make the companions of ``job`` what a submit leaves (``Repairing``): one line per
    thing mended."""
    machine = Repairing.start(prepared.objects[:-1], job, prepared.spec_hash)
    _, end = ended(drive(machine, session.clock, _perform(session, prepared.spec_hash)))
    if isinstance(end, NotOurs):
        raise NameTaken(
            f"{end.ref} is not the one this job was submitted with: the job reads it, so "
            f"remove or rename it and submit again ({removal(end.ref)})"
        )
    if isinstance(end, Unmendable):
        raise ClusterError(
            f"{prepared.ref} exists, but {end.ref} could not be mended ({end.error}); the job "
            f"may not start without it, and deleting the job will not delete it: submit again, "
            f"or remove both ({removal(prepared.ref)}; {removal(end.ref)})"
        ) from None
    if isinstance(end, Raised):
        raise end.error
    assert isinstance(end, Mended), end
    return end.repaired

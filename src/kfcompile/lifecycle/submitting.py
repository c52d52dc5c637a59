"""Submitting a job: render it for the cluster (namespaced, labelled as ours, with the spec
hash), check the cluster has what it needs, upload the work dir, create companions and the job
(``create_all``); a job of this spec already there is made whole again (``repair``). Straight-
line code over the ports.

What a failure part-way leaves is deleted again (``roll_back``), the job first, and what cannot
be (a DELETE refused, the API server down, a second Ctrl-C) is told, one line per object: what
it is, why it stayed, whether anything will ever delete it, and the command that removes it
(``LeftBehind``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from attrs import evolve, frozen

from kfcompile.kinds import KINDS, TRAINJOB
from kfcompile.lifecycle import runtimes
from kfcompile.lifecycle.cluster_target import crd_problems
from kfcompile.lifecycle.deleting import Remaining, make_way
from kfcompile.lifecycle.kueue import NOT_SERVED, kueue_drops, served_api
from kfcompile.lifecycle.objects import annotation, create, get, meta, served
from kfcompile.lifecycle.ports import ApiError, Forbidden, LocalFiles, NotFound, Obj, Ref
from kfcompile.lifecycle.session import (
    MANAGED_BY_LABEL,
    MANAGER,
    SPEC_HASH,
    TARGET_ANNOTATION,
    ClusterError,
    NameTaken,
    PreflightFailed,
    Session,
    Unavailable,
    call,
    named,
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
    ref, digest, warnings = prepared.ref, prepared.spec_hash, tuple(breaks)
    there = get(session, ref)
    if there is not None and meta(there).get("deletionTimestamp"):
        make_way(session, there, deleting_wait, on_deleting)  # never "already submitted"
        there = None
    if there is not None and annotation(there, SPEC_HASH) != digest:
        raise NameTaken(
            f"{ref} already exists and is a different job (spec hash "
            f"{annotation(there, SPEC_HASH) or 'none'}, this spec {digest}): "
            f"rename the job, or cancel the old one first (kfcompile cancel {ref.name})"
        )
    if there is not None:  # this spec's job: made whole again, unless only checked
        if dry_run:
            return Submitted(ref, created=False, dry_run=True, warnings=warnings)
        repaired = repair(session, prepared.objects[:-1], there, digest)
        return Submitted(ref, created=False, repaired=repaired, warnings=warnings)
    if dry_run:  # each object checked by the server and stored nowhere: nothing to roll back
        for obj in prepared.objects:
            create(session, obj, digest, dry_run=True)
        return Submitted(ref, created=True, dry_run=True, warnings=warnings)
    uploaded = None
    if spec.work_dir is not None and files is not None:
        uploaded = sync_up(
            session,
            files,
            namespace=namespace,
            pvc=spec.work_dir.pvc,
            path="/",
            local=spec.work_dir.local,
            image=sync_image,
            timeout=sync_timeout,
        )
    create_all(session, prepared.objects, digest)
    return Submitted(ref, created=True, uploaded=uploaded, warnings=warnings)


def create_all(session: Session, objects: Sequence[Obj], digest: str) -> tuple[Obj, ...]:
    """Create ``objects`` in order (companions first, the job last), then make the job the
    owner of each companion, so that deleting the job deletes them; the objects as created.

    A failure part-way, a Ctrl-C too (in a call or between two), deletes what was created, the
    job first (``roll_back``); what cannot be deleted ends it as ``LeftBehind``."""
    created: list[Obj] = []
    owned: list[Ref] = []
    try:
        for obj in objects:
            created.append(create(session, obj, digest))
        for companion in created[:-1]:
            _own(session, companion, created[-1])
            owned.append(Ref.of(companion))
    except BaseException as exc:
        # A refusal (an ApiError, a taken name) created nothing; anything else (trouble that
        # outlasted the retries, a Ctrl-C) may have created the object it was creating.
        creating = objects[len(created)] if len(created) < len(objects) else None
        unsure = None if isinstance(exc, ApiError | NameTaken) else creating
        left = roll_back(session, created, unsure, digest, frozenset(owned))
        if left:
            raise LeftBehind(exc, left, Ref.of(objects[-1])) from exc
        raise
    return tuple(created)


def repair(session: Session, companions: Sequence[Obj], job: Obj, digest: str) -> tuple[str, ...]:
    """Make the ``companions`` of ``job`` (on the cluster, with this spec's hash ``digest``) what
    a submit leaves: each present (created anew) and owned by the job (its owner given back);
    one line per thing mended. One of that name that is not this spec's is never adopted
    (``NameTaken``); one that cannot be mended ends it, saying what stays broken."""
    repaired = []
    for companion in companions:
        ref = Ref.of(companion)
        try:
            mended = _mend(session, companion, job, digest)
        except NameTaken:
            raise
        except (ApiError, ClusterError) as exc:
            raise ClusterError(
                f"{Ref.of(job)} exists, but {ref} could not be mended ({exc}); the job may not "
                f"start without it, and deleting the job will not delete it: submit again, or "
                f"remove both ({removal(Ref.of(job))}; {removal(ref)})"
            ) from None
        repaired += [f"{ref} {mended}"] if mended else []
    return tuple(repaired)


def _mend(session: Session, companion: Obj, job: Obj, digest: str) -> str:
    """What was mended of ``companion`` ("": nothing needed it)."""
    ref = Ref.of(companion)
    found = get(session, ref)
    if found is None:
        _own(session, create(session, companion, digest), job)
        return "was missing: created again"
    if annotation(found, SPEC_HASH) != digest:
        raise NameTaken(
            f"{ref} is not the one this job was submitted with: the job reads it, so remove or "
            f"rename it and submit again ({removal(ref)})"
        )
    if _owned_by(found, job):
        return ""
    _own(session, found, job)
    return "had lost its owner: owned by the job again"


def _owned_by(obj: Obj, job: Obj) -> bool:
    refs = meta(obj).get("ownerReferences")
    uid = meta(job).get("uid")
    return isinstance(refs, list) and any(
        isinstance(r, Mapping) and r.get("uid") == uid for r in refs
    )


# --- what a failed submit leaves ------------------------------------------------------------------


@frozen(repr=False)
class Left:
    """An object a failed submit could not remove, and why."""

    ref: Ref
    why: str  # "delete failed: 403 Forbidden: ...", "not deleted: interrupted", ...
    owned: bool = False  # its ownerReference to the job was set (the garbage collector follows)


class LeftBehind(ClusterError):
    """A submit failed and could not remove everything it had created. ``str()`` is the cause,
    then one line per object left: what it is, why it is still there and how to remove it."""

    def __init__(self, cause: BaseException, left: Sequence[Left], job: Ref) -> None:
        interrupted = isinstance(cause, KeyboardInterrupt)
        lines = [str(cause) or ("interrupted" if interrupted else type(cause).__name__)]
        lines.append(
            f"the submit failed and could not remove all it had created; "
            f"{len(left)} object{'s' * (len(left) != 1)} left on the cluster:"
        )
        job_left = any(item.ref == job for item in left)
        lines += [_left_line(item, job, job_left) for item in left]
        super().__init__("\n".join(lines))
        self.left = tuple(left)


def removal(ref: Ref) -> str:
    """The command that removes ``ref``: ``kfcompile cancel`` for a job, else ``kubectl``."""
    namespace = f" -n {ref.namespace}" if ref.namespace else ""
    if ref.kind in KINDS:
        return f"kfcompile cancel {ref.name}{namespace} --kind {ref.kind}"
    return f"kubectl delete {ref.kind.lower()} {ref.name}{namespace}"


def _left_line(item: Left, job: Ref, job_left: bool) -> str:
    about = [item.why]
    if item.ref.kind == "Secret":
        about.append("it holds the values of secret_env")
    if item.ref != job:
        if not item.owned:
            about.append("it has no owner, so nothing will ever delete it")
        elif not job_left:
            about.append("the garbage collector should delete it with the job")
    return f"  {item.ref} ({'; '.join(about)}): remove it with: {removal(item.ref)}"


# --- the roll-back -------------------------------------------------------------------------------

UNREAD: Final = "may have been created (its create got no answer) and could not be read: "
DOWN: Final = "not deleted: the API server was unavailable"


def roll_back(
    session: Session,
    created: Sequence[Obj],
    unsure: Obj | None,
    digest: str,
    owned: frozenset[Ref],
) -> list[Left]:
    """Delete what a failed submit created, the job first; what stays is returned, one ``Left``
    each, never hidden. ``unsure`` was being created when the failure came: it is read, and
    deleted first if it is ours. ``owned``: the companions whose owner was set. Once the API
    server is found unavailable, the rest is left without asking it again; a second Ctrl-C
    leaves what was not done.

    Each step changes what is left to do in one statement, so a Ctrl-C between two says each
    object once."""

    def stays(obj: Obj, why: str) -> Left:
        return Left(Ref.of(obj), why, Ref.of(obj) in owned)

    todo, down = tuple(reversed(created)), False
    left: tuple[Left, ...] = ()
    try:
        if unsure is not None:
            try:
                found = get(session, Ref.of(unsure))
            except (ApiError, ClusterError) as exc:
                unread = Left(Ref.of(unsure), UNREAD + str(exc))
                left, unsure, down = (unread,), None, isinstance(exc, Unavailable)
            else:  # created after all: deleted first, if ours
                mine = () if found is None or annotation(found, SPEC_HASH) != digest else (found,)
                todo, unsure = (*mine, *todo), None
        while todo and not down:
            try:
                _delete(session, Ref.of(todo[0]))
            except (ApiError, ClusterError) as exc:
                why = exc.line if isinstance(exc, ApiError) else str(exc)  # the call is named
                failed = stays(todo[0], f"delete failed: {why}")
                left, todo, down = (*left, failed), todo[1:], isinstance(exc, Unavailable)
            else:
                todo = todo[1:]
    except KeyboardInterrupt:
        rest = [stays(obj, "not deleted") for obj in todo]
        if rest:
            rest[0] = evolve(rest[0], why="delete interrupted: it may still be there")
        if unsure is not None:
            rest.insert(0, Left(Ref.of(unsure), "may have been created: not checked (interrupted)"))
        return [*left, *rest]
    return [*left, *(stays(obj, DOWN) for obj in todo)]


def _delete(session: Session, ref: Ref) -> None:
    """Delete ``ref`` (in the background: its dependents after it); one already gone is fine."""
    with contextlib.suppress(NotFound):
        call(session, named("delete", ref), partial(session.cluster.delete, ref, "Background"))

"""Submitting a job: render it for the cluster (namespaced, labelled as ours, with the spec
hash), check the cluster has what it needs, upload the work dir, create companions and the job
(the ``Submitting`` machine), and roll back what a failure part-way leaves (``rollback``: or say
what could not be removed); a job of this spec already there is repaired (``Repairing``)."""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

from attrs import evolve, field, frozen

from kfcompile.generated import QUEUE_LABEL
from kfcompile.kinds import KINDS, TRAINJOB
from kfcompile.lifecycle.deleting import Remaining, make_way
from kfcompile.lifecycle.objects import annotation, create, get, meta, served
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
    Table,
    call,
    drive,
    ended,
    finished,
    named,
    row,
    transition,
)
from kfcompile.lifecycle.sync import (
    SYNC_IMAGE,
    SYNC_TIMEOUT,
    Synced,
    claim_missing,
    missing,
    sync_up,
)
from kfcompile.lifecycle.target import crd_problems
from kfcompile.ports import ApiError, LocalFiles, Obj, Ref
from kfcompile.spec import JobSpec
from kfcompile.targets import target

RUNTIME_API: Final = TRAINJOB.api_version
LOCAL_QUEUE_API: Final = "kueue.x-k8s.io/v1beta1"
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
        ref = job["spec"]["runtimeRef"]
        runtime_kind = ref.get("kind", "ClusterTrainingRuntime")
        scope = None if runtime_kind == "ClusterTrainingRuntime" else namespace
        if missing(session, Ref(RUNTIME_API, runtime_kind, scope, ref["name"])):
            where = f" in namespace {namespace}" if scope else ""
            plural = runtime_kind.lower() + "s"
            problems.append(
                f"{runtime_kind} {ref['name']} does not exist{where}: install the Trainer "
                f"runtimes or set runtime_ref to one listed by `kubectl get {plural}`"
            )
    queue_name = (meta(job).get("labels") or {}).get(QUEUE_LABEL)
    if queue_name:
        if not served(session, LOCAL_QUEUE_API, "LocalQueue"):
            problems.append(
                f"the job names Kueue queue {queue_name} but Kueue is not installed "
                "(LocalQueue is not served): install Kueue or remove `queue`"
            )
        elif missing(session, Ref(LOCAL_QUEUE_API, "LocalQueue", namespace, queue_name)):
            problems.append(
                f"Kueue LocalQueue {queue_name} does not exist in namespace {namespace}: "
                f"create it or fix `queue` (kubectl get localqueues -n {namespace})"
            )
    no_claim = claim_missing(session, namespace, spec.work_dir.pvc) if spec.work_dir else None
    if no_claim:
        problems.append(f"{no_claim}: create it before submitting (work_dir.pvc)")
    return problems


@frozen
class Submitted:
    ref: Ref
    created: bool  # False: this very spec was already submitted
    uploaded: Synced | None = None
    # What a resubmit had to mend on the job's companions, one line each ("Secret x ...: ...").
    repaired: tuple[str, ...] = ()
    dry_run: bool = False  # the server checked every object (dryRun=All) and stored none


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


def _owned_by(obj: Obj, job: Obj) -> bool:
    refs = meta(obj).get("ownerReferences")
    uid = meta(job).get("uid")
    return isinstance(refs, list) and any(
        isinstance(r, Mapping) and r.get("uid") == uid for r in refs
    )


def _own(session: Session, companion: Obj, job: Obj) -> None:
    """Make ``job`` the owner of ``companion``, so deleting the job deletes it."""
    ref = Ref.of(companion)
    owner = {"metadata": {"ownerReferences": [_owner(job)]}}
    call(session, named("patch", ref), partial(session.cluster.patch, ref, owner))


# --- submitting, and repairing: the ``Submitting`` and ``Repairing`` machines -------------------


@frozen
class Read:
    ref: Ref


@frozen
class MakeWay:
    """Wait for ``job``, being deleted, to be gone, so a new one can take its name."""

    job: Obj


@frozen
class Upload:
    """Upload the work dir."""


@frozen
class Create:
    obj: Obj
    dry_run: bool = False  # sent with dryRun=All: checked by the server, stored nowhere


@frozen
class Own:
    """Make ``job`` the owner of ``companion``, so deleting the job deletes it."""

    companion: Obj
    job: Obj


@frozen
class WayMade:
    """The job being deleted is gone."""


@frozen
class Uploaded:
    synced: Synced


@frozen
class Made:
    """Created (or found, ours, behind a 409): ``obj`` as the server has it."""

    obj: Obj


@frozen
class Owned:
    """The owner reference is set."""


@frozen
class Raised:
    """The call raised ``error``: a refusal, trouble that outlasted the retries, a Ctrl-C.
    Also an end: what ends the submit as it is."""

    error: BaseException


@frozen
class Repair:
    """A job of this spec holds the name: make it whole (``Repairing``)."""

    job: Obj


@frozen
class Taken:
    """Another job holds the name: kfcompile never replaces it."""

    job: Obj


@frozen
class Checked:
    """A dry run's end: the server checked every object (``created``: they would be new)."""

    created: bool


@frozen
class AllMade:
    """Every object created, and every companion owned by the job."""

    created: tuple[Obj, ...]
    uploaded: Synced | None


@frozen
class Failure:
    """A create or an owner patch failed with ``error``: what to roll back."""

    error: BaseException
    created: tuple[Obj, ...]
    unsure: Obj | None  # being created: it may exist though no answer said so
    owned: frozenset[Ref]  # the companions whose owner was set


class Stage(enum.Enum):
    LOOK = "look"  # read the job by name: is it there, being deleted, ours?
    WAY = "way"  # a job of that name is being deleted: wait for it to be gone
    TRY = "try"  # a dry run: the next object, sent with dryRun=All
    UPLOAD = "upload"  # the work dir, before anything is created
    CREATE = "create"  # the next object, in order: companions first, the job last
    OWN = "own"  # the next companion gets the job as its owner
    END = "end"
    ROLL_BACK = "roll back"  # the end of a failure part-way: ``rollback.RollingBack`` follows


@frozen
class Submitting:
    """A submit, once its objects are rendered and the cluster has what they need: the job's
    name read first (a job of this spec there is repaired, another job's is never touched, one
    being deleted is waited for), then the work dir uploaded, the objects created in order and
    the job made the owner of each companion; a failure there ends it with what to roll back.
    ``dry_run``: each object is sent with dryRun=All instead, and nothing else is done."""

    objects: tuple[Obj, ...]
    digest: str
    dry_run: bool = field(default=False, kw_only=True)
    uploads: bool = field(default=False, kw_only=True)  # a work dir to upload
    phase: Stage = Stage.LOOK
    existing: Obj | None = None  # the job of that name being deleted
    created: tuple[Obj, ...] = ()
    owned: tuple[Ref, ...] = ()
    uploaded: Synced | None = None
    end: Repair | Taken | Checked | AllMade | Failure | Raised | None = None

    def next_request(
        self, now: float
    ) -> (
        Read
        | MakeWay
        | Upload
        | Create
        | Own
        | Repair
        | Taken
        | Checked
        | AllMade
        | Failure
        | Raised
    ):
        if self.end is not None:
            return self.end
        if self.phase is Stage.LOOK:
            return Read(Ref.of(self.objects[-1]))
        if self.phase is Stage.WAY:
            assert self.existing is not None
            return MakeWay(self.existing)
        if self.phase is Stage.UPLOAD:
            return Upload()
        if self.phase is Stage.OWN:
            return Own(self.created[len(self.owned)], self.created[-1])
        return Create(self.objects[len(self.created)], dry_run=self.phase is Stage.TRY)

    def receive(
        self, answer: Found | WayMade | Uploaded | Made | Owned | Raised, now: float
    ) -> Submitting:
        return transition(SUBMIT_TABLE, self, self.phase, answer, now)

    def _found(self, answer: Found, now: float) -> Submitting:
        job = answer.obj
        if job is None:
            return self._free()
        if meta(job).get("deletionTimestamp"):  # never "already submitted": it is going
            return evolve(self, phase=Stage.WAY, existing=job)
        if annotation(job, SPEC_HASH) != self.digest:
            return self._ended(Taken(job))
        return self._ended(Checked(created=False) if self.dry_run else Repair(job))

    def _way_made(self, answer: WayMade, now: float) -> Submitting:
        return evolve(self, existing=None)._free()

    def _free(self) -> Submitting:
        """The name is free: try, or upload, or create."""
        first = Stage.TRY if self.dry_run else Stage.UPLOAD if self.uploads else Stage.CREATE
        return evolve(self, phase=first)

    def _tried(self, answer: Made, now: float) -> Submitting:
        tried = evolve(self, created=(*self.created, answer.obj))
        return tried if len(tried.created) < len(self.objects) else self._ended(Checked(True))

    def _uploaded(self, answer: Uploaded, now: float) -> Submitting:
        return evolve(self, phase=Stage.CREATE, uploaded=answer.synced)

    def _made(self, answer: Made, now: float) -> Submitting:
        made = evolve(self, created=(*self.created, answer.obj))
        return made if len(made.created) < len(self.objects) else made._owning()

    def _owned(self, answer: Owned, now: float) -> Submitting:
        return evolve(self, owned=(*self.owned, Ref.of(self.created[len(self.owned)])))._owning()

    def _owning(self) -> Submitting:
        if len(self.owned) < len(self.created) - 1:
            return evolve(self, phase=Stage.OWN)
        return self._ended(AllMade(self.created, self.uploaded))

    def _failed(self, answer: Raised, now: float) -> Submitting:
        error = answer.error
        # A refusal (an ApiError, a taken name) created nothing; anything else may have.
        pending = self.objects[len(self.created)] if self.phase is Stage.CREATE else None
        unsure = None if isinstance(error, ApiError | NameTaken) else pending
        failure = Failure(error, self.created, unsure, frozenset(self.owned))
        return evolve(self, phase=Stage.ROLL_BACK, end=failure)

    def _raised(self, answer: Raised, now: float) -> Submitting:
        return self._ended(answer)  # nothing was created: nothing to roll back

    def _ended(self, end: Repair | Taken | Checked | AllMade | Raised) -> Submitting:
        return evolve(self, phase=Stage.END, end=end)


_NEW: Final = (Stage.TRY, Stage.UPLOAD, Stage.CREATE)  # where a free name leads

SUBMIT_TABLE: Final[Table[Submitting]] = {
    # WAY: being deleted; END: ours (Repair, or Checked in a dry run), or another's (Taken)
    (Stage.LOOK, Found): row(Submitting._found, Stage.WAY, *_NEW, Stage.END),
    (Stage.LOOK, Raised): row(Submitting._raised, Stage.END),
    (Stage.WAY, WayMade): row(Submitting._way_made, *_NEW),
    (Stage.WAY, Raised): row(Submitting._raised, Stage.END),  # StillDeleting: nothing created
    (Stage.TRY, Made): row(Submitting._tried, Stage.TRY, Stage.END),  # the next, or Checked
    (Stage.TRY, Raised): row(Submitting._raised, Stage.END),  # a dry run stores nothing
    (Stage.UPLOAD, Uploaded): row(Submitting._uploaded, Stage.CREATE),
    (Stage.UPLOAD, Raised): row(Submitting._raised, Stage.END),
    # the next; OWN once the job is created; END when it has no companion
    (Stage.CREATE, Made): row(Submitting._made, Stage.CREATE, Stage.OWN, Stage.END),
    (Stage.CREATE, Raised): row(Submitting._failed, Stage.ROLL_BACK),
    (Stage.OWN, Owned): row(Submitting._owned, Stage.OWN, Stage.END),  # the next, or done
    (Stage.OWN, Raised): row(Submitting._failed, Stage.ROLL_BACK),
}


@frozen
class Mended:
    """The companions are present and owned by the job: one line per thing mended."""

    repaired: tuple[str, ...]


@frozen
class NotOurs:
    """A companion of that name is not the one this job was submitted with."""

    ref: Ref


@frozen
class Unmendable:
    ref: Ref
    error: ApiError | ClusterError


class Mend(enum.Enum):
    READ = "read"  # the next companion, as the cluster has it
    CREATE = "create"  # it is missing: create it again
    OWN = "own"  # it lacks its owner: the job
    END = "end"


@frozen
class Repairing:
    """The companions of ``job`` (on the cluster, with this spec's hash ``digest``) made what a
    submit leaves: present and owned by it. ``todo``: those still to look at, as this spec
    renders them."""

    todo: tuple[Obj, ...]
    job: Obj
    digest: str
    phase: Mend = Mend.READ
    current: Obj | None = None  # the companion being mended, as the cluster has it
    what: str = ""  # what is mended about it
    repaired: tuple[str, ...] = ()
    end: Mended | NotOurs | Unmendable | Raised | None = None

    @classmethod
    def start(cls, companions: Sequence[Obj], job: Obj, digest: str) -> Repairing:
        if not companions:
            return cls((), job, digest, Mend.END, end=Mended(()))
        return cls(tuple(companions), job, digest)

    def next_request(
        self, now: float
    ) -> Read | Create | Own | Mended | NotOurs | Unmendable | Raised:
        if self.end is not None:
            return self.end
        if self.phase is Mend.READ:
            return Read(Ref.of(self.todo[0]))
        if self.phase is Mend.CREATE:
            return Create(self.todo[0])
        assert self.current is not None
        return Own(self.current, self.job)

    def receive(self, answer: Found | Made | Owned | Raised, now: float) -> Repairing:
        return transition(REPAIR_TABLE, self, self.phase, answer, now)

    def _found(self, answer: Found, now: float) -> Repairing:
        current = answer.obj
        if current is None:
            return evolve(self, phase=Mend.CREATE)
        if annotation(current, SPEC_HASH) != self.digest:
            return evolve(self, phase=Mend.END, end=NotOurs(Ref.of(self.todo[0])))
        if _owned_by(current, self.job):
            return self._next()
        what = "had lost its owner: owned by the job again"
        return evolve(self, phase=Mend.OWN, current=current, what=what)

    def _made(self, answer: Made, now: float) -> Repairing:
        return evolve(self, phase=Mend.OWN, current=answer.obj, what="was missing: created again")

    def _owned(self, answer: Owned, now: float) -> Repairing:
        return self._next(f"{Ref.of(self.todo[0])} {self.what}")

    def _next(self, *mended: str) -> Repairing:
        repaired, todo = (*self.repaired, *mended), self.todo[1:]
        if not todo:
            return evolve(self, phase=Mend.END, todo=todo, end=Mended(repaired))
        return evolve(self, phase=Mend.READ, todo=todo, current=None, what="", repaired=repaired)

    def _failed(self, answer: Raised, now: float) -> Repairing:
        error = answer.error
        if isinstance(error, ApiError | ClusterError) and not isinstance(error, NameTaken):
            return evolve(self, phase=Mend.END, end=Unmendable(Ref.of(self.todo[0]), error))
        return evolve(self, phase=Mend.END, end=answer)  # a taken name, a Ctrl-C: as it is


REPAIR_TABLE: Final[Table[Repairing]] = {
    # CREATE: missing; OWN: without its owner; READ the next (END: the last) when whole;
    # END too when it is not ours
    (Mend.READ, Found): row(Repairing._found, Mend.CREATE, Mend.OWN, Mend.READ, Mend.END),
    (Mend.READ, Raised): row(Repairing._failed, Mend.END),
    (Mend.CREATE, Made): row(Repairing._made, Mend.OWN),
    (Mend.CREATE, Raised): row(Repairing._failed, Mend.END),
    (Mend.OWN, Owned): row(Repairing._owned, Mend.READ, Mend.END),  # the next, or the last
    (Mend.OWN, Raised): row(Repairing._failed, Mend.END),
}


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
    if problems:
        raise PreflightFailed(problems)
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
        return Submitted(ref, created=end.created, dry_run=True)
    if isinstance(end, Repair):
        return Submitted(ref, created=False, repaired=_repair(session, prepared, end.job))
    assert isinstance(end, AllMade), end
    return Submitted(ref, created=True, uploaded=end.uploaded)


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

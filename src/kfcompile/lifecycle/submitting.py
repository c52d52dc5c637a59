"""The machines of a submit (``submit`` is their driver): ``Submitting``, from reading the
job's name to the last owner reference, and ``Repairing``, what a resubmit of a job that exists
mends. Each says, from what the API answered, what to ask next; a failure part-way ends
``Submitting`` with what ``rollback`` deletes again."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Final

from attrs import evolve, field, frozen

from kfcompile.lifecycle.objects import annotation, meta
from kfcompile.lifecycle.rollback import Found
from kfcompile.lifecycle.session import SPEC_HASH, ClusterError, NameTaken, Table, row, transition
from kfcompile.lifecycle.sync import Synced
from kfcompile.ports import ApiError, Obj, Ref


def owned_by(obj: Obj, job: Obj) -> bool:
    refs = meta(obj).get("ownerReferences")
    uid = meta(job).get("uid")
    return isinstance(refs, list) and any(
        isinstance(r, Mapping) and r.get("uid") == uid for r in refs
    )


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


class SubmitPhase(enum.Enum):
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
    phase: SubmitPhase = SubmitPhase.LOOK
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
        if self.phase is SubmitPhase.LOOK:
            return Read(Ref.of(self.objects[-1]))
        if self.phase is SubmitPhase.WAY:
            assert self.existing is not None
            return MakeWay(self.existing)
        if self.phase is SubmitPhase.UPLOAD:
            return Upload()
        if self.phase is SubmitPhase.OWN:
            return Own(self.created[len(self.owned)], self.created[-1])
        return Create(self.objects[len(self.created)], dry_run=self.phase is SubmitPhase.TRY)

    def receive(
        self, answer: Found | WayMade | Uploaded | Made | Owned | Raised, now: float
    ) -> Submitting:
        return transition(SUBMIT_TABLE, self, self.phase, answer, now)

    def _found(self, answer: Found, now: float) -> Submitting:
        job = answer.obj
        if job is None:
            return self._free()
        if meta(job).get("deletionTimestamp"):  # never "already submitted": it is going
            return evolve(self, phase=SubmitPhase.WAY, existing=job)
        if annotation(job, SPEC_HASH) != self.digest:
            return self._ended(Taken(job))
        return self._ended(Checked(created=False) if self.dry_run else Repair(job))

    def _way_made(self, answer: WayMade, now: float) -> Submitting:
        return evolve(self, existing=None)._free()

    def _free(self) -> Submitting:
        """The name is free: try, or upload, or create."""
        first = (
            SubmitPhase.TRY
            if self.dry_run
            else SubmitPhase.UPLOAD
            if self.uploads
            else SubmitPhase.CREATE
        )
        return evolve(self, phase=first)

    def _tried(self, answer: Made, now: float) -> Submitting:
        tried = evolve(self, created=(*self.created, answer.obj))
        return tried if len(tried.created) < len(self.objects) else self._ended(Checked(True))

    def _uploaded(self, answer: Uploaded, now: float) -> Submitting:
        return evolve(self, phase=SubmitPhase.CREATE, uploaded=answer.synced)

    def _made(self, answer: Made, now: float) -> Submitting:
        made = evolve(self, created=(*self.created, answer.obj))
        return made if len(made.created) < len(self.objects) else made._owning()

    def _owned(self, answer: Owned, now: float) -> Submitting:
        return evolve(self, owned=(*self.owned, Ref.of(self.created[len(self.owned)])))._owning()

    def _owning(self) -> Submitting:
        if len(self.owned) < len(self.created) - 1:
            return evolve(self, phase=SubmitPhase.OWN)
        return self._ended(AllMade(self.created, self.uploaded))

    def _failed(self, answer: Raised, now: float) -> Submitting:
        error = answer.error
        # A refusal (an ApiError, a taken name) created nothing; anything else may have.
        pending = self.objects[len(self.created)] if self.phase is SubmitPhase.CREATE else None
        unsure = None if isinstance(error, ApiError | NameTaken) else pending
        failure = Failure(error, self.created, unsure, frozenset(self.owned))
        return evolve(self, phase=SubmitPhase.ROLL_BACK, end=failure)

    def _raised(self, answer: Raised, now: float) -> Submitting:
        return self._ended(answer)  # nothing was created: nothing to roll back

    def _ended(self, end: Repair | Taken | Checked | AllMade | Raised) -> Submitting:
        return evolve(self, phase=SubmitPhase.END, end=end)


_NEW: Final = (SubmitPhase.TRY, SubmitPhase.UPLOAD, SubmitPhase.CREATE)  # where a free name leads

SUBMIT_TABLE: Final[Table[Submitting]] = {
    # WAY: being deleted; END: ours (Repair, or Checked in a dry run), or another's (Taken)
    (SubmitPhase.LOOK, Found): row(Submitting._found, SubmitPhase.WAY, *_NEW, SubmitPhase.END),
    (SubmitPhase.LOOK, Raised): row(Submitting._raised, SubmitPhase.END),
    (SubmitPhase.WAY, WayMade): row(Submitting._way_made, *_NEW),
    (SubmitPhase.WAY, Raised): row(
        Submitting._raised, SubmitPhase.END
    ),  # StillDeleting: nothing created
    (SubmitPhase.TRY, Made): row(
        Submitting._tried, SubmitPhase.TRY, SubmitPhase.END
    ),  # the next, or Checked
    (SubmitPhase.TRY, Raised): row(Submitting._raised, SubmitPhase.END),  # a dry run stores nothing
    (SubmitPhase.UPLOAD, Uploaded): row(Submitting._uploaded, SubmitPhase.CREATE),
    (SubmitPhase.UPLOAD, Raised): row(Submitting._raised, SubmitPhase.END),
    # the next; OWN once the job is created; END when it has no companion
    (SubmitPhase.CREATE, Made): row(
        Submitting._made, SubmitPhase.CREATE, SubmitPhase.OWN, SubmitPhase.END
    ),
    (SubmitPhase.CREATE, Raised): row(Submitting._failed, SubmitPhase.ROLL_BACK),
    (SubmitPhase.OWN, Owned): row(
        Submitting._owned, SubmitPhase.OWN, SubmitPhase.END
    ),  # the next, or done
    (SubmitPhase.OWN, Raised): row(Submitting._failed, SubmitPhase.ROLL_BACK),
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


class RepairPhase(enum.Enum):
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
    phase: RepairPhase = RepairPhase.READ
    current: Obj | None = None  # the companion being mended, as the cluster has it
    what: str = ""  # what is mended about it
    repaired: tuple[str, ...] = ()
    end: Mended | NotOurs | Unmendable | Raised | None = None

    @classmethod
    def start(cls, companions: Sequence[Obj], job: Obj, digest: str) -> Repairing:
        if not companions:
            return cls((), job, digest, RepairPhase.END, end=Mended(()))
        return cls(tuple(companions), job, digest)

    def next_request(
        self, now: float
    ) -> Read | Create | Own | Mended | NotOurs | Unmendable | Raised:
        if self.end is not None:
            return self.end
        if self.phase is RepairPhase.READ:
            return Read(Ref.of(self.todo[0]))
        if self.phase is RepairPhase.CREATE:
            return Create(self.todo[0])
        assert self.current is not None
        return Own(self.current, self.job)

    def receive(self, answer: Found | Made | Owned | Raised, now: float) -> Repairing:
        return transition(REPAIR_TABLE, self, self.phase, answer, now)

    def _found(self, answer: Found, now: float) -> Repairing:
        current = answer.obj
        if current is None:
            return evolve(self, phase=RepairPhase.CREATE)
        if annotation(current, SPEC_HASH) != self.digest:
            return evolve(self, phase=RepairPhase.END, end=NotOurs(Ref.of(self.todo[0])))
        if owned_by(current, self.job):
            return self._next()
        what = "had lost its owner: owned by the job again"
        return evolve(self, phase=RepairPhase.OWN, current=current, what=what)

    def _made(self, answer: Made, now: float) -> Repairing:
        return evolve(
            self, phase=RepairPhase.OWN, current=answer.obj, what="was missing: created again"
        )

    def _owned(self, answer: Owned, now: float) -> Repairing:
        return self._next(f"{Ref.of(self.todo[0])} {self.what}")

    def _next(self, *mended: str) -> Repairing:
        repaired, todo = (*self.repaired, *mended), self.todo[1:]
        if not todo:
            return evolve(self, phase=RepairPhase.END, todo=todo, end=Mended(repaired))
        return evolve(
            self, phase=RepairPhase.READ, todo=todo, current=None, what="", repaired=repaired
        )

    def _failed(self, answer: Raised, now: float) -> Repairing:
        error = answer.error
        if isinstance(error, ApiError | ClusterError) and not isinstance(error, NameTaken):
            return evolve(self, phase=RepairPhase.END, end=Unmendable(Ref.of(self.todo[0]), error))
        return evolve(self, phase=RepairPhase.END, end=answer)  # a taken name, a Ctrl-C: as it is


REPAIR_TABLE: Final[Table[Repairing]] = {
    # CREATE: missing; OWN: without its owner; READ the next (END: the last) when whole;
    # END too when it is not ours
    (RepairPhase.READ, Found): row(
        Repairing._found, RepairPhase.CREATE, RepairPhase.OWN, RepairPhase.READ, RepairPhase.END
    ),
    (RepairPhase.READ, Raised): row(Repairing._failed, RepairPhase.END),
    (RepairPhase.CREATE, Made): row(Repairing._made, RepairPhase.OWN),
    (RepairPhase.CREATE, Raised): row(Repairing._failed, RepairPhase.END),
    (RepairPhase.OWN, Owned): row(
        Repairing._owned, RepairPhase.READ, RepairPhase.END
    ),  # the next, or the last
    (RepairPhase.OWN, Raised): row(Repairing._failed, RepairPhase.END),
}

"""The ``Submitting`` machine (``submit`` is its driver): a submit from reading the job's name
to the last owner reference, saying from what the API answered what to ask next. A job of this
spec there is mended (``repairing``); a failure part-way ends it with what ``rollback`` deletes
again."""

from __future__ import annotations

import enum
from typing import Final

from attrs import evolve, field, frozen

from kfcompile.lifecycle.objects import annotation, meta
from kfcompile.lifecycle.ports import ApiError, Obj, Ref
from kfcompile.lifecycle.rollback import Found
from kfcompile.lifecycle.session import SPEC_HASH, NameTaken, Table, row, transition
from kfcompile.lifecycle.sync import Synced


@frozen(repr=False)
class Read:
    ref: Ref


@frozen(repr=False)
class MakeWay:
    """Wait for ``job``, being deleted, to be gone, so a new one can take its name."""

    job: Obj


@frozen(repr=False)
class Upload:
    """Upload the work dir."""


@frozen(repr=False)
class Create:
    obj: Obj
    dry_run: bool = False  # sent with dryRun=All: checked by the server, stored nowhere


@frozen(repr=False)
class Own:
    """Make ``job`` the owner of ``companion``, so deleting the job deletes it."""

    companion: Obj
    job: Obj


@frozen(repr=False, eq=False)
class WayMade:
    """The job being deleted is gone."""


@frozen(repr=False, eq=False)
class Uploaded:
    synced: Synced


@frozen(repr=False, eq=False)
class Made:
    """Created (or found, ours, behind a 409): ``obj`` as the server has it."""

    obj: Obj


@frozen(repr=False, eq=False)
class Owned:
    """The owner reference is set."""


@frozen(repr=False)
class Raised:
    """The call raised ``error``: a refusal, trouble that outlasted the retries, a Ctrl-C.
    Also an end: what ends the submit as it is."""

    error: BaseException


@frozen(repr=False)
class Repair:
    """A job of this spec holds the name: make it whole (``Repairing``)."""

    job: Obj


@frozen(repr=False)
class Taken:
    """Another job holds the name: kfcompile never replaces it."""

    job: Obj


@frozen(repr=False)
class Checked:
    """A dry run's end: the server checked every object (``created``: they would be new)."""

    created: bool


@frozen(repr=False)
class AllMade:
    """Every object created, and every companion owned by the job."""

    created: tuple[Obj, ...]
    uploaded: Synced | None


@frozen(repr=False)
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


# the table's words
LOOK, WAY, TRY, UPLOAD, CREATE, OWN, END, ROLL_BACK = (
    SubmitPhase.LOOK,
    SubmitPhase.WAY,
    SubmitPhase.TRY,
    SubmitPhase.UPLOAD,
    SubmitPhase.CREATE,
    SubmitPhase.OWN,
    SubmitPhase.END,
    SubmitPhase.ROLL_BACK,
)

# what a submit asks, and how it ends
SubmitRequest = Read | MakeWay | Upload | Create | Own
SubmitEnd = Repair | Taken | Checked | AllMade | Failure | Raised


@frozen(repr=False, eq=False)
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
    phase: SubmitPhase = LOOK
    existing: Obj | None = None  # the job of that name being deleted
    created: tuple[Obj, ...] = ()
    owned: tuple[Ref, ...] = ()
    uploaded: Synced | None = None
    end: SubmitEnd | None = None

    def next_request(self, now: float) -> SubmitRequest | SubmitEnd:
        if self.end is not None:
            return self.end
        if self.phase is LOOK:
            return Read(Ref.of(self.objects[-1]))
        if self.phase is WAY:
            assert self.existing is not None
            return MakeWay(self.existing)
        if self.phase is UPLOAD:
            return Upload()
        if self.phase is OWN:
            return Own(self.created[len(self.owned)], self.created[-1])
        return Create(self.objects[len(self.created)], dry_run=self.phase is TRY)

    def receive(
        self, answer: Found | WayMade | Uploaded | Made | Owned | Raised, now: float
    ) -> Submitting:
        return transition(SUBMIT_TABLE, self, self.phase, answer, now)

    def _found(self, answer: Found, now: float) -> Submitting:
        job = answer.obj
        if job is None:
            return self._free()
        if meta(job).get("deletionTimestamp"):  # never "already submitted": it is going
            return evolve(self, phase=WAY, existing=job)
        if annotation(job, SPEC_HASH) != self.digest:
            return self._ended(Taken(job))
        return self._ended(Checked(created=False) if self.dry_run else Repair(job))

    def _way_made(self, answer: WayMade, now: float) -> Submitting:
        return evolve(self, existing=None)._free()

    def _free(self) -> Submitting:
        """The name is free: try, or upload, or create."""
        return evolve(self, phase=TRY if self.dry_run else UPLOAD if self.uploads else CREATE)

    def _tried(self, answer: Made, now: float) -> Submitting:
        tried = evolve(self, created=(*self.created, answer.obj))
        return tried if len(tried.created) < len(self.objects) else self._ended(Checked(True))

    def _uploaded(self, answer: Uploaded, now: float) -> Submitting:
        return evolve(self, phase=CREATE, uploaded=answer.synced)

    def _made(self, answer: Made, now: float) -> Submitting:
        made = evolve(self, created=(*self.created, answer.obj))
        return made if len(made.created) < len(self.objects) else made._owning()

    def _owned(self, answer: Owned, now: float) -> Submitting:
        return evolve(self, owned=(*self.owned, Ref.of(self.created[len(self.owned)])))._owning()

    def _owning(self) -> Submitting:
        if len(self.owned) < len(self.created) - 1:
            return evolve(self, phase=OWN)
        return self._ended(AllMade(self.created, self.uploaded))

    def _failed(self, answer: Raised, now: float) -> Submitting:
        error = answer.error
        # A refusal (an ApiError, a taken name) created nothing; anything else may have.
        pending = self.objects[len(self.created)] if self.phase is CREATE else None
        unsure = None if isinstance(error, ApiError | NameTaken) else pending
        failure = Failure(error, self.created, unsure, frozenset(self.owned))
        return evolve(self, phase=ROLL_BACK, end=failure)

    def _raised(self, answer: Raised, now: float) -> Submitting:
        return self._ended(answer)  # nothing was created: nothing to roll back

    def _ended(self, end: SubmitEnd) -> Submitting:
        return evolve(self, phase=END, end=end)


_NEW: Final = (TRY, UPLOAD, CREATE)  # where a free name leads

SUBMIT_TABLE: Final[Table[Submitting]] = {
    # WAY: being deleted; END: ours (Repair, or Checked in a dry run), or another's (Taken)
    (LOOK, Found): row(Submitting._found, WAY, *_NEW, END),
    (LOOK, Raised): row(Submitting._raised, END),
    (WAY, WayMade): row(Submitting._way_made, *_NEW),
    (WAY, Raised): row(Submitting._raised, END),  # StillDeleting: nothing created
    (TRY, Made): row(Submitting._tried, TRY, END),  # the next, or Checked
    (TRY, Raised): row(Submitting._raised, END),  # a dry run stores nothing
    (UPLOAD, Uploaded): row(Submitting._uploaded, CREATE),
    (UPLOAD, Raised): row(Submitting._raised, END),
    # the next; OWN once the job is created; END when it has no companion
    (CREATE, Made): row(Submitting._made, CREATE, OWN, END),
    (CREATE, Raised): row(Submitting._failed, ROLL_BACK),
    (OWN, Owned): row(Submitting._owned, OWN, END),  # the next, or done
    (OWN, Raised): row(Submitting._failed, ROLL_BACK),
}

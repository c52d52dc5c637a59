"""The ``Repairing`` machine: what a submit of a spec whose job exists mends, so that the job is
whole again: each companion present (created anew) and owned by the job (its owner given
back). ``submit`` drives it, with the requests and answers of ``submitting``."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Final

from attrs import evolve, frozen

from kfcompile.lifecycle.objects import annotation, meta
from kfcompile.lifecycle.ports import ApiError, Obj, Ref
from kfcompile.lifecycle.rollback import Found
from kfcompile.lifecycle.session import SPEC_HASH, ClusterError, NameTaken, Table, row, transition
from kfcompile.lifecycle.submitting import Create, Made, Own, Owned, Raised, Read


def owned_by(obj: Obj, job: Obj) -> bool:
    refs = meta(obj).get("ownerReferences")
    uid = meta(job).get("uid")
    return isinstance(refs, list) and any(
        isinstance(r, Mapping) and r.get("uid") == uid for r in refs
    )


@frozen(repr=False)
class Mended:
    """The companions are present and owned by the job: one line per thing mended."""

    repaired: tuple[str, ...]


@frozen(repr=False)
class NotOurs:
    """A companion of that name is not the one this job was submitted with."""

    ref: Ref


@frozen(repr=False)
class Unmendable:
    ref: Ref
    error: ApiError | ClusterError


class RepairPhase(enum.Enum):
    READ = "read"  # the next companion, as the cluster has it
    CREATE = "create"  # it is missing: create it again
    OWN = "own"  # it lacks its owner: the job
    END = "end"


# the table's words
READ, CREATE, OWN, END = RepairPhase.READ, RepairPhase.CREATE, RepairPhase.OWN, RepairPhase.END


@frozen(repr=False, eq=False)
class Repairing:
    """The companions of ``job`` (on the cluster, with this spec's hash ``digest``) made what a
    submit leaves: present and owned by it. ``todo``: those still to look at, as this spec
    renders them."""

    todo: tuple[Obj, ...]
    job: Obj
    digest: str
    phase: RepairPhase = READ
    current: Obj | None = None  # the companion being mended, as the cluster has it
    what: str = ""  # what is mended about it
    repaired: tuple[str, ...] = ()
    end: Mended | NotOurs | Unmendable | Raised | None = None

    @classmethod
    def start(cls, companions: Sequence[Obj], job: Obj, digest: str) -> Repairing:
        if not companions:
            return cls((), job, digest, END, end=Mended(()))
        return cls(tuple(companions), job, digest)

    def next_request(
        self, now: float
    ) -> Read | Create | Own | Mended | NotOurs | Unmendable | Raised:
        if self.end is not None:
            return self.end
        if self.phase is READ:
            return Read(Ref.of(self.todo[0]))
        if self.phase is CREATE:
            return Create(self.todo[0])
        assert self.current is not None
        return Own(self.current, self.job)

    def receive(self, answer: Found | Made | Owned | Raised, now: float) -> Repairing:
        return transition(REPAIR_TABLE, self, self.phase, answer, now)

    def _found(self, answer: Found, now: float) -> Repairing:
        current = answer.obj
        if current is None:
            return evolve(self, phase=CREATE)
        if annotation(current, SPEC_HASH) != self.digest:
            return evolve(self, phase=END, end=NotOurs(Ref.of(self.todo[0])))
        if owned_by(current, self.job):
            return self._next()
        what = "had lost its owner: owned by the job again"
        return evolve(self, phase=OWN, current=current, what=what)

    def _made(self, answer: Made, now: float) -> Repairing:
        return evolve(self, phase=OWN, current=answer.obj, what="was missing: created again")

    def _owned(self, answer: Owned, now: float) -> Repairing:
        return self._next(f"{Ref.of(self.todo[0])} {self.what}")

    def _next(self, *mended: str) -> Repairing:
        repaired, todo = (*self.repaired, *mended), self.todo[1:]
        if not todo:
            return evolve(self, phase=END, todo=todo, end=Mended(repaired))
        return evolve(self, phase=READ, todo=todo, current=None, what="", repaired=repaired)

    def _failed(self, answer: Raised, now: float) -> Repairing:
        error = answer.error
        if isinstance(error, ApiError | ClusterError) and not isinstance(error, NameTaken):
            return evolve(self, phase=END, end=Unmendable(Ref.of(self.todo[0]), error))
        return evolve(self, phase=END, end=answer)  # a taken name, a Ctrl-C: as it is


REPAIR_TABLE: Final[Table[Repairing]] = {
    # CREATE: missing; OWN: without its owner; READ the next (END: the last) when whole;
    # END too when it is not ours
    (READ, Found): row(Repairing._found, CREATE, OWN, READ, END),
    (READ, Raised): row(Repairing._failed, END),
    (CREATE, Made): row(Repairing._made, OWN),
    (CREATE, Raised): row(Repairing._failed, END),
    (OWN, Owned): row(Repairing._owned, READ, END),  # the next, or the last
    (OWN, Raised): row(Repairing._failed, END),
}

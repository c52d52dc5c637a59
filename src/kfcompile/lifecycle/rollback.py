"""What a failed submit leaves: everything it created is deleted again (the ``RollingBack``
machine), the job first, and what cannot be (a DELETE refused, the API server down, a second
Ctrl-C) is told, one line per object: what it is, why it stayed, whether anything will ever
delete it, and the command that removes it."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from functools import partial
from typing import Final

from attrs import evolve, frozen

from kfcompile.kinds import KINDS
from kfcompile.lifecycle.objects import annotation, get
from kfcompile.lifecycle.ports import ApiError, NotFound, Obj, Ref
from kfcompile.lifecycle.session import (
    SPEC_HASH,
    ClusterError,
    Perform,
    Session,
    Table,
    Unavailable,
    call,
    finished,
    named,
    row,
    transition,
)


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


# --- the roll-back: the ``RollingBack`` machine ------------------------------------------------


@frozen(repr=False)
class CheckUnsure:
    """Read ``obj``, whose create got no answer: it may exist."""

    obj: Obj


@frozen(repr=False)
class Delete:
    ref: Ref


@frozen(repr=False, eq=False)
class Found:
    """What reading an object found (None: nothing of that name)."""

    obj: Obj | None


@frozen(repr=False, eq=False)
class Unreadable:
    error: ApiError | ClusterError


@frozen(repr=False, eq=False)
class Removed:
    """Deleted (or already gone)."""


@frozen(repr=False, eq=False)
class NotRemoved:
    error: ApiError | ClusterError


@frozen(repr=False, eq=False)
class Interrupted:
    """A second Ctrl-C, during the read or the delete."""


@frozen(repr=False)
class RolledBack:
    """The end: what stays, one ``Left`` each (nothing: everything was removed)."""

    left: tuple[Left, ...]


class UndoPhase(enum.Enum):
    CHECK = "check"  # read the object whose create got no answer
    DELETE = "delete"  # delete the next one
    END = "end"


CHECK, DELETE, END = UndoPhase.CHECK, UndoPhase.DELETE, UndoPhase.END  # the table's words


@frozen(repr=False, eq=False)
class RollingBack:
    """Deleting what a failed submit created: ``todo`` in order (the job first), after the
    ``unsure`` one (being created when the failure came) is read and, if ours, put first.
    ``owned``: the companions whose owner was set. Once the API server is found unavailable,
    the rest is left without asking it again; a second Ctrl-C leaves what was not done."""

    todo: tuple[Obj, ...]
    digest: str
    owned: frozenset[Ref] = frozenset()
    unsure: Obj | None = None
    phase: UndoPhase = CHECK
    left: tuple[Left, ...] = ()

    @classmethod
    def start(
        cls, created: Sequence[Obj], unsure: Obj | None, digest: str, owned: frozenset[Ref]
    ) -> RollingBack:
        todo = tuple(reversed(created))
        first = CHECK if unsure is not None else DELETE if todo else END
        return cls(todo, digest, owned, unsure, first)

    def next_request(self, now: float) -> CheckUnsure | Delete | RolledBack:
        if self.phase is CHECK:
            assert self.unsure is not None
            return CheckUnsure(self.unsure)
        if self.phase is DELETE:
            return Delete(Ref.of(self.todo[0]))
        return RolledBack(self.left)

    def receive(
        self, answer: Found | Unreadable | Removed | NotRemoved | Interrupted, now: float
    ) -> RollingBack:
        return transition(UNDO_TABLE, self, self.phase, answer, now)

    def _next(self, todo: tuple[Obj, ...], *left: Left) -> RollingBack:
        more = DELETE if todo else END
        return evolve(self, phase=more, todo=todo, unsure=None, left=self.left + left)

    def _found(self, answer: Found, now: float) -> RollingBack:
        found, todo = answer.obj, self.todo
        if found is not None and annotation(found, SPEC_HASH) == self.digest:
            todo = (found, *todo)  # it was created after all: deleted first
        return self._next(todo)

    def _unreadable(self, answer: Unreadable, now: float) -> RollingBack:
        assert self.unsure is not None
        why = "may have been created (its create got no answer) and could not be read: "
        why += str(answer.error)
        after = self._next(self.todo, Left(Ref.of(self.unsure), why))
        return after._down() if isinstance(answer.error, Unavailable) else after

    def _removed(self, answer: Removed, now: float) -> RollingBack:
        return self._next(self.todo[1:])

    def _not_removed(self, answer: NotRemoved, now: float) -> RollingBack:
        error = answer.error
        why = error.line if isinstance(error, ApiError) else str(error)  # the call is named
        after = self._next(self.todo[1:], self._left(self.todo[0], f"delete failed: {why}"))
        return after._down() if isinstance(error, Unavailable) else after

    def _down(self) -> RollingBack:
        """The API server is unavailable: the rest is left without asking it again."""
        why = "not deleted: the API server was unavailable"
        return self._next((), *(self._left(obj, why) for obj in self.todo))

    def _interrupted(self, answer: Interrupted, now: float) -> RollingBack:
        left = [self._left(obj, "not deleted") for obj in self.todo]
        if left:
            left[0] = evolve(left[0], why="delete interrupted: it may still be there")
        if self.unsure is not None:
            why = "may have been created: not checked (interrupted)"
            left.insert(0, Left(Ref.of(self.unsure), why))
        return self._next((), *left)

    def _left(self, obj: Obj, why: str) -> Left:
        return Left(Ref.of(obj), why, Ref.of(obj) in self.owned)


UNDO_TABLE: Final[Table[RollingBack]] = {
    # DELETE the job first (the one read first when ours); END: nothing was created
    (CHECK, Found): row(RollingBack._found, DELETE, END),
    # END: nothing else to delete, or the API server is unavailable
    (CHECK, Unreadable): row(RollingBack._unreadable, DELETE, END),
    (CHECK, Interrupted): row(RollingBack._interrupted, END),  # the rest is left
    (DELETE, Removed): row(RollingBack._removed, DELETE, END),  # the next one
    # the next one; END: the last, or the API server is unavailable
    (DELETE, NotRemoved): row(RollingBack._not_removed, DELETE, END),
    (DELETE, Interrupted): row(RollingBack._interrupted, END),  # the rest is left
}


def roll_back(
    session: Session,
    created: Sequence[Obj],
    unsure: Obj | None,
    digest: str,
    owned: frozenset[Ref],
) -> list[Left]:
    """Delete what a failed submit created (the ``RollingBack`` machine), the job first; what
    stays is returned, never hidden. ``unsure`` was being created when the failure came:
    deleted if it is ours."""

    def check(request: CheckUnsure) -> Found | Unreadable | Interrupted:
        try:
            return Found(get(session, Ref.of(request.obj)))
        except (ApiError, ClusterError) as exc:
            return Unreadable(exc)
        except KeyboardInterrupt:
            return Interrupted()

    def delete(request: Delete) -> Removed | NotRemoved | Interrupted:
        ref = request.ref
        try:
            call(session, named("delete", ref), partial(session.cluster.delete, ref, "Background"))
        except NotFound:
            pass
        except (ApiError, ClusterError) as exc:
            return NotRemoved(exc)
        except KeyboardInterrupt:
            return Interrupted()
        return Removed()

    machine = RollingBack.start(created, unsure, digest, owned)
    perform: Perform = {CheckUnsure: check, Delete: delete}
    end = finished(machine, session.clock, perform, lambda _: Interrupted())
    assert isinstance(end, RolledBack), end
    return list(end.left)

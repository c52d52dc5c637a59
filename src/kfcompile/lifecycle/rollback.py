"""What a failed submit leaves: everything it created is deleted again (``roll_back``), the
job first, and what cannot be (a DELETE refused, the API server down, a second Ctrl-C) is told,
one line per object: what it is, why it stayed, whether anything will ever delete it, and the
command that removes it."""

from __future__ import annotations

import contextlib
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
    Session,
    Unavailable,
    call,
    named,
)


@frozen
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

"""What a failed submit leaves: everything it created is deleted again, the job first, and what
cannot be (a DELETE refused, the API server down, a second Ctrl-C) is told, one line per object:
what it is, why it stayed, whether anything will ever delete it, and the command that removes
it."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from attrs import frozen

from kfcompile.kinds import KINDS
from kfcompile.lifecycle.objects import annotation, get
from kfcompile.lifecycle.ports import ApiError, NotFound, Obj, Ref
from kfcompile.lifecycle.session import SPEC_HASH, ClusterError, Session, Unavailable, call, named


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


def roll_back(
    session: Session, created: Sequence[Obj], unsure: Obj | None, digest: str, owned: set[Ref]
) -> list[Left]:
    """Delete what a failed submit created, the job first; what stays is returned, never
    hidden. ``unsure`` was being created when the failure came: deleted if it is ours. Once the
    API server is found unavailable, the rest is reported without waiting for it again."""
    todo = list(reversed(created))
    left: list[Left] = []
    down: Unavailable | None = None
    try:
        if unsure is not None:
            try:
                found = get(session, Ref.of(unsure))
            except (ApiError, ClusterError) as exc:
                down = exc if isinstance(exc, Unavailable) else down
                why = (
                    f"may have been created (its create got no answer) and could not be read: {exc}"
                )
                left.append(Left(Ref.of(unsure), why))
            else:
                if found is not None and annotation(found, SPEC_HASH) == digest:
                    todo.insert(0, found)
            unsure = None
        while todo:
            ref = Ref.of(todo[0])
            if down is not None:
                why = "not deleted: the API server was unavailable"
                left.append(Left(ref, why, ref in owned))
                todo.pop(0)
                continue
            try:
                delete = partial(session.cluster.delete, ref, "Background")
                call(session, named("delete", ref), delete)
            except NotFound:
                pass
            except (ApiError, ClusterError) as exc:
                down = exc if isinstance(exc, Unavailable) else None
                why = exc.line if isinstance(exc, ApiError) else str(exc)  # the call is named
                left.append(Left(ref, f"delete failed: {why}", ref in owned))
            todo.pop(0)
    except KeyboardInterrupt:  # a second Ctrl-C: say what was not deleted yet
        if unsure is not None:
            left.append(Left(Ref.of(unsure), "may have been created: not checked (interrupted)"))
        for i, obj in enumerate(todo):
            why = "delete interrupted: it may still be there" if i == 0 else "not deleted"
            left.append(Left(Ref.of(obj), why, Ref.of(obj) in owned))
    return left

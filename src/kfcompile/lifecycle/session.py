"""What every lifecycle call needs: the ``Session`` (the ports, the one ``Backoff``), the errors
a command ends with, and the retry machine that rides out transient trouble.

The loops of this package are machines in the manner of h11: a frozen value is told what the
API answered (``receive``) and says what to ask next (``next_request``); it never calls a port.
A table of (phase, answer) names each transition, and an answer with no row is a bug
(``Unexpected``). Each row names the one phase it leads to; where that depends on what the
answer showed, the row's cases say when it leads elsewhere, each a named condition beside the
table (as h11 keeps its few transitions no event makes). A row's method takes the answer in and
never sets the phase. One ``drive`` runs every machine: a table of how each kind of request is
performed against the ports says what the API answered. Every pause of every loop is a
``Pause``, turned into seconds by the session's one ``Backoff`` and its jitter.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from typing import Any, Final, Generic, Protocol, Self, TypeVar, cast

from attrs import evolve, field, frozen

from kfcompile.lifecycle.ports import ApiError, Clock, Cluster, Gone, Merge, Ref, Transient

T = TypeVar("T")
M = TypeVar("M", bound="Phased")
D = TypeVar("D", bound="Machine")

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
"""The label on every object kfcompile creates; its value is ``MANAGER``."""
MANAGER: Final = "kfcompile"
"""The value of ``MANAGED_BY_LABEL``: ``list`` and ``watch_jobs`` select jobs by it."""
SPEC_HASH: Final = "kfcompile.dev/spec-hash"
"""The annotation holding the hash of the spec a job was made from: the same spec submitted
again creates nothing, and a job of another spec under the name is never touched."""
TARGET_ANNOTATION: Final = "kfcompile.dev/target"
"""The annotation naming the target a job was rendered for (``trainjob/v2.3``)."""
LIST_PAGE: Final = 500
LIST_RESTARTS: Final = 3  # times a paginated list starts over after its continue token expired

# The one backoff of every retry and poll: doubling from BACKOFF_START, capped at BACKOFF_CAP,
# with half of each delay drawn at random ("equal jitter") so many clients do not retry in step.
BACKOFF_START: Final = 0.1
BACKOFF_CAP: Final = 5.0

# --- errors -------------------------------------------------------------------------------------


class ClusterError(Exception):
    """A lifecycle step could not be done; ``str()`` is one or more lines for the user."""


class PreflightFailed(ClusterError):
    """What the job needs is missing on the cluster (its CRD, runtime, namespace, Kueue queue,
    work-dir claim): ``problems``, one line each. Nothing was created."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = tuple(problems)


class NameTaken(ClusterError):
    """A different object already holds the name: kfcompile never replaces it."""


class JobNotFound(ClusterError):
    """No job of that name (of either kind, unless one was asked for) in the namespace."""


class JobDeleted(ClusterError):
    """The job went away while we watched it: someone else deleted it."""


class Unavailable(ClusterError):
    """The API server kept failing with transient errors longer than we retry."""


class Unreachable(Unavailable):
    """The API server has never answered this session, and the first try got no answer
    (refused, unknown host, TLS, no answer in time): nothing is retried, as kubectl does."""


class Unexpected(AssertionError):
    """A machine was fed an answer its table has no row for (a bug in its driver)."""


class Phased(Protocol):
    """A machine whose state has a phase: what its table's rows are keyed by."""

    @property
    def phase(self) -> enum.Enum: ...


@frozen(repr=False)
class Case(Generic[M]):
    """Where a row leads instead of its own phase: to ``to`` when ``holds`` of the machine after
    the row (``name`` says when, as the diagrams do: ``PODS --> END: PodsListed if reached``)."""

    name: str
    holds: Callable[[M], bool]
    to: enum.Enum


def when(name: str, holds: Callable[[M], bool], to: enum.Enum) -> Case[M]:
    return Case(name, holds, to)


@frozen(repr=False)
class Row(Generic[M]):
    """One transition: the method that takes the answer in, and the one phase it leads to, unless
    one of its ``cases`` holds (the first that does). A method never sets the phase: the rows
    and their cases are the machine's whole state diagram (ARCHITECTURE.md draws them)."""

    method: Callable[[M, Any, float], M]
    to: enum.Enum
    cases: tuple[Case[M], ...] = ()


def row(method: Callable[[M, Any, float], M], to: enum.Enum, *cases: Case[M]) -> Row[M]:
    return Row(method, to, cases)


# A machine's transitions: (phase, type of answer) -> the row that takes it on.
Table = Mapping[tuple[enum.Enum, type[Any]], Row[M]]


def transition(table: Table[M], machine: M, answer: object, now: float) -> M:
    """The machine after ``answer``, by its row in ``table``, in the phase the row (or the first
    of its cases that holds) leads to; an answer with no row is a bug."""
    row = table.get((machine.phase, type(answer)))
    if row is None:
        raise Unexpected(
            f"{type(machine).__name__} in {machine.phase.name} got {type(answer).__name__}"
        )
    after = row.method(machine, answer, now)
    to = next((case.to for case in row.cases if case.holds(after)), row.to)
    return cast(M, evolve(cast(Any, after), phase=to))  # every machine: frozen, with ``phase``


# --- the one driver ------------------------------------------------------------------------------


class Machine(Protocol):
    """A loop as a value: what to ask next, and itself after the answer (never a port call)."""

    def next_request(self, now: float) -> object: ...

    def receive(self, answer: Any, now: float) -> Self: ...


# How each kind of request is performed against the ports: request type -> its answer.
Perform = Mapping[type[Any], Callable[[Any], object]]


def close(stream: object) -> None:
    """End a stream the driver stops reading (a generator's ``close``; nothing for others)."""
    closer = getattr(stream, "close", None)
    if callable(closer):
        closer()


class Opened:
    """The one stream (a watch, a log) a driver has open for its machine."""

    def __init__(self) -> None:
        self.stream: Iterator[Any] | None = None

    def start(self, stream: Iterator[T]) -> Iterator[T]:
        self.stream = stream
        return stream

    def current(self) -> Iterator[Any]:
        assert self.stream is not None, "a stream read before it was opened"
        return self.stream

    def close(self) -> None:
        close(self.stream)
        self.stream = None


def _never(machine: object) -> bool:
    return False


def drive(
    machine: D,
    clock: Clock,
    perform: Perform,
    opened: Opened | None = None,
    streaming: Callable[[D], bool] = _never,
) -> Generator[tuple[D, Any], None, tuple[D, Any]]:
    """Run ``machine``: each request it makes is performed by its row in ``perform`` and the
    answer fed back; yields (the machine after it, the answer). A request with no row ends the
    drive: returns (the machine, that request). ``opened`` (the stream ``perform`` reads) is
    closed once the machine is no longer ``streaming`` it, and when the drive ends."""
    try:
        while True:
            request = machine.next_request(clock.monotonic())
            if opened is not None and not streaming(machine):
                opened.close()  # the machine has done with it
            how = perform.get(type(request))
            if how is None:
                return machine, request
            answer = how(request)
            machine = machine.receive(answer, clock.monotonic())
            yield machine, answer
    finally:
        if opened is not None:
            opened.close()


def told(
    steps: Generator[tuple[D, Any], None, tuple[D, Any]],
    each: Callable[[D, Any], Iterable[T] | None],
) -> Generator[T, None, tuple[D, Any]]:
    """A drive's steps, each told to ``each`` (the machine, the answer), yielding what it gives;
    returns what the drive returns. Closing it ends the drive."""
    with closing(steps):
        while True:
            try:
                machine, answer = next(steps)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            yield from each(machine, answer) or ()


def ended(steps: Generator[object, None, T]) -> T:
    """What a generator returns, run to its end (the steps of a drive no one reads)."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


# --- the one backoff, and what every machine asks when it must wait -----------------------------


@frozen(repr=False)
class Pause:
    """Wait before going on: the ``attempt``-th pause in a row (0-based), never longer than
    ``at_most`` seconds (what is left of a timeout or of the retry window), nor shorter than
    ``at_least`` (what the server asked for with ``Retry-After``) unless ``at_most`` is."""

    attempt: int
    at_most: float = math.inf
    at_least: float = 0.0


@frozen(repr=False)
class Slept:
    """The answer to a ``Pause``."""


@frozen(repr=False)
class Backoff:
    """Delays doubling from ``start`` to ``cap``, half of each drawn at random."""

    start: float = BACKOFF_START
    cap: float = BACKOFF_CAP

    def delay(self, attempt: int, jitter: float) -> float:
        """Seconds before retry number ``attempt`` (0-based); ``jitter`` is uniform in [0, 1)."""
        full = min(self.cap, self.start * 2.0 ** min(attempt, 64))
        return full / 2 + full / 2 * jitter

    def seconds(self, pause: Pause, jitter: float) -> float:
        wanted = max(pause.at_least, self.delay(pause.attempt, jitter))
        return max(0.0, min(pause.at_most, wanted))


class Contact:
    """Whether the API server has answered anything yet in a session (any HTTP status counts:
    a 404 or a 503 is an answer). Before it has, a failure that got no answer at all is not
    transient trouble of a server that works, but a server that is not there."""

    def __init__(self) -> None:
        self.answered = False

    def heard(self, error: ApiError | None = None) -> None:
        """A call returned (``error`` None) or failed with ``error``."""
        if error is None or not (isinstance(error, Transient) and error.status == 0):
            self.answered = True


@frozen
class Session:
    """What every lifecycle call needs: the ports, and how long to ride out API trouble."""

    cluster: Cluster
    clock: Clock
    # Uniform in [0, 1) (``random.random``, as ``kfcompile_kube.session`` passes): what spreads
    # the retries of many clients. No default: a fixed one (a test's) is a choice, never silent.
    jitter: Callable[[], float]
    retry_for: float = 60.0
    # Told (what, error) once when a call first fails with transient trouble and will be
    # retried, and when a watch keeps expiring (a ``Gone``) and is listed again with backoff.
    on_retry: Callable[[str, ApiError], None] | None = None
    backoff: Backoff = Backoff()  # every retry and every poll
    # How the followed logs of several ranks are read at once; None: the cluster's own when it
    # has one (KubeCluster, with threads), else one line of each in turn (logs.InTurn).
    merge: Merge | None = None
    # Whether the API has answered yet: shared by the copies ``evolve`` makes of the session.
    contact: Contact = field(factory=Contact, eq=False, repr=False)


def retrying(session: Session, what: str, error: ApiError) -> None:
    """Tell the session's ``on_retry`` (if any) that ``what`` is being retried after ``error``."""
    if session.on_retry is not None:
        session.on_retry(what, error)


def named(verb: str, ref: Ref) -> str:
    """A call on one object as messages name it: ``create Secret team-a/x-env``."""
    where = f"{ref.namespace}/" if ref.namespace else ""
    return f"{verb} {ref.kind} {where}{ref.name}"


def listing(kind: str, namespace: str | None, verb: str = "list") -> str:
    """A call on a collection as messages name it: ``list Pod in team-a``."""
    return f"{verb} {kind} in {namespace or 'all namespaces'}"


def pause(session: Session, request: Pause) -> Slept:
    session.clock.sleep(session.backoff.seconds(request, session.jitter()))
    return Slept()


# --- the retry machine --------------------------------------------------------------------------


@frozen(repr=False)
class Attempt:
    """Make the call (again)."""


@frozen(repr=False)
class GiveUp:
    """Transient trouble lasted ``waited`` seconds, longer than the session rides out; or
    (``unanswered``) the API has never answered and this first failure got no answer."""

    waited: float
    error: Transient
    unanswered: bool = False


@frozen(repr=False)
class Failed:
    """The call failed with transient trouble; ``first_contact``: the API has never answered
    anything in this session yet."""

    error: Transient
    first_contact: bool = False


@frozen(repr=False)
class Returned:
    """The call returned ``value``: the answer to an ``Attempt``, and what the retry ends with."""

    value: Any


class Step(enum.Enum):
    ATTEMPT = "attempt"  # the call is to be made
    PAUSE = "pause"  # it failed: pause, or give up
    DONE = "done"  # it returned


@frozen(repr=False)
class Retry:
    """One call riding out transient trouble for up to ``retry_for`` seconds (from its first
    failure): fed each failure, it says how long to pause or that it is time to give up.

    A ``Retry-After`` from the server (429, 503) is the pause's lower bound, within what is left
    of the window. Before the API has ever answered, a failure with no answer at all (refused,
    unknown host, TLS, no answer in time) gives up at once: nothing is there to ride out."""

    retry_for: float
    phase: Step = Step.ATTEMPT
    since: float | None = None  # when the trouble began
    pauses: int = 0  # pauses so far
    error: Transient | None = None  # the last failure
    unanswered: bool = False  # the API never answered, nor this call
    returned: Returned | None = None  # what the call returned, once it has

    def next_request(self, now: float) -> Attempt | Pause | GiveUp | Returned:
        if self.phase is Step.ATTEMPT:
            return Attempt()
        if self.returned is not None:
            return self.returned
        assert self.since is not None and self.error is not None
        waited = now - self.since
        if self.unanswered or waited >= self.retry_for:
            return GiveUp(waited, self.error, self.unanswered)
        left = self.retry_for - waited
        asked = self.error.retry_after or 0.0
        return Pause(self.pauses, at_most=left, at_least=min(left, max(0.0, asked)))

    def receive(self, answer: Failed | Slept | Returned, now: float) -> Retry:
        return transition(RETRY_TABLE, self, answer, now)

    def _failed(self, answer: Failed, now: float) -> Retry:
        since = now if self.since is None else self.since
        unanswered = answer.first_contact and answer.error.status == 0
        return evolve(self, since=since, error=answer.error, unanswered=unanswered)

    def _slept(self, answer: Slept, now: float) -> Retry:
        return evolve(self, pauses=self.pauses + 1)

    def _returned(self, answer: Returned, now: float) -> Retry:
        return evolve(self, returned=answer)


RETRY_TABLE: Final[Table[Retry]] = {
    (Step.ATTEMPT, Failed): row(Retry._failed, Step.PAUSE),  # pause, or give up (retry_for)
    (Step.ATTEMPT, Returned): row(Retry._returned, Step.DONE),
    (Step.PAUSE, Slept): row(Retry._slept, Step.ATTEMPT),  # again
}


def unavailable(what: str, give_up: GiveUp) -> Unavailable:
    if give_up.unanswered:
        return Unreachable(f"{what}: cannot reach the API server: {give_up.error.message}")
    return Unavailable(
        f"{what}: the API server kept failing for {give_up.waited:.0f}s ({give_up.error})"
    )


def call(session: Session, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, retried while it fails with ``Transient`` for up to ``session.retry_for`` s
    (not at all before the API has ever answered, when nothing answers). Any other
    ``ApiError`` passes through named: ``what`` (``create Secret team-a/x-env``) is the call."""
    contact = session.contact
    failures: list[Transient] = []

    def attempt(_: Attempt) -> Failed | Returned:
        first_contact = not contact.answered
        try:
            value = fn()
        except Transient as exc:
            contact.heard(exc)
            failures.append(exc)
            return Failed(exc, first_contact)
        except ApiError as exc:
            contact.heard(exc)
            exc.named(what)
            raise
        contact.heard()
        return Returned(value)

    def paused(request: Pause) -> Slept:
        if request.attempt == 0:  # the first pause of this call: tell it is retried
            retrying(session, what, failures[-1])
        return pause(session, request)

    perform: Perform = {Attempt: attempt, Pause: paused}
    _, end = ended(drive(Retry(session.retry_for), session.clock, perform))
    if isinstance(end, GiveUp):
        raise unavailable(what, end) from None
    assert isinstance(end, Returned), end
    return cast(T, end.value)


@contextmanager
def ending_named(what: str) -> Iterator[None]:
    """A stream's errors that end it (not the trouble and the expiry its machine rides out)
    named as ``call`` names them: ``what`` is the stream (``watch TrainJob team-a/demo``)."""
    try:
        yield
    except ApiError as exc:
        if not isinstance(exc, (Transient, Gone)):
            exc.named(what)
        raise

"""What the job lifecycle needs from the outside world, as small Protocols (ports).

The core (``kfcompile.lifecycle``) is written against these only; ``adapters/kfcompile_kube``
implements them with the official ``kubernetes`` client, tests implement them against a local
API server, and a launcher may pass its own. Objects cross the port as plain dicts, exactly as
the API server speaks them (camelCase, ``metadata.resourceVersion``), never as client models.

Errors cross the port as the ``ApiError`` family below, so the core can tell a missing object
(``NotFound``), a taken name (``Conflict``), a stale watch (``Gone``) and a rejected object
(``Invalid``) from trouble worth retrying (``Transient``): HTTP 429 and 5xx, refused or reset
connections, timeouts.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol, TypeAlias, TypeVar, runtime_checkable

from attrs import frozen

from kfcompile.terminal import printable

Obj = dict[str, Any]
K = TypeVar("K")
T = TypeVar("T")


@frozen
class Ref:
    """One object in the cluster: ``namespace`` is ``None`` for cluster-scoped kinds."""

    api_version: str
    kind: str
    namespace: str | None
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ref:
        meta = obj.get("metadata") or {}
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])

    def __str__(self) -> str:
        where = f" in namespace {self.namespace}" if self.namespace else ""
        return f"{self.kind} {self.name}{where}"


class ApiError(Exception):
    """The API server (or the way to it) refused a request. Never carries credentials.

    ``str()`` is the status line, after the call that failed once the lifecycle has named it
    (``create Secret team-a/x-env: 403 Forbidden: ...``), the server's words escaped
    (``terminal.printable``): an error is printed, by kfcompile or a launcher."""

    def __init__(
        self, status: int, reason: str, message: str, *, retry_after: float | None = None
    ) -> None:
        super().__init__(status, reason, message)
        self.status = status  # HTTP status; 0 when no response arrived
        self.reason = reason  # the Status object's reason, e.g. "AlreadyExists"
        self.message = message
        # Seconds the server asked us to wait before trying again (429/503 ``Retry-After``).
        self.retry_after = retry_after
        self.call = ""  # the call that failed, e.g. "create Secret team-a/x-env"

    @property
    def line(self) -> str:
        """The status line alone: ``403 Forbidden: <the server's message>``."""
        status = f"{self.status} " if self.status else ""
        return printable(f"{status}{self.reason}: {self.message}")

    def named(self, call: str) -> None:
        """Say which call failed; the first name given stays (the innermost call's)."""
        if not self.call:
            self.call = call

    def __str__(self) -> str:
        return printable(f"{self.call}: {self.line}") if self.call else self.line


class NotFound(ApiError):
    """404: the object (or its kind) does not exist."""


class Conflict(ApiError):
    """409: the name is taken (``AlreadyExists``) or the object changed underneath."""


class Gone(ApiError):
    """410: a watch or list asked for a resourceVersion the server no longer keeps."""


class Invalid(ApiError):
    """400/422: the server rejected the object (e.g. strict field validation)."""


class Forbidden(ApiError):
    """401/403: the credentials may not do this."""


class Transient(ApiError):
    """Worth retrying: 429, 5xx, a refused/reset/dropped connection or a timeout."""


# The port's error for each HTTP status (``error_class``); any other 5xx is Transient.
ERRORS_BY_STATUS: Final[Mapping[int, type[ApiError]]] = {
    400: Invalid,
    401: Forbidden,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: Transient,
}


def error_class(status: int) -> type[ApiError]:
    """Which ``ApiError`` an answer with HTTP ``status`` is, for every port alike."""
    return ERRORS_BY_STATUS.get(status, Transient if status >= 500 else ApiError)


@frozen(repr=False, eq=False)
class Page:
    """One page of a list: its items, the list's resourceVersion, the continue token, and how
    many items the server says are left after this page (``metadata.remainingItemCount``; it
    says so only for lists without selectors)."""

    items: list[Obj]
    resource_version: str
    continue_token: str | None = None
    remaining: int | None = None


@frozen(repr=False, eq=False)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: Obj


@frozen(repr=False, eq=False)
class ExecResult:
    """How a command ended: its output (``b""`` when it went to a ``stdout`` consumer), the end
    of its stderr (the adapter keeps the last 64 KiB), and its exit code."""

    stdout: bytes
    stderr: bytes
    exit_code: int


# A command's output as it arrives, in chunks; the generator returns how the command ended.
ExecOutput: TypeAlias = Generator[bytes, None, ExecResult]


class Cluster(Protocol):
    """The Kubernetes API, reduced to what the lifecycle uses."""

    def served(self, api_version: str, kind: str) -> bool:
        """Whether discovery lists ``kind`` in ``api_version`` (i.e. its CRD is installed)."""
        ...

    def get(self, ref: Ref) -> Obj:
        """The object; ``NotFound`` when it is not there."""
        ...

    def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        """Create with ``fieldValidation=Strict``; ``Conflict`` when the name is taken.

        ``dry_run``: ``dryRun=All``, the whole create (decoding, defaults, schema, CEL rules,
        admission webhooks, the name check) without storing anything; the answer is the object
        as it would have been stored."""
        ...

    def patch(self, ref: Ref, patch: Obj) -> Obj:
        """Apply a JSON merge patch (RFC 7386)."""
        ...

    def delete(self, ref: Ref, propagation: str = "Foreground", *, uid: str | None = None) -> None:
        """Delete with this propagation policy; ``NotFound`` when it is not there. ``uid``: only
        the object with that uid (a precondition: ``Conflict`` when the name is another's now)."""
        ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 500,
        continue_token: str | None = None,
    ) -> Page:
        """One page of objects (all namespaces when ``namespace`` is ``None``)."""
        ...

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = 60,
    ) -> Iterator[WatchEvent]:
        """Events after ``resource_version``; ends when the server closes the stream.

        Raises ``Gone`` (possibly mid-stream) when that version is too old.
        """
        ...

    def pod_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None = None,
        follow: bool = False,
        since_seconds: int | None = None,
        tail_lines: int | None = None,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """The container's log, line by line (without newlines); follows while it runs.

        With ``timestamps`` each line starts with its RFC 3339 time and a space."""
        ...

    def exec(
        self,
        namespace: str,
        pod: str,
        container: str,
        command: Sequence[str],
        stdin: bytes | Iterable[bytes] = b"",
        *,
        stdout: Callable[[ExecOutput], object] | None = None,
    ) -> ExecResult:
        """Run ``command`` in the container through the exec stream; memory stays flat.

        ``stdin``: bytes, or chunks drawn only as they are sent (e.g. read from disk as they
        go), then closed; what the iterable raises passes through unchanged. Without ``stdout``
        the output is collected into ``ExecResult.stdout``. With it, ``stdout`` is called once
        with the output as an ``ExecOutput`` that yields chunks as they arrive and returns the
        ``ExecResult`` when the command has ended; what it leaves unread is read and dropped,
        and what it raises closes the stream and passes through.
        """
        ...


class Clock(Protocol):
    """Time, as a port: tests drive it, so nothing in the core reads the real clock."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


@runtime_checkable
class Merge(Protocol):
    """Several blocking streams read at once (the followed logs of many ranks). A port, so the
    threads this takes live in an adapter, never in the core. ``KubeCluster`` is one (its
    streams block and it can cut them); ``kfcompile.lifecycle.pod_logs.InTurn`` reads streams that
    do not block, such as an in-memory cluster's, one item of each in turn."""

    def merge(
        self, streams: Mapping[K, Callable[[Clock], Iterator[T]]], clock: Clock
    ) -> Generator[tuple[K, T], None, None]:
        """The items of every stream as they arrive, each with its key, until all have ended.

        Each stream is started with a clock to sleep on (``clock`` itself, or one a stop cuts
        short), and read on its own, so one that blocks holds back no other. What a stream
        raises is raised here once the others have stopped. Closing the generator stops every
        stream (a blocked read is cut, a sleep ends) and returns when they have stopped.
        """
        ...


@frozen(repr=False, eq=False)
class Packed:
    """What a tar stream holds: regular files (hard links included) and their bytes."""

    files: int
    size: int  # bytes of file content


class LocalFiles(Protocol):
    """The submitting machine's files, for work-dir sync, as tar streams in chunks that flow to
    and from disk (memory stays flat whatever the size). Both methods raise ``OSError`` or
    ``ValueError`` (e.g. an unsafe member) with a one-line message for the user."""

    def pack(self, directory: str) -> Generator[bytes, None, Packed]:
        """A tar stream of everything under ``directory`` (paths relative to it), read from
        disk as the chunks are drawn; the generator returns what it held. Raises at once when
        ``directory`` is not a directory."""
        ...

    def unpack(self, chunks: Iterable[bytes] | bytes, directory: str) -> Packed:
        """Extract a tar stream into ``directory`` (created if missing), all or nothing: the
        chunks are read to their end before anything lands in ``directory``, and on any error
        (an unsafe member, a limit, or an exception raised by ``chunks`` itself) nothing has
        changed there. Returns what was written."""
        ...

"""Reading and creating objects through the session: every call named and retried by
``session.call``, lists read page by page (the ``Lister`` machine), creates that recognise our
own object behind a 409, and the small readers of object metadata the machines share."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

from attrs import evolve, frozen

from kfcompile.kinds import KINDS, Kind
from kfcompile.lifecycle.ports import ApiError, Gone, NotFound, Obj, Page, Ref
from kfcompile.lifecycle.session import (
    LIST_PAGE,
    LIST_RESTARTS,
    SPEC_HASH,
    ClusterError,
    NameTaken,
    Session,
    Table,
    call,
    drive,
    ended,
    listing,
    named,
    row,
    transition,
    when,
)


def served(session: Session, api_version: str, kind: str) -> bool:
    """Whether the cluster serves ``kind`` in ``api_version`` (its CRD is installed)."""
    discover = partial(session.cluster.served, api_version, kind)
    return call(session, f"discover {kind} in {api_version}", discover)


def get(session: Session, ref: Ref) -> Obj | None:
    try:
        return call(session, named("read", ref), lambda: session.cluster.get(ref))
    except NotFound:
        return None


@frozen(repr=False, eq=False)
class Paging:
    """The pages of one list so far: the continue tokens handed out, and how many pages can
    be left by the server's own count (``remainingItemCount``; each page brings one item at
    least)."""

    seen: frozenset[str] = frozenset()
    pages_left: int | None = None  # at most

    def after(self, page: Page) -> Paging | str:
        """The pages so far with ``page``; or, when the server would page for ever (a token
        handed out again, more pages than the items it said were left), what is wrong."""
        token = page.continue_token
        if not token:
            return self
        if token in self.seen:
            return "the server gave the same continue token twice"
        left = self.pages_left
        if left is not None:
            left -= 1  # this page was one of them
        if page.remaining is not None:
            left = page.remaining if left is None else min(left, page.remaining)
        if left is not None and left < 1:
            return "more pages than the items the server said were left (remainingItemCount)"
        return Paging(self.seen | {token}, left)


# --- every page of a list: the ``Lister`` machine -----------------------------------------------


@frozen(repr=False)
class ListPage:
    """Ask for a page: the first (no token), or the one after ``continue_token``."""

    continue_token: str | None


@frozen(repr=False, eq=False)
class PageRead:
    page: Page


@frozen(repr=False, eq=False)
class TokenExpired:
    """The server has forgotten the continue token (410 Gone)."""

    error: Gone


@frozen(repr=False)
class AllRead:
    """The last page was read: every item of every page, and the list's resourceVersion (its
    first page's: every page is of that one snapshot)."""

    items: tuple[Obj, ...]
    version: str = ""


@frozen(repr=False)
class Endless:
    """The server would page for ever: ``problem`` says how."""

    problem: str


@frozen(repr=False)
class Forgotten:
    """A 410 on the first page (nothing to start over from), or once the list was started over
    ``LIST_RESTARTS`` times: the end, with it."""

    error: Gone


class ListPhase(enum.Enum):
    PAGE = "page"
    END = "end"


PAGE, END = ListPhase.PAGE, ListPhase.END  # the table's words


@frozen(repr=False, eq=False)
class Lister:
    """One list, page by page: a continue token the server has forgotten (410) starts it over,
    as the API asks, ``LIST_RESTARTS`` times at most; one that pages for ever ends it."""

    phase: ListPhase = PAGE
    token: str | None = None  # the next page's
    items: tuple[Obj, ...] = ()
    version: str = ""  # the first page's resourceVersion
    paging: Paging = Paging()
    restarts: int = 0
    end: AllRead | Endless | Forgotten | None = None

    def next_request(self, now: float) -> ListPage | AllRead | Endless | Forgotten:
        return ListPage(self.token) if self.end is None else self.end

    def receive(self, answer: PageRead | TokenExpired, now: float) -> Lister:
        return transition(LIST_TABLE, self, answer, now)

    def _read(self, answer: PageRead, now: float) -> Lister:
        page = answer.page
        items = self.items + tuple(page.items)
        version = self.version if self.token else page.resource_version
        if not page.continue_token:
            return evolve(self, end=AllRead(items, version))
        paging = self.paging.after(page)
        if isinstance(paging, str):
            return evolve(self, end=Endless(paging))
        return evolve(self, token=page.continue_token, items=items, version=version, paging=paging)

    def _expired(self, answer: TokenExpired, now: float) -> Lister:
        if self.token is None or self.restarts >= LIST_RESTARTS:
            return evolve(self, end=Forgotten(answer.error))
        return Lister(restarts=self.restarts + 1)


def _ended(lister: Lister) -> bool:
    return lister.end is not None


LIST_TABLE: Final[Table[Lister]] = {
    (PAGE, PageRead): row(Lister._read, PAGE, when("the last, or endless", _ended, END)),
    # PAGE: over again, from its first page
    (PAGE, TokenExpired): row(Lister._expired, PAGE, when("the first, or too often", _ended, END)),
}


def list_all(
    session: Session, api_version: str, kind: str, namespace: str | None, **selectors: str
) -> list[Obj]:
    """Every page of a list (the ``Lister``): one request per LIST_PAGE objects, never one per
    object."""
    return list_at(session, api_version, kind, namespace, **selectors)[0]


def list_at(
    session: Session, api_version: str, kind: str, namespace: str | None, **selectors: str
) -> tuple[list[Obj], str]:
    """``list_all``, and the list's resourceVersion: a watch from it misses no change after."""
    what = listing(kind, namespace)

    def page(request: ListPage) -> PageRead | TokenExpired:
        page_of = partial(
            session.cluster.list,
            api_version,
            kind,
            namespace,
            limit=LIST_PAGE,
            continue_token=request.continue_token,
            **selectors,
        )
        try:
            return PageRead(call(session, what, page_of))
        except Gone as exc:
            return TokenExpired(exc)

    _, end = ended(drive(Lister(), session.clock, {ListPage: page}))
    if isinstance(end, Forgotten):
        raise end.error
    if isinstance(end, Endless):
        raise ClusterError(f"{what}: {end.problem}")
    assert isinstance(end, AllRead), end
    return list(end.items), end.version


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def annotation(obj: Mapping[str, Any], key: str) -> str | None:
    value = (meta(obj).get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def job_kind(ref: Ref) -> Kind:
    return KINDS[ref.kind]


def create(session: Session, obj: Obj, digest: str, *, dry_run: bool = False) -> Obj:
    """Create ``obj``; a name already holding our own spec hash counts as created (a retried
    create whose first answer was lost). Anything else holding the name is ``NameTaken``.
    ``dry_run``: the server checks it all and stores nothing."""
    ref = Ref.of(obj)
    # Only a dry run passes the option: a Cluster written before it existed still works.
    send = partial(session.cluster.create, obj, **({"dry_run": True} if dry_run else {}))
    try:
        return call(session, named("create", ref), send)
    except ApiError as exc:
        if exc.status != 409:
            raise
    existing = get(session, ref)
    if existing is not None and annotation(existing, SPEC_HASH) == digest:
        return existing
    raise NameTaken(
        f"{ref} already exists and is not this job: rename the job; kfcompile never "
        "replaces an object it did not create for this spec"
    )

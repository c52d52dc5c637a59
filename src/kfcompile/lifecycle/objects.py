"""Reading and creating objects through the session: every call named and retried by
``session.call``, lists read page by page, creates that recognise our own object behind a
409, and the small readers of object metadata the machines share."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from kfcompile.kinds import KINDS, Kind
from kfcompile.lifecycle.ports import ApiError, Gone, NotFound, Obj, Page, Ref
from kfcompile.lifecycle.session import (
    LIST_PAGE,
    LIST_RESTARTS,
    SPEC_HASH,
    ClusterError,
    NameTaken,
    Session,
    call,
    listing,
    named,
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


class Paging:
    """The pages of one list so far, as its driver reads them: a server that hands out a
    continue token again, or more pages than the items it said were left
    (``remainingItemCount``; each page brings one at least), would page for ever: an error
    naming the list (``what``)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._seen: set[str] = set()
        self._pages_left: int | None = None  # at most, by the server's own count

    def next_token(self, page: Page) -> str | None:
        """The token to ask the next page with; None when ``page`` was the last."""
        token = page.continue_token
        if not token:
            return None
        if token in self._seen:
            raise ClusterError(f"{self.what}: the server gave the same continue token twice")
        self._seen.add(token)
        left = self._pages_left
        if left is not None:
            left -= 1  # this page was one of them
        if page.remaining is not None:
            left = page.remaining if left is None else min(left, page.remaining)
        if left is not None and left < 1:
            raise ClusterError(
                f"{self.what}: more pages than the items the server said were left "
                "(remainingItemCount)"
            )
        self._pages_left = left
        return token


def list_all(
    session: Session, api_version: str, kind: str, namespace: str | None, **selectors: str
) -> list[Obj]:
    """Every page of a list: one request per LIST_PAGE objects, never one per object.

    A continue token the server has forgotten (410) starts the list over, as the API asks; one
    that pages for ever is an error (``Paging``)."""
    what = listing(kind, namespace)
    items: list[Obj] = []
    token: str | None = None
    restarts = 0
    paging = Paging(what)
    while True:
        page_of = partial(
            session.cluster.list,
            api_version,
            kind,
            namespace,
            limit=LIST_PAGE,
            continue_token=token,
            **selectors,
        )
        try:
            page = call(session, what, page_of)
        except Gone:
            if token is None or restarts >= LIST_RESTARTS:
                raise
            items, token, restarts, paging = [], None, restarts + 1, Paging(what)
            continue
        items.extend(page.items)
        token = paging.next_token(page)
        if token is None:
            return items


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

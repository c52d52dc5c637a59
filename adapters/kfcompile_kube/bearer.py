"""A user's bearer token, taken and kept as kubectl does (client-go's
``transport/token_source.go`` and exec authenticator): a kubeconfig's ``token`` as written; a
``tokenFile`` (and the in-cluster service account's token file) trimmed of the whitespace
around it (so ``echo "$TOKEN" > file`` works) and read again once it is a minute old (kubelet
rotates projected service-account tokens hourly); an ``exec`` plugin's run again before its
token expires. After a 401 the token is fetched anew, and the request sent once more if that
gave another (``renewed``): a token rotated under a long ``wait`` or ``logs --follow`` does not
end it. A failed fetch keeps the token in hand until it expires, as client-go's
``cachingTokenSource`` does.

A token holding a character no HTTP header can carry (a line break, a control character) is
refused in one line that names where it came from and never the token: sent, it would end in
http.client's ``Invalid header value b'Bearer <the whole token>'``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from attrs import frozen

from kfcompile_kube import compat

TOKEN_FILE_LIMIT: Final = 64 * 1024  # bytes read of a token file (a JWT is 1-2 KiB)
FILE_TOKEN_PERIOD: Final = timedelta(minutes=1)  # client-go fileTokenSource's period


def utc_now() -> datetime:
    return datetime.now(UTC)


class TokenError(Exception):
    """Why there is no token to send, in one line that never quotes it."""


def checked(token: str, where: str) -> str:
    """``token``, or ``TokenError`` (naming ``where`` it came from) when it is empty or holds a
    character outside printable ASCII (tokens are JWTs or base64/hex strings)."""
    if not token:
        raise TokenError(f"{where}: empty")
    for at, char in enumerate(token, 1):
        if not (char.isascii() and char.isprintable()):
            what = (
                "a line break"
                if char in "\r\n"
                else "a control character"
                if char.isascii()
                else "a character that is not ASCII"
            )
            raise TokenError(
                f"{where}: holds {what} (character {at} of {len(token)}; the token is not "
                "printed), which no HTTP header can carry"
            )
    return token


def file_token(path: Path, where: str) -> str:
    """The token in the file at ``path``, without the whitespace around it."""
    try:
        with path.open("rb") as f:
            data = f.read(TOKEN_FILE_LIMIT + 1)
    except OSError as e:
        raise TokenError(f"{where} {path}: {e.strerror or e}") from None
    if len(data) > TOKEN_FILE_LIMIT:
        raise TokenError(f"{where} {path}: over {TOKEN_FILE_LIMIT // 1024} KiB, not a token")
    return checked(data.decode("utf-8", "replace").strip(), f"{where} {path}")


@frozen(repr=False, eq=False)
class Fetched:
    """A token, when to fetch it again (None: never) and when it expires (None: not known)."""

    token: str
    refresh_at: datetime | None = None
    expires_at: datetime | None = None


def file_source(path: Path, where: str, now: Callable[[], datetime]) -> Callable[[], Fetched]:
    """A token file's token, good for ``FILE_TOKEN_PERIOD``."""
    return lambda: Fetched(file_token(path, where), now() + FILE_TOKEN_PERIOD)


class Bearer:
    """The client's ``refresh_api_key_hook`` (the API client calls it before every request;
    threads share it): puts the token in the configuration, fetched again by ``fetch`` (None:
    never) from its ``refresh_at`` on and after a 401 (``unauthorized``). A fetch that fails
    raises ``on_error`` of its line once the token in hand has expired."""

    def __init__(
        self,
        first: Fetched,
        fetch: Callable[[], Fetched] | None,
        on_error: Callable[[str], Exception],
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.current = first
        self.fetch = fetch
        self.on_error = on_error
        self.now = now
        self._lock = threading.Lock()

    def __call__(self, configuration: Any) -> None:
        if self._due():
            with self._lock:
                if self._due():  # not just done by another thread
                    self._refetch()
        compat.put_token(configuration, self.header)

    @property
    def header(self) -> str:
        return f"Bearer {self.current.token}"

    def unauthorized(self, sent: str) -> bool:
        """A request whose Authorization header was ``sent`` was answered 401: fetch the token
        anew (unless that is done already); whether requests now carry another."""
        with self._lock:
            if self.fetch is not None and sent == self.header:
                try:
                    self.current = self.fetch()
                except TokenError:
                    return False  # the 401 stands
            return sent != self.header

    def _due(self) -> bool:
        at = self.current.refresh_at
        return self.fetch is not None and at is not None and self.now() >= at

    def _refetch(self) -> None:
        assert self.fetch is not None
        try:
            self.current = self.fetch()
        except TokenError as e:
            expires = self.current.expires_at
            if expires is not None and self.now() >= expires:
                raise self.on_error(str(e)) from None
            # Kept, and fetched again at the next request.


def renewed(configuration: Any, sent: Mapping[str, str]) -> bool:
    """After a 401 to a request with the headers ``sent``: whether the configuration's token
    was fetched anew since (then the request is worth sending once more)."""
    hook = compat.token_hook(configuration)
    return isinstance(hook, Bearer) and hook.unauthorized(sent.get("authorization", ""))

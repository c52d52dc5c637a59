"""A user's bearer token, taken as kubectl takes it (client-go's ``transport/token_source.go``):
a kubeconfig's ``token`` as written; a ``tokenFile`` (and the in-cluster service account's
token file) trimmed of the whitespace around it, so ``echo "$TOKEN" > file`` works.

A token holding a character no HTTP header can carry (a line break, a control character) is
refused in one line that names where it came from and never the token: sent, it would end in
http.client's ``Invalid header value b'Bearer <the whole token>'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

TOKEN_FILE_LIMIT: Final = 64 * 1024  # bytes read of a token file (a JWT is 1-2 KiB)


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

"""Where an extraction lands before it moves into place, and whether its links stay inside."""

from __future__ import annotations

import collections
import os
import secrets
import stat

from kfcompile_local.tarlimits import (
    LINK_HOPS,
    STAGING,
    Refused,
)


class _Node:
    __slots__ = ("children", "target")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.target: str | None = None


class _LinkTree:
    """The tree's symlinks by path, to resolve a target as the kernel would."""

    def __init__(self, links: dict[tuple[str, ...], str]) -> None:
        self._top = _Node()
        for path, target in links.items():
            node = self._top
            for part in path:
                node = node.children.setdefault(part, _Node())
            node.target = target

    def stays_inside(self, where: tuple[str, ...], target: str, budget: list[int]) -> bool:
        """Whether ``target``, a link in directory ``where``, resolves inside the tree when
        the links on the way are followed and ``..`` goes up from where they led. Names that
        are not links count as directories (the worst case). More than LINK_HOPS links, or
        more steps than ``budget[0]`` holds (shared by all calls), count as leaving."""
        stack: list[_Node | None] = [self._top]
        for part in where:
            stack.append(self._child(stack[-1], part))
        pending = collections.deque(target.split("/"))
        hops = 0
        while pending:
            budget[0] -= 1
            if budget[0] <= 0:
                return False
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) == 1:
                    return False
                stack.pop()
                continue
            node = self._child(stack[-1], part)
            if node is None or node.target is None:
                stack.append(node)
                continue
            hops += 1
            if hops > LINK_HOPS or node.target.startswith("/"):
                return False
            pending.extendleft(reversed(node.target.split("/")))
        return True

    @staticmethod
    def _child(node: _Node | None, name: str) -> _Node | None:
        return None if node is None else node.children.get(name)


# --- unpack: into place -------------------------------------------------------------------------


def _nearest_dir(path: str) -> str:
    parent = os.path.dirname(path)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    return parent


def _staging_dir(where: str) -> str:
    """A fresh directory in ``where`` (so it moves into place with a rename), named at random."""
    while True:
        path = os.path.join(where, STAGING + secrets.token_hex(8))
        try:
            os.mkdir(path, 0o777)  # the umask applies, as to any directory the user makes
            return path
        except FileExistsError:
            continue


def _merge(staging: str, dest: str, *, check: bool) -> None:
    """Move what ``staging`` holds into the existing ``dest``: a new name moves whole, a file
    replaces a file or symlink, a directory merges into a directory. With ``check`` nothing
    moves, but each other meeting (a directory over a file or a symlink, a file over a
    directory) is refused first, so that the moves cannot stop half way on a conflict."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(staging, rel)) as entries:
            names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        for name, is_dir in sorted(names):
            path = os.path.join(rel, name)
            there = os.path.join(dest, path)
            try:
                mode = os.lstat(there).st_mode
            except FileNotFoundError:
                mode = None
            if mode is not None and is_dir and stat.S_ISDIR(mode):
                stack.append(path)
            elif check:
                if mode is not None and (is_dir or stat.S_ISDIR(mode)):
                    kind = (
                        "symlink"
                        if stat.S_ISLNK(mode)
                        else "directory"
                        if stat.S_ISDIR(mode)
                        else "file"
                    )
                    mine = "a directory" if is_dir else "a file"
                    raise Refused(path, f"{dest} has a {kind} there, the stream {mine}")
            else:
                os.replace(os.path.join(staging, path), there)

"""Errors the core raises: each carries every problem found, one line each, with its field path."""

from __future__ import annotations

from collections.abc import Iterable

from attrs import field, frozen

from kfcompile.spec.fieldpath import FieldPath, field_path


@frozen
class Problem:
    """One thing wrong with a spec, at a field path such as ``volumes[1].name``.

    ``Problem("volumes[1].name", message)`` and ``Problem(FieldPath.of("volumes", 1, "name"),
    message)`` are the same problem: ``at`` is the path as a value, ``path`` its text.
    """

    at: FieldPath = field(converter=field_path)
    message: str

    @property
    def path(self) -> str:
        return str(self.at)

    def __str__(self) -> str:
        path = self.path
        return f"{path}: {self.message}" if path else self.message


class KfcompileError(Exception):
    """Base class: a list of problems; ``str()`` is one line per problem."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        # One line per problem: a problem two rules find (a key the schema and a rule both
        # require) is told once.
        self.problems: tuple[Problem, ...] = tuple(dict.fromkeys(problems))
        super().__init__("\n".join(str(p) for p in self.problems))


class SpecError(KfcompileError):
    """The spec is malformed: wrong types, unknown keys, or values Kubernetes would reject."""


class UnsupportedFeature(KfcompileError):
    """The spec uses something the chosen target cannot express."""

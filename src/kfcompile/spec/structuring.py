"""Slotted data <-> spec classes: the one cattrs converter, and the check every spec class runs.

A spec class is checked the same way whether it comes from YAML or is built in Python: when an
instance is made, each field's value is structured by its type (the converter's hooks: strings
are strings, a YAML number is never silently turned into one; nested parts may be given as
mappings; maps and lists become immutable), then checked by the rule beside the field, and
every problem is raised together as one ``SpecError`` whose problems carry field paths.

One pass finds every problem that does not depend on another: a field of the wrong type (or
missing) is left unset on the object being checked, and each rule between fields runs on its
own, skipped only when it reads such a field.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_unstructure_fn

from kfcompile.spec.errors import Problem, SpecError
from kfcompile.spec.fieldpath import FieldPath, field_path
from kfcompile.spec.frozen import FrozenList, FrozenMap, freeze, plain, thaw

converter = cattrs.Converter(detailed_validation=True)


def kind_of(value: Any) -> str:
    """What a value is, in the words of an error message."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    names = {bool: "a boolean", int: "an integer", float: "a decimal number"}
    return names.get(type(value), type(value).__name__)


# --- hooks: each refuses what a YAML reader would otherwise coerce, and keeps the plain value of
# a str or int subclass (a str Enum in a spec built in Python: what YAML can write) -------------


def _str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return str(plain(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        # `0123`, `0x1F` and `1_000` are YAML integers: their text is gone (123, 31, 1000).
        raise TypeError(f"must be a string, got {kind_of(value)} (quote it)")
    raise TypeError(f"must be a string, got {kind_of(value)}")


def _int(value: Any, _: type) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return int(plain(value))
    raise TypeError(f"must be an integer, got {kind_of(value)}")


def _bool(value: Any, _: type) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"must be true or false, got {kind_of(value)}")


def _is_literal(t: Any) -> bool:
    return typing.get_origin(t) is Literal


def _literal(value: Any, t: Any) -> Any:
    choices = typing.get_args(t)
    if value not in choices or isinstance(value, bool) != isinstance(choices[0], bool):
        raise ValueError(f"must be one of: {', '.join(map(str, choices))}")
    return plain(value)


def _nprocs(value: Any, _: Any) -> int | Literal["auto"] | None:
    if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool)):
        return typing.cast("int | Literal['auto'] | None", plain(value))
    raise ValueError("must be an integer or 'auto'")


def _object(value: Any, _: Any) -> FrozenMap[str, Any]:
    """A Kubernetes object kept in its own shape (affinity, a volume): frozen at every depth."""
    if not isinstance(value, Mapping):
        raise TypeError(f"must be a mapping, got {kind_of(value)}")
    return typing.cast(FrozenMap[str, Any], freeze(value))


def _list_of(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A list field: a bare string or mapping is refused (cattrs would iterate it)."""

    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise TypeError(f"must be a list, got {kind_of(value)}")
        return hook(value, t)

    return structure


def _map_of(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"must be a mapping, got {kind_of(value)}")
        return FrozenMap(hook(value, t))

    return structure


def _exactly(t: Any, hook: Callable[[Any, Any], Any]) -> None:
    """A hook for one generic type (functools dispatch only takes plain classes)."""
    converter.register_structure_hook_func(lambda other: other == t, hook)


converter.register_structure_hook(str, _str)
converter.register_structure_hook(int, _int)
converter.register_structure_hook(bool, _bool)
converter.register_structure_hook_func(_is_literal, _literal)
_exactly(int | Literal["auto"] | None, _nprocs)
_exactly(Mapping[str, Any], _object)
for _t in (tuple[str, ...], tuple[Mapping[str, Any], ...]):
    _exactly(_t, _list_of(converter.get_structure_hook(_t)))
_exactly(Mapping[str, str], _map_of(converter.get_structure_hook(Mapping[str, str])))


# --- spec classes -----------------------------------------------------------------------------


@functools.cache
def _fields(cls: Any) -> tuple[tuple[attrs.Attribute[Any], Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((a, hints[a.name]) for a in attrs.fields(cls))


def _structure_field(a: attrs.Attribute[Any], t: Any, value: Any) -> Any:
    load = a.metadata.get("load")  # e.g. quantities, which may be YAML numbers
    return load(value) if load is not None else converter.structure(value, t)


class BadValues(SpecError):
    """Every field had the right type, but some values break their rules. Carries the object
    as built, so the rules between the fields of an enclosing spec can still run."""

    def __init__(self, problems: Iterable[Problem], built: Any) -> None:
        super().__init__(problems)
        self.built = built


def check_fields(cls: type, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """Each given field of ``cls`` structured by its type and checked by its rule.

    Returns the structured values of the fields whose type was right, and every problem.
    """
    done: dict[str, Any] = {}
    problems: list[Problem] = []
    for a, t in _fields(cls):
        if a.name not in values:
            continue
        try:
            value = _structure_field(a, t, values[a.name])
        except BadValues as exc:  # a nested part with the right shape but bad values
            problems += problems_of(exc, a.name)
            done[a.name] = exc.built
            continue
        except SPEC_FAILURES as exc:  # cattrs groups every structuring failure; flatten them
            problems += problems_of(exc, a.name)
            continue
        done[a.name] = value
        rule = a.metadata.get("rule")
        if rule is not None and value is not None:
            problems += [Problem(a.name + sub, message) for sub, message in rule(value)]
    return done, problems


BetweenRule = Callable[[Any], Iterable[tuple[str, str]]]


def _unset(obj: Any, exc: AttributeError) -> bool:
    """Whether ``exc`` is a rule reading a field of ``obj`` that is left unset (wrong type or
    missing): what that rule would say depends on a problem already reported."""
    cls: Any = type(obj)
    names = {a.name for a, _ in _fields(cls)}
    return exc.obj is obj and exc.name in names and not hasattr(obj, exc.name)


def between(obj: Any, rules: Iterable[BetweenRule]) -> list[Problem]:
    """The problems each rule between fields finds, each rule on its own; a rule that reads a
    field left unset is skipped (its answer depends on that field's problem)."""
    found: list[Problem] = []
    for rule in rules:
        try:
            found += [Problem(path, message) for path, message in rule(obj)]
        except AttributeError as exc:
            if not _unset(obj, exc):
                raise
    return found


def validate(obj: Any, rules: Iterable[BetweenRule] = ()) -> None:
    """Check a spec object just built (its ``__attrs_post_init__``): structure and check every
    field in place, then run the ``rules`` between fields, those that read a field of the wrong
    type (left unset here) skipped."""
    cls: Any = type(obj)
    values = {a.name: getattr(obj, a.name) for a, _ in _fields(cls) if hasattr(obj, a.name)}
    done, problems = check_fields(cls, values)
    for name, value in values.items():
        if name not in done:
            object.__delattr__(obj, name)  # a rule reading it is skipped (``between``)
        elif done[name] is not value:
            object.__setattr__(obj, name, done[name])  # frozen classes: only while being built
    complete = len(done) == len(_fields(cls))
    problems += between(obj, rules)
    if problems:
        raise BadValues(problems, obj) if complete else SpecError(problems)


def _defaults(cls: type, given: Mapping[str, Any]) -> Any:
    """An instance of ``cls`` with the ``given`` fields and the defaults of the others, a field
    without default (required, not given) left unset; checked as ``cls(**given)`` would be."""
    obj: Any = object.__new__(cls)
    for a, _ in _fields(cls):
        default: Any = a.default
        if a.name in given:
            value = given[a.name]
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            value = default.factory()
        elif default is not attrs.NOTHING:
            value = default
        else:
            continue
        object.__setattr__(obj, a.name, value)
    obj.__attrs_post_init__()
    return obj


def from_mapping(cls: type, value: Any) -> Any:
    """A spec class from plain data, or the instance itself; every problem at once."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"must be a mapping, got {kind_of(value)}")
    names = [a.name for a, _ in _fields(cls)]
    problems = []
    for key in sorted(map(str, set(value) - set(names))):  # YAML keys may be numbers or null
        import difflib  # only for the hint of an unknown key

        close = difflib.get_close_matches(key, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(Problem(FieldPath.of(key), f"unknown field{hint}"))
    given = {k: v for k, v in value.items() if k in names}
    missing = [
        a.name for a, _ in _fields(cls) if a.default is attrs.NOTHING and a.name not in value
    ]
    problems += [Problem(name, "required") for name in missing]
    try:
        # Without a required field it cannot be built: checked all the same, so one run
        # reports every problem that does not depend on the missing field.
        obj = _defaults(cls, given) if missing else cls(**given)
    except BadValues as exc:
        if not problems:
            raise
        raise SpecError([*problems, *exc.problems]) from None
    except SpecError as exc:
        raise SpecError([*problems, *exc.problems]) from None
    if problems:
        raise SpecError(problems)
    return obj


def _unstructure_class(cls: type) -> Any:
    # Defaults are left out, so a dumped spec reads like one a person wrote.
    return make_dict_unstructure_fn(cls, converter, _cattrs_omit_if_default=True)


converter.register_structure_hook_factory(
    attrs.has, lambda cls: lambda value, _: from_mapping(cls, value)
)
converter.register_unstructure_hook_factory(attrs.has, _unstructure_class)
converter.register_unstructure_hook(FrozenMap, thaw)
converter.register_unstructure_hook(FrozenList, thaw)


# --- errors -----------------------------------------------------------------------------------


def _note_path(at: FieldPath, exc: BaseException) -> FieldPath:
    for note in getattr(exc, "__notes__", []):
        if isinstance(note, AttributeValidationNote):
            return at / note.name
        if isinstance(note, IterableValidationNote):
            index = note.index
            return at / (index if isinstance(index, int) else str(index))
    return at


# What a malformed spec makes cattrs and the hooks raise (the groups, and their leaves: a key
# missing, a value of the wrong type or out of range). Anything else is a bug, never a problem
# of the spec: it is raised as it is.
_LEAVES: Final = (SpecError, KeyError, ValueError, TypeError)
SPEC_FAILURES: Final = (ClassValidationError, IterableValidationError, *_LEAVES)


def problems_of(exc: BaseException, path: str | FieldPath) -> list[Problem]:
    """A structuring failure as one problem per leaf, each with its field path."""
    at = field_path(path)
    if isinstance(exc, ClassValidationError | IterableValidationError):
        return [p for sub in exc.exceptions for p in problems_of(sub, _note_path(at, sub))]
    if isinstance(exc, SpecError):
        return [Problem(at.join(p.at), p.message) for p in exc.problems]
    if isinstance(exc, KeyError):
        return [Problem(at, "required")]
    if isinstance(exc, _LEAVES):
        return [Problem(at, str(exc))]
    raise exc

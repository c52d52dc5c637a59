"""YAML text <-> JobSpec: a safe ruamel.yaml loader and the one cattrs converter that owns it.

Loading happens in two passes, like a compiler: cattrs checks shapes and types (all at once,
with paths), then ``JobSpec`` checks values and the rules between fields (all at once). Either
pass raises ``SpecError`` with one ``Problem`` per line.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from kfcompile import paths, yamlio
from kfcompile.errors import Problem, SpecError
from kfcompile.spec import JobSpec, field_problems

converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)


def _is_literal(t: Any) -> bool:
    return typing.get_origin(t) is Literal


def _structure_literal(value: Any, t: Any) -> Any:
    choices = typing.get_args(t)
    if value not in choices or isinstance(value, bool) != isinstance(choices[0], bool):
        raise ValueError(f"must be one of: {', '.join(map(str, choices))}")
    return value


def _structure_str(value: Any, _: type) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # unambiguous: `replicas: 8`-style numbers users leave unquoted
    raise TypeError(f"must be a string, got {_kind(value)} (quote it)")


def _structure_int(value: Any, _: type) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"must be an integer, got {_kind(value)}")


def _structure_bool(value: Any, _: type) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"must be true or false, got {_kind(value)}")


def _structure_nprocs(value: Any, _: Any) -> int | Literal["auto"] | None:
    if value is None or value == "auto" or (isinstance(value, int) and not isinstance(value, bool)):
        return typing.cast("int | Literal['auto'] | None", value)
    raise ValueError("must be an integer or 'auto'")


def _structure_any_mapping(value: Any, _: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"must be a mapping, got {_kind(value)}")
    return dict(value)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", type(None): "nothing (null)"}.get(
        type(value), type(value).__name__
    )


converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(bool, _structure_bool)
converter.register_structure_hook_func(_is_literal, _structure_literal)


def _exactly(t: Any, hook: Any) -> None:
    """Register a hook for one generic type (functools dispatch only takes plain classes)."""
    converter.register_structure_hook_func(lambda other: other == t, hook)


_exactly(int | Literal["auto"] | None, _structure_nprocs)
_exactly(Mapping[str, Any], _structure_any_mapping)


def _list_check(hook: Any) -> Any:
    """Refuse a bare string or mapping where a list belongs (cattrs would iterate it)."""

    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise TypeError(f"must be a list, got {_kind(value)}")
        return hook(value, t)

    return structure


def _map_check(hook: Any) -> Any:
    def structure(value: Any, t: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"must be a mapping, got {_kind(value)}")
        return hook(value, t)

    return structure


def _register_containers() -> None:
    for t in (tuple[str, ...], tuple[Mapping[str, Any], ...]):
        _exactly(t, _list_check(converter.get_structure_hook(t)))
    _exactly(Mapping[str, str], _map_check(converter.get_structure_hook(Mapping[str, str])))


_register_containers()


def _register_classes() -> None:
    """Hooks for the spec classes: unknown keys refused, ``load`` metadata honoured, a
    mapping required; dumping omits defaults, so a dumped spec reads like one a person wrote.

    Nested classes first: a class's generated hook captures the hooks of its fields' classes.
    """
    # Made on first use: rendering never dumps a spec, so `kfcompile render` skips the cost.
    converter.register_unstructure_hook_factory(
        attrs.has,
        lambda cls: make_dict_unstructure_fn(cls, converter, _cattrs_omit_if_default=True),
    )
    for cls in reversed(_spec_classes(JobSpec)):
        loaders: dict[str, Any] = {
            a.name: override(struct_hook=_loader(a.metadata["load"]))
            for a in attrs.fields(cls)
            if "load" in a.metadata
        }
        structure_fn: Any = make_dict_structure_fn(
            cls, converter, _cattrs_forbid_extra_keys=True, **loaders
        )
        converter.register_structure_hook(cls, _map_check(structure_fn))


def _loader(load: Any) -> Any:
    return lambda value, _: load(value)


def _spec_classes(cls: type) -> list[type]:
    found = [cls]
    for t_field in typing.get_type_hints(cls).values():
        for t in (t_field, *typing.get_args(t_field)):
            if isinstance(t, type) and attrs.has(t) and t not in found:
                found.extend(c for c in _spec_classes(t) if c not in found)
    return found


# --- errors -----------------------------------------------------------------------------------


def _join(path: str, note: object) -> str:
    if isinstance(note, AttributeValidationNote):
        return f"{path}.{note.name}" if path else note.name
    if isinstance(note, IterableValidationNote):
        index = note.index
        return f"{path}[{index}]" if isinstance(index, int) else f"{path}[{index!r}]"
    return path


def _problems(exc: BaseException, path: str) -> list[Problem]:
    """Flatten a cattrs error tree into one problem per leaf, each with its field path."""
    if isinstance(exc, ClassValidationError | IterableValidationError):
        out: list[Problem] = []
        for sub in exc.exceptions:
            notes = getattr(sub, "__notes__", [])
            note = next(
                (
                    n
                    for n in notes
                    if isinstance(n, AttributeValidationNote | IterableValidationNote)
                ),
                None,
            )
            out.extend(_problems(sub, _join(path, note)))
        return out
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [a.name for a in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        out = []
        for key in sorted(map(str, exc.extra_fields)):  # YAML keys may be numbers or null
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out.append(Problem(f"{path}{paths.key(key)}".lstrip("."), f"unknown field{hint}"))
        return out
    if isinstance(exc, KeyError):
        return [Problem(path, "required")]
    if isinstance(exc, SpecError):
        return [
            Problem(f"{path}.{p.path}" if path and p.path else path or p.path, p.message)
            for p in exc.problems
        ]
    return [Problem(path, str(exc))]


# --- public API -------------------------------------------------------------------------------


def structure(data: Any) -> JobSpec:
    """Build a JobSpec from plain data (as parsed from YAML or JSON)."""
    if not isinstance(data, Mapping):
        raise SpecError([Problem("", f"a job spec must be a mapping, got {_kind(data)}")])
    try:
        return converter.structure(data, JobSpec)
    except SpecError:
        raise
    except Exception as exc:  # cattrs groups every structuring failure; flatten them
        problems = _problems(exc, "")
    # Shapes are wrong somewhere; still check the values of every field that did load, so one
    # run reports all it can (rules between fields need the whole spec and wait for the fix).
    broken = {re.split(r"[.\[]", p.path, maxsplit=1)[0] for p in problems}
    hints = typing.get_type_hints(JobSpec)
    for a in attrs.fields(JobSpec):
        if a.name in data and a.name not in broken:
            load = a.metadata.get("load")
            try:
                value = (
                    load(data[a.name]) if load else converter.structure(data[a.name], hints[a.name])
                )
            except Exception:
                continue
            problems.extend(field_problems(a, value))
    raise SpecError(problems)


def unstructure(spec: JobSpec) -> dict[str, Any]:
    return typing.cast(dict[str, Any], converter.unstructure(spec))


def load_spec(text: str) -> JobSpec:
    """YAML text -> JobSpec, or SpecError listing every problem."""
    return structure(yamlio.parse(text))


def dump_spec(spec: JobSpec) -> str:
    """JobSpec -> YAML text that ``load_spec`` reads back to an equal spec."""
    return yamlio.dump(unstructure(spec))


_register_classes()

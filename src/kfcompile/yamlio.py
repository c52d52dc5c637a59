"""YAML in and out: safe loading only, deterministic dumping that kubectl reads back unchanged."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.representer import SafeRepresenter

from kfcompile.errors import Problem, SpecError


def _loader() -> YAML:
    yaml = YAML(typ="safe")  # never constructs arbitrary Python objects
    yaml.allow_duplicate_keys = False
    return yaml


# Plain scalars that YAML 1.1 readers (kubectl, PyYAML) would not read back as strings: booleans
# such as `yes`/`off`, null, numbers (octal, hex, sexagesimal, underscores), dates, `<<`, `=`.
_YAML11_NOT_STR = re.compile(
    r"""(?x)^(?:
        y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
      | ~|null|Null|NULL|<<|=
      | [-+]?\.?[0-9][0-9a-fA-FxXoObB_.:eE+-]*
      | [-+]?\.(?:inf|Inf|INF|nan|NaN|NAN)
    )$"""
)


# Text plain, single-quoted and block styles carry unchanged: no control characters but tab and
# newline, and no Unicode line separators.
_BLOCK_SAFE = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]*")


def _str(representer: SafeRepresenter, data: str) -> Any:
    if not _BLOCK_SAFE.fullmatch(data):
        style: str | None = '"'  # the only style that escapes control characters
    elif "\n" in data:
        style = "|"  # inline scripts read like the file they are
    elif _YAML11_NOT_STR.match(data):
        style = "'"
    else:
        style = None
    return representer.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _dumper() -> YAML:
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.width = 4096  # never fold long command lines
    yaml.representer.add_representer(str, _str)
    yaml.representer.sort_base_mapping_type_on_output = False  # keep apiVersion, kind, ... order
    yaml.representer.ignore_aliases = lambda data: True
    return yaml


def _error(exc: Exception) -> SpecError:
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        return SpecError([Problem(where, _one_line(exc.problem or exc.context or "invalid YAML"))])
    return SpecError([Problem("", f"invalid YAML: {_one_line(exc)}")])


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def parse(text: str) -> Any:
    """One YAML document; syntax errors become one problem naming line and column."""
    try:
        return _loader().load(text)
    except (YAMLError, ValueError, RecursionError) as exc:
        raise _error(exc) from None


def load_all(text: str) -> list[Any]:
    try:
        return list(_loader().load_all(text))
    except (YAMLError, ValueError, RecursionError) as exc:
        raise _error(exc) from None


def dump(data: Any) -> str:
    out = io.StringIO()
    _dumper().dump(data, out)
    return out.getvalue()


def dump_all(documents: Iterable[Any]) -> str:
    out = io.StringIO()
    _dumper().dump_all(documents, out)
    return out.getvalue()

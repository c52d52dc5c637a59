"""YAML in and out: safe loading only, deterministic dumping that kubectl reads back unchanged.

Loading is bounded in size, nesting and aliases, checked on the parser's event stream before any
node or Python object is built (see ``_bounded``).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from ruamel.yaml.representer import SafeRepresenter

from kfcompile.spec.errors import Problem, SpecError


def _loader() -> YAML:
    yaml = YAML(typ="safe")  # never constructs arbitrary Python objects
    yaml.allow_duplicate_keys = False
    return yaml


# Slotted scalars that YAML 1.1 readers (kubectl, PyYAML) would not read back as strings: booleans
# such as `yes`/`off`, null, numbers (octal, hex, sexagesimal, underscores), dates, `<<`, `=`.
# Sets, not patterns: compiling the patterns cost a render 4 M instructions.
_YAML11_WORDS = frozenset(
    {
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "true",
        "True",
        "TRUE",
        "false",
        "False",
        "FALSE",
        "on",
        "On",
        "ON",
        "off",
        "Off",
        "OFF",
        "~",
        "null",
        "Null",
        "NULL",
        "<<",
        "=",
    }
)
_YAML11_INF_NAN = frozenset({".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"})
_NUMBER_CHARS = frozenset("0123456789abcdefABCDEFxXoObB_.:eE+-")


def _yaml11_not_str(data: str) -> bool:
    """A YAML 1.1 word, or a number: ``[-+]?\\.?[0-9][0-9a-fA-FxXoObB_.:eE+-]*`` or
    ``[-+]?\\.(inf|nan)`` (in its three spellings)."""
    if data in _YAML11_WORDS:
        return True
    body = data[1:] if data[:1] in ("-", "+") else data
    if body in _YAML11_INF_NAN:
        return True
    number = body[1:] if body[:1] == "." else body
    return "0" <= number[:1] <= "9" and _NUMBER_CHARS.issuperset(number)


# Text plain, single-quoted and block styles carry unchanged: no control characters but tab and
# newline, and no Unicode line separators.
_NOT_BLOCK_SAFE = frozenset(
    chr(c) for c in (*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0xFEFF)
)


def _str(representer: SafeRepresenter, data: str) -> Any:
    if not _NOT_BLOCK_SAFE.isdisjoint(data):
        style: str | None = '"'  # the only style that escapes control characters
    elif "\n" in data:
        style = "|"  # inline scripts read like the file they are
    elif _yaml11_not_str(data):
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


# What one YAML text may make us build. Real inputs stay far below: the Kubeflow CRD files are
# under 1 MB, nest at most 47 deep and use no aliases; specs and `kubectl get -o yaml` dumps nest
# less. Everything after loading recurses per level (copying, merging, dumping: about 3 frames a
# level under Python's 1,000), hence the depth; kubernetes' own YAML reader (go-yaml) likewise
# refuses documents whose aliases expand past some 400,000 nodes ("excessive aliasing").
MAX_CHARS = 32 * 1024 * 1024
MAX_DEPTH = 100
MAX_ALIASES = 10_000
MAX_ALIAS_NODES = 100_000  # nodes that aliases add, counting each as a copy of what it names


def _where(mark: Any) -> str:  # the C and the Python parser have their own Mark classes
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"


def _error(exc: Exception) -> SpecError:
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        return SpecError(
            [Problem(_where(mark), _one_line(exc.problem or exc.context or "invalid YAML"))]
        )
    return SpecError([Problem("", f"invalid YAML: {_one_line(exc)}")])


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _bounded(text: str) -> None:
    """Refuse a text past the limits before anything is built from it.

    Walks the parser's events (libyaml keeps its own stack, so nothing recurses here, and a
    30,000-deep text stops at level 101 instead of overflowing the C composer) and counts nodes
    as if every alias were expanded, so a 600-byte alias bomb stops after its first few
    thousand nodes instead of growing to gigabytes downstream.
    """
    if len(text) > MAX_CHARS:
        raise SpecError(
            [Problem("", f"{len(text):,} characters of YAML: more than the {MAX_CHARS:,} accepted")]
        )
    sizes: dict[str, int | None] = {}  # anchor -> nodes it expands to; None while still open
    open_: list[tuple[str | None, int]] = []  # (anchor, nodes so far) of each open collection
    nodes = aliases = added = 0  # nodes of the closed part of the innermost open collection
    for event in _loader().parse(text):
        kind = type(event)
        if kind is ScalarEvent:
            nodes += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if len(open_) == MAX_DEPTH:
                raise _refused(event.start_mark, f"nested more than {MAX_DEPTH} levels deep")
            open_.append((event.anchor, nodes))
            nodes = 1
            if event.anchor is not None:
                sizes[event.anchor] = None
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            anchor, outer = open_.pop()
            if anchor is not None:
                sizes[anchor] = nodes
            nodes += outer
        elif kind is AliasEvent:
            size = sizes.get(event.anchor, 1)  # an undefined alias is the composer's to report
            if size is None:
                raise _refused(
                    event.start_mark,
                    f"recursive alias: *{event.anchor} is inside the node it names",
                )
            aliases += 1
            added += size - 1
            nodes += size
            if aliases > MAX_ALIASES:
                raise _refused(event.start_mark, f"more than {MAX_ALIASES:,} aliases")
            if added > MAX_ALIAS_NODES:
                raise _refused(
                    event.start_mark, f"aliases expand to more than {MAX_ALIAS_NODES:,} extra nodes"
                )
        elif kind is DocumentEndEvent:
            sizes.clear()  # anchors name nodes of their own document only


def _refused(mark: Any, message: str) -> SpecError:
    return SpecError([Problem(_where(mark), message)])


def parse(text: str) -> Any:
    """One YAML document; syntax errors become one problem naming line and column. Empty
    documents (a trailing ``---``) are ignored, as ``kubectl apply -f`` ignores them."""
    # kubectl skips empty and `null` documents: StreamVisitor.Visit in k8s.io/cli-runtime
    # pkg/resource/visitor.go ("if len(ext.Raw) == 0 || bytes.Equal(ext.Raw, []byte("null"))").
    documents = [d for d in load_all(text) if d is not None]
    if len(documents) > 1:
        raise SpecError([Problem("", f"{len(documents)} YAML documents: a spec is one")])
    return documents[0] if documents else None


def load_all(text: str) -> list[Any]:
    try:
        _bounded(text)
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

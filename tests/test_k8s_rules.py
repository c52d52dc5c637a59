"""Tests for kfcompile.spec.k8s_rules: Kubernetes' name, label and quantity grammar."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kfcompile.spec.k8s_rules import (
    compare_quantities,
    dns1035_label,
    dns1123_label,
    dns1123_subdomain,
    env_var_name,
    is_extended_resource,
    is_overcommit_allowed,
    label_value,
    parse_quantity,
    qualified_name,
    quantity,
    resource_name,
    resource_quantity,
)

# Kubernetes' own messages, verbatim (RegexError really does write "',  or '").
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
TOO_MANY_SLASHES_MSG = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
    "subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
ENV_VAR_MSG = (
    "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
    "or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or "
    "'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
)
MAX63 = "must be no more than 63 characters"
MAX253 = "must be no more than 253 characters"

Validator = Callable[[str], list[str]]
VALIDATORS: list[Validator] = [
    dns1123_label,
    dns1123_subdomain,
    dns1035_label,
    qualified_name,
    label_value,
    env_var_name,
    resource_name,
    quantity,
    resource_quantity,
]


# --- DNS-1123 labels ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["a", "0", "my-name", "123-abc", "a--b", "a" * 63, "a" + "-" * 61 + "b", "9" * 63],
)
def test_dns1123_label_valid(value: str) -> None:
    assert dns1123_label(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", [DNS1123_LABEL_MSG]),
        ("a" * 64, [MAX63]),
        ("a" * 64 + "-", [MAX63, DNS1123_LABEL_MSG]),
        ("a.b", ["must not contain dots"]),
        ("My-name", [DNS1123_LABEL_MSG]),
        ("-a", [DNS1123_LABEL_MSG]),
        ("a-", [DNS1123_LABEL_MSG]),
        ("a_b", [DNS1123_LABEL_MSG]),
        ("a b", [DNS1123_LABEL_MSG]),
        ("a\n", [DNS1123_LABEL_MSG]),
        ("é", [DNS1123_LABEL_MSG]),
    ],
)
def test_dns1123_label_invalid(value: str, expected: list[str]) -> None:
    assert dns1123_label(value) == expected


def test_length_is_counted_in_utf8_bytes_like_go() -> None:
    # 32 two-byte characters are 64 bytes: Go's len() says too long, as well as not matching.
    assert dns1123_label("é" * 32) == [MAX63, DNS1123_LABEL_MSG]
    assert dns1123_label("é" * 31) == [DNS1123_LABEL_MSG]


# --- DNS-1123 subdomains ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "example.com",
        "my-app.default.svc.cluster.local",
        "1.2.3.4",
        "a" * 253,
        ".".join(["a"] * 127),  # 253 characters
        "x" * 63 + "." + "y" * 63,
    ],
)
def test_dns1123_subdomain_valid(value: str) -> None:
    assert len(value) <= 253
    assert dns1123_subdomain(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", [DNS1123_SUBDOMAIN_MSG]),
        ("a" * 254, [MAX253]),
        (".".join(["a"] * 127) + "b", [MAX253]),  # 254 characters
        ("a" * 254 + ".", [MAX253, DNS1123_SUBDOMAIN_MSG]),
        ("example.com.", [DNS1123_SUBDOMAIN_MSG]),
        (".example.com", [DNS1123_SUBDOMAIN_MSG]),
        ("a..b", [DNS1123_SUBDOMAIN_MSG]),
        ("Example.com", [DNS1123_SUBDOMAIN_MSG]),
        ("a-.b", [DNS1123_SUBDOMAIN_MSG]),
        ("a_b.com", [DNS1123_SUBDOMAIN_MSG]),
        ("example.com\n", [DNS1123_SUBDOMAIN_MSG]),
    ],
)
def test_dns1123_subdomain_invalid(value: str, expected: list[str]) -> None:
    assert dns1123_subdomain(value) == expected


# --- DNS-1035 labels ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["a", "my-name", "abc-123", "z" * 63, "a" + "0" * 62])
def test_dns1035_label_valid(value: str) -> None:
    assert dns1035_label(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", [DNS1035_LABEL_MSG]),
        ("123-abc", [DNS1035_LABEL_MSG]),
        ("1", [DNS1035_LABEL_MSG]),
        ("-a", [DNS1035_LABEL_MSG]),
        ("a-", [DNS1035_LABEL_MSG]),
        ("a.b", [DNS1035_LABEL_MSG]),
        ("Abc", [DNS1035_LABEL_MSG]),
        ("a" * 64, [MAX63]),
        ("1" * 64, [MAX63, DNS1035_LABEL_MSG]),
    ],
)
def test_dns1035_label_invalid(value: str, expected: list[str]) -> None:
    assert dns1035_label(value) == expected


# --- qualified names (label / annotation keys) -------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "A",
        "MyName",
        "my.name",
        "123-abc",
        "a_b",
        "app.kubernetes.io/name",
        "example.com/MyName",
        "kubeflow.org/job-name",
        "a" * 63,
        "example.com/" + "b" * 63,
        "p" * 253 + "/n",
    ],
)
def test_qualified_name_valid(value: str) -> None:
    assert qualified_name(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ["name part must be non-empty", NAME_PART_MSG]),
        ("a" * 64, ["name part " + MAX63]),
        ("example.com/" + "b" * 64, ["name part " + MAX63]),
        ("-a", [NAME_PART_MSG]),
        ("a-", [NAME_PART_MSG]),
        ("a b", [NAME_PART_MSG]),
        ("a:b", [NAME_PART_MSG]),
        ("/a", ["prefix part must be non-empty"]),
        ("a/", ["name part must be non-empty", NAME_PART_MSG]),
        ("/", ["prefix part must be non-empty", "name part must be non-empty", NAME_PART_MSG]),
        ("a/b/c", [TOO_MANY_SLASHES_MSG]),
        ("Example.com/a", ["prefix part " + DNS1123_SUBDOMAIN_MSG]),
        ("p" * 254 + "/n", ["prefix part " + MAX253]),
        ("bad_prefix/-x", ["prefix part " + DNS1123_SUBDOMAIN_MSG, NAME_PART_MSG]),
    ],
)
def test_qualified_name_invalid(value: str, expected: list[str]) -> None:
    assert qualified_name(value) == expected


# --- label values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["", "a", "MyValue", "my_value", "12345", "v1.2.3-rc_1", "x" * 63]
)
def test_label_value_valid(value: str) -> None:
    assert label_value(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x" * 64, [MAX63]),
        ("-" * 64, [MAX63, LABEL_VALUE_MSG]),
        ("-a", [LABEL_VALUE_MSG]),
        ("a.", [LABEL_VALUE_MSG]),
        ("_a", [LABEL_VALUE_MSG]),
        ("a/b", [LABEL_VALUE_MSG]),
        ("a b", [LABEL_VALUE_MSG]),
        ("true\n", [LABEL_VALUE_MSG]),
    ],
)
def test_label_value_invalid(value: str, expected: list[str]) -> None:
    assert label_value(value) == expected


# --- environment variable names ----------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["MY_VAR", "my.env-name", "MY_ENV.NAME", "MyEnvName1", "_", "-", ".a", "a..b", "PATH"],
)
def test_env_var_name_valid(value: str) -> None:
    assert env_var_name(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", [ENV_VAR_MSG]),
        ("1A", [ENV_VAR_MSG]),
        ("A=B", [ENV_VAR_MSG]),
        ("A B", [ENV_VAR_MSG]),
        ("Ä", [ENV_VAR_MSG]),
        (".", ["must not be '.'"]),
        ("..", ["must not be '..'"]),
        ("..a", ["must not start with '..'"]),
        ("..a=", [ENV_VAR_MSG, "must not start with '..'"]),
    ],
)
def test_env_var_name_invalid(value: str, expected: list[str]) -> None:
    assert env_var_name(value) == expected


# --- resource names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "cpu",
        "memory",
        "ephemeral-storage",
        "hugepages-2Mi",
        "hugepages-1Gi",
        "nvidia.com/gpu",
        "amd.com/gpu",
        "vpc.amazonaws.com/efa",
        "example.com/foo_bar",
    ],
)
def test_resource_name_valid(value: str) -> None:
    assert resource_name(value) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ["name part must be non-empty", NAME_PART_MSG]),
        ("nvidia.com/", ["name part must be non-empty", NAME_PART_MSG]),
        ("nvidia.com/gpu/0", [TOO_MANY_SLASHES_MSG]),
        ("NVIDIA.com/gpu", ["prefix part " + DNS1123_SUBDOMAIN_MSG]),
        ("nvidia.com/gpu!", [NAME_PART_MSG]),
    ],
)
def test_resource_name_invalid(value: str, expected: list[str]) -> None:
    assert resource_name(value) == expected


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("vpc.amazonaws.com/efa", True),
        ("habana.ai/gaudi", True),
        ("cpu", False),
        ("memory", False),
        ("ephemeral-storage", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/foo", False),
        ("node.kubernetes.io/foo", False),
        ("requests.example.com/foo", False),
        ("example.com/-bad", False),  # not a qualified name, so not a resource at all
        ("a/b/c", False),
    ],
)
def test_is_extended_resource(name: str, extended: bool) -> None:
    assert is_extended_resource(name) is extended


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("cpu", True),
        ("memory", True),
        ("ephemeral-storage", True),
        ("kubernetes.io/foo", True),
        ("hugepages-2Mi", False),
        ("nvidia.com/gpu", False),
        ("vpc.amazonaws.com/efa", False),
    ],
)
def test_is_overcommit_allowed(name: str, allowed: bool) -> None:
    assert is_overcommit_allowed(name) is allowed


# --- quantities ---------------------------------------------------------------------------------

VALID_QUANTITIES: list[tuple[str | int | float, Decimal]] = [
    ("64Gi", Decimal(64 * 2**30)),
    ("500m", Decimal("0.5")),
    ("1e3", Decimal(1000)),
    ("1E3", Decimal(1000)),
    ("1.5", Decimal("1.5")),
    ("0", Decimal(0)),
    ("128974848", Decimal(128974848)),
    ("129e6", Decimal(129000000)),
    ("129M", Decimal(129000000)),
    ("123Mi", Decimal(128974848)),
    (".5", Decimal("0.5")),
    ("5.", Decimal(5)),
    ("1k", Decimal(1000)),
    ("1Ki", Decimal(1024)),
    ("1.5Ki", Decimal(1536)),
    ("0.5Gi", Decimal(2**29)),
    ("1Ei", Decimal(2**60)),
    ("1E", Decimal(10**18)),  # exa, not an exponent
    ("2P", Decimal(2 * 10**15)),
    ("3T", Decimal(3 * 10**12)),
    ("100n", Decimal("0.0000001")),
    ("250u", Decimal("0.00025")),
    ("+1", Decimal(1)),
    ("-1", Decimal(-1)),
    ("-0.5Mi", Decimal(-(2**19))),
    ("1e-3", Decimal("0.001")),
    ("1e+3", Decimal(1000)),
    ("5E-3", Decimal("0.005")),
    ("007", Decimal(7)),
    ("0.000", Decimal(0)),
    (8, Decimal(8)),
    (0, Decimal(0)),
    (0.5, Decimal("0.5")),
    (1e16, Decimal(10**16)),
    (2.5e-7, Decimal("0.00000025")),
]


@pytest.mark.parametrize(("value", "expected"), VALID_QUANTITIES)
def test_parse_quantity_valid(value: str | int | float, expected: Decimal) -> None:
    assert parse_quantity(value) == expected
    assert quantity(value) == []


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("1GB", "unknown suffix 'GB'"),
        ("100K", "did you mean 'k' or 'Ki'"),
        ("1gi", "did you mean 'G' or 'Gi'"),
        ("1KiB", "unknown suffix 'KiB'"),
        ("", "must be non-empty"),
        ("1.2.3", "at most one decimal point"),
        ("Gi", "must start with a number"),
        ("m", "must start with a number"),
        (".", "must start with a number"),
        ("+", "must start with a number"),
        ("-", "must start with a number"),
        ("1 Gi", "whitespace"),
        (" 1", "whitespace"),
        ("1\n", "whitespace"),
        ("1e", "exponent 'e' must be an integer"),
        ("1e1.5", "exponent 'e1.5' must be an integer"),
        ("1e+", "must be an integer"),
        ("1Ki1", "unknown suffix 'Ki1'"),
        ("1mm", "unknown suffix 'mm'"),
        ("0x10", "unknown suffix 'x10'"),
        ("1_000", "unknown suffix '_000'"),
        ("\u0661", "must start with a number"),  # Arabic-Indic one: int() would accept it
        ("1\u0661", "unknown suffix"),
        ("1e2147483648", "exponent must be between"),
        ("1e" + "9" * 5000, "exponent must be between"),
        ("nan", "must start with a number"),
        ("inf", "must start with a number"),
    ],
)
def test_quantity_invalid(value: str, fragment: str) -> None:
    problems = quantity(value)
    assert len(problems) == 1
    assert fragment in problems[0]
    assert resource_quantity(value) == problems
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_quantity(value)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (True, "not bool"),
        (False, "not bool"),
        (None, "not NoneType"),
        ([1], "not list"),
        (Decimal(1), "not Decimal"),
        (math.nan, "must be a finite number"),
        (math.inf, "must be a finite number"),
        (-math.inf, "must be a finite number"),
    ],
)
def test_quantity_rejects_non_quantity_types(value: Any, fragment: str) -> None:
    problems = quantity(value)
    assert len(problems) == 1
    assert fragment in problems[0]
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_quantity(value)


def test_parse_quantity_error_names_the_value() -> None:
    with pytest.raises(ValueError, match=r"^invalid quantity '1GB': unknown suffix 'GB'"):
        parse_quantity("1GB")
    with pytest.raises(ValueError, match=r"^invalid quantity 'xxxxxxxx[x]*\.\.\.'"):
        parse_quantity("x" * 1000)  # long values are shortened in messages


def test_huge_integer_quantities() -> None:
    huge = 10**5000  # str() of it is refused by Python's default digit limit
    assert quantity(huge) == ["must be a smaller integer"]
    with pytest.raises(ValueError, match="invalid quantity int: must be a smaller integer"):
        parse_quantity(huge)
    # but long digit strings are exact, in every suffix system
    assert parse_quantity("1" + "0" * 6000 + "Ki") == 10**6000 * 1024


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("-1", ["must be greater than or equal to 0"]),
        ("-0.001m", ["must be greater than or equal to 0"]),
        (-1, ["must be greater than or equal to 0"]),
        (-0.5, ["must be greater than or equal to 0"]),
        ("-0", []),
        ("0", []),
        ("64Gi", []),
        ("1e-9", []),
        (0, []),
    ],
)
def test_resource_quantity(value: str | int | float, expected: list[str]) -> None:
    assert resource_quantity(value) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1Ki", 1024, 0),
        ("1Ki", "1k", 1),
        ("1k", "1e3", 0),
        ("1k", "1E3", 0),
        ("500m", 0.5, 0),
        ("500m", "0.5001", -1),
        ("1Gi", "1G", 1),
        ("1M", "1Mi", -1),
        ("128974848", "123Mi", 0),
        ("129e6", "129M", 0),
        ("-1", "0", -1),
        ("-0", "0", 0),
        ("1n", "0", 1),
        ("1E", "1e18", 0),
        ("1Ei", "1E", 1),
    ],
)
def test_compare_quantities(a: str | int | float, b: str | int | float, expected: int) -> None:
    assert compare_quantities(a, b) == expected
    assert compare_quantities(b, a) == -expected


def test_compare_quantities_rejects_invalid() -> None:
    with pytest.raises(ValueError, match="invalid quantity '1GB'"):
        compare_quantities("1GB", "1")
    with pytest.raises(ValueError, match="invalid quantity True"):
        compare_quantities("1", True)


# --- properties ---------------------------------------------------------------------------------

BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}

digits = st.text(alphabet="0123456789", min_size=1, max_size=25)


@st.composite
def numbers(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A <signedNumber> of the grammar, and its exact value."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(digits)
    frac = draw(digits)
    text, value = draw(
        st.sampled_from(
            [
                (whole, Fraction(int(whole))),
                (f"{whole}.{frac}", int(whole) + Fraction(int(frac), 10 ** len(frac))),
                (f"{whole}.", Fraction(int(whole))),
                (f".{frac}", Fraction(int(frac), 10 ** len(frac))),
            ]
        )
    )
    return sign + text, -value if sign == "-" else value


@st.composite
def suffixes(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A <suffix> of the grammar, and the factor it stands for."""
    kind = draw(st.sampled_from(["binary", "decimal", "exponent"]))
    if kind == "binary":
        name = draw(st.sampled_from(sorted(BINARY)))
        return name, Fraction(2 ** BINARY[name])
    if kind == "decimal":
        name = draw(st.sampled_from(sorted(DECIMAL)))
        return name, Fraction(10) ** DECIMAL[name]
    letter = draw(st.sampled_from(["e", "E"]))
    sign = draw(st.sampled_from(["", "+", "-"]))
    exponent = draw(st.integers(min_value=0, max_value=40))
    padding = "0" * draw(st.integers(min_value=0, max_value=2))
    power = -exponent if sign == "-" else exponent
    return f"{letter}{sign}{padding}{exponent}", Fraction(10) ** power


@given(numbers(), suffixes())
def test_every_grammar_quantity_parses_to_its_exact_value(
    number: tuple[str, Fraction], suffix: tuple[str, Fraction]
) -> None:
    text = number[0] + suffix[0]
    assert quantity(text) == []
    assert Fraction(parse_quantity(text)) == number[1] * suffix[1]
    assert (resource_quantity(text) == []) == (number[1] * suffix[1] >= 0)


@given(numbers())
@example(("1", Fraction(1)))
def test_suffixes_scale_consistently(number: tuple[str, Fraction]) -> None:
    text = number[0]
    base = Fraction(parse_quantity(text))
    assert Fraction(parse_quantity(text + "Ki")) == base * 1024
    assert Fraction(parse_quantity(text + "Mi")) == Fraction(parse_quantity(text + "Ki")) * 1024
    assert Fraction(parse_quantity(text + "k")) == base * 1000
    assert parse_quantity(text + "k") == parse_quantity(text + "e3")
    assert parse_quantity(text + "M") == parse_quantity(text + "E6")
    assert parse_quantity(text + "m") == parse_quantity(text + "e-3")
    assert Fraction(parse_quantity(text + "m")) * 1000 == base
    assert Fraction(parse_quantity(text + "n")) * 10**9 == base


@given(numbers(), suffixes(), numbers(), suffixes())
def test_compare_quantities_orders_like_exact_values(
    n1: tuple[str, Fraction],
    s1: tuple[str, Fraction],
    n2: tuple[str, Fraction],
    s2: tuple[str, Fraction],
) -> None:
    left, right = n1[1] * s1[1], n2[1] * s2[1]
    expected = (left > right) - (left < right)
    assert compare_quantities(n1[0] + s1[0], n2[0] + s2[0]) == expected
    assert compare_quantities(n2[0] + s2[0], n1[0] + s1[0]) == -expected


@given(st.integers())
def test_integers_are_quantities(value: int) -> None:
    assert parse_quantity(value) == value
    assert (resource_quantity(value) == []) == (value >= 0)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_are_quantities(value: float) -> None:
    assert float(parse_quantity(value)) == value
    assert (resource_quantity(value) == []) == (value >= 0)


# An independent statement of the grammar, to check the parser against on near-miss strings.
ORACLE = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE](?P<exp>[+-]?[0-9]+))?"
)


def oracle_accepts(text: str) -> bool:
    match = ORACLE.fullmatch(text)
    if match is None:
        return False
    return match["exp"] is None or -(2**31) <= int(match["exp"]) < 2**31


@given(st.text(alphabet="0123456789.+-eEKMGTPinumkBb _x", max_size=16))
@example("1e2147483647")
@example("1e-2147483648")
@example("1e2147483648")
def test_quantity_agrees_with_the_grammar(text: str) -> None:
    problems = quantity(text)
    assert all(isinstance(problem, str) and problem for problem in problems)
    assert (problems == []) == oracle_accepts(text)
    if problems:
        with pytest.raises(ValueError):
            parse_quantity(text)
    else:
        assert isinstance(parse_quantity(text), Decimal)


@pytest.mark.parametrize("validator", VALIDATORS, ids=lambda v: v.__name__)
@given(text=st.text())
def test_validators_never_raise_on_text(validator: Validator, text: str) -> None:
    problems = validator(text)
    assert isinstance(problems, list)
    assert all(isinstance(problem, str) and problem for problem in problems)


@pytest.mark.parametrize("validator", VALIDATORS, ids=lambda v: v.__name__)
@given(
    value=st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(), st.binary(), st.lists(st.text())
    )
)
def test_validators_never_raise_on_other_types(validator: Validator, value: Any) -> None:
    problems = validator(value)
    assert isinstance(problems, list)
    assert all(isinstance(problem, str) and problem for problem in problems)


@given(st.text())
def test_parse_quantity_only_raises_value_error(text: str) -> None:
    try:
        result = parse_quantity(text)
    except ValueError as exc:
        assert str(exc).startswith("invalid quantity ")
        assert quantity(text) != []
    else:
        assert isinstance(result, Decimal)
        assert quantity(text) == []


labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)


@given(labels)
def test_a_dns1123_label_is_valid_everywhere_a_name_is_expected(value: str) -> None:
    assert dns1123_label(value) == []
    assert dns1123_subdomain(value) == []
    assert qualified_name(value) == []
    assert label_value(value) == []
    assert resource_name(value) == []
    assert (dns1035_label(value) == []) == value[0].isalpha()


@given(st.lists(labels, min_size=1, max_size=3), labels)
@example(["nvidia", "com"], "gpu")
@example(["node", "kubernetes", "io"], "foo")
@example(["requests", "example", "com"], "foo")
def test_prefixed_names_are_qualified_names(parts: list[str], name: str) -> None:
    prefix = ".".join(parts)  # at most 191 characters, so "requests." + prefix still fits
    full = f"{prefix}/{name}"
    assert dns1123_subdomain(prefix) == []
    assert qualified_name(full) == []
    assert resource_name(full) == []
    native = "kubernetes.io/" in full or full.startswith("requests.")
    assert is_extended_resource(full) is not native
    assert is_overcommit_allowed(full) is ("kubernetes.io/" in full)


@given(st.text(alphabet="abcXYZ019-_./", max_size=70))
def test_label_values_are_exactly_the_unprefixed_qualified_names(value: str) -> None:
    if "/" in value:
        assert label_value(value) != []
    elif value:
        assert (label_value(value) == []) == (qualified_name(value) == [])
    else:
        assert label_value(value) == []
        assert qualified_name(value) != []

"""Kubernetes quantities (``k8s.io/apimachinery/pkg/api/resource``), without dependencies.

Quantities follow what ``resource.ParseQuantity`` really accepts rather than its doc comment:
the decimal suffixes include ``n`` (1e-9) and ``u`` (1e-6), which the API server itself emits
(e.g. ``250u``). Where ``ParseQuantity`` is laxer than the ``pattern`` that controller-gen puts
on every Quantity field of a CRD (``"+"``, ``"."`` and ``"Gi"`` parse as 0 in Go, but a
Kubeflow CRD rejects them), the stricter rule is applied: the number must have a digit.
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal
from typing import Final

__all__ = [
    "QUANTITY_PATTERN",
    "compare_quantities",
    "parse_quantity",
    "quantity",
    "resource_quantity",
]

_EMPTY_ERR: Final = "must be non-empty"  # Kubernetes' words, as for names

_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}
_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_SUFFIX_LIST: Final = "Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E"
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1

QUANTITY_PATTERN: Final = (
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
"""The accepted quantity grammar as one regular expression (for messages and schemas)."""

_NUMBER_RE: Final = re.compile(r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?")
_EXPONENT_RE: Final = r"[eE](?P<exp>[+-]?[0-9]+)"  # rare: compiled (and cached) by re when used


def _show(text: str, limit: int = 40) -> str:
    """``repr`` of user text, shortened so that messages stay short."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


class _Problem(str):
    """A problem message, told apart from quantity text by its type."""

    __slots__ = ()


def _describe(value: object) -> str:
    """How a rejected quantity is shown in a ValueError."""
    if isinstance(value, str):
        return _show(value)
    if isinstance(value, float) or (isinstance(value, int) and value.bit_length() <= 128):
        return repr(value)
    return type(value).__name__


def _suffix_hint(suffix: str) -> str:
    stem = suffix.removesuffix("B").removesuffix("b").removesuffix("i").lower()
    for known in ("k", "M", "G", "T", "P", "E"):
        if stem == known.lower():
            return f" (did you mean '{known}' or '{known.upper()}i'?)"
    return ""


def _quantity_text(value: object) -> str | _Problem:
    if isinstance(value, bool):
        return _Problem("must be a string or a number, not bool")
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # beyond sys.get_int_max_str_digits()
            return _Problem("must be a smaller integer")
    if isinstance(value, float):
        if not math.isfinite(value):
            return _Problem("must be a finite number")
        # repr() is the shortest round-tripping form: 0.5 -> "0.5", 1e16 -> "1e+16".
        return repr(value)
    return _Problem(f"must be a string or a number, not {type(value).__name__}")


def _parse(value: object) -> Decimal | _Problem:
    """The exact value of a quantity, or the first problem found."""
    text = _quantity_text(value)
    if isinstance(text, _Problem):
        return text
    if not text:
        return _Problem(_EMPTY_ERR)
    if any(ch.isspace() for ch in text):
        return _Problem("must not contain whitespace")

    number = _NUMBER_RE.match(text)
    if number is None:  # cannot happen: every part of the pattern is optional
        return _Problem(f"must match the regular expression '{QUANTITY_PATTERN}'")
    int_part = number["int"]
    frac = number["frac"] or ""
    if not int_part and not frac:
        return _Problem("must start with a number (e.g. '1', '0.5', '.5', '64Gi', '500m')")
    suffix = text[number.end() :]
    digits = int_part + frac
    sign = "-" if number["sign"] == "-" else ""

    binary_exp = 0
    if suffix in _DECIMAL_SUFFIXES:
        exp10 = _DECIMAL_SUFFIXES[suffix]
    elif suffix in _BINARY_SUFFIXES:
        exp10 = 0
        binary_exp = _BINARY_SUFFIXES[suffix]
    elif (exponent := re.fullmatch(_EXPONENT_RE, suffix)) is not None:
        # Bound the digit count before int(): Python refuses to convert very long digit strings.
        exp_text = exponent["exp"]
        exp_digits = exp_text.lstrip("+-").lstrip("0")
        exp10 = int(exp_text) if len(exp_digits) <= 12 else _INT32_MAX + 1
        if not _INT32_MIN <= exp10 <= _INT32_MAX:
            return _Problem(f"exponent must be between {_INT32_MIN} and {_INT32_MAX}")
    elif suffix[:1] in ("e", "E"):
        return _Problem(f"exponent {_show(suffix)} must be an integer (e.g. '1e3', '5E-3')")
    elif suffix.startswith("."):
        return _Problem("must contain at most one decimal point")
    else:
        return _Problem(
            f"unknown suffix {_show(suffix)}: use one of {_SUFFIX_LIST} "
            f"or an integer exponent such as e3{_suffix_hint(suffix)}"
        )

    # Built from a string, a Decimal is exact whatever its size; only the binary multiplication
    # needs a context, given enough precision never to round (Inexact is trapped to be sure).
    amount = Decimal(f"{sign}{digits}E{exp10 - len(frac)}")
    if binary_exp:
        context = decimal.Context(
            prec=len(digits) + 20,
            Emax=decimal.MAX_EMAX,
            Emin=decimal.MIN_EMIN,
            traps=[decimal.Inexact, decimal.Overflow, decimal.InvalidOperation],
        )
        amount = context.multiply(amount, Decimal(1 << binary_exp))
    return amount


def parse_quantity(value: str | int | float) -> Decimal:
    """The exact value of a Kubernetes quantity (``"64Gi"``, ``"500m"``, ``"1e3"``, ``8``, 0.5).

    Raises ValueError, with a message saying what is wrong, for anything else (including bools,
    NaN and infinities). The value is not rounded: Kubernetes would round a non-zero amount
    below one nano-unit up to ``1n`` and cap SI values at 2**63-1 when storing it.
    """
    result = _parse(value)
    if isinstance(result, _Problem):
        raise ValueError(f"invalid quantity {_describe(value)}: {result}")
    return result


def quantity(value: str | int | float) -> list[str]:
    """Problems with ``value`` as a Kubernetes quantity (any sign); never raises."""
    result = _parse(value)
    return [str(result)] if isinstance(result, _Problem) else []


def resource_quantity(value: str | int | float) -> list[str]:
    """Problems with ``value`` as a resource request or limit: a quantity that is not negative."""
    result = _parse(value)
    if isinstance(result, _Problem):
        return [str(result)]
    if result < 0:
        return ["must be greater than or equal to 0"]
    return []


def compare_quantities(a: str | int | float, b: str | int | float) -> int:
    """-1, 0 or 1 as quantity ``a`` is less than, equal to or greater than ``b``.

    Raises ValueError if either is not a valid quantity.
    """
    left, right = parse_quantity(a), parse_quantity(b)
    return (left > right) - (left < right)

"""Kubernetes resource quantities (apimachinery `resource.Quantity`) with exact arithmetic.

A quantity is kept as a `Fraction`, so `100m`, `1.5Gi` and `1e3` are exact; the integer views
round up as apimachinery's `Value()` and `MilliValue()` do.

Loading a large snapshot parses the same few strings ("100m", "128Mi") hundreds of thousands of times, and
building a Fraction is slow: `parse_quantity` keeps the result per written value (Fractions are immutable,
so every pod naming "100m" shares one). The exact parse (`parse_quantity_exact`) decides every value.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Any

from kubesched.errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}
_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_EXP = re.compile(r"^[eE]([+-]?[0-9]+)$")


# Beyond these a quantity is far outside anything the scheduler's int64 arithmetic can hold (or, below, rounds up
# to the smallest quantity, 1n, as apimachinery rounds every quantity up to nano precision).
_MAX_EXPONENT = 40
_MAX_DIGITS = 64
_NANO = Fraction(1, 10**9)
_PARSED: dict[str | int, Fraction] = {}
_PARSED_LIMIT = 1 << 16


def parse_quantity(value: Any) -> Fraction:
    """Parse a quantity string (or a YAML number) into an exact Fraction; ValueError if malformed.

    The same as `parse_quantity_exact`, remembered per written string or integer."""
    t = type(value)
    if t is str or t is int:
        q = _PARSED.get(value)
        if q is None:
            q = parse_quantity_exact(value)
            if len(_PARSED) >= _PARSED_LIMIT:
                _PARSED.clear()
            _PARSED[value] = q
        return q
    return parse_quantity_exact(value)


def parse_quantity_exact(value: Any) -> Fraction:
    """Parse a quantity string (or a YAML number) into an exact Fraction; ValueError if malformed.

    Like apimachinery's ParseQuantity the result is rounded up (away from zero) to nano precision.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got {value!r}")
    if isinstance(value, int):
        if abs(value) >= 10**_MAX_DIGITS:
            raise ValueError(f"quantity {value} is too large")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"expected a quantity, got {value!r}")
        return _nano(Fraction(str(value)))
    if not isinstance(value, str):
        raise ValueError(f"expected a quantity, got {type(value).__name__} {value!r}")
    return _parse_string(value)


@functools.lru_cache(maxsize=8192)
def _parse_string(value: str) -> Fraction:
    # Snapshots repeat a few quantity strings ("100m", "128Mi") many times; Fractions are immutable.
    text = value.strip()
    m = _RE.match(text)
    if not m:
        raise ValueError(f"expected a quantity such as 100m, 1.5Gi or 1e3, got {value!r}")
    digits, suffix = m.group(1), m.group(2)
    if len(digits) > _MAX_DIGITS:
        raise ValueError(f"quantity {value!r} has more than {_MAX_DIGITS} digits")
    number = Fraction(digits)
    if suffix in _BINARY:
        return _nano(number * _BINARY[suffix])
    if suffix in _DECIMAL:
        return _nano(number * _DECIMAL[suffix])
    e = _EXP.match(suffix)
    if e:
        exponent = e.group(1).lstrip("+-").lstrip("0")
        negative = e.group(1).startswith("-")
        if number == 0:
            return Fraction(0)
        if len(exponent) > 4 or int(exponent or "0") > _MAX_EXPONENT:
            if not negative:
                raise ValueError(f"quantity {value!r} is too large")
            return _NANO if number > 0 else -_NANO
        return _nano(number * Fraction(10) ** (-int(exponent or "0") if negative else int(exponent or "0")))
    raise ValueError(f"expected a quantity such as 100m, 1.5Gi or 1e3, got {value!r} (unknown suffix {suffix!r})")


def _nano(q: Fraction) -> Fraction:
    if 10**9 % q.denominator == 0:
        return q
    scaled = q * 10**9
    return Fraction(_ceil_away(scaled), 10**9)


def quantity_or_error(value: Any, *, field: str) -> Fraction:
    """parse_quantity with the failure turned into an InputError naming the field."""
    try:
        return parse_quantity(value)
    except ValueError as e:
        raise InputError(str(e), field=field) from None


def value_of(q: Fraction) -> int:
    """apimachinery `Quantity.Value()`: the integer value, rounded up (away from zero for negatives too)."""
    return _ceil_away(q)


def milli_value_of(q: Fraction) -> int:
    """apimachinery `Quantity.MilliValue()`: value × 1000, rounded up."""
    return _ceil_away(q * 1000)


def _ceil_away(q: Fraction) -> int:
    # apimachinery rounds with inf.RoundUp, which rounds away from zero.
    if q >= 0:
        return math.ceil(q)
    return -math.ceil(-q)


def format_quantity(q: Fraction, binary: bool = False) -> str:
    """A short canonical string for output (not byte-identical to apimachinery for every input)."""
    if q.denominator == 1:
        n = q.numerator
        if binary and n != 0:
            for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
                if n % _BINARY[suffix] == 0:
                    return f"{n // _BINARY[suffix]}{suffix}"
        return str(n)
    milli = q * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(q))

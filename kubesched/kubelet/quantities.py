"""apimachinery `resource.Quantity` as the kubelet prints it in eviction messages and threshold output.

A Go quantity remembers the format of what it was parsed from (BinarySI for `Ki`..`Ei`, DecimalExponent
for `e3`, DecimalSI otherwise) and `String()` prints the canonical form in that format: `1.5Gi` becomes
`1536Mi`, `1.5` becomes `1500m`, a BinarySI value below 1024 or not a whole number falls back to
DecimalSI. Messages must match upstream byte for byte, so this is kept exact (Fractions, no floats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import parse_quantity

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"

_BINARY_SUFFIX = {10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}
_DECIMAL_SUFFIX = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_SUFFIX_RE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(.*)$")


@dataclass(frozen=True, slots=True)
class GoQuantity:
    """An exact value and the format Go would print it in."""

    value: Fraction
    format: str = DECIMAL_SI

    def __str__(self) -> str:
        return quantity_string(self.value, self.format)

    def __add__(self, other: GoQuantity) -> GoQuantity:
        # Quantity.Add keeps the receiver's format.
        return GoQuantity(self.value + other.value, self.format)


def binary(n: int | Fraction) -> GoQuantity:
    """resource.NewQuantity(n, BinarySI)."""
    return GoQuantity(Fraction(n), BINARY_SI)


def decimal(n: int | Fraction) -> GoQuantity:
    """resource.NewQuantity(n, DecimalSI)."""
    return GoQuantity(Fraction(n), DECIMAL_SI)


def format_of(text: str) -> str:
    """The format ParseQuantity gives a string, from its suffix."""
    m = _SUFFIX_RE.match(text.strip())
    suffix = m.group(1) if m else ""
    if suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"):
        return BINARY_SI
    if suffix[:1] in ("e", "E"):
        return DECIMAL_EXPONENT
    return DECIMAL_SI


def parse_go_quantity(raw: Any) -> GoQuantity:
    """ParseQuantity: the exact value and its format (ValueError if malformed)."""
    value = parse_quantity(raw)
    fmt = format_of(raw) if isinstance(raw, str) else DECIMAL_SI
    return GoQuantity(value, fmt)


def _remove_factors(n: int, base: int) -> tuple[int, int]:
    times = 0
    while n != 0 and n % base == 0:
        n //= base
        times += 1
    return n, times


def _decimal_parts(value: Fraction) -> tuple[int, int]:
    """value = mantissa × 10^exponent with the exponent a multiple of 3 (AsCanonicalBytes)."""
    sign = -1 if value < 0 else 1
    v = abs(value)
    exponent = 0
    while v.denominator != 1:
        v *= 10
        exponent -= 1
        if exponent < -30:  # apimachinery keeps nano precision; beyond that, round up like it does
            v = Fraction(-(-v.numerator // v.denominator))
            break
    mantissa, times = _remove_factors(v.numerator, 10)
    exponent += times
    rem = exponent % 3
    if rem:
        mantissa *= 10**rem
        exponent -= rem
    return sign * mantissa, exponent


def quantity_string(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """Quantity.String() of a value in a format."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        n = value.numerator
        mantissa, times = _remove_factors(abs(n), 1024)
        times = min(times, 6)
        mantissa = abs(n) // (1024**times)
        return f"{'-' if n < 0 else ''}{mantissa}{_BINARY_SUFFIX.get(times * 10, '')}"
    mantissa, exponent = _decimal_parts(value)
    if fmt == DECIMAL_SI and exponent in _DECIMAL_SUFFIX:
        return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
    return f"{mantissa}e{exponent}" if exponent else str(mantissa)

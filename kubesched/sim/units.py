"""Small parsers the scenario shares: durations (Go's, or seconds), quantities in a given unit."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kubesched.api.duration import read_duration_seconds
from kubesched.api.quantity import parse_quantity
from kubesched.errors import InputError

# A scenario's durations are bounded so that a typo (1e300 seconds) is refused instead of running forever.
MAX_SECONDS = 100 * 365 * 24 * 3600.0


def parse_duration(value: Any, field: str, *, allow_zero: bool = True) -> float:
    """A scenario duration in seconds: a Go duration ("15m", "1h30m", "10s") or a plain number of seconds,
    never negative and at most 100 years (kubesched.api.duration reads it)."""
    seconds = read_duration_seconds(value, field, example="10s, 5m or 1h30m", numbers=True, negative=False,
                                    zero=allow_zero)
    if seconds > MAX_SECONDS:
        raise InputError(f"expected a duration of at most 100 years, got {value!r}", field=field)
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as a short Go-like duration: 90 → 1m30s, 3600 → 1h."""
    s = int(round(seconds))
    if s == 0:
        return "0s"
    out = ""
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        out += f"{h}h"
    if m:
        out += f"{m}m"
    if sec:
        out += f"{sec}s"
    return out


# Units a table column may be given in (a number in the column times this factor is the base unit:
# millicores for cpu, bytes or plain counts for everything else).
UNIT_FACTORS: dict[str, Fraction] = {
    "": Fraction(1), "1": Fraction(1), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
}


def quantity_in(value: Any, field: str) -> Fraction:
    """A Kubernetes quantity ("250m", "1Gi") or a plain number, exactly."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"expected a quantity such as 250m or 1Gi, got {value!r}", field=field)
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        raise InputError(f"expected a quantity such as 250m or 1Gi, got {value!r}", field=field) from None

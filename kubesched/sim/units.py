"""Small parsers the scenario shares: Go durations, quantities in a given unit, stable hashing."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from kubesched.api.quantity import parse_quantity
from kubesched.errors import InputError

MAX_SECONDS = 100 * 365 * 24 * 3600.0
_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(value: Any, field: str, *, allow_zero: bool = True) -> float:
    """A Go duration ("15m", "1h30m", "10s") or a number of seconds, as seconds (never negative)."""
    expected = "expected a duration such as 10s, 5m or 1h30m"
    if isinstance(value, bool) or value is None:
        raise InputError(f"{expected}, got {value!r}", field=field)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if text == "0":
            seconds = 0.0
        else:
            pos, seconds = 0, 0.0
            for m in _DURATION.finditer(text):
                if m.start() != pos:
                    break
                seconds += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
                pos = m.end()
            if pos != len(text) or not text:
                raise InputError(f"{expected}, got {value!r}", field=field)
    else:
        raise InputError(f"{expected}, got {value!r}", field=field)
    if seconds < 0 or seconds != seconds:
        raise InputError(f"expected a non-negative duration, got {value!r}", field=field)
    if seconds > MAX_SECONDS:
        raise InputError(f"expected a duration of at most 100 years, got {value!r}", field=field)
    if not allow_zero and seconds == 0:
        raise InputError(f"expected a positive duration, got {value!r}", field=field)
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

"""Go's time.Duration as text: time.ParseDuration and Duration.String(), exactly.

Upstream messages and configuration fields print and parse durations this way (`30s`, `2m0s`, `1.5ms`).
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["format_go_duration", "format_seconds", "parse_go_duration"]

_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9,
                   "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_MAX_DURATION = 2**63 - 1


def parse_go_duration(text: str) -> int:
    """time.ParseDuration, in nanoseconds (ValueError if malformed)."""
    s = text
    sign = 1
    if s[:1] in ("+", "-"):
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total = Fraction(0)
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise ValueError(f"invalid duration {text!r} (expected a number and a unit such as 30s, 1m30s or 2h)")
        number = m.group(1)
        number = number[:-1] if number.endswith(".") else number
        total += Fraction("0" + number) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    ns = int(total)  # Go truncates the fractional nanoseconds
    if ns > _MAX_DURATION:
        raise ValueError(f"invalid duration {text!r} (too long)")
    return sign * ns


def _frac_digits(value: int, digits: int) -> str:
    whole, frac = divmod(value, 10**digits)
    text = str(whole)
    if frac:
        text += "." + f"{frac:0{digits}d}".rstrip("0")
    return text


def format_go_duration(ns: int) -> str:
    """time.Duration.String(): 0s, 1.5ms, 30s, 2m0s, 1h0m0s."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 10**9:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{_frac_digits(u, 3)}µs"
        return f"{sign}{_frac_digits(u, 6)}ms"
    hours, rest = divmod(u, 3600 * 10**9)
    minutes, secs = divmod(rest, 60 * 10**9)
    out = f"{_frac_digits(secs, 9)}s"
    if hours:
        out = f"{hours}h{minutes}m{out}"
    elif minutes:
        out = f"{minutes}m{out}"
    return sign + out


def format_seconds(seconds: float) -> str:
    """Duration.String() of a number of seconds (rounded to the nanosecond)."""
    return format_go_duration(round(seconds * 1e9))


"""Go durations: `time.ParseDuration`, `Duration.String()` and the metav1.Duration JSON form.

Mirrors Go's `src/time/format.go` (ParseDuration, leadingInt, leadingFraction, quote) and `src/time/time.go`
(Duration.String), and apimachinery's `pkg/apis/meta/v1/duration.go` (a metav1.Duration is a JSON string
that ParseDuration reads). The one parser every kubesched document reader uses:

- a possibly signed sequence of decimal numbers, each with an optional fraction and a unit (`ns`, `us`, `µs`
  or `μs`, `ms`, `s`, `m`, `h`): `300ms`, `-1.5h`, `2h45m`, `5.s`, `.5s`;
- `0` alone (signed or not) is zero; any other number without a unit is refused ("missing unit");
- the result is whole nanoseconds in int64 (fractions truncated the way Go's float arithmetic does; too
  large is an error).

`read_duration_seconds` reads one document field: a string in that form (the metav1.Duration JSON form),
and, only where the document's own format says so, a plain number of seconds; callers that must refuse
negative (or zero) durations say so explicitly.
"""

from __future__ import annotations

from typing import Any

from kubesched.errors import InputError

NANOSECOND = 1
MICROSECOND = 1_000
MILLISECOND = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE

MAX_DURATION = 2**63 - 1
MIN_DURATION = -(2**63)

_UNITS = {"ns": NANOSECOND, "us": MICROSECOND, "µs": MICROSECOND, "μs": MICROSECOND, "ms": MILLISECOND,
          "s": SECOND, "m": MINUTE, "h": HOUR}
_UINT64 = 2**64
_LIMIT = 1 << 63


class DurationError(ValueError):
    """A string time.ParseDuration refuses; the message is Go's ("time: invalid duration \"1d\"")."""


def go_quote(s: str) -> str:
    """time's quote(): double quotes, with non-ASCII and control characters as \\x escapes of their UTF-8 bytes."""
    out = ['"']
    for c in s:
        if ord(c) >= 0x80 or c < " ":
            out.extend(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogatepass"))
        else:
            if c in ('"', "\\"):
                out.append("\\")
            out.append(c)
    out.append('"')
    return "".join(out)


def _leading_int(s: str, i: int) -> tuple[int, int]:
    """leadingInt: the digits at s[i:] as an integer and where they end; DurationError on overflow."""
    x = 0
    while i < len(s) and "0" <= s[i] <= "9":
        if x > _LIMIT // 10:
            raise DurationError("overflow")
        x = x * 10 + ord(s[i]) - 48
        if x > _LIMIT:
            raise DurationError("overflow")
        i += 1
    return x, i


def _leading_fraction(s: str, i: int) -> tuple[int, float, int]:
    """leadingFraction: digits after the point, their scale, and where they end (overflowing digits are dropped)."""
    x, scale, overflow = 0, 1.0, False
    while i < len(s) and "0" <= s[i] <= "9":
        if not overflow:
            if x > (_LIMIT - 1) // 10:
                overflow = True
            else:
                y = x * 10 + ord(s[i]) - 48
                if y > _LIMIT:
                    overflow = True
                else:
                    x = y
                    scale *= 10
        i += 1
    return x, scale, i


def parse_go_duration(text: str) -> int:
    """time.ParseDuration: nanoseconds, or DurationError with Go's message."""
    invalid = DurationError(f"time: invalid duration {go_quote(text)}")
    s, i = text, 0
    neg = False
    if s[:1] in ("-", "+"):
        neg = s[0] == "-"
        i = 1
    if s[i:] == "0":
        return 0
    if i == len(s):
        raise invalid
    d = 0
    while i < len(s):
        c = s[i]
        if not (c == "." or "0" <= c <= "9"):
            raise invalid
        start = i
        try:
            v, i = _leading_int(s, i)
        except DurationError:
            raise invalid from None
        pre = i != start
        f, scale, post = 0, 1.0, False
        if i < len(s) and s[i] == ".":
            i += 1
            start = i
            f, scale, i = _leading_fraction(s, i)
            post = i != start
        if not pre and not post:
            raise invalid  # no digits: ".s", "-."
        start = i
        while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
            i += 1
        if i == start:
            raise DurationError(f"time: missing unit in duration {go_quote(text)}")
        u = s[start:i]
        unit = _UNITS.get(u)
        if unit is None:
            raise DurationError(f"time: unknown unit {go_quote(u)} in duration {go_quote(text)}")
        if v > _LIMIT // unit:
            raise invalid
        v *= unit
        if f > 0:
            # Go adds the fraction in float64 (exact to the nanosecond for hours) and truncates.
            v += int(float(f) * (float(unit) / scale))
            if v > _LIMIT:
                raise invalid
        d = (d + v) % _UINT64  # uint64 arithmetic, as Go's
        if d > _LIMIT:
            raise invalid
    if neg:
        return -d
    if d > MAX_DURATION:
        raise invalid
    return d


def _frac(value: int, digits: int) -> str:
    whole, frac = divmod(value, 10**digits)
    text = str(whole)
    if frac:
        text += "." + f"{frac:0{digits}d}".rstrip("0")
    return text


def format_go_duration(ns: int) -> str:
    """Duration.String(): 0s, 1.5ms, 30s, 2m0s, 1h0m0s."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < SECOND:
        if u < MICROSECOND:
            return f"{sign}{u}ns"
        if u < MILLISECOND:
            return f"{sign}{_frac(u, 3)}µs"
        return f"{sign}{_frac(u, 6)}ms"
    hours, rest = divmod(u, HOUR)
    minutes, secs = divmod(rest, MINUTE)
    out = f"{_frac(secs, 9)}s"
    if hours:
        out = f"{hours}h{minutes}m{out}"
    elif minutes:
        out = f"{minutes}m{out}"
    return sign + out


def read_duration(raw: Any, field: str, *, example: str = "30s, 5m or 1h30m", negative: bool = True,
                  zero: bool = True) -> int:
    """A metav1.Duration field (a string ParseDuration reads), in nanoseconds.

    `negative=False` / `zero=False` refuse what a field does not allow. Errors name the field and say what
    was expected; a malformed string adds Go's own reason.
    """
    expected = f"expected a duration such as {example}"
    if not isinstance(raw, str):
        raise InputError(f"{expected}, got {raw!r}", field=field)
    try:
        ns = parse_go_duration(raw)
    except DurationError as e:
        raise InputError(f"{expected}, got {raw!r} ({e})", field=field) from None
    _check_sign(ns, raw, field, negative, zero)
    return ns


def read_duration_seconds(raw: Any, field: str, *, example: str = "30s, 5m or 1h30m", numbers: bool = False,
                          negative: bool = True, zero: bool = True) -> float:
    """A duration field in seconds: a Go duration string, or — with `numbers`, for formats that document it —
    a plain number of seconds."""
    if numbers and isinstance(raw, (int, float)) and not isinstance(raw, bool):
        seconds = float(raw)
        if seconds != seconds:
            raise InputError(f"expected a duration such as {example}, got {raw!r}", field=field)
        _check_sign(seconds, raw, field, negative, zero)
        return seconds
    return read_duration(raw, field, example=example, negative=negative, zero=zero) / SECOND


def _check_sign(value: float, raw: Any, field: str, negative: bool, zero: bool) -> None:
    if not negative and value < 0:
        raise InputError(f"expected a non-negative duration, got {raw!r}", field=field)
    if not zero and value == 0:
        raise InputError(f"expected a positive duration, got {raw!r}", field=field)

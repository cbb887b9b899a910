"""Go durations (kubesched.api.duration): time.ParseDuration's own test tables, Duration.String, and the
document reader every loader uses (metav1.Duration strings; numbers, negatives and zero only where allowed)."""

from __future__ import annotations

import pytest

from kubesched.api.duration import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    SECOND,
    DurationError,
    format_go_duration,
    parse_go_duration,
    read_duration,
    read_duration_seconds,
)
from kubesched.errors import InputError

# Go's src/time/time_test.go, parseDurationTests.
PARSE = [
    ("0", 0), ("5s", 5 * SECOND), ("30s", 30 * SECOND), ("1478s", 1478 * SECOND),
    ("-5s", -5 * SECOND), ("+5s", 5 * SECOND), ("-0", 0), ("+0", 0),
    ("5.0s", 5 * SECOND), ("5.6s", 5 * SECOND + 600 * MILLISECOND), ("5.s", 5 * SECOND), (".5s", 500 * MILLISECOND),
    ("1.0s", SECOND), ("1.00s", SECOND), ("1.004s", SECOND + 4 * MILLISECOND), ("1.0040s", SECOND + 4 * MILLISECOND),
    ("100.00100s", 100 * SECOND + MILLISECOND),
    ("10ns", 10), ("11us", 11 * MICROSECOND), ("12µs", 12 * MICROSECOND), ("12μs", 12 * MICROSECOND),
    ("13ms", 13 * MILLISECOND), ("14s", 14 * SECOND), ("15m", 15 * MINUTE), ("16h", 16 * HOUR),
    ("3h30m", 3 * HOUR + 30 * MINUTE), ("10.5s4m", 4 * MINUTE + 10 * SECOND + 500 * MILLISECOND),
    ("-2m3.4s", -(2 * MINUTE + 3 * SECOND + 400 * MILLISECOND)),
    ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6),
    ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14 * SECOND + 425 * MILLISECOND),
    ("52763797000ns", 52763797000),
    ("0.3333333333333333333h", 20 * MINUTE),
    ("9007199254740993ns", (1 << 53) + 1),
    ("9223372036854775807ns", (1 << 63) - 1), ("9223372036854775.807us", (1 << 63) - 1),
    ("9223372036s854ms775us807ns", (1 << 63) - 1),
    ("-9223372036854775808ns", -(1 << 63)), ("-9223372036854775.808us", -(1 << 63)),
    ("-9223372036s854ms775us808ns", -(1 << 63)),
    ("-2562047h47m16.854775808s", -(1 << 63)),
    ("0.100000000000000000000h", 6 * MINUTE),
    ("0.830103483285477580700h", 49 * MINUTE + 48 * SECOND + 372539827),
]

# parseDurationErrorTests: the input, and what the error quotes.
ERRORS = [
    ("", '""'), ("3", '"3"'), ("-", '"-"'), ("s", '"s"'), (".", '"."'), ("-.", '"-."'), (".s", '".s"'),
    ("+.s", '"+.s"'), ("1d", '"1d"'), ("\ufffd", '"\\xef\\xbf\\xbd"'),
    ("\ufffd hello \ufffd world", '"\\xef\\xbf\\xbd hello \\xef\\xbf\\xbd world"'),
    ("9223372036854775810ns", '"9223372036854775810ns"'), ("9223372036854775808ns", '"9223372036854775808ns"'),
    ("-9223372036854775809ns", '"-9223372036854775809ns"'), ("9223372036854776us", '"9223372036854776us"'),
    ("3000000h", '"3000000h"'), ("9223372036854775.808us", '"9223372036854775.808us"'),
    ("9223372036854ms775us808ns", '"9223372036854ms775us808ns"'),
]


@pytest.mark.parametrize(("text", "ns"), PARSE)
def test_parse_duration_table(text: str, ns: int) -> None:
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize(("text", "quoted"), ERRORS)
def test_parse_duration_error_table(text: str, quoted: str) -> None:
    with pytest.raises(DurationError) as e:
        parse_go_duration(text)
    assert quoted in str(e.value) and str(e.value).startswith("time: ")


def test_error_wording_is_gos() -> None:
    with pytest.raises(DurationError, match='^time: missing unit in duration "30"$'):
        parse_go_duration("30")
    with pytest.raises(DurationError, match='^time: unknown unit "d" in duration "1d"$'):
        parse_go_duration("1d")
    with pytest.raises(DurationError, match='^time: missing unit in duration "1.2.3s"$'):
        parse_go_duration("1.2.3s")
    with pytest.raises(DurationError, match='^time: invalid duration "--1s"$'):
        parse_go_duration("--1s")


# durationTests of time_test.go (Duration.String), and the round trip of the extremes (issue 48629).
@pytest.mark.parametrize(("text", "ns"), [
    ("0s", 0), ("1ns", 1), ("1.1µs", 1100), ("2.2ms", 2_200_000), ("3.3s", 3_300_000_000), ("4m5s", 245 * SECOND),
    ("4m5.001s", 245_001_000_000), ("5h6m7.001s", 18_367_001_000_000), ("8m0.000000001s", 480_000_000_001),
    ("2562047h47m16.854775807s", (1 << 63) - 1), ("-2562047h47m16.854775808s", -(1 << 63)),
])
def test_duration_string(text: str, ns: int) -> None:
    assert format_go_duration(ns) == text
    assert parse_go_duration(text) == ns


def test_metav1_duration_is_a_string_and_errors_name_the_field() -> None:
    assert read_duration("1m30s", "f") == 90 * SECOND
    assert read_duration("-1s", "f") == -SECOND
    for bad in (90, 1.5, None, True, ["1s"]):
        with pytest.raises(InputError) as e:
            read_duration(bad, "spec.timeout")
        assert e.value.field == "spec.timeout" and "expected a duration such as" in e.value.message
    with pytest.raises(InputError) as e:
        read_duration("90", "spec.timeout")
    assert e.value.message.endswith('(time: missing unit in duration "90")')


def test_reader_options_refuse_what_the_field_does_not_allow() -> None:
    assert read_duration_seconds("1.5h", "f") == 5400.0
    with pytest.raises(InputError, match="non-negative"):
        read_duration_seconds("-5s", "f", negative=False)
    with pytest.raises(InputError, match="positive"):
        read_duration_seconds("0s", "f", zero=False)
    # Plain numbers are seconds only for formats that document it.
    assert read_duration_seconds(90, "f", numbers=True) == 90.0
    with pytest.raises(InputError):
        read_duration_seconds(90, "f")
    with pytest.raises(InputError, match="non-negative"):
        read_duration_seconds(-1, "f", numbers=True, negative=False)

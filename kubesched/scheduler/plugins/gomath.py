"""Go's integer and rounding semantics, which upstream formulas depend on."""

from __future__ import annotations

import math

import numpy as np


def go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def go_div_array(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """go_div over int64 arrays."""
    a = np.asarray(a, dtype=np.int64)
    b_arr = np.asarray(b, dtype=np.int64)
    q = np.abs(a) // np.abs(b_arr)
    return np.where((a >= 0) == (b_arr >= 0), q, -q)


def go_round(x: float) -> int:
    """math.Round: halves away from zero (Python's round() rounds halves to even)."""
    if x >= 0:
        return int(math.floor(x + 0.5))
    return -int(math.floor(-x + 0.5))


def go_round_array(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, np.floor(x + 0.5), -np.floor(-x + 0.5))


def go_round_nonnegative(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`go_round_array` for values known to be >= 0 (no NaN): the branch it takes for them, alone (into
    `out` when given, which may be x itself)."""
    y = np.add(x, 0.5, out=out)
    return np.floor(y, out=y)  # type: ignore[no-any-return]

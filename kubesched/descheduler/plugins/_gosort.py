"""Go's `sort.Slice` (pattern-defeating quicksort), reproduced step for step.

Several descheduler strategies sort with `sort.Slice`, which is not stable and is sometimes given a
comparator that is not a strict weak ordering (it answers "less" both ways for equal pods). Which pods
end up evicted then depends on the exact sequence of comparisons and swaps Go performs, so a Python
`sorted` would pick different pods. This module performs the same comparisons and swaps as the Go
standard library (Go >= 1.19), so the resulting order is Go's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

Less = Callable[[T, T], bool]

_MASK64 = (1 << 64) - 1
_UNKNOWN, _INCREASING, _DECREASING = 0, 1, 2


def go_sort_slice(data: list[T], less: Callable[[T, T], bool]) -> None:
    """Sort `data` in place exactly as Go's `sort.Slice(data, func(i, j) bool { return less(data[i], data[j]) })`."""
    n = len(data)
    if n < 2:
        return
    if n <= 12:
        _insertion_sort(data, less, 0, n)
        return
    _Sorter(data, less).pdqsort(0, n, n.bit_length())


def _insertion_sort(data: list[T], less: Callable[[T, T], bool], a: int, b: int) -> None:
    for i in range(a + 1, b):
        j = i
        while j > a and less(data[j], data[j - 1]):
            data[j], data[j - 1] = data[j - 1], data[j]
            j -= 1


class _Sorter:
    """pdqsort_func and its helpers from Go's sort/zsortfunc.go, over a Python list."""

    __slots__ = ("data", "less")

    def __init__(self, data: list, less: Callable) -> None:
        self.data = data
        self.less = less

    def lt(self, i: int, j: int) -> bool:
        return self.less(self.data[i], self.data[j])

    def swap(self, i: int, j: int) -> None:
        d = self.data
        d[i], d[j] = d[j], d[i]

    def insertion_sort(self, a: int, b: int) -> None:
        _insertion_sort(self.data, self.less, a, b)

    def sift_down(self, lo: int, hi: int, first: int) -> None:
        root = lo
        while True:
            child = 2 * root + 1
            if child >= hi:
                return
            if child + 1 < hi and self.lt(first + child, first + child + 1):
                child += 1
            if not self.lt(first + root, first + child):
                return
            self.swap(first + root, first + child)
            root = child

    def heap_sort(self, a: int, b: int) -> None:
        first, lo, hi = a, 0, b - a
        for i in range((hi - 1) // 2, -1, -1):
            self.sift_down(i, hi, first)
        for i in range(hi - 1, -1, -1):
            self.swap(first, first + i)
            self.sift_down(lo, i, first)

    def pdqsort(self, a: int, b: int, limit: int) -> None:
        max_insertion = 12
        was_balanced = True
        was_partitioned = True
        while True:
            length = b - a
            if length <= max_insertion:
                self.insertion_sort(a, b)
                return
            if limit == 0:
                self.heap_sort(a, b)
                return
            if not was_balanced:
                self.break_patterns(a, b)
                limit -= 1
            pivot, hint = self.choose_pivot(a, b)
            if hint == _DECREASING:
                self.reverse_range(a, b)
                pivot = (b - 1) - (pivot - a)
                hint = _INCREASING
            if was_balanced and was_partitioned and hint == _INCREASING:
                if self.partial_insertion_sort(a, b):
                    return
            if a > 0 and not self.lt(a - 1, pivot):
                a = self.partition_equal(a, b, pivot)
                continue
            mid, already = self.partition(a, b, pivot)
            was_partitioned = already
            left_len, right_len = mid - a, b - mid
            balance_threshold = length // 8
            if left_len < right_len:
                was_balanced = left_len >= balance_threshold
                self.pdqsort(a, mid, limit)
                a = mid + 1
            else:
                was_balanced = right_len >= balance_threshold
                self.pdqsort(mid + 1, b, limit)
                b = mid

    def partition(self, a: int, b: int, pivot: int) -> tuple[int, bool]:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while i <= j and self.lt(i, a):
            i += 1
        while i <= j and not self.lt(j, a):
            j -= 1
        if i > j:
            self.swap(j, a)
            return j, True
        self.swap(i, j)
        i += 1
        j -= 1
        while True:
            while i <= j and self.lt(i, a):
                i += 1
            while i <= j and not self.lt(j, a):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i += 1
            j -= 1
        self.swap(j, a)
        return j, False

    def partition_equal(self, a: int, b: int, pivot: int) -> int:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while True:
            while i <= j and not self.lt(a, i):
                i += 1
            while i <= j and self.lt(a, j):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i += 1
            j -= 1
        return i

    def partial_insertion_sort(self, a: int, b: int) -> bool:
        max_steps, shortest_shifting = 5, 50
        i = a + 1
        for _ in range(max_steps):
            while i < b and not self.lt(i, i - 1):
                i += 1
            if i == b:
                return True
            if b - a < shortest_shifting:
                return False
            self.swap(i, i - 1)
            if i - a >= 2:
                j = i - 1
                while j >= 1:
                    if not self.lt(j, j - 1):
                        break
                    self.swap(j, j - 1)
                    j -= 1
            if b - i >= 2:
                j = i + 1
                while j < b:
                    if not self.lt(j, j - 1):
                        break
                    self.swap(j, j - 1)
                    j += 1
        return False

    def break_patterns(self, a: int, b: int) -> None:
        length = b - a
        if length >= 8:
            random = length  # xorshift seeded with the length, as Go does
            modulus = 1 << length.bit_length()
            for idx in range(a + (length // 4) * 2 - 1, a + (length // 4) * 2 + 2):
                random ^= (random << 13) & _MASK64
                random ^= random >> 7
                random ^= (random << 17) & _MASK64
                other = random & (modulus - 1)
                if other >= length:
                    other -= length
                self.swap(idx, a + other)

    def choose_pivot(self, a: int, b: int) -> tuple[int, int]:
        shortest_ninther, max_swaps = 50, 4 * 3
        ln = b - a
        swaps = [0]
        i = a + ln // 4 * 1
        j = a + ln // 4 * 2
        k = a + ln // 4 * 3
        if ln >= 8:
            if ln >= shortest_ninther:
                i = self.median(i - 1, i, i + 1, swaps)
                j = self.median(j - 1, j, j + 1, swaps)
                k = self.median(k - 1, k, k + 1, swaps)
            j = self.median(i, j, k, swaps)
        if swaps[0] == 0:
            return j, _INCREASING
        if swaps[0] == max_swaps:
            return j, _DECREASING
        return j, _UNKNOWN

    def order2(self, a: int, b: int, swaps: list[int]) -> tuple[int, int]:
        if self.lt(b, a):
            swaps[0] += 1
            return b, a
        return a, b

    def median(self, a: int, b: int, c: int, swaps: list[int]) -> int:
        a, b = self.order2(a, b, swaps)
        b, c = self.order2(b, c, swaps)
        a, b = self.order2(a, b, swaps)
        return b

    def reverse_range(self, a: int, b: int) -> None:
        i, j = a, b - 1
        while i < j:
            self.swap(i, j)
            i += 1
            j -= 1

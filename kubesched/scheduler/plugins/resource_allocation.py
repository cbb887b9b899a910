"""The resource-allocation scorer shared by NodeResourcesFit's strategies and NodeResourcesBalancedAllocation.

For each configured resource: allocatable, and requested = what the node's pods request plus the pod.
cpu and memory use the non-zero requests (scoring defaults for containers without requests) unless
`use_requested`; a scalar resource the pod does not request is left out (alloc 0, as upstream's
bypass). The scorer function maps (requested, allocatable) matrices to one score per node.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NON_MISSING_DEFAULTS,
    is_scalar_resource,
    memo_by_shape,
    pod_requests,
)
from kubesched.cluster.state import ClusterState, NodeInfo, NodeTable
from kubesched.errors import InputError
from kubesched.scheduler.plugins.gomath import go_div_array


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """config.ResourceSpec: a resource name and its weight (1 to 100)."""

    name: str
    weight: int = 1


DEFAULT_RESOURCE_SPECS = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


def resource_specs(raw: Any, field: str, default: tuple[ResourceSpec, ...] = DEFAULT_RESOURCE_SPECS
                   ) -> tuple[ResourceSpec, ...]:
    """A list of {name, weight} (weight 0 or unset means 1; 1..100 allowed; names unique); empty gives `default`."""
    items = fields.sequence(raw, field)
    if not items:
        return default
    out: list[ResourceSpec] = []
    seen: set[str] = set()
    for i, r in enumerate(items):
        f = fields.join(field, i)
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or not r["name"]:
            raise InputError("expected a resource with a name and a weight", field=f)
        w = r.get("weight", 0) or 0
        if isinstance(w, bool) or not isinstance(w, int) or w < 0 or w > 100:
            raise InputError(f"expected a weight from 1 to 100, got {w!r}", field=f"{f}.weight")
        if r["name"] in seen:
            raise InputError(f"duplicate resource {r['name']!r}", field=f"{f}.name")
        seen.add(r["name"])
        out.append(ResourceSpec(r["name"], w or 1))
    return tuple(out)


def pod_request_list(pod: Pod, resources: list[str], use_requested: bool) -> np.ndarray:
    """calculatePodResourceRequestList: the pod's request per configured resource, in scheduler units."""
    key = ("request_list", tuple(resources), use_requested)
    cached = pod.cache.get(key)
    if cached is None:
        def compute() -> np.ndarray:
            reqs = pod_requests(pod, None if use_requested else NON_MISSING_DEFAULTS)
            vals = []
            for r in resources:
                q = reqs.get(r, Fraction(0))
                vals.append(milli_value_of(q) if r == CPU else value_of(q))
            out = np.array(vals, dtype=np.int64)
            out.flags.writeable = False  # shared by every pod of this shape
            return out

        cached = memo_by_shape(pod, key, compute)
    return cached


def allocatable_requested(cluster: ClusterState, rows: np.ndarray, resources: list[str], pod_req: np.ndarray,
                          use_requested: bool) -> tuple[np.ndarray, np.ndarray]:
    """(requested, allocatable) matrices of shape (len(rows), len(resources)), vectorised."""
    t = cluster.table
    n = len(rows)
    requested = np.zeros((n, len(resources)), dtype=np.int64)
    alloc = np.zeros((n, len(resources)), dtype=np.int64)
    for j, r in enumerate(resources):
        if pod_req[j] == 0 and is_scalar_resource(r):
            continue
        col = t.column.get(r)
        if r in (CPU, MEMORY):
            alloc[:, j] = t.alloc[rows, col]
            if use_requested:
                requested[:, j] = t.requested[rows, col] + pod_req[j]
            else:
                requested[:, j] = t.non_zero[rows, 0 if r == CPU else 1] + pod_req[j]
        elif r == EPHEMERAL_STORAGE or (is_scalar_resource(r) and col is not None):
            alloc[:, j] = t.alloc[rows, col]
            requested[:, j] = t.requested[rows, col] + pod_req[j]
            # A node whose allocatable does not name the resource is left out like alloc 0.
            alloc[:, j] = np.where(t.has[rows, col], alloc[:, j], 0)
    # Resources with zero allocatable are skipped by every scorer.
    requested = np.where(alloc == 0, 0, requested)
    return requested, alloc


def allocatable_requested_one(info: NodeInfo, resources: list[str], pod_req: np.ndarray,
                              use_requested: bool) -> tuple[np.ndarray, np.ndarray]:
    """The per-node form of `allocatable_requested` (from NodeInfo, not the table)."""
    requested = np.zeros(len(resources), dtype=np.int64)
    alloc = np.zeros(len(resources), dtype=np.int64)
    for j, r in enumerate(resources):
        if pod_req[j] == 0 and is_scalar_resource(r):
            continue
        if r in (CPU, MEMORY):
            a = info.allocatable.get(r, 0)
            if use_requested:
                used = info.requested.get(r, 0)
            else:
                used = info.non_zero_cpu if r == CPU else info.non_zero_mem
        elif r == EPHEMERAL_STORAGE or (is_scalar_resource(r) and r in info.allocatable):
            a = info.allocatable.get(r, 0)
            used = info.requested.get(r, 0)
        else:
            continue
        if a == 0:
            continue
        alloc[j] = a
        requested[j] = used + pod_req[j]
    return requested, alloc


def least_allocated(requested: np.ndarray, alloc: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """leastResourceScorer: Σ weight·((alloc−req)·100/alloc) / Σ weight over resources with alloc > 0."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    per = np.where(requested > alloc, 0, (safe - requested) * 100 // safe)
    return _weighted_mean_floor(per, valid, weights)


def most_allocated(requested: np.ndarray, alloc: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """mostResourceScorer: requested is capped at allocatable (pods without requests get defaults)."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    per = np.minimum(requested, safe) * 100 // safe
    return _weighted_mean_floor(per, valid, weights)


def _weighted_mean_floor(per: np.ndarray, valid: np.ndarray, weights: np.ndarray) -> np.ndarray:
    w = np.where(valid, weights[None, :], 0)
    num = (np.where(valid, per, 0) * w).sum(axis=1)
    den = w.sum(axis=1)
    return np.where(den == 0, 0, num // np.where(den == 0, 1, den))


def broken_linear(shape: list[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    """helper.BuildBrokenLinearFunction over an array of utilisations (Go's truncating division)."""
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(shape):
        hit = (~done) & (p <= u)
        if i == 0:
            out = np.where(hit, s, out)
        else:
            u0, s0 = shape[i - 1]
            val = s0 + go_div_array((s - s0) * (p - u0), u - u0)
            out = np.where(hit, val, out)
        done |= hit
    return out


def requested_to_capacity_ratio(requested: np.ndarray, alloc: np.ndarray, weights: np.ndarray,
                                shape: list[tuple[int, int]]) -> np.ndarray:
    """requestedToCapacityRatioScorer: the broken-linear shape of utilisation, weighted over positive scores,
    rounded (half away from zero)."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    util = np.where(requested > alloc, 100, requested * 100 // safe)
    per = broken_linear(shape, util)
    counted = valid & (per > 0)
    w = np.where(counted, weights[None, :], 0)
    num = (np.where(counted, per, 0) * w).sum(axis=1)
    den = w.sum(axis=1)
    ratio = num / np.where(den == 0, 1, den)
    return np.where(den == 0, 0, np.floor(ratio + 0.5)).astype(np.int64)


def balanced(requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    """balancedResourceScorer: (1 − std of the capped fractions) × 100, truncated.

    Two resources use upstream's shortcut |f0 − f1| / 2; more use the population standard deviation.
    """
    n = len(requested)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    frac = np.minimum(requested / safe, 1.0)
    count = valid.sum(axis=1)
    std = np.zeros(n, dtype=np.float64)
    # Valid columns first, in resource order.
    order = np.argsort(~valid, axis=1, kind="stable")
    ar = np.arange(n)
    if frac.shape[1] >= 2:
        two = count == 2
        if two.any():
            f0 = frac[ar, order[:, 0]]
            f1 = frac[ar, order[:, 1]]
            std = np.where(two, np.abs((f0 - f1) / 2), std)
    many = count > 2
    if many.any():
        total = np.zeros(n, dtype=np.float64)
        for j in range(frac.shape[1]):
            total = total + np.where(valid[:, j], frac[:, j], 0.0)
        mean = total / np.where(count == 0, 1, count)
        acc = np.zeros(n, dtype=np.float64)
        for j in range(frac.shape[1]):
            d = frac[:, j] - mean
            acc = acc + np.where(valid[:, j], d * d, 0.0)
        std = np.where(many, np.sqrt(acc / np.where(count == 0, 1, count)), std)
    return ((1 - std) * 100).astype(np.int64)


# ---------------------------------------------------------------- fast paths for the common case
#
# Most profiles score cpu and memory, which every node has: then no resource is left out, each
# (requested, allocatable) pair is a plain column over the rows, and the weighted mean has a constant
# denominator. These give exactly what the general forms above give, with a handful of 1-D operations.
# (Gathering rows of a column view, matrix[:, col][rows], is several times faster than matrix[rows, col]
# or matrix[rows].)


def plain_columns(cluster: ClusterState, rows: np.ndarray, resources: list[str], pod_req: np.ndarray,
                  use_requested: bool) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Per resource (requested, allocatable) over `rows` when every resource is cpu or memory with
    allocatable > 0 on every node; None otherwise (use `allocatable_requested`)."""
    if not _all_positive(cluster, resources):
        return None
    t = cluster.table
    out = []
    for j, r in enumerate(resources):
        col = t.column[r]
        alloc = t.alloc[:, col][rows]
        if use_requested:
            req = t.requested[:, col][rows] + pod_req[j]
        else:
            req = t.non_zero[:, 0 if r == CPU else 1][rows] + pod_req[j]
        out.append((req, alloc))
    return out


def plain_columns_apply(cluster: ClusterState, resources: list[str]) -> bool:
    """Whether `plain_columns` applies: every resource cpu or memory, with allocatable > 0 on every node."""
    return _all_positive(cluster, resources)




def _all_positive(cluster: ClusterState, resources: list[str]) -> bool:
    """Whether every resource is cpu or memory and every node's allocatable of it is > 0 (per node generation)."""
    memo: dict[tuple[int, tuple[str, ...]], bool] | None = cluster.indexes.get("all_positive")
    if memo is None:
        memo = cluster.indexes["all_positive"] = {}
    key = (cluster.node_generation, tuple(resources))
    ok = memo.get(key)
    if ok is None:
        t = cluster.table
        ok = bool(resources) and all(r in (CPU, MEMORY) for r in resources) and all(
            bool((t.alloc[:t.n, t.column[r]] > 0).all()) for r in resources)
        if len(memo) > 16:
            memo.clear()
        memo[key] = ok
    return ok


def least_allocated_columns(cols: list[tuple[np.ndarray, np.ndarray]], weights: np.ndarray) -> np.ndarray:
    """`least_allocated` over plain columns (every allocatable > 0)."""
    num: Any = 0
    den = 0
    for (req, alloc), w in zip(cols, weights.tolist(), strict=True):
        per = (alloc - req) * 100 // alloc
        per[req > alloc] = 0
        num = num + per * w if w != 1 else num + per
        den += w
    if den == 0:
        return np.zeros(len(cols[0][0]) if cols else 0, dtype=np.int64)
    return np.asarray(num // den, dtype=np.int64)


def balanced_columns(cols: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """`balanced` over plain columns: two resources use the shortcut |f0 − f1| / 2."""
    if len(cols) != 2:
        requested = np.stack([c[0] for c in cols], axis=1)
        alloc = np.stack([c[1] for c in cols], axis=1)
        return balanced(requested, alloc)
    (r0, a0), (r1, a1) = cols
    f0 = np.minimum(r0 / a0, 1.0)
    f1 = np.minimum(r1 / a1, 1.0)
    std = np.abs((f0 - f1) / 2)
    return ((1 - std) * 100).astype(np.int64)


# ---------------------------------------------------------------- per-row results kept current


class RowCache:
    """Per-row results, over every row of the NodeTable, of a computation that reads only that row's numbers.

    Pods of one shape ask the same question of every node; between two such pods only the rows the
    table logged as changed (usually the one node the last pod was bound to) can answer differently.
    An entry is computed once over all rows (`full`), then kept current by recomputing each changed row
    with the scalar form (`one`), or, when many rows changed since the entry was last read (a shape
    seen again after a while), with the vectorised form over just those rows (`some`); a new table, a
    new row or a reset log recomputes it whole. The least recently read entry goes first.
    """

    def __init__(self, limit: int = 256, few: int = 8) -> None:
        self._entries: OrderedDict[Hashable, list[Any]] = OrderedDict()
        self._limit = limit
        self._few = few

    def values(self, t: NodeTable, key: Hashable, full: Callable[[], np.ndarray],
               one: Callable[[int], Any], some: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        e = self._entries.get(key)
        log = t.changed_rows
        if e is None or e[0] is not t or e[1] != t.n or e[2] != t.changes_epoch:
            if e is None and len(self._entries) >= self._limit:
                self._entries.popitem(last=False)
            e = [t, t.n, t.changes_epoch, len(log), full()]
            self._entries[key] = e
        elif e[3] != len(log):
            values = e[4]
            pending = _pending(log, e[3])
            rows = pending.rows
            if some is not None and len(rows) > self._few:
                changed = _pending_array(pending)
                values[changed] = some(changed)
            else:
                for r in rows:
                    values[r] = one(r)
            e[3] = len(log)
        self._entries.move_to_end(key)
        return e[4]  # type: ignore[no-any-return]


class _Pending:
    """The last answer of `_pending` (replaced whole, never changed but for its array made once)."""

    __slots__ = ("log", "start", "end", "rows", "array")

    def __init__(self, log: list[int] | None, start: int, end: int, rows: set[int]) -> None:
        self.log, self.start, self.end, self.rows = log, start, end, rows
        self.array: np.ndarray | None = None


_LAST_PENDING = _Pending(None, -1, -1, set())


def _pending(log: list[int], start: int) -> _Pending:
    """The distinct rows logged since `start`. The caches of one pod shape (the fit verdict, both resource
    scores) were last read together, so they ask the same question in a row: the last answer is kept (a
    log only grows until it is replaced by a new list)."""
    global _LAST_PENDING
    last = _LAST_PENDING
    end = len(log)
    if last.log is not log or last.start != start or last.end != end:
        last = _LAST_PENDING = _Pending(log, start, end, set(log[start:]))
    return last


def _pending_array(p: _Pending) -> np.ndarray:
    """The rows of `p` as an array, made once."""
    arr = p.array
    if arr is None:
        # Each row once (np.unique costs more than the set for the few dozen rows usually pending).
        arr = p.array = np.fromiter(p.rows, dtype=np.int64, count=len(p.rows))
    return arr


class RowNumbers:
    """One table row's numbers as Python ints: read once for every cache that recomputes the row (the fit
    verdict and both resource scores read the same few numbers; NumPy scalar reads cost more than the sums)."""

    __slots__ = ("pod_count", "allowed_pods", "requested", "alloc", "non_zero")

    def __init__(self, t: NodeTable, r: int) -> None:
        self.pod_count: int = t.pod_count.item(r)
        self.allowed_pods: int = t.allowed_pods.item(r)
        self.requested: list[int] = t.requested[r].tolist()
        self.alloc: list[int] = t.alloc[r].tolist()
        self.non_zero: list[int] = t.non_zero[r].tolist()


# The rows read since the table last changed: (table, its change log, the log's length, the number of columns,
# the rows). Replaced whole on any change (every change of a row's numbers is logged; a new column is not).
_ROW_NUMBERS: tuple[NodeTable | None, list[int] | None, int, int, dict[int, RowNumbers]] = (None, None, -1, -1, {})


def row_numbers(t: NodeTable, r: int) -> RowNumbers:
    """Row r's current numbers."""
    global _ROW_NUMBERS
    table, log, end, width, rows = _ROW_NUMBERS
    cur = t.changed_rows
    if table is not t or log is not cur or end != len(cur) or width != len(t.resources):
        rows = {}
        _ROW_NUMBERS = (t, cur, len(cur), len(t.resources), rows)
    rn = rows.get(r)
    if rn is None:
        rn = rows[r] = RowNumbers(t, r)
    return rn


class ShapeArgs:
    """What a row cache's scalar form reads besides the row (columns, the request as Python ints), made once
    per request-shape array and table: pods of one shape share their request array (`pod_request_list`)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[np.ndarray, NodeTable, Any]] = {}

    def get(self, pod_req: np.ndarray, t: NodeTable, make: Callable[[], Any]) -> Any:
        hit = self._memo.get(id(pod_req))
        if hit is None or hit[0] is not pod_req or hit[1] is not t:
            if len(self._memo) > 256:
                self._memo.clear()
            hit = self._memo[id(pod_req)] = (pod_req, t, make())
        return hit[2]


def used_columns(t: NodeTable, resources: list[str], use_requested: bool) -> list[tuple[int, bool, int]]:
    """Per resource, where `least_allocated_one` reads it: (allocatable column, whether the requests are the
    `requested` column (else `non_zero`), the column there)."""
    out = []
    for res in resources:
        col = t.column[res]
        out.append((col, use_requested, col if use_requested else (0 if res == CPU else 1)))
    return out


def least_allocated_one(t: NodeTable, r: int, cols: list[tuple[int, bool, int]], pod_req: list[int],
                        weights: list[int]) -> int:
    """`least_allocated_columns` for one row, in Python integers (same results); cols from `used_columns`."""
    rn = row_numbers(t, r)
    num = den = 0
    for (col, requested, used_col), req, w in zip(cols, pod_req, weights, strict=True):
        a = rn.alloc[col]
        req += rn.requested[used_col] if requested else rn.non_zero[used_col]
        num += (0 if req > a else (a - req) * 100 // a) * w
        den += w
    return num // den if den else 0


def balanced_one(t: NodeTable, r: int, cols: list[int], pod_req: list[int]) -> int:
    """`balanced_columns` for two resources on one row, in Python floats (the same IEEE operations); cols:
    the resources' columns."""
    rn = row_numbers(t, r)
    c0, c1 = cols
    f0 = min(float(rn.requested[c0] + pod_req[0]) / float(rn.alloc[c0]), 1.0)
    f1 = min(float(rn.requested[c1] + pod_req[1]) / float(rn.alloc[c1]), 1.0)
    std = abs((f0 - f1) / 2)
    return int((1 - std) * 100)

"""The resource-allocation scorer shared by NodeResourcesFit's strategies and NodeResourcesBalancedAllocation.

For each configured resource: allocatable, and requested = what the node's pods request plus the pod.
cpu and memory use the non-zero requests (scoring defaults for containers without requests) unless
`use_requested`; a scalar resource the pod does not request is left out (alloc 0, as upstream's
bypass). The scorer function maps (requested, allocatable) matrices to one score per node.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    NON_MISSING_DEFAULTS,
    is_scalar_resource,
    pod_requests,
)
from kubesched.cluster.state import ClusterState, NodeInfo


def pod_request_list(pod: Pod, resources: list[str], use_requested: bool) -> np.ndarray:
    """calculatePodResourceRequestList: the pod's request per configured resource, in scheduler units."""
    key = ("request_list", tuple(resources), use_requested)
    cached = pod.cache.get(key)
    if cached is None:
        reqs = pod_requests(pod, None if use_requested else NON_MISSING_DEFAULTS)
        vals = []
        for r in resources:
            q = reqs.get(r, Fraction(0))
            vals.append(milli_value_of(q) if r == CPU else value_of(q))
        cached = np.array(vals, dtype=np.int64)
        pod.cache[key] = cached
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
    from kubesched.scheduler.plugins.gomath import go_div_array

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

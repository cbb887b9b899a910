"""The scoring strategies over NUMA zones: LeastAllocated, MostAllocated, BalancedAllocation, LeastNUMANodes.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/noderesourcetopology/score.go`, `least_allocated.go`,
`most_allocated.go`, `balanced_allocation.go` and `least_numa.go`. Only Guaranteed pods are scored (the
others score 100). For the allocation strategies on single-numa-node nodes each zone scores the pod's
requests against its available resources (Value(), rounded up; weights default to 1) and the node takes
the lowest non-zero zone score (a zone scoring 0 is passed over once another has scored); at container
scope the node score is the mean over init and app containers. LeastNUMANodes (any policy) scores how few
zones the pod — or its worst container — needs: 100 − n·(100 / maxNUMANodes), plus half a step when the
zones chosen are the closest possible ones.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

import numpy as np

from kubesched.api.quantity import value_of
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE
from kubesched.scheduler.plugins.gomath import go_div
from kubesched.scheduler.plugins.noderesourcetopology.numa import (
    NUMANode,
    is_resource_set_suitable,
    only_non_numa_resources,
)

MAX_DISTANCE = 255
INT64_MIN = -(2**63)

Strategy = Callable[[Mapping[str, Fraction], Mapping[str, Fraction], Mapping[str, int]], int]


def _weight(weights: Mapping[str, int], name: str) -> int:
    w = weights.get(name)
    return 1 if w is None or w < 1 else w


def _weighted(requested: Mapping[str, Fraction], available: Mapping[str, Fraction], weights: Mapping[str, int],
              one: Callable[[Fraction, Fraction], int]) -> int:
    total = 0
    weight_sum = 0
    for name, q in requested.items():
        w = _weight(weights, name)
        total += one(q, available.get(name, Fraction(0))) * w
        weight_sum += w
    # Upstream divides by zero (a panic) for a container with no requests: such a container scores 0.
    return go_div(total, weight_sum) if weight_sum else 0


def _least(requested: Fraction, capacity: Fraction) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    cap = value_of(capacity)
    return go_div((cap - value_of(requested)) * MAX_NODE_SCORE, cap)


def _most(requested: Fraction, capacity: Fraction) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div(value_of(requested) * MAX_NODE_SCORE, value_of(capacity))


def least_allocated(requested: Mapping[str, Fraction], available: Mapping[str, Fraction],
                    weights: Mapping[str, int]) -> int:
    return _weighted(requested, available, weights, _least)


def most_allocated(requested: Mapping[str, Fraction], available: Mapping[str, Fraction],
                   weights: Mapping[str, int]) -> int:
    return _weighted(requested, available, weights, _most)


def balanced_allocation(requested: Mapping[str, Fraction], available: Mapping[str, Fraction],
                        weights: Mapping[str, int]) -> int:
    fractions = []
    for name, q in requested.items():
        cap = value_of(available.get(name, Fraction(0)))
        f = 1.0 if cap == 0 else float(value_of(q)) / float(cap)
        if f > 1:
            return 0
        fractions.append(f)
    # gonum's stat.Variance is the unbiased sample variance (n − 1).
    n = len(fractions)
    variance = float(np.var(fractions, ddof=1)) if n > 1 else math.nan
    value = (1 - variance) * MAX_NODE_SCORE
    return INT64_MIN if math.isnan(value) else int(value)


STRATEGIES: dict[str, Strategy] = {"LeastAllocated": least_allocated, "MostAllocated": most_allocated,
                                   "BalancedAllocation": balanced_allocation}


def score_for_each_numa_node(requested: Mapping[str, Fraction], numa_nodes: list[NUMANode], strategy: Strategy,
                             weights: Mapping[str, int]) -> int:
    minimum = 0
    for numa in numa_nodes:
        s = strategy(requested, numa.resources, weights)
        if minimum == 0 or (s != 0 and s < minimum):
            minimum = s
    return minimum


# ---------------------------------------------------------------- LeastNUMANodes


def _avg_distance(numa_nodes: list[NUMANode], combo: tuple[int, ...]) -> np.float32:
    if not combo:
        return np.float32(MAX_DISTANCE)
    accu = 0
    for a in combo:
        for b in combo:
            accu += numa_nodes[a].costs.get(numa_nodes[b].numa_id, MAX_DISTANCE)
    return np.float32(accu) / np.float32(len(combo) * len(combo))


def _suitable(qos: str, numa_nodes: list[NUMANode], resources: Mapping[str, Fraction],
              combos: list[tuple[int, ...]]) -> tuple[tuple[int, ...] | None, bool]:
    min_avg = np.float32(MAX_DISTANCE)
    for combo in combos:
        d = _avg_distance(numa_nodes, combo)
        if d < min_avg:
            min_avg = d
    best: tuple[int, ...] | None = None
    best_distance = np.float32(256)
    for combo in combos:
        if any(name not in numa_nodes[i].resources for i in combo for name in resources):
            continue
        combined: dict[str, Fraction] = {}
        for i in combo:
            for name, q in numa_nodes[i].resources.items():
                combined[name] = combined.get(name, Fraction(0)) + q
        if not all(q == 0 or is_resource_set_suitable(qos, name, q, combined.get(name, Fraction(0)))
                   for name, q in resources.items()):
            continue
        d = _avg_distance(numa_nodes, combo)
        if d == min_avg:
            return combo, True
        if d < best_distance:
            best_distance = d
            best = combo
    return best, False


def numa_nodes_required(qos: str, numa_nodes: list[NUMANode],
                        resources: Mapping[str, Fraction]) -> tuple[list[int] | None, bool]:
    """The fewest zones (by index) that hold the resources, closest first; and whether they are the closest."""
    for size in range(1, len(numa_nodes) + 1):
        combos = list(itertools.combinations(range(len(numa_nodes)), size))
        combo, is_min = _suitable(qos, numa_nodes, resources, combos)
        if combo is not None:
            return sorted({numa_nodes[i].numa_id for i in combo}), is_min
    return None, False


def _normalize(count: int, is_min_distance: bool, max_numa_nodes: int) -> int:
    step = MAX_NODE_SCORE // max_numa_nodes
    score = MAX_NODE_SCORE - count * step
    return score + step // 2 if is_min_distance else score


def _subtract_from_numas(resources: Mapping[str, Fraction], numa_nodes: list[NUMANode], ids: list[int]) -> None:
    for name, quantity in resources.items():
        q = quantity
        for i in ids:
            if q == 0:
                break
            if i >= len(numa_nodes):
                continue
            available = numa_nodes[i].resources.get(name)
            if available is None:
                continue
            if q >= available:
                q -= available
                numa_nodes[i].resources[name] = Fraction(0)
            else:
                numa_nodes[i].resources[name] = available - q
                q = Fraction(0)


def least_numa_pod_scope(qos: str, numa_nodes: list[NUMANode], resources: Mapping[str, Fraction],
                         max_numa_nodes: int) -> int:
    if only_non_numa_resources(numa_nodes, resources):
        return MAX_NODE_SCORE
    ids, is_min = numa_nodes_required(qos, numa_nodes, resources)
    if ids is None:
        return MIN_NODE_SCORE
    return _normalize(len(ids), is_min, max_numa_nodes)


def least_numa_container_scope(qos: str, numa_nodes: list[NUMANode], containers: Sequence[Mapping[str, Fraction]],
                               max_numa_nodes: int) -> int:
    worst = 0
    all_min = True
    for requests in containers:
        if only_non_numa_resources(numa_nodes, requests):
            continue
        ids, is_min = numa_nodes_required(qos, numa_nodes, requests)
        if ids is None:
            return MIN_NODE_SCORE
        all_min = all_min and is_min
        worst = max(worst, len(ids))
        _subtract_from_numas(requests, numa_nodes, ids)
    if worst == 0:
        return MAX_NODE_SCORE
    return _normalize(worst, all_min, max_numa_nodes)

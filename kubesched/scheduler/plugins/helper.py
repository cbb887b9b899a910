"""Helpers the built-in scheduler plugins share (upstream's plugins/helper and small pieces of framework).

`default_normalize_score` is helper.DefaultNormalizeScore over a NumPy vector, with Go's integer
arithmetic; `node_static_mask` and `pod_cache_key` memoise per pod shape.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import MAX_NODE_SCORE, ShapeCache, all_pass
from kubesched.scheduler.plugins.gomath import go_div_array


def default_normalize_score(scores: np.ndarray, reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> None:
    """DefaultNormalizeScore, in place: scale so the highest score becomes `max_priority`.

    With `reverse`, the result is `max_priority - scaled` (a lower raw score is better). When every
    score is 0 (or none is positive) the scores stay as they are, or all become `max_priority` when
    reversed — exactly as upstream, which takes the max starting from 0.
    """
    if len(scores) == 0:
        return
    max_count = int(scores.max())
    if max_count <= 0:
        if reverse:
            scores[:] = max_priority
        return
    product = np.asarray(scores, dtype=np.int64) * max_priority
    # Go truncates toward zero; for the usual non-negative scores that is plain floor division.
    scaled = product // max_count if scores.min() >= 0 else go_div_array(product, max_count)
    if reverse:
        scaled = max_priority - scaled
    scores[:] = scaled


def node_static_mask(cache: ShapeCache, cluster: ClusterState, key: Hashable,
                     compute: Callable[[], np.ndarray],
                     per_row: Callable[[NodeInfo], Any] | None = None) -> np.ndarray:
    """A bool (or int) vector over every table row that depends only on node objects and a pod's shape.

    Memoised per (cluster, shape); 10,000 pods of one workload pay once. When node objects change, only
    their rows are recomputed with `per_row` (the value of one node); without it the vector is dropped.
    """
    return cache.get(cluster, (id(cluster), key), compute, per_row)  # type: ignore[no-any-return]


def node_static_filter(cache: ShapeCache, cluster: ClusterState, key: Hashable, passes: Callable[[NodeInfo], bool],
                       rows: np.ndarray, compute: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """A node-static Filter verdict over `rows`: `node_static_mask` of `passes`, or the shared all-pass
    mask (`framework.all_pass`) when every node passes."""
    def full() -> np.ndarray:
        return np.fromiter((passes(i) for i in cluster.node_infos), dtype=bool, count=cluster.num_nodes)

    e = cache.entry(cluster, (id(cluster), key), compute or full, passes)
    if e.every is None:
        e.every = bool(e.value.all())
    return all_pass(len(rows)) if e.every else e.value[rows]  # type: ignore[no-any-return]


def pod_cache_key(pod: Pod, name: str, compute: Callable[[], Hashable]) -> Hashable:
    """A pod's shape key for one plugin, computed once per pod object."""
    key = pod.cache.get(name)
    if key is None:
        key = compute()
        pod.cache[name] = key
    return key

"""TaintToleration: reject nodes with untolerated NoSchedule/NoExecute taints; prefer fewer PreferNoSchedule.

Filter: the first NoSchedule or NoExecute taint no toleration tolerates makes the node
UnschedulableAndUnresolvable, with upstream's generic reason (v1.35 no longer names the taint).
Score: the number of PreferNoSchedule taints not tolerated by the pod's tolerations whose effect is
PreferNoSchedule or empty; NormalizeScore reverses it (fewer is better). Both are node-static per
tolerations, so they are memoised per pod shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Pod, Taint, Toleration, find_untolerated_taint, tolerations_tolerate_taint
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import (
    MAX_NODE_SCORE,
    SUCCESS,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ShapeCache,
    Status,
    unresolvable,
)
from kubesched.scheduler.plugins.helper import default_normalize_score, node_static_filter

PRE_SCORE_KEY = "PreScoreTaintToleration"
# The scores score_nodes returned when every node scored 0 (NormalizeScore knows them by identity).
ALL_ZERO_KEY = "TaintToleration/allZero"
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"
DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")


def prefer_no_schedule_tolerations(tolerations: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    """Tolerations with effect PreferNoSchedule or empty (an empty effect matches every effect)."""
    return tuple(t for t in tolerations if t.effect in ("", "PreferNoSchedule"))


def count_intolerable_prefer_no_schedule(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> int:
    return sum(1 for t in taints if t.effect == "PreferNoSchedule" and not tolerations_tolerate_taint(tolerations, t))


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin):
    # Counts are >= 0 and the reversed DefaultNormalizeScore maps them onto [0, 100].
    scores_in_range = True
    name = "TaintToleration"
    Args = no_args("TaintToleration")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._cache = ShapeCache(limit=1024)  # int64 vectors over all nodes: bound the memory

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", ("add", "update")), ClusterEvent("Pod", ("update",))]

    # ------------------------------------------------------------ filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if find_untolerated_taint(node_info.node.taints, pod.tolerations, DO_NOT_SCHEDULE_EFFECTS) is not None:
            return unresolvable(ERR_REASON_UNTOLERATED)
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        tolerations = pod.tolerations

        def compute() -> np.ndarray:
            out = np.ones(cluster.num_nodes, dtype=bool)
            verdicts: dict[tuple[Taint, ...], bool] = {}  # nodes of a pool share their taints
            for info in cluster.node_infos:
                taints = info.node.taints
                if not taints:
                    continue
                ok = verdicts.get(taints)
                if ok is None:
                    ok = find_untolerated_taint(taints, tolerations, DO_NOT_SCHEDULE_EFFECTS) is None
                    verdicts[taints] = ok
                out[info.index] = ok
            return out

        def passes(info: NodeInfo) -> bool:
            return find_untolerated_taint(info.node.taints, tolerations, DO_NOT_SCHEDULE_EFFECTS) is None

        return node_static_filter(self._cache, cluster, ("filter", tolerations), passes, rows, compute)

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        state.write(PRE_SCORE_KEY, prefer_no_schedule_tolerations(pod.tolerations))
        return SUCCESS

    def _tolerations(self, state: CycleState, pod: Pod) -> tuple[Toleration, ...]:
        tol = state.read(PRE_SCORE_KEY)
        return tol if tol is not None else prefer_no_schedule_tolerations(pod.tolerations)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        return count_intolerable_prefer_no_schedule(node_info.node.taints, self._tolerations(state, pod)), SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        tolerations = self._tolerations(state, pod)

        def compute() -> np.ndarray:
            out = np.zeros(cluster.num_nodes, dtype=np.int64)
            counts: dict[tuple[Taint, ...], int] = {}
            for info in cluster.node_infos:
                taints = info.node.taints
                if not taints:
                    continue
                c = counts.get(taints)
                if c is None:
                    c = count_intolerable_prefer_no_schedule(taints, tolerations)
                    counts[taints] = c
                out[info.index] = c
            return out

        def one(info: NodeInfo) -> int:
            return count_intolerable_prefer_no_schedule(info.node.taints, tolerations)

        e = self._cache.entry(cluster, (id(cluster), ("score", tolerations)), compute, one)
        if e.zero is None:
            e.zero = not e.value.any()
        if e.zero:
            # No node has a PreferNoSchedule taint the pod does not tolerate (the usual cluster): every
            # score is 0, and NormalizeScore will make each 100 without looking.
            zeros = np.zeros(len(rows), dtype=np.int64)
            state.write(ALL_ZERO_KEY, zeros)
            return zeros
        return e.value[rows]  # type: ignore[no-any-return]

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status:
        if state.read(ALL_ZERO_KEY) is scores:
            scores[:] = MAX_NODE_SCORE  # what DefaultNormalizeScore(reverse) makes of scores that are all 0
        else:
            default_normalize_score(scores, reverse=True)
        return SUCCESS

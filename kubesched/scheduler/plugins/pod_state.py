"""PodState: prefer nodes with terminating pods (room about to free up) over nodes with nominated pods.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/podstate/pod_state.go`: a node scores its terminating
pods (deletionTimestamp set) minus the pods nominated to it (NominatedPodsForNode, any priority); then
NormalizeScore maps the lowest..highest raw scores onto 0..100 ((s − lowest) · 100 / (highest − lowest),
Go integer division; every node 0 when all are equal). No args.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.state import NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, ScorePlugin, Status
from kubesched.scheduler.plugins.gomath import go_div_array


def min_max_normalize(scores: np.ndarray) -> None:
    """The NormalizeScore scheduler-plugins' PodState and NodeResourcesAllocatable share, in place."""
    if not len(scores):
        return
    highest, lowest = int(scores.max()), int(scores.min())
    old_range = highest - lowest
    if old_range == 0:
        scores[:] = MIN_NODE_SCORE
        return
    new_range = MAX_NODE_SCORE - MIN_NODE_SCORE
    scores[:] = go_div_array((scores - lowest) * new_range, old_range) + MIN_NODE_SCORE


class PodState(ScorePlugin):
    name = "PodState"
    Args = no_args("PodState")

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        nominated = len(self.handle.nominator.pods_for_node(node_info.name))
        terminating = sum(1 for p in node_info.pods.values() if p.meta.deletion_timestamp is not None)
        return terminating - nominated, Status()

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        min_max_normalize(scores)
        return Status()

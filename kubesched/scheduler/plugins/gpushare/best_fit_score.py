"""BestFitScore: the node the pod leaves the least free, CPU and GPU weighed equally, scores highest.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/best_fit_score.go`
(getBestFitScore) and its NormalizeScore (`plugin_utils.go`). Raw score =
int64(100 × (1 − [(CPU left − CPU asked) / 128000 × 0.5 + (milli-GPU left − milli-GPU asked) / 8000 × 0.5]));
NormalizeScore then maps the feasible nodes' raw scores onto 0..100 with Go integer arithmetic
((s − lowest) × 100 / (highest − lowest); all 0 when they are equal). A node short of either resource,
or whose model the pod does not accept, is an error, as upstream (Filter removes such nodes first).
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.gpu import MAX_SPEC_CPU, MAX_SPEC_GPU
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, Status, error
from kubesched.scheduler.plugins.gomath import go_div_array
from kubesched.scheduler.plugins.gpushare.policy import GpuPolicyScore
from kubesched.scheduler.plugins.gpushare.resource import NodeRes, PodRes, node_res, pod_res


def best_fit_score(node: NodeRes, pod: PodRes) -> int | None:
    """getBestFitScore; None where upstream returns -1 (a resource short)."""
    free = (float(node.cpu_left), float(node.total_left))
    req = (float(pod.cpu), float(pod.total))
    spec = (float(MAX_SPEC_CPU), float(MAX_SPEC_GPU))
    score = 0.0
    for f, r, m in zip(free, req, spec, strict=True):
        if f < r:
            return None
        score += (f - r) / m * 0.5
    return int((1.0 - score) * float(MAX_NODE_SCORE))


def normalize(scores: np.ndarray) -> None:
    """plugin.NormalizeScore, in place: min-max onto [0, 100] in Go integer arithmetic."""
    if len(scores) == 0:
        return
    hi, lo = int(scores.max()), int(scores.min())
    if hi == lo:
        scores[:] = MIN_NODE_SCORE
        return
    scores[:] = go_div_array((scores - lo) * (MAX_NODE_SCORE - MIN_NODE_SCORE), hi - lo) + MIN_NODE_SCORE


class BestFitScore(GpuPolicyScore):
    name = "BestFitScore"

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        node, p = node_res(self.gpu, node_info.index), pod_res(pod)
        if not node.accessible(p):
            return MIN_NODE_SCORE, error(f"Node ({node_info.name}) does not match GPU type request of pod {pod.key}")
        s = best_fit_score(node, p)
        if s is None:
            return MIN_NODE_SCORE, error(f"the score between node({node_info.name}) and pod({pod.key}) is negative, "
                                         "should not happen")
        return s, Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        gpu = self.gpu
        p = pod_res(pod)
        if p.model and not gpu.model_mask(p.model)[gpu.model_code[rows]].all():
            return None
        cpu = gpu.cpu_left(rows)
        tot = gpu.total_left(rows)
        if (cpu < p.cpu).any() or (tot < p.total).any():
            return None
        s = (0.0 + (cpu - p.cpu) / float(MAX_SPEC_CPU) * 0.5) + (tot - p.total) / float(MAX_SPEC_GPU) * 0.5
        return ((1.0 - s) * float(MAX_NODE_SCORE)).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        normalize(scores)
        return Status()

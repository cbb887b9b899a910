"""Simon: the published simulator's binder, and a share-of-allocatable Score.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/simon.go`. Bind binds the pod
through the client, as DefaultBinder does (upstream: the simulator's fake client update). Score, for a pod
that requests something: round(100 × the largest, over the node's allocatable resources, of
request / (allocatable − request)) (algo.Share: 1 when nothing is left but something is asked, 0 when
nothing is asked), then min-max normalised; a pod that requests nothing scores 100.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.resources import pod_requests
from kubesched.client.interface import ApiError
from kubesched.cluster.state import NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import MAX_NODE_SCORE, BindPlugin, Code, CycleState, ScorePlugin, Status
from kubesched.scheduler.plugins.gomath import go_round
from kubesched.scheduler.plugins.gpushare.best_fit_score import normalize


def share(alloc: float, total: float) -> float:
    """algo.Share."""
    if total == 0:
        return 0.0 if alloc == 0 else 1.0
    return alloc / total


class Simon(BindPlugin, ScorePlugin):
    name = "Simon"
    Args = no_args("Simon")

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        try:
            self.handle.client.bind(pod, node_name)
        except ApiError as e:
            return Status(Code.ERROR, [f"binding rejected: {e.message}"])
        return Status()

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        req = pod_requests(pod)
        if not req:
            return MAX_NODE_SCORE, Status()
        res = 0.0
        for name, alloc in node_info.node.allocatable.items():
            asked = req.get(name, 0)
            s = share(float(asked), float(alloc - asked))
            if s > res:
                res = s
        return go_round(float(MAX_NODE_SCORE) * res), Status()

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray, rows: np.ndarray) -> Status | None:
        normalize(scores)
        return Status()

"""GpuClusteringScore: keep pods of one GPU kind together (shares with shares, 2-GPU pods with 2-GPU pods).

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/gpu_clustering_score.go`. A pod's
kind is its GPU affinity tag (`share-gpu`, `1-gpu`, `2-gpu`, …); a node's kinds are those of the pods on
it. With b = 25 × (8000 − the node's free milli-GPU) / 8000 (Go integer arithmetic), the score is
b + 75 when the node holds only the pod's kind, b + 50 when it holds that kind among others, b + 25
when it holds no GPU pod, b alone when it holds only other kinds; a pod without GPUs scores 0 everywhere.
A node whose model the pod does not accept is an error, as upstream (Filter removes such nodes first).
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.gpu import MAX_SPEC_GPU, NO_GPU_TAG, gpu_request
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, Status, error
from kubesched.scheduler.plugins.gomath import go_div_array
from kubesched.scheduler.plugins.gpushare.policy import GpuPolicyScore


class GpuClusteringScore(GpuPolicyScore):
    name = "GpuClusteringScore"

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        rows = np.array([node_info.index], dtype=np.int64)
        req = gpu_request(pod)
        if not self.gpu.model_mask(req.model)[self.gpu.model_code[rows]][0]:
            return MIN_NODE_SCORE, error("failed to get nodeRes or podRes")
        return int(self._scores(pod, rows)[0]), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        req = gpu_request(pod)
        if req.model and not self.gpu.model_mask(req.model)[self.gpu.model_code[rows]].all():
            return None  # the per-node form reports the error
        return self._scores(pod, rows)

    def _scores(self, pod: Pod, rows: np.ndarray) -> np.ndarray:
        tag = gpu_request(pod).affinity
        if tag == NO_GPU_TAG:
            return np.full(len(rows), MIN_NODE_SCORE, dtype=np.int64)
        gpu = self.gpu
        col = gpu.tag_col(tag)
        held = gpu.tags[rows] > 0
        kinds = held.sum(axis=1)
        same = held[:, col]
        quarter = MAX_NODE_SCORE // 4
        base = go_div_array(quarter * (MAX_SPEC_GPU - gpu.total_left(rows)), MAX_SPEC_GPU)
        offset = np.where(same, np.where(kinds == 1, MAX_NODE_SCORE * 3 // 4, MAX_NODE_SCORE * 2 // 4),
                          np.where(kinds == 0, MAX_NODE_SCORE // 4, 0))
        return (base + offset).astype(np.int64)

"""GpuPackingScore: fill partly used GPUs first, then free GPUs on used nodes, then free nodes.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/gpu_packing_score.go`
(getPackingScore), in Go integer arithmetic. A pod without GPU milli scores 0. Otherwise the pod's GPUs
are taken from the devices with the least free that fit (stable order):

- the node is entirely free (every device fully free): max(33 − free GPUs, free GPUs);
- some of the devices taken are fully free: max(50 − how many, 33);
- only partly used devices are taken: max(100 − Σ(free milli × 100 / 1000) / 10, 50).

A node whose model the pod does not accept, or whose devices cannot take the pod, is an error, as
upstream (Filter removes such nodes first).
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.gpu import MILLI, gpu_request
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, Status, error
from kubesched.scheduler.plugins.gpushare.policy import GpuPolicyScore
from kubesched.scheduler.plugins.gpushare.resource import NodeRes, PodRes, node_res, pod_res


def packing_score(node: NodeRes, pod: PodRes) -> int | None:
    """getPackingScore; None where upstream returns an error."""
    free = node.fully_free
    if free == node.count:
        return max(MAX_NODE_SCORE // 3 - free, free)
    need = pod.count
    used: list[int] = []
    from_free = 0
    for i in node.sorted_index(True):
        if need == 0:
            break
        x = node.left[i]
        if pod.milli <= x:
            need -= 1
            used.append(i)
            if x == MILLI:
                from_free += 1
    if need != 0:
        return None
    if from_free > 0:
        return max(MAX_NODE_SCORE // 2 - from_free, MAX_NODE_SCORE // 3)
    ratio = sum(node.left[i] * 100 // MILLI for i in used)
    return max(MAX_NODE_SCORE - ratio // 10, MAX_NODE_SCORE // 2)


class GpuPackingScore(GpuPolicyScore):
    name = "GpuPackingScore"

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        if gpu_request(pod).milli <= 0:
            return MIN_NODE_SCORE, Status()
        node, p = node_res(self.gpu, node_info.index), pod_res(pod)
        if not node.accessible(p):
            return MIN_NODE_SCORE, error(f"Node ({node_info.name}) does not match GPU type request of pod {pod.key}")
        s = packing_score(node, p)
        if s is None:
            return MIN_NODE_SCORE, error(f"failed to schedule pod({pod.key}) on node({node_info.name})")
        return s, Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        req = gpu_request(pod)
        if req.milli <= 0:
            return np.full(len(rows), MIN_NODE_SCORE, dtype=np.int64)
        gpu = self.gpu
        if req.model and not gpu.model_mask(req.model)[gpu.model_code[rows]].all():
            return None
        count = gpu.count[rows]
        left = gpu.left[rows]
        width = left.shape[1]
        real = np.arange(width)[None, :] < count[:, None]
        free = ((left == MILLI) & real).sum(axis=1)
        # Devices by free milli-GPU ascending, stable; devices past the node's count sort last.
        key = np.where(real, left, np.iinfo(np.int64).max)
        order = np.argsort(key, axis=1, kind="stable")
        sl = np.take_along_axis(left, order, axis=1)
        sreal = np.take_along_axis(real, order, axis=1)
        fit = sreal & (sl >= req.milli)
        take = fit & (np.cumsum(fit, axis=1) <= req.count)
        got = take.sum(axis=1)
        from_free = (take & (sl == MILLI)).sum(axis=1)
        ratio = np.where(take, sl * 100 // MILLI, 0).sum(axis=1)
        s_free_node = np.maximum(MAX_NODE_SCORE // 3 - free, free)
        s_free_gpus = np.maximum(MAX_NODE_SCORE // 2 - from_free, MAX_NODE_SCORE // 3)
        s_shared = np.maximum(MAX_NODE_SCORE - ratio // 10, MAX_NODE_SCORE // 2)
        out = np.where(free == count, s_free_node, np.where(from_free > 0, s_free_gpus, s_shared))
        if ((free != count) & (got < req.count)).any():
            return None
        return out.astype(np.int64)

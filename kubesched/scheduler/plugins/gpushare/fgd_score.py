"""FGDScore: Fragmentation Gradient Descent — place the pod where it grows GPU fragmentation the least.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/fgd_score.go`
(calculateGpuShareFragExtendScore, allocateGpuIdBasedOnFGDScore); the fragmentation measure is
`kubesched.cluster.gpufrag` (upstream `pkg/utils/frag.go`) against the target workload of the node's
GpuTable (set by the simulator from the workload trace; otherwise derived once from the pods in the
cluster state, as upstream derives it from its workload).

Score = int64(sigmoid((frag before − frag after) / 1000) × 100). For a GPU share the "after" is tried on
every device with room and the node takes the best device's score (the first such device is where
Reserve puts the pod when `gpuSelMethod: FGDScore`); for whole GPUs and CPU-only pods "after" is the
node with the pod's CPU and GPUs taken (NodeResource.Sub: the devices with the least free that fit), and
Reserve takes the first fully free devices. A pod that requests nothing scores 100; a node whose model the
pod does not accept is an error, as upstream (Filter removes such nodes first).

Vectorised over nodes: every node's current fragmentation is cached until its state changes, and the
states after placement are evaluated once per distinct (node, free milli of the device) pair.
"""

from __future__ import annotations

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.resources import pod_requests
from kubesched.cluster.gpu import TypicalPod, gpu_request, pod_milli_cpu
from kubesched.cluster.gpufrag import FragCache, fragmentation, typical_pods
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, Handle, Status, error
from kubesched.scheduler.plugins.gpushare.args import GpuPolicyArgs
from kubesched.scheduler.plugins.gpushare.policy import GpuPolicyScore
from kubesched.scheduler.plugins.gpushare.resource import NodeRes, allocate_exclusive, pod_res

MILLI_SCALE = 1000.0


def _fgd(delta: np.ndarray) -> np.ndarray:
    """int64(sigmoid(delta / 1000) × 100), elementwise."""
    return (1.0 / (1.0 + np.exp(-(delta / MILLI_SCALE))) * float(MAX_NODE_SCORE)).astype(np.int64)


class FGDScore(GpuPolicyScore):
    name = "FGDScore"

    def __init__(self, args: GpuPolicyArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.frag = FragCache.of(self.gpu)

    def _ensure_target(self) -> None:
        gpu = self.gpu
        if gpu.target is None:
            gpu.target = workload_target(list(self.handle.cluster.pods.values()))

    # ------------------------------------------------------------ the measure on candidate states

    def _after(self, cpu_left: np.ndarray, left: np.ndarray, model: np.ndarray) -> np.ndarray:
        target = self.frag.table()
        if target is None:
            return np.zeros(len(cpu_left))
        return fragmentation(target, self.gpu, cpu_left, left, model)

    def scores_and_devices(self, pod: Pod, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: the score, and for a share the first device reaching it (-1 otherwise)."""
        self._ensure_target()
        gpu = self.gpu
        return self._evaluate(pod, gpu.cpu_left(rows), gpu.left[rows], gpu.model_code[rows], gpu.count[rows],
                              self.frag.current(rows))

    def _evaluate(self, pod: Pod, cpu_left: np.ndarray, left: np.ndarray, model: np.ndarray, count: np.ndarray,
                  before: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        req = gpu_request(pod)
        pcpu = pod_milli_cpu(pod)
        width = left.shape[1]
        real = np.arange(width)[None, :] < count[:, None]
        device = np.full(len(cpu_left), -1, dtype=np.int64)
        if req.count == 1 and req.milli < 1000:
            fit = real & (left >= req.milli)
            # One evaluation per distinct free amount on a node: devices with equal free milli give
            # equal states (and the first of them wins a tie, as upstream's strict '>').
            same_before = (left[:, :, None] == left[:, None, :]) & fit[:, None, :] & \
                np.tri(width, width, -1, dtype=bool)[None, :, :]
            first = fit & ~same_before.any(axis=2)
            pr, pd = np.nonzero(first)
            new_left = left[pr].copy()
            new_left[np.arange(len(pr)), pd] -= req.milli
            after = self._after(cpu_left[pr] - pcpu, new_left, model[pr])
            s = _fgd(before[pr] - after)
            dev_score = np.full(left.shape, -1, dtype=np.int64)
            dev_score[pr, pd] = s
            # Devices sharing a free amount share the score of the first of them.
            src = np.argmax((left[:, :, None] == left[:, None, :]) & first[:, None, :], axis=2)
            dev_score = np.where(fit, np.take_along_axis(dev_score, src, axis=1), -1)
            best = dev_score.max(axis=1)
            scores = np.where(best >= 0, best, 0)
            device = np.where(best >= 0, np.argmax(dev_score == best[:, None], axis=1), -1)
            return scores.astype(np.int64), device
        # Whole GPUs or no GPU: NodeResource.Sub (a short node is left as it is).
        short = (cpu_left < pcpu) | (count < req.count)
        new_left = left.copy()
        if req.count > 0:
            key = np.where(real, left, np.iinfo(np.int64).max)
            order = np.argsort(key, axis=1, kind="stable")
            sl = np.take_along_axis(left, order, axis=1)
            elig = np.take_along_axis(real, order, axis=1) & (sl >= req.milli)
            take = elig & (np.cumsum(elig, axis=1) <= req.count)
            sl = sl - np.where(take, req.milli, 0)
            np.put_along_axis(new_left, order, sl, axis=1)
        new_left = np.where(short[:, None], left, new_left)
        new_cpu = np.where(short, cpu_left, cpu_left - pcpu)
        after = self._after(new_cpu, new_left, model)
        return _fgd(before - after), device

    # ------------------------------------------------------------ Score

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        if not pod_requests(pod):
            return MAX_NODE_SCORE, Status()
        rows = np.array([node_info.index], dtype=np.int64)
        req = gpu_request(pod)
        if not self.gpu.model_mask(req.model)[self.gpu.model_code[rows]][0]:
            return MIN_NODE_SCORE, error(f"Node ({node_info.name}) does not match GPU type request of pod {pod.key}")
        return int(self.scores_and_devices(pod, rows)[0][0]), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        if not pod_requests(pod):
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        req = gpu_request(pod)
        if req.model and not self.gpu.model_mask(req.model)[self.gpu.model_code[rows]].all():
            return None
        return self.scores_and_devices(pod, rows)[0]

    # ------------------------------------------------------------ Reserve's choice

    def place_devices(self, pod: Pod, node: NodeRes) -> list[int] | None:
        """allocateGpuIdBasedOnFGDScore on the node Reserve is placing the pod on."""
        req = gpu_request(pod)
        if req.count == 1 and req.milli < 1000:
            self._ensure_target()
            cpu = np.array([node.cpu_left], dtype=np.int64)
            left = np.array([list(node.left) or [0]], dtype=np.int64)
            model = np.array([self.gpu.model_code_of(node.model)], dtype=np.int64)
            count = np.array([node.count], dtype=np.int64)
            _, device = self._evaluate(pod, cpu, left, model, count, self._after(cpu, left, model))
            return [int(device[0])] if device[0] >= 0 else None
        return allocate_exclusive(node, pod_res(pod))


def workload_target(pods: list[Pod], popularity_threshold: int = 95, increase_step: int = 1,
                    include_cpu_pods: bool = True, gpu_res_weight: float = 0.0) -> tuple[TypicalPod, ...]:
    """The typical pods of a list of pods (upstream's TypicalPodsConfig defaults of its experiments)."""
    shapes = [pod_res(p).shape for p in pods]
    return typical_pods(shapes, popularity_threshold, increase_step, include_cpu_pods, gpu_res_weight)

"""One node's and one pod's GPU-relevant resources, for the per-node forms of the GPU plugins.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/type/resource.go` (PodResource, NodeResource and
its methods) and `pkg/type/open-gpu-share/cache/gpunodeinfo.go` (AllocateGpuId, the Filter's fit test),
and the device pickers of `pkg/simulator/plugin/open_gpu_share.go`. The vectorised forms in each plugin
compute the same numbers over NumPy rows; tests check that both agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.gpu import MILLI, GpuRequest, GpuTable, gpu_request, model_allows, pod_milli_cpu


@dataclass(frozen=True, slots=True)
class PodRes:
    """PodResource: milli-CPU (non-zero request), per-GPU milli, GPU count, accepted models."""

    cpu: int
    milli: int
    count: int
    model: str

    @property
    def total(self) -> int:
        return self.milli * self.count

    @property
    def shape(self) -> tuple[int, int, int, str]:
        return (self.cpu, self.milli, self.count, self.model)


def pod_res(pod: Pod) -> PodRes:
    req = gpu_request(pod)
    return PodRes(pod_milli_cpu(pod), req.milli, req.count, req.model)


def pod_res_of(req: GpuRequest, cpu: int) -> PodRes:
    return PodRes(cpu, req.milli, req.count, req.model)


@dataclass(frozen=True, slots=True)
class NodeRes:
    """NodeResource: CPU left and capacity, the free milli-GPU of each device (device order), the model."""

    cpu_left: int
    cpu_capacity: int
    left: tuple[int, ...]
    model: str

    @property
    def count(self) -> int:
        return len(self.left)

    @property
    def total_left(self) -> int:
        return sum(self.left)

    @property
    def fully_free(self) -> int:
        return sum(1 for x in self.left if x == MILLI)

    def sorted_index(self, ascending: bool = True) -> list[int]:
        """SortedMilliGpuLeftIndexList: device indexes by free milli-GPU, stable."""
        idx = list(range(len(self.left)))
        sign = 1 if ascending else -1
        return sorted(idx, key=lambda i: sign * self.left[i])

    def accessible(self, pod: PodRes) -> bool:
        return model_allows(self.model, pod.model)

    def sub(self, pod: PodRes) -> NodeRes:
        """NodeResource.Sub: CPU, then each GPU from the devices with the least free that fit (an error
        upstream leaves the copy as far as it got)."""
        if self.cpu_left < pod.cpu or self.count < pod.count:
            return self
        out = replace(self, cpu_left=self.cpu_left - pod.cpu)
        if pod.count == 0:
            return out
        left = list(self.left)
        need = pod.count
        for i in self.sorted_index(True):
            if pod.milli <= left[i]:
                need -= 1
                left[i] -= pod.milli
                if need <= 0:
                    break
        return replace(out, left=tuple(left))

    def formalized(self) -> list[tuple[int, str]]:
        """ToFormalizedGpuResourceList: each partly used device, then all fully free ones as one entry."""
        out: list[tuple[int, str]] = []
        idle: list[int] = []
        for i, x in enumerate(self.left):
            if x == MILLI:
                idle.append(i)
            elif x > 0:
                out.append((x, str(i)))
        if idle:
            out.append((len(idle) * MILLI, "-".join(str(i) for i in idle)))
        return out


def node_res(gpu: GpuTable, row: int) -> NodeRes:
    rows = np.array([row], dtype=np.int64)
    return NodeRes(int(gpu.cpu_left(rows)[0]), int(gpu.cpu_capacity(rows)[0]), tuple(gpu.node_devices(row)),
                   gpu.models[int(gpu.model_code[row])])


# ---------------------------------------------------------------- device placement


def allocate_exclusive(node: NodeRes, pod: PodRes) -> list[int] | None:
    """AllocateExclusiveGpuId: fully free devices in device order until the pod's total milli is met."""
    need = pod.total
    out: list[int] = []
    for i, x in enumerate(node.left):
        if need <= 0:
            break
        if x == MILLI:
            out.append(i)
            need -= MILLI
    return out if need <= 0 else None


def best_fit_device(node: NodeRes, milli: int) -> int | None:
    """allocateGpuIdBasedOnBestFit for a share: the device with the least free that fits (first wins)."""
    best = None
    for i, x in enumerate(node.left):
        if x >= milli and (best is None or x < node.left[best]):
            best = i
    return best


def worst_fit_device(node: NodeRes, milli: int) -> int | None:
    best = None
    for i, x in enumerate(node.left):
        if x >= milli and (best is None or x > node.left[best]):
            best = i
    return best


def fits(node: NodeRes, req: GpuRequest, preset: tuple[int, ...]) -> bool:
    """GpuNodeInfo.AllocateGpuId's verdict (the Filter): a preset device list must all have room; one GPU
    needs a device with room; several are packed greedily, as many per device as fit."""
    if req.milli <= 0 or req.count <= 0 or node.count == 0:
        return False
    if preset:
        return all(0 <= d < node.count and node.left[d] >= req.milli for d in preset)
    if req.count == 1:
        return any(x >= req.milli for x in node.left)
    return sum(max(x, 0) // req.milli for x in node.left) >= req.count

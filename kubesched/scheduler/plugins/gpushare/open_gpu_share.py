"""Open-Gpu-Share: the GPU-share Filter and Reserve of the FGD paper's simulator.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/open_gpu_share.go` with the fit
test of `pkg/type/open-gpu-share/cache/gpunodeinfo.go` (AllocateGpuId).

Filter: a pod without GPU milli passes. Otherwise a node is rejected (Unschedulable, reason
"Node:<name>") when it has no GPU, when its model is not one the pod accepts, or when its devices cannot
take the pod: one GPU needs a device with at least the pod's milli free; several GPUs are packed
greedily, as many per device as fit (so whole GPUs need that many fully free devices); devices preset
in the pod's `alibabacloud.com/gpu-index` annotation must each have room.

Reserve picks the devices (a preset annotation wins): a share takes one device chosen by
`gpuSelMethod` — `best` (least free that fits, first on ties), `worst`, `random` (uniform among those
that fit) or a score plugin's own choice (FGDScore, DotProductScore); whole GPUs take the first fully
free devices in device order. It records them on the pod as `alibabacloud.com/gpu-index`, a patch of
the pod's annotations through the client (upstream's PatchPod): the device table follows. Unreserve removes what Reserve wrote.
Upstream also stamps `alibabacloud.com/assume-time` with the wall clock; a simulation has none to stamp.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.resources import scheduler_request
from kubesched.cluster.events import Cause
from kubesched.cluster.gpu import GPU_INDEX, MILLI, GpuTable, format_gpu_index, gpu_request, pod_gpu_index
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    ReservePlugin,
    Status,
    error,
    unschedulable,
)
from kubesched.scheduler.plugins.gpushare.args import GPU_SEL_BUILTIN, OpenGpuShareArgs
from kubesched.scheduler.plugins.gpushare.resource import (
    NodeRes,
    allocate_exclusive,
    best_fit_device,
    fits,
    node_res,
    pod_res,
    worst_fit_device,
)

NAME = "Open-Gpu-Share"
_RESERVED = NAME + "/reserved"


class DevicePlacer(Protocol):
    """A score plugin that also chooses devices (registered upstream in allocateGpuIdFunc)."""

    def place_devices(self, pod: Pod, node: NodeRes) -> list[int] | None: ...


class OpenGpuShare(FilterPlugin, ReservePlugin):
    name = NAME
    Args = OpenGpuShareArgs
    args: OpenGpuShareArgs

    def __init__(self, args: OpenGpuShareArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.gpu = GpuTable.of(handle.cluster)
        sel = self.args.gpu_sel_method
        if sel not in GPU_SEL_BUILTIN:
            fwk = handle.framework
            enabled: set[str] = set()
            if fwk is not None:
                for point in ("score", "multiPoint"):
                    enabled.update(r.name for r in fwk.profile.plugins[point].enabled)
            if fwk is not None and sel not in enabled:
                raise InputError(f"gpuSelMethod {sel!r} is neither best, worst nor random, nor a score plugin this "
                                 f"profile enables", field="gpuSelMethod")
        self._placer: DevicePlacer | None = None
        self._rejections: dict[int, Status] = {}
        self._rejections_generation = -1

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete", "update")), ClusterEvent("Node", ("add", "update"))]

    # ------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        req = gpu_request(pod)
        if req.milli <= 0:
            return Status()
        node = node_res(self.gpu, node_info.index)
        if node.count == 0 or not node.accessible(pod_res(pod)) or not fits(node, req, pod_gpu_index(pod) or ()):
            return unschedulable("Node:" + node_info.name)
        return Status()

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        req = gpu_request(pod)
        if req.milli <= 0:
            return np.ones(len(rows), dtype=bool)
        gpu = self.gpu
        count = gpu.count[rows]
        ok = count > 0
        if req.model:
            ok &= gpu.model_mask(req.model)[gpu.model_code[rows]]
        if req.count <= 0:
            return np.zeros(len(rows), dtype=bool)
        left = gpu.left[rows]
        preset = pod_gpu_index(pod)
        if preset:
            width = left.shape[1]
            for d in preset:
                ok &= (d >= 0) & (d < count) & (left[:, min(max(d, 0), width - 1)] >= req.milli)
        elif req.count == 1:
            ok &= (left >= req.milli).any(axis=1)
        else:
            ok &= (np.maximum(left, 0) // req.milli).sum(axis=1) >= req.count
        return ok

    def filter_statuses(self, state: CycleState, pod: Pod, cluster: ClusterState,
                        rows: np.ndarray) -> list[Status] | None:
        ok = self.filter_nodes(state, pod, cluster, rows)
        if self._rejections_generation != cluster.node_generation:
            self._rejections = {}
            self._rejections_generation = cluster.node_generation
        out = []
        for r, passes in zip(rows.tolist(), ok.tolist(), strict=True):
            if passes:
                out.append(Status())
                continue
            # One Status per node, reused (statuses are read, never changed, once returned).
            st = self._rejections.get(r)
            if st is None:
                st = self._rejections[r] = Status(Code.UNSCHEDULABLE, ["Node:" + cluster.node_infos[r].node.name],
                                                  self.name)
            out.append(st)
        return out

    # ------------------------------------------------------------ Reserve

    def _placer_plugin(self) -> DevicePlacer | None:
        if self._placer is None and self.handle.framework is not None:
            pl = self.handle.framework.plugins.get(self.args.gpu_sel_method)
            if pl is not None and hasattr(pl, "place_devices"):
                self._placer = pl  # type: ignore[assignment]
        return self._placer

    def choose_devices(self, pod: Pod, node: NodeRes) -> list[int] | None:
        """allocateGpuId: the preset annotation, else the configured method."""
        preset = pod_gpu_index(pod)
        req = gpu_request(pod)
        if preset:
            if all(0 <= d < node.count and node.left[d] >= req.milli for d in preset):
                return list(preset)
            return None
        res = pod_res(pod)
        if res.milli < MILLI and res.count > 1:
            return None  # upstream panics: "the pod requests more than one share gpu"
        sel = self.args.gpu_sel_method
        if sel in GPU_SEL_BUILTIN:
            if res.milli >= MILLI:
                return allocate_exclusive(node, res)
            if sel == "best":
                d = best_fit_device(node, res.milli)
            elif sel == "worst":
                d = worst_fit_device(node, res.milli)
            else:
                cands = [i for i, x in enumerate(node.left) if x >= res.milli]
                d = cands[int(self.handle.rng.integers(len(cands)))] if cands else None
            return [d] if d is not None else None
        placer = self._placer_plugin()
        if placer is None:
            return None
        return placer.place_devices(pod, node)

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if gpu_request(pod).milli <= 0:
            return Status()
        cluster = self.handle.cluster
        info = cluster.node_info_by_name.get(node_name)
        cur = cluster.pods.get(pod.key, pod)
        if info is None:
            return error(f"node {node_name} not found")
        node = node_res(self.gpu, info.index)
        if cur.key in info.pods:
            # Reserve sees the node as scheduling saw it (upstream reads the cycle's snapshot, taken
            # before the pod was assumed): without the pod's own CPU.
            node = dataclasses.replace(node, cpu_left=node.cpu_left + scheduler_request(cur).get("cpu", 0))
        devices = self.choose_devices(cur, node)
        if not devices:
            return error(f"failed to allocate gpu to pod({pod.key}) to node({node_name})")
        if pod_gpu_index(cur) != tuple(devices):
            self.handle.client.patch_pod_annotations(cur, {GPU_INDEX: format_gpu_index(devices)},
                                                     cause=Cause.SCHEDULER)
            state.write(_RESERVED, True)
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if not state.read(_RESERVED):
            return
        cluster = self.handle.cluster
        cur = cluster.pods.get(pod.key)
        if cur is not None and GPU_INDEX in cur.meta.annotations:
            self.handle.client.patch_pod_annotations(cur, {GPU_INDEX: None}, cause=Cause.SCHEDULER)
        state.delete(_RESERVED)

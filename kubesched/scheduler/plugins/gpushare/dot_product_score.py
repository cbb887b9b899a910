"""DotProductScore: Tetris-style packing — the smaller the dot product of what the node has left and what
the pod asks, the higher the score.

Mirrors hkust-adsl/kubernetes-scheduler-simulator `pkg/simulator/plugin/dot_product_score.go` with
`GenerateSchedulingMatchGroups` (`pkg/utils/utils.go`) and the virtual node/pod resources of
`pkg/type/resource.go`. A node without the pod's CPU left scores 0. Each match group pairs a virtual
node vector (`dimExtMethod`: `merge` — [CPU left, all free milli-GPU]; `share`/`divide` — one per
partly used device that fits, plus one for the fully free devices, CPU shared or divided by the GPU
share; `extend` — one dimension per device group) with a virtual pod vector, both normalised
(`normMethod`: `max` — by 128 CPUs and 8 GPUs; `node` — by the node's capacity; `pod` — by the pod's
request, then tanh(x/10)). Score = int64(100 × (1 − dot / dimensions)) of the best group; that group's
device is where Reserve puts the pod when `gpuSelMethod` names this plugin (with `merge` there is none,
so Reserve fails, as upstream's does).
"""

from __future__ import annotations

import math

import numpy as np

from kubesched.api.objects import Pod
from kubesched.cluster.gpu import MAX_SPEC_CPU, MAX_SPEC_GPU, MILLI
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, Status
from kubesched.scheduler.plugins.gpushare.policy import GpuPolicyScore
from kubesched.scheduler.plugins.gpushare.resource import NodeRes, PodRes, allocate_exclusive, node_res, pod_res

Group = tuple[list[float], list[float], str]


def _ids(devs: list[int] | None) -> str:
    return "-".join(str(d) for d in devs) if devs else ""


def virtual_nodes(node: NodeRes, pod: PodRes, method: str) -> list[tuple[list[float], str]]:
    """ToVirtualNodeResourceList."""
    if node.cpu_left < pod.cpu:
        return []
    req = pod.total
    total = node.total_left
    if method == "merge":
        return [([float(node.cpu_left), float(total)], "")]
    if method in ("share", "divide"):
        out: list[tuple[list[float], str]] = []
        if req < MILLI:
            for i, x in enumerate(node.left):
                if x >= MILLI or x < req:
                    continue
                cpu = float(node.cpu_left) if method == "share" else _div(node.cpu_left * x, total)
                out.append(([cpu, float(x)], str(i)))
        idle = node.fully_free
        if req <= idle * MILLI:
            ids = _ids(allocate_exclusive(node, pod))
            cpu = float(node.cpu_left) if method == "share" else _div(node.cpu_left * idle * MILLI, total)
            out.append(([cpu, float(idle * MILLI)], ids))
        return out
    return [([float(node.cpu_left)] + [float(x) for x, _ in node.formalized()], "")]


def _div(a: int, b: int) -> float:
    """float64(a) / float64(b) with Go's IEEE results for a zero divisor (no exception)."""
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return float(a) / float(b)


def virtual_pods(pod: PodRes, node: NodeRes, method: str) -> list[tuple[list[float], str]]:
    """ToVirtualPodResourceList."""
    req = pod.total
    if method != "extend":
        return [([float(pod.cpu), float(req)], "")]
    groups = node.formalized()
    out = []
    for i, (x, ids) in enumerate(groups):
        if x < req:
            continue
        vec = [float(pod.cpu)] + [float(req) if j == i else 0.0 for j in range(len(groups))]
        out.append((vec, ids if x < MILLI else _ids(allocate_exclusive(node, pod))))
    return out


def _normalize(vec: list[float], norm: list[float]) -> list[float]:
    return [v / n if n > 0 else 0.0 for v, n in zip(vec, norm, strict=True)]


def match_groups(node: NodeRes, pod: PodRes, method: str, norm: str) -> list[Group]:
    """GenerateSchedulingMatchGroups."""
    out: list[Group] = []
    n_groups = len(node.formalized()) if method == "extend" else 1
    for nvec, nid in virtual_nodes(node, pod, method):
        for pvec, pid in virtual_pods(pod, node, method):
            gid = nid if method in ("share", "divide") else (pid if method == "extend" else "")
            if norm == "node":
                scale = [float(node.cpu_capacity)] + [float(node.count * MILLI)] * n_groups
            elif norm == "pod":
                scale = [float(pod.cpu)] + [float(pod.total)] * n_groups
            else:
                scale = [float(MAX_SPEC_CPU)] + [float(MAX_SPEC_GPU)] * n_groups
            if len(scale) == len(nvec) == len(pvec):
                nvec2, pvec2 = _normalize(nvec, scale), _normalize(pvec, scale)
            else:
                nvec2, pvec2 = list(nvec), list(pvec)
            out.append((nvec2, pvec2, gid))
    return out


def dot_product_score(node: NodeRes, pod: PodRes, method: str, norm: str) -> tuple[int, str]:
    """calculateDotProductScore: (score, the best group's device ids)."""
    score = -1.0
    gpu_id = ""
    for nvec, pvec, gid in match_groups(node, pod, method, norm):
        if not nvec or len(nvec) != len(pvec):
            continue
        cur = 0.0
        for a, b in zip(nvec, pvec, strict=True):
            cur += a * b
        cur /= float(len(pvec))
        if norm == "pod":
            cur = math.tanh(cur / 10)
        cur = 1 - cur
        if score < cur:
            score = cur
            gpu_id = gid
    if score == -1:
        return MIN_NODE_SCORE, ""
    return int(float(MAX_NODE_SCORE) * score), gpu_id


class DotProductScore(GpuPolicyScore):
    name = "DotProductScore"

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        s, _ = dot_product_score(node_res(self.gpu, node_info.index), pod_res(pod), self.args.dim_ext_method,
                                 self.args.norm_method)
        return s, Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray | None:
        if self.args.dim_ext_method != "merge":
            return None
        gpu = self.gpu
        p = pod_res(pod)
        cpu_left = gpu.cpu_left(rows)
        total = gpu.total_left(rows)
        pcpu, ptot = float(p.cpu), float(p.total)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.args.norm_method == "max":
                s0 = np.full(len(rows), float(MAX_SPEC_CPU))
                s1 = np.full(len(rows), float(MAX_SPEC_GPU))
            elif self.args.norm_method == "node":
                s0 = gpu.cpu_capacity(rows).astype(np.float64)
                s1 = (gpu.count[rows] * MILLI).astype(np.float64)
            else:
                s0 = np.full(len(rows), pcpu)
                s1 = np.full(len(rows), ptot)
            n0 = np.where(s0 > 0, cpu_left / s0, 0.0)
            n1 = np.where(s1 > 0, total / s1, 0.0)
            p0 = np.where(s0 > 0, pcpu / s0, 0.0)
            p1 = np.where(s1 > 0, ptot / s1, 0.0)
            cur = (n0 * p0 + n1 * p1) / 2.0
            if self.args.norm_method == "pod":
                cur = np.tanh(cur / 10)
            score = (float(MAX_NODE_SCORE) * (1 - cur)).astype(np.int64)
        return np.where(cpu_left >= p.cpu, score, MIN_NODE_SCORE).astype(np.int64)

    def place_devices(self, pod: Pod, node: NodeRes) -> list[int] | None:
        """allocateGpuIdBasedOnDotProduct: the device(s) of the best match group."""
        _, gid = dot_product_score(node, pod_res(pod), self.args.dim_ext_method, self.args.norm_method)
        return [int(x) for x in gid.split("-")] if gid else None

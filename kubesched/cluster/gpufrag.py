"""GPU fragmentation against a target workload, the measure FGD descends (the FGD paper, USENIX ATC'23).

Follows hkust-adsl/kubernetes-scheduler-simulator `pkg/utils/frag.go` (GetTypicalPods,
NodeGpuShareFragAmount, GetNodePodFrag, FragAmountSumExceptQ3) and `pkg/type/resource.go`
(TargetPodList ordering, NodeResource.Sub).

The target workload is the most frequent pod shapes (CPU, per-GPU milli, GPU count, GPU models) that
cover `popularityThreshold` % of the workload's pods, their shares renormalised to 1. A node's
fragmentation is the share-weighted amount of its idle milli-GPU that a typical pod could not use:

- a CPU-only typical pod: all idle GPU (it would leave them idle either way);
- a pod the node's model does not serve: all idle GPU;
- a pod the node can host (enough devices with that much free, enough CPU): the free milli-GPU of the
  devices too small for it;
- a pod it cannot host: all idle GPU.

Sums follow upstream's float order exactly (per category in typical-pod order, then the categories in
order), so identical node states give identical amounts and FGD's integer scores tie as upstream's do.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np

from kubesched.cluster.gpu import GpuTable, TypicalPod, model_allows

# The categories of upstream's FragRatioDataMap, in index order.
Q1_LACK_BOTH, Q2_LACK_GPU, Q3_SATISFIED, Q4_LACK_CPU, XL_SATISFIED, XR_LACK_CPU, NO_ACCESS = range(7)
CATEGORIES = ("q1_lack_both", "q2_lack_gpu", "q3_satisfied", "q4_lack_cpu", "xl_satisfied", "xr_lack_cpu",
              "no_access")

Shape = tuple[int, int, int, str]  # (milli-CPU, per-GPU milli, GPU count, models): upstream's PodResource


def typical_pods(shapes: Iterable[Shape], popularity_threshold: int = 95, increase_step: int = 1,
                 include_cpu_pods: bool = True, gpu_res_weight: float = 0.0) -> tuple[TypicalPod, ...]:
    """GetTypicalPods: the most frequent shapes until `popularity_threshold` % of the pods are covered.

    Shapes are counted (a whole-GPU pod weighs 1 + count × gpu_res_weight when that is positive), sorted
    by count then (CPU, milli, count, models) all descending, taken `increase_step` at a time until the
    cumulative count reaches the threshold, and their shares renormalised over what was taken.
    """
    if not 0 < popularity_threshold <= 100:
        raise ValueError(f"popularity threshold must be in (0, 100], got {popularity_threshold}")
    counts: dict[Shape, float] = {}
    total = 0.0
    for shape in shapes:
        cpu, milli, count, model = shape
        if not include_cpu_pods and count == 0:
            continue
        w = 1.0
        if gpu_res_weight > 0 and milli == 1000:
            w = 1.0 + float(count) * gpu_res_weight
        counts[shape] = counts.get(shape, 0.0) + w
        total += w
    if not counts:
        return ()
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], kv[0][3]), reverse=True)
    names = [s for s, _ in ordered]
    pct = [c for _, c in ordered]
    expected = float(popularity_threshold) * total / 100.0
    step = increase_step if increase_step > 0 else 10
    i = taken = 0
    cum = 0.0
    while cum < expected and i < len(pct):
        taken += step
        while i < taken and i < len(pct):
            cum += pct[i]
            pct[i] = pct[i] / total
            i += 1
    if i < len(pct):
        norm = cum / total
        pct = [p / norm for p in pct[:i]]
        names = names[:i]
    return tuple(TypicalPod(s[0], s[1], s[2], s[3], p) for s, p in zip(names, pct, strict=True))


class TargetTable:
    """The typical pods as arrays, with the model access table over a GpuTable's model codes."""

    def __init__(self, pods: tuple[TypicalPod, ...]) -> None:
        self.pods = pods
        self.cpu = np.array([p.cpu for p in pods], dtype=np.int64)
        self.milli = np.array([p.milli for p in pods], dtype=np.int64)
        self.count = np.array([p.count for p in pods], dtype=np.int64)
        self.freq = np.array([p.freq for p in pods], dtype=np.float64)
        self.is_cpu = self.milli == 0
        self.millis = np.unique(np.where(self.is_cpu, 1, self.milli))
        self.midx = np.searchsorted(self.millis, np.where(self.is_cpu, 1, self.milli))
        self.cpu_cols = np.flatnonzero(self.is_cpu)
        self.gpu_cols = np.flatnonzero(~self.is_cpu)
        self._access = np.zeros((0, len(pods)), dtype=bool)

    def access(self, gpu: GpuTable) -> np.ndarray:
        """(models, typical pods): whether a node of each model serves each typical pod."""
        if self._access.shape[0] != len(gpu.models):
            self._access = np.array([[model_allows(m, p.model) for p in self.pods] for m in gpu.models],
                                    dtype=bool).reshape(len(gpu.models), len(self.pods))
        return self._access


def _seq(amounts: np.ndarray) -> np.ndarray:
    """Row sums of (typical pods, nodes) amounts, added in typical-pod order (upstream's order)."""
    out = np.zeros(amounts.shape[1])
    for row in amounts:
        out = out + row
    return out


def fragmentation(target: TargetTable, gpu: GpuTable, cpu_left: np.ndarray, left: np.ndarray,
                  model_code: np.ndarray, breakdown: bool = False) -> np.ndarray:
    """NodeGpuShareFragAmount(...).FragAmountSumExceptQ3() for each node state given as rows of
    (cpu_left, left[devices], model_code); with `breakdown`, the seven category amounts instead.

    Each category sums, in typical-pod order, only the typical pods that can land in it (adding the zeros
    of the others would not change a float); the categories are then added in upstream's order."""
    n = len(cpu_left)
    per = np.zeros((7, n))
    if n == 0 or not target.pods:
        return per.T.copy() if breakdown else np.zeros(n)
    total = left.sum(axis=1)
    totalf = total.astype(np.float64)
    cpu_cols = target.cpu_cols
    if len(cpu_cols):
        ft = target.freq[cpu_cols, None] * totalf[None, :]  # freq × float64(idle milli)
        ok = cpu_left[None, :] >= target.cpu[cpu_cols, None]
        per[XL_SATISFIED] = _seq(np.where(ok, ft, 0.0))
        per[XR_LACK_CPU] = _seq(np.where(ok, 0.0, ft))
    gpu_cols = target.gpu_cols
    if len(gpu_cols):
        millis = target.millis
        lv = left[:, :, None]
        ge = (lv >= millis[None, None, :]).sum(axis=1).T  # (distinct millis, nodes)
        lt = np.where(lv < millis[None, None, :], lv, 0).sum(axis=1).T
        midx = target.midx[gpu_cols]
        freq = target.freq[gpu_cols, None]
        ft = freq * totalf[None, :]
        cpuok = cpu_left[None, :] >= target.cpu[gpu_cols, None]
        can = ge[midx] >= target.count[gpu_cols, None]
        access = target.access(gpu)[:, gpu_cols]
        restricted = not access.all()
        acc = access[model_code].T if restricted else np.ones((len(gpu_cols), n), dtype=bool)
        q3 = acc & can & cpuok
        per[Q1_LACK_BOTH] = _seq(np.where(acc & ~can & ~cpuok, ft, 0.0))
        per[Q2_LACK_GPU] = _seq(np.where(q3, freq * lt[midx].astype(np.float64),
                                         np.where(acc & ~can & cpuok, ft, 0.0)))
        per[Q4_LACK_CPU] = _seq(np.where(acc & can & ~cpuok, ft, 0.0))
        if restricted:
            per[NO_ACCESS] = _seq(np.where(acc, 0.0, ft))
        if breakdown:
            per[Q3_SATISFIED] = _seq(np.where(q3, freq * (total[None, :] - lt[midx]).astype(np.float64), 0.0))
    if breakdown:
        return per.T.copy()  # type: ignore[no-any-return]
    out = np.zeros(n)
    for c in (Q1_LACK_BOTH, Q2_LACK_GPU, Q4_LACK_CPU, XL_SATISFIED, XR_LACK_CPU, NO_ACCESS):
        out = out + per[c]
    return out


class FragCache:
    """Each node's current fragmentation against the GpuTable's target, recomputed only for nodes whose
    state (CPU left, devices) changed since it was last read."""

    def __init__(self, gpu: GpuTable) -> None:
        self.gpu = gpu
        self._target_pods: tuple[TypicalPod, ...] | None = None
        self.target: TargetTable | None = None
        self._frag = np.zeros(0)
        self._cpu = np.zeros(0, dtype=np.int64)
        self._ver = np.zeros(0, dtype=np.int64)

    @classmethod
    def of(cls, gpu: GpuTable) -> FragCache:
        cache = _CACHES.get(gpu)
        if cache is None:
            cache = _CACHES[gpu] = cls(gpu)
        return cache

    def table(self) -> TargetTable | None:
        pods = self.gpu.target
        if pods is not self._target_pods:
            self._target_pods = pods
            self.target = TargetTable(pods) if pods else None
            self._ver = np.zeros(0, dtype=np.int64)
        return self.target

    def current(self, rows: np.ndarray) -> np.ndarray:
        """The fragmentation of each node in `rows` now (milli-GPU)."""
        target = self.table()
        gpu = self.gpu
        if target is None:
            return np.zeros(len(rows))
        n = gpu.n
        if len(self._ver) < n:
            grow = n - len(self._ver)
            self._frag = np.concatenate([self._frag, np.zeros(grow)])
            self._cpu = np.concatenate([self._cpu, np.zeros(grow, dtype=np.int64)])
            self._ver = np.concatenate([self._ver, np.full(grow, -1, dtype=np.int64)])
        cpu = gpu.cpu_left(rows)
        stale = (self._ver[rows] != gpu.version[rows]) | (self._cpu[rows] != cpu)
        if stale.any():
            r = rows[stale]
            self._frag[r] = fragmentation(target, gpu, cpu[stale], gpu.left[r], gpu.model_code[r])
            self._cpu[r] = cpu[stale]
            self._ver[r] = gpu.version[r]
        return self._frag[rows]

    def cluster_total(self) -> float:
        """The cluster's fragmentation: the sum over every node (milli-GPU)."""
        rows = np.arange(self.gpu.n, dtype=np.int64)
        return float(self.current(rows).sum()) if len(rows) else 0.0


_CACHES: weakref.WeakKeyDictionary[GpuTable, FragCache] = weakref.WeakKeyDictionary()

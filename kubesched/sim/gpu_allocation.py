"""GPU allocation against arrived GPU demand — the FGD paper's headline measure — and GPU fragmentation.

Follows hkust-adsl/kubernetes-scheduler-simulator: `pkg/simulator/analysis.go` (ClusterGpuFragReport,
logged before the first pod and after every pod: used milli-GPU, arrived milli-GPU, the cluster's
fragmentation amount) and `experiments/analysis/merge_alloc_discrete.py` / `merge_frag_discrete.py`
(the published curves: for each arrived-demand percentage k = 0 … 130, the mean over the samples whose
arrived demand rounds to k — or, when none does, to k − 1 … k + 1 — of allocated milli-GPU as a
percentage of the cluster's GPUs; fragmentation likewise as milli-GPU per GPU, in percent).

The recorder listens to the cluster state: each pod that arrives (is added without a node) closes the
sample of the state its predecessor left — with pods arriving one at a time, that is the state after the
predecessor was placed or dropped — and `finish()` takes the last one. So there is one sample per pod and
none before the first: upstream's report before the first pod runs while the cluster has no nodes yet
(`pkg/simulator/core.go` calls ClusterGpuFragReport before RunCluster creates them), and returns without
logging — an extra sample of 0 % at 0 % would lower the curve's first point.
"""

from __future__ import annotations

import csv
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.cluster.events import Event, EventType
from kubesched.cluster.gpu import GpuTable, gpu_request
from kubesched.cluster.gpufrag import FragCache
from kubesched.cluster.state import ClusterState
from kubesched.errors import InputError

POINTS = 131  # arrived demand 0 … 130 %


class GpuAllocationRecorder:
    def __init__(self, cluster: ClusterState, fragmentation: bool) -> None:
        self.gpu = GpuTable.of(cluster)
        self.frag = FragCache.of(self.gpu) if fragmentation else None
        self.arrived_now = 0
        self.pods_arrived = 0
        self.arrived: list[int] = []
        self.used: list[int] = []
        self.fragmentation: list[float] = []
        # Read-only, and it must see the state as each arrival finds it: subscribed as an index.
        cluster.subscribe(self._on_event, index=True)

    def _on_event(self, ev: Event) -> None:
        if ev.type is EventType.ADDED and ev.kind == "Pod" and not ev.obj.node_name:
            if self.pods_arrived:
                self.sample()  # the state the previous pod left
            self.pods_arrived += 1
            self.arrived_now += gpu_request(ev.obj).total

    def sample(self) -> None:
        self.arrived.append(self.arrived_now)
        self.used.append(self.gpu.used_milli)
        if self.frag is not None:
            self.fragmentation.append(self.frag.cluster_total())

    def finish(self) -> dict[str, Any]:
        """The last sample, and the run's curves (allocation and fragmentation by arrived demand)."""
        if self.pods_arrived:
            self.sample()
        total_gpus = self.gpu.capacity_milli // 1000
        return {
            "total_gpus": total_gpus,
            "arrived": list(self.arrived),
            "used": list(self.used),
            "fragmentation": list(self.fragmentation),
            "allocation_curve": allocation_curve(self.arrived, self.used, total_gpus),
            "fragmentation_curve": fragmentation_curve(self.arrived, self.fragmentation, total_gpus)
            if self.frag is not None else None,
        }


def _bins(arrived: list[int], total_gpus: int) -> np.ndarray:
    return np.round(np.asarray(arrived, dtype=np.float64) / total_gpus / 10, 0)


def _discrete(ratio: np.ndarray, values: np.ndarray, scale: float = 1.0) -> list[float | None]:
    """Per point k: round(scale × mean of the values whose arrived ratio is k (else k − 1 … k + 1), 2)."""
    out: list[float | None] = []
    for k in range(POINTS):
        sel = ratio == k
        if not sel.any():
            sel = (ratio >= k - 1) & (ratio <= k + 1)
            if not sel.any():
                out.append(None)
                continue
        out.append(float(np.round(scale * values[sel].mean(), 2)))
    return out


def allocation_curve(arrived: list[int], used: list[int], total_gpus: int) -> list[float | None]:
    """merge_alloc_discrete: allocated GPU % at each arrived-demand % 0 … 130 (None: no sample near)."""
    if total_gpus <= 0 or not arrived:
        return [None] * POINTS
    alloc = np.round(np.asarray(used, dtype=np.float64) / total_gpus / 10, 2)
    return _discrete(_bins(arrived, total_gpus), alloc)


def fragmentation_curve(arrived: list[int], frag: list[float], total_gpus: int) -> list[float | None]:
    """merge_frag_discrete: fragmented milli-GPU per GPU, in %, at each arrived-demand % 0 … 130."""
    if total_gpus <= 0 or not arrived:
        return [None] * POINTS
    # Upstream logs the amount with two decimals and averages those.
    return _discrete(_bins(arrived, total_gpus), np.round(np.asarray(frag, dtype=np.float64), 2),
                     100 / 1000 / total_gpus)


def read_published(path: str, workload: str | None = None) -> dict[str, dict[str, np.ndarray]]:
    """Curves in the published layout (workload, sc_policy, tune, seed, [total_gpus,] 0 … 130):
    workload → sc_policy → an array (seeds × 131), NaN where a run has no value."""
    out: dict[str, dict[str, list[list[float]]]] = {}
    with open(path, newline="") as fh:
        rows = csv.DictReader(fh)
        missing = [c for c in ("workload", "sc_policy", "0", "130") if c not in (rows.fieldnames or [])]
        if missing:
            raise InputError(f"no column {missing[0]!r}; expected the published layout (workload, sc_policy, tune, "
                             "seed, total_gpus, 0 … 130)", file=path)
        for line, r in enumerate(rows, start=2):
            if workload is not None and r["workload"] != workload:
                continue
            try:
                vals = [float(r[str(k)]) if r.get(str(k)) not in (None, "") else math.nan for k in range(POINTS)]
            except ValueError:
                raise InputError(f"row {line}: expected numbers in columns 0 … 130", file=path) from None
            out.setdefault(r["workload"], {}).setdefault(r["sc_policy"], []).append(vals)
    return {w: {p: np.array(v, dtype=np.float64) for p, v in pols.items()} for w, pols in out.items()}


@dataclass(frozen=True, slots=True)
class CurveComparison:
    """Our seeds' curves against the published seeds' curves of the same policy and trace."""

    mean: list[float]  # our mean over seeds at each point (NaN where no run reached it)
    published_mean: list[float]
    published_min: list[float]
    published_max: list[float]
    max_gap: float  # the largest |ours − published| over the points both have, in percentage points
    max_gap_at: int  # where it is (arrived demand, %)
    inside_band: float  # the share of those points where our mean lies inside the published min–max


def compare_curves(ours: np.ndarray, published: np.ndarray) -> CurveComparison:
    """Compare two sets of curves (runs × POINTS, NaN where missing) point by point."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a point no run reached is NaN, not an error
        mine = np.nanmean(ours, axis=0)
        pmean = np.nanmean(published, axis=0)
        lo, hi = np.nanmin(published, axis=0), np.nanmax(published, axis=0)
    ok = ~np.isnan(mine) & ~np.isnan(pmean)
    if not ok.any():
        gap_max, at, inside = math.nan, 0, math.nan
    else:
        gap = np.abs(mine - pmean)[ok]
        at = int(np.flatnonzero(ok)[int(gap.argmax())])
        gap_max = float(gap.max())
        inside = float(((mine >= lo - 1e-9) & (mine <= hi + 1e-9))[ok].mean())
    return CurveComparison([float(v) for v in mine], [float(v) for v in pmean], [float(v) for v in lo],
                           [float(v) for v in hi], gap_max, at, inside)

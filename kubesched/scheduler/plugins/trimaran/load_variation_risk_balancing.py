"""LoadVariationRiskBalancing: balance the risk of load variation across nodes (scheduler-plugins Trimaran).

Per resource (cpu, memory) with metrics, over the node's allocatable:

    mu    = (average usage + pod request) / allocatable          clamped to [0, 1]
    sigma = margin · (stdev / allocatable) ^ (1 / sensitivity)    clamped to [0, 1]
    score = (1 - (mu + sigma) / 2) · 100

The node's score is the smaller of the two when both resources have metrics, else the one that has,
rounded half away from zero. A node without metrics scores 0; NormalizeScore is a no-op. Memory is
handled in MiB as floats, as upstream. The pods bound recently are not taken into account (upstream
registers the handler but its Score never reads it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.metrics.base import CPU_TYPE, MEMORY_TYPE, resource_data
from kubesched.scheduler.framework import MAX_NODE_SCORE, MIN_NODE_SCORE, SUCCESS, CycleState, Handle, ScorePlugin, Status
from kubesched.scheduler.plugins.gomath import go_round_array
from kubesched.scheduler.plugins.trimaran.collector import TRIMARAN_SPEC_FIELDS, Collector, TrimaranArgs
from kubesched.scheduler.plugins.trimaran.resourcestats import MEGA_FACTOR, allocatable_units, effective_resource

DEFAULT_SAFE_VARIANCE_MARGIN = 1.0
DEFAULT_SAFE_VARIANCE_SENSITIVITY = 1.0


def compute_scores(avg_pct: np.ndarray, std_pct: np.ndarray, capacity: np.ndarray, req: float,
                   margin: float, sensitivity: float) -> np.ndarray:
    """computeScore over rows (capacity already in the resource's unit: millicores or MiB)."""
    ok = capacity > 0
    cap = np.where(ok, capacity, 1.0)
    used_avg = avg_pct * capacity / 100
    used_std = std_pct * capacity / 100
    r = max(req, 0.0)
    used_avg = np.maximum(np.minimum(used_avg, cap), 0)
    used_std = np.maximum(np.minimum(used_std, cap), 0)
    mu = np.clip((used_avg + r) / cap, 0, 1)
    sigma = np.clip(used_std / cap, 0, 1)
    if sensitivity >= 0:
        exponent = np.inf if sensitivity == 0 else 1 / sensitivity
        if exponent == 0.5:
            sigma = np.sqrt(sigma)
        elif exponent != 1:
            sigma = np.power(sigma, exponent)
    sigma = np.clip(sigma * margin, 0, 1)
    risk = (mu + sigma) / 2
    return np.where(ok, (1.0 - risk) * float(MAX_NODE_SCORE), 0.0)


@dataclass(frozen=True, slots=True)
class LoadVariationRiskBalancingArgs(TrimaranArgs):
    """LoadVariationRiskBalancingArgs; v1 defaulting replaces an unset or negative margin or sensitivity by 1."""

    safe_variance_margin: float = DEFAULT_SAFE_VARIANCE_MARGIN
    safe_variance_sensitivity: float = DEFAULT_SAFE_VARIANCE_SENSITIVITY

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> LoadVariationRiskBalancingArgs:
        a = fields.Fields(raw, field, allowed={*TRIMARAN_SPEC_FIELDS, "safeVarianceMargin", "safeVarianceSensitivity"})
        spec = cls.spec_of(a)
        margin = a.number("safeVarianceMargin")
        sensitivity = a.number("safeVarianceSensitivity")
        return cls(**spec,
                   safe_variance_margin=margin if margin is not None and margin >= 0 else DEFAULT_SAFE_VARIANCE_MARGIN,
                   safe_variance_sensitivity=(sensitivity if sensitivity is not None and sensitivity >= 0
                                              else DEFAULT_SAFE_VARIANCE_SENSITIVITY))


class LoadVariationRiskBalancing(ScorePlugin):
    name = "LoadVariationRiskBalancing"
    Args = LoadVariationRiskBalancingArgs
    args: LoadVariationRiskBalancingArgs

    def __init__(self, args: LoadVariationRiskBalancingArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.margin = args.safe_variance_margin
        self.sensitivity = args.safe_variance_sensitivity
        self.collector = Collector(args, handle, self.name)

    def _totals(self, pod: Pod, cpu: tuple[np.ndarray, np.ndarray, np.ndarray], mem: tuple[np.ndarray, np.ndarray, np.ndarray],
                alloc_cpu: np.ndarray, alloc_mem: np.ndarray) -> np.ndarray:
        req = effective_resource(pod, limits=False)
        cpu_avg, cpu_std, cpu_ok = cpu
        mem_avg, mem_std, mem_ok = mem
        cpu_score = np.where(cpu_ok, compute_scores(cpu_avg, cpu_std, alloc_cpu, float(req.milli_cpu), self.margin,
                                                    self.sensitivity), 0.0)
        mem_score = np.where(mem_ok, compute_scores(mem_avg, mem_std, alloc_mem * MEGA_FACTOR,
                                                    float(req.memory) * MEGA_FACTOR, self.margin, self.sensitivity), 0.0)
        total = np.where(cpu_ok & mem_ok, np.minimum(mem_score, cpu_score), np.maximum(mem_score, cpu_score))
        return go_round_array(total).astype(np.int64)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        metrics, _ = self.collector.node_metrics(node_info.node)
        if metrics is None:
            return MIN_NODE_SCORE, SUCCESS
        ca, cs, cv = resource_data(metrics, CPU_TYPE)
        ma, ms, mv = resource_data(metrics, MEMORY_TYPE)
        alloc_cpu, alloc_mem = allocatable_units(node_info.node)
        out = self._totals(pod, (np.array([ca]), np.array([cs]), np.array([cv])),
                           (np.array([ma]), np.array([ms]), np.array([mv])),
                           np.array([float(alloc_cpu)]), np.array([float(alloc_mem)]))
        return int(out[0]), SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        cols = self.collector.columns(cluster)
        t = cluster.table
        cpu_col, mem_col = t.column["cpu"], t.column["memory"]
        out = self._totals(pod, (cols.cpu_avg[rows], cols.cpu_std[rows], cols.cpu_valid[rows]),
                           (cols.mem_avg[rows], cols.mem_std[rows], cols.mem_valid[rows]),
                           t.alloc[rows, cpu_col].astype(np.float64), t.alloc[rows, mem_col].astype(np.float64))
        return np.where(cols.has[rows], out, MIN_NODE_SCORE).astype(np.int64)

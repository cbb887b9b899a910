"""LowRiskOverCommitment: spread the risk that burstable pods' limits over-commit a node (Trimaran).

Per resource (cpu, memory), with the node's requests and limits counted with the pending pod (requests
capped at allocatable; every pod's limit raised to at least its request):

    riskLimit = (limits - allocatable) / (limits - requests)          when limits > allocatable, else 0
    riskLoad  = 1 - P(load <= requests-without-the-pod / allocatable)

P is a Beta distribution fitted by moment matching to the measured average and standard deviation (the
deviation scaled by √smoothingWindowSize, capped just below the largest variance a Beta distribution can
have); when the limits without the pod stay below allocatable, P is conditioned on load <= those limits.
Total risk = w · riskLimit + (1 - w) · riskLoad (w from riskLimitWeights, default 0.5), clamped to [0, 1];
score = round(100 · (1 - max(riskCPU, riskMemory))). Best-effort pods and nodes without metrics score 0;
NormalizeScore is a no-op. PreScore stores the pod's requests and limits in the cycle state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Node, Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.metrics.base import CPU_TYPE, MEMORY_TYPE, Metric, resource_data
from kubesched.scheduler.framework import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    SUCCESS,
    CycleState,
    Handle,
    PreScorePlugin,
    ScorePlugin,
    Status,
)
from kubesched.scheduler.plugins.gomath import go_round
from kubesched.scheduler.plugins.trimaran.beta import MAX_VARIANCE_ALLOWANCE, compute_probability, max_variance
from kubesched.scheduler.plugins.trimaran.collector import TRIMARAN_SPEC_FIELDS, Collector, TrimaranArgs
from kubesched.scheduler.plugins.trimaran.resourcestats import (
    NodeRequestsAndLimits,
    Resource,
    create_resource_stats,
    go_fdiv,
    go_max,
    go_min,
    go_pow,
    mu_sigma,
    node_requests_and_limits,
    requests_and_limits,
)

DEFAULT_SMOOTHING_WINDOW_SIZE = 5
DEFAULT_RISK_LIMIT_WEIGHT = 0.5
POD_RESOURCES_KEY = "LowRiskOverCommitment.PodResources"


class PodResourcesStateData:
    """The pod's requests and limits, computed at PreScore."""

    def __init__(self, requests: Resource, limits: Resource) -> None:
        self.requests = requests
        self.limits = limits

    def clone(self) -> PodResourcesStateData:
        return self


@dataclass(frozen=True, slots=True)
class LowRiskOverCommitmentArgs(TrimaranArgs):
    """LowRiskOverCommitmentArgs; v1 defaulting: window 5 when unset or not positive, risk limit weight 0.5
    for cpu and memory and for any weight outside [0, 1]."""

    smoothing_window_size: int = DEFAULT_SMOOTHING_WINDOW_SIZE
    risk_limit_weights: Mapping[str, float] = dataclasses.field(
        default_factory=lambda: {"cpu": DEFAULT_RISK_LIMIT_WEIGHT, "memory": DEFAULT_RISK_LIMIT_WEIGHT})

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> LowRiskOverCommitmentArgs:
        a = fields.Fields(raw, field, allowed={*TRIMARAN_SPEC_FIELDS, "smoothingWindowSize", "riskLimitWeights"})
        spec = cls.spec_of(a)
        window = a.integer("smoothingWindowSize")
        weights = {"cpu": DEFAULT_RISK_LIMIT_WEIGHT, "memory": DEFAULT_RISK_LIMIT_WEIGHT}
        given = a.object("riskLimitWeights")
        for name, w in given.raw.items():
            w = fields.number(w, given.path(str(name)), what="a number from 0 to 1")
            weights[str(name)] = w if 0 <= w <= 1 else DEFAULT_RISK_LIMIT_WEIGHT
        return cls(**spec, smoothing_window_size=window if window is not None and window > 0
                   else DEFAULT_SMOOTHING_WINDOW_SIZE, risk_limit_weights=weights)


class LowRiskOverCommitment(PreScorePlugin, ScorePlugin):
    name = "LowRiskOverCommitment"
    Args = LowRiskOverCommitmentArgs
    args: LowRiskOverCommitmentArgs

    def __init__(self, args: LowRiskOverCommitmentArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.smoothing_window_size = args.smoothing_window_size
        self.risk_limit_weights = dict(args.risk_limit_weights)
        self.collector = Collector(args, handle, self.name)

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        state.write(POD_RESOURCES_KEY, PodResourcesStateData(*requests_and_limits(pod)))
        return SUCCESS

    def _pod_resources(self, state: CycleState, pod: Pod) -> PodResourcesStateData:
        data = state.read(POD_RESOURCES_KEY)
        if isinstance(data, PodResourcesStateData):
            return data
        return PodResourcesStateData(*requests_and_limits(pod))

    # ------------------------------------------------------------ risk

    def compute_risk(self, metrics: list[Metric], resource: str, node: Node, nrl: NodeRequestsAndLimits) -> float:
        """computeRisk for one resource."""
        if resource == "cpu":
            request, limit = nrl.request.milli_cpu, nrl.limit.milli_cpu
            req_minus, lim_minus, capacity = (nrl.request_minus_pod.milli_cpu, nrl.limit_minus_pod.milli_cpu,
                                              nrl.capacity.milli_cpu)
            metric_type = CPU_TYPE
        else:
            request, limit = nrl.request.memory, nrl.limit.memory
            req_minus, lim_minus, capacity = (nrl.request_minus_pod.memory, nrl.limit_minus_pod.memory,
                                              nrl.capacity.memory)
            metric_type = MEMORY_TYPE
        risk_limit = 0.0
        if limit > capacity:
            risk_limit = go_fdiv(float(limit - capacity), float(limit - request))
        risk_load = 0.0
        avg, std, found = resource_data(metrics, metric_type)
        if found:
            stats = create_resource_stats(avg, std, capacity, 0, resource)
            mu, sigma = mu_sigma(stats)
            sigma *= go_pow(float(self.smoothing_window_size), 0.5)
            sigma = go_min(sigma, math.sqrt(max_variance(mu) * MAX_VARIANCE_ALLOWANCE))
            alloc_threshold = go_min(go_max(go_fdiv(float(req_minus), float(capacity)), 0), 1)
            alloc_prob, dist = compute_probability(mu, sigma, alloc_threshold)
            if lim_minus < capacity and req_minus <= lim_minus:
                limit_threshold = go_fdiv(float(lim_minus), float(capacity))
                if limit_threshold == 0:
                    alloc_prob = 1.0  # zero over zero
                elif dist is not None:
                    limit_prob = dist.cdf(limit_threshold)
                    if limit_prob > 0:
                        alloc_prob /= limit_prob
                        alloc_prob = go_min(go_max(alloc_prob, 0), 1)
            risk_load = 1 - alloc_prob
        w = self.risk_limit_weights.get(resource, 0.0)
        total = w * risk_limit + (1 - w) * risk_load
        return go_min(go_max(total, 0), 1)

    def _score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> int:
        res = self._pod_resources(state, pod)
        r, lim = res.requests, res.limits
        if r.milli_cpu == 0 and r.memory == 0 and lim.milli_cpu == 0 and lim.memory == 0:
            return MIN_NODE_SCORE  # best effort: not this plugin's concern
        metrics, _ = self.collector.node_metrics(node_info.node)
        if metrics is None:
            return MIN_NODE_SCORE
        nrl = node_requests_and_limits(node_info.pods.values(), node_info.node, r, lim)
        risk_cpu = self.compute_risk(metrics, "cpu", node_info.node, nrl)
        risk_mem = self.compute_risk(metrics, "memory", node_info.node, nrl)
        rank = 1 - go_max(risk_cpu, risk_mem)
        return go_round(rank * float(MAX_NODE_SCORE))

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        return self._score(state, pod, node_info), SUCCESS

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        # The per-node work is a Beta fit and its distribution function (memoised on its parameters);
        # nodes without metrics are settled by the collector's columns without it.
        cols = self.collector.columns(cluster)
        out = np.full(len(rows), MIN_NODE_SCORE, dtype=np.int64)
        infos = cluster.node_infos
        for i in np.flatnonzero(cols.has[rows]):
            out[i] = self._score(state, pod, infos[rows[i]])
        return out

"""LowNodeUtilization: move pods off overutilized nodes while underutilized nodes have room.

Upstream's arithmetic: a node is underutilized when schedulable and every thresholded resource is at or
below `thresholds`, overutilized when some resource is above `targetThresholds` (or, with
`useDeviationThresholds`, below/above the average usage minus/plus them). Nothing happens when no node
is underutilized, when at most `numberOfNodes` are, when every node is, or when none is overutilized.
Overutilized nodes are drained in decreasing total usage; each evicted pod's usage comes off the node
and off the budget of the underutilized nodes (capacity capped at the target thresholds, minus usage);
a node stops when it is back under target or the budget of some resource is spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.fields import INT64, Fields, join
from kubesched.api.objects import Node
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler.framework import BalancePlugin, Handle, Status
from kubesched.descheduler.plugins import nodeutilization as nu
from kubesched.descheduler.plugins._common import IncludeExclude
from kubesched.errors import InputError

_ARGS = ("useDeviationThresholds", "thresholds", "targetThresholds", "numberOfNodes", "metricsUtilization",
         "evictableNamespaces", "evictionLimits", "apiVersion", "kind")


@dataclass(frozen=True, slots=True)
class EvictionLimits:
    """api.EvictionLimits: at most `node` evictions per node (None: no limit)."""

    node: int | None = None


@dataclass(frozen=True, slots=True)
class LowNodeUtilizationArgs(PluginArgs):
    """LowNodeUtilizationArgs (nodeutilization/types.go) with ValidateLowNodeUtilizationArgs."""

    use_deviation_thresholds: bool = False
    thresholds: Mapping[str, float] = field(default_factory=dict)
    target_thresholds: Mapping[str, float] = field(default_factory=dict)
    number_of_nodes: int = 0
    metrics_utilization: nu.MetricsUtilization | None = None
    evictable_namespaces: IncludeExclude | None = None
    eviction_limits: EvictionLimits | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> LowNodeUtilizationArgs:
        a = Fields(raw, field, allowed=_ARGS)
        deviation = a.boolean("useDeviationThresholds")
        number = a.integer("numberOfNodes", 0, bits=INT64, whole_floats=True)
        namespaces = nu.read_evictable_namespaces(a)
        low = _thresholds(a, "thresholds")
        high = _thresholds(a, "targetThresholds")
        if len(low) != len(high) or any(name not in high for name in low):
            raise a.error("targetThresholds", "thresholds and targetThresholds configured different resources")
        if not deviation:
            for name, v in low.items():
                if v > high[name]:
                    raise InputError(f"thresholds' {name} percentage is greater than targetThresholds'",
                                     field=join(a.path("thresholds"), name))
        metrics = nu.read_metrics_utilization(a)
        limits = None
        if a.has("evictionLimits"):
            el = a.object("evictionLimits", ("node",), meta=False)
            limits = EvictionLimits(el.unsigned("node"))
        if metrics is not None and metrics.source == nu.PROMETHEUS_METRICS:
            for key, values in (("thresholds", low), ("targetThresholds", high)):
                names = list(values)
                if names != [nu.METRIC_RESOURCE]:
                    raise a.error(key, f'{key} are expected to specify a single instance of "MetricResource" resource, '
                                  f"got {names} instead")
        return cls(deviation, low, high, number, metrics, namespaces, limits)


def _thresholds(a: Fields, key: str) -> dict[str, float]:
    try:
        return nu.read_thresholds(a, key)
    except InputError as e:
        raise InputError(f"{key} config is not valid: {e.message}", field=e.field) from None


class LowNodeUtilization(BalancePlugin):
    name = "LowNodeUtilization"
    Args = LowNodeUtilizationArgs
    args: LowNodeUtilizationArgs

    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.thresholds: dict[str, float] = dict(args.thresholds)
        self.target_thresholds: dict[str, float] = dict(args.target_thresholds)
        self.use_deviation = args.use_deviation_thresholds
        self.number_of_nodes = args.number_of_nodes
        self.metrics_utilization = args.metrics_utilization
        self.excluded_namespaces: list[str] = list(args.evictable_namespaces.exclude if args.evictable_namespaces else ())
        self.node_limit: int | None = args.eviction_limits.node if args.eviction_limits else None
        self.resource_names = list(self.thresholds)
        prometheus = self.metrics_utilization is not None and self.metrics_utilization.source == nu.PROMETHEUS_METRICS
        self.names = list(self.resource_names) if prometheus else nu.unique_resource_names(self.resource_names)
        # Set after each Balance: per node, usage percentages before the cycle (for reports).
        self.last_classification: dict[str, str] = {}

    def balance(self, nodes: list[Node]) -> Status:
        handle = self.handle
        try:
            client = nu.make_usage_client(self.name, handle, self.metrics_utilization, self.names)
            client.sync(nodes)
        except nu.UsageError as e:
            return Status(f"error getting node usage: {e}")
        names = client.names
        usage = client.node_usage()
        cap, has = nu.capacity_matrix(nodes, names, handle.cluster)
        pct = nu.usage_percentages(usage, cap, has)
        n = len(nodes)
        if self.use_deviation:
            low, high = nu.deviation_thresholds(pct, names, self.thresholds, self.target_thresholds)
        else:
            low, high = self.thresholds, self.target_thresholds
        low_m, low_cols = nu.threshold_rows(n, names, low)
        high_m, high_cols = nu.threshold_rows(n, names, high)
        schedulable = np.fromiter((not node.unschedulable for node in nodes), dtype=bool, count=n)
        under = schedulable & nu.below(pct, low_m, low_cols)
        over = ~under & nu.above(pct, high_m, high_cols)
        caps = nu.capped_capacity(cap, has, names, high)
        self.last_classification = {node.name: ("underutilized" if under[i] else "overutilized" if over[i]
                                                else "appropriately utilized") for i, node in enumerate(nodes)}
        low_idx = np.flatnonzero(under)
        high_idx = np.flatnonzero(over)
        if len(low_idx) == 0 or len(low_idx) <= self.number_of_nodes or len(low_idx) == len(nodes) \
                or len(high_idx) == 0:
            return Status()
        low_nodes = nu.destinations_of(nodes, low_idx, usage, names, caps)
        high_nodes = nu.SortedNodeInfos(nodes, high_idx, usage, names, pct, caps, client, ascending=False)

        def continue_eviction(info: nu.NodeUsageInfo, available: dict[str, nu.Number]) -> bool:
            return nu.is_node_above_target_utilization(info) and nu.budget_left(available)

        def reason(info: nu.NodeUsageInfo) -> str:
            over_parts = [f"{r} {info.percent[r]:.1f}% > {high[r]:g}%" for r in high
                          if r in info.percent and info.percent[r] == info.percent[r] and info.percent[r] > high[r]]
            return (f"node {info.node.name} is overutilized ({', '.join(over_parts)}); "
                    f"{low_nodes.count} underutilized node(s) have room")

        nu.evict_pods_from_source_nodes(handle, self.name, self.excluded_namespaces, high_nodes, low_nodes,
                                        handle.evictor.filter, names, continue_eviction, client, self.node_limit, reason,
                                        budget=nu.budget_left,
                                        filter_reads_only_the_pod=handle.evictor.filters_read_only_the_pod)
        return Status()

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

from typing import Any

import numpy as np

from kubesched.api.objects import Node
from kubesched.descheduler.framework import BalancePlugin, Handle, Status
from kubesched.descheduler.plugins import nodeutilization as nu


class LowNodeUtilization(BalancePlugin):
    name = "LowNodeUtilization"

    def __init__(self, args: dict[str, Any] | None, handle: Handle) -> None:
        super().__init__(args, handle)
        a = self.args
        self.thresholds: dict[str, float] = dict(a.get("thresholds") or {})
        self.target_thresholds: dict[str, float] = dict(a.get("targetThresholds") or {})
        self.use_deviation = bool(a.get("useDeviationThresholds", False))
        self.number_of_nodes = int(a.get("numberOfNodes") or 0)
        self.metrics_utilization: dict[str, Any] | None = a.get("metricsUtilization")
        ns = a.get("evictableNamespaces") or {}
        self.excluded_namespaces: list[str] = list(ns.get("exclude") or [])
        limits = a.get("evictionLimits") or {}
        self.node_limit: int | None = limits.get("node")
        self.resource_names = list(self.thresholds)
        prometheus = (self.metrics_utilization or {}).get("source") == nu.PROMETHEUS_METRICS
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
        cap, has = nu.capacity_matrix(nodes, names)
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
        low_nodes = nu.build_infos(nodes, low_idx, usage, names, pct, caps, client)
        high_nodes = nu.sort_nodes_by_usage(nu.build_infos(nodes, high_idx, usage, names, pct, caps, client),
                                            ascending=False)

        def continue_eviction(info: nu.NodeUsageInfo, available: dict[str, nu.Number]) -> bool:
            return nu.is_node_above_target_utilization(info) and nu.budget_left(available)

        def reason(info: nu.NodeUsageInfo) -> str:
            over_parts = [f"{r} {info.percent[r]:.1f}% > {high[r]:g}%" for r in high
                          if r in info.percent and info.percent[r] == info.percent[r] and info.percent[r] > high[r]]
            return (f"node {info.node.name} is overutilized ({', '.join(over_parts)}); "
                    f"{len(low_nodes)} underutilized node(s) have room")

        nu.evict_pods_from_source_nodes(handle, self.name, self.excluded_namespaces, high_nodes, low_nodes,
                                        handle.evictor.filter, names, continue_eviction, client, self.node_limit, reason)
        return Status()

"""HighNodeUtilization: empty underutilized nodes onto the others (bin packing, for the cluster autoscaler).

Upstream's arithmetic: a node is underutilized when every thresholded resource is at or below
`thresholds` (cordoned nodes included: they are drained too), otherwise it is a destination when
schedulable. Nothing happens when no node is underutilized, when at most `numberOfNodes` are, when every
node is, or when there is no destination. Underutilized nodes are drained in increasing total usage
while every resource of the destinations' budget (capacity minus usage) stays above zero.
`evictionModes: [OnlyThresholdingResources]` only moves pods that request a thresholded resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.fields import INT64, Fields
from kubesched.api.objects import Node, Pod
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler.framework import BalancePlugin, Handle, Status
from kubesched.descheduler.plugins import nodeutilization as nu
from kubesched.descheduler.plugins._common import IncludeExclude

ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"


@dataclass(frozen=True, slots=True)
class HighNodeUtilizationArgs(PluginArgs):
    """HighNodeUtilizationArgs (nodeutilization/types.go) with ValidateHighNodeUtilizationArgs."""

    thresholds: Mapping[str, float] = field(default_factory=dict)
    number_of_nodes: int = 0
    eviction_modes: tuple[str, ...] = ()
    evictable_namespaces: IncludeExclude | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> HighNodeUtilizationArgs:
        a = Fields(raw, field, allowed=("thresholds", "numberOfNodes", "evictionModes", "evictableNamespaces",
                                        "apiVersion", "kind"))
        number = a.integer("numberOfNodes", 0, bits=INT64, whole_floats=True)
        namespaces = nu.read_evictable_namespaces(a)
        thresholds = nu.read_thresholds(a, "thresholds")
        modes = a.strings("evictionModes")
        for i, m in enumerate(modes):
            if m != ONLY_THRESHOLDING_RESOURCES:
                raise a.error(f"evictionModes[{i}]", f"invalid eviction mode {m}")
        return cls(thresholds, number, tuple(modes), namespaces)


class HighNodeUtilization(BalancePlugin):
    name = "HighNodeUtilization"
    Args = HighNodeUtilizationArgs
    args: HighNodeUtilizationArgs

    def __init__(self, args: HighNodeUtilizationArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.thresholds: dict[str, float] = dict(args.thresholds)
        self.high_thresholds = {r: 100.0 for r in self.thresholds}
        self.number_of_nodes = args.number_of_nodes
        self.excluded_namespaces: list[str] = list(args.evictable_namespaces.exclude if args.evictable_namespaces else ())
        self.only_thresholding = ONLY_THRESHOLDING_RESOURCES in args.eviction_modes
        self.names = nu.unique_resource_names(self.thresholds)

    def _pod_filter(self, pod: Pod) -> bool:
        if not self.handle.evictor.filter(pod):
            return False
        if self.only_thresholding:
            # withResourceRequestForAny: some container or init container names a thresholded resource.
            for c in list(pod.containers) + list(pod.init_containers):
                if any(r in c.requests for r in self.thresholds):
                    return True
            return False
        return True

    def balance(self, nodes: list[Node]) -> Status:
        handle = self.handle
        client = nu.RequestedUsageClient(handle.cluster, self.names)
        try:
            client.sync(nodes)
        except nu.UsageError as e:
            return Status(f"error getting node usage: {e}")
        names = self.names
        usage = client.node_usage()
        cap, has = nu.capacity_matrix(nodes, names, handle.cluster)
        pct = nu.usage_percentages(usage, cap, has)
        n = len(nodes)
        low_m, low_cols = nu.threshold_rows(n, names, self.thresholds)
        under = nu.below(pct, low_m, low_cols)
        schedulable = np.fromiter((not node.unschedulable for node in nodes), dtype=bool, count=n)
        dest = ~under & schedulable
        caps = nu.capped_capacity(cap, has, names, self.high_thresholds)
        low_idx = np.flatnonzero(under)
        dest_idx = np.flatnonzero(dest)
        if len(low_idx) == 0 or len(low_idx) <= self.number_of_nodes or len(low_idx) == len(nodes) \
                or len(dest_idx) == 0:
            return Status()
        low_nodes = nu.SortedNodeInfos(nodes, low_idx, usage, names, pct, caps, client, ascending=True)
        dest_nodes = nu.destinations_of(nodes, dest_idx, usage, names, caps)

        def continue_eviction(_info: nu.NodeUsageInfo, available: dict[str, nu.Number]) -> bool:
            return nu.budget_left(available)

        def reason(info: nu.NodeUsageInfo) -> str:
            parts = [f"{r} {info.percent[r]:.1f}% <= {self.thresholds[r]:g}%" for r in self.thresholds
                     if r in info.percent and info.percent[r] == info.percent[r]]
            return (f"node {info.node.name} is underutilized ({', '.join(parts)}); packing its pods onto "
                    f"{dest_nodes.count} other node(s)")

        nu.evict_pods_from_source_nodes(handle, self.name, self.excluded_namespaces, low_nodes, dest_nodes,
                                        self._pod_filter, names, continue_eviction, client, None, reason,
                                        budget=nu.budget_left,
                                        filter_reads_only_the_pod=handle.evictor.filters_read_only_the_pod)
        return Status()

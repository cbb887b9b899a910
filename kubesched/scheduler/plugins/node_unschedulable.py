"""NodeUnschedulable: reject nodes with spec.unschedulable unless the pod tolerates the unschedulable taint.

A pod that tolerates {key: node.kubernetes.io/unschedulable, effect: NoSchedule} also tolerates
`spec.unschedulable` (DaemonSet pods do). Node-static: one mask per (tolerates?, node generation).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Pod, Taint, tolerations_tolerate_taint
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import (
    SUCCESS,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    ShapeCache,
    Status,
    all_pass,
    unresolvable,
)
from kubesched.scheduler.plugins.helper import node_static_filter, pod_cache_key

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"

_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


def tolerates_unschedulable(pod: Pod) -> bool:
    return bool(pod_cache_key(pod, "NodeUnschedulable/tolerates",
                              lambda: tolerations_tolerate_taint(pod.tolerations, _UNSCHEDULABLE_TAINT)))


class NodeUnschedulable(FilterPlugin):
    name = "NodeUnschedulable"
    Args = no_args("NodeUnschedulable")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._masks = ShapeCache()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", ("add", "update")), ClusterEvent("Pod", ("update",))]

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if node_info is None or node_info.node is None:
            return unresolvable(ERR_REASON_UNKNOWN_CONDITION)
        if node_info.node.unschedulable and not tolerates_unschedulable(pod):
            return unresolvable(ERR_REASON_UNSCHEDULABLE)
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        if tolerates_unschedulable(pod):
            return all_pass(len(rows))

        def compute() -> np.ndarray:
            out = np.ones(cluster.num_nodes, dtype=bool)
            for info in cluster.node_infos:
                if info.node.unschedulable:
                    out[info.index] = False
            return out

        return node_static_filter(self._masks, cluster, "schedulable", lambda info: not info.node.unschedulable,
                                  rows, compute)

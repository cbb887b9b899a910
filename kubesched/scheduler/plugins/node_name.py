"""NodeName: a pod with spec.nodeName fits only the node of that name."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Pod
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
from kubesched.scheduler.plugins.helper import node_static_filter

ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Pod, node_info: NodeInfo) -> bool:
    return not pod.node_name or pod.node_name == node_info.node.name


class NodeName(FilterPlugin):
    name = "NodeName"
    Args = no_args("NodeName")

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self._masks = ShapeCache()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", ("add",))]

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        if not fits(pod, node_info):
            return unresolvable(ERR_REASON)
        return SUCCESS

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        wanted = pod.node_name
        if not wanted:
            return all_pass(len(rows))

        def compute() -> np.ndarray:
            out = np.zeros(cluster.num_nodes, dtype=bool)
            info = cluster.node_info_by_name.get(wanted)
            if info is not None:
                out[info.index] = True
            return out

        return node_static_filter(self._masks, cluster, wanted, lambda info: info.node.name == wanted, rows, compute)

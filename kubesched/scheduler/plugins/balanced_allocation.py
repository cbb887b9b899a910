"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions stay close to each other.

Uses what pods actually request (no scoring defaults), and skips best-effort pods at PreScore so that
they do not all pile onto one node (kubernetes#129138).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.scheduler.framework import SUCCESS, ClusterEvent, CycleState, PreScorePlugin, ScorePlugin, Status, skip
from kubesched.scheduler.plugins import resource_allocation as ra

PRE_SCORE_KEY = "PreScoreNodeResourcesBalancedAllocation"


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs(PluginArgs):
    """NodeResourcesBalancedAllocationArgs: the resources (default cpu and memory, weight 1 each)."""

    resources: tuple[ra.ResourceSpec, ...] = ra.DEFAULT_RESOURCE_SPECS

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeResourcesBalancedAllocationArgs:
        a = fields.Fields(raw, field, allowed={"resources"})
        return cls(ra.resource_specs(a.get("resources"), a.path("resources")))


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    # Fractions are clipped to [0, 1] (requests are >= 0: admission refuses negative ones), so their
    # standard deviation is at most 0.5 and the score in [50, 100].
    scores_in_range = True
    name = "NodeResourcesBalancedAllocation"
    Args = NodeResourcesBalancedAllocationArgs
    args: NodeResourcesBalancedAllocationArgs

    def __init__(self, args: NodeResourcesBalancedAllocationArgs, handle: Any) -> None:
        super().__init__(args, handle)
        self.resources = [r.name for r in args.resources]
        self._row_cache = ra.RowCache()
        self._shape_args = ra.ShapeArgs()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete", "update")), ClusterEvent("Node", ("add", "update"))]

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        req = ra.pod_request_list(pod, self.resources, use_requested=True)
        if not any(req.tolist()):  # a few values: cheaper in Python than a NumPy reduction
            return skip()
        state.write(PRE_SCORE_KEY, req)
        return SUCCESS

    def _pod_req(self, state: CycleState, pod: Pod) -> np.ndarray:
        req = state.read(PRE_SCORE_KEY)
        return req if req is not None else ra.pod_request_list(pod, self.resources, use_requested=True)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        requested, alloc = ra.allocatable_requested_one(node_info, self.resources, self._pod_req(state, pod), True)
        return int(ra.balanced(requested[None, :], alloc[None, :])[0]), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        pod_req = self._pod_req(state, pod)
        if len(self.resources) == 2 and ra.plain_columns_apply(cluster, self.resources):
            t = cluster.table

            def some(at: np.ndarray) -> np.ndarray:
                cols = ra.plain_columns(cluster, at, self.resources, pod_req, True)
                assert cols is not None
                return ra.balanced_columns(cols)

            def full() -> np.ndarray:
                return some(np.arange(t.n))

            columns, req_list = self._shape_args.get(pod_req, t, lambda: (
                [t.column[r] for r in self.resources], pod_req.tolist()))

            def one(r: int) -> int:
                return ra.balanced_one(t, r, columns, req_list)

            # A node's score reads only that node's numbers: kept per request shape, row by row (or over
            # the changed rows at once when many changed since this shape was last scored).
            return self._row_cache.values(t, ("balanced", pod_req.tobytes()), full, one, some)[rows]
        cols = ra.plain_columns(cluster, rows, self.resources, pod_req, True)
        if cols is not None:
            return ra.balanced_columns(cols)
        requested, alloc = ra.allocatable_requested(cluster, rows, self.resources, pod_req, True)
        return ra.balanced(requested, alloc)

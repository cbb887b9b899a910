"""NodeResourcesFit: does the node have room for the pod's requests; score by a scoring strategy.

Filter (fitsRequest): the pod count, then cpu, memory, ephemeral-storage and every scalar resource the
pod requests, against allocatable minus what the node's pods request. A request larger than the whole
allocatable is UnschedulableAndUnresolvable (preemption cannot help). Score: LeastAllocated,
MostAllocated or RequestedToCapacityRatio over the configured resources and weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_extended_resource, scheduler_request
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    Status,
)
from kubesched.scheduler.plugins import resource_allocation as ra
from kubesched.scheduler.plugins.args import check_known, get_dict, get_list, resource_specs

DEFAULT_RESOURCES = [(CPU, 1), (MEMORY, 1)]
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
PRE_FILTER_KEY = "PreFilterNodeResourcesFit"
PRE_SCORE_KEY = "PreScoreNodeResourcesFit"


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = "NodeResourcesFit"

    def __init__(self, args: dict[str, Any] | None, handle: Any) -> None:
        super().__init__(args, handle)
        a = self.args
        check_known(a, {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"})
        self.ignored_resources = {str(x) for x in get_list(a, "ignoredResources")}
        self.ignored_groups = {str(x) for x in get_list(a, "ignoredResourceGroups")}
        for g in self.ignored_groups:
            if "/" in g:
                raise InputError(f"resource group name {g!r} cannot contain '/'", field="ignoredResourceGroups")
        strategy = get_dict(a, "scoringStrategy") or {}
        check_known(strategy, {"type", "resources", "requestedToCapacityRatio"})
        self.strategy = strategy.get("type") or "LeastAllocated"
        self._row_cache = ra.RowCache()
        if self.strategy not in STRATEGIES:
            raise InputError(f"Unsupported value: {self.strategy!r}: supported values: {', '.join(STRATEGIES)}",
                             field="scoringStrategy.type")
        specs = resource_specs(get_list(strategy, "resources"), "scoringStrategy.resources", DEFAULT_RESOURCES)
        self.resources = [n for n, _ in specs]
        self.weights = np.array([w for _, w in specs], dtype=np.int64)
        self.shape: list[tuple[int, int]] = []
        if self.strategy == "RequestedToCapacityRatio":
            rtcr = strategy.get("requestedToCapacityRatio") or {}
            if not isinstance(rtcr, dict):
                raise InputError("expected an object with shape", field="scoringStrategy.requestedToCapacityRatio")
            shape = rtcr.get("shape") or []
            if not isinstance(shape, list) or not shape:
                raise InputError("at least one point must be specified",
                                 field="scoringStrategy.requestedToCapacityRatio.shape")
            prev = -1
            for i, pt in enumerate(shape):
                f = f"scoringStrategy.requestedToCapacityRatio.shape[{i}]"
                if not isinstance(pt, dict):
                    raise InputError("expected {utilization, score}", field=f)
                u, s = pt.get("utilization", 0), pt.get("score", 0)
                if not isinstance(u, int) or not 0 <= u <= 100:
                    raise InputError(f"expected utilization from 0 to 100, got {u!r}", field=f"{f}.utilization")
                if u <= prev:
                    raise InputError("utilization values must be sorted in increasing order",
                                     field=f"{f}.utilization")
                if not isinstance(s, int) or not 0 <= s <= 10:
                    raise InputError(f"expected score from 0 to 10, got {s!r}", field=f"{f}.score")
                prev = u
                # MaxCustomPriorityScore is 10: shape scores scale to the scheduler's 0..100.
                self.shape.append((u, s * 10))

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {"scoringStrategy": {"type": "LeastAllocated",
                                    "resources": [{"name": n, "weight": w} for n, w in DEFAULT_RESOURCES]}}

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete", "update")), ClusterEvent("Node", ("add", "update"))]

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        state.write(PRE_FILTER_KEY, scheduler_request(pod))
        return None, Status()

    def _checked(self, request: dict[str, int]) -> list[str]:
        """Resources the filter compares, in upstream's order (cpu, memory, ephemeral-storage, scalars)."""
        names = [r for r in (CPU, MEMORY, EPHEMERAL_STORAGE) if request.get(r, 0) > 0]
        for r, v in request.items():
            if r in (CPU, MEMORY, EPHEMERAL_STORAGE) or v == 0:
                continue
            if is_extended_resource(r):
                if r in self.ignored_resources or r.split("/", 1)[0] in self.ignored_groups:
                    continue
            names.append(r)
        return names

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        request = state.read(PRE_FILTER_KEY)
        if request is None:
            request = scheduler_request(pod)
        reasons: list[str] = []
        code = Code.UNSCHEDULABLE
        if len(node_info.pods) + 1 > node_info.allocatable.get("pods", 0):
            reasons.append("Too many pods")
        for r in self._checked(request):
            alloc = node_info.allocatable.get(r, 0)
            if request[r] > alloc - node_info.requested.get(r, 0):
                reasons.append(f"Insufficient {r}")
                if request[r] > alloc:
                    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if reasons:
            return Status(code, reasons)
        return Status()

    def filter_statuses(self, state: CycleState, pod: Pod, cluster: ClusterState,
                        rows: np.ndarray) -> list[Status] | None:
        """`filter`'s statuses over rows, from the table's columns."""
        request = state.read(PRE_FILTER_KEY)
        if request is None:
            request = scheduler_request(pod)
        t = cluster.table
        reasons: list[list[str]] = [[] for _ in range(len(rows))]
        unresolvable = np.zeros(len(rows), dtype=bool)
        for i in np.flatnonzero(t.pod_count[rows] + 1 > t.allowed_pods[rows]).tolist():
            reasons[i].append("Too many pods")
        for r in self._checked(request):
            col = t.ensure_resource(r)
            alloc = t.alloc[rows, col]
            short = request[r] > alloc - t.requested[rows, col]
            unresolvable |= short & (request[r] > alloc)
            msg = f"Insufficient {r}"
            for i in np.flatnonzero(short).tolist():
                reasons[i].append(msg)
        # Nodes with the same verdict share one Status (statuses are read, never changed, once returned).
        shared: dict[tuple[bool, tuple[str, ...]], Status] = {}
        out = []
        for rs, u in zip(reasons, unresolvable.tolist(), strict=True):
            key = (u, tuple(rs))
            st = shared.get(key)
            if st is None:
                st = shared[key] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if u else Code.UNSCHEDULABLE, rs) \
                    if rs else Status()
            out.append(st)
        return out

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        request = state.read(PRE_FILTER_KEY)
        if request is None:
            request = scheduler_request(pod)
        t = cluster.table
        checks = [(t.ensure_resource(r), request[r]) for r in self._checked(request)]

        def full() -> np.ndarray:
            n = t.n
            mask = t.pod_count[:n] < t.allowed_pods[:n]
            for col, v in checks:
                mask &= t.requested[:n, col] <= t.alloc[:n, col] - v
            return mask

        def one(r: int) -> bool:
            return bool(int(t.pod_count[r]) < int(t.allowed_pods[r])
                        and all(int(t.requested[r, col]) <= int(t.alloc[r, col]) - v for col, v in checks))

        # The verdict on a node reads only that node's numbers: kept per request shape, row by row.
        key = ("fit", tuple((t.resources[col], v) for col, v in checks))
        return self._row_cache.values(t, key, full, one)[rows]

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        state.write(PRE_SCORE_KEY, ra.pod_request_list(pod, self.resources, use_requested=False))
        return Status()

    def _scorer(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        if self.strategy == "LeastAllocated":
            return ra.least_allocated(requested, alloc, self.weights)
        if self.strategy == "MostAllocated":
            return ra.most_allocated(requested, alloc, self.weights)
        return ra.requested_to_capacity_ratio(requested, alloc, self.weights, self.shape)

    def _pod_req(self, state: CycleState, pod: Pod) -> np.ndarray:
        req = state.read(PRE_SCORE_KEY)
        return req if req is not None else ra.pod_request_list(pod, self.resources, use_requested=False)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        requested, alloc = ra.allocatable_requested_one(node_info, self.resources, self._pod_req(state, pod), False)
        return int(self._scorer(requested[None, :], alloc[None, :])[0]), Status()

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        pod_req = self._pod_req(state, pod)
        if self.strategy == "LeastAllocated" and ra.plain_columns_apply(cluster, self.resources):
            t = cluster.table

            def full() -> np.ndarray:
                cols = ra.plain_columns(cluster, np.arange(t.n), self.resources, pod_req, False)
                assert cols is not None
                return ra.least_allocated_columns(cols, self.weights)

            def one(r: int) -> int:
                return ra.least_allocated_one(t, r, self.resources, pod_req, self.weights, False)

            return self._row_cache.values(t, ("least", pod_req.tobytes()), full, one)[rows]
        requested, alloc = ra.allocatable_requested(cluster, rows, self.resources, pod_req, False)
        return self._scorer(requested, alloc)

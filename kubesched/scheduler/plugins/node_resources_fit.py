"""NodeResourcesFit: does the node have room for the pod's requests; score by a scoring strategy.

Filter (fitsRequest): the pod count, then cpu, memory, ephemeral-storage and every scalar resource the
pod requests, against allocatable minus what the node's pods request. A request larger than the whole
allocatable is UnschedulableAndUnresolvable (preemption cannot help). Score: LeastAllocated,
MostAllocated or RequestedToCapacityRatio over the configured resources and weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_extended_resource, scheduler_request
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    SUCCESS,
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

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
PRE_FILTER_KEY = "PreFilterNodeResourcesFit"
PRE_SCORE_KEY = "PreScoreNodeResourcesFit"


# ---------------------------------------------------------------- args (NodeResourcesFitArgs)


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    """A point of RequestedToCapacityRatio's shape: utilization 0..100 and score 0..10."""

    utilization: int
    score: int


@dataclass(frozen=True, slots=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """config.ScoringStrategy; v1 defaulting gives LeastAllocated over cpu and memory, weight 1 each."""

    type: str = LEAST_ALLOCATED
    resources: tuple[ra.ResourceSpec, ...] = ra.DEFAULT_RESOURCE_SPECS
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs(PluginArgs):
    """NodeResourcesFitArgs, with ValidateNodeResourcesFitArgs' checks."""

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = ScoringStrategy()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeResourcesFitArgs:
        a = fields.Fields(raw, field, allowed={"ignoredResources", "ignoredResourceGroups", "scoringStrategy"})
        ignored = tuple(a.strings("ignoredResources", what="a list"))
        groups = tuple(a.strings("ignoredResourceGroups", what="a list"))
        for g in groups:
            if "/" in g:
                raise a.error("ignoredResourceGroups", f"resource group name {g!r} cannot contain '/'")
        st = a.object("scoringStrategy", {"type", "resources", "requestedToCapacityRatio"})
        kind = st.get("type") or LEAST_ALLOCATED
        if kind not in STRATEGIES:
            raise st.error("type", f"Unsupported value: {kind!r}: supported values: {', '.join(STRATEGIES)}")
        resources = ra.resource_specs(st.get("resources"), st.path("resources"))
        ratio = None
        if kind == REQUESTED_TO_CAPACITY_RATIO:
            ratio = _requested_to_capacity_ratio(st.get("requestedToCapacityRatio"), st.path("requestedToCapacityRatio"))
        return cls(ignored, groups, ScoringStrategy(kind, resources, ratio))


def _requested_to_capacity_ratio(raw: Any, field: str) -> RequestedToCapacityRatioParam:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError("expected an object with shape", field=field)
    shape = raw.get("shape") or []
    if not isinstance(shape, list) or not shape:
        raise InputError("at least one point must be specified", field=fields.join(field, "shape"))
    points: list[UtilizationShapePoint] = []
    prev = -1
    for i, pt in enumerate(shape):
        f = fields.join(fields.join(field, "shape"), i)
        if not isinstance(pt, dict):
            raise InputError("expected {utilization, score}", field=f)
        u, s = pt.get("utilization", 0), pt.get("score", 0)
        if not isinstance(u, int) or not 0 <= u <= 100:
            raise InputError(f"expected utilization from 0 to 100, got {u!r}", field=f"{f}.utilization")
        if u <= prev:
            raise InputError("utilization values must be sorted in increasing order", field=f"{f}.utilization")
        if not isinstance(s, int) or not 0 <= s <= 10:
            raise InputError(f"expected score from 0 to 10, got {s!r}", field=f"{f}.score")
        prev = u
        points.append(UtilizationShapePoint(u, s))
    return RequestedToCapacityRatioParam(tuple(points))


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin):
    name = "NodeResourcesFit"
    Args = NodeResourcesFitArgs
    args: NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs, handle: Any) -> None:
        super().__init__(args, handle)
        self.ignored_resources = set(args.ignored_resources)
        self.ignored_groups = set(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        # Least/MostAllocated give a weighted mean of per-resource shares in [0, 100] (requests are >= 0:
        # admission refuses negative ones); RequestedToCapacityRatio is checked by the framework.
        self.scores_in_range = self.strategy in (LEAST_ALLOCATED, MOST_ALLOCATED)
        self._row_cache = ra.RowCache()
        self._shape_args = ra.ShapeArgs()
        self._checks_memo: dict[int, tuple[Any, Any, list[tuple[int, int]], Any]] = {}
        self.resources = [r.name for r in strategy.resources]
        self.weights = np.array([r.weight for r in strategy.resources], dtype=np.int64)
        # MaxCustomPriorityScore is 10: shape scores scale to the scheduler's 0..100.
        ratio = strategy.requested_to_capacity_ratio
        self.shape: list[tuple[int, int]] = [(p.utilization, p.score * 10) for p in ratio.shape] if ratio else []

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete", "update")), ClusterEvent("Node", ("add", "update"))]

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        state.write(PRE_FILTER_KEY, scheduler_request(pod))
        return None, SUCCESS

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
        return SUCCESS

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
        # Requests are shared by the pods of one shape (memo_by_shape): their checks are worked out once.
        memo = self._checks_memo.get(id(request))
        if memo is None or memo[0] is not request or memo[1] is not t:
            checks = [(t.ensure_resource(r), request[r]) for r in self._checked(request)]
            if len(self._checks_memo) > 256:
                self._checks_memo.clear()
            memo = self._checks_memo[id(request)] = (request, t, checks,
                                                     ("fit", tuple((t.resources[col], v) for col, v in checks)))
        checks, key = memo[2], memo[3]

        def some(rows: Any) -> np.ndarray:
            mask = t.pod_count[rows] < t.allowed_pods[rows]
            for col, v in checks:
                mask &= t.requested[:, col][rows] <= t.alloc[:, col][rows] - v
            return mask  # type: ignore[no-any-return]

        def full() -> np.ndarray:
            return some(slice(0, t.n))

        def one(r: int) -> bool:
            rn = ra.row_numbers(t, r)
            if rn.pod_count >= rn.allowed_pods:
                return False
            requested, alloc = rn.requested, rn.alloc
            for col, v in checks:
                if requested[col] > alloc[col] - v:
                    return False
            return True

        # The verdict on a node reads only that node's numbers: kept per request shape, row by row.
        return self._row_cache.values(t, key, full, one, some)[rows]

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> Status:
        state.write(PRE_SCORE_KEY, ra.pod_request_list(pod, self.resources, use_requested=False))
        return SUCCESS

    def _scorer(self, requested: np.ndarray, alloc: np.ndarray) -> np.ndarray:
        if self.strategy == LEAST_ALLOCATED:
            return ra.least_allocated(requested, alloc, self.weights)
        if self.strategy == MOST_ALLOCATED:
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
        if self.strategy == LEAST_ALLOCATED and ra.plain_columns_apply(cluster, self.resources):
            t = cluster.table

            def some(at: np.ndarray) -> np.ndarray:
                cols = ra.plain_columns(cluster, at, self.resources, pod_req, False)
                assert cols is not None
                return ra.least_allocated_columns(cols, self.weights)

            def full() -> np.ndarray:
                return some(np.arange(t.n))

            cols, req_list, weights = self._shape_args.get(pod_req, t, lambda: (
                ra.used_columns(t, self.resources, False), pod_req.tolist(), self.weights.tolist()))

            def one(r: int) -> int:
                return ra.least_allocated_one(t, r, cols, req_list, weights)

            return self._row_cache.values(t, ("least", pod_req.tobytes()), full, one, some)[rows]
        requested, alloc = ra.allocatable_requested(cluster, rows, self.resources, pod_req, False)
        return self._scorer(requested, alloc)

"""NodeResourceTopologyMatch: filter out nodes whose kubelet could not align the pod on one NUMA zone, and
score the zones' fit, from the NodeResourceTopology objects the nodes publish.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/noderesourcetopology/plugin.go`, `prefilter.go`,
`filter.go` (see `filter.py`), `score.go` (see `score.py`), `reserve.go`, `postbind.go` and the caches
(`cache.py`); args from `apis/config/v1/types.go`, `defaults.go` and `validation/validation_pluginargs.go`.

Filter: BestEffort pods that request nothing non-native pass; a node without a NodeResourceTopology object
passes; stale data ("invalid node topology data") fails; only single-numa-node nodes are checked.
Score: see score.py (nodes without an object score 0). Reserve/Unreserve/PostBind feed the cache.
PreFilter only prepares the preemption stack (preemptionMode Enabled); like upstream's passthrough cache
kubesched does not re-simulate NUMA placement after evicting victims.

Args: scoringStrategy {type: LeastAllocated (default) | MostAllocated | BalancedAllocation |
LeastNUMANodes, resources: [{name, weight}] (default cpu and memory, weight 0 means 1)},
cacheResyncPeriodSeconds (> 0: the overreserve cache), discardReservedNodes, cache {foreignPodsDetect,
resyncMethod, informerMode, resyncScope} (accepted; they tune upstream's cache resync, not modelled),
preemptionMode (Disabled, the default, or Enabled).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.qos import BEST_EFFORT, GUARANTEED, qos_class
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.errors import InputError
from kubesched.scheduler.framework import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    PostBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScorePlugin,
    Status,
)
from kubesched.scheduler.plugins.args import META_KEYS
from kubesched.scheduler.plugins.noderesourcetopology.cache import DiscardReservedCache, NRTCache, OverReserveCache
from kubesched.scheduler.plugins.noderesourcetopology.filter import (
    filter_handler,
    node_resource_names,
    single_numa_container_level,
    single_numa_pod_level,
)
from kubesched.scheduler.plugins.noderesourcetopology.numa import (
    SCOPE_POD,
    include_non_native,
    numa_node_list,
    pod_effective_request,
    topology_manager_of,
)
from kubesched.scheduler.plugins.noderesourcetopology.score import (
    STRATEGIES,
    least_numa_container_scope,
    least_numa_pod_scope,
    score_for_each_numa_node,
)

NAME = "NodeResourceTopologyMatch"
LEAST_NUMA_NODES = "LeastNUMANodes"
SCORING_STRATEGIES = ("MostAllocated", "BalancedAllocation", "LeastAllocated", LEAST_NUMA_NODES)
PREEMPTION_MODES = ("Disabled", "Enabled")
VICTIMS_KEY = "stateVictimPods"
_CACHE_FIELDS = {"foreignPodsDetect": ("None", "All", "OnlyExclusiveResources"),
                 "resyncMethod": ("Autodetect", "All", "OnlyExclusiveResources"),
                 "informerMode": ("Shared", "Dedicated"),
                 "resyncScope": ("All", "OnlyResources")}
DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))
_CACHE_DEFAULTS = (("foreignPodsDetect", "All"), ("resyncMethod", "Autodetect"), ("informerMode", "Dedicated"))


def _check_known(raw: Mapping[str, Any], known: set[str], field: str) -> None:
    for key in raw:
        if key not in known and key not in META_KEYS:
            raise InputError(f"unknown field {key!r}; expected one of {', '.join(sorted(known))}",
                             field=f"{field}{key}")


@dataclass(frozen=True, slots=True)
class NodeResourceTopologyMatchArgs:
    scoring_strategy: str = "LeastAllocated"
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    cache_resync_period_seconds: int = 0
    discard_reserved_nodes: bool = False
    cache: tuple[tuple[str, str], ...] = _CACHE_DEFAULTS
    preemption_mode: str = "Disabled"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeResourceTopologyMatchArgs:
        raw = raw or {}
        p = f"{field}." if field else ""
        _check_known(raw, {"scoringStrategy", "cacheResyncPeriodSeconds", "discardReservedNodes", "cache",
                           "preemptionMode"}, p)
        strategy = "LeastAllocated"
        resources: list[tuple[str, int]] = []
        ss = raw.get("scoringStrategy")
        if ss is not None:
            if not isinstance(ss, dict):
                raise InputError(f"expected an object, got {type(ss).__name__}", field=f"{p}scoringStrategy")
            _check_known(ss, {"type", "resources"}, f"{p}scoringStrategy.")
            strategy = ss.get("type") or ""
            items = ss.get("resources") or []
            if not isinstance(items, list):
                raise InputError("expected a list", field=f"{p}scoringStrategy.resources")
            for i, r in enumerate(items):
                f = f"{p}scoringStrategy.resources[{i}]"
                if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                    raise InputError("expected a resource with a name and a weight", field=f)
                w = r.get("weight", 0)
                if isinstance(w, bool) or not isinstance(w, int):
                    raise InputError(f"expected an integer weight, got {w!r}", field=f"{f}.weight")
                resources.append((r["name"], w or 1))
        if strategy not in SCORING_STRATEGIES:
            raise InputError(f"Invalid value: {strategy!r}: invalid ScoringStrategyType",
                             field=f"{p}scoringStrategy.type")
        period = raw.get("cacheResyncPeriodSeconds", 0)
        if isinstance(period, bool) or not isinstance(period, int):
            raise InputError(f"expected an integer, got {period!r}", field=f"{p}cacheResyncPeriodSeconds")
        discard = raw.get("discardReservedNodes", False)
        if not isinstance(discard, bool):
            raise InputError(f"expected true or false, got {discard!r}", field=f"{p}discardReservedNodes")
        cache = dict(_CACHE_DEFAULTS)
        cache_raw = raw.get("cache")
        if cache_raw is not None:
            if not isinstance(cache_raw, dict):
                raise InputError("expected an object", field=f"{p}cache")
            _check_known(cache_raw, set(_CACHE_FIELDS), f"{p}cache.")
            for key, value in cache_raw.items():
                if key in META_KEYS:
                    continue
                if value not in _CACHE_FIELDS[key]:
                    raise InputError(f"expected one of {', '.join(_CACHE_FIELDS[key])}, got {value!r}",
                                     field=f"{p}cache.{key}")
                cache[key] = value
        mode = raw.get("preemptionMode", "Disabled")
        if mode not in PREEMPTION_MODES:
            raise InputError(f"Invalid value: {mode!r}: invalid PreemptionMode", field=f"{p}preemptionMode")
        return cls(strategy, tuple(dict(resources or DEFAULT_RESOURCES).items()), period, discard,
                   tuple(cache.items()), mode)


class _VictimStack(PreFilterExtensions):
    """AddPod/RemovePod keep the preemption stack (the victims of a dry run) in the cycle state."""

    def add_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_add: Pod, node_info: NodeInfo) -> Status:
        stack = state.read(VICTIMS_KEY)
        if isinstance(stack, dict):
            stack.pop(pod_to_add.key, None)
        return Status()

    def remove_pod(self, state: CycleState, pod_to_schedule: Pod, pod_to_remove: Pod, node_info: NodeInfo) -> Status:
        stack = state.read(VICTIMS_KEY)
        if isinstance(stack, dict):
            stack[pod_to_remove.key] = pod_to_remove
        return Status()


class NodeResourceTopologyMatch(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, PostBindPlugin):
    name = NAME
    Args = NodeResourceTopologyMatchArgs

    def __init__(self, args: NodeResourceTopologyMatchArgs | Mapping[str, Any] | None, handle: Handle) -> None:
        super().__init__(None, handle)
        self.args = (args if isinstance(args, NodeResourceTopologyMatchArgs)
                     else NodeResourceTopologyMatchArgs.from_raw(args))
        self.weights = dict(self.args.resources)
        self.cache: NRTCache
        if self.args.discard_reserved_nodes:
            self.cache = DiscardReservedCache(handle.cluster)
        elif self.args.cache_resync_period_seconds > 0:
            self.cache = OverReserveCache(handle.cluster)
            print(f"warning: {NAME}: the overreserve cache (cacheResyncPeriodSeconds > 0) is modelled without "
                  "resync and foreign-pod detection: pods reserved on a node count against its "
                  "NodeResourceTopology until the object is updated", file=sys.stderr)
        else:
            self.cache = NRTCache(handle.cluster)
        self._victims = _VictimStack()

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete",)), ClusterEvent("Node", ("add", "update")),
                ClusterEvent("NodeResourceTopology", ("add", "update"))]

    # ------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        if self.args.preemption_mode == "Disabled":
            return None, Status()
        state.write(VICTIMS_KEY, {})
        return None, Status()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self._victims if self.args.preemption_mode == "Enabled" else None

    # ------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        qos = qos_class(pod)
        if qos == BEST_EFFORT and not include_non_native(pod):
            return Status()
        nrt, fresh = self.cache.get(node_info.name)
        if not fresh:
            return Status(Code.UNSCHEDULABLE, ["invalid node topology data"])
        if nrt is None:
            return Status()
        scope = filter_handler(topology_manager_of(nrt))
        if scope is None:
            return Status()
        numa_nodes = numa_node_list(nrt)
        names = node_resource_names(node_info)
        if scope == SCOPE_POD:
            return single_numa_pod_level(pod, numa_nodes, names, qos)
        return single_numa_container_level(pod, numa_nodes, names, qos)

    # ------------------------------------------------------------ Score

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        qos = qos_class(pod)
        if qos != GUARANTEED:
            return MAX_NODE_SCORE, Status()
        nrt, fresh = self.cache.get(node_info.name)
        if not fresh or nrt is None:
            return 0, Status()
        conf = topology_manager_of(nrt)
        numa_nodes = numa_node_list(nrt)
        containers = [c.requests for c in [*pod.init_containers, *pod.containers]]
        if self.args.scoring_strategy == LEAST_NUMA_NODES:
            if conf.scope == SCOPE_POD:
                return least_numa_pod_scope(qos, numa_nodes, pod_effective_request(pod), conf.max_numa_nodes), Status()
            return least_numa_container_scope(qos, numa_nodes, containers, conf.max_numa_nodes), Status()
        if conf.policy != "single-numa-node":
            return 0, Status()
        strategy = STRATEGIES[self.args.scoring_strategy]
        if conf.scope == SCOPE_POD:
            return score_for_each_numa_node(pod_effective_request(pod), numa_nodes, strategy, self.weights), Status()
        scores = [float(score_for_each_numa_node(r, numa_nodes, strategy, self.weights)) for r in containers]
        return (int(sum(scores) / len(scores)) if scores else 0), Status()

    # ------------------------------------------------------------ Reserve, PostBind

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.cache.reserve(node_name, pod)
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.cache.unreserve(node_name, pod)

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.cache.post_bind(node_name, pod)

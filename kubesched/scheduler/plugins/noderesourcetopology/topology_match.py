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

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.api.qos import BEST_EFFORT, GUARANTEED, qos_class
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.diagnostics import warn
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
from kubesched.scheduler.plugins.resource_allocation import DEFAULT_RESOURCE_SPECS, ResourceSpec

NAME = "NodeResourceTopologyMatch"
LEAST_NUMA_NODES = "LeastNUMANodes"
LEAST_ALLOCATED = "LeastAllocated"
SCORING_STRATEGIES = ("MostAllocated", "BalancedAllocation", LEAST_ALLOCATED, LEAST_NUMA_NODES)
PREEMPTION_MODES = ("Disabled", "Enabled")
VICTIMS_KEY = "stateVictimPods"
_CACHE_FIELDS = {"foreignPodsDetect": ("None", "All", "OnlyExclusiveResources"),
                 "resyncMethod": ("Autodetect", "All", "OnlyExclusiveResources"),
                 "informerMode": ("Shared", "Dedicated"),
                 "resyncScope": ("All", "OnlyResources")}


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    """ScoringStrategy: the type and the resources it weighs (a weight of 0 counts as 1)."""

    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCE_SPECS


@dataclass(frozen=True, slots=True)
class NodeResourceTopologyCache:
    """NodeResourceTopologyCache (v1 defaults): how the overreserve cache resyncs (accepted, not modelled)."""

    foreign_pods_detect: str = "All"
    resync_method: str = "Autodetect"
    informer_mode: str = "Dedicated"
    resync_scope: str | None = None


# NodeResourceTopologyMatchArgs fields of scheduler-plugins' v1beta1 era (json tags `kubeconfigpath`, `namespaces`).
_OLD_FIELDS = ("kubeconfigpath", "namespaces")


@dataclass(frozen=True, slots=True)
class NodeResourceTopologyMatchArgs(PluginArgs):
    """NodeResourceTopologyMatchArgs (v1), defaulted and validated as upstream."""

    scoring_strategy: ScoringStrategy = ScoringStrategy()
    cache_resync_period_seconds: int = 0
    discard_reserved_nodes: bool = dataclasses.field(default=False, metadata=OMITEMPTY)
    cache: NodeResourceTopologyCache = NodeResourceTopologyCache()
    preemption_mode: str = "Disabled"

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> NodeResourceTopologyMatchArgs:
        a = fields.Fields(raw, field, allowed=("cache", "cacheResyncPeriodSeconds", "discardReservedNodes",
                                               "preemptionMode", "scoringStrategy") + _OLD_FIELDS)
        for key in _OLD_FIELDS:
            if a.has(key):
                # Early releases read NodeResourceTopology objects through their own client; kubesched reads them
                # from the snapshot, so these say nothing here (later releases dropped them).
                warn(f"{key}: a field of early scheduler-plugins releases, ignored (NodeResourceTopology objects are "
                     "read from the snapshot)", field=a.path(key))
        ss = a.object("scoringStrategy", ("resources", "type"))
        strategy = ss.string("type", "") if a.has("scoringStrategy") else LEAST_ALLOCATED
        if strategy not in SCORING_STRATEGIES:
            raise ss.error("type", f"Invalid value: {strategy!r}: invalid ScoringStrategyType")
        resources: list[ResourceSpec] = []
        for i, item in enumerate(ss.sequence("resources")):
            r = fields.Fields(item, fields.join(ss.path("resources"), i), allowed=("name", "weight"))
            resources.append(ResourceSpec(r.string("name", ""), r.integer("weight", 0, bits=fields.INT64) or 1))
        # A repeated name keeps its last weight (the plugin reads them as a map).
        merged = tuple(ResourceSpec(n, w) for n, w in {r.name: r.weight for r in resources}.items())
        period = a.integer("cacheResyncPeriodSeconds", 0, bits=fields.INT64)
        discard = a.boolean("discardReservedNodes")
        c = a.object("cache", tuple(_CACHE_FIELDS))
        values: dict[str, str | None] = {}
        for key, allowed in _CACHE_FIELDS.items():
            value = c.string(key)
            if value is not None and value not in allowed:
                raise c.error(key, f"expected one of {', '.join(allowed)}, got {value!r}")
            values[key] = value
        defaults = NodeResourceTopologyCache()
        cache = NodeResourceTopologyCache(values["foreignPodsDetect"] or defaults.foreign_pods_detect,
                                          values["resyncMethod"] or defaults.resync_method,
                                          values["informerMode"] or defaults.informer_mode,
                                          values["resyncScope"])
        mode = a.get("preemptionMode", "Disabled")
        if mode not in PREEMPTION_MODES:
            raise a.error("preemptionMode", f"Invalid value: {mode!r}: invalid PreemptionMode")
        return cls(ScoringStrategy(strategy, merged or DEFAULT_RESOURCE_SPECS), period, discard, cache, mode)


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

    def __init__(self, args: NodeResourceTopologyMatchArgs | None, handle: Handle) -> None:
        super().__init__(args if args is not None else NodeResourceTopologyMatchArgs(), handle)
        self.args: NodeResourceTopologyMatchArgs
        self.weights = {r.name: r.weight for r in self.args.scoring_strategy.resources}
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
        if self.args.scoring_strategy.type == LEAST_NUMA_NODES:
            if conf.scope == SCOPE_POD:
                return least_numa_pod_scope(qos, numa_nodes, pod_effective_request(pod), conf.max_numa_nodes), Status()
            return least_numa_container_scope(qos, numa_nodes, containers, conf.max_numa_nodes), Status()
        if conf.policy != "single-numa-node":
            return 0, Status()
        strategy = STRATEGIES[self.args.scoring_strategy.type]
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

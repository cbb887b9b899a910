"""The descheduler framework: plugin kinds, the handle plugins get, eviction options and limit errors.

Mirrors kubernetes-sigs/descheduler's `pkg/framework/types`: strategies (Deschedule and Balance plugins)
decide *what* to evict; evictor plugins (Filter, PreEvictionFilter) and the evictor's limits decide
*whether* it may be evicted. kubesched adds a Sort extension point (ordering candidate pods).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol

from kubesched.api.objects import Node, Pod
from kubesched.api.snapshot import Snapshot
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import NoArgs, PluginArgs
from kubesched.metrics.base import Metrics


@dataclass(slots=True)
class Status:
    """A plugin's result: None error means success."""

    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class EvictOptions:
    reason: str = ""
    profile: str = ""
    plugin: str = ""


class EvictionLimitError(Exception):
    """An eviction refused because a limit is reached: `limit` is "node", "namespace" or "total".

    Strategies stop evicting from that node (node limit), namespace, or altogether (total), as upstream's
    EvictionNodeLimitError / EvictionNamespaceLimitError / EvictionTotalLimitError make them.
    """

    def __init__(self, limit: str, message: str) -> None:
        self.limit = limit
        super().__init__(message)


class Evictor(Protocol):
    """What strategies call: the profile's evictor filters, and eviction under the global limits."""

    def filter(self, pod: Pod) -> bool: ...

    def pre_eviction_filter(self, pod: Pod) -> bool: ...

    def sort(self, pods: list[Pod]) -> list[Pod]: ...

    @property
    def has_sorters(self) -> bool:
        """Whether `sort` may change the order (without sorters it keeps the strategy's order)."""
        ...

    @property
    def filters_read_only_the_pod(self) -> bool:
        """Whether `filter`'s verdict on a pod stays while other pods are evicted (strategies may then filter
        a node's pods as they reach them, after sorting)."""
        ...

    def evict(self, pod: Pod, opts: EvictOptions) -> bool:
        """Evict (or, in dry-run, record) the pod. False when the eviction failed; raises
        EvictionLimitError when a limit stops it."""
        ...


@dataclass
class DeschedulerServices:
    """What the descheduler's caller provides to plugins, shared by every profile, by name and type.

    `scheduler_config` is the KubeSchedulerConfiguration for scheduler-profile node fit (default profile
    when None); `cycle` counts cycles (plugins memoise per cycle); `snapshot` the objects the cluster came
    from; `metrics_collector` the MetricsCollector of the moment (sorters); `usage` a usage reading for
    load-aware strategies (LowNodeLoad); `metric_objects` metrics objects given besides the snapshot;
    `prometheus_client` answers usage-based strategies' Prometheus queries; `node_fits` keeps the
    scheduler-profile node-fit answerers of this cycle.
    """

    policy: Any = None
    scheduler_config: Any = None
    seed: int = 0
    cycle: int = 0
    snapshot: Snapshot | None = None
    metrics_collector: Any = None
    usage: Metrics | None = None
    metric_objects: list[dict[str, Any]] | None = None
    prometheus_client: Any = None
    node_fits: dict[str, tuple[int, Any]] = field(default_factory=dict)


@dataclass
class Handle:
    """What a descheduler plugin may use."""

    cluster: ClusterState
    evictor: Evictor
    now: datetime
    profile: str = ""
    # Actual usage for usage-based strategies (descheduler's MetricsCollector, Prometheus, ...), if configured.
    metrics: Any = None
    # Node fit by the scheduler's own filter chain, when the evictor is configured for it.
    node_fit: Callable[[Pod, list[Node]], bool] | None = None
    services: DeschedulerServices = field(default_factory=DeschedulerServices)

    def pods_on_node(self, node_name: str, pod_filter: Callable[[Pod], bool] | None = None) -> list[Pod]:
        """podutil.ListPodsOnANode: non-terminal pods assigned to the node (optionally filtered)."""
        pods = [p for p in self.cluster.pods_on(node_name)]
        if pod_filter is not None:
            pods = [p for p in pods if pod_filter(p)]
        return pods


class DeschedulerPlugin:
    """Base of every descheduler plugin.

    A plugin with typed args declares `Args` (a PluginArgs subclass: upstream's types.go, defaults.go and
    validation.go); the policy loader builds them once and the descheduler passes them. A plugin without
    `Args` gets its pluginConfig args as a dict (what its optional `validate_args(args, field)` returned).
    """

    name: ClassVar[str] = ""
    Args: ClassVar[type[PluginArgs] | None] = None
    args: Any

    def __init__(self, args: Any, handle: Handle) -> None:
        self.args = args if args is not None else {}
        self.handle = handle

    @classmethod
    def default_args(cls) -> dict[str, Any] | None:
        """The plugin's defaulted args (from its typed defaults), or None when it takes none."""
        if cls.Args is None or issubclass(cls.Args, NoArgs):
            return None
        return cls.Args().to_raw()


class DeschedulePlugin(DeschedulerPlugin):
    def deschedule(self, nodes: list[Node]) -> Status:
        raise NotImplementedError


class BalancePlugin(DeschedulerPlugin):
    def balance(self, nodes: list[Node]) -> Status:
        raise NotImplementedError


class EvictorPlugin(DeschedulerPlugin):
    def filter(self, pod: Pod) -> bool:
        return True

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return True

    def evicting(self, pod: Pod) -> bool:
        """The last word right before the eviction (after the limits passed); False refuses it. True by default."""
        return True

    def evicted(self, pod: Pod) -> None:
        """Called after the profile's evictor evicted (or, in dry-run, recorded) the pod; a no-op by default."""
        return None


class SortPlugin(DeschedulerPlugin):
    """kubesched's addition: orders candidate pods before strategies evict them (most evictable first)."""

    def sort(self, pods: list[Pod]) -> list[Pod]:
        raise NotImplementedError

"""The descheduler plugin registry: plugin name → "module:Class", loaded lazily.

Built-in strategies, evictor filters and sorters are listed here; a third-party package adds its own
without forking by declaring, in its pyproject.toml:

    [project.entry-points."kubesched.descheduler_plugins"]
    MyStrategy = "my_package.my_module:MyStrategy"

The name on the left is the name a DeschedulerPolicy uses. A plugin class subclasses one (or several)
of DeschedulePlugin, BalancePlugin, EvictorPlugin and SortPlugin from `kubesched.descheduler.framework`;
the extension points it may be enabled at follow from those base classes.
"""

from __future__ import annotations

from kubesched.descheduler.framework import (
    BalancePlugin,
    DeschedulePlugin,
    DeschedulerPlugin,
    EvictorPlugin,
    SortPlugin,
)
from kubesched.plugin_registry import LazyRegistry

ENTRY_POINT_GROUP = "kubesched.descheduler_plugins"

_P = "kubesched.descheduler.plugins."
BUILTIN: dict[str, str] = {
    # The evictor (filter and preEvictionFilter).
    "DefaultEvictor": _P + "default_evictor:DefaultEvictor",
    # Balance strategies on node utilization.
    "LowNodeUtilization": _P + "low_node_utilization:LowNodeUtilization",
    "HighNodeUtilization": _P + "high_node_utilization:HighNodeUtilization",
    # The other upstream strategies.
    "RemoveDuplicates": _P + "remove_duplicates:RemoveDuplicates",
    "RemovePodsViolatingInterPodAntiAffinity":
        _P + "remove_pods_violating_inter_pod_anti_affinity:RemovePodsViolatingInterPodAntiAffinity",
    "RemovePodsViolatingNodeAffinity": _P + "remove_pods_violating_node_affinity:RemovePodsViolatingNodeAffinity",
    "RemovePodsViolatingNodeTaints": _P + "remove_pods_violating_node_taints:RemovePodsViolatingNodeTaints",
    "RemovePodsViolatingTopologySpreadConstraint":
        _P + "remove_pods_violating_topology_spread_constraint:RemovePodsViolatingTopologySpreadConstraint",
    "RemovePodsHavingTooManyRestarts": _P + "remove_pods_having_too_many_restarts:RemovePodsHavingTooManyRestarts",
    "PodLifeTime": _P + "pod_life_time:PodLifeTime",
    "RemoveFailedPods": _P + "remove_failed_pods:RemoveFailedPods",
    # koordinator's load-aware strategy.
    "LowNodeLoad": _P + "low_node_load:LowNodeLoad",
    # kubesched's sorters (the sort extension point).
    "PriorityQoSSort": _P + "sorters:PriorityQoSSort",
    "ActualUsageSort": _P + "sorters:ActualUsageSort",
}

# Extension point name (as in the policy) → the base class a plugin needs for it.
POINT_TYPES: dict[str, type[DeschedulerPlugin]] = {
    "deschedule": DeschedulePlugin,
    "balance": BalancePlugin,
    "filter": EvictorPlugin,
    "preEvictionFilter": EvictorPlugin,
    "sort": SortPlugin,
}


class Registry(LazyRegistry[DeschedulerPlugin]):
    """Descheduler plugin name → class, imported on first use (a run imports only the plugins it uses)."""

    base = DeschedulerPlugin
    builtin = BUILTIN
    entry_point_group = ENTRY_POINT_GROUP
    what = "descheduler plugin"

    def implements(self, name: str, point: str) -> bool:
        """Whether plugin `name` can be enabled at extension point `point` (deschedule, balance, filter, ...)."""
        return issubclass(self.get(name), POINT_TYPES[point])


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT

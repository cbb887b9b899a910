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

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points

from kubesched.descheduler.framework import (
    BalancePlugin,
    DeschedulePlugin,
    DeschedulerPlugin,
    EvictorPlugin,
    SortPlugin,
)
from kubesched.errors import InputError

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


def _load(spec: str, what: str) -> type[DeschedulerPlugin]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, attr) if attr else None
    except ImportError as e:
        raise InputError(f"cannot import {what} from {spec!r}: {e}") from None
    except AttributeError:
        cls = None
    if not isinstance(cls, type) or not issubclass(cls, DeschedulerPlugin):
        raise InputError(f"{what}: {spec!r} is not a kubesched descheduler plugin class")
    return cls


class Registry:
    """Plugin name → plugin class, imported on first use (a run imports only the plugins it uses)."""

    def __init__(self, specs: dict[str, str] | None = None, include_entry_points: bool = True) -> None:
        self._specs: dict[str, str | Callable[[], type[DeschedulerPlugin]]] = dict(BUILTIN if specs is None else specs)
        self._loaded: dict[str, type[DeschedulerPlugin]] = {}
        if include_entry_points:
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                self._specs[ep.name] = ep.value

    def register(self, name: str, plugin: type[DeschedulerPlugin] | str) -> None:
        if isinstance(plugin, str):
            self._specs[name] = plugin
            self._loaded.pop(name, None)
        else:
            self._loaded[name] = plugin
            self._specs[name] = f"{plugin.__module__}:{plugin.__qualname__}"

    def register_spec(self, spec: str) -> str:
        """Load `module:Class` and register it under the class's `name`; returns that name."""
        cls = _load(spec, "descheduler plugin")
        name = cls.name or cls.__name__
        self.register(name, cls)
        return name

    def __contains__(self, name: str) -> bool:
        return name in self._specs or name in self._loaded

    def names(self) -> list[str]:
        return sorted(set(self._specs) | set(self._loaded))

    def get(self, name: str) -> type[DeschedulerPlugin]:
        cls = self._loaded.get(name)
        if cls is None:
            spec = self._specs.get(name)
            if spec is None:
                raise KeyError(name)
            cls = _load(spec, f"descheduler plugin {name}") if isinstance(spec, str) else spec()
            self._loaded[name] = cls
        return cls


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT

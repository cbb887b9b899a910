"""The plugin registry: built-in plugins by name, extended through the `kubesched.scheduler_plugins` entry points.

A third-party package adds a plugin without forking by declaring, in its own pyproject.toml:

    [project.entry-points."kubesched.scheduler_plugins"]
    MyPlugin = "my_package.my_module:MyPlugin"

The name on the left is the name a KubeSchedulerConfiguration uses. `--plugin module:Class` on the
command line loads one more plugin from a plain Python module for a single run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points

from kubesched.errors import InputError
from kubesched.scheduler.framework import Plugin

ENTRY_POINT_GROUP = "kubesched.scheduler_plugins"

_P = "kubesched.scheduler.plugins."
BUILTIN: dict[str, str] = {
    "SchedulingGates": _P + "scheduling_gates:SchedulingGates",
    "PrioritySort": _P + "priority_sort:PrioritySort",
    "NodeUnschedulable": _P + "node_unschedulable:NodeUnschedulable",
    "NodeName": _P + "node_name:NodeName",
    "TaintToleration": _P + "taint_toleration:TaintToleration",
    "NodeAffinity": _P + "node_affinity:NodeAffinity",
    "NodePorts": _P + "node_ports:NodePorts",
    "NodeResourcesFit": _P + "node_resources_fit:NodeResourcesFit",
    "NodeResourcesBalancedAllocation": _P + "balanced_allocation:NodeResourcesBalancedAllocation",
    "ImageLocality": _P + "image_locality:ImageLocality",
    "InterPodAffinity": _P + "inter_pod_affinity:InterPodAffinity",
    "PodTopologySpread": _P + "pod_topology_spread:PodTopologySpread",
    "VolumeRestrictions": _P + "volume_restrictions:VolumeRestrictions",
    "NodeVolumeLimits": _P + "node_volume_limits:NodeVolumeLimits",
    "VolumeBinding": _P + "volume_binding:VolumeBinding",
    "VolumeZone": _P + "volume_zone:VolumeZone",
    "DynamicResources": _P + "dynamic_resources:DynamicResources",
    "DefaultPreemption": _P + "default_preemption:DefaultPreemption",
    "DefaultBinder": _P + "default_binder:DefaultBinder",
    # Load-aware plugins (scheduler-plugins' Trimaran, koordinator's LoadAwareScheduling).
    "TargetLoadPacking": _P + "trimaran.target_load_packing:TargetLoadPacking",
    "LoadVariationRiskBalancing": _P + "trimaran.load_variation_risk_balancing:LoadVariationRiskBalancing",
    "LowRiskOverCommitment": _P + "trimaran.low_risk_over_commitment:LowRiskOverCommitment",
    "LoadAwareScheduling": _P + "load_aware_scheduling:LoadAwareScheduling",
}


def _load(spec: str, what: str) -> type[Plugin]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, attr) if attr else None
    except ImportError as e:
        raise InputError(f"cannot import {what} from {spec!r}: {e}") from None
    except AttributeError:
        cls = None
    if not isinstance(cls, type) or not issubclass(cls, Plugin):
        raise InputError(f"{what}: {spec!r} is not a kubesched scheduler Plugin class")
    return cls


class Registry:
    """Plugin name → plugin class, loaded lazily (so a run imports only the plugins it uses)."""

    def __init__(self, specs: dict[str, str] | None = None, include_entry_points: bool = True) -> None:
        self._specs: dict[str, str | Callable[[], type[Plugin]]] = dict(BUILTIN if specs is None else specs)
        self._loaded: dict[str, type[Plugin]] = {}
        if include_entry_points:
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                self._specs[ep.name] = ep.value

    def register(self, name: str, plugin: type[Plugin] | str) -> None:
        if isinstance(plugin, str):
            self._specs[name] = plugin
        else:
            self._loaded[name] = plugin
            self._specs[name] = f"{plugin.__module__}:{plugin.__qualname__}"

    def register_spec(self, spec: str) -> str:
        """Load `module:Class` and register it under the class's `name`; returns that name."""
        cls = _load(spec, "plugin")
        name = cls.name or cls.__name__
        self.register(name, cls)
        return name

    def __contains__(self, name: str) -> bool:
        return name in self._specs or name in self._loaded

    def names(self) -> list[str]:
        return sorted(set(self._specs) | set(self._loaded))

    def get(self, name: str) -> type[Plugin]:
        cls = self._loaded.get(name)
        if cls is None:
            spec = self._specs.get(name)
            if spec is None:
                raise KeyError(name)
            cls = _load(spec, f"plugin {name}") if isinstance(spec, str) else spec()
            self._loaded[name] = cls
        return cls


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT

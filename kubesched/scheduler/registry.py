"""The plugin registry: built-in plugins by name, extended through the `kubesched.scheduler_plugins` entry points.

A third-party package adds a plugin without forking by declaring, in its own pyproject.toml:

    [project.entry-points."kubesched.scheduler_plugins"]
    MyPlugin = "my_package.my_module:MyPlugin"

The name on the left is the name a KubeSchedulerConfiguration uses. `--plugin module:Class` on the
command line loads one more plugin from a plain Python module for a single run.
"""

from __future__ import annotations

from kubesched.plugin_registry import LazyRegistry
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
    # scheduler-plugins (kubernetes-sigs/scheduler-plugins), under their upstream names.
    "Coscheduling": _P + "coscheduling.coscheduling:Coscheduling",
    "CapacityScheduling": _P + "capacityscheduling.capacity_scheduling:CapacityScheduling",
    "NodeResourcesAllocatable": _P + "node_resources_allocatable:NodeResourcesAllocatable",
    "NodeResourceTopologyMatch": _P + "noderesourcetopology.topology_match:NodeResourceTopologyMatch",
    "PodState": _P + "pod_state:PodState",
    "QOSSort": _P + "qos_sort:QOSSort",
}


class Registry(LazyRegistry[Plugin]):
    """Scheduler plugin name → class, imported on first use (a run imports only the plugins it uses)."""

    base = Plugin
    builtin = BUILTIN
    entry_point_group = ENTRY_POINT_GROUP
    what = "scheduler plugin"


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT

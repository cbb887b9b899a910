"""KubeSchedulerConfiguration kubescheduler.config.k8s.io/v1beta1 (kube-scheduler 1.20): its default plugins.

The published GPU-sharing simulator (hkust-adsl/kubernetes-scheduler-simulator) configures kube-scheduler
1.20 with v1beta1 documents; this table is 1.20's `getDefaultConfig`
(`pkg/scheduler/algorithmprovider/registry.go`, as vendored in that repository). v1beta1 has no
multiPoint: every extension point lists its plugins.

Plugins 1.20 had and kubesched does not are translated: NodeResourcesLeastAllocated /
NodeResourcesMostAllocated / RequestedToCapacityRatio become NodeResourcesFit's score with that scoring
strategy (what v1beta2 did when it folded them in); the in-tree volume limits (EBSLimits, GCEPDLimits,
AzureDiskLimits) and NodePreferAvoidPods leave the defaults (later kube-schedulers removed them; the first
only counts in-tree cloud volumes, the second gives every node the same score unless a node carries the
preferAvoidPods annotation). Enabling one of those by name is an unknown-plugin error.
"""

from __future__ import annotations

API_VERSION = "kubescheduler.config.k8s.io/v1beta1"

DEFAULTS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "queueSort": (("PrioritySort", None),),
    "preFilter": (("NodeResourcesFit", None), ("NodePorts", None), ("PodTopologySpread", None),
                  ("InterPodAffinity", None), ("VolumeBinding", None)),
    "filter": (("NodeUnschedulable", None), ("NodeName", None), ("TaintToleration", None), ("NodeAffinity", None),
               ("NodePorts", None), ("NodeResourcesFit", None), ("VolumeRestrictions", None), ("EBSLimits", None),
               ("GCEPDLimits", None), ("NodeVolumeLimits", None), ("AzureDiskLimits", None), ("VolumeBinding", None),
               ("VolumeZone", None), ("PodTopologySpread", None), ("InterPodAffinity", None)),
    "postFilter": (("DefaultPreemption", None),),
    "preScore": (("InterPodAffinity", None), ("PodTopologySpread", None), ("TaintToleration", None)),
    "score": (("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("InterPodAffinity", 1),
              ("NodeResourcesLeastAllocated", 1), ("NodeAffinity", 1), ("NodePreferAvoidPods", 10000),
              ("PodTopologySpread", 2), ("TaintToleration", 1)),
    "reserve": (("VolumeBinding", None),),
    "preBind": (("VolumeBinding", None),),
    "bind": (("DefaultBinder", None),),
}

# v1beta1 score plugins that are NodeResourcesFit's scoring strategies today.
FIT_STRATEGIES = {
    "NodeResourcesLeastAllocated": "LeastAllocated",
    "NodeResourcesMostAllocated": "MostAllocated",
    "RequestedToCapacityRatio": "RequestedToCapacityRatio",
}

# Default plugins of 1.20 that kubesched leaves out (see the module docstring).
DROPPED = frozenset({"EBSLimits", "GCEPDLimits", "AzureDiskLimits", "NodePreferAvoidPods"})

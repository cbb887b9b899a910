"""Which pods the kubelet treats as critical (pkg/kubelet/types): never evicted, always admitted.

A pod is critical when it is static (its `kubernetes.io/config.source` annotation names a source other
than the API server), a mirror pod (`kubernetes.io/config.mirror`), or has priority of at least
SystemCriticalPriority (2000000000). Node-critical adds priorityClassName system-node-critical.
"""

from __future__ import annotations

from kubesched.api.objects import Pod

CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
API_SERVER_SOURCE = "api"
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
SYSTEM_NODE_CRITICAL = "system-node-critical"
SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"


def is_static_pod(pod: Pod) -> bool:
    source = pod.meta.annotations.get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != API_SERVER_SOURCE


def is_mirror_pod(pod: Pod) -> bool:
    return CONFIG_MIRROR_ANNOTATION in pod.meta.annotations


def is_critical_pod_based_on_priority(priority: int) -> bool:
    return priority >= SYSTEM_CRITICAL_PRIORITY


def is_critical_pod(pod: Pod) -> bool:
    """kubelettypes.IsCriticalPod."""
    if is_static_pod(pod) or is_mirror_pod(pod):
        return True
    return pod.priority is not None and is_critical_pod_based_on_priority(pod.priority)


def is_node_critical_pod(pod: Pod) -> bool:
    """kubelettypes.IsNodeCriticalPod."""
    return is_critical_pod(pod) and pod.priority_class_name == SYSTEM_NODE_CRITICAL

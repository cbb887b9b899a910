"""The PodNominator: pods that preemption nominated to a node, waiting for room there.

kube-scheduler keeps nominations in memory and mirrors each in the pod's `status.nominatedNodeName`
(which is also where a restarted scheduler reads them back). Filter leaves room on a node for the pods
nominated to it with at least the incoming pod's priority; preemption clears the nominations of
lower-priority pods on the node it picks.
"""

from __future__ import annotations

from kubesched.api.objects import Pod
from kubesched.cluster.state import ClusterState


class Nominator:
    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.nominated: dict[str, str] = {}  # pod key -> node name
        for p in cluster.pending_pods():
            if p.nominated_node_name:
                self.nominated[p.key] = p.nominated_node_name

    def __bool__(self) -> bool:
        return bool(self.nominated)

    def add(self, pod_key: str, node_name: str) -> None:
        self.nominated[pod_key] = node_name

    def delete(self, pod_key: str) -> None:
        self.nominated.pop(pod_key, None)

    def node_of(self, pod_key: str) -> str:
        return self.nominated.get(pod_key, "")

    def pods_for_node(self, node_name: str) -> list[Pod]:
        """NominatedPodsForNode: every pending pod nominated to `node_name`, whatever its priority."""
        pods = self.cluster.pods
        return [p for key, node in self.nominated.items()
                if node == node_name and (p := pods.get(key)) is not None and not p.node_name]

    def nominated_pods_for(self, node_name: str, pod: Pod) -> list[Pod]:
        """Pods nominated to `node_name` with priority at least the pod's (excluding the pod itself)."""
        out = []
        prio = pod.effective_priority
        pods = self.cluster.pods
        for key, node in self.nominated.items():
            if node != node_name or key == pod.key:
                continue
            p = pods.get(key)
            if p is not None and not p.node_name and p.effective_priority >= prio:
                out.append(p)
        return out

    def lower_priority_pods(self, pod: Pod, node_name: str) -> list[Pod]:
        """Pods nominated to the node with a lower priority than the pod's."""
        prio = pod.effective_priority
        pods = self.cluster.pods
        out = []
        for key, node in list(self.nominated.items()):
            p = pods.get(key)
            if node == node_name and p is not None and p.effective_priority < prio:
                out.append(p)
        return out

    def rows_with_nominations(self, excluding: str) -> dict[int, str]:
        """Table rows of nodes with nominated pods (other than `excluding`) → node name."""
        by_name = self.cluster.node_info_by_name
        return {info.index: name for k, name in self.nominated.items()
                if k != excluding and (info := by_name.get(name)) is not None}

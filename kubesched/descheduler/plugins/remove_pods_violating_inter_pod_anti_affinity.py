"""RemovePodsViolatingInterPodAntiAffinity (Deschedule): evict pods whose required anti-affinity is violated.

A pod is a candidate when one of its required podAntiAffinity terms selects another pod (in the term's
namespaces, or the pod's own) on a node with the same topology value (or the same node). Each node's
pods are examined lowest priority first; an evicted pod no longer counts against the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kubesched.api.objects import Node, Pod
from kubesched.api.selectors import LabelSelector
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler import podutil
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.plugins._common import (
    EVICTED,
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    evict,
    label_selector,
    list_pods_on_nodes,
    namespace_label_filter,
    namespaces,
    strategy_fields,
)

PLUGIN_NAME = "RemovePodsViolatingInterPodAntiAffinity"


@dataclass(frozen=True, slots=True)
class RemovePodsViolatingInterPodAntiAffinityArgs(PluginArgs):
    """RemovePodsViolatingInterPodAntiAffinityArgs (types.go)."""

    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> RemovePodsViolatingInterPodAntiAffinityArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "labelSelector"))
        return cls(namespaces=namespaces(a), label_selector=label_selector(a))


class RemovePodsViolatingInterPodAntiAffinity(DeschedulePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemovePodsViolatingInterPodAntiAffinityArgs
    args: RemovePodsViolatingInterPodAntiAffinityArgs

    def __init__(self, args: RemovePodsViolatingInterPodAntiAffinityArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        # Upstream lists with namespaces and labels only; the evictor filters apply to the candidate.
        self.pod_filter = namespace_label_filter(self.args.namespaces, self.args.label_selector)

    def deschedule(self, nodes: list[Node]) -> Status:
        pods = list_pods_on_nodes(self.handle, nodes, self.pod_filter)
        pods_in_namespace = podutil.group_by_namespace(pods)
        pods_on_node = podutil.group_by_node_name(pods)
        node_map = {n.name: n for n in nodes}
        ev = self.handle.evictor
        for node in nodes:
            node_pods = podutil.sort_pods_based_on_priority_low_to_high(list(pods_on_node.get(node.name, [])))
            for pod in node_pods:
                if not check_pods_with_anti_affinity_exist(pod, pods_in_namespace, node_map):
                    continue
                if not (ev.filter(pod) and ev.pre_eviction_filter(pod)):
                    continue
                outcome = evict(self.handle, pod, PLUGIN_NAME)
                if outcome == EVICTED:
                    # The evicted pod no longer repels (or is repelled by) the pods examined after it.
                    _remove_pod(pod, pods_in_namespace)
                elif outcome == NODE_LIMIT:
                    break
                elif outcome == TOTAL_LIMIT:
                    return Status()
        return Status()


def _remove_pod(pod: Pod, pods_in_namespace: dict[str, list[Pod]]) -> None:
    """removePodFromNamespaceMap: drop the first pod of the namespace with the same name."""
    lst = pods_in_namespace.get(pod.namespace)
    if not lst:
        return
    for i, p in enumerate(lst):
        if p.name == pod.name:
            del lst[i]
            return


def check_pods_with_anti_affinity_exist(candidate: Pod, assigned: dict[str, list[Pod]], node_map: dict[str, Node]) -> bool:
    """utils.CheckPodsWithAntiAffinityExist: some assigned pod matches one of the candidate's required
    anti-affinity terms and runs in the same topology domain (namespaceSelector is not considered)."""
    candidate_node = node_map.get(candidate.node_name)
    if candidate_node is None:
        return False
    for term in candidate.affinity.pod_anti_affinity_required:
        namespaces = set(term.namespaces) if term.namespaces else {candidate.namespace}
        for ns in namespaces:
            for other in assigned.get(ns, ()):
                if other.name == candidate.name:
                    continue
                if other.namespace not in namespaces or not term.label_selector.matches(other.labels):
                    continue
                other_node = node_map.get(other.node_name)
                if other_node is None:
                    continue
                if _same_label_value(candidate_node, other_node, term.topology_key):
                    return True
    return False


def _same_label_value(a: Node, b: Node, key: str) -> bool:
    if a.name == b.name:
        return True
    va = a.labels.get(key)
    vb = b.labels.get(key)
    return va is not None and vb is not None and va == vb

"""RemovePodsViolatingNodeAffinity (Deschedule): evict pods whose node affinity their node no longer satisfies.

For `requiredDuringSchedulingIgnoredDuringExecution`, a pod with required node affinity is evicted when
its node no longer matches it (nodeSelector included) and it fits some node of the cycle. For
`preferredDuringSchedulingIgnoredDuringExecution`, a pod with preferred terms is evicted when some node
of the cycle scores a higher total preference weight than its own and it fits some node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kubesched.api.objects import Node, Pod
from kubesched.api.selectors import LabelSelector
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler import nodeutil
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.plugins._common import (
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    all_of,
    evict,
    label_selector,
    list_pods_on_node,
    namespace_label_filter,
    namespaces,
    optional_strings,
    strategy_fields,
)

PLUGIN_NAME = "RemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class RemovePodsViolatingNodeAffinityArgs(PluginArgs):
    """RemovePodsViolatingNodeAffinityArgs (types.go) with ValidateRemovePodsViolatingNodeAffinityArgs."""

    node_affinity_type: tuple[str, ...] = ()
    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> RemovePodsViolatingNodeAffinityArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "labelSelector", "nodeAffinityType"))
        types = optional_strings(a, "nodeAffinityType") or []
        if not types:
            raise a.error("nodeAffinityType", "nodeAffinityType needs to be set")
        # Values other than the two known types pass validation upstream and are skipped at run time.
        return cls(tuple(types), namespaces(a), label_selector(a))


class RemovePodsViolatingNodeAffinity(DeschedulePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemovePodsViolatingNodeAffinityArgs
    args: RemovePodsViolatingNodeAffinityArgs

    def __init__(self, args: RemovePodsViolatingNodeAffinityArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        ev = handle.evictor
        self.pod_filter = all_of(namespace_label_filter(self.args.namespaces, self.args.label_selector),
                                 ev.filter, ev.pre_eviction_filter)

    def deschedule(self, nodes: list[Node]) -> Status:
        cluster = self.handle.cluster
        for affinity_type in self.args.node_affinity_type:
            check: Callable[[Pod, Node], bool]
            # The checks are pure, so the cheap ones run first; the outcome is upstream's conjunction.
            if affinity_type == REQUIRED:
                def check(pod: Pod, node: Node) -> bool:
                    return (pod.affinity.node_required is not None and not nodeutil.pod_match_node_selector(pod, node)
                            and self.pod_filter(pod)
                            and nodeutil.pod_fits_any_node(cluster, pod, nodes))
            elif affinity_type == PREFERRED:
                def check(pod: Pod, node: Node) -> bool:
                    if not pod.affinity.node_preferred:
                        return False
                    best = nodeutil.get_best_node_weight_given_pod_preferred_affinity(pod, nodes)
                    here = nodeutil.get_node_weight_given_pod_preferred_affinity(pod, node)
                    return (best > here and self.pod_filter(pod)
                            and nodeutil.pod_fits_any_node(cluster, pod, nodes))
            else:
                continue  # upstream logs "Invalid nodeAffinityType" and goes on
            if self._process_nodes(nodes, check):
                return Status()
        return Status()

    def _process_nodes(self, nodes: list[Node], check: Callable[[Pod, Node], bool]) -> bool:
        """Evict the matching pods node by node; True when the total limit ends the plugin's run."""
        for node in nodes:
            def on_node(pod: Pod, node: Node = node) -> bool:
                return check(pod, node)

            for pod in list_pods_on_node(self.handle, node.name, on_node):
                outcome = evict(self.handle, pod, PLUGIN_NAME)
                if outcome == NODE_LIMIT:
                    break
                if outcome == TOTAL_LIMIT:
                    return True
        return False

"""RemovePodsViolatingNodeAffinity (Deschedule): evict pods whose node affinity their node no longer satisfies.

For `requiredDuringSchedulingIgnoredDuringExecution`, a pod with required node affinity is evicted when
its node no longer matches it (nodeSelector included) and it fits some node of the cycle. For
`preferredDuringSchedulingIgnoredDuringExecution`, a pod with preferred terms is evicted when some node
of the cycle scores a higher total preference weight than its own and it fits some node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from kubesched.api.objects import Node, Pod
from kubesched.api.selectors import LabelSelector
from kubesched.descheduler import nodeutil
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.plugins._common import (
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    StrategyArgs,
    all_of,
    args_dict,
    check_known_fields,
    evict,
    get_label_selector,
    get_namespaces,
    get_str_list,
    list_pods_on_node,
    namespace_label_filter,
)
from kubesched.errors import InputError

PLUGIN_NAME = "RemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True, slots=True)
class RemovePodsViolatingNodeAffinityArgs:
    node_affinity_type: tuple[str, ...]
    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None


class RemovePodsViolatingNodeAffinity(DeschedulePlugin, StrategyArgs):
    name: ClassVar[str] = PLUGIN_NAME

    def __init__(self, args: dict[str, Any] | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.params = self.validate(args)
        ev = handle.evictor
        self.pod_filter = all_of(namespace_label_filter(self.params.namespaces, self.params.label_selector),
                                 ev.filter, ev.pre_eviction_filter)

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def validate(cls, args: Any) -> RemovePodsViolatingNodeAffinityArgs:
        a = args_dict(PLUGIN_NAME, args)
        check_known_fields(PLUGIN_NAME, a, ("namespaces", "labelSelector", "nodeAffinityType"))
        types = get_str_list(PLUGIN_NAME, a, "nodeAffinityType") or []
        if not types:
            raise InputError(f"{PLUGIN_NAME} args: nodeAffinityType needs to be set", field="nodeAffinityType")
        # Values other than the two known types pass validation upstream and are skipped at run time.
        return RemovePodsViolatingNodeAffinityArgs(tuple(types), get_namespaces(PLUGIN_NAME, a),
                                                   get_label_selector(PLUGIN_NAME, a))

    def deschedule(self, nodes: list[Node]) -> Status:
        cluster = self.handle.cluster
        for affinity_type in self.params.node_affinity_type:
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

"""RemovePodsViolatingNodeTaints (Deschedule): evict pods that do not tolerate their node's NoSchedule taints.

Only NoSchedule taints count (PreferNoSchedule too with `includePreferNoSchedule`); `excludedTaints`
ignores taints and `includedTaints` considers only the listed ones, each entry a key or `key=value`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kubesched.api.objects import Node, Taint
from kubesched.api.selectors import LabelSelector
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.nodeutil import tolerations_tolerate_taints_with_filter
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

PLUGIN_NAME = "RemovePodsViolatingNodeTaints"


@dataclass(frozen=True, slots=True)
class RemovePodsViolatingNodeTaintsArgs(PluginArgs):
    """RemovePodsViolatingNodeTaintsArgs (types.go) with ValidateRemovePodsViolatingNodeTaintsArgs."""

    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None
    include_prefer_no_schedule: bool = field(default=False, metadata=OMITEMPTY)
    excluded_taints: tuple[str, ...] | None = None
    # None (unset) considers every taint; an empty list set explicitly considers none.
    included_taints: tuple[str, ...] | None = None

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> RemovePodsViolatingNodeTaintsArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "labelSelector", "includePreferNoSchedule",
                                                      "excludedTaints", "includedTaints"))
        ns = namespaces(a)
        selector = label_selector(a)
        excluded = optional_strings(a, "excludedTaints")
        included = optional_strings(a, "includedTaints")
        if excluded and included:
            raise a.error("includedTaints", "either includedTaints or excludedTaints can be set, but not both")
        return cls(
            namespaces=ns,
            label_selector=selector,
            include_prefer_no_schedule=a.boolean("includePreferNoSchedule"),
            excluded_taints=None if excluded is None else tuple(excluded),
            included_taints=None if included is None else tuple(included),
        )


class RemovePodsViolatingNodeTaints(DeschedulePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemovePodsViolatingNodeTaintsArgs
    args: RemovePodsViolatingNodeTaintsArgs

    def __init__(self, args: RemovePodsViolatingNodeTaintsArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        ev = handle.evictor
        self.pod_filter = all_of(namespace_label_filter(self.args.namespaces, self.args.label_selector),
                                 ev.filter, ev.pre_eviction_filter)
        self.taint_filter = taint_filter(self.args)

    def deschedule(self, nodes: list[Node]) -> Status:
        taint_filter = self.taint_filter
        for node in nodes:
            # Without a considered taint every pod tolerates the node: nothing to list or filter (the
            # filters only decide, they change nothing).
            if not any(taint_filter(t) for t in node.taints):
                continue
            for pod in list_pods_on_node(self.handle, node.name, self.pod_filter):
                if tolerations_tolerate_taints_with_filter(pod.tolerations, node.taints, taint_filter):
                    continue
                outcome = evict(self.handle, pod, PLUGIN_NAME)
                if outcome == NODE_LIMIT:
                    break
                if outcome == TOTAL_LIMIT:
                    return Status()
        return Status()


def _named_in(names: frozenset[str], taint: Taint) -> bool:
    return taint.key in names or (taint.value != "" and f"{taint.key}={taint.value}" in names)


def taint_filter(params: RemovePodsViolatingNodeTaintsArgs) -> Callable[[Taint], bool]:
    """The taints a pod must tolerate to stay."""
    effects = ("NoSchedule", "PreferNoSchedule") if params.include_prefer_no_schedule else ("NoSchedule",)
    excluded = frozenset(params.excluded_taints or ())
    included = None if params.included_taints is None else frozenset(params.included_taints)

    def considered(taint: Taint) -> bool:
        if taint.effect not in effects or _named_in(excluded, taint):
            return False
        return included is None or _named_in(included, taint)

    return considered

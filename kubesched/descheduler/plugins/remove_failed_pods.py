"""RemoveFailedPods (Deschedule): evict pods in phase Failed.

Optionally only failed pods at least `minPodLifetimeSeconds` old (default 3600), whose owners are not of
an `excludeOwnerKinds` kind, with a container waiting/terminated reason (or the pod's status reason) in
`reasons`, or a terminated container exit code in `exitCodes` (init containers too with
`includingInitContainers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kubesched.api.objects import Node, Pod
from kubesched.api.selectors import LabelSelector
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.plugins._common import (
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    all_of,
    container_statuses,
    creation_time,
    evict,
    label_selector,
    list_all_pods_on_node,
    namespace_label_filter,
    namespaces,
    optional_int32s,
    optional_strings,
    pod_status_reason,
    seconds_since,
    strategy_fields,
    terminated_exit_code,
    terminated_reason,
    waiting_reason,
)

PLUGIN_NAME = "RemoveFailedPods"
DEFAULT_MIN_POD_LIFETIME_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class RemoveFailedPodsArgs(PluginArgs):
    """RemoveFailedPodsArgs (types.go) with SetDefaults_RemoveFailedPodsArgs (minPodLifetimeSeconds 3600)."""

    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None
    exclude_owner_kinds: tuple[str, ...] = ()
    min_pod_lifetime_seconds: int | None = DEFAULT_MIN_POD_LIFETIME_SECONDS
    reasons: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = field(default=False, metadata=OMITEMPTY)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> RemoveFailedPodsArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "labelSelector", "excludeOwnerKinds",
                                                      "minPodLifetimeSeconds", "reasons", "exitCodes",
                                                      "includingInitContainers"))
        ns = namespaces(a)
        selector = label_selector(a)
        min_age = a.unsigned("minPodLifetimeSeconds")
        return cls(
            namespaces=ns,
            label_selector=selector,
            exclude_owner_kinds=tuple(optional_strings(a, "excludeOwnerKinds") or ()),
            min_pod_lifetime_seconds=DEFAULT_MIN_POD_LIFETIME_SECONDS if min_age is None else min_age,
            reasons=tuple(optional_strings(a, "reasons") or ()),
            exit_codes=tuple(optional_int32s(a, "exitCodes") or ()),
            including_init_containers=a.boolean("includingInitContainers"),
        )


class RemoveFailedPods(DeschedulePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemoveFailedPodsArgs
    args: RemoveFailedPodsArgs

    def __init__(self, args: RemoveFailedPodsArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        ev = handle.evictor
        # Phase first, then namespaces/labels, then the plugin's own checks, then the evictor's (all pure).
        self.pod_filter = all_of(lambda p: p.phase == "Failed",
                                 namespace_label_filter(self.args.namespaces, self.args.label_selector),
                                 self._can_evict, ev.filter, ev.pre_eviction_filter)

    def _can_evict(self, pod: Pod) -> bool:
        """validateCanEvict: every configured condition holds."""
        p = self.args
        if p.min_pod_lifetime_seconds is not None:
            age = int(seconds_since(self.handle.now, creation_time(pod)))
            # Go converts the (float) seconds to uint; on amd64 a negative age (a creation time in the
            # future) wraps to a huge number, so such a pod passes the minimum.
            if 0 <= age < p.min_pod_lifetime_seconds:
                return False
        if p.exclude_owner_kinds:
            excluded = frozenset(p.exclude_owner_kinds)
            if any(o.kind in excluded for o in pod.meta.owner_references):
                return False
        init = p.including_init_containers
        if p.reasons:
            reasons = _failed_reasons(container_statuses(pod))
            if pod.phase == "Failed" and pod_status_reason(pod):
                reasons.append(pod_status_reason(pod))
            if init:
                reasons.extend(_failed_reasons(container_statuses(pod, init=True)))
            if not frozenset(p.reasons).intersection(reasons):
                return False
        if p.exit_codes:
            statuses = container_statuses(pod) + (container_statuses(pod, init=True) if init else [])
            codes = {terminated_exit_code(pod, cs) for cs in statuses} - {None}
            if not frozenset(p.exit_codes).intersection(codes):
                return False
        return True

    def deschedule(self, nodes: list[Node]) -> Status:
        for node in nodes:
            for pod in list_all_pods_on_node(self.handle, node.name, self.pod_filter):
                outcome = evict(self.handle, pod, PLUGIN_NAME)
                if outcome == NODE_LIMIT:
                    break
                if outcome == TOTAL_LIMIT:
                    return Status()
        return Status()


def _failed_reasons(statuses: list[dict[str, Any]]) -> list[str]:
    """getFailedContainerStatusReasons: non-empty waiting and terminated reasons."""
    out: list[str] = []
    for cs in statuses:
        for r in (waiting_reason(cs), terminated_reason(cs)):
            if r:
                out.append(r)
    return out

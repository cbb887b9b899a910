"""RemovePodsHavingTooManyRestarts (Deschedule): evict pods whose containers restarted too often.

A pod qualifies when the sum of its containers' restartCount (init containers too with
`includingInitContainers`) reaches `podRestartThreshold`; with `states`, its phase or one of its
containers' waiting reasons must also be among them. Each node's pods go most restarts first.
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
    PodFilter,
    all_of,
    container_statuses,
    evict,
    has_matching_waiting_state,
    int32,
    label_selector,
    list_all_pods_on_node,
    namespace_label_filter,
    namespaces,
    optional_strings,
    status_int,
    strategy_fields,
)

PLUGIN_NAME = "RemovePodsHavingTooManyRestarts"
ALLOWED_STATES = ("CrashLoopBackOff", "Running")


@dataclass(frozen=True, slots=True)
class RemovePodsHavingTooManyRestartsArgs(PluginArgs):
    """RemovePodsHavingTooManyRestartsArgs (types.go) with ValidateRemovePodsHavingTooManyRestartsArgs."""

    pod_restart_threshold: int = field(default=0, metadata=OMITEMPTY)
    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None
    including_init_containers: bool = field(default=False, metadata=OMITEMPTY)
    states: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> RemovePodsHavingTooManyRestartsArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, ("namespaces", "labelSelector", "podRestartThreshold",
                                                      "includingInitContainers", "states"))
        ns = namespaces(a)
        selector = label_selector(a)
        threshold = int32(a, "podRestartThreshold", 0)
        if threshold < 1:
            raise a.error("podRestartThreshold", "invalid PodsHavingTooManyRestarts threshold "
                          f"(podRestartThreshold must be at least 1, got {threshold})")
        states = optional_strings(a, "states") or []
        for i, s in enumerate(states):
            if s not in ALLOWED_STATES:
                raise a.error(f"states[{i}]", f"states must be one of [{' '.join(ALLOWED_STATES)}], got {s!r}")
        return cls(
            pod_restart_threshold=threshold,
            namespaces=ns,
            label_selector=selector,
            including_init_containers=a.boolean("includingInitContainers"),
            states=tuple(states),
        )


class RemovePodsHavingTooManyRestarts(DeschedulePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = RemovePodsHavingTooManyRestartsArgs
    args: RemovePodsHavingTooManyRestartsArgs

    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        p = args
        ev = handle.evictor

        def enough_restarts(pod: Pod) -> bool:
            return pod_total_restarts(pod, p.including_init_containers) >= p.pod_restart_threshold

        in_state: PodFilter | None = None
        if p.states:
            states = frozenset(p.states)

            def in_state(pod: Pod) -> bool:
                if pod.phase in states:
                    return True
                if has_matching_waiting_state(container_statuses(pod), states):
                    return True
                return p.including_init_containers and has_matching_waiting_state(
                    container_statuses(pod, init=True), states)

        # Pure filters: the cheap ones first, the evictor's last.
        self.pod_filter = all_of(namespace_label_filter(p.namespaces, p.label_selector), enough_restarts, in_state,
                                 ev.filter, ev.pre_eviction_filter)

    def deschedule(self, nodes: list[Node]) -> Status:
        init = self.args.including_init_containers
        for node in nodes:
            pods = list_all_pods_on_node(self.handle, node.name, self.pod_filter)
            # sort.Slice by restarts, most first (ties keep the listing order).
            pods.sort(key=lambda p: -pod_total_restarts(p, init))
            for pod in pods:
                outcome = evict(self.handle, pod, PLUGIN_NAME)
                if outcome == NODE_LIMIT:
                    break
                if outcome == TOTAL_LIMIT:
                    return Status()
        return Status()


def pod_total_restarts(pod: Pod, including_init_containers: bool) -> int:
    """getPodTotalRestarts: restartCount summed over containers (and init containers), as an int32 sum."""
    total = sum(status_int(pod, cs.get("restartCount"), "status.containerStatuses[].restartCount")
                for cs in container_statuses(pod))
    if including_init_containers:
        total += sum(status_int(pod, cs.get("restartCount"), "status.initContainerStatuses[].restartCount")
                     for cs in container_statuses(pod, init=True))
    return total

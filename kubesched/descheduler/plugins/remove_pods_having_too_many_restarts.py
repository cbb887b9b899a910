"""RemovePodsHavingTooManyRestarts (Deschedule): evict pods whose containers restarted too often.

A pod qualifies when the sum of its containers' restartCount (init containers too with
`includingInitContainers`) reaches `podRestartThreshold`; with `states`, its phase or one of its
containers' waiting reasons must also be among them. Each node's pods go most restarts first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kubesched.api.objects import Node, Pod
from kubesched.api.selectors import LabelSelector
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.plugins._common import (
    NODE_LIMIT,
    TOTAL_LIMIT,
    IncludeExclude,
    PodFilter,
    StrategyArgs,
    all_of,
    args_dict,
    check_known_fields,
    container_statuses,
    evict,
    get_bool,
    get_int32,
    get_label_selector,
    get_namespaces,
    get_str_list,
    has_matching_waiting_state,
    list_all_pods_on_node,
    namespace_label_filter,
    status_int,
)
from kubesched.errors import InputError

PLUGIN_NAME = "RemovePodsHavingTooManyRestarts"
ALLOWED_STATES = ("CrashLoopBackOff", "Running")


@dataclass(frozen=True, slots=True)
class RemovePodsHavingTooManyRestartsArgs:
    pod_restart_threshold: int
    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None
    including_init_containers: bool = False
    states: tuple[str, ...] = ()


class RemovePodsHavingTooManyRestarts(DeschedulePlugin, StrategyArgs):
    name: ClassVar[str] = PLUGIN_NAME

    def __init__(self, args: dict[str, Any] | None, handle: Handle) -> None:
        super().__init__(args, handle)
        self.params = p = self.validate(args)
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

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {}

    @classmethod
    def validate(cls, args: Any) -> RemovePodsHavingTooManyRestartsArgs:
        a = args_dict(PLUGIN_NAME, args)
        check_known_fields(PLUGIN_NAME, a, ("namespaces", "labelSelector", "podRestartThreshold",
                                            "includingInitContainers", "states"))
        namespaces = get_namespaces(PLUGIN_NAME, a)
        selector = get_label_selector(PLUGIN_NAME, a)
        threshold = get_int32(PLUGIN_NAME, a, "podRestartThreshold", 0)
        if threshold < 1:
            raise InputError(f"{PLUGIN_NAME} args: invalid PodsHavingTooManyRestarts threshold "
                             f"(podRestartThreshold must be at least 1, got {threshold})", field="podRestartThreshold")
        states = get_str_list(PLUGIN_NAME, a, "states") or []
        for i, s in enumerate(states):
            if s not in ALLOWED_STATES:
                raise InputError(f"{PLUGIN_NAME} args: states must be one of [{' '.join(ALLOWED_STATES)}], got {s!r}",
                                 field=f"states[{i}]")
        return RemovePodsHavingTooManyRestartsArgs(
            pod_restart_threshold=threshold,
            namespaces=namespaces,
            label_selector=selector,
            including_init_containers=get_bool(PLUGIN_NAME, a, "includingInitContainers"),
            states=tuple(states),
        )

    def deschedule(self, nodes: list[Node]) -> Status:
        init = self.params.including_init_containers
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

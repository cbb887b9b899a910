"""PodLifeTime (Deschedule): evict pods older than `maxPodLifeTimeSeconds` and/or in given states.

Every configured criterion must hold: age (whole seconds since creation strictly above the maximum),
`states` (the phase, the pod's status reason, or a container's waiting/terminated reason), `ownerKinds`,
`conditions` and `exitCodes`. Pods of every phase are considered; the oldest are evicted first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kubesched.api.fields import Fields
from kubesched.api.objects import Node, Pod, parse_time
from kubesched.api.selectors import LabelSelector
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.descheduler import podutil
from kubesched.descheduler.framework import DeschedulePlugin, Handle, Status
from kubesched.descheduler.plugins._common import (
    TOTAL_LIMIT,
    IncludeExclude,
    PodFilter,
    all_of,
    container_statuses,
    creation_time,
    evict,
    has_matching_terminated_state,
    has_matching_waiting_state,
    include_exclude,
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
)

PLUGIN_NAME = "PodLifeTime"

ALLOWED_STATES = tuple(sorted((
    # Pod phases.
    "Running", "Pending", "Succeeded", "Failed", "Unknown",
    # Pod status reasons.
    "NodeAffinity", "NodeLost", "Shutdown", "UnexpectedAdmissionError",
    # Container waiting reasons.
    "PodInitializing", "ContainerCreating", "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError",
    "ErrImagePull", "CreateContainerError", "InvalidImageName",
    # Container terminated reasons.
    "OOMKilled", "Error", "Completed", "DeadlineExceeded", "Evicted", "ContainerCannotRun", "StartError",
)))


@dataclass(frozen=True, slots=True)
class PodConditionFilter:
    type: str = ""
    status: str = ""
    reason: str = ""
    min_time_since_last_transition_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class PodLifeTimeArgs(PluginArgs):
    """PodLifeTimeArgs (types.go) with ValidatePodLifeTimeArgs: at least one criterion."""

    namespaces: IncludeExclude | None = None
    label_selector: LabelSelector | None = None
    owner_kinds: IncludeExclude | None = None
    max_pod_life_time_seconds: int | None = None
    states: tuple[str, ...] = ()
    conditions: tuple[PodConditionFilter, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = field(default=False, metadata=OMITEMPTY)
    including_ephemeral_containers: bool = field(default=False, metadata=OMITEMPTY)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> PodLifeTimeArgs:
        a = strategy_fields(PLUGIN_NAME, raw, field, (
            "namespaces", "labelSelector", "ownerKinds", "maxPodLifeTimeSeconds", "states", "conditions",
            "exitCodes", "includingInitContainers", "includingEphemeralContainers"))
        ns = namespaces(a)
        owner_kinds = include_exclude(a, "ownerKinds", "ownerKinds")
        selector = label_selector(a)
        states = optional_strings(a, "states") or []
        for i, s in enumerate(states):
            if s not in ALLOWED_STATES:
                raise a.error(f"states[{i}]", f"states must be one of [{' '.join(ALLOWED_STATES)}], got {s!r}")
        conditions = _conditions(a)
        max_age = a.unsigned("maxPodLifeTimeSeconds")
        exit_codes = optional_int32s(a, "exitCodes") or []
        if max_age is None and not states and not conditions and not exit_codes:
            raise a.error("maxPodLifeTimeSeconds", "at least one filtering criterion must be specified "
                          "(maxPodLifeTimeSeconds, states, conditions, or exitCodes)")
        return cls(
            namespaces=ns,
            label_selector=selector,
            owner_kinds=owner_kinds,
            max_pod_life_time_seconds=max_age,
            states=tuple(states),
            conditions=conditions,
            exit_codes=tuple(exit_codes),
            including_init_containers=a.boolean("includingInitContainers"),
            including_ephemeral_containers=a.boolean("includingEphemeralContainers"),
        )


class PodLifeTime(DeschedulePlugin):
    name: ClassVar[str] = PLUGIN_NAME
    Args = PodLifeTimeArgs
    args: PodLifeTimeArgs

    def __init__(self, args: PodLifeTimeArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        ev = handle.evictor
        self.pod_filter = all_of(namespace_label_filter(args.namespaces, args.label_selector),
                                 *self._criteria(), ev.filter, ev.pre_eviction_filter)

    def _criteria(self) -> list[PodFilter]:
        p = self.args
        out: list[PodFilter] = []
        if p.max_pod_life_time_seconds is not None:
            max_age = p.max_pod_life_time_seconds

            def old_enough(pod: Pod) -> bool:
                age = seconds_since(self.handle.now, creation_time(pod))
                return age >= 0 and int(age) > max_age

            out.append(old_enough)
        if p.states:
            out.append(_state_filter(frozenset(p.states), p.including_init_containers,
                                     p.including_ephemeral_containers))
        if p.owner_kinds is not None:
            if p.owner_kinds.include:
                include = frozenset(p.owner_kinds.include)
                out.append(lambda pod: any(o.kind in include for o in pod.meta.owner_references))
            elif p.owner_kinds.exclude:
                exclude = frozenset(p.owner_kinds.exclude)
                out.append(lambda pod: not any(o.kind in exclude for o in pod.meta.owner_references))
        if p.conditions:
            out.append(lambda pod: self._matches_any_condition(pod))
        if p.exit_codes:
            codes = frozenset(p.exit_codes)

            def exits_with(pod: Pod) -> bool:
                lists = [container_statuses(pod)]
                if p.including_init_containers:
                    lists.append(container_statuses(pod, init=True))
                return any(terminated_exit_code(pod, cs) in codes for statuses in lists for cs in statuses)

            out.append(exits_with)
        return out

    def _matches_any_condition(self, pod: Pod) -> bool:
        """matchesAnyPodConditionFilter: some pod condition matches some filter (fields set must be equal;
        with a minimum, the condition must have transitioned at least that many whole seconds ago)."""
        raw = pod.status.get("conditions")
        conds = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
        for f in self.args.conditions:
            for c in conds:
                if f.type and str(c.get("type") or "") != f.type:
                    continue
                if f.status and str(c.get("status") or "") != f.status:
                    continue
                if f.reason and str(c.get("reason") or "") != f.reason:
                    continue
                if f.min_time_since_last_transition_seconds is not None:
                    t = parse_time(c.get("lastTransitionTime"), "status.conditions[].lastTransitionTime")
                    if t is None:
                        continue
                    idle = seconds_since(self.handle.now, t)
                    if idle < 0 or int(idle) < f.min_time_since_last_transition_seconds:
                        continue
                return True
        return False

    def deschedule(self, nodes: list[Node]) -> Status:
        to_evict: list[Pod] = []
        for node in nodes:
            to_evict.extend(list_all_pods_on_node(self.handle, node.name, self.pod_filter))
        podutil.sort_pods_based_on_age(to_evict)
        for pod in to_evict:
            # A node limit only skips that pod: the next oldest may be on another node.
            if evict(self.handle, pod, PLUGIN_NAME) == TOTAL_LIMIT:
                return Status()
        return Status()


def _state_filter(states: frozenset[str], init: bool, ephemeral: bool) -> PodFilter:
    def in_state(pod: Pod) -> bool:
        if pod.phase in states or pod_status_reason(pod) in states:
            return True
        kinds = [container_statuses(pod)]
        if init:
            kinds.append(container_statuses(pod, init=True))
        if ephemeral:
            kinds.append(container_statuses(pod, ephemeral=True))
        return any(has_matching_waiting_state(s, states) or has_matching_terminated_state(s, states) for s in kinds)

    return in_state


def _conditions(a: Fields) -> tuple[PodConditionFilter, ...]:
    out = []
    for i, raw in enumerate(a.sequence("conditions", what="a list of condition filters", show=repr)):
        c = Fields(raw, a.path(f"conditions[{i}]"), prefix=a.prefix, what="a condition filter object", show=repr,
                   allowed=("type", "status", "reason", "minTimeSinceLastTransitionSeconds"), meta=False,
                   unknown="unknown field {key!r} (expected type, status, reason or minTimeSinceLastTransitionSeconds)")
        cond = PodConditionFilter(c.string("type") or "", c.string("status") or "", c.string("reason") or "",
                                  c.unsigned("minTimeSinceLastTransitionSeconds"))
        if not cond.type and not cond.status and not cond.reason and cond.min_time_since_last_transition_seconds is None:
            raise a.error(f"conditions[{i}]", f"conditions[{i}]: at least one of type, status, reason, or "
                          "minTimeSinceLastTransitionSeconds must be set")
        out.append(cond)
    return tuple(out)

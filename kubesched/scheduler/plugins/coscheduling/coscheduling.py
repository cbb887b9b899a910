"""Coscheduling: a PodGroup's pods are placed all together (at least minMember of them) or not at all.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/coscheduling/coscheduling.go` (and `core/core.go`, see
`core.py`; args from `apis/config/v1/types.go`, `defaults.go` and `validation/validation_pluginargs.go`).
Pods join a group with the label `scheduling.x-k8s.io/pod-group` naming a PodGroup in their namespace.

- QueueSort `less`: higher priority first; then the earlier "creation time" — the group's last scheduling
  failure, else the PodGroup's creationTimestamp, else the pod's first queueing — so a group's pods come
  back to back; then namespace/name.
- PreFilter: UnschedulableAndUnresolvable (no preemption is tried) when the group backed off, has fewer
  pods than minMember (gated pods count as missing), or minResources is not free in the cluster.
- PostFilter: when a pod of the group cannot be placed and fewer than minMember of the group are assigned
  with a gap above `podGroupRejectPercentage`, every waiting pod of the group is rejected ("optimistic
  rejection in PostFilter"), the group backs off for `podGroupBackoffSeconds` (when it has minMember pods)
  and its failure time moves it behind other groups.
- Permit: Wait (for the PodGroup's scheduleTimeoutSeconds, else `permitWaitingTimeSeconds`) until minMember
  pods are assumed or bound; the pod that completes the quorum allows the waiting ones. The first pod to
  wait activates its siblings.
- Unreserve: the pod leaves the group's assigned pods and every waiting sibling is rejected ("rejection in
  Unreserve"), so a timeout or a failed binding releases the whole group.

Args: permitWaitingTimeSeconds (60), podGroupBackoffSeconds (0: none), podGroupRejectPercentage (10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Pod
from kubesched.api.scheduling import pod_group_full_name, pod_group_name
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import PluginArgs
from kubesched.scheduler.framework import (
    PODS_TO_ACTIVATE_KEY,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    PermitPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    Status,
)
from kubesched.scheduler.plugins.coscheduling.core import (
    POD_GROUP_NOT_FOUND,
    POD_GROUP_NOT_SPECIFIED,
    SUCCESS,
    PodGroupManager,
)
from kubesched.scheduler.waiting_pods import WaitingPod

NAME = "Coscheduling"
DEFAULT_WAIT_TIME = 60.0  # util.DefaultWaitTime


@dataclass(frozen=True, slots=True)
class CoschedulingArgs(PluginArgs):
    """CoschedulingArgs (v1): whole seconds, int64; defaults 60, 0 and 10; ValidateCoschedulingArgs."""

    permit_waiting_time_seconds: int = 60
    pod_group_backoff_seconds: int = 0
    pod_group_reject_percentage: int = 10

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> CoschedulingArgs:
        a = fields.Fields(raw, field, allowed=("permitWaitingTimeSeconds", "podGroupBackoffSeconds",
                                               "podGroupRejectPercentage"))
        args = cls(a.integer("permitWaitingTimeSeconds", 60, bits=fields.INT64),
                   a.integer("podGroupBackoffSeconds", 0, bits=fields.INT64),
                   a.integer("podGroupRejectPercentage", 10, bits=fields.INT64))
        for key, value, bad, expect in (
                ("permitWaitingTimeSeconds", args.permit_waiting_time_seconds, args.permit_waiting_time_seconds < 0,
                 "must be greater than 0"),
                ("podGroupBackoffSeconds", args.pod_group_backoff_seconds, args.pod_group_backoff_seconds < 0,
                 "must be greater than 0"),
                ("podGroupRejectPercentage", args.pod_group_reject_percentage,
                 not 0 <= args.pod_group_reject_percentage <= 100, "must be between 0 and 100")):
            if bad:
                raise a.error(key, f"Invalid value: {value}: {expect}")
        return args


class Coscheduling(QueueSortPlugin, PreFilterPlugin, PostFilterPlugin, PermitPlugin, ReservePlugin):
    name = NAME
    Args = CoschedulingArgs

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        super().__init__(args if args is not None else CoschedulingArgs(), handle)
        self.args: CoschedulingArgs
        self.schedule_timeout = float(self.args.permit_waiting_time_seconds)
        self.reject_threshold = self.args.pod_group_reject_percentage / 100.0
        self.backoff = float(self.args.pod_group_backoff_seconds)
        self.manager = PodGroupManager(handle.cluster, self.schedule_timeout, handle.now)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("add",)), ClusterEvent("PodGroup", ("add", "update"))]

    # ------------------------------------------------------------ QueueSort

    def _creation(self, qpi: QueuedPodInfo) -> float:
        ts = qpi.initial_attempt_timestamp if qpi.initial_attempt_timestamp is not None else qpi.timestamp
        return self.manager.creation_timestamp(qpi.pod, ts)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.effective_priority, b.pod.effective_priority
        if pa != pb:
            return pa > pb
        ca, cb = self._creation(a), self._creation(b)
        if ca == cb:
            return f"{a.pod.namespace}/{a.pod.name}" < f"{b.pod.namespace}/{b.pod.name}"
        return ca < cb

    def sort_key(self, qpi: QueuedPodInfo) -> Any:
        return (-qpi.pod.effective_priority, self._creation(qpi), f"{qpi.pod.namespace}/{qpi.pod.name}")

    # ------------------------------------------------------------ PreFilter, PostFilter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        reason = self.manager.pre_filter(pod)
        if reason is not None:
            # UnschedulableAndUnresolvable: no preemption for a group that cannot be placed.
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [reason])
        return None, Status()

    def post_filter(self, state: CycleState, pod: Pod,
                    statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        full, pg = self.manager.get_pod_group(pod)
        if pg is None:
            return None, Status(Code.UNSCHEDULABLE, ["can not find pod group"])
        assigned = self.manager.assigned_count(full)
        if assigned >= pg.min_member:
            return None, Status(Code.UNSCHEDULABLE)
        if (pg.min_member - assigned) / pg.min_member <= self.reject_threshold:
            return None, Status(Code.UNSCHEDULABLE)
        # If one pod of the group cannot be placed, its waiting siblings most likely wait in vain.
        self._reject_waiting(pod.namespace, pg.meta.name, "optimistic rejection in PostFilter")
        if self.backoff and len(self.manager.pods_of(full)) >= pg.min_member:
            self.manager.backoff(full, self.backoff)
        self.manager.delete_permitted(full)
        self.manager.mark_failure(full)
        return None, Status(Code.UNSCHEDULABLE,
                            [f"PodGroup {full} gets rejected due to Pod {pod.name} is unschedulable even after "
                             "PostFilter"])

    # ------------------------------------------------------------ Permit, Reserve

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        outcome = self.manager.permit(state, pod)
        if outcome == POD_GROUP_NOT_SPECIFIED:
            return Status(), 0.0
        if outcome == POD_GROUP_NOT_FOUND:
            return Status(Code.UNSCHEDULABLE, ["PodGroup not found"]), 0.0
        if outcome == SUCCESS:
            full = pod_group_full_name(pod)
            self.manager.clear_failure(full)
            for wp in self.handle.waiting_pods:
                if pod_group_full_name(wp.get_pod()) == full:
                    wp.allow(self.name)
            return Status(), 0.0
        wait = self.schedule_timeout
        _, pg = self.manager.get_pod_group(pod)
        group_wait = self._wait_time(pg.schedule_timeout_seconds if pg is not None else None)
        if group_wait:
            wait = group_wait
        pta = state.read(PODS_TO_ACTIVATE_KEY)
        self.manager.activate_siblings(pod, state, getattr(pta, "pods", None))
        return Status(Code.WAIT), wait

    def _wait_time(self, group_timeout: int | None) -> float:
        """util.GetWaitTimeDuration: the group's timeout, else the plugin's when set, else 60s."""
        if group_timeout is not None:
            return float(group_timeout)
        if self.schedule_timeout:
            return self.schedule_timeout
        return DEFAULT_WAIT_TIME

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        full, pg = self.manager.get_pod_group(pod)
        if pg is None:
            return
        self.manager.unreserve(pod)
        self._reject_waiting(pod.namespace, pg.meta.name, "rejection in Unreserve")
        self.manager.delete_permitted(full)
        self.manager.mark_failure(full)

    def _reject_waiting(self, namespace: str, group: str, message: str) -> None:
        def reject(wp: WaitingPod) -> None:
            p = wp.get_pod()
            if p.namespace == namespace and pod_group_name(p) == group:
                wp.reject(self.name, message)

        self.handle.waiting_pods.iterate(reject)

    def wait_reason(self, pod: Pod) -> str:
        full, pg = self.manager.get_pod_group(pod)
        if pg is None:
            return ""
        return (f"PodGroup {full}: {self.manager.assigned_count(full)} of minMember {pg.min_member} pods "
                f"assumed or bound ({len(self.manager.pods_of(full))} in the group)")

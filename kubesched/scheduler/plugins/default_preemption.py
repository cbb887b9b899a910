"""DefaultPreemption (PostFilter): make room for a pod that fits nowhere by preempting lower-priority pods.

The policy of kube-scheduler's plugin over the shared Evaluator (kubesched/scheduler/preemption.py):
a pod with preemptionPolicy Never never preempts, nor does a pod whose nominated node still has a
lower-priority pod terminating because of an earlier preemption; on each candidate node every
lower-priority pod is removed, the pod must then fit, and victims are reprieved from the most important
down (PDB-violating ones first) while the pod still fits. Args: minCandidateNodesPercentage (10) and
minCandidateNodesAbsolute (100) bound how many candidate nodes the dry run looks for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import Pod, PodDisruptionBudget
from kubesched.cluster.state import NodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.scheduler.framework import SUCCESS, ClusterEvent, Code, CycleState, PostFilterPlugin, PostFilterResult, Status
from kubesched.scheduler.preemption import (
    Evaluator,
    Victims,
    filter_pods_with_pdb_violation,
    more_important_key,
    pod_terminating_by_preemption,
    reprieve_in_order,
)

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100
NO_VICTIMS = "No preemption victims found for incoming pod"


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs(PluginArgs):
    """DefaultPreemptionArgs with v1 defaults and ValidateDefaultPreemptionArgs."""

    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> DefaultPreemptionArgs:
        a = fields.Fields(raw, field, allowed={"minCandidateNodesPercentage", "minCandidateNodesAbsolute"})
        pct = a.integer("minCandidateNodesPercentage", DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE)
        absolute = a.integer("minCandidateNodesAbsolute", DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE)
        if pct < 0 or pct > 100:
            raise a.error("minCandidateNodesPercentage", f"Invalid value: {pct}: not in valid range [0, 100]")
        if absolute < 0:
            raise a.error("minCandidateNodesAbsolute", f"Invalid value: {absolute}: not in valid range [0, inf)")
        if pct == 0 and absolute == 0:
            raise a.error("minCandidateNodesPercentage",
                          "Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute")
        return cls(pct, absolute)


class DefaultPreemption(PostFilterPlugin):
    name = "DefaultPreemption"
    Args = DefaultPreemptionArgs
    args: DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs, handle: Any) -> None:
        super().__init__(args, handle)
        self.evaluator = Evaluator(self.name, handle, self)

    def events_to_register(self) -> list[ClusterEvent]:
        # Pods are never rejected by this plugin (no asynchronous preemption gate).
        return []

    # ------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod,
                    statuses: dict[str, Status]) -> tuple[PostFilterResult | None, Status]:
        result, st = self.evaluator.preempt(state, pod, statuses)
        if st.message:
            return result, Status(st.code, [f"preemption: {st.message}"])
        return result, st

    # ------------------------------------------------------------ the policy the Evaluator asks for

    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return int(self.handle.rng.integers(num_nodes)), self.calculate_num_candidates(num_nodes)

    def is_preemption_allowed(self, node_info: NodeInfo, victim: Pod, preemptor: Pod) -> bool:
        return victim.effective_priority < preemptor.effective_priority

    def pod_eligible_to_preempt_others(self, pod: Pod, nominated_node_status: Status) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        nom = pod.nominated_node_name
        if nom:
            # Filters say the nominated node cannot help any more: preempt again elsewhere.
            if nominated_node_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.cluster.node_info_by_name.get(nom)
            if info is not None:
                for p in info.pods.values():
                    if self.is_preemption_allowed(info, p, pod) and pod_terminating_by_preemption(p):
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def ordered_score_funcs(self, nodes_to_victims: dict[str, Victims]) -> list[Callable[[str], int]] | None:
        return None

    def quick_reject(self, pod: Pod, node_info: NodeInfo | None) -> Status | None:
        """No pod on the node (on any node, when None) has a lower priority than the preemptor:
        select_victims_on_node finds no victim."""
        prio = pod.effective_priority
        if any(p < prio for p in self.handle.cluster.assigned_priorities) and \
                (node_info is None or any(self.is_preemption_allowed(node_info, p, pod) for p in node_info.pods.values())):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS])

    def select_victims_on_node(self, state: CycleState, pod: Pod, node_info: NodeInfo,
                               pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Pod], int, Status]:
        """The fewest pods to remove from this (copied) node so that the pod fits, and how many violate PDBs."""
        fwk = self.evaluator.framework
        nominated = self.evaluator.nominated_pods_for(node_info.name, pod)

        def remove(p: Pod) -> Status:
            node_info.remove_pod(p)
            return fwk.run_pre_filter_extension_remove(state, pod, p, node_info)

        def add(p: Pod) -> Status:
            node_info.add_pod(p)
            return fwk.run_pre_filter_extension_add(state, pod, p, node_info)

        potential = [p for p in node_info.pods.values() if self.is_preemption_allowed(node_info, p, pod)]
        for p in potential:
            st = remove(p)
            if not st.is_success:
                return [], 0, Status(Code.ERROR, [st.message])
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS])
        # Without every lower-priority pod the pod must fit, or this node cannot help (affinity to a
        # victim is not considered, as upstream).
        st = fwk.run_filter_with_nominated_pods(state, pod, node_info, nominated)
        if not st.is_success:
            return [], 0, st

        key = more_important_key(self.handle.now())
        potential.sort(key=key)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[Pod] = []

        def reprieve(p: Pod) -> tuple[bool, Status]:
            st = add(p)
            if not st.is_success:
                return False, st
            fits = fwk.run_filter_with_nominated_pods(state, pod, node_info, nominated).is_success
            if not fits:
                st = remove(p)
                if not st.is_success:
                    return False, st
                victims.append(p)
            return fits, SUCCESS

        return reprieve_in_order(violating, non_violating, reprieve, victims, key)

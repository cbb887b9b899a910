"""The eviction manager's pod admission handler (managerImpl.Admit).

With no pressure condition every pod is admitted; critical pods always are. Under MemoryPressure alone,
a pod that is not BestEffort is admitted, and so is a BestEffort pod that tolerates the
node.kubernetes.io/memory-pressure:NoSchedule taint. Any other pressure rejects every other pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubesched.api.objects import Pod, Taint, tolerations_tolerate_taint
from kubesched.api.qos import BEST_EFFORT, qos_class
from kubesched.kubelet.critical import is_critical_pod
from kubesched.kubelet.thresholds import DISK_PRESSURE, MEMORY_PRESSURE, PID_PRESSURE

REASON = "Evicted"
NODE_CONDITION_MESSAGE = "The node had condition: {}. "

TAINT_NODE_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_NODE_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_NODE_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
CONDITION_TAINT = {MEMORY_PRESSURE: TAINT_NODE_MEMORY_PRESSURE, DISK_PRESSURE: TAINT_NODE_DISK_PRESSURE,
                   PID_PRESSURE: TAINT_NODE_PID_PRESSURE}


@dataclass(frozen=True, slots=True)
class AdmitResult:
    admit: bool
    reason: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"admit": self.admit, "reason": self.reason, "message": self.message}


def pressure_taints(conditions: Sequence[str]) -> list[Taint]:
    """The NoSchedule taints the node lifecycle controller keeps in step with pressure conditions
    (TaintNodesByCondition), which the scheduler's TaintToleration filter then sees."""
    return [Taint(CONDITION_TAINT[c], "", "NoSchedule") for c in conditions if c in CONDITION_TAINT]


def go_list(items: Sequence[str]) -> str:
    """fmt's %v of a []string: [a b]."""
    return "[" + " ".join(items) + "]"


def admit(conditions: Sequence[str], pod: Pod, pod_level_resources: bool = True) -> AdmitResult:
    """Admit a pod given the node conditions the manager reports."""
    if not conditions:
        return AdmitResult(True)
    if is_critical_pod(pod):
        return AdmitResult(True)
    if list(conditions) == [MEMORY_PRESSURE]:
        if qos_class(pod, pod_level_resources) != BEST_EFFORT:
            return AdmitResult(True)
        if tolerations_tolerate_taint(pod.tolerations, Taint(TAINT_NODE_MEMORY_PRESSURE, "", "NoSchedule")):
            return AdmitResult(True)
    return AdmitResult(False, REASON, NODE_CONDITION_MESSAGE.format(go_list(list(conditions))))

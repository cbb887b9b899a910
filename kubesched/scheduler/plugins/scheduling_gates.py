"""SchedulingGates: a pod with spec.schedulingGates waits outside activeQ until they are removed."""

from __future__ import annotations

from kubesched.api.objects import Pod
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import SUCCESS, ClusterEvent, Code, PreEnqueuePlugin, Status


class SchedulingGates(PreEnqueuePlugin):
    name = "SchedulingGates"
    Args = no_args("SchedulingGates")

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.scheduling_gates:
            return SUCCESS
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      [f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]"])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("update",))]

"""DefaultBinder: binds the pod to the node through the cluster state's single path of change."""

from __future__ import annotations

from kubesched.api.objects import Pod
from kubesched.scheduler.framework import BindPlugin, CycleState, Status


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        cluster = self.handle.cluster
        cur = cluster.pods.get(pod.key)
        # The scheduler assumed the pod on the node already; binding confirms it (an `assume` needs the
        # bind event; the plain assumption of profiles without Permit plugins was the binding itself).
        if cur is None or cur.node_name != node_name or pod.key in cluster.assumed:
            cluster.bind(pod, node_name)
        return Status()

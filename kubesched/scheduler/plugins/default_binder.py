"""DefaultBinder: binds the pod to the node through the cluster state's single path of change."""

from __future__ import annotations

from kubesched.api.objects import Pod
from kubesched.scheduler.framework import BindPlugin, CycleState, Status


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        cluster = self.handle.cluster
        cur = cluster.pods.get(pod.key)
        # The scheduler assumed the pod on the node already; binding confirms it.
        if cur is None or cur.node_name != node_name:
            cluster.bind(pod, node_name)
        return Status()

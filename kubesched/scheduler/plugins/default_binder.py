"""DefaultBinder: binds the pod to the node (upstream: a POST to the pods/binding subresource)."""

from __future__ import annotations

from kubesched.api.objects import Pod
from kubesched.scheduler.framework import BindPlugin, CycleState, Status


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        # The scheduler assumed the pod on the node already; the binding confirms it.
        self.handle.cluster.bind(pod, node_name)
        return Status()

"""DefaultBinder: binds the pod to the node (upstream: a POST to the pods/binding subresource)."""

from __future__ import annotations

from kubesched.api.objects import Pod
from kubesched.client.interface import ApiError
from kubesched.config.plugin_args import no_args
from kubesched.scheduler.framework import SUCCESS, BindPlugin, Code, CycleState, Status


class DefaultBinder(BindPlugin):
    name = "DefaultBinder"
    Args = no_args("DefaultBinder")

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        try:
            self.handle.client.bind(pod, node_name)
        except ApiError as e:
            # A 409 (bound by someone else) or any refusal: the binding cycle fails and the pod is forgotten.
            return Status(Code.ERROR, [f"binding rejected: {e.message}"])
        return SUCCESS

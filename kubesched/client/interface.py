"""The protocol components act through, in the API server's verbs, and the errors it answers with.

Reads come from the `ClusterState` (the informer cache every component shares); every write goes through
a `Client`. The verbs are the ones kube-scheduler, the descheduler, the kubelet and the controllers use:
create and (gracefully) delete a pod, bind it (pods/binding), evict it (the policy/v1 Eviction subresource:
429 when a PodDisruptionBudget forbids it), patch a node, update a pod's or a PDB's status, record an
Event. Each call names its cause, which the state's event carries to every listener.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from kubesched.api.objects import Node, Pod, PodDisruptionBudget
from kubesched.cluster.events import Cause


class ApiError(Exception):
    """A refusal from the API server: HTTP status `code`, `reason` (metav1.StatusReason) and message."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(ApiError):
    code = 404
    reason = "NotFound"


class Conflict(ApiError):
    """409: a binding to an already bound pod, a stale resourceVersion, or a name already taken."""

    code = 409
    reason = "Conflict"


class AlreadyExists(Conflict):
    reason = "AlreadyExists"


class TooManyRequests(ApiError):
    """429: the Eviction API refuses because a PodDisruptionBudget allows no disruption now."""

    code = 429
    reason = "TooManyRequests"


# The Eviction API's message when a PDB forbids an eviction (pkg/registry/core/pod/storage/eviction.go).
PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


@dataclass(frozen=True, slots=True)
class KubeEvent:
    """A core/v1 Event: what a component reports about an object (Scheduled, FailedScheduling, Evicted…)."""

    involved: str  # "Pod ns/name"
    reason: str
    message: str
    type: str = "Normal"
    component: str = ""
    time: datetime | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class Client(Protocol):
    """What a component may do to a cluster. Every method raises an `ApiError` when refused."""

    def create_pod(self, manifest: dict[str, Any], *, cause: Cause) -> Pod:
        """Create a pod from a manifest (admission, defaulting and `generateName` as the server does)."""
        ...

    def delete_pod(self, pod: Pod, *, grace_period_seconds: int | None = None, cause: Cause) -> None:
        """Delete a pod: gracefully (it terminates, then goes) unless it never ran or the grace is 0."""
        ...

    def bind(self, pod: Pod, node_name: str, *, cause: Cause = Cause.SCHEDULER) -> None:
        """The pods/binding subresource: 409 when the pod is already bound."""
        ...

    def evict(self, pod: Pod, *, grace_period_seconds: int | None = None, dry_run: bool = False,
              cause: Cause = Cause.DESCHEDULER) -> None:
        """The policy/v1 Eviction subresource: 429 when a PDB forbids it; `dry_run` persists nothing."""
        ...

    def patch_node(self, node: Node, *, taints: list[dict[str, Any]] | None = None,
                   conditions: dict[str, str] | None = None, unschedulable: bool | None = None,
                   cause: Cause) -> Node:
        """Replace the node's taints, set condition statuses (type → "True"/"False"), or (un)cordon it."""
        ...

    def update_pod_status(self, pod: Pod, *, cause: Cause, **status: Any) -> Pod:
        """Set pod status fields (phase, reason, message, nominatedNodeName, conditions…; None removes)."""
        ...

    def update_pdb_status(self, pdb: PodDisruptionBudget, *, disruptions_allowed: int, current_healthy: int,
                          desired_healthy: int, expected_pods: int,
                          disrupted_pods: dict[str, datetime | None] | None = None,
                          cause: Cause = Cause.DISRUPTION) -> None:
        """The disruption controller's status write (`disrupted_pods` None keeps the server's map)."""
        ...

    def create_event(self, event: KubeEvent) -> None:
        ...

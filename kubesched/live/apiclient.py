"""The `Client` protocol against a real API server: every write of a live component, in the API's own verbs.

What each verb sends is what kube-scheduler and the descheduler send (read from upstream):

- bind: a `v1.Binding` (name, namespace and uid of the pod, target the Node) POSTed to `pods/binding`,
  as the DefaultBinder plugin does (kubernetes pkg/scheduler/framework/plugins/defaultbinder);
- evict: a `policy/v1` `Eviction` POSTed to `pods/eviction` with the policy's grace period, as the
  descheduler's `evictPod` does (kubernetes-sigs/descheduler pkg/descheduler/evictions/evictions.go); a
  `dry_run` eviction is a server-side dry run (`dryRun: [All]`);
- delete_pod: DELETE with `gracePeriodSeconds` when one is given (the pod's own otherwise), as preemption's
  `util.DeletePod` does;
- update_pod_status: a strategic-merge PATCH of `pods/status` (conditions merge by type; a None value removes
  the field), as `util.PatchPodStatus` does for nominatedNodeName and the PodScheduled condition;
- patch_node: a strategic-merge PATCH of the node (taints, unschedulable) and of `nodes/status` (conditions);
- update_pdb_status: a merge PATCH of `poddisruptionbudgets/status`;
- create_event: a core/v1 Event (what `kubectl get events` and `kubectl describe` read).

Nothing here changes the local `ClusterState`: the informers bring every change back through their watch,
with `Cause.API`. Refusals raise the interface's errors (`Conflict` for 409, `TooManyRequests` for 429,
`NotFound` for 404, `ApiError` with the answer's code otherwise); a connection that fails is
`Unreachable` (code 503) — whether the write happened is then unknown. Writes are retried only when the
server sends Retry-After (`KubeClient.write`), so a 429 from a PodDisruptionBudget, which carries none, is
never retried here.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from kubesched.api.objects import Node, Pod, PodDisruptionBudget, parse_node, parse_pod
from kubesched.client.interface import ApiError, Conflict, KubeEvent, NotFound, TooManyRequests
from kubesched.cluster.events import Cause
from kubesched.errors import InputError, RemoteError
from kubesched.live.client import ApiStatusError, KubeClient

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class Unreachable(ApiError):
    """The request got no answer (connection refused, reset, timed out)."""

    code = 503
    reason = "ServiceUnavailable"


class Refused(ApiError):
    """Any other error answer; `code` and `reason` are the server's."""

    def __init__(self, message: str, code: int, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


_BY_CODE: dict[int, type[ApiError]] = {404: NotFound, 409: Conflict, 429: TooManyRequests}


def api_error(e: RemoteError) -> ApiError:
    """The interface's error for a failed request."""
    if isinstance(e, ApiStatusError):
        message = str(e.body.get("message") or e)
        cls = _BY_CODE.get(e.status)
        return cls(message) if cls is not None else Refused(message, e.status, e.reason or "Failure")
    return Unreachable(str(e))


def micro_time(t: float) -> str:
    """metav1.MicroTime as the API serializes it: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(namespace: str, name: str, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
    return f"{path}/{sub}" if sub else path


class LiveClient:
    """The Client protocol over a KubeClient. `component` names the writer in Events' `source`."""

    def __init__(self, kube: KubeClient, *, component: str = "kubesched", instance: str = "") -> None:
        self.kube = kube
        self.component = component
        self.instance = instance

    def _write(self, method: str, path: str, body: Any, content_type: str = "application/json",
               query: list[tuple[str, Any]] | None = None) -> dict[str, Any]:
        try:
            return self.kube.write(method, path, body, query=query, content_type=content_type)
        except RemoteError as e:
            raise api_error(e) from None

    @staticmethod
    def _parse_pod(raw: dict[str, Any]) -> Pod:
        try:
            return parse_pod(raw)
        except InputError as e:
            raise ApiError(f"the server answered with a pod kubesched cannot read: {e.render()}") from None

    # ------------------------------------------------------------ pods

    def create_pod(self, manifest: dict[str, Any], *, cause: Cause) -> Pod:
        ns = str((manifest.get("metadata") or {}).get("namespace") or "default")
        out = self._write("POST", f"/api/v1/namespaces/{quote(ns, safe='')}/pods", manifest)
        return self._parse_pod(out)

    def delete_pod(self, pod: Pod, *, grace_period_seconds: int | None = None, cause: Cause) -> None:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        self._write("DELETE", _pod_path(pod.namespace, pod.name), body)

    def bind(self, pod: Pod, node_name: str, *, cause: Cause = Cause.SCHEDULER) -> None:
        body = {"kind": "Binding", "apiVersion": "v1",
                "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "target": {"kind": "Node", "apiVersion": "v1", "name": node_name}}
        self._write("POST", _pod_path(pod.namespace, pod.name, "binding"), body)

    def evict(self, pod: Pod, *, grace_period_seconds: int | None = None, dry_run: bool = False,
              cause: Cause = Cause.DESCHEDULER) -> None:
        opts: dict[str, Any] = {}
        if grace_period_seconds is not None:
            opts["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            opts["dryRun"] = ["All"]
        body = {"kind": "Eviction", "apiVersion": "policy/v1",
                "metadata": {"name": pod.name, "namespace": pod.namespace}, "deleteOptions": opts}
        self._write("POST", _pod_path(pod.namespace, pod.name, "eviction"), body)

    def update_pod_status(self, pod: Pod, *, cause: Cause, **status: Any) -> Pod:
        out = self._write("PATCH", _pod_path(pod.namespace, pod.name, "status"), {"status": status}, STRATEGIC_MERGE)
        return self._parse_pod(out)

    # ------------------------------------------------------------ nodes, PDBs, events

    def patch_node(self, node: Node, *, taints: list[dict[str, Any]] | None = None,
                   conditions: dict[str, str] | None = None, unschedulable: bool | None = None,
                   cause: Cause) -> Node:
        path = f"/api/v1/nodes/{quote(node.name, safe='')}"
        out: dict[str, Any] | None = None
        spec: dict[str, Any] = {}
        if taints is not None:
            spec["taints"] = list(taints) or None
        if unschedulable is not None:
            spec["unschedulable"] = True if unschedulable else None
        if spec:
            out = self._write("PATCH", path, {"spec": spec}, STRATEGIC_MERGE)
        if conditions:
            conds = [{"type": t, "status": v} for t, v in conditions.items()]
            out = self._write("PATCH", f"{path}/status", {"status": {"conditions": conds}}, STRATEGIC_MERGE)
        if out is None:
            return node
        try:
            return parse_node(out)
        except InputError as e:
            raise ApiError(f"the server answered with a node kubesched cannot read: {e.render()}") from None

    def update_pdb_status(self, pdb: PodDisruptionBudget, *, disruptions_allowed: int, current_healthy: int,
                          desired_healthy: int, expected_pods: int,
                          disrupted_pods: dict[str, datetime | None] | None = None,
                          cause: Cause = Cause.DISRUPTION) -> None:
        status: dict[str, Any] = {"disruptionsAllowed": disruptions_allowed, "currentHealthy": current_healthy,
                                  "desiredHealthy": desired_healthy, "expectedPods": expected_pods}
        if disrupted_pods is not None:
            status["disruptedPods"] = {k: (v.strftime("%Y-%m-%dT%H:%M:%SZ") if v else None)
                                       for k, v in disrupted_pods.items()}
        ns, name = pdb.meta.namespace, pdb.meta.name
        self._write("PATCH", f"/apis/policy/v1/namespaces/{quote(ns, safe='')}/poddisruptionbudgets/"
                             f"{quote(name, safe='')}/status", {"status": status}, MERGE_PATCH)

    def create_event(self, event: KubeEvent) -> None:
        self._write("POST", f"/api/v1/namespaces/{quote(self.event_namespace(event), safe='')}/events",
                    self.event_body(event))

    @staticmethod
    def event_namespace(event: KubeEvent) -> str:
        _, _, key = event.involved.partition(" ")
        ns, _, _ = key.rpartition("/")
        return ns or "default"

    def event_body(self, event: KubeEvent) -> dict[str, Any]:
        """A core/v1 Event as client-go's recorder makes one: named after the object and the time."""
        kind, _, key = event.involved.partition(" ")
        ns, _, name = key.rpartition("/")
        t = event.time.timestamp() if event.time is not None else time.time()
        involved: dict[str, Any] = {"kind": kind, "name": name, "apiVersion": "v1"}
        if ns:
            involved["namespace"] = ns
        for k in ("uid", "resourceVersion", "fieldPath"):
            if event.fields.get(k):
                involved[k] = event.fields[k]
        component = event.component or self.component
        body: dict[str, Any] = {
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": f"{name}.{int(t * 1e9):x}", "namespace": ns or "default"},
            "involvedObject": involved, "reason": event.reason, "message": event.message, "type": event.type,
            "source": {"component": component}, "firstTimestamp": rfc3339(t), "lastTimestamp": rfc3339(t),
            "count": 1, "eventTime": None, "reportingComponent": component, "reportingInstance": self.instance,
        }
        if event.fields.get("action"):
            body["action"] = event.fields["action"]
        return body

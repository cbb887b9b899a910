"""An API server in process: the `Client` verbs served over a `ClusterState`, on the caller's clock.

What it decides is what the real API server decides (read from kubernetes `pkg/registry/core/pod`):

- delete: a pod that never ran on a node, a terminal pod, or a grace period of 0 goes at once; any other
  pod gets `deletionTimestamp` = now + grace period (the request's, else the pod's
  terminationGracePeriodSeconds, else 30) and stays, terminating, until its kubelet confirms — here, until
  the owner of the clock calls `advance()` past that moment (the simulator's kubelets may finish earlier
  through `finish_termination`);
- bind (pods/binding): 404 for an unknown pod, 409 when it is bound already (the scheduler's own
  assumption of the same node is what the binding confirms);
- evict (policy/v1 Eviction, `eviction.go`): a Pending, terminal or terminating pod is deleted without
  looking at PDBs; otherwise the pod's PDBs (same namespace, a non-empty selector that matches): more than
  one is a 500, none lets the eviction through, a not-ready pod while the budget is already met is deleted
  without spending the budget, `disruptionsAllowed` 0 is a 429 (negative: 403); else the budget is
  decremented and the pod recorded in `disruptedPods` (not under dry-run) and the pod deleted gracefully.
  `enforce_pdbs=False` skips the PDB part: that is what upstream's descheduler tests and its dry-run mode
  see (a fake client that refuses nothing), and `kubesched deschedule`'s default;
- create: `generateName` gets five random characters from the server's seeded generator, and a name that
  is taken is retried (up to 8 times, as the API server's name-generation retry does) before 409.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubesched.api.objects import Node, Pod, PodDisruptionBudget, parse_node, parse_pod
from kubesched.client.interface import (
    MULTIPLE_PDBS,
    PDB_VIOLATION,
    AlreadyExists,
    ApiError,
    Conflict,
    KubeEvent,
    NotFound,
    TooManyRequests,
)
from kubesched.cluster.events import Cause, EventType
from kubesched.cluster.state import ClusterState
from kubesched.errors import InputError

DEFAULT_TERMINATION_GRACE_PERIOD = 30
# rand.String's alphabet (k8s.io/apimachinery/pkg/util/rand): no vowels, no confusable digits.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_NAME_LENGTH = 5
_ALPHABET_SIZE = len(NAME_ALPHABET)
_ALPHABET_BITS = _ALPHABET_SIZE.bit_length()
GENERATE_NAME_ATTEMPTS = 8


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


def is_pod_ready(pod: Pod) -> bool:
    """podutil.IsPodReady: a Ready condition with status True."""
    for c in pod.status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def pdb_selects(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """The eviction handler's match: same namespace, and a selector that is neither nil nor empty."""
    return (pdb.meta.namespace == pod.namespace and bool(pdb.selector.requirements)
            and pdb.selector.matches(pod.labels))


class InProcessAPIServer:
    """The Client protocol over a ClusterState (see the module docstring for what each verb decides)."""

    def __init__(self, state: ClusterState, clock: Callable[[], float] | None = None, *, enforce_pdbs: bool = True,
                 seed: int = 0) -> None:
        self.state = state
        self.clock = clock or (lambda: 0.0)
        self.enforce_pdbs = enforce_pdbs
        self.events: list[KubeEvent] = []
        self.name_rng = random.Random(seed)
        # Graceful deletions in progress: (deadline, seq, pod key, uid).
        self._terminations: list[tuple[float, int, str, str]] = []
        self._seq = 0

    # ------------------------------------------------------------ time

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def next_deadline(self) -> float | None:
        """When the next graceful deletion ends (None: nothing is terminating)."""
        while self._terminations:
            deadline, _, key, uid = self._terminations[0]
            cur = self.state.pods.get(key)
            if cur is not None and cur.uid == uid and cur.is_terminating:
                return deadline
            heapq.heappop(self._terminations)
        return None

    def advance(self, now: float) -> None:
        """Finish every graceful deletion whose deadline is due at `now`."""
        while self._terminations and self._terminations[0][0] <= now:
            _, _, key, uid = heapq.heappop(self._terminations)
            cur = self.state.pods.get(key)
            if cur is not None and cur.uid == uid:
                self.state.delete(cur, cause=Cause.API)

    def finish_termination(self, pod: Pod, cause: Cause = Cause.KUBELET) -> None:
        """The kubelet confirms a terminating pod is gone (its containers stopped): the object is deleted."""
        cur = self.state.pods.get(pod.key)
        if cur is not None and cur.uid == pod.uid:
            self.state.delete(cur, cause=cause)

    # ------------------------------------------------------------ pods

    def _current(self, pod: Pod) -> Pod:
        cur = self.state.pods.get(pod.key)
        if cur is None:
            raise NotFound(f'pods "{pod.name}" not found')
        return cur

    def admit(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Admission and defaulting of a pod being created (none here; the simulated server adds them)."""
        return manifest

    def create_pod(self, manifest: dict[str, Any], *, cause: Cause) -> Pod:
        meta = manifest.setdefault("metadata", {})
        ns = str(meta.get("namespace") or "default")
        meta["namespace"] = ns
        generate = meta.get("generateName") if not meta.get("name") else None
        manifest = self.admit(manifest)
        for _ in range(GENERATE_NAME_ATTEMPTS if generate else 1):
            if generate:
                meta["name"] = f"{generate}{self.random_suffix()}"
            if f"{ns}/{meta['name']}" not in self.state.pods:
                break
        else:
            raise AlreadyExists(f'pods "{meta["name"]}" already exists')
        if f"{ns}/{meta['name']}" in self.state.pods:
            raise AlreadyExists(f'pods "{meta["name"]}" already exists')
        pod = self.parse(manifest)
        self.state.add(pod, cause=cause)
        return pod

    def parse(self, manifest: dict[str, Any]) -> Pod:
        try:
            return parse_pod(manifest)
        except InputError as e:
            raise ApiError(f"Pod is invalid: {e.render()}") from None

    def random_suffix(self) -> str:
        """generateName's suffix: GENERATED_NAME_LENGTH draws of `name_rng.choice(NAME_ALPHABET)`, made here the
        way `random.Random.choice` makes them (rejection sampling over `getrandbits(n.bit_length())`) without
        its per-call overhead: the same names, one per pod a controller creates."""
        bits = self.name_rng.getrandbits
        out: list[str] = []
        while len(out) < GENERATED_NAME_LENGTH:
            r = bits(_ALPHABET_BITS)
            if r < _ALPHABET_SIZE:
                out.append(NAME_ALPHABET[r])
        return "".join(out)

    def delete_pod(self, pod: Pod, *, grace_period_seconds: int | None = None, cause: Cause) -> None:
        cur = self._current(pod)
        if grace_period_seconds is None:
            grace = cur.termination_grace_period_seconds
            grace = DEFAULT_TERMINATION_GRACE_PERIOD if grace is None else grace
        else:
            grace = grace_period_seconds
        # CheckGracefulDelete: unscheduled and terminal pods need no kubelet to confirm.
        if not cur.node_name or cur.is_terminal or grace <= 0:
            self.state.delete(cur, cause=cause)
            return
        now = self.clock()
        deadline = now + grace
        if cur.is_terminating:
            assert cur.meta.deletion_timestamp is not None
            if cur.meta.deletion_timestamp.timestamp() <= deadline:
                return  # a deletion may only be shortened
        self.state.update(cur.marked_for_deletion(datetime.fromtimestamp(deadline, UTC), int(grace)), cause=cause)
        self._seq += 1
        heapq.heappush(self._terminations, (deadline, self._seq, cur.key, cur.uid))

    def bind(self, pod: Pod, node_name: str, *, cause: Cause = Cause.SCHEDULER) -> None:
        cur = self._current(pod)
        if cur.node_name and (cur.node_name != node_name or cur.key not in self.state.assumed):
            raise Conflict(f'pod {cur.name} is already assigned to node "{cur.node_name}"')
        self.state.bind(cur, node_name, cause=cause)

    def evict(self, pod: Pod, *, grace_period_seconds: int | None = None, dry_run: bool = False,
              cause: Cause = Cause.DESCHEDULER) -> None:
        cur = self._current(pod)
        if cur.phase in ("Succeeded", "Failed", "Pending") or cur.is_terminating:
            if not dry_run:
                self.delete_pod(cur, grace_period_seconds=grace_period_seconds, cause=cause)
            return
        if self.enforce_pdbs:
            pdbs = [p for p in self.state.pdbs.values() if pdb_selects(p, cur)]
            if len(pdbs) > 1:
                raise ApiError(MULTIPLE_PDBS)
            if pdbs:
                pdb = pdbs[0]
                if not (not is_pod_ready(cur) and pdb.current_healthy >= pdb.desired_healthy > 0):
                    self._check_and_decrement(pdb, cur, dry_run)
        if not dry_run:
            self.delete_pod(cur, grace_period_seconds=grace_period_seconds, cause=cause)

    def _check_and_decrement(self, pdb: PodDisruptionBudget, pod: Pod, dry_run: bool) -> None:
        if pdb.disruptions_allowed < 0:
            raise Forbidden(f'poddisruptionbudgets.policy "{pdb.meta.name}" is forbidden: '
                            "pdb disruptions allowed is negative")
        if pdb.disruptions_allowed == 0:
            raise TooManyRequests(PDB_VIOLATION)
        if dry_run:
            return
        disrupted = dict(pdb.disrupted_pods)
        disrupted[pod.name] = self.now()
        self.state.update(pdb.with_status(disruptions_allowed=pdb.disruptions_allowed - 1, disrupted_pods=disrupted),
                          cause=Cause.API)

    def update_pod_status(self, pod: Pod, *, cause: Cause, **status: Any) -> Pod:
        cur = self._current(pod)
        new = cur.with_status(**status)
        self.state.update(new, cause=cause)
        return new

    def patch_pod_annotations(self, pod: Pod, annotations: Mapping[str, str | None], *, cause: Cause) -> Pod:
        cur = self._current(pod)
        new = cur.with_annotations(annotations)
        self.state.update(new, cause=cause)
        return new

    # ------------------------------------------------------------ nodes, PDBs, events

    def patch_node(self, node: Node, *, taints: list[dict[str, Any]] | None = None,
                   conditions: dict[str, str] | None = None, unschedulable: bool | None = None,
                   cause: Cause) -> Node:
        cur = self.state.nodes.get(node.name)
        if cur is None:
            raise NotFound(f'nodes "{node.name}" not found')
        raw = {**cur.raw}
        spec = dict(raw.get("spec") or {})
        status = dict(raw.get("status") or {})
        if taints is not None:
            spec["taints"] = list(taints)
            if not taints:
                spec.pop("taints")
        if unschedulable is not None:
            if unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
        if conditions:
            conds = [c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") not in conditions]
            conds += [{"type": t, "status": v} for t, v in conditions.items()]
            status["conditions"] = conds
        raw["spec"] = spec
        raw["status"] = status
        new = parse_node(raw)
        self.state.update(new, cause=cause)
        return new

    def update_pdb_status(self, pdb: PodDisruptionBudget, *, disruptions_allowed: int, current_healthy: int,
                          desired_healthy: int, expected_pods: int,
                          disrupted_pods: dict[str, datetime | None] | None = None,
                          cause: Cause = Cause.DISRUPTION) -> None:
        cur = self.state.pdbs.get(pdb.meta.key)
        if cur is None:
            raise NotFound(f'poddisruptionbudgets.policy "{pdb.meta.name}" not found')
        if (cur.disruptions_allowed, cur.current_healthy, cur.desired_healthy, cur.expected_pods) == (
                disruptions_allowed, current_healthy, desired_healthy, expected_pods) and (
                disrupted_pods is None or disrupted_pods == cur.disrupted_pods):
            return
        self.state.apply(EventType.UPDATED, cur.with_status(
            disruptions_allowed=disruptions_allowed, current_healthy=current_healthy,
            desired_healthy=desired_healthy, expected_pods=expected_pods, disrupted_pods=disrupted_pods),
            cause=cause)

    def create_event(self, event: KubeEvent) -> None:
        self.events.append(event)


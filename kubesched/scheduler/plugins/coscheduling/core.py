"""The PodGroup manager behind Coscheduling: which groups are permitted, backed off, failed; who is assigned.

Mirrors kubernetes-sigs/scheduler-plugins `pkg/coscheduling/core/core.go` (PodGroupManager):
- `pre_filter`: a group that failed recently (backed off) is refused; a group with fewer pods than
  `minMember` is refused, counting pods with scheduling gates as missing; with `minResources`, the
  cluster must have that much free (the group's own pods' requests count as free, plus room for minMember
  pods) — checked node by node in node order, once per `permitWaitingTimeSeconds` (the permitted cache);
- `permit`: the pod joins its group's assigned pods; once `minMember` are assigned the group is allowed,
  else the pod waits (the first one asks to activate its siblings);
- `unreserve`: the pod leaves the assigned pods; pods leave it too when deleted, pods already assigned
  when the plugin starts (or added with a node) join it;
- the creation time that orders the queue: the group's last scheduling failure if any, else the PodGroup's
  creationTimestamp, else the pod's first attempt.
Caches expire on the scheduler's clock (upstream's go-cache entries expire on the wall clock).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, scheduler_request
from kubesched.api.scheduling import PodGroup, pod_group_full_name, pod_group_name
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.scheduler.plugins.framework_resource import Resource

# Permit outcomes (core.Status).
POD_GROUP_NOT_SPECIFIED = "PodGroup not specified"
POD_GROUP_NOT_FOUND = "PodGroup not found"
SUCCESS = "Success"
WAIT = "Wait"

PERMIT_STATE_KEY = "PermitCoscheduling"


class PermitState:
    """Whether this cycle's Permit should activate the pod's siblings."""

    __slots__ = ("activate",)

    def __init__(self, activate: bool) -> None:
        self.activate = activate

    def clone(self) -> PermitState:
        return PermitState(self.activate)


class _ExpiringSet:
    """go-cache used as a set: entries expire `ttl` seconds after they were added."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def add(self, key: str, ttl: float, now: float) -> None:
        self._until[key] = now + ttl

    def has(self, key: str, now: float) -> bool:
        until = self._until.get(key)
        if until is None:
            return False
        if until <= now:
            del self._until[key]
            return False
        return True

    def delete(self, key: str) -> None:
        self._until.pop(key, None)


class PodGroupManager:
    """core.PodGroupManager over the cluster state (its pod informer is the state's listener)."""

    def __init__(self, cluster: ClusterState, schedule_timeout: float, now: Callable[[], float]) -> None:
        self.cluster = cluster
        self.schedule_timeout = schedule_timeout
        self.now = now
        self.permitted = _ExpiringSet()
        self.backed_off = _ExpiringSet()
        self.last_failed: dict[str, float] = {}
        self.assigned: dict[str, set[str]] = {}
        # The pod lister, indexed by group: full group name → pod key → pod.
        self.members: dict[str, dict[str, Pod]] = {}
        self._group_of: dict[str, str] = {}
        for pod in cluster.pods.values():
            self._index(pod)
            if pod.node_name:
                self._add_assigned(pod)
        cluster.subscribe(self._on_event, index=True)

    # ------------------------------------------------------------ the informer

    def _index(self, pod: Pod) -> None:
        full = pod_group_full_name(pod)
        if full:
            self.members.setdefault(full, {})[pod.key] = pod
            self._group_of[pod.key] = full

    def _unindex(self, key: str) -> None:
        full = self._group_of.pop(key, None)
        if full is not None:
            group = self.members.get(full)
            if group is not None:
                group.pop(key, None)
                if not group:
                    del self.members[full]

    def _add_assigned(self, pod: Pod) -> None:
        full = pod_group_full_name(pod)
        if full:
            self.assigned.setdefault(full, set()).add(pod.name)

    def _on_event(self, ev: Event) -> None:
        if ev.kind != "Pod":
            return
        obj = ev.obj
        if ev.type is EventType.DELETED:
            self._unindex(obj.key)
            if obj.node_name:
                self.unreserve(obj)
            return
        # Every other change (an update, the scheduler's assume, bind, unbind) is a new pod object.
        self._unindex(obj.key)
        self._index(obj)
        if ev.type is EventType.ADDED and obj.node_name:
            self._add_assigned(obj)  # AddPodFactory: assigned pods that appear

    # ------------------------------------------------------------ reading

    def get_pod_group(self, pod: Pod) -> tuple[str, PodGroup | None]:
        """GetPodGroup: the group's full name ("" without the label) and the PodGroup if it exists."""
        name = pod_group_name(pod)
        if not name:
            return "", None
        full = f"{pod.namespace}/{name}"
        pg = self.cluster.others.get(f"PodGroup/{full}")
        return full, pg if isinstance(pg, PodGroup) else None

    def pods_of(self, full_name: str) -> list[Pod]:
        """The pod lister: every pod of the group's namespace that carries the group label."""
        return list(self.members.get(full_name, {}).values())

    def assigned_count(self, full_name: str) -> int:
        return len(self.assigned.get(full_name, ()))

    def creation_timestamp(self, pod: Pod, ts: float) -> float:
        """GetCreationTimestamp: last failure, else the PodGroup's creation time, else `ts`."""
        name = pod_group_name(pod)
        if not name:
            return ts
        full = f"{pod.namespace}/{name}"
        failed = self.last_failed.get(full)
        if failed is not None:
            return failed
        pg = self.cluster.others.get(f"PodGroup/{full}")
        if not isinstance(pg, PodGroup):
            return ts
        created = pg.meta.creation_timestamp
        # Go's zero time sorts before every other.
        return created.timestamp() if created is not None else float("-inf")

    # ------------------------------------------------------------ the extension points

    def pre_filter(self, pod: Pod) -> str | None:
        """The reason the pod may not be scheduled now, or None."""
        full, pg = self.get_pod_group(pod)
        if pg is None:
            return None
        now = self.now()
        if self.backed_off.has(full, now):
            return f"podGroup {full} failed recently"
        pods = self.pods_of(full)
        gap = pg.min_member - len(pods)
        if gap > 0:
            return (f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                    f"current pods number: {len(pods)}, minMember of group: {pg.min_member}")
        for p in pods:
            if p.scheduling_gates:
                gap += 1
            if gap > 0:
                return f"pre-filter pod {pod.name} cannot proceed due to gated pods in the same PodGroup"
        if pg.min_resources is None:
            return None
        if self.permitted.has(full, now):
            return None
        want = dict(pg.min_resources)
        want[PODS] = Fraction(pg.min_member)
        gap_left = check_cluster_resource(self.cluster.node_infos, want, full)
        if gap_left:
            return f"resource gap: {_go_map(gap_left)}"
        self.permitted.add(full, self.schedule_timeout, now)
        return None

    def permit(self, state: Any, pod: Pod) -> str:
        full, pg = self.get_pod_group(pod)
        if not full:
            return POD_GROUP_NOT_SPECIFIED
        if pg is None:
            return POD_GROUP_NOT_FOUND
        assigned = self.assigned.setdefault(full, set())
        assigned.add(pod.name)
        if len(assigned) >= pg.min_member:
            return SUCCESS
        if len(assigned) == 1:
            # Only the first pod to reach Permit activates its siblings (scheduler-plugins#682).
            state.write(PERMIT_STATE_KEY, PermitState(True))
        return WAIT

    def unreserve(self, pod: Pod) -> None:
        full = pod_group_full_name(pod)
        assigned = self.assigned.get(full) if full else None
        if assigned is not None:
            assigned.discard(pod.name)
            if not assigned:
                del self.assigned[full]

    def activate_siblings(self, pod: Pod, state: Any, pods_to_activate: dict[str, Pod] | None) -> None:
        """ActivateSiblings: the group's other pods go to activeQ when the cycle ends."""
        name = pod_group_name(pod)
        if not name or pods_to_activate is None:
            return
        st = state.read(PERMIT_STATE_KEY)
        if not isinstance(st, PermitState) or not st.activate:
            return
        for p in self.pods_of(f"{pod.namespace}/{name}"):
            if p.uid != pod.uid:
                pods_to_activate[f"{p.namespace}/{p.name}"] = p

    def backoff(self, full_name: str, seconds: float) -> None:
        if seconds:
            self.backed_off.add(full_name, seconds, self.now())

    def mark_failure(self, full_name: str) -> None:
        self.last_failed[full_name] = self.now()

    def clear_failure(self, full_name: str) -> None:
        self.last_failed.pop(full_name, None)

    def delete_permitted(self, full_name: str) -> None:
        self.permitted.delete(full_name)


def _free_on(info: NodeInfo, group_pods: list[Pod]) -> dict[str, Fraction]:
    """getNodeResource: allocatable minus what the node's pods request, not counting the group's own pods."""
    requested = dict(info.requested)
    for p in group_pods:
        for name, v in scheduler_request(p).items():
            requested[name] = requested.get(name, 0) - v
    alloc = info.allocatable
    left = Resource(alloc.get(CPU, 0) - requested.get(CPU, 0), alloc.get(MEMORY, 0) - requested.get(MEMORY, 0),
                    alloc.get(EPHEMERAL_STORAGE, 0) - requested.get(EPHEMERAL_STORAGE, 0),
                    alloc.get(PODS, 0) - (len(info.pods) - len(group_pods)))
    for name, v in alloc.items():
        if name not in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS):
            left.scalar[name] = v - requested.get(name, 0)
    return left.to_resource_list()


def check_cluster_resource(nodes: list[NodeInfo], want: dict[str, Fraction], group: str) -> dict[str, Fraction]:
    """CheckClusterResource: walk the nodes taking what each has free until `want` is met; what is still
    missing (empty when the cluster has enough)."""
    left = dict(want)
    for info in nodes:
        own = [p for p in info.pods.values() if pod_group_full_name(p) == group]
        free = _free_on(info, own)
        for name in list(left):
            q = left[name] - free.get(name, Fraction(0))
            if q <= 0:
                del left[name]
            else:
                left[name] = q
        if not left:
            return {}
    return left


def _go_map(rl: dict[str, Fraction]) -> str:
    """fmt's %v of a resource list, with each quantity as its string (keys sorted, as fmt prints maps)."""
    def text(q: Fraction) -> str:
        return str(q.numerator) if q.denominator == 1 else f"{float(q):g}"

    return "map[" + " ".join(f"{k}:{text(v)}" for k, v in sorted(rl.items())) + "]"

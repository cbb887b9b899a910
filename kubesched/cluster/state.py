"""ClusterState: every object, its indexes, and the node columns — changed through one path of events.

The scheduler's cache, the descheduler's informers, the kubelets of the simulator and a live watch all
read this one state; every change (add/update/delete an object, bind a pod) goes through `apply`, which
announces a typed `Event` with its cause, so listeners (indexes, the scheduling queue, recorders, the
simulator's drivers) see every change exactly once. Nobody changes an object in place.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.objects import (
    Namespace,
    Node,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Workload,
)
from kubesched.api.resources import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    node_allocatable_units,
    non_zero_request,
    scheduler_request,
)
from kubesched.api.snapshot import Snapshot, gc_paused
from kubesched.cluster.events import Cause, Event, EventType, Listener

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
ZONE_LABEL_BETA = "failure-domain.beta.kubernetes.io/zone"
REGION_LABEL_BETA = "failure-domain.beta.kubernetes.io/region"

# Fixed columns of the resource matrices; extended resources get columns as they appear.
BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE)


def zone_key(node: Node) -> str:
    """utilnode.GetZoneKey: region and zone (GA label first, then beta); empty when neither is set."""
    labels = node.labels
    zone = labels.get(ZONE_LABEL) or labels.get(ZONE_LABEL_BETA) or ""
    region = labels.get(REGION_LABEL) or labels.get(REGION_LABEL_BETA) or ""
    if not zone and not region:
        return ""
    return region + ":\x00:" + zone


def host_ports_of(pod: Pod) -> tuple[tuple[str, str, int], ...]:
    """(hostIP, protocol, hostPort) of every container port with a hostPort (schedutil.GetHostPorts).

    Sidecars (init containers with restartPolicy Always) run for the pod's whole life and count, first;
    other init containers are ignored.
    """
    cached = pod.cache.get("host_ports")
    if cached is None:
        out = []
        for c in [c for c in pod.init_containers if c.is_sidecar] + pod.containers:
            for p in c.ports:
                if p.host_port > 0:
                    out.append((p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port))
        cached = tuple(out)
        pod.cache["host_ports"] = cached
    return cached


@dataclass
class NodeInfo:
    """framework.NodeInfo: a node, the non-terminal pods assigned to it, and what they use."""

    node: Node
    index: int
    pods: dict[str, Pod] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    non_zero_cpu: int = 0
    non_zero_mem: int = 0
    used_ports: dict[tuple[str, str, int], int] = field(default_factory=dict)
    pods_with_affinity: dict[str, Pod] = field(default_factory=dict)
    pods_with_required_anti_affinity: dict[str, Pod] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    generation: int = 0

    @property
    def name(self) -> str:
        return self.node.name

    def add_pod(self, pod: Pod) -> None:
        self.pods[pod.key] = pod
        for k, v in scheduler_request(pod).items():
            self.requested[k] = self.requested.get(k, 0) + v
        cpu, mem = non_zero_request(pod)
        self.non_zero_cpu += cpu
        self.non_zero_mem += mem
        for port in host_ports_of(pod):
            self.used_ports[port] = self.used_ports.get(port, 0) + 1
        aff = pod.affinity
        if aff.has_pod_affinity or aff.has_pod_anti_affinity:
            self.pods_with_affinity[pod.key] = pod
        if aff.pod_anti_affinity_required:
            self.pods_with_required_anti_affinity[pod.key] = pod
        self.generation += 1

    def remove_pod(self, pod: Pod) -> bool:
        cur = self.pods.pop(pod.key, None)
        if cur is None:
            return False
        for k, v in scheduler_request(cur).items():
            self.requested[k] = self.requested.get(k, 0) - v
        cpu, mem = non_zero_request(cur)
        self.non_zero_cpu -= cpu
        self.non_zero_mem -= mem
        for port in host_ports_of(cur):
            n = self.used_ports.get(port, 0) - 1
            if n <= 0:
                self.used_ports.pop(port, None)
            else:
                self.used_ports[port] = n
        self.pods_with_affinity.pop(cur.key, None)
        self.pods_with_required_anti_affinity.pop(cur.key, None)
        self.generation += 1
        return True

    def clone(self) -> NodeInfo:
        return NodeInfo(self.node, self.index, dict(self.pods), dict(self.requested), self.non_zero_cpu,
                        self.non_zero_mem, dict(self.used_ports), dict(self.pods_with_affinity),
                        dict(self.pods_with_required_anti_affinity), self.allocatable, self.generation)


class NodeTable:
    """Per-node numbers as NumPy columns, row i is NodeInfo.index i.

    `alloc` and `requested` are int64 matrices with one column per resource (`resources`); `non_zero`
    holds the scoring requests (milli-cpu, memory); `pod_count` and `allowed_pods` the pod numbers.
    """

    def __init__(self) -> None:
        self.resources: list[str] = list(BASE_RESOURCES)
        self.column: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.n = 0
        cap = 16
        self.alloc = np.zeros((cap, len(self.resources)), dtype=np.int64)
        self.requested = np.zeros((cap, len(self.resources)), dtype=np.int64)
        self.non_zero = np.zeros((cap, 2), dtype=np.int64)
        self.pod_count = np.zeros(cap, dtype=np.int64)
        self.allowed_pods = np.zeros(cap, dtype=np.int64)
        # Whether the node's allocatable names the resource at all (a missing extended resource differs
        # from one with 0 in some plugins' messages, never in arithmetic).
        self.has = np.zeros((cap, len(self.resources)), dtype=bool)
        # Rows whose numbers changed, in order (appended on every change; reset with a new epoch when
        # long): per-row caches over the table catch up by recomputing just these rows.
        self.changed_rows: list[int] = []
        self.changes_epoch = 0

    def ensure_resource(self, name: str) -> int:
        col = self.column.get(name)
        if col is not None:
            return col
        col = len(self.resources)
        self.resources.append(name)
        self.column[name] = col
        rows = self.alloc.shape[0]
        self.alloc = np.hstack([self.alloc, np.zeros((rows, 1), dtype=np.int64)])
        self.requested = np.hstack([self.requested, np.zeros((rows, 1), dtype=np.int64)])
        self.has = np.hstack([self.has, np.zeros((rows, 1), dtype=bool)])
        return col

    def _grow(self, need: int) -> None:
        rows = self.alloc.shape[0]
        if need <= rows:
            return
        new = max(need, rows * 2)

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new,) + a.shape[1:], dtype=a.dtype)
            out[:rows] = a
            return out

        self.alloc = grow(self.alloc)
        self.requested = grow(self.requested)
        self.non_zero = grow(self.non_zero)
        self.pod_count = grow(self.pod_count)
        self.allowed_pods = grow(self.allowed_pods)
        self.has = grow(self.has)

    def add_row(self) -> int:
        self._grow(self.n + 1)
        self.n += 1
        return self.n - 1

    def remove_row(self, row: int) -> None:
        """Drop a row; the rows after it move up by one (their order is kept). Per-row caches start afresh."""
        n = self.n
        for a in (self.alloc, self.requested, self.non_zero, self.pod_count, self.allowed_pods, self.has):
            a[row:n - 1] = a[row + 1:n]
            a[n - 1] = 0
        self.n = n - 1
        self.changed_rows = []
        self.changes_epoch += 1

    def set_allocatable(self, row: int, alloc: dict[str, int]) -> None:
        for name in alloc:
            if name != PODS:
                self.ensure_resource(name)
        self.alloc[row, :] = 0
        self.has[row, :] = False
        for name, v in alloc.items():
            if name == PODS:
                continue
            col = self.column[name]
            self.alloc[row, col] = v
            self.has[row, col] = True
        self.allowed_pods[row] = alloc.get(PODS, 0)
        self._changed(row)

    def _changed(self, row: int) -> None:
        if len(self.changed_rows) >= 1 << 16:
            self.changed_rows = []
            self.changes_epoch += 1
        self.changed_rows.append(row)

    def add_pod(self, row: int, pod: Pod, sign: int = 1) -> None:
        req = scheduler_request(pod)
        for name, v in req.items():
            col = self.column.get(name)
            if col is None:
                col = self.ensure_resource(name)
            self.requested[row, col] += sign * v
        cpu, mem = non_zero_request(pod)
        self.non_zero[row, 0] += sign * cpu
        self.non_zero[row, 1] += sign * mem
        self.pod_count[row] += sign
        self._changed(row)

    def pod_vector(self, pod: Pod) -> np.ndarray:
        """The pod's requests as a row over this table's resource columns."""
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for name, v in scheduler_request(pod).items():
            col = self.column.get(name)
            if col is None:
                col = self.ensure_resource(name)
                vec = np.append(vec, 0)
            vec[col] = v
        return vec


class ClusterState:
    """Every object and its indexes. Change it only through `apply` (or the named helpers that call it).

    Objects handed out are never changed in place: a change applies a new object. Listeners get one
    typed `Event` per change. Index listeners (`subscribe(fn, index=True)`: caches that must agree with
    the state at all times) are called at once and must not change the state; the others are called in
    the order of the changes, after the change that is being announced has reached every listener (a
    listener that changes the state from its handler has its own change announced next, not nested).
    """

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.node_infos: list[NodeInfo] = []  # by table row
        self.node_info_by_name: dict[str, NodeInfo] = {}
        self.pods: dict[str, Pod] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        self.pvcs: dict[str, PersistentVolumeClaim] = {}
        self.workloads: dict[str, Workload] = {}
        self.others: dict[str, Any] = {}
        self.table = NodeTable()
        # Bumped on any change to a node object (labels, taints, allocatable...); shape caches key on it.
        self.node_generation = 0
        # The rows of node objects updated in place, in order; a node added or removed (rows renumbered
        # or grown) or a long log starts a new epoch. Per-row caches catch up with just these rows.
        self.node_change_log: list[int] = []
        self.node_change_epoch = 0
        # Bumped on any change to pods assigned to nodes.
        self.pod_generation = 0
        # Bumped on every change of any kind.
        self.revision = 0
        self._order: np.ndarray | None = None
        self._image_nodes: dict[str, int] | None = None
        # (listener, the kinds it watches or None for every kind, the event types or None for every type)
        self._index_listeners: list[tuple[Listener, frozenset[str] | None, frozenset[EventType] | None]] = []
        self._listeners: list[tuple[Listener, frozenset[str] | None, frozenset[EventType] | None]] = []
        # Who hears an event of a (kind, type): computed on first use, forgotten when someone (un)subscribes.
        self._routes: dict[tuple[str, EventType], tuple[tuple[Listener, ...], tuple[Listener, ...]]] = {}
        self._pending: deque[Event] = deque()
        self._dispatching = False
        self.assigned_with_affinity: dict[str, Pod] = {}
        self.assigned_with_required_anti_affinity: dict[str, Pod] = {}
        # How many pods counted on nodes have each priority (whether a preemptor has any lower-priority pod to
        # evict, answered without a walk over every pod).
        self.assigned_priorities: dict[int, int] = {}
        # Pods the scheduler assumed whose binding has not been made yet.
        self.assumed: set[str] = set()
        # What consumers derive from this state and keep current through its events (the scheduler's topology
        # index, ...), by name: kept with the state, as an informer keeps its indexers (plugins look theirs
        # up several times per pod; a weak-keyed map costs a weak reference per look-up).
        self.indexes: dict[str, Any] = {}
        # Keys of pods (not terminal) naming a node that does not exist, by node name: a superset, so that
        # adding a node looks at the pods only when some may be waiting for it.
        self._awaiting_node: dict[str, set[str]] = {}

    # ------------------------------------------------------------ building

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> ClusterState:
        with gc_paused():
            return cls._from_snapshot(snap)

    @classmethod
    def _from_snapshot(cls, snap: Snapshot) -> ClusterState:
        state = cls()
        for n in snap.nodes:
            state.add(n)
        for ns in snap.namespaces:
            state.add(ns)
        for pc in snap.priority_classes:
            state.add(pc)
        for pdb in snap.pdbs:
            state.add(pdb)
        for pvc in snap.pvcs:
            state.add(pvc)
        for w in snap.workloads:
            state.add(w)
        state._add_pods_in_bulk(snap.pods)
        for o in snap.others:
            if o.kind not in ("Service", "ReplicaSet", "ReplicationController", "StatefulSet"):
                key = f"{o.kind}/{o.meta.key if o.meta else id(o)}"
                state.others[key] = o
        return state

    def _add_pods_in_bulk(self, pods: Iterable[Pod]) -> None:
        """`add` of every pod, for a state nobody listens to yet (building from a snapshot): the same stores,
        indexes and counters, with each node's table row written once at the end rather than per pod."""
        if self._listeners or self._index_listeners:
            for p in pods:
                self.add(p)
            return
        store, infos = self.pods, self.node_info_by_name
        touched: dict[int, NodeInfo] = {}
        for p in pods:
            key = p.key
            if key in store:  # a second pod of that name replaces the first: the general path
                self._flush_rows(touched)
                touched = {}
                self.add(p)
                continue
            store[key] = p
            self.revision += 1
            if p.node_name and not p.is_terminal:
                info = infos.get(p.node_name)
                if info is not None:
                    info.add_pod(p)
                    touched[info.index] = info
                    aff = p.affinity
                    if aff.has_pod_affinity or aff.has_pod_anti_affinity:
                        self.assigned_with_affinity[key] = p
                    if aff.pod_anti_affinity_required:
                        self.assigned_with_required_anti_affinity[key] = p
                    self._count_priority(p, +1)
                    self.pod_generation += 1
        self._flush_rows(touched)

    def _flush_rows(self, touched: dict[int, NodeInfo]) -> None:
        """Table rows of nodes whose pods were added by `_add_pods_in_bulk` (and not yet written) from their
        NodeInfo, which holds the same sums NodeTable.add_pod would have made pod by pod."""
        t = self.table
        for row, info in touched.items():
            for name in info.requested:
                if name not in t.column:
                    t.ensure_resource(name)
            t.requested[row, :] = 0
            for name, v in info.requested.items():
                t.requested[row, t.column[name]] = v
            t.non_zero[row, 0] = info.non_zero_cpu
            t.non_zero[row, 1] = info.non_zero_mem
            t.pod_count[row] = len(info.pods)
            t._changed(row)

    # ------------------------------------------------------------ listeners

    def subscribe(self, listener: Listener, *, index: bool = False, kinds: Iterable[str] | None = None,
                  types: Iterable[EventType] | None = None) -> None:
        """Call listener(event) for every change, or only for those of `kinds` / `types` — as client-go
        registers a handler with one kind's informer, and a FilteringResourceEventHandler skips the rest.

        Index listeners (caches that others read) hear an event first, synchronously; the others after every
        index, in the order of the events (a listener's own changes are queued behind the current event)."""
        entry = (listener, frozenset(kinds) if kinds is not None else None,
                 frozenset(types) if types is not None else None)
        (self._index_listeners if index else self._listeners).append(entry)
        self._routes.clear()

    def unsubscribe(self, listener: Listener) -> None:
        for group in (self._index_listeners, self._listeners):
            group[:] = [e for e in group if e[0] != listener]
        self._routes.clear()

    def _route(self, kind: str, type: EventType) -> tuple[tuple[Listener, ...], tuple[Listener, ...]]:
        def hears(group: list[tuple[Listener, frozenset[str] | None, frozenset[EventType] | None]]
                  ) -> tuple[Listener, ...]:
            return tuple(fn for fn, kinds, types in group
                         if (kinds is None or kind in kinds) and (types is None or type in types))

        route = self._routes[(kind, type)] = (hears(self._index_listeners), hears(self._listeners))
        return route

    def _announce(self, ev: Event) -> None:
        self.revision += 1
        route = self._routes.get((ev.kind, ev.type))
        if route is None:
            route = self._route(ev.kind, ev.type)
        for fn in route[0]:
            fn(ev)
        if not self._listeners:
            return
        if self._dispatching:
            self._pending.append(ev)  # heard once the event being dispatched has reached everyone
            return
        self._dispatching = True
        try:
            for fn in route[1]:
                fn(ev)
            while self._pending:
                cur = self._pending.popleft()
                listeners = self._routes.get((cur.kind, cur.type))
                if listeners is None:
                    listeners = self._route(cur.kind, cur.type)
                for fn in listeners[1]:
                    fn(cur)
        finally:
            self._dispatching = False
            self._pending.clear()

    # ------------------------------------------------------------ the one path of change

    def apply(self, type: EventType, obj: Any, *, cause: Cause = Cause.USER, node: str = "") -> Event:
        """Apply one change and announce it: ADDED / UPDATED / DELETED an object; ASSUMED (the scheduler's
        cache) or BOUND (through the API) a pod to `node` — the pod given is the pod before the binding —;
        UNBOUND (forget an assumed pod).

        Returns the event; for BOUND and UNBOUND its `obj` is the new pod object.
        """
        kind = obj.kind
        old: Any = None
        if kind == "Pod":
            old = self.pods.get(obj.key)
            if type is EventType.ASSUMED or type is EventType.BOUND:
                cur = old if old is not None else obj
                if type is EventType.ASSUMED:
                    self.assumed.add(cur.key)
                else:
                    self.assumed.discard(cur.key)
                obj = cur if cur.node_name == node else cur.bound_to(node)
                if obj is not cur or old is None:
                    self._replace_pod(old, obj)
            elif type is EventType.UNBOUND:
                cur = old if old is not None else obj
                self.assumed.discard(cur.key)
                node = cur.node_name
                obj = cur.bound_to("")
                self._replace_pod(old, obj)
            elif type is EventType.DELETED:
                if old is None:
                    return Event(type, kind, obj, None, cause, node)
                self.assumed.discard(old.key)
                self._replace_pod(old, None)
                obj = old
            else:
                self._replace_pod(old, obj)
        elif kind == "Node":
            old = self.nodes.get(obj.name)
            if type is EventType.DELETED:
                if old is None:
                    return Event(type, kind, obj, None, cause, node)
                self._delete_node(old)
                obj = old
            else:
                self._set_node(obj)
        else:
            store, key = self._store_of(obj)
            old = store.get(key)
            if type is EventType.DELETED:
                if old is None:
                    return Event(type, kind, obj, None, cause, node)
                del store[key]
                obj = old
            else:
                store[key] = obj
        ev = Event(type, kind, obj, old, cause, node)
        self._announce(ev)
        return ev

    def _store_of(self, obj: Any) -> tuple[dict[str, Any], str]:
        kind = obj.kind
        if kind == "Namespace":
            return self.namespaces, obj.meta.name
        if kind == "PriorityClass":
            return self.priority_classes, obj.meta.name
        if kind == "PodDisruptionBudget":
            return self.pdbs, obj.meta.key
        if kind == "PersistentVolumeClaim":
            return self.pvcs, obj.meta.key
        if isinstance(obj, Workload):
            return self.workloads, f"{kind}/{obj.meta.key}"
        return self.others, f"{kind}/{obj.meta.key if obj.meta else id(obj)}"

    def _set_node(self, node: Node) -> None:
        info = self.node_info_by_name.get(node.name)
        if info is None:
            row = self.table.add_row()
            info = NodeInfo(node, row)
            self.node_infos.append(info)
            self.node_info_by_name[node.name] = info
            self._new_node_epoch()
            self._adopt_waiting_pods(info)
        info.node = node
        info.allocatable = node_allocatable_units(node.allocatable)
        self.table.set_allocatable(info.index, info.allocatable)
        self.nodes[node.name] = node
        info.generation += 1
        self.node_generation += 1
        if len(self.node_change_log) >= 1 << 16:
            self._new_node_epoch()
        else:
            self.node_change_log.append(info.index)
        self._order = None
        self._image_nodes = None

    def _adopt_waiting_pods(self, info: NodeInfo) -> None:
        """Pods that named this node before it existed now count on it (in the store's order). The store is
        walked only when some pod may be waiting for the node."""
        name = info.node.name
        if not self._awaiting_node.pop(name, None):
            return
        for p in self.pods.values():
            if p.node_name == name and not p.is_terminal:
                self._account(info, p, +1)

    def _await_node(self, pod: Pod) -> None:
        """The pod names a node that does not exist (yet, or any more)."""
        self._awaiting_node.setdefault(pod.node_name, set()).add(pod.key)

    def _stop_awaiting(self, pod: Pod) -> None:
        waiting = self._awaiting_node.get(pod.node_name)
        if waiting is not None:
            waiting.discard(pod.key)
            if not waiting:
                del self._awaiting_node[pod.node_name]

    def _delete_node(self, node: Node) -> None:
        """The node's row goes and the rows after it move up; the other nodes keep their objects and pods (as
        upstream's cache.RemoveNode touches only that node). The node's pods stay in the store, naming it."""
        del self.nodes[node.name]
        info = self.node_info_by_name.pop(node.name)
        for p in info.pods.values():
            self.assigned_with_affinity.pop(p.key, None)
            self.assigned_with_required_anti_affinity.pop(p.key, None)
            self._count_priority(p, -1)
            self._await_node(p)
        row = info.index
        del self.node_infos[row]
        for i in range(row, len(self.node_infos)):
            moved = self.node_infos[i]
            moved.index = i
            moved.generation += 1
        self.table.remove_row(row)
        self.node_generation += 1
        self.pod_generation += 1
        self._new_node_epoch()
        self._order = None
        self._image_nodes = None

    def _new_node_epoch(self) -> None:
        self.node_change_log = []
        self.node_change_epoch += 1

    def _account(self, info: NodeInfo, pod: Pod, sign: int) -> None:
        if sign > 0:
            info.add_pod(pod)
            self.table.add_pod(info.index, pod, +1)
            aff = pod.affinity
            if aff.has_pod_affinity or aff.has_pod_anti_affinity:
                self.assigned_with_affinity[pod.key] = pod
            if aff.pod_anti_affinity_required:
                self.assigned_with_required_anti_affinity[pod.key] = pod
            self._count_priority(pod, +1)
        else:
            if info.remove_pod(pod):
                self.table.add_pod(info.index, pod, -1)
                self._count_priority(pod, -1)
            self.assigned_with_affinity.pop(pod.key, None)
            self.assigned_with_required_anti_affinity.pop(pod.key, None)
        self.pod_generation += 1

    def _count_priority(self, pod: Pod, sign: int) -> None:
        counts = self.assigned_priorities
        prio = pod.priority or 0
        n = counts.get(prio, 0) + sign
        if n:
            counts[prio] = n
        else:
            del counts[prio]

    def _replace_pod(self, old: Pod | None, new: Pod | None) -> None:
        """The pod store and the node accounting move from `old` to `new` (either may be None)."""
        if (old is not None and new is not None and old.node_name == new.node_name and old.node_name
                and old.is_terminal == new.is_terminal and old.raw.get("spec") is new.raw.get("spec")):
            # The same spec on the same node (a status or deletion-mark change): what the pod counts on its
            # node is unchanged, only the object it is counted as.
            self._swap_pod(old, new)
            return
        if old is not None:
            if old.node_name and not old.is_terminal:
                info = self.node_info_by_name.get(old.node_name)
                if info is not None:
                    self._account(info, old, -1)
                else:
                    self._stop_awaiting(old)
            if new is None:
                del self.pods[old.key]
        if new is not None:
            self.pods[new.key] = new
            if new.node_name and not new.is_terminal:
                info = self.node_info_by_name.get(new.node_name)
                if info is not None:
                    self._account(info, new, +1)
                else:
                    self._await_node(new)

    def _swap_pod(self, old: Pod, new: Pod) -> None:
        key = new.key
        self.pods[key] = new
        if not new.is_terminal:
            info = self.node_info_by_name.get(new.node_name)
            if info is not None and key in info.pods:
                info.pods[key] = new
                for index in (info.pods_with_affinity, info.pods_with_required_anti_affinity,
                              self.assigned_with_affinity, self.assigned_with_required_anti_affinity):
                    if key in index:
                        index[key] = new
                info.generation += 1
        self.pod_generation += 1

    # ------------------------------------------------------------ convenience wrappers

    def add(self, obj: Any, cause: Cause = Cause.USER) -> Event:
        return self.apply(EventType.ADDED, obj, cause=cause)

    def update(self, obj: Any, cause: Cause = Cause.USER) -> Event:
        return self.apply(EventType.UPDATED, obj, cause=cause)

    def delete(self, obj: Any, cause: Cause = Cause.USER) -> Event:
        return self.apply(EventType.DELETED, obj, cause=cause)

    def assume(self, pod: Pod, node_name: str, cause: Cause = Cause.SCHEDULER) -> Pod:
        """The scheduler's assumption: the pod counts on the node from now on; returns the assumed pod."""
        ev = self.apply(EventType.ASSUMED, pod, cause=cause, node=node_name)
        return ev.obj  # type: ignore[no-any-return]

    def bind(self, pod: Pod, node_name: str, cause: Cause = Cause.SCHEDULER) -> Pod:
        """A binding made through the API; returns the bound pod object."""
        ev = self.apply(EventType.BOUND, pod, cause=cause, node=node_name)
        return ev.obj  # type: ignore[no-any-return]

    def unbind(self, pod: Pod, cause: Cause = Cause.SCHEDULER) -> Pod:
        ev = self.apply(EventType.UNBOUND, pod, cause=cause)
        return ev.obj  # type: ignore[no-any-return]

    # ------------------------------------------------------------ reading

    @property
    def num_nodes(self) -> int:
        return len(self.node_infos)

    def node_order(self) -> np.ndarray:
        """Row indices in the order the scheduler walks nodes: upstream's NodeTree, zones round-robin."""
        if self._order is None:
            zones: dict[str, list[int]] = {}
            for info in self.node_infos:
                zones.setdefault(zone_key(info.node), []).append(info.index)
            lists = list(zones.values())
            order: list[int] = []
            depth = 0
            while len(order) < len(self.node_infos):
                for rows in lists:
                    if depth < len(rows):
                        order.append(rows[depth])
                depth += 1
            self._order = np.array(order, dtype=np.int64)
        return self._order

    def image_num_nodes(self) -> dict[str, int]:
        """For each image name, on how many nodes it is present (ImageStateSummary.NumNodes)."""
        if self._image_nodes is None:
            counts: dict[str, int] = {}
            for info in self.node_infos:
                seen: set[str] = set()
                for image in info.node.images:
                    for name in image.names:
                        if name not in seen:
                            seen.add(name)
                            counts[name] = counts.get(name, 0) + 1
            self._image_nodes = counts
        return self._image_nodes

    def pending_pods(self) -> list[Pod]:
        """Pods with no node, not terminal and not being deleted, in snapshot order."""
        return [p for p in self.pods.values() if not p.node_name and not p.is_terminal and not p.is_terminating]

    def pods_on(self, node_name: str) -> Iterable[Pod]:
        info = self.node_info_by_name.get(node_name)
        return info.pods.values() if info is not None else ()

    def namespace_labels(self, name: str) -> dict[str, str]:
        ns = self.namespaces.get(name)
        return ns.labels if ns is not None else {}

    def priority_of(self, pod: Pod) -> int:
        return pod.effective_priority

"""ClusterState: every object, its indexes, and the node columns — changed through one path of events.

The scheduler's cache, the descheduler's informers, the kubelets of the simulator and a live watch all
read this one state; every change (add/update/delete an object, bind, evict) goes through `apply`, so
listeners (the scheduling queue, recorders) see every change exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
from kubesched.api.snapshot import Snapshot

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


Listener = Callable[[str, Any, Any], None]


class ClusterState:
    """Every object and its indexes. Change it only through `apply` (or the named helpers that call it)."""

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
        # Bumped on any change to pods assigned to nodes.
        self.pod_generation = 0
        self._order: np.ndarray | None = None
        self._image_nodes: dict[str, int] | None = None
        self.listeners: list[Listener] = []
        self.assigned_with_affinity: dict[str, Pod] = {}
        self.assigned_with_required_anti_affinity: dict[str, Pod] = {}
        # Pods the scheduler assumed on a node (they count there) but has not bound yet: pods waiting at Permit.
        self.assumed: set[str] = set()

    # ------------------------------------------------------------ building

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> ClusterState:
        state = cls()
        for n in snap.nodes:
            state.apply("add", n)
        for ns in snap.namespaces:
            state.apply("add", ns)
        for pc in snap.priority_classes:
            state.apply("add", pc)
        for pdb in snap.pdbs:
            state.apply("add", pdb)
        for pvc in snap.pvcs:
            state.apply("add", pvc)
        for w in snap.workloads:
            state.apply("add", w)
        for p in snap.pods:
            state.apply("add", p)
        for o in snap.others:
            if o.kind not in ("Service", "ReplicaSet", "ReplicationController", "StatefulSet"):
                key = f"{o.kind}/{o.meta.key if o.meta else id(o)}"
                state.others[key] = o
        return state

    # ------------------------------------------------------------ the one path of change

    def apply(self, action: str, obj: Any, extra: Any = None) -> None:
        """Apply one event: `add`, `update`, `delete` an object; `bind` a pod to node `extra`; `evict` a pod;
        `assume` a pod on node `extra` (it counts there; a later `bind` to that node confirms it, `unbind`
        forgets it).

        Listeners are called after the change with (action, object, extra).
        """
        kind = getattr(obj, "kind", None)
        if action == "bind":
            self._bind(obj, extra)
        elif action == "assume":
            self._bind(obj, extra)
            self.assumed.add(obj.key)
        elif action == "unbind":
            self._unbind(obj)
        elif action == "evict":
            self._delete_pod(obj)
        elif kind == "Pod":
            if action == "add":
                self._add_pod(obj)
            elif action == "update":
                old = self.pods.get(obj.key)
                if old is not None:
                    self._delete_pod(old)
                self._add_pod(obj)
            elif action == "delete":
                self._delete_pod(obj)
        elif kind == "Node":
            if action in ("add", "update"):
                self._set_node(obj)
            elif action == "delete":
                self._delete_node(obj)
        else:
            store, key = self._store_of(obj)
            if action in ("add", "update"):
                store[key] = obj
            elif action == "delete":
                store.pop(key, None)
        for listener in self.listeners:
            listener(action, obj, extra)

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
        return self.others, f"{kind}/{obj.meta.key}"

    def _set_node(self, node: Node) -> None:
        info = self.node_info_by_name.get(node.name)
        if info is None:
            row = self.table.add_row()
            info = NodeInfo(node, row)
            self.node_infos.append(info)
            self.node_info_by_name[node.name] = info
            # Pods that named this node before it existed now count on it.
            for p in self.pods.values():
                if p.node_name == node.name and not p.is_terminal:
                    self._account(info, p, +1)
        info.node = node
        info.allocatable = node_allocatable_units(node.allocatable)
        self.table.set_allocatable(info.index, info.allocatable)
        self.nodes[node.name] = node
        info.generation += 1
        self.node_generation += 1
        self._order = None
        self._image_nodes = None

    def _delete_node(self, node: Node) -> None:
        if node.name not in self.nodes:
            return
        # Rows are positional; rebuild the table without the node (node removal is rare).
        del self.nodes[node.name]
        keep = [i.node for i in self.node_infos if i.node.name != node.name]
        self.node_infos = []
        self.node_info_by_name = {}
        self.table = NodeTable()
        self.assigned_with_affinity = {}
        self.assigned_with_required_anti_affinity = {}
        for n in keep:
            row = self.table.add_row()
            info = NodeInfo(n, row)
            info.allocatable = node_allocatable_units(n.allocatable)
            self.table.set_allocatable(row, info.allocatable)
            self.node_infos.append(info)
            self.node_info_by_name[n.name] = info
        for p in self.pods.values():
            if p.node_name and not p.is_terminal and p.node_name in self.node_info_by_name:
                self._account(self.node_info_by_name[p.node_name], p, +1)
        self.node_generation += 1
        self.pod_generation += 1
        self._order = None
        self._image_nodes = None

    def _account(self, info: NodeInfo, pod: Pod, sign: int) -> None:
        if sign > 0:
            info.add_pod(pod)
            self.table.add_pod(info.index, pod, +1)
            aff = pod.affinity
            if aff.has_pod_affinity or aff.has_pod_anti_affinity:
                self.assigned_with_affinity[pod.key] = pod
            if aff.pod_anti_affinity_required:
                self.assigned_with_required_anti_affinity[pod.key] = pod
        else:
            if info.remove_pod(pod):
                self.table.add_pod(info.index, pod, -1)
            self.assigned_with_affinity.pop(pod.key, None)
            self.assigned_with_required_anti_affinity.pop(pod.key, None)
        self.pod_generation += 1

    def _add_pod(self, pod: Pod) -> None:
        if pod.key in self.pods:
            self._delete_pod(self.pods[pod.key])
        self.pods[pod.key] = pod
        if pod.node_name and not pod.is_terminal:
            info = self.node_info_by_name.get(pod.node_name)
            if info is not None:
                self._account(info, pod, +1)

    def _delete_pod(self, pod: Pod) -> None:
        cur = self.pods.pop(pod.key, None)
        if cur is None:
            return
        if self.assumed:
            self.assumed.discard(cur.key)
        if cur.node_name:
            info = self.node_info_by_name.get(cur.node_name)
            if info is not None:
                self._account(info, cur, -1)

    def _bind(self, pod: Pod, node_name: str) -> None:
        cur = self.pods.get(pod.key, pod)
        if self.assumed and cur.key in self.assumed:
            self.assumed.discard(cur.key)
            if cur.node_name == node_name:
                return  # binding an assumed pod: it counts on the node already
        if cur.node_name:
            info = self.node_info_by_name.get(cur.node_name)
            if info is not None:
                self._account(info, cur, -1)
        cur.node_name = node_name
        spec = cur.raw.setdefault("spec", {})
        if isinstance(spec, dict):
            spec["nodeName"] = node_name
        self.pods[cur.key] = cur
        info = self.node_info_by_name.get(node_name)
        if info is not None and not cur.is_terminal:
            self._account(info, cur, +1)

    def _unbind(self, pod: Pod) -> None:
        """Forget an assumed pod: it no longer counts on its node and has no node name."""
        cur = self.pods.get(pod.key, pod)
        self.assumed.discard(cur.key)
        if cur.node_name:
            info = self.node_info_by_name.get(cur.node_name)
            if info is not None:
                self._account(info, cur, -1)
        cur.node_name = ""
        spec = cur.raw.get("spec")
        if isinstance(spec, dict):
            spec.pop("nodeName", None)

    # ------------------------------------------------------------ convenience wrappers

    def add(self, obj: Any) -> None:
        self.apply("add", obj)

    def update(self, obj: Any) -> None:
        self.apply("update", obj)

    def delete(self, obj: Any) -> None:
        self.apply("delete", obj)

    def bind(self, pod: Pod, node_name: str) -> None:
        self.apply("bind", pod, node_name)

    def evict(self, pod: Pod) -> None:
        self.apply("evict", pod)

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

"""NamespacedPods: the pods counted on nodes, grouped by namespace, kept current from the cluster's events.

Upstream's RemovePodsViolatingTopologySpreadConstraint lists the pods on the cycle's nodes and groups them by
namespace every cycle (kubernetes-sigs/descheduler, pkg/descheduler/pod/pods.go: ListPodsOnNodes,
GroupByNamespace; pkg/framework/plugins/removepodsviolatingtopologyspreadconstraint/topologyspreadconstraint.go),
then looks in each namespace for the pods carrying topology spread constraints and for the pods each
constraint's selector matches. At 150,000 pods that walk is most of the strategy's cycle, so one
`NamespacedPods` per ClusterState keeps, between cycles:

* per namespace, the pods the scheduler's NodeInfo counts (a pod counts when
  `cluster.node_info_by_name[pod.node_name].pods[pod.key] is pod`: assigned to a node that exists, and not
  terminal), and among them the *carriers* (pods with topologySpreadConstraints);
* per namespace and label key, once some reader asked for that key there, the pods by that label's value;
* the namespaces holding at least one carrier.

An index listener (Pod and Node events) keeps it current, so a cycle's cost grows with the change, not the
cluster: a pod event moves one pod; a node added brings the pods that named it before it existed (the cluster
state adopts them without Pod events: they are the pods the new node holds); a node deleted takes its pods
away. The order of the dictionaries
is not the listing order: readers that decide anything by order sort what they use.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from kubesched.api.objects import Pod
from kubesched.api.selectors import LabelSelector
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState


class NamespacePods:
    """One namespace's counted pods: all of them, the carriers, and the label values asked for."""

    __slots__ = ("name", "pods", "carriers", "by_label")

    def __init__(self, name: str) -> None:
        self.name = name
        self.pods: dict[str, Pod] = {}  # key -> pod
        self.carriers: dict[str, Pod] = {}  # the pods with topologySpreadConstraints
        self.by_label: dict[str, dict[str, dict[str, Pod]]] = {}  # label key -> value -> key -> pod

    def add(self, key: str, pod: Pod) -> None:
        self.pods[key] = pod
        if pod.topology_spread_constraints:
            self.carriers[key] = pod
        if self.by_label:
            labels = pod.meta.labels
            for label, by_value in self.by_label.items():
                v = labels.get(label)
                if v is not None:
                    _put(by_value, v, key, pod)

    def remove(self, key: str, pod: Pod) -> None:
        del self.pods[key]
        self.carriers.pop(key, None)
        if self.by_label:
            labels = pod.meta.labels
            for label, by_value in self.by_label.items():
                v = labels.get(label)
                if v is not None:
                    keys = by_value[v]
                    del keys[key]
                    if not keys:
                        del by_value[v]

    def with_label(self, label: str) -> dict[str, dict[str, Pod]]:
        """The pods by their value of `label` (pods without it left out); kept from now on."""
        by_value = self.by_label.get(label)
        if by_value is None:
            by_value = {}
            for key, pod in self.pods.items():
                v = pod.meta.labels.get(label)
                if v is not None:
                    _put(by_value, v, key, pod)
            self.by_label[label] = by_value
        return by_value

    def candidates(self, selector: LabelSelector) -> tuple[Iterable[Pod], bool]:
        """A superset of the counted pods the selector matches, and whether it is exact (every pod in it
        matches). The smallest set an `In` requirement allows, or every pod of the namespace."""
        if selector.nothing:
            return (), True
        best: list[dict[str, Pod]] | None = None
        best_size = len(self.pods)
        for r in selector.requirements:
            if r.operator == "In":
                by_value = self.with_label(r.key)
                sets = [by_value[v] for v in set(r.values) if v in by_value]
                size = sum(len(s) for s in sets)
                if best is None or size < best_size:
                    best, best_size = sets, size
        if best is None:
            return self.pods.values(), not selector.requirements
        exact = len(selector.requirements) == 1
        if len(best) == 1:
            return best[0].values(), exact
        # Disjoint: a pod has one value of the label.
        return (p for s in best for p in s.values()), exact


class NamespacedPods:
    """The cluster's counted pods by namespace (see the module docstring), current at every moment."""

    def __init__(self, cluster: ClusterState) -> None:
        self._cluster = weakref.ref(cluster)
        self.namespaces: dict[str, NamespacePods] = {}
        # The namespaces with at least one carrier.
        self.carrier_namespaces: dict[str, NamespacePods] = {}
        self.counted: dict[str, Pod] = {}  # key -> the pod object counted
        self.by_node: dict[str, dict[str, None]] = {}  # node name -> keys of the pods counted there
        self._build(cluster)

    def _build(self, cluster: ClusterState) -> None:
        """`_add` of every counted pod, a node at a time."""
        namespaces, counted = self.namespaces, self.counted
        for info in cluster.node_infos:
            pods = info.pods
            if not pods:
                continue
            self.by_node[info.node.name] = dict.fromkeys(pods)
            counted.update(pods)
            for key, pod in pods.items():
                name = pod.meta.namespace
                ns = namespaces.get(name)
                if ns is None:
                    ns = namespaces[name] = NamespacePods(name)
                ns.pods[key] = pod
                if pod.topology_spread_constraints:
                    ns.carriers[key] = pod
        for name, ns in namespaces.items():
            if ns.carriers:
                self.carrier_namespaces[name] = ns

    # ------------------------------------------------------------ reading

    def namespace(self, name: str) -> NamespacePods | None:
        return self.namespaces.get(name)

    def carriers(self) -> Iterator[Pod]:
        for ns in self.carrier_namespaces.values():
            yield from ns.carriers.values()

    def snapshot(self) -> dict[str, Any]:
        """What the index holds, as plain values (pod keys and object ids): for comparing two indexes."""
        return {
            "namespaces": {name: {
                "pods": {k: id(p) for k, p in ns.pods.items()},
                "carriers": sorted(ns.carriers),
                "by_label": {label: {v: sorted(keys) for v, keys in by_value.items()}
                             for label, by_value in ns.by_label.items()},
            } for name, ns in self.namespaces.items()},
            "carrier_namespaces": sorted(self.carrier_namespaces),
            "by_node": {n: sorted(keys) for n, keys in self.by_node.items()},
        }

    # ------------------------------------------------------------ events

    def on_event(self, ev: Event) -> None:
        cluster = self._cluster()
        if cluster is None:
            return
        if ev.kind == "Pod":
            if ev.type is EventType.BOUND and ev.old is ev.obj:
                return  # a binding confirming the assumption: the state did not change
            self._reconcile(cluster, ev.obj.key)
        elif ev.type is EventType.DELETED:
            # The node's pods stay in the store, naming it: they count nowhere until it comes back.
            for key in list(self.by_node.get(ev.obj.name, ())):
                self._reconcile(cluster, key)
        elif ev.old is None:
            # A new node (ADDED, or an UPDATED the state took as an add) adopted the pods naming it: the
            # only ones it holds.
            info = cluster.node_info_by_name.get(ev.obj.name)
            if info is not None:
                for key in list(info.pods):
                    self._reconcile(cluster, key)

    def _reconcile(self, cluster: ClusterState, key: str) -> None:
        """Make the index agree with the cluster state about one pod."""
        cur = cluster.pods.get(key)
        counted: Pod | None = None
        if cur is not None and cur.node_name:
            info = cluster.node_info_by_name.get(cur.node_name)
            if info is not None and info.pods.get(key) is cur:
                counted = cur
        prev = self.counted.get(key)
        if prev is counted:
            return
        if prev is not None and counted is not None and prev.node_name == counted.node_name \
                and (prev.meta.labels is counted.meta.labels or prev.meta.labels == counted.meta.labels) \
                and bool(prev.topology_spread_constraints) == bool(counted.topology_spread_constraints):
            self._swap(key, counted)  # a status or deletion-mark change: the same place in every dictionary
            return
        if prev is not None:
            self._remove(key, prev)
        if counted is not None:
            self._add(key, counted)

    def _add(self, key: str, pod: Pod) -> None:
        self.counted[key] = pod
        node = pod.node_name
        keys = self.by_node.get(node)
        if keys is None:
            self.by_node[node] = {key: None}
        else:
            keys[key] = None
        name = pod.meta.namespace
        ns = self.namespaces.get(name)
        if ns is None:
            ns = self.namespaces[name] = NamespacePods(name)
        ns.add(key, pod)
        if pod.topology_spread_constraints and name not in self.carrier_namespaces:
            self.carrier_namespaces[name] = ns

    def _remove(self, key: str, pod: Pod) -> None:
        del self.counted[key]
        keys = self.by_node[pod.node_name]
        del keys[key]
        if not keys:
            del self.by_node[pod.node_name]
        name = pod.meta.namespace
        ns = self.namespaces[name]
        ns.remove(key, pod)
        if not ns.carriers:
            self.carrier_namespaces.pop(name, None)
        if not ns.pods:
            del self.namespaces[name]

    def _swap(self, key: str, pod: Pod) -> None:
        self.counted[key] = pod
        ns = self.namespaces[pod.meta.namespace]
        ns.pods[key] = pod
        if key in ns.carriers:
            ns.carriers[key] = pod
        labels = pod.meta.labels
        for label, by_value in ns.by_label.items():
            v = labels.get(label)
            if v is not None:
                by_value[v][key] = pod


_INDEXES: weakref.WeakKeyDictionary[ClusterState, NamespacedPods] = weakref.WeakKeyDictionary()


def namespaced_pods_for(cluster: ClusterState) -> NamespacedPods:
    """The cluster's index, built (and subscribed to its Pod and Node events) on first use."""
    idx = _INDEXES.get(cluster)
    if idx is None:
        idx = NamespacedPods(cluster)
        cluster.subscribe(idx.on_event, index=True, kinds=("Pod", "Node"))
        _INDEXES[cluster] = idx
    return idx


def _put(by_value: dict[str, dict[str, Pod]], value: str, key: str, pod: Pod) -> None:
    keys = by_value.get(value)
    if keys is None:
        by_value[value] = {key: pod}
    else:
        keys[key] = pod

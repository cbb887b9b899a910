"""RemovePodsViolatingTopologySpreadConstraint from the NamespacedPods index agrees with the walk from scratch.

- The index (the pods counted on nodes, by namespace, with their carriers and label values) equals one rebuilt
  from the cluster state after random pod, node and binding changes.
- Over random small clusters (several namespaces, selectors of every kind, node inclusion policies, limits,
  node lists in any order) and changes between cycles, the strategy reading the index evicts exactly the pods,
  in exactly the order, that the strategy walking every node's pods (the listing upstream makes) evicts.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kubesched.api.objects import Node, Pod, parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.descheduler.framework import EvictionLimitError, EvictOptions, Handle
from kubesched.descheduler.namespaced_pods import NamespacedPods, namespaced_pods_for
from kubesched.descheduler.plugins.remove_pods_violating_topology_spread_constraint import (
    RemovePodsViolatingTopologySpreadConstraint,
    SpreadConstraint,
    constraints_from_scratch,
)

NOW = datetime(2024, 1, 1, tzinfo=UTC)
ZONE, RACK, HOST = "topology.kubernetes.io/zone", "rack", "kubernetes.io/hostname"
NAMESPACES = ("ns-a", "ns-b", "ns-c")


class FromScratch(RemovePodsViolatingTopologySpreadConstraint):
    """The reference: every cycle lists the nodes' pods and groups them by namespace (no index)."""

    def _listing(self, nodes: list[Node], position: dict[str, int], allowed: frozenset[str],
                 ok: Callable[[Pod], bool]) -> tuple[Iterator[tuple[SpreadConstraint, list[Pod]]], bool]:
        return constraints_from_scratch(self.handle.cluster, nodes, allowed, ok), False


class RecordingEvictor:
    """Filter: an owner and no `protected` label; PreEvictionFilter: not named *-7; optional node/total limits."""

    def __init__(self) -> None:
        self.reset(None, None)

    def reset(self, max_per_node: int | None, max_total: int | None) -> None:
        self.max_per_node = max_per_node
        self.max_total = max_total
        self.evicted: list[str] = []
        self.per_node: dict[str, int] = {}

    def filter(self, pod: Pod) -> bool:
        return bool(pod.meta.owner_references) and "protected" not in pod.labels

    def pre_eviction_filter(self, pod: Pod) -> bool:
        return not pod.name.endswith("-7")

    def sort(self, pods: list[Pod]) -> list[Pod]:
        return pods

    has_sorters = False
    filters_read_only_the_pod = True  # `filter` reads the pod's own fields

    def evict(self, pod: Pod, opts: EvictOptions) -> bool:
        if self.max_total is not None and len(self.evicted) >= self.max_total:
            raise EvictionLimitError("total", "total limit")
        if self.max_per_node is not None and self.per_node.get(pod.node_name, 0) >= self.max_per_node:
            raise EvictionLimitError("node", "node limit")
        self.per_node[pod.node_name] = self.per_node.get(pod.node_name, 0) + 1
        self.evicted.append(pod.key)
        return True


# ---------------------------------------------------------------- random objects


def node_doc(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {HOST: name}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice("abc")
    if rng.random() < 0.5:
        labels[RACK] = rng.choice(("r1", "r2"))
    labels["os"] = "linux" if rng.random() < 0.8 else "windows"
    taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.2 else []
    cpu = rng.choice(("1", "2", "4"))
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "30"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


SELECTORS: list[dict[str, Any] | None] = [
    {"matchLabels": {"app": "x"}}, {"matchLabels": {"app": "y"}}, {"matchLabels": {"app": "x", "tier": "web"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["z"]}]},
    {}, None,
]


def constraint(rng: random.Random) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": rng.choice((1, 1, 2)), "topologyKey": rng.choice((ZONE, ZONE, RACK, HOST)),
                         "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"))}
    sel = rng.choice(SELECTORS)
    if sel is not None:
        c["labelSelector"] = copy.deepcopy(sel)
    if rng.random() < 0.2:
        c["matchLabelKeys"] = ["tier"]
    if rng.random() < 0.3:
        c["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.3:
        c["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    return c


def pod_doc(rng: random.Random, ns: str, name: str, node_names: list[str]) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if rng.random() < 0.9:
        labels["app"] = rng.choice("xxyz")
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(("web", "db"))
    if rng.random() < 0.05:
        labels["protected"] = "yes"
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if rng.random() < 0.9:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u",
                                    "controller": True}]
    if rng.random() < 0.06:
        meta["deletionTimestamp"] = "2023-12-31T23:00:00Z"
    roll = rng.random()
    node_name = rng.choice(node_names) if roll < 0.85 else ("ghost" if roll < 0.93 else "")
    spec: dict[str, Any] = {"nodeName": node_name, "containers": [{"name": "c", "image": "i", "resources": {
        "requests": {"cpu": f"{rng.choice((100, 200, 400, 900))}m"}}}]}
    if rng.random() < 0.3:
        spec["priority"] = rng.choice((0, 100))
    if rng.random() < 0.15:
        spec["nodeSelector"] = {"os": "linux"}
    if rng.random() < 0.15:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    if rng.random() < 0.45:
        spec["topologySpreadConstraints"] = [constraint(rng) for _ in range(rng.choice((1, 1, 2)))]
    phase = "Running" if rng.random() < 0.93 else rng.choice(("Succeeded", "Failed"))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


ARGS: list[dict[str, Any]] = [
    {}, {}, {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}, {"topologyBalanceNodeFit": False},
    {"namespaces": {"include": ["ns-a", "ns-b"]}}, {"namespaces": {"exclude": ["ns-b"]}},
    {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}},
]


class World:
    """A random cluster and the changes made to it between cycles."""

    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        self.cluster = ClusterState()
        self.serial = 0
        self.node_serial = 0
        self.gone_nodes: list[str] = ["ghost"]
        for _ in range(rng.randint(3, 8)):
            self.add_node()
        for _ in range(rng.randint(10, 50)):
            self.add_pod()

    def node_names(self) -> list[str]:
        return list(self.cluster.nodes)

    def add_node(self, name: str | None = None) -> None:
        if name is None:
            self.node_serial += 1
            name = f"n{self.node_serial}"
        self.cluster.add(parse_node(node_doc(self.rng, name)))

    def add_pod(self) -> None:
        self.serial += 1
        names = self.node_names() or ["ghost"]
        self.cluster.add(parse_pod(pod_doc(self.rng, self.rng.choice(NAMESPACES), f"p-{self.serial}", names)))

    def some_pod(self) -> Pod | None:
        pods = list(self.cluster.pods.values())
        return self.rng.choice(pods) if pods else None

    def change(self) -> None:
        rng, cluster = self.rng, self.cluster
        op = rng.choice(("add_pod", "add_pod", "delete_pod", "relabel", "terminate", "finish", "status", "bind",
                         "move", "add_node", "readd_node", "delete_node", "relabel_node"))
        p = self.some_pod()
        if op == "add_pod" or p is None:
            self.add_pod()
        elif op == "delete_pod":
            cluster.delete(p)
        elif op == "relabel":
            doc = copy.deepcopy(p.raw)
            doc["metadata"]["labels"] = {"app": rng.choice("xyz"), **({"tier": "web"} if rng.random() < 0.5 else {})}
            cluster.update(parse_pod(doc))
        elif op == "terminate":
            cluster.update(p.marked_for_deletion(NOW, 30))
        elif op == "finish":
            cluster.update(p.with_status(phase="Succeeded"))
        elif op == "status":
            cluster.update(p.with_status(reason="Checked"))
        elif op == "bind":
            pending = [q for q in cluster.pods.values() if not q.node_name]
            if pending and cluster.nodes:
                cluster.bind(rng.choice(pending), rng.choice(self.node_names()))
        elif op == "move":
            # Deleted and made again elsewhere: it now comes last in its node's order.
            cluster.delete(p)
            doc = copy.deepcopy(p.raw)
            doc["spec"]["nodeName"] = rng.choice(self.node_names() or ["ghost"])
            cluster.add(parse_pod(doc))
        elif op == "add_node":
            self.add_node()
        elif op == "readd_node" and self.gone_nodes:
            # Pods naming it (deleted with it, or made for it before it existed) count on it again.
            self.add_node(self.gone_nodes.pop(rng.randrange(len(self.gone_nodes))))
        elif op == "delete_node" and cluster.nodes:
            name = rng.choice(self.node_names())
            cluster.delete(cluster.nodes[name])
            self.gone_nodes.append(name)
        elif op == "relabel_node" and cluster.nodes:
            name = rng.choice(self.node_names())
            cluster.update(parse_node(node_doc(rng, name)))

    def cycle_nodes(self) -> list[Node]:
        nodes = list(self.cluster.nodes.values())
        if self.rng.random() < 0.5:
            nodes = self.rng.sample(nodes, max(1, len(nodes) - self.rng.randint(0, 2))) if nodes else nodes
        return nodes


def index_view(idx: NamespacedPods) -> dict[str, Any]:
    return idx.snapshot()


def rebuilt_view(cluster: ClusterState, maintained: NamespacedPods) -> dict[str, Any]:
    """A fresh index of the cluster, asked for the same label keys as the maintained one."""
    fresh = NamespacedPods(cluster)
    for name, ns in maintained.namespaces.items():
        other = fresh.namespaces.get(name)
        if other is not None:
            for label in ns.by_label:
                other.with_label(label)
    return fresh.snapshot()


# ---------------------------------------------------------------- the index


@pytest.mark.parametrize("seed", range(30))
def test_index_equals_one_rebuilt_after_random_changes(seed: int) -> None:
    world = World(seed)
    idx = namespaced_pods_for(world.cluster)
    for ns in list(idx.namespaces.values()):
        ns.with_label("app")
    for _ in range(60):
        world.change()
        assert index_view(idx) == rebuilt_view(world.cluster, idx)


def test_index_follows_nodes_added_late_and_deleted() -> None:
    cluster = ClusterState()
    rng = random.Random(0)
    cluster.add(parse_node(node_doc(rng, "n0")))
    idx = namespaced_pods_for(cluster)
    doc = pod_doc(rng, "ns-a", "early", ["n1"])
    doc["status"]["phase"] = "Running"
    doc["metadata"].pop("deletionTimestamp", None)
    doc["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable":
                                                 "DoNotSchedule", "labelSelector": {}}]
    cluster.add(parse_pod(doc))
    assert idx.namespace("ns-a") is None and not idx.counted
    cluster.add(parse_node(node_doc(rng, "n1")))  # adopts the pod without a Pod event
    ns = idx.namespace("ns-a")
    assert ns is not None and list(ns.carriers) == ["ns-a/early"] and "ns-a" in idx.carrier_namespaces
    cluster.delete(cluster.nodes["n1"])
    assert idx.namespace("ns-a") is None and not idx.carrier_namespaces and not idx.by_node
    cluster.add(parse_node(node_doc(rng, "n1")))  # and again
    assert list(idx.counted) == ["ns-a/early"] and idx.by_node == {"n1": {"ns-a/early": None}}


# ---------------------------------------------------------------- the strategy


def make_plugins(cluster: ClusterState, args: dict[str, Any]) -> list[Any]:
    """The reference and the indexed strategy, each with its own evictor; they live across cycles."""
    full = dict(RemovePodsViolatingTopologySpreadConstraint.default_args() or {})
    full.update(args)
    typed = RemovePodsViolatingTopologySpreadConstraint.Args.from_raw(full)
    return [cls(typed, Handle(cluster=cluster, evictor=RecordingEvictor(), now=NOW, profile="test"))
            for cls in (FromScratch, RemovePodsViolatingTopologySpreadConstraint)]


def run_both(plugins: list[Any], nodes: list[Node], limits: tuple[int | None, int | None]) -> list[list[str]]:
    out = []
    for plugin in plugins:
        ev = plugin.handle.evictor
        ev.reset(*limits)
        assert plugin.balance(list(nodes)).ok
        out.append(list(ev.evicted))
    return out


@pytest.mark.parametrize("block", range(6))
def test_indexed_strategy_evicts_what_the_walk_from_scratch_evicts(block: int) -> None:
    cycles = evicting = limited = 0
    for seed in range(block * 12, block * 12 + 12):
        world = World(1000 + seed)
        args = world.rng.choice(ARGS)
        limits = world.rng.choice(((None, None), (None, None), (1, None), (None, 2), (2, 3)))
        plugins = make_plugins(world.cluster, args)
        for _ in range(6):
            reference, indexed = run_both(plugins, world.cycle_nodes(), limits)
            assert indexed == reference, (seed, args, limits)
            cycles += 1
            evicting += bool(reference)
            limited += bool(reference) and limits != (None, None)
            for _ in range(world.rng.randint(1, 6)):
                world.change()
    # The comparison means something: many cycles evict, some under limits (where the order decides).
    assert evicting >= cycles // 4 and limited >= 3, (cycles, evicting, limited)


def two_zones() -> ClusterState:
    rng = random.Random(3)
    cluster = ClusterState()
    for name, zone in (("n0", "a"), ("n1", "b")):
        doc = node_doc(rng, name)
        doc["metadata"]["labels"].update({ZONE: zone, "os": "linux"})
        doc["spec"]["taints"] = []
        cluster.add(parse_node(doc))
    return cluster


def carrier(ns: str, name: str, node_name: str, app: str = "x") -> Pod:
    return parse_pod({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": ns, "labels": {"app": app},
                                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                        "name": "rs", "uid": "u", "controller": True}]},
                      "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i"}],
                               "topologySpreadConstraints": [{
                                   "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                   "labelSelector": {"matchLabels": {"app": app}}}]},
                      "status": {"phase": "Running"}})


def test_a_namespaces_constraints_go_in_the_order_of_their_first_carrier_in_the_listing() -> None:
    """The constraint whose first carrier (node order, then name) comes first is balanced first, whatever
    order the carriers arrived in."""
    cluster = two_zones()
    cluster.add(carrier("ns-a", "a-y-0", "n1", "y"))  # arrives first, but lists after the others
    for i in range(3):
        cluster.add(carrier("ns-a", f"b-x-{i}", "n0", "x"))  # zones [3, 0]: one to move
    for i in range(1, 4):
        cluster.add(carrier("ns-a", f"a-y-{i}", "n0", "y"))  # zones [3, 1]: one to move
    reference, indexed = run_both(make_plugins(cluster, {}), list(cluster.nodes.values()), (None, 1))
    assert indexed == reference == ["ns-a/a-y-3"]


def test_domains_only_pods_show_go_in_the_order_of_their_first_pod() -> None:
    """Pods on nodes their node selection excludes still make their domains (after the eligible ones, as the
    listing meets them); with equal sizes that order decides which domain gives a pod."""
    cluster = ClusterState()
    rng = random.Random(5)
    for name, zone, os_name in (("n0", "a", "linux"), ("n1", "c", "windows"), ("n2", "b", "windows")):
        doc = node_doc(rng, name)
        doc["metadata"]["labels"].update({ZONE: zone, "os": os_name})
        doc["spec"]["taints"] = []
        cluster.add(parse_node(doc))
    for name, node_name in (("b-0", "n2"), ("b-1", "n2"), ("c-0", "n1"), ("c-1", "n1")):
        doc = carrier("ns-a", name, node_name).raw
        doc["spec"]["nodeSelector"] = {"os": "linux"}
        cluster.add(parse_pod(doc))
    # Domains a (eligible, empty), then c and b (2 each) as the listing meets them: b is the largest after
    # the stable sort by size, and gives one pod.
    reference, indexed = run_both(make_plugins(cluster, {}), list(cluster.nodes.values()), (None, None))
    assert indexed == reference == ["ns-a/b-1"]


def test_namespaces_whose_first_carriers_share_a_node_go_in_the_node_order() -> None:
    """Two namespaces' first carriers on the same node: the one the node holds first is balanced first, as the
    listing walk (node by node, each node's pods as the node holds them) meets it first."""
    cluster = two_zones()
    # ns-b's pods come first on n0, although ns-a sorts first by name.
    for i in range(3):
        cluster.add(carrier("ns-b", f"b-{i}", "n0"))
    for i in range(3):
        cluster.add(carrier("ns-a", f"a-{i}", "n0"))
    plugins = make_plugins(cluster, {})
    nodes = list(cluster.nodes.values())
    reference, indexed = run_both(plugins, nodes, (None, 1))
    assert indexed == reference == ["ns-b/b-2"]
    # Moved behind ns-a's pods on the node (deleted and made again), ns-b comes second.
    for i in range(3):
        cluster.delete(cluster.pods[f"ns-b/b-{i}"])
        cluster.add(carrier("ns-b", f"b-{i}", "n0"))
    reference, indexed = run_both(plugins, nodes, (None, 1))
    assert indexed == reference == ["ns-a/a-2"]


def test_the_indexed_cycle_does_not_walk_the_nodes_pods() -> None:
    world = World(7)
    for _ in range(40):
        world.add_pod()
    plugin = make_plugins(world.cluster, {})[1]
    walked: list[str] = []
    real = world.cluster.pods_on

    def counting(node_name: str) -> Any:
        walked.append(node_name)
        return real(node_name)

    world.cluster.pods_on = counting  # type: ignore[method-assign]
    plugin.balance(list(world.cluster.nodes.values()))
    # Only a node holding the first carriers of several namespaces is looked at (for their order).
    assert len(walked) <= len(NAMESPACES) - 1

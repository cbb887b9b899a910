"""LowNodeUtilization's and HighNodeUtilization's fast paths agree with the plain per-node and per-pod forms.

- `capacity_matrix` with the cluster (allocatable read from the NodeTable's columns) equals the per-node
  read, for nodes with and without allocatable, extended and untracked resources, MetricResource, and node
  objects that are not the cluster's;
- `sort_pods_based_on_priority_low_to_high` (keys made in one pass, QoS read once per pod) is the stable sort
  by `priority_qos_key`, and `qos_class` is status.qosClass or the class computed from the spec, also after a
  status change;
- a destination without taints is tolerated by every pod (why the eviction loop skips the taint check then);
- on random clusters both strategies evict the same pods in the same order as a run with the plain capacity
  read, the plain key sort and every node's pods listed at sync as upstream lists them (the usage clients
  list a node's pods when the eviction loop first reaches it).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from kubesched.api.objects import Pod, parse_node, parse_pod
from kubesched.api.qos import compute_qos, qos_class
from kubesched.api.snapshot import Snapshot
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.descheduler import nodeutil, podutil
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.evictor import ProfileEvictor
from kubesched.descheduler.plugins import nodeutilization as nu
from kubesched.descheduler.registry import default_registry

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def node_doc(i: int, rng: random.Random) -> dict[str, Any]:
    alloc: dict[str, str] = {"cpu": rng.choice(("4", "8", "4500m", "0.0005")), "memory": rng.choice(("8Gi", "1000")),
                             "pods": rng.choice(("10", "110"))}
    if rng.random() < 0.3:
        alloc["example.com/gpu"] = rng.choice(("1", "4"))
    if rng.random() < 0.2:
        alloc["foo"] = "5"  # a bare name the scheduler does not track
    for name in ("memory", "pods"):
        if rng.random() < 0.15:
            del alloc[name]
    status: dict[str, Any] = {"capacity": dict(alloc), "conditions": [{"type": "Ready", "status": "True"}]}
    if rng.random() < 0.85:
        status["allocatable"] = alloc  # else: capacity alone
    taints = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if rng.random() < 0.3 else []
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
            "spec": {"taints": taints, "unschedulable": rng.random() < 0.1}, "status": status}


def pod_doc(i: int, rng: random.Random, node: str) -> dict[str, Any]:
    requests = {"cpu": rng.choice(("100m", "500m", "1", "2")), "memory": rng.choice(("128Mi", "1Gi"))}
    resources: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.3:
        resources["limits"] = dict(requests)  # Guaranteed
    elif rng.random() < 0.2:
        resources = {}  # BestEffort
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "i", "resources": resources}]}
    if rng.random() < 0.3:
        spec["priority"] = rng.choice((0, 100, 1000))
    if rng.random() < 0.1:
        spec["resources"] = {}  # pod-level resources: an empty set decides (BestEffort)
    if rng.random() < 0.2:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    meta: dict[str, Any] = {"name": f"p{i}", "namespace": rng.choice(("default", "team")), "uid": f"u{i}",
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                                 "uid": "rs", "controller": True}]}
    if rng.random() < 0.15:
        meta["annotations"] = {podutil.PREFER_NO_EVICTION_ANNOTATION: ""}
    unevictable = random.Random(i * 7919 + 17).random()  # its own stream: the clusters' other draws stay
    if unevictable < 0.04:
        del meta["ownerReferences"]  # a bare pod
    elif unevictable < 0.08:
        meta["ownerReferences"][0]["kind"] = "DaemonSet"
    elif unevictable < 0.12:
        meta["deletionTimestamp"] = "2023-12-31T23:59:00Z"
    elif unevictable < 0.15:
        spec["priority"] = 2000001000  # system-node-critical
    status: dict[str, Any] = {"phase": "Running"}
    if rng.random() < 0.15:
        status["qosClass"] = rng.choice(("Guaranteed", "Burstable", "BestEffort"))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def objects(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    n = rng.randrange(4, 12)
    out = [node_doc(i, rng) for i in range(n)]
    k = 0
    for i in range(n):
        for _ in range(rng.randrange(0, 16 if i % 3 == 0 else 5)):
            k += 1
            out.append(pod_doc(k, rng, f"n{i}"))
    return out


def cluster_of(objs: list[dict[str, Any]]) -> ClusterState:
    snap = Snapshot()
    for o in objs:
        if o["kind"] == "Node":
            snap.nodes.append(parse_node(o))
        else:
            snap.pods.append(parse_pod(o))
    return ClusterState.from_snapshot(snap)


@pytest.mark.parametrize("seed", range(20))
def test_capacity_from_the_table_equals_the_per_node_read(seed: int) -> None:
    rng = random.Random(seed)
    cluster = cluster_of(objects(seed))
    nodes = list(cluster.nodes.values())
    if rng.random() < 0.5:
        # A node object that is not the cluster's (the cycle's copy): read node by node.
        nodes[0] = parse_node(node_doc(0, rng))
    for names in (["cpu", "memory", "pods"], ["cpu", "example.com/gpu", "foo", "pods"], [nu.METRIC_RESOURCE],
                  ["memory", "ephemeral-storage"]):
        cap, has = nu.capacity_matrix(nodes, names, cluster)
        plain_cap, plain_has = nu.capacity_matrix(nodes, names)
        assert np.array_equal(cap, plain_cap) and np.array_equal(has, plain_has)


@pytest.mark.parametrize("seed", range(20))
def test_priority_sort_is_the_stable_key_sort(seed: int) -> None:
    rng = random.Random(seed)
    pods = [parse_pod(pod_doc(i, rng, "n0")) for i in range(rng.randrange(1, 60))]
    expected = sorted(pods, key=podutil.priority_qos_key)
    got = podutil.sort_pods_based_on_priority_low_to_high(list(pods))
    assert [p.key for p in got] == [p.key for p in expected]
    # Sorted again after status and annotation changes of some pods: the kept keys do not outlive them.
    changed = []
    for p in got:
        r = rng.random()
        if r < 0.3:
            p = p.with_status(qosClass=rng.choice(("Guaranteed", "Burstable", "BestEffort", None)))
        elif r < 0.5:
            p = p.with_annotations({podutil.PREFER_NO_EVICTION_ANNOTATION: rng.choice(("", None))})
        elif r < 0.6:
            p = p.bound_to("n1")
        changed.append(p)
    rng.shuffle(changed)
    again = podutil.sort_pods_based_on_priority_low_to_high(list(changed))
    assert [p.key for p in again] == [p.key for p in sorted(changed, key=podutil.priority_qos_key)]


def _get_pod_qos(p: Pod) -> str:
    status = p.raw.get("status") or {}
    q = status.get("qosClass")
    return q if isinstance(q, str) and q else compute_qos(p)


@pytest.mark.parametrize("seed", range(10))
def test_qos_class_is_the_status_class_or_the_computed_one(seed: int) -> None:
    rng = random.Random(seed)
    classes = set()
    for i in range(40):
        p = parse_pod(pod_doc(i, rng, "n0"))
        assert qos_class(p) == _get_pod_qos(p)
        assert qos_class(p, pod_level_resources=False) == \
            ((p.raw["status"].get("qosClass")) or compute_qos(p, pod_level_resources=False))
        classes.add(qos_class(p))
        changed = p.with_status(qosClass=rng.choice(("Guaranteed", "Burstable", "BestEffort", None)))
        assert qos_class(changed) == _get_pod_qos(changed)  # the memo does not outlive a status change
    assert classes == {"Guaranteed", "Burstable", "BestEffort"}


def test_a_node_without_taints_is_tolerated_by_every_pod() -> None:
    rng = random.Random(5)
    tainted = parse_node(node_doc(0, random.Random(1))).taints or \
        parse_node({**node_doc(0, rng), "spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}).taints
    for i in range(30):
        p = parse_pod(pod_doc(i, rng, "n0"))
        assert nodeutil.pod_tolerates_taints(p, {"tainted": tainted, "clean": ()})
    assert not nodeutil.pod_tolerates_taints(parse_pod(pod_doc(99, random.Random(0), "n0")), {})


def _classified(seed: int, names: list[str], rng: random.Random) -> tuple[list[Any], Any, np.ndarray, np.ndarray,
                                                                         np.ndarray, np.ndarray]:
    """A random cluster's nodes, its requested-usage client, usage, percentages, capped capacity, and a
    random subset of rows (what a strategy classifies)."""
    cluster = cluster_of(objects(seed))
    nodes = [i.node for i in cluster.node_infos]
    client = nu.RequestedUsageClient(cluster, names)
    client.sync(nodes)
    usage = client.node_usage()
    cap, has = nu.capacity_matrix(nodes, names, cluster)
    pct = nu.usage_percentages(usage, cap, has)
    caps = nu.capped_capacity(cap, has, names, {"cpu": rng.randrange(10, 90), "memory": 70})
    idx = np.array(sorted(rng.sample(range(len(nodes)), rng.randrange(1, len(nodes) + 1))), dtype=np.int64)
    return nodes, client, usage, pct, caps, idx


@pytest.mark.parametrize("seed", range(20))
def test_destinations_budget_equals_the_per_node_sum(seed: int) -> None:
    """destinations_of sums (capped capacity - usage) over the destination rows at once: equal to
    assessAvailableResourceInNodes over per-node infos, with the first node of each distinct taint set."""
    rng = random.Random(seed)
    names = nu.unique_resource_names(["cpu", "memory", "pods", "example.com/gpu"])
    nodes, client, usage, pct, caps, idx = _classified(seed, names, rng)
    got = nu.destinations_of(nodes, idx, usage, names, caps)
    infos = nu.build_infos(nodes, idx, usage, names, pct, caps, client)
    want: dict[str, int] = {n: 0 for n in names}
    for d in infos:
        for n in names:
            want[n] += d.available[n] - d.usage[n]
    assert got.available == want and got.count == len(infos)
    first: dict[tuple[Any, ...], str] = {}
    for d in infos:
        first.setdefault(d.node.taints, d.node.name)
    assert got.taints == {name: taints for taints, name in first.items()}


@pytest.mark.parametrize("seed", range(20))
def test_sorted_node_infos_equal_sorting_the_built_infos(seed: int) -> None:
    """SortedNodeInfos (each info made when reached) yields what sortNodesByUsage over build_infos gives, in
    both directions: the same nodes in the same order (ties kept in row order), with the same numbers."""
    rng = random.Random(seed)
    names = nu.unique_resource_names(rng.choice([["cpu", "memory", "pods"], ["cpu"], ["memory", "example.com/gpu"]]))
    nodes, client, usage, pct, caps, idx = _classified(seed, names, rng)
    for ascending in (True, False):
        want = nu.sort_nodes_by_usage(nu.build_infos(nodes, idx, usage, names, pct, caps, client), ascending)
        got = list(nu.SortedNodeInfos(nodes, idx, usage, names, pct, caps, client, ascending))
        # repr: NaN percentages (no capacity) compare equal only as text
        assert [(i.node.name, i.usage, i.available, repr(i.percent), i.pods) for i in got] == \
            [(i.node.name, i.usage, i.available, repr(i.percent), i.pods) for i in want]


def _plain_sort(pods: list[Pod]) -> list[Pod]:
    pods.sort(key=podutil.priority_qos_key)
    return pods


def _run(objs: list[dict[str, Any]], plugin: str, args: dict[str, Any]) -> list[str]:
    cluster = cluster_of(objs)
    policy = parse_descheduler_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [{"name": "DefaultEvictor", "args": {}},
                                                    {"name": plugin, "args": args}],
                      "plugins": {"balance": {"enabled": [plugin]}}}]}, "<test>", default_registry())
    d = Descheduler(cluster, policy, now=NOW, dry_run=False, min_ready_nodes=0)
    result = d.run_cycle()
    assert not result.errors
    return [f"{r.pod.key} {r.reason}" for r in result.evictions]


@pytest.mark.parametrize("seed", range(40))
def test_node_utilization_strategies_evict_what_the_plain_forms_evict(seed: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    objs = objects(seed)
    rng = random.Random(seed)
    if seed % 2:
        plugin = "LowNodeUtilization"
        low = rng.randrange(5, 40)
        args: dict[str, Any] = {"thresholds": {"cpu": low, "memory": low, "pods": low},
                                "targetThresholds": {"cpu": low + 20, "memory": low + 30, "pods": low + 20}}
    else:
        plugin = "HighNodeUtilization"
        args = {"thresholds": {"cpu": rng.randrange(20, 80), "memory": 60}}
    got = _run(objs, plugin, args)
    plain_capacity = nu.capacity_matrix
    monkeypatch.setattr(nu, "capacity_matrix", lambda nodes, names, cluster=None: plain_capacity(nodes, names))
    monkeypatch.setattr(podutil, "sort_pods_based_on_priority_low_to_high", _plain_sort)

    def list_at_sync(client: Any, nodes: list[Any]) -> None:
        client._nodes = nodes
        client._listed = {i: list(client.cluster.pods_on(n.name)) for i, n in enumerate(nodes)}

    monkeypatch.setattr(nu._PodsWhenAsked, "_forget_pods", list_at_sync)
    # Every pod of a source node filtered before the node's first eviction, as upstream does.
    monkeypatch.setattr(ProfileEvictor, "filters_read_only_the_pod", property(lambda self: False))
    assert got == _run(objs, plugin, args)


def test_only_pod_local_evictor_filters_let_strategies_filter_lazily() -> None:
    """The default evictor's verdict reads only the pod unless minReplicas counts the owner's other pods."""
    def evictor(args: dict[str, Any]) -> ProfileEvictor:
        policy = parse_descheduler_policy({
            "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
            "profiles": [{"name": "p", "pluginConfig": [{"name": "DefaultEvictor", "args": args},
                                                        {"name": "LowNodeUtilization", "args": {
                                                            "thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}}],
                          "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}, "<test>", default_registry())
        d = Descheduler(cluster_of(objects(1)), policy, now=NOW, dry_run=False, min_ready_nodes=0)
        ev = d.profiles[0].handle.evictor
        assert isinstance(ev, ProfileEvictor)
        return ev

    assert evictor({}).filters_read_only_the_pod
    assert evictor({"minPodAge": "5m", "ignorePvcPods": True, "labelSelector": {"matchLabels": {"a": "b"}}}
                   ).filters_read_only_the_pod
    assert not evictor({"minReplicas": 2}).filters_read_only_the_pod


def test_the_random_clusters_evict() -> None:
    """The comparisons above are not vacuous: both strategies evict on these clusters."""
    evicted = [len(_run(objects(seed), "LowNodeUtilization", {
        "thresholds": {"cpu": 20, "memory": 20, "pods": 20}, "targetThresholds": {"cpu": 40, "memory": 50, "pods": 40}}))
        for seed in range(1, 40, 2)]
    assert sum(evicted) > 20 and sum(1 for n in evicted if n) > 5
    assert sum(len(_run(objects(seed), "HighNodeUtilization", {"thresholds": {"cpu": 50, "memory": 60}}))
               for seed in range(0, 40, 2)) > 0

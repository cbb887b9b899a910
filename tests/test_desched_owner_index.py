"""RemoveDuplicates read from the owner index evicts exactly what upstream's listing computes, and the index
kept from events equals one rebuilt from the state after any sequence of changes."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from kubesched.api.objects import Node, Pod, parse_node, parse_pod
from kubesched.api.snapshot import Snapshot
from kubesched.cluster.events import Cause
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.owner_index import OwnerIndex, owner_index_for
from kubesched.descheduler.plugins.remove_duplicates import _TargetNodes
from kubesched.descheduler.registry import default_registry

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def _node(i: int, tainted: bool) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}", "disk": "ssd" if i % 2 else "hdd"}},
            "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if tainted else []},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "500"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(rng: random.Random, i: int, nodes: int) -> dict[str, Any]:
    ns = rng.choice(("x", "y"))
    owners = []
    kind = rng.choice(("ReplicaSet", "ReplicaSet", "ReplicaSet", "StatefulSet", "DaemonSet", None))
    if kind is not None:
        owners.append({"apiVersion": "apps/v1", "kind": kind, "name": rng.choice(("a", "b", "c")), "uid": "u",
                       "controller": True})
        if rng.random() < 0.1:
            owners.append({"apiVersion": "v1", "kind": "Other", "name": rng.choice(("a", "d")), "uid": "v"})
    containers = [{"name": f"c{k}", "image": rng.choice(("img1", "img2"))} for k in range(rng.choice((1, 1, 1, 2)))]
    meta: dict[str, Any] = {"name": f"p{i:03d}", "namespace": ns, "ownerReferences": owners}
    if rng.random() < 0.05:
        meta["deletionTimestamp"] = "2023-12-31T00:00:00Z"
    spec: dict[str, Any] = {"containers": containers}
    if rng.random() < 0.9:
        spec["nodeName"] = f"n{rng.randrange(nodes)}"
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    if rng.random() < 0.2:
        spec["nodeSelector"] = {"disk": "ssd"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": rng.choice(("Running", "Running", "Running", "Succeeded"))}}


def _cluster(seed: int) -> ClusterState:
    rng = random.Random(seed)
    nodes = rng.randint(2, 7)
    snap = Snapshot()
    snap.nodes.extend(parse_node(_node(i, i % 4 == 3)) for i in range(nodes))
    snap.pods.extend(parse_pod(_pod(rng, i, nodes)) for i in range(rng.randint(10, 120)))
    return ClusterState.from_snapshot(snap)


def _policy(args: dict[str, Any]) -> Any:
    return parse_descheduler_policy({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", "pluginConfig": [{"name": "DefaultEvictor", "args": {}},
                                                     {"name": "RemoveDuplicates", "args": args}],
                      "plugins": {"balance": {"enabled": ["RemoveDuplicates"]}}}]}, "<test>", default_registry())


def upstream_evictions(cluster: ClusterState, nodes: list[Node], evictable: Any, args: dict[str, Any]) -> list[str]:
    """removeduplicates.go's Balance written out plainly: list each node's pods (namespaces and evictor
    filters), by name; sorted owner/image keys mark duplicates; evict beyond ceil(occurrences / target nodes).
    Go's map order is replaced by first insertion, as kubesched documents."""
    excluded = set(args.get("excludeOwnerKinds") or ())
    include = set((args.get("namespaces") or {}).get("include") or ())
    exclude = set((args.get("namespaces") or {}).get("exclude") or ())
    duplicates: dict[tuple[str, ...], dict[str, list[Pod]]] = {}
    occurrences: dict[tuple[str, ...], int] = {}
    for node in nodes:
        pods = [p for p in cluster.pods_on(node.name)
                if (not include or p.namespace in include) and p.namespace not in exclude and evictable(p)]
        pods.sort(key=lambda p: (p.name, p.namespace))
        seen: set[tuple[str, ...]] = set()
        for pod in pods:
            owners = pod.meta.owner_references
            if not owners or any(o.kind in excluded for o in owners):
                continue
            images = sorted(c.image for c in pod.containers)
            owner_keys = [(pod.namespace, o.kind, o.name, "#".join(images)) for o in owners]
            for ok in owner_keys:
                occurrences[ok] = occurrences.get(ok, 0) + 1
            keys = tuple(sorted("/".join((pod.namespace, o.kind, o.name, image)) for o in owners for image in images))
            if keys in seen:
                for ok in owner_keys:
                    duplicates.setdefault(ok, {}).setdefault(node.name, []).append(pod)
            else:
                seen.add(keys)
    targets = _TargetNodes(nodes)
    out: list[str] = []
    for owner_key, pod_nodes in duplicates.items():
        feasible = targets.count(pod_nodes)
        if feasible < 2:
            continue
        upper = -(-occurrences[owner_key] // feasible)
        for pods in pod_nodes.values():
            if len(pods) + 1 > upper:
                out.extend(p.key for p in pods[upper - 1:] if p.key not in out)
    return out


ARGS: list[dict[str, Any]] = [{}, {"excludeOwnerKinds": ["StatefulSet"]}, {"namespaces": {"include": ["x"]}},
                              {"namespaces": {"exclude": ["x"]}}]


@pytest.mark.parametrize("seed", range(40))
def test_remove_duplicates_from_the_index_evicts_what_upstream_lists(seed: int) -> None:
    args = ARGS[seed % len(ARGS)]
    cluster = _cluster(seed)
    d = Descheduler(cluster, _policy(args), now=NOW)
    evictor = d.profiles[0].handle.evictor
    expected = upstream_evictions(cluster, d.cycle_nodes(),
                                  lambda p: evictor.filter(p) and evictor.pre_eviction_filter(p), args)
    got = [r.pod.key for r in d.run_cycle().evictions]
    assert got == expected


def test_the_cases_are_not_trivial() -> None:
    # The generated clusters do have duplicates to evict, and not everywhere.
    counts = []
    for seed in range(40):
        cluster = _cluster(seed)
        d = Descheduler(cluster, _policy(ARGS[seed % len(ARGS)]), now=NOW)
        counts.append(len(d.run_cycle().evictions))
    assert sum(counts) > 40 and counts.count(0) > 2


def _view(idx: OwnerIndex) -> tuple[Any, Any]:
    return ({o: {n: {k: id(p) for k, p in pods.items()} for n, pods in per.items()} for o, per in idx.by_owner.items()},
            {o: set(ns) for o, ns in idx.repeated.items()})


@pytest.mark.parametrize("seed", range(15))
def test_the_index_kept_from_events_equals_one_rebuilt(seed: int) -> None:
    rng = random.Random(1000 + seed)
    cluster = _cluster(seed)
    idx = owner_index_for(cluster)
    made = 1000
    for _step in range(150):
        pods = list(cluster.pods.values())
        op = rng.random()
        if op < 0.3 or not pods:
            made += 1
            cluster.add(parse_pod(_pod(rng, made, cluster.num_nodes + 1)))  # sometimes names a node to come
        elif op < 0.45:
            cluster.delete(rng.choice(pods))
        elif op < 0.6:
            pending = [p for p in pods if not p.node_name]
            if pending and cluster.num_nodes:
                pod = rng.choice(pending)
                node = rng.choice(list(cluster.nodes))
                if rng.random() < 0.5:
                    cluster.assume(pod, node)
                else:
                    cluster.bind(pod, node)
        elif op < 0.75:
            pod = rng.choice(pods)
            cluster.update(pod.with_status(phase=rng.choice(("Running", "Failed"))), cause=Cause.KUBELET)
        elif op < 0.85:
            pod = rng.choice(pods)
            cluster.update(pod.marked_for_deletion(NOW, 30))
        elif op < 0.93 and cluster.num_nodes > 1:
            cluster.delete(rng.choice(list(cluster.nodes.values())))
        else:
            names = {p.node_name for p in pods if p.node_name and p.node_name not in cluster.nodes}
            name = sorted(names)[0] if names else f"n{cluster.num_nodes + 10}"
            cluster.add(parse_node(_node(int(name[1:]), False)))
        if rng.random() < 0.2:
            fresh = OwnerIndex(cluster)
            fresh.current()
            assert _view(idx.current()) == _view(fresh)
    fresh = OwnerIndex(cluster)
    fresh.current()
    assert _view(idx.current()) == _view(fresh)
    assert idx.by_owner  # the index is not empty


def test_a_descheduler_that_runs_cycles_holds_no_evicted_pod_past_its_cycle() -> None:
    """Each cycle's result lists its own evictions; the evictor keeps only the current cycle's (a descheduler
    that runs for days, in the simulator or live, would otherwise hold every pod it ever evicted)."""
    seed = next(s for s in range(40) if len(Descheduler(_cluster(s), _policy({}), now=NOW).run_cycle().evictions) > 1)
    d = Descheduler(_cluster(seed), _policy({}), now=NOW)
    first = d.run_cycle()
    keys = [r.pod.key for r in first.evictions]
    second = d.run_cycle()  # dry run: the same pods are evicted again
    assert [r.pod.key for r in second.evictions] == keys
    assert [r.pod.key for r in first.evictions] == keys  # the first result is not changed by the second cycle
    assert d.pod_evictor.records is second.evictions and len(d.pod_evictor.records) == len(keys)

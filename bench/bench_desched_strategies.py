"""Benchmark: RemoveDuplicates and RemovePodsViolatingTopologySpreadConstraint in one cycle over a large cluster.

5,000 nodes in 3 zones, 150,000 pods of 1,500 ReplicaSets (100 replicas each, half with a zone spread
constraint), placed with a deterministic skew (a hard case: most owners have duplicates and every spread
constraint is unbalanced). Prints the CPU time each strategy takes (first cycle, nothing memoised yet) and
its evictions. Building the cluster takes far longer than the cycle; it is not timed.

    .venv/bin/python bench/bench_desched_strategies.py [--nodes 5000] [--pods 150000]
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from datetime import UTC, datetime

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.snapshot import Snapshot
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.cluster.state import ClusterState
from kubesched.descheduler.evictor import PodEvictor, ProfileEvictor
from kubesched.descheduler.framework import Handle
from kubesched.descheduler.plugins.default_evictor import DefaultEvictor
from kubesched.descheduler.plugins.remove_duplicates import RemoveDuplicates
from kubesched.descheduler.plugins.remove_pods_violating_topology_spread_constraint import (
    RemovePodsViolatingTopologySpreadConstraint,
)

ZONE = "topology.kubernetes.io/zone"


def build(n_nodes: int, n_pods: int, replicas: int = 100, seed: int = 1) -> ClusterState:
    rng = random.Random(seed)
    snap = Snapshot()
    zones = ["zone-a", "zone-b", "zone-c"]
    for i in range(n_nodes):
        snap.nodes.append(parse_node({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i}", "labels": {ZONE: zones[i % 3], "kubernetes.io/hostname": f"node-{i}"}},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}))
    n_sets = max(1, n_pods // replicas)
    for s in range(n_sets):
        ns = f"ns-{s % 50}"
        spread = s % 2 == 0
        labels = {"app": f"app-{s}"}
        for r in range(replicas):
            # Skewed placement: most replicas in the first zone's nodes, a few duplicates per node.
            if rng.random() < 0.6:
                node = rng.randrange(0, n_nodes, 3)
            else:
                node = rng.randrange(n_nodes)
            spec: dict = {"nodeName": f"node-{node}",
                          "containers": [{"name": "c", "image": f"img-{s}",
                                          "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
            if spread:
                spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                                      "whenUnsatisfiable": "DoNotSchedule",
                                                      "labelSelector": {"matchLabels": labels}}]
            snap.pods.append(parse_pod({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"app-{s}-{r}", "namespace": ns, "labels": labels,
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{s}",
                                                  "uid": f"uid-{s}", "controller": True}],
                             "creationTimestamp": "2024-01-01T00:00:00Z"},
                "spec": spec, "status": {"phase": "Running"}}))
    return ClusterState.from_snapshot(snap)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    a = ap.parse_args()
    t0 = time.perf_counter()
    cluster = build(a.nodes, a.pods)
    print(f"built {a.nodes} nodes / {len(cluster.pods)} pods in {time.perf_counter() - t0:.1f}s")
    # The long-lived objects of the cluster need no cyclic GC passes during the cycle.
    gc.collect()
    gc.freeze()
    # Dry-run evictions through an in-process API server that enforces no PDB (what `kubesched deschedule` does).
    pe = PodEvictor(InProcessAPIServer(cluster, enforce_pdbs=False))
    handle = Handle(cluster=cluster, evictor=None, now=datetime(2024, 1, 2, tzinfo=UTC), profile="bench")  # type: ignore[arg-type]
    de = DefaultEvictor(DefaultEvictor.Args(), handle)
    handle.evictor = ProfileEvictor("bench", pe, [de], [de])
    nodes = list(cluster.nodes.values())
    total = 0.0
    for cls in (RemoveDuplicates, RemovePodsViolatingTopologySpreadConstraint):
        before = len(pe.records)
        t = time.process_time()
        cls(cls.Args(), handle).balance(nodes)
        dt = time.process_time() - t
        total += dt
        print(f"{cls.name}: {dt:.3f}s CPU, {len(pe.records) - before} evictions")
    print(f"cycle: {total:.3f}s CPU")


if __name__ == "__main__":
    main()

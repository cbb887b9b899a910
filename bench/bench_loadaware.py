"""Benchmark: the load-aware score plugins over a large cluster, vectorised form vs per-node form.

5,000 nodes with load-watcher metrics (CPU/Memory AVG and STD) and metrics.k8s.io NodeMetrics; scores
one pending pod with TargetLoadPacking, LoadVariationRiskBalancing, LowRiskOverCommitment and
LoadAwareScheduling (filter and score), printing the time of each form.

    .venv/bin/python bench/bench_loadaware.py [--nodes 5000]
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime

import numpy as np

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import build_args
from kubesched.metrics.base import Metric, Metrics, NodeUsage, Window
from kubesched.scheduler.framework import CycleState, Handle, SchedulerServices
from kubesched.scheduler.plugins.load_aware_scheduling import LoadAwareScheduling
from kubesched.scheduler.plugins.trimaran.load_variation_risk_balancing import LoadVariationRiskBalancing
from kubesched.scheduler.plugins.trimaran.low_risk_over_commitment import LowRiskOverCommitment
from kubesched.scheduler.plugins.trimaran.target_load_packing import TargetLoadPacking

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def build(n: int, seed: int = 1) -> tuple[ClusterState, Metrics]:
    rng = random.Random(seed)
    cluster = ClusterState()
    nodes: dict[str, NodeUsage] = {}
    for i in range(n):
        name = f"node-{i}"
        cluster.add(parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}))
        cpu, mem = rng.uniform(5, 95), rng.uniform(10, 90)
        nodes[name] = NodeUsage(name, [Metric("CPU", "AVG", cpu), Metric("Memory", "AVG", mem),
                                       Metric("CPU", "STD", rng.uniform(0, 15)), Metric("Memory", "STD", rng.uniform(0, 5))],
                                usage={"cpu": int(cpu * 160), "memory": int(mem * 64 * 2**30 / 100)},
                                timestamp=NOW.timestamp())
    return cluster, Metrics("bench", nodes, timestamp=NOW.timestamp(), window=Window("15m"), captured=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=5000)
    opts = ap.parse_args()
    cluster, metrics = build(opts.nodes)
    handle = Handle(cluster, now=lambda: NOW.timestamp() + 10, services=SchedulerServices(start=NOW, metrics=metrics))
    pod = parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                     "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                                          "limits": {"cpu": "1"}}}]}})
    rows = cluster.node_order()
    for cls in (TargetLoadPacking, LoadVariationRiskBalancing, LowRiskOverCommitment, LoadAwareScheduling):
        pl = cls(build_args(cls, {}), handle)
        state = CycleState()
        if hasattr(pl, "pre_filter"):
            pl.pre_filter(state, pod, cluster)
        if hasattr(pl, "pre_score"):
            pl.pre_score(state, pod, cluster, rows)
        pl.score_nodes(state, pod, cluster, rows)  # warm the caches
        t0 = time.perf_counter()
        vec = pl.score_nodes(state, pod, cluster, rows)
        t1 = time.perf_counter()
        one = np.array([pl.score(state, pod, cluster.node_infos[r])[0] for r in rows])
        t2 = time.perf_counter()
        assert (vec == one).all()
        print(f"{cls.__name__:<28} score_nodes {1000 * (t1 - t0):8.1f} ms   per-node {1000 * (t2 - t1):8.1f} ms"
              f"   ({opts.nodes} nodes)")
        if isinstance(pl, LoadAwareScheduling):
            t0 = time.perf_counter()
            mask = pl.filter_nodes(state, pod, cluster, rows)
            print(f"{'':<28} filter_nodes {1000 * (time.perf_counter() - t0):7.1f} ms   ({int(mask.sum())} pass)")


if __name__ == "__main__":
    main()

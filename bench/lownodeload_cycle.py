"""One koordinator LowNodeLoad cycle over a large cluster with a NodeMetric for every node (not run as a test).

    .venv/bin/python bench/lownodeload_cycle.py [--nodes 1000,5000] [--thresholds 45/70,30/60] [--profile] [--no-fork]

The cluster is `bench/descheduler_cycle.py`'s (nodes in 3 zones, a few tainted or cordoned, every 20th
node hot and every 20th+1 idle, ReplicaSets of 2 to 40 replicas, `--pods-per-node` pods per node). Each
node gets a koordinator `slo.koordinator.sh/v1alpha1` NodeMetric (system usage, and every pod's usage:
30-120 % of its cpu request, 50-100 % of its memory request); a third of the ReplicaSets are koord-prod.
The policy enables LowNodeLoad alone with `nodeFit` (its default), `anomalyCondition.consecutiveAbnormalities:
1` (act in the first cycle), and each `--thresholds` pair as `lowThresholds`/`highThresholds` for cpu and
memory. Each cycle is the first after loading: by default it runs in a forked copy of the loaded process;
with `--no-fork` in the loading process itself, the cluster and the reading being built anew for each pair
(slower to run). A forked copy pays a copy-on-write page fault the first time it touches each page of the
parent's objects, which a process that loaded its own cluster does not: the forked figure is the higher.

Prints the CPU seconds of each cycle (the machine is shared: CPU time, not wall time, is the figure), the
aim, and a digest of the evicted pods in order (equal digests: the same decisions).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import multiprocessing
import pstats
import random
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from descheduler_cycle import build  # noqa: E402

from kubesched.cluster.state import ClusterState  # noqa: E402
from kubesched.config.descheduler_policy import parse_descheduler_policy  # noqa: E402
from kubesched.descheduler.descheduler import Descheduler  # noqa: E402
from kubesched.descheduler.registry import default_registry  # noqa: E402
from kubesched.metrics.base import Metrics  # noqa: E402
from kubesched.metrics.kubernetes_metrics import metrics_from_objects  # noqa: E402

NOW = datetime(2024, 1, 1, tzinfo=UTC)
AIM_SECONDS = 0.5
PROD_LABEL = "koordinator.sh/priority-class"


def node_metrics(cluster: ClusterState, seed: int) -> Metrics:
    """A NodeMetric per node: its pods' usage (a fraction of their requests) and a system usage."""
    rng = random.Random(seed)
    stamp = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    objects = []
    for info in cluster.node_infos:
        pods = []
        for p in info.pods.values():
            req = p.containers[0].requests
            cpu_m = int(float(req["cpu"]) * 1000 * rng.uniform(0.3, 1.2))
            mem = int(float(req["memory"]) * rng.uniform(0.5, 1.0))
            pods.append({"namespace": p.namespace, "name": p.name,
                         "podUsage": {"resources": {"cpu": f"{cpu_m}m", "memory": str(mem)}}})
        objects.append({
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": info.name},
            "status": {"updateTime": stamp,
                       "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "4Gi"}},
                                      "systemUsage": {"resources": {"cpu": "500m", "memory": "2Gi"}}},
                       "podsMetric": pods},
        })
    return metrics_from_objects(objects, source="bench")


def policy(low: int, high: int) -> dict:
    return {
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "profiles": [{
            "name": "bench",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {}},
                {"name": "LowNodeLoad", "args": {
                    "lowThresholds": {"cpu": low, "memory": low}, "highThresholds": {"cpu": high, "memory": high},
                    "anomalyCondition": {"consecutiveAbnormalities": 1}}},
            ],
            "plugins": {"balance": {"enabled": ["LowNodeLoad"]}},
        }],
    }


def load(nodes: int, pods_per_node: int, seed: int) -> tuple[ClusterState, Metrics]:
    t0 = time.process_time()
    snap = build(nodes, pods_per_node, seed)
    # A third of the ReplicaSets are koord-prod (the prod pass has pods to look at).
    for p in snap.pods:
        owner = p.meta.owner_references[0].name
        if owner.startswith("web-") and int(owner.split("-")[1]) % 3 == 0:
            p.meta.labels[PROD_LABEL] = "koord-prod"
    cluster = ClusterState.from_snapshot(snap)
    metrics = node_metrics(cluster, seed)
    t1 = time.process_time()
    print(f"{nodes} nodes, {len(snap.pods)} pods, a NodeMetric per node (built in {t1 - t0:.1f}s CPU)")
    gc.freeze()
    return cluster, metrics


def run(nodes: int, pods_per_node: int, thresholds: list[tuple[int, int]], seed: int, profile: bool,
        no_fork: bool) -> None:
    if no_fork:
        # Each pair gets a cluster of its own, loaded in this process (nothing a previous cycle memoised on the
        # pods helps it).
        for low, high in thresholds:
            cluster, metrics = load(nodes, pods_per_node, seed)
            cycle(cluster, metrics, low, high, profile)
            del cluster, metrics
            gc.unfreeze()
            gc.collect()
    else:
        cluster, metrics = load(nodes, pods_per_node, seed)
        # Each cycle runs in a forked copy of the loaded state, so every figure is a first cycle's (nothing a
        # previous cycle memoised helps it).
        fork = multiprocessing.get_context("fork")
        for low, high in thresholds:
            child = fork.Process(target=cycle, args=(cluster, metrics, low, high, profile))
            child.start()
            child.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory (RSS of the loading process): {peak:.0f} MiB")


def cycle(cluster: ClusterState, metrics: Metrics, low: int, high: int, profile: bool) -> None:
    pol = parse_descheduler_policy(policy(low, high), "<bench>", default_registry())
    d = Descheduler(cluster, pol, now=NOW)
    prof = cProfile.Profile() if profile else None
    c0 = time.process_time()
    w0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    result = d.run_cycle(usage=metrics)
    if prof is not None:
        prof.disable()
    cpu = time.process_time() - c0
    wall = time.perf_counter() - w0
    verdict = "reached" if cpu <= AIM_SECONDS else "not reached"
    # The evicted pods in order, as one digest: equal digests mean the same decisions.
    digest = hashlib.sha1("\n".join(r.pod.key for r in result.evictions).encode()).hexdigest()[:12]
    where = "in the loading process" if multiprocessing.parent_process() is None else "in a forked copy"
    print(f"  thresholds {low}/{high}: one cycle {cpu:.3f}s CPU ({wall:.3f}s wall, {where}), "
          f"{len(result.evictions)} evictions (digest {digest}), errors: {result.errors or 'none'}; "
          f"aim <= {AIM_SECONDS}s: {verdict}")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1000,5000", help="comma-separated cluster sizes")
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--thresholds", default="45/70,30/60", help="comma-separated low/high percentage pairs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="print the top functions of each cycle (cProfile)")
    ap.add_argument("--no-fork", action="store_true",
                    help="run each cycle in the loading process (the cluster is loaded anew for each pair)")
    opts = ap.parse_args()
    try:
        pairs = [(int(lo), int(hi)) for lo, hi in (t.split("/") for t in opts.thresholds.split(","))]
        sizes = [int(x) for x in opts.nodes.split(",")]
    except ValueError:
        ap.error("--nodes takes sizes like 1000,5000 and --thresholds low/high pairs like 45/70,30/60")
    for n in sizes:
        run(n, opts.pods_per_node, pairs, opts.seed, opts.profile, opts.no_fork)


if __name__ == "__main__":
    main()

"""One descheduling cycle over a large cluster: seconds and peak memory (not run as a test).

    .venv/bin/python bench/descheduler_cycle.py [--nodes 5000] [--pods-per-node 30] [--profile]

The cluster: `--nodes` nodes in 3 zones (110 pods each at most, a few tainted or cordoned, load skewed
so that some nodes are hot and some idle), one DaemonSet pod per node, and ReplicaSets of 2 to 40
replicas (some with a zone topology spread constraint, some with replicas doubled up on one node), about
`--pods-per-node` pods per node in all. The policy enables LowNodeUtilization, RemoveDuplicates,
RemovePodsViolatingTopologySpreadConstraint and RemovePodsViolatingNodeTaints (those present).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import pstats
import random
import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubesched.api.objects import parse_node, parse_pod  # noqa: E402
from kubesched.api.snapshot import Snapshot  # noqa: E402
from kubesched.cluster.state import ClusterState  # noqa: E402
from kubesched.config.descheduler_policy import parse_descheduler_policy  # noqa: E402
from kubesched.descheduler.descheduler import Descheduler  # noqa: E402
from kubesched.descheduler.registry import default_registry  # noqa: E402

ZONES = ("zone-a", "zone-b", "zone-c")
AIM_SECONDS = 0.5


def build(nodes: int, pods_per_node: int, seed: int) -> Snapshot:
    rng = random.Random(seed)
    snap = Snapshot()
    for i in range(nodes):
        taints = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}] if i % 97 == 0 else []
        snap.nodes.append(parse_node({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"node-{i:05d}", "labels": {"kubernetes.io/hostname": f"node-{i:05d}",
                                                             "topology.kubernetes.io/zone": ZONES[i % 3]}},
            "spec": {"taints": taints, "unschedulable": i % 251 == 0},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }))
    # Hot nodes get many more pods than idle ones (LowNodeUtilization has work to do).
    weights = [2.5 if i % 20 == 0 else (0.3 if i % 20 == 1 else 1.0) for i in range(nodes)]
    counts = [0] * nodes
    target = nodes * pods_per_node

    def pod(name: str, ns: str, owner_kind: str, owner: str, node: int, cpu: int, labels: dict[str, str],
            spread: bool) -> None:
        counts[node] += 1
        spec: dict = {"nodeName": f"node-{node:05d}",
                      "containers": [{"name": "app", "image": f"registry/{owner}:1",
                                      "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{cpu * 4}Mi"}}}]}
        if spread:
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule",
                                                  "labelSelector": {"matchLabels": {"app": owner}}}]
        snap.pods.append(parse_pod({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": f"{ns}/{name}",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner,
                                              "uid": f"uid-{owner}", "controller": True}]},
            "spec": spec, "status": {"phase": "Running"},
        }))

    for i in range(nodes):
        pod(f"ds-agent-{i:05d}", "kube-system", "DaemonSet", "agent", i, 50, {"app": "agent"}, False)
    total = nodes
    rs = 0
    node_ids = list(range(nodes))
    while total < target:
        rs += 1
        replicas = rng.randint(2, 40)
        ns = f"team-{rs % 50}"
        owner = f"web-{rs}-abc"
        spread = rs % 7 == 0
        dup = rs % 11 == 0
        cpu = rng.choice((100, 200, 250, 500, 1000))
        chosen = rng.choices(node_ids, weights=weights, k=replicas)
        if dup:
            chosen[1] = chosen[0]
        for r in range(replicas):
            n = chosen[r]
            if counts[n] >= 110:
                n = rng.randrange(nodes)
                if counts[n] >= 110:
                    continue
            pod(f"{owner}-{r}", ns, "ReplicaSet", owner, n, cpu, {"app": owner}, spread)
            total += 1
            if total >= target:
                break
    return snap


POLICY = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "profiles": [{
        "name": "bench",
        "pluginConfig": [
            {"name": "DefaultEvictor", "args": {}},
            {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                                                    "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}},
            {"name": "RemoveDuplicates", "args": {}},
            {"name": "RemovePodsViolatingTopologySpreadConstraint", "args": {}},
            {"name": "RemovePodsViolatingNodeTaints", "args": {}},
        ],
        "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]},
                    "balance": {"enabled": ["RemoveDuplicates", "RemovePodsViolatingTopologySpreadConstraint",
                                            "LowNodeUtilization"]}},
    }],
}


def available_policy() -> dict:
    """The policy with only the strategies whose modules exist in this checkout."""
    registry = default_registry()
    present = []
    for name in ("LowNodeUtilization", "RemoveDuplicates", "RemovePodsViolatingTopologySpreadConstraint",
                 "RemovePodsViolatingNodeTaints"):
        try:
            registry.get(name)
            present.append(name)
        except Exception:
            print(f"(skipping {name}: not available)")
    prof = POLICY["profiles"][0]
    prof["pluginConfig"] = [pc for pc in prof["pluginConfig"] if pc["name"] in present or pc["name"] == "DefaultEvictor"]
    for point in ("deschedule", "balance"):
        prof["plugins"][point]["enabled"] = [n for n in prof["plugins"][point]["enabled"] if n in present]
    return POLICY


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="print the top functions of the cycle (cProfile)")
    opts = ap.parse_args()
    t0 = time.perf_counter()
    snap = build(opts.nodes, opts.pods_per_node, opts.seed)
    t1 = time.perf_counter()
    cluster = ClusterState.from_snapshot(snap)
    t2 = time.perf_counter()
    policy = parse_descheduler_policy(available_policy(), "<bench>", default_registry())
    d = Descheduler(cluster, policy, now=datetime(2024, 1, 1, tzinfo=UTC))
    print(f"cluster: {len(snap.nodes)} nodes, {len(snap.pods)} pods (objects built in {t1 - t0:.1f}s, "
          f"cluster state in {t2 - t1:.1f}s)")
    per_plugin: dict[str, float] = {}
    run_one = d._run

    def timed(prof_: object, pl: object, point: str, nodes: list, res: object) -> None:
        t = time.process_time()
        run_one(prof_, pl, point, nodes, res)  # type: ignore[arg-type]
        per_plugin[getattr(pl, "name", "?")] = time.process_time() - t

    d._run = timed  # type: ignore[method-assign]
    # The objects of a large cluster live for the whole run: keep the cyclic GC from rescanning them.
    gc.freeze()
    prof = cProfile.Profile() if opts.profile else None
    c3 = time.process_time()
    t3 = time.perf_counter()
    if prof is not None:
        prof.enable()
    result = d.run_cycle()
    if prof is not None:
        prof.disable()
    t4 = time.perf_counter()
    c4 = time.process_time()
    by_plugin: dict[str, int] = {}
    for r in result.evictions:
        by_plugin[r.plugin] = by_plugin.get(r.plugin, 0) + 1
    print(f"one cycle: {t4 - t3:.3f}s wall, {c4 - c3:.3f}s CPU, {len(result.evictions)} evictions {by_plugin}, "
          f"errors: {result.errors or 'none'}")
    # The evicted pods in order, as digests (all, and per plugin): equal digests mean the same decisions.
    digests = {name: hashlib.sha1("\n".join(r.pod.key for r in result.evictions if r.plugin == name).encode())
               .hexdigest()[:12] for name in by_plugin}
    everything = hashlib.sha1("\n".join(r.pod.key for r in result.evictions).encode()).hexdigest()[:12]
    print(f"evictions digest {everything}; per plugin: " + ", ".join(f"{k} {v}" for k, v in digests.items()))
    verdict = "reached" if c4 - c3 <= AIM_SECONDS else "not reached"
    print(f"aim: one cycle <= {AIM_SECONDS}s CPU at 5,000 nodes / 150,000 pods: {verdict} (CPU time: the machine may be "
          "shared)")
    print("CPU per plugin: " + ", ".join(f"{k} {v:.3f}s" for k, v in per_plugin.items()))
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak memory (RSS of the whole process): {peak_kb / 1024:.0f} MiB")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()

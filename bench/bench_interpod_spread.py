"""Per-extension-point cost of InterPodAffinity and PodTopologySpread on a large cluster.

5000 nodes in 3 zones, 1000 pods with required hostname anti-affinity and 3000 zone-spread pods
assigned; then each plugin runs PreFilter, the vectorised Filter, PreScore+Score for fresh pods of the
same shapes (scheduler_perf's SchedulingPodAntiAffinity and TopologySpreading templates). Prints CPU
microseconds per pod for each point.

    .venv/bin/python bench/bench_interpod_spread.py [--nodes 5000] [--pods 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scheduler_perf import ZONE, ZONES3, node_default, with_pod_anti_affinity, with_topology_spreading  # noqa: E402

from kubesched.api.objects import parse_node, parse_pod  # noqa: E402
from kubesched.cluster.state import ClusterState  # noqa: E402
from kubesched.config.plugin_args import build_args
from kubesched.scheduler.framework import CycleState, Handle  # noqa: E402
from kubesched.scheduler.plugins.inter_pod_affinity import InterPodAffinity  # noqa: E402
from kubesched.scheduler.plugins.pod_topology_spread import PodTopologySpread  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=500, help="fresh pods timed per plugin")
    args = ap.parse_args()
    c = ClusterState()
    for i in range(args.nodes):
        c.add(parse_node(node_default(i, {ZONE: ZONES3[i % 3]})))
    for i in range(min(1000, args.nodes)):
        p = parse_pod(with_pod_anti_affinity(f"anti-{i}"))
        c.add(p)
        c.bind(p, f"node-{(i * 3) % args.nodes}")
    for i in range(3000):
        p = parse_pod(with_topology_spreading(f"spread-{i}"))
        c.add(p)
        c.bind(p, f"node-{(i * 7) % args.nodes}")
    rows = c.node_order()
    print(f"{args.nodes} nodes, {len(c.pods)} assigned pods; CPU µs per pod")
    print(f"{'plugin':<20}{'PreFilter':>11}{'Filter':>9}{'Score':>9}")
    for cls, make in ((InterPodAffinity, with_pod_anti_affinity), (PodTopologySpread, with_topology_spreading)):
        pl = cls(build_args(cls, None), Handle(c))
        pods = [parse_pod(make(f"new-{i}")) for i in range(args.pods)]
        pre = flt = score = 0.0
        for p in pods:
            state = CycleState()
            t0 = time.process_time()
            _, st = pl.pre_filter(state, p, c)
            t1 = time.process_time()
            if st.is_success:
                pl.filter_nodes(state, p, c, rows)
            t2 = time.process_time()
            if pl.pre_score(state, p, c, rows).is_success:
                pl.score_nodes(state, p, c, rows)
            t3 = time.process_time()
            pre, flt, score = pre + t1 - t0, flt + t2 - t1, score + t3 - t2
        n = len(pods)
        print(f"{cls.name:<20}{1e6 * pre / n:>11.1f}{1e6 * flt / n:>9.1f}{1e6 * score / n:>9.1f}")


if __name__ == "__main__":
    main()

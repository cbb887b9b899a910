"""Benchmark: the closed loop at Kubernetes' scalability limits — 5,000 nodes, 150,000 pods, 24 simulated hours.

Usage steps every minute, the descheduler (LowNodeUtilization on actual usage, 50% / 65%, no eviction
cap) every 5 minutes, kubelet housekeeping every 10 seconds, the default scheduler (issue 18's row).
Prints the wall and CPU time of setup and of the run, the events handled, the peak RSS and the aim
(5,000 nodes / 150,000 pods in at most 120 s and 2 GB). On a shared machine read the CPU time.

    .venv/bin/python bench/sim_closed_loop.py [--nodes 5000] [--pods 150000] [--hours 24]
    .venv/bin/python bench/sim_closed_loop.py --nodes 1000 --pods 30000 --profile /tmp/loop.prof
"""

from __future__ import annotations

import argparse
import cProfile
import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml


def scenario(nodes: int, pods: int, hours: float, workloads: int) -> dict:
    per = pods // workloads
    items = []
    for i in range(workloads):
        cpu_m = 250 + 250 * (i % 6)  # 250m .. 1500m
        mem_mi = 256 * (1 + i % 8)
        kind = i % 4
        if kind == 0:
            cpu = {"model": "diurnal", "mean": 0.8 + 0.1 * (i % 5), "amplitude": 0.3, "noise": 0.05, "spread": 0.6}
        elif kind == 1:
            cpu = {"model": "randomWalk", "start": 0.6, "step": 0.03, "min": 0.1, "max": 1.6}
        elif kind == 2:
            cpu = {"model": "spikes", "base": 0.4, "peak": 1.5, "ratePerHour": 0.5, "duration": "10m"}
        else:
            cpu = {"model": "constant", "value": 0.5 + 0.1 * (i % 7), "noise": 0.1, "spread": 0.6}
        items.append({"object": {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"app-{i:03d}", "namespace": f"team-{i % 20}"},
            "spec": {"replicas": per, "selector": {"matchLabels": {"app": f"app-{i:03d}"}},
                     "template": {"metadata": {"labels": {"app": f"app-{i:03d}"}},
                                  "spec": {"containers": [{"name": "app", "image": f"app:{i}", "resources": {
                                      "requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"},
                                      "limits": {"memory": f"{mem_mi * 2}Mi"}}}]}}}},
            "usage": {"cpu": cpu, "memory": {"model": "constant", "value": 0.7, "noise": 0.02}}})
    zones = ["zone-a", "zone-b", "zone-c"]
    templates = [{"name": f"node-{z}", "count": nodes // 3 + (1 if k < nodes % 3 else 0),
                  "node": {"metadata": {"labels": {"topology.kubernetes.io/zone": z}},
                           "status": {"capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                                      "allocatable": {"cpu": "31", "memory": "124Gi", "pods": "110"}}}}
                 for k, z in enumerate(zones)]
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
              "metricsProviders": [{"source": "KubernetesMetrics"}],
              "profiles": [{"name": "balance",
                            "pluginConfig": [{"name": "DefaultEvictor"},
                                             {"name": "LowNodeUtilization", "args": {
                                                 "thresholds": {"cpu": 50}, "targetThresholds": {"cpu": 65},
                                                 "metricsUtilization": {"source": "KubernetesMetrics"}}}],
                            "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}]}
    return {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench"},
            "spec": {"duration": f"{hours}h", "seed": 1, "usageStep": "1m",
                     "cluster": {"nodeTemplates": templates}, "workloads": items,
                     "descheduler": {"policy": policy, "interval": "5m"},
                     "kubelet": {"housekeepingInterval": "10s"},
                     "metrics": {"samplingInterval": "15s", "window": "1m", "delay": "30s"},
                     "report": {"recordInterval": "5m"}}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--workloads", type=int, default=300)
    ap.add_argument("--profile", metavar="FILE", help="write a cProfile of setup and run to FILE")
    args = ap.parse_args()
    from kubesched.sim.engine import Engine
    from kubesched.sim.scenario import load_scenario

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(scenario(args.nodes, args.pods, args.hours, args.workloads)))
        # CPU time, not wall time: on a shared machine the wall clock charges other processes' work.
        prof = cProfile.Profile(time.process_time) if args.profile else None
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        c0 = time.process_time()
        s = load_scenario(str(path))
        engine = Engine(s)
        t1 = time.perf_counter()
        c1 = time.process_time()
        result = engine.run()
        t2 = time.perf_counter()
        c2 = time.process_time()
        if prof is not None:
            prof.disable()
            prof.dump_stats(args.profile)
    rec = result.recorder
    loops = rec.loops(s.report.loop_window)
    summary = rec.summary(loops)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"closed loop: {args.nodes} nodes, {args.pods} pods, {args.hours:g} h simulated")
    print(f"  setup {t1 - t0:.1f} s (cpu {c1 - c0:.1f} s), run {t2 - t1:.1f} s (cpu {c2 - c1:.1f} s), "
          f"total wall {t2 - t0:.1f} s, cpu {c2 - c0:.1f} s")
    print(f"  pods scheduled {summary['podsScheduled']}, evictions {summary['evictions']} "
          f"(descheduler cycles {result.descheduler_cycles}), kubelet evictions {summary['kubeletEvictions']}, "
          f"OOM kills {summary['oomKills']}, records {len(rec.times)}")
    print(f"  peak RSS {peak_mb:.0f} MiB")
    print("  aim: 5,000 nodes / 150,000 pods in at most 120 s and 2 GB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()

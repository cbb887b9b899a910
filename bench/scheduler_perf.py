"""Scheduler throughput, modelled on kube-scheduler's scheduler_perf (test/integration/scheduler_perf).

Nodes are upstream's node-default template (4 CPU, 32Gi, 110 pods); pods are pod-default (100m, 500Mi).
Each workload creates its nodes and initial pods, schedules the initial pods (not measured), then
creates the measured pods and times the scheduler until the queue is empty. It prints pods/s over the
measured pods only (wall clock, and per CPU-second of this process, which a busy machine disturbs
less) beside the workload's aim (issue 18), and the process's peak memory, and fails if a measured pod
was not placed. SchedulingDaemonSet pins each measured pod to its own node (a DaemonSet pod's required
`matchFields metadata.name`), the PreFilterResult path.

    .venv/bin/python bench/scheduler_perf.py                          # every workload, full size
    .venv/bin/python bench/scheduler_perf.py --scale 0.1              # a quick run (a tenth of every size)
    .venv/bin/python bench/scheduler_perf.py -w SchedulingBasic --profile /tmp/basic.prof

The profile is the default one (every default plugin) when all default plugins are importable; otherwise
the default plugins that exist, with their default weights (the header says which).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubesched.api.objects import Pod, parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import DEFAULT_MULTIPOINT, SchedulerConfig, default_config, parse_scheduler_config
from kubesched.errors import InputError
from kubesched.scheduler.registry import Registry
from kubesched.scheduler.scheduler import Scheduler

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


# ---------------------------------------------------------------- templates


def node_default(i: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    name = f"node-{i}"
    res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, **(labels or {})}},
            "spec": {}, "status": {"capacity": dict(res), "allocatable": dict(res),
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_default(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "sched-perf", "labels": labels or {}},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                                                   "limits": {"cpu": "100m", "memory": "500Mi"}}}],
                     **spec},
            "status": {"phase": "Pending"}}


def with_node_affinity(name: str) -> dict[str, Any]:
    # pod-with-node-affinity.yaml: required zone In [zone1, zone2]; nodes are all labelled zone1.
    return pod_default(name, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zone1", "zone2"]}]}]}}})


def with_topology_spreading(name: str) -> dict[str, Any]:
    # pod-with-topology-spreading.yaml: maxSkew 5 over zones, DoNotSchedule, selecting its own kind.
    return pod_default(name, labels={"color": "blue"}, topologySpreadConstraints=[{
        "maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}}])


def with_pod_anti_affinity(name: str) -> dict[str, Any]:
    # pod-with-pod-anti-affinity.yaml: at most one such pod per hostname.
    return pod_default(name, labels={"color": "green"}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": HOSTNAME}]}})


def pinned_to(node_index: int) -> Callable[[str], dict[str, Any]]:
    """A DaemonSet pod: required node affinity `matchFields metadata.name In [<its node>]`, as the
    DaemonSet controller writes it (pkg/controller/daemon/util ReplaceDaemonSetPodNodeNameNodeAffinity)."""
    def make(name: str) -> dict[str, Any]:
        return pod_default(name, labels={"app": "daemon"}, affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [f"node-{node_index}"]}]}]}}})
    return make


def daemonset_pod(name: str) -> dict[str, Any]:
    # The measured pods are numbered from 0: pod i is pinned to node i.
    return pinned_to(int(name.rsplit("-", 1)[1]))(name)


@dataclass
class Workload:
    name: str
    nodes: int
    init_pods: int
    measure_pods: int
    node: Callable[[int], dict[str, Any]]
    init_pod: Callable[[str], dict[str, Any]]
    measure_pod: Callable[[str], dict[str, Any]]
    aim: int  # pods/s this workload should reach at full size (issue 18)


ZONES3 = ("moon-1", "moon-2", "moon-3")

WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("SchedulingBasic", 5000, 1000, 10000, node_default, pod_default, pod_default, 10000),
    Workload("SchedulingNodeAffinity", 5000, 1000, 10000, lambda i: node_default(i, {ZONE: "zone1"}),
             with_node_affinity, with_node_affinity, 6000),
    Workload("TopologySpreading", 5000, 1000, 10000, lambda i: node_default(i, {ZONE: ZONES3[i % 3]}),
             pod_default, with_topology_spreading, 6000),
    Workload("SchedulingPodAntiAffinity", 5000, 1000, 1000, node_default,
             with_pod_anti_affinity, with_pod_anti_affinity, 3000),
    # One DaemonSet pod per node, pinned by matchFields (upstream's PreFilterResult path): aim as a plain pod.
    Workload("SchedulingDaemonSet", 5000, 1000, 5000, node_default, pod_default, daemonset_pod, 10000),
]}


# ---------------------------------------------------------------- the profile


def bench_config(registry: Registry) -> tuple[SchedulerConfig, str]:
    """The default profile when every default plugin imports; else the default plugins that do."""
    missing = []
    for name, _ in DEFAULT_MULTIPOINT:
        try:
            registry.get(name)
        except (InputError, KeyError):
            missing.append(name)
    if not missing:
        return default_config(), "default profile (every default plugin)"
    enabled = [{"name": n, **({"weight": w} if w else {})} for n, w in DEFAULT_MULTIPOINT if n not in missing]
    cfg = parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                  "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                                           "enabled": enabled}}}]})
    return cfg, f"default plugins without {', '.join(missing)} (not importable yet)"


# ---------------------------------------------------------------- running


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, t: float) -> None:
        self.t = max(self.t, t)


def _scaled(n: int, scale: float) -> int:
    return max(1, int(round(n * scale)))


def _add_pods(sched: Scheduler, make: Callable[[str], dict[str, Any]], prefix: str, n: int) -> list[Pod]:
    pods = [parse_pod(make(f"{prefix}-{i}")) for i in range(n)]
    for p in pods:
        sched.cluster.add(p)  # the scheduler's event handler enqueues it
    return pods


def run_workload(w: Workload, cfg: SchedulerConfig, registry: Registry, scale: float,
                 profile_path: str | None = None) -> dict[str, Any]:
    nodes, init_pods, measure_pods = _scaled(w.nodes, scale), _scaled(w.init_pods, scale), _scaled(w.measure_pods, scale)
    cluster = ClusterState()
    for i in range(nodes):
        cluster.add(parse_node(w.node(i)))
    clock = Clock()
    sched = Scheduler(cluster, cfg, registry, seed=0, clock=clock)

    _add_pods(sched, w.init_pod, "init", init_pods)
    sched.run_until_idle(advance=clock.advance)
    measured = _add_pods(sched, w.measure_pod, "measured", measure_pods)

    gc.collect()
    profiler = cProfile.Profile() if profile_path else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    sched.run_until_idle(advance=clock.advance)
    if profiler is not None:
        profiler.disable()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if profiler is not None and profile_path:
        profiler.dump_stats(profile_path)

    unplaced = [p.key for p in measured if not cluster.pods[p.key].node_name]
    return {"workload": w.name, "nodes": nodes, "initPods": init_pods, "measuredPods": measure_pods,
            "seconds": elapsed, "podsPerSecond": measure_pods / elapsed if elapsed > 0 else float("inf"),
            "cpuSeconds": cpu, "podsPerCpuSecond": measure_pods / cpu if cpu > 0 else float("inf"),
            "unplaced": unplaced}


def peak_memory_mib() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-w", "--workload", action="append", choices=sorted(WORKLOADS),
                    help="workload to run (repeatable; default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every size (nodes, pods) by this")
    ap.add_argument("--nodes", type=int, help="override the number of nodes")
    ap.add_argument("--init-pods", type=int, help="override the number of initial pods")
    ap.add_argument("--measure-pods", type=int, help="override the number of measured pods")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each workload this many times and report the fastest (a busy machine only slows runs)")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the measured phase into FILE (one workload)")
    args = ap.parse_args(argv)

    registry = Registry()
    cfg, what = bench_config(registry)
    names = args.workload or list(WORKLOADS)
    print(f"profile: {what}")
    print(f"{'workload':<28}{'nodes':>7}{'init':>7}{'measured':>10}{'seconds':>10}{'pods/s':>10}"
          f"{'cpu s':>8}{'pods/cpu-s':>12}{'aim':>8}")
    failed = False
    for name in names:
        w = WORKLOADS[name]
        w = Workload(w.name, args.nodes or w.nodes, args.init_pods if args.init_pods is not None else w.init_pods,
                     args.measure_pods or w.measure_pods, w.node, w.init_pod, w.measure_pod, w.aim)
        runs = [run_workload(w, cfg, registry, args.scale, args.profile) for _ in range(max(1, args.repeat))]
        res = min(runs, key=lambda r: r["seconds"])
        res["cpuSeconds"] = min(r["cpuSeconds"] for r in runs)
        res["podsPerCpuSecond"] = max(r["podsPerCpuSecond"] for r in runs)
        res["unplaced"] = [k for r in runs for k in r["unplaced"]]
        print(f"{res['workload']:<28}{res['nodes']:>7}{res['initPods']:>7}{res['measuredPods']:>10}"
              f"{res['seconds']:>10.2f}{res['podsPerSecond']:>10.0f}{res['cpuSeconds']:>8.2f}"
              f"{res['podsPerCpuSecond']:>12.0f}{w.aim:>8}", flush=True)
        if res["unplaced"]:
            failed = True
            print(f"  FAILED: {len(res['unplaced'])} measured pods not placed, e.g. {res['unplaced'][:3]}")
        if args.profile:
            pstats.Stats(args.profile).sort_stats("cumulative").print_stats(25)
    print(f"peak memory: {peak_memory_mib():.0f} MiB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

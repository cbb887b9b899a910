"""Loading a snapshot at Kubernetes' scalability limits: 5,000 nodes and 150,000 pods (not run as a test).

    .venv/bin/python bench/load_snapshot.py [--nodes 5000] [--pods 150000] [--file PATH] [--profile OUT]

Writes the snapshot once (a kubectl `List` as `kubectl get nodes,pods -A -o json` prints it, compact JSON,
about 95 MB at full size) to `--file` (default: the temporary directory), then measures, each in a fresh
process so that peak memory is its own:

- `json.load` of the file alone (the reference: what reading the document costs at all);
- kubesched's load: `load_snapshot` and `ClusterState.from_snapshot` (every object parsed, every pod
  accounted on its node).

It prints wall-clock and CPU seconds (`time.process_time`: on a busy machine the CPU time is the figure to
compare), the ratio of our load to `json.load` (aim ≤ 1.5×) and the peak RSS of each process
(`resource.getrusage`, aim ≤ 600 MB for our load). `--profile OUT` writes a cProfile of our load.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AIM_RATIO = 1.5
AIM_PEAK_MB = 600
ZONES = ("zone-a", "zone-b", "zone-c")
CPU_REQUESTS = ("50m", "100m", "250m", "500m", "1", "1500m", "2")
MEMORY_REQUESTS = ("64Mi", "128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "1.5Gi", "300M")


def _node(i: int) -> dict:
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"6f1c-node-{i:08d}", "creationTimestamp": "2025-01-01T00:00:00Z",
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.8xlarge",
                                "topology.kubernetes.io/region": "region-1",
                                "topology.kubernetes.io/zone": ZONES[i % 3]}},
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}] if i % 97 == 0 else [],
                 **({"unschedulable": True} if i % 251 == 0 else {})},
        "status": {"capacity": {"cpu": "32", "memory": "131811840Ki", "pods": "110", "ephemeral-storage": "100Gi"},
                   "allocatable": {"cpu": "31850m", "memory": "128Gi", "pods": "110",
                                   "ephemeral-storage": "95Gi"},
                   "conditions": [{"type": "MemoryPressure", "status": "False"},
                                  {"type": "DiskPressure", "status": "False"},
                                  {"type": "PIDPressure", "status": "False"},
                                  {"type": "Ready", "status": "True"}],
                   "images": [{"names": [f"registry.example/app-{j}:1.{j}"], "sizeBytes": 100_000_000 + j}
                              for j in range(i % 4)]},
    }


def _pod(i: int, rng: random.Random, nodes: int) -> dict:
    app = f"app-{i // 30:05d}"
    ns = f"team-{i % 40:02d}"
    containers = [{"name": "main", "image": f"registry.example/{app}:1.0",
                   "resources": {"requests": {"cpu": rng.choice(CPU_REQUESTS),
                                                            "memory": rng.choice(MEMORY_REQUESTS)}}}]
    if i % 5 == 0:
        containers.append({"name": "sidecar", "image": "registry.example/proxy:2.1",
                           "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                           "ports": [{"containerPort": 15090, "protocol": "TCP"}]})
    spec: dict = {"containers": containers, "priority": 0}
    if i % 10 == 0:
        spec["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                "effect": "NoExecute", "tolerationSeconds": 300},
                               {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                "effect": "NoExecute", "tolerationSeconds": 300}]
    pending = i % 100 == 99
    if not pending:
        spec["nodeName"] = f"node-{rng.randrange(nodes):05d}"
    if i % 50 == 0:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "ScheduleAnyway",
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{app}-{i:07d}", "namespace": ns, "uid": f"0c5e7a1e-{i:012d}",
                     "creationTimestamp": "2025-01-02T03:04:05Z",
                     "labels": {"app": app, "pod-template-hash": "7d9f8c6b5"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-7d9f8c6b5",
                                          "uid": f"rs-{i // 30:08d}", "controller": True}]},
        "spec": spec,
        "status": {"phase": "Pending"} if pending else
        {"phase": "Running", "qosClass": "Burstable", "startTime": "2025-01-02T03:04:09Z"},
    }


def write_snapshot(path: Path, nodes: int, pods: int, seed: int = 1) -> None:
    """A kubectl List of `nodes` nodes and `pods` pods (most bound, 1 % pending), written item by item."""
    rng = random.Random(seed)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        f.write('{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[')
        sep = ""
        for i in range(nodes):
            f.write(sep + json.dumps(_node(i), separators=(",", ":")))
            sep = ","
        for i in range(pods):
            f.write(sep + json.dumps(_pod(i, rng, nodes), separators=(",", ":")))
        f.write("]}\n")
    tmp.replace(path)


def _peak_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measure(mode: str, path: str, profile: str | None) -> None:
    """In a child process: run one load and print its figures as JSON on stdout."""
    if mode == "json":
        w0, c0 = time.perf_counter(), time.process_time()
        with open(path) as f:
            doc = json.load(f)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        detail = {"items": len(doc["items"])}
    else:
        from kubesched.api.snapshot import load_snapshot
        from kubesched.cluster.state import ClusterState

        prof = cProfile.Profile(time.process_time) if profile else None
        w0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        snap = load_snapshot(path)
        w1, c1 = time.perf_counter(), time.process_time()
        state = ClusterState.from_snapshot(snap)
        if prof:
            prof.disable()
            prof.dump_stats(profile)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        detail = {"parse_wall": w1 - w0, "parse_cpu": c1 - c0, "nodes": state.num_nodes, "pods": len(state.pods),
                  "requested_cpu": int(state.table.requested[: state.table.n, 0].sum())}
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": _peak_mb(), **detail}))


def _run_child(mode: str, path: Path, profile: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--file", str(path)] + (["--profile", profile] if profile else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--file", help="the snapshot to load (written first if missing)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each load; the best is shown")
    ap.add_argument("--profile", help="write a cProfile of our load to this file")
    ap.add_argument("--child", choices=("json", "ours"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    path = Path(args.file) if args.file else Path(tempfile.gettempdir()) / f"kubesched-snapshot-{args.nodes}x{args.pods}.json"
    if args.child:
        _measure(args.child, str(path), args.profile)
        return 0
    if not path.exists():
        print(f"writing {path} ({args.nodes} nodes, {args.pods} pods) ...", flush=True)
        write_snapshot(path, args.nodes, args.pods)
    print(f"snapshot: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    ref = min((_run_child("json", path, None) for _ in range(args.repeat)), key=lambda r: r["cpu"])
    ours = min((_run_child("ours", path, args.profile) for _ in range(args.repeat)), key=lambda r: r["cpu"])
    ratio_cpu, ratio_wall = ours["cpu"] / ref["cpu"], ours["wall"] / ref["wall"]
    print(f"json.load:        {ref['wall']:6.2f} s wall  {ref['cpu']:6.2f} s CPU  peak {ref['peak_mb']:5.0f} MB")
    print(f"kubesched load:   {ours['wall']:6.2f} s wall  {ours['cpu']:6.2f} s CPU  peak {ours['peak_mb']:5.0f} MB"
          f"  (load_snapshot {ours['parse_cpu']:.2f} s CPU, ClusterState {ours['cpu'] - ours['parse_cpu']:.2f} s CPU;"
          f" {ours['nodes']} nodes, {ours['pods']} pods)")
    ok_ratio, ok_peak = ratio_cpu <= AIM_RATIO, ours["peak_mb"] <= AIM_PEAK_MB
    print(f"ratio to json.load: {ratio_cpu:.2f}x CPU ({ratio_wall:.2f}x wall); aim <= {AIM_RATIO}x: "
          f"{'met' if ok_ratio else 'NOT met'}")
    print(f"peak RSS: {ours['peak_mb']:.0f} MB; aim <= {AIM_PEAK_MB} MB: {'met' if ok_peak else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

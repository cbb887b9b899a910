"""Live scheduler and descheduler against the API server test double: throughput and peak memory.

    .venv/bin/python bench/live_processes.py                 # all three runs
    .venv/bin/python bench/live_processes.py --only scheduler --nodes 1000 --pods 10000

1. `kubesched scheduler`: NODES nodes and PODS pending pods created at once; pods bound per second end to end
   (from the process's start — informer sync included — to the last pod bound), and from the first binding
   to the last;
2. the same with every API answer 5 ms late;
3. one `kubesched descheduler` cycle (LowNodeUtilization + RemoveDuplicates, eviction limits) on D_NODES
   nodes and D_PODS running pods: wall time of the process, the cycle's time from its log, evictions.

Peak memory is the process's VmHWM (read from /proc just before it is stopped). The double runs in this
process (its own cost is not in the numbers). Not a test: prints numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kube_apiserver_double import KubeAPIServerDouble  # noqa: E402
from tests.live_processes import node, pending, running  # noqa: E402


def vm_hwm(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start(args: list[str], log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kubesched", *args], stdout=subprocess.PIPE,
                            stderr=open(log, "w"), cwd=ROOT, text=True)  # noqa: SIM115


def bound_count(api: KubeAPIServerDouble) -> int:
    _, pods = api.store.current(api.resource("Pod"), "default")
    return sum(1 for p in pods if p["spec"].get("nodeName"))


def bench_scheduler(nodes: int, pods: int, delay: float, tmp: Path) -> dict[str, Any]:
    with KubeAPIServerDouble(history_limit=10 * pods, bookmark_interval=5.0) as api:
        api.add(*[node(f"n{i:05d}", cpu="16", memory="64Gi") for i in range(nodes)])
        shapes = [("100m", "128Mi"), ("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi")]
        api.add(*[pending(f"p{i:06d}", cpu=shapes[i % 4][0], memory=shapes[i % 4][1]) for i in range(pods)])
        if delay:
            api.faults.delay(delay)
        kc = api.kubeconfig(tmp / "kc")
        log = tmp / f"scheduler-{delay}.log"
        t0 = time.monotonic()
        proc = start(["scheduler", "--kubeconfig", str(kc), "--port", "0"], log)
        first = None
        peak = 0.0
        try:
            while True:
                n = bound_count(api)
                if n and first is None:
                    first = time.monotonic()
                if n >= pods:
                    break
                if proc.poll() is not None:
                    raise SystemExit(f"the scheduler exited: {log.read_text()[-2000:]}")
                peak = max(peak, vm_hwm(proc.pid))
                time.sleep(0.2)
            t_end = time.monotonic()
            peak = max(peak, vm_hwm(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        assert first is not None
        return {"nodes": nodes, "pods": pods, "api_delay_ms": delay * 1000,
                "end_to_end_s": round(t_end - t0, 1), "pods_per_s_end_to_end": round(pods / (t_end - t0), 1),
                "first_to_last_binding_s": round(t_end - first, 1),
                "pods_per_s_bindings": round(pods / max(t_end - first, 1e-9), 1), "peak_rss_mib": round(peak)}


POLICY = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
          "maxNoOfPodsToEvictPerNode": 5, "maxNoOfPodsToEvictTotal": 500,
          "profiles": [{"name": "default", "pluginConfig": [
              {"name": "DefaultEvictor", "args": {}}, {"name": "RemoveDuplicates", "args": {}},
              {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                                                      "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50}}}],
              "plugins": {"balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]}}}]}


def bench_descheduler(nodes: int, pods: int, tmp: Path, dry_run: bool) -> dict[str, Any]:
    with KubeAPIServerDouble(history_limit=pods + 10000, bookmark_interval=5.0) as api:
        api.add(*[node(f"n{i:05d}", cpu="32", memory="128Gi") for i in range(nodes)])
        objs = []
        for i in range(pods):
            # A skewed spread: the first tenth of the nodes carry three times their share.
            hot = i % 4 == 0
            n = (i // 4) % (nodes // 10) if hot else i % nodes
            p = running(f"p{i:06d}", f"n{n:05d}", cpu="250m", labels={"app": f"app{i % 500}"})
            p["metadata"]["ownerReferences"][0].update(name=f"rs{i % 500}", uid=f"rs-uid-{i % 500}")
            objs.append(p)
        api.add(*objs)
        del objs
        pol = tmp / "policy.yaml"
        pol.write_text(json.dumps(POLICY))
        kc = api.kubeconfig(tmp / "kc")
        log = tmp / "descheduler.log"
        t0 = time.monotonic()
        args = ["descheduler", "--kubeconfig", str(kc), "--policy", str(pol), "--port", "0", "-o", "json",
                "--descheduling-interval", "1h"]
        if dry_run:
            args.append("--dry-run")
        proc = start(args, log)
        peak = 0.0
        try:
            while "Descheduling cycle finished" not in log.read_text():
                if proc.poll() is not None:
                    raise SystemExit(f"the descheduler exited: {log.read_text()[-2000:]}")
                peak = max(peak, vm_hwm(proc.pid))
                time.sleep(0.2)
            wall = time.monotonic() - t0
            peak = max(peak, vm_hwm(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        text = log.read_text()
        m = re.search(r'"Descheduling cycle finished".* evicted=(\d+) .*seconds=([\d.]+)', text)
        synced = re.search(r'"Informers synced"', text)
        assert m is not None and synced is not None
        return {"nodes": nodes, "pods": pods, "dry_run": dry_run, "process_wall_s": round(wall, 1),
                "cycle_s": float(m[2]), "evicted": int(m[1]), "peak_rss_mib": round(peak)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["scheduler", "descheduler"], default=None)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--d-nodes", type=int, default=5000)
    ap.add_argument("--d-pods", type=int, default=150000)
    ap.add_argument("--dry-run", action="store_true", help="the descheduler cycle sends no eviction")
    a = ap.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if a.only in (None, "scheduler"):
            for delay in (0.0, 0.005):
                print(json.dumps(bench_scheduler(a.nodes, a.pods, delay, tmp)), flush=True)
        if a.only in (None, "descheduler"):
            print(json.dumps(bench_descheduler(a.d_nodes, a.d_pods, tmp, a.dry_run)), flush=True)


if __name__ == "__main__":
    main()

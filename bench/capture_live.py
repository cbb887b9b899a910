"""Benchmark of `kubesched capture` (prints numbers; not a test).

1. Objects: the API server test double holding NODES nodes and PODS pods (plus their ReplicaSets); the
   `kubesched capture` command runs as a separate process against it. Wall time and the capture process's
   peak memory (max RSS).
2. Usage history: a real Prometheus loaded (promtool tsdb create-blocks-from openmetrics) with HOURS of
   cAdvisor series at a 1-minute scrape for HISTORY_PODS pods; capture reads it at a 1-minute step.
   Wall time and peak memory of the capture process, and the time to build the TSDB blocks.

    python bench/capture_live.py [--nodes 5000] [--pods 150000] [--history-pods 3000] [--hours 24] [--skip-objects]
                                 [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kube_apiserver_double import KubeAPIServerDouble  # noqa: E402
from tests.prometheus_server import PodHistory, cadvisor_history, prometheus_with  # noqa: E402

KUBESCHED = [sys.executable, "-m", "kubesched"]


def nodes(n: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Node",
             "metadata": {"name": f"node-{i:05d}", "uid": f"node-uid-{i}", "creationTimestamp": "2024-01-01T00:00:00Z",
                          "labels": {"kubernetes.io/hostname": f"node-{i:05d}", "topology.kubernetes.io/zone": f"z{i % 3}",
                                     "node.kubernetes.io/instance-type": "m5.2xlarge"}},
             "spec": {"providerID": f"aws:///z/i-{i:08x}"},
             "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                        "allocatable": {"cpu": "7910m", "memory": "31Gi", "pods": "110", "ephemeral-storage": "95Gi"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                        "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Bottlerocket", "architecture": "amd64"}}}
            for i in range(n)]


def workloads(n_pods: int, n_nodes: int, per_rs: int = 10) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in range(n_pods // per_rs):
        ns = f"team-{r % 50}"
        rs = f"app-{r}-7d9c5"
        labels = {"app": f"app-{r}", "pod-template-hash": "7d9c5"}
        tmpl = {"metadata": {"labels": labels}, "spec": {"containers": [{
            "name": "app", "image": f"registry.example/app-{r}:1.2.3", "ports": [{"containerPort": 8080}],
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}}]}}
        out.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": rs, "namespace": ns, "uid": f"rs-{r}", "labels": labels},
                    "spec": {"replicas": per_rs, "selector": {"matchLabels": labels}, "template": tmpl}})
        for k in range(per_rs):
            i = r * per_rs + k
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"{rs}-{i:05x}"[-63:], "namespace": ns, "uid": f"pod-uid-{i}", "labels": labels,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": f"rs-{r}",
                                     "controller": True, "blockOwnerDeletion": True}],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                                   "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:x": {}}}]},
                "spec": {**tmpl["spec"], "nodeName": f"node-{i % n_nodes:05d}", "schedulerName": "default-scheduler",
                         "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "priority": 0,
                         "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                          "effect": "NoExecute", "tolerationSeconds": 300}]},
                "status": {"phase": "Running", "qosClass": "Burstable", "podIP": "10.0.0.1",
                           "startTime": "2024-01-01T00:00:05Z",
                           "conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                           "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "started": True,
                                                  "image": f"registry.example/app-{r}:1.2.3",
                                                  "state": {"running": {"startedAt": "2024-01-01T00:00:05Z"}}}]}})
    return out


def _hwm_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def run_capture(args: list[str]) -> tuple[float, float, dict[str, Any]]:
    """(wall seconds, peak RSS MiB of the capture process alone, its JSON summary).

    The peak is the process's VmHWM, polled: rusage's maxrss would also count the bench process it was
    forked from (Linux keeps the high-water mark across execve)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*KUBESCHED, "capture", *args, "--no-progress", "--json"], stdout=out, stderr=err,
                                text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, _hwm_mib(proc.pid))
            time.sleep(0.1)
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"capture failed ({proc.returncode}): {err.read().strip()}")
        return wall, peak, json.loads(out.read())


def bench_objects(n_nodes: int, n_pods: int, work: Path, fmt: str) -> None:
    t0 = time.monotonic()
    # The double is slower than a real API server: keep paged LISTs' snapshots for the whole run.
    api = KubeAPIServerDouble(history_limit=1000, continue_ttl=7200.0)
    api.add(nodes(n_nodes))
    api.add(workloads(n_pods, n_nodes))
    load = time.monotonic() - t0
    with api:
        api.kubeconfig(work / "kubeconfig")
        wall, rss, summary = run_capture(["--kubeconfig", str(work / "kubeconfig"), "--out", str(work / f"objects-{fmt}"),
                                          "--format", fmt])
    size = (work / f"objects-{fmt}" / f"snapshot.{fmt}").stat().st_size / 2**20
    print(f"objects: {n_nodes} nodes, {summary['objects']['Pod']} pods, {summary['objects']['ReplicaSet']} ReplicaSets "
          f"from the double ({summary['requests']} requests): capture {wall:.1f} s wall, peak RSS {rss:.0f} MiB, "
          f"snapshot.{fmt} {size:.0f} MiB (double loaded in {load:.1f} s)")


def bench_history(n_pods: int, hours: float, work: Path, out: Path) -> None:
    end = 1704067200.0
    start = end - hours * 3600
    pods = [PodHistory(f"team-{i % 50}", f"app-{i // 10}-7d9c5-{i:05x}", f"node-{i % max(1, n_pods // 30):05d}",
                       start - 600, end + 120, (lambda c: (lambda t: c))(0.1 + (i % 7) * 0.05),
                       (lambda m: (lambda t: m))(float((200 + i % 300) * 2**20)))
            for i in range(n_pods)]
    built, size = work / "tsdb-built", f"{n_pods} pods x {hours:g} h"
    om: Path | None = None
    if (work / "tsdb").exists() and not (built.exists() and built.read_text() == size):
        raise SystemExit(f"{work / 'tsdb'} holds other blocks than {size}: give another --work")
    if built.exists():
        # --work with blocks of this size built by an earlier run: serve them again.
        print(f"history: reusing the TSDB blocks in {work / 'tsdb'}")
    else:
        om = work / "history.om"
        t0 = time.monotonic()
        with om.open("w") as fh:
            samples = cadvisor_history(fh, pods, start - 600, end + 120, scrape=60.0)
        gen = time.monotonic() - t0
        print(f"history input: OpenMetrics {samples} samples ({om.stat().st_size / 2**30:.1f} GiB) written in {gen:.1f} s",
              flush=True)
    api = KubeAPIServerDouble()
    api.add(nodes(max(1, n_pods // 30)))
    t0 = time.monotonic()
    with prometheus_with(om, work, ready_timeout=1800) as url:
        blocks = time.monotonic() - t0
        if om is not None:
            om.unlink()
            built.write_text(size)
        print(f"history input: {'promtool blocks + ' if om is not None else ''}Prometheus ready in {blocks:.1f} s",
              flush=True)
        with api:
            api.kubeconfig(work / "kubeconfig-h")
            wall, rss, summary = run_capture(["--kubeconfig", str(work / "kubeconfig-h"), "--out", str(out),
                                              "--prometheus", url, "--since", f"{int(hours * 60)}m", "--step", "1m",
                                              "--now", "2024-01-01T00:00:00Z"])
    h = summary["history"]
    size = sum(f.stat().st_size for f in out.iterdir()) / 2**20
    print(f"history: {n_pods} pods x {hours:g} h at 1 m ({h['points']} steps, {h['usageRows']} usage rows, "
          f"{h['rangeQueries']} range queries): capture {wall:.1f} s wall, peak RSS {rss:.0f} MiB, output {size:.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=150000)
    ap.add_argument("--history-pods", type=int, default=3000)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--format", default="yaml", choices=["yaml", "json"])
    ap.add_argument("--skip-objects", action="store_true")
    ap.add_argument("--skip-history", action="store_true")
    ap.add_argument("--work", type=Path, help="keep the Prometheus TSDB blocks here and reuse them when a later run "
                                              "asks for the same --history-pods and --hours")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubesched-capture-bench-") as d:
        work = Path(d)
        if not a.skip_objects:
            bench_objects(a.nodes, a.pods, work, a.format)
        if not a.skip_history:
            if a.work is not None:
                a.work.mkdir(parents=True, exist_ok=True)
            bench_history(a.history_pods, a.hours, a.work or work, work / "history")


if __name__ == "__main__":
    main()

"""`kubesched capture`: a live cluster (and its usage history) written as a scenario `simulate` runs as is.

What is read (get/list only; see deploy/capture-clusterrole.yaml): every kind the scheduler, the descheduler
and the simulator read — Namespaces, Nodes, Pods, PriorityClasses, PodDisruptionBudgets, Services,
ReplicationControllers, ReplicaSets, Deployments, StatefulSets, DaemonSets, Jobs, PersistentVolumes,
PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities — and, where the cluster
serves them, metrics.k8s.io NodeMetrics and PodMetrics. Never Secrets, ConfigMaps or anything else.

What is written in the output folder (all at once: a failed capture leaves nothing behind):
- `snapshot.yaml` (or `.json`): one kubectl-style `List`; each object exactly as the API returned it, with the
  `kind`/`apiVersion` a typed list leaves out filled in (as kubectl does) and `metadata.managedFields`
  dropped; the metrics lists as the API returned them (items without `kind`), nested in the List;
- with `--prometheus`: `usage.parquet|csv` (each pod's CPU and memory at every step of the window),
  `pods.parquet|csv` (where and when each pod ran), `node-usage.parquet|csv` (what the nodes reported);
- `scenario.yaml`: replays the capture — the snapshot, the recorded pods (`spec.replay`), the usage traces,
  the window as the duration — with a `baseline` variant (no descheduler) and `lnu-usage` (the descheduler's
  LowNodeUtilization on actual usage from metrics-server, to edit).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar

from kubesched.errors import InputError
from kubesched.live.client import ApiStatusError, KubeClient, ResourceType
from kubesched.live.history import History, Prometheus, Queries, TableWriter, parquet_available
from kubesched.sim.units import format_duration

CAPTURED: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False),
    ResourceType("", "v1", "nodes", "Node", False),
    ResourceType("", "v1", "pods", "Pod", True),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    ResourceType("", "v1", "services", "Service", True),
    ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True),
    ResourceType("apps", "v1", "deployments", "Deployment", True),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True),
    ResourceType("batch", "v1", "jobs", "Job", True),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
    ResourceType("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
)
METRICS: tuple[ResourceType, ...] = (
    ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False),
    ResourceType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True),
)
OWNER_KINDS = ("ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController")


@dataclass
class CaptureOptions:
    out: Path
    fmt: str = "yaml"  # yaml | json
    prometheus: str | None = None
    prometheus_token: str | None = None
    since: float = 86400.0
    step: float = 60.0
    queries: Queries = field(default_factory=Queries)
    page_size: int = 500
    duration: float = 3600.0  # the scenario's duration without history
    now: float | None = None  # the end of the window (default: the wall clock)
    max_points: int = 11000
    table_format: str = "auto"  # auto | parquet | csv


class Progress:
    """What the command reports while it works (a rich progress bar on a terminal, or nothing)."""

    def kind_listed(self, kind: str, count: int, remaining: int | None) -> None:
        pass

    def kind_done(self, kind: str, count: int) -> None:
        pass

    def history(self, done: int, total: int) -> None:
        pass

    def close(self) -> None:
        pass


class RichProgress(Progress):
    def __init__(self) -> None:
        self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=Console(stderr=True), transient=False)
        self.bar.start()
        self.tasks: dict[str, Any] = {}

    def kind_listed(self, kind: str, count: int, remaining: int | None) -> None:
        task = self.tasks.get(kind)
        if task is None:
            task = self.tasks[kind] = self.bar.add_task(f"list {kind}", total=None)
        total = count + remaining if remaining is not None else None
        self.bar.update(task, completed=count, total=total)

    def kind_done(self, kind: str, count: int) -> None:
        task = self.tasks.get(kind)
        if task is None:
            task = self.tasks[kind] = self.bar.add_task(f"list {kind}", total=count)
        self.bar.update(task, completed=count, total=count)

    def history(self, done: int, total: int) -> None:
        task = self.tasks.get("__history")
        if task is None:
            task = self.tasks["__history"] = self.bar.add_task("usage history (steps)", total=total)
        self.bar.update(task, completed=done, total=total)

    def close(self) -> None:
        self.bar.stop()


# ---------------------------------------------------------------- the snapshot file


class ListWriter:
    """A kubectl-style List written item by item (YAML or JSON), so that no kind is held in memory whole."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.fmt = fmt
        self.fh = path.open("w")
        self.first = True
        if fmt == "json":
            self.fh.write('{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [\n')
        else:
            self.fh.write("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n")
        self._dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    def write(self, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        if self.fmt == "json":
            for item in items:
                self.fh.write(("" if self.first else ",\n") + json.dumps(item, separators=(",", ":")))
                self.first = False
        else:
            self.fh.write(yaml.dump(items, Dumper=self._dumper, default_flow_style=False, sort_keys=False,
                                    allow_unicode=True, width=1 << 30))
            self.first = False

    def close(self) -> None:
        if self.fmt == "json":
            self.fh.write("\n]}\n")
        elif self.first:
            self.fh.write("  []\n")
        self.fh.close()


def as_listed(item: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """A list item as `kubectl get -o yaml` prints it: kind and apiVersion first, no managedFields."""
    out: dict[str, Any] = {"apiVersion": rt.api_version, "kind": rt.kind}
    for k, v in item.items():
        if k in ("apiVersion", "kind"):
            continue
        if k == "metadata" and isinstance(v, dict) and "managedFields" in v:
            v = {mk: mv for mk, mv in v.items() if mk != "managedFields"}
        out[k] = v
    return out


# ---------------------------------------------------------------- capture


@dataclass
class PodInfo:
    node: str
    phase: str
    owner: str  # Kind/name


@dataclass
class CaptureResult:
    server: str
    captured_at: float
    counts: dict[str, int] = field(default_factory=dict)
    not_served: list[str] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    history: Any = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _pages(client: KubeClient, rt: ResourceType, page_size: int) -> Iterator[tuple[list[dict[str, Any]], int | None]]:
    for page in client.list_pages(rt, limit=page_size):
        yield page.items, page.remaining


def capture(client: KubeClient, opts: CaptureOptions, progress: Progress | None = None) -> CaptureResult:
    """Read the cluster (and Prometheus) and write the capture into opts.out, atomically."""
    progress = progress or Progress()
    began = time.monotonic()
    now = opts.now if opts.now is not None else time.time()
    result = CaptureResult(client.server, now)
    out = opts.out
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", field="--out", file=str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".capture-", dir=out.parent))
    try:
        _capture_into(client, opts, progress, result, tmp)
        out.mkdir(parents=True, exist_ok=True)
        for f in sorted(tmp.iterdir()):
            target = out / f.name
            if target.exists():
                target.unlink()
            shutil.move(str(f), str(target))
            result.files.append(str(target))
    finally:
        progress.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result.seconds = time.monotonic() - began
    return result


def _capture_into(client: KubeClient, opts: CaptureOptions, progress: Progress, result: CaptureResult,
                  tmp: Path) -> None:
    ext = "json" if opts.fmt == "json" else "yaml"
    writer = ListWriter(tmp / f"snapshot.{ext}", opts.fmt)
    try:
        for rt in CAPTURED:
            n = 0
            try:
                for items, remaining in _pages(client, rt, opts.page_size):
                    listed = [as_listed(i, rt) for i in items]
                    if rt.kind == "Pod":
                        for p in listed:
                            _note_pod(result, p)
                    writer.write(listed)
                    n += len(listed)
                    progress.kind_listed(rt.kind, n, remaining)
            except ApiStatusError as e:
                if e.status == 404 and n == 0:
                    result.not_served.append(rt.kind)
                    continue
                raise
            result.counts[rt.kind] = n
            progress.kind_done(rt.kind, n)
        for rt in METRICS:
            try:
                doc = client.get(rt.path())
            except ApiStatusError as e:
                if e.status in (404, 503):
                    result.not_served.append(rt.kind)
                    continue
                raise
            # As `kubectl get --raw` returns it: a NodeMetricsList / PodMetricsList, items without kind.
            doc.setdefault("kind", f"{rt.kind}List")
            doc.setdefault("apiVersion", rt.api_version)
            writer.write([doc])
            result.metrics[rt.kind] = len(doc.get("items") or [])
            progress.kind_done(rt.kind, result.metrics[rt.kind])
    finally:
        writer.close()
    history = None
    parquet = opts.table_format == "parquet" or (opts.table_format == "auto" and parquet_available())
    suffix = "parquet" if parquet else "csv"
    if opts.prometheus:
        end = (opts.now if opts.now is not None else result.captured_at) // opts.step * opts.step
        start = end - opts.since
        prom = Prometheus(opts.prometheus, opts.prometheus_token)
        history = History(prom, opts.queries, start, end, opts.step, max_points=opts.max_points,
                          progress=progress.history)
        usage = TableWriter(tmp / f"usage.{suffix}", [("pod", "string"), ("node", "string"), ("t", "int"),
                                                     ("cpu", "float"), ("memory", "float")], parquet)
        try:
            history.fetch_pods(usage)
        finally:
            usage.close()
        nodes = TableWriter(tmp / f"node-usage.{suffix}", [("node", "string"), ("t", "int"), ("cpu", "float"),
                                                           ("memory", "float")], parquet)
        try:
            history.fetch_nodes(nodes)
        finally:
            nodes.close()
        _write_pod_table(tmp / f"pods.{suffix}", history, result, parquet)
        result.history = history.result
        if not history.result.pods_with_usage:
            result.notes.append("Prometheus has no pod usage for the window: check --prometheus and the queries")
    _write_scenario(tmp / "scenario.yaml", opts, result, ext, suffix)


def _note_pod(result: CaptureResult, pod: dict[str, Any]) -> None:
    meta = pod.get("metadata") or {}
    owner = ""
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            owner = f"{ref.get('kind')}/{ref.get('name')}"
    key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
    result.pods[key] = PodInfo(str((pod.get("spec") or {}).get("nodeName") or ""),
                               str((pod.get("status") or {}).get("phase") or ""), owner)


def _write_pod_table(path: Path, history: History, result: CaptureResult, parquet: bool) -> None:
    r = history.result
    rows: dict[str, list[Any]] = {"namespace": [], "pod": [], "node": [], "start": [], "end": [], "owner": []}
    for (ns, pod, node), life in sorted(r.lifetimes.items(), key=lambda kv: (kv[1].first, kv[0])):
        info = result.pods.get(f"{ns}/{pod}")
        rows["namespace"].append(ns)
        rows["pod"].append(pod)
        rows["node"].append(node or (info.node if info else ""))
        rows["start"].append(float(life.first * r.step))
        rows["end"].append(float("nan") if life.last >= r.points - 1 else float((life.last + 1) * r.step))
        rows["owner"].append(info.owner if info else "")
    w = TableWriter(path, [("namespace", "string"), ("pod", "string"), ("node", "string"), ("start", "float"),
                           ("end", "float"), ("owner", "string")], parquet)
    try:
        w.write(rows)
    finally:
        w.close()


LNU_POLICY: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
    "metricsProviders": [{"source": "KubernetesMetrics"}],
    "profiles": [{"name": "usage", "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": True}},
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 30, "memory": 30},
                                                "targetThresholds": {"cpu": 60, "memory": 60},
                                                "metricsUtilization": {"source": "KubernetesMetrics"}}}],
        "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}}}],
}


def _write_scenario(path: Path, opts: CaptureOptions, result: CaptureResult, ext: str, suffix: str) -> None:
    h = result.history
    when = datetime.fromtimestamp(result.captured_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    spec: dict[str, Any] = {
        "description": f"Captured from {result.server} at {when} by kubesched capture"
                       + (f"; usage history from {opts.prometheus}" if h else "; usage at capture time held constant"),
    }
    if h is not None:
        spec["start"] = datetime.fromtimestamp(h.start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        spec["duration"] = format_duration(h.end - h.start)
        spec["usageStep"] = format_duration(h.step)
    else:
        spec["start"] = when
        spec["duration"] = format_duration(opts.duration)
        spec["usageStep"] = format_duration(opts.step)
    spec["startupDelay"] = "0s"
    spec["cluster"] = {"snapshot": f"snapshot.{ext}"}
    if h is not None:
        spec["replay"] = {"pods": f"pods.{suffix}", "placement": "recorded"}
        spec["usageTraces"] = [{"file": f"usage.{suffix}", "columns": {"series": "pod", "time": "t", "cpu": "cpu",
                                                                       "memory": "memory"},
                                "cpuUnit": "1", "memoryUnit": "1", "timeUnit": 1}]
    spec["report"] = {"recordInterval": spec["usageStep"]}
    spec["variants"] = [
        {"name": "baseline", "description": "as captured: the default scheduler, no descheduler", "descheduler": None},
        {"name": "lnu-usage", "description": "LowNodeUtilization on actual usage (metrics-server), every 5m: edit "
                                             "the thresholds", "descheduler": {"policy": LNU_POLICY, "interval": "5m"}},
    ]
    doc = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "capture"}, "spec": spec}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


# ---------------------------------------------------------------- summary


def summary(result: CaptureResult) -> dict[str, Any]:
    out: dict[str, Any] = {"server": result.server,
                           "capturedAt": datetime.fromtimestamp(result.captured_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "objects": dict(result.counts), "metrics": dict(result.metrics),
                           "notServed": list(result.not_served), "files": [Path(f).name for f in result.files],
                           "seconds": round(result.seconds, 3)}
    h = result.history
    if h is not None:
        running = {k for k, p in result.pods.items() if p.node and p.phase not in ("Succeeded", "Failed")}
        out["history"] = {
            "start": datetime.fromtimestamp(h.start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": datetime.fromtimestamp(h.end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "step": format_duration(h.step), "points": h.points,
            "podsWithUsage": len(h.pods_with_usage),
            "capturedPodsWithUsage": len(running & h.pods_with_usage),
            "capturedPodsWithoutUsage": len(running - h.pods_with_usage),
            "podsGoneBeforeCapture": len(h.pods_with_usage - set(result.pods)),
            "nodesWithUsage": len(h.nodes_with_usage), "usageRows": h.usage_rows, "rangeQueries": h.queries,
        }
    out["notes"] = list(result.notes)
    return out


def summary_table(data: dict[str, Any], echo: Callable[[str], None]) -> None:
    echo(f"captured {data['server']} at {data['capturedAt']} in {data['seconds']:.1f}s")
    width = max((len(k) for k in data["objects"]), default=10)
    for kind, n in data["objects"].items():
        echo(f"  {kind:<{width}}  {n:>8}")
    for kind, n in data["metrics"].items():
        echo(f"  {kind:<{width}}  {n:>8}  (metrics.k8s.io)")
    if data["notServed"]:
        echo(f"  not served by this cluster: {', '.join(data['notServed'])}")
    h = data.get("history")
    if h:
        echo(f"usage history {h['start']} .. {h['end']} every {h['step']} ({h['points']} steps, {h['rangeQueries']} "
             f"range queries)")
        echo(f"  running pods with usage history: {h['capturedPodsWithUsage']}, without: {h['capturedPodsWithoutUsage']};"
             f" pods gone before the capture: {h['podsGoneBeforeCapture']}")
    for n in data["notes"]:
        echo(f"note: {n}")
    echo(f"wrote {', '.join(data['files'])}")

"""`kubesched deschedule`: one descheduling cycle over a snapshot, evictions computed and not made.

JSON (`-o json`): `{"evictions": [{"pod", "node", "profile", "plugin", "reason"}], ...}` plus the cycle's
nodes, whether it was skipped, plugin errors and, per node, the requested utilisation before and after the
evictions. The table lists the evictions and the per-node summary.
"""

from __future__ import annotations

from datetime import datetime
from fractions import Fraction
from typing import Any

from rich.console import Console
from rich.table import Table

from kubesched.api.objects import Node
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.selectors import parse_label_selector_string
from kubesched.api.snapshot import gc_frozen, load_snapshot
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import load_descheduler_policy
from kubesched.config.scheduler_config import load_scheduler_config
from kubesched.descheduler import podutil
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.framework import DeschedulerServices
from kubesched.descheduler.loadaware_coherence import check as check_coherence
from kubesched.descheduler.metricscollector import MetricsCollector, read_metrics_objects
from kubesched.descheduler.plugins.nodeutilization import KUBERNETES_METRICS, PROMETHEUS_METRICS
from kubesched.descheduler.registry import default_registry
from kubesched.diagnostics import warn
from kubesched.errors import InputError
from kubesched.metrics.loader import load_metrics, source_from_address
from kubesched.metrics.prometheus import DeschedulerPrometheusClient, PrometheusClient

SUMMARY_RESOURCES = ("cpu", "memory", "pods")
TABLE_NODE_LIMIT = 60


def _percent(used: int | None, cap: int) -> float | None:
    return None if cap <= 0 or used is None else round(used / cap * 100.0, 1)


def _usage_basis(pol: Any) -> str | None:
    """Which usage the policy balances on: "metrics" (metrics.k8s.io: LowNodeUtilization/HighNodeUtilization with
    metricsUtilization from the metrics server, or koordinator's LowNodeLoad), "prometheus", or None (requests)."""
    basis = None
    for prof in pol.profiles:
        for name in ("LowNodeUtilization", "HighNodeUtilization"):
            if name not in prof.enabled("balance"):
                continue
            mu = getattr(prof.plugin_config.get(name), "metrics_utilization", None)
            if mu is None:
                continue
            if mu.source == PROMETHEUS_METRICS:
                basis = basis or "prometheus"
            elif mu.metrics_server or mu.source == KUBERNETES_METRICS:
                basis = "metrics"
        if "LowNodeLoad" in prof.enabled("balance"):
            basis = "metrics"
    return basis


def _utilization(cluster: Any, nodes: list[Node], removed: dict[str, list[Any]],
                 collector: Any = None) -> dict[str, Any]:
    """Per node: requested cpu/memory/pods over allocatable — or, with a metrics collector, actual cpu/memory usage
    (what the policy balances on) — before and after the cycle's evictions."""
    table = cluster.table
    out: dict[str, Any] = {}
    for node in nodes:
        info = cluster.node_info_by_name.get(node.name)
        if info is None:
            continue
        row = info.index
        if collector is not None:
            used = collector.nodes.get(node.name)
            before: dict[str, int | None] = {"cpu": used["cpu"] if used else None,
                                             "memory": used["memory"] if used else None,
                                             "pods": int(table.pod_count[row])}
        else:
            before = {"cpu": int(table.requested[row, table.column["cpu"]]),
                      "memory": int(table.requested[row, table.column["memory"]]),
                      "pods": int(table.pod_count[row])}
        after = dict(before)
        for pod in removed.get(node.name, ()):
            if collector is not None:
                for r, unit in (("cpu", 1000), ("memory", 1)):
                    u = collector.pod_usage_total(pod.namespace, pod.name, r)
                    if after[r] is not None and u is not None:
                        after[r] = int(after[r] - u * unit)  # type: ignore[operator]
            else:
                req = podutil.pod_request_quantities(pod)
                after["cpu"] = int(after["cpu"] or 0) - milli_value_of(req.get("cpu", Fraction(0)))
                after["memory"] = int(after["memory"] or 0) - value_of(req.get("memory", Fraction(0)))
            after["pods"] = int(after["pods"] or 0) - 1
        alloc = node.allocatable if node.allocatable else node.capacity
        cap = {"cpu": milli_value_of(alloc.get("cpu", Fraction(0))), "memory": value_of(alloc.get("memory", Fraction(0))),
               "pods": value_of(alloc.get("pods", Fraction(0)))}
        out[node.name] = {
            "before": {r: _percent(before[r], cap[r]) for r in SUMMARY_RESOURCES},
            "after": {r: _percent(after[r], cap[r]) for r in SUMMARY_RESOURCES},
            "evicted": len(removed.get(node.name, ())),
        }
    return out


def deschedule_command(snapshot: str | Any, policy: str, metrics: str | None, min_ready_nodes: int,
                       scheduler_config: str | None, now: datetime, seed: int,
                       enforce_pdbs: bool = False) -> dict[str, Any]:
    if min_ready_nodes < 0:
        raise InputError(f"expected a non-negative number, got {min_ready_nodes}", field="--min-ready-nodes")
    pol = load_descheduler_policy(policy, default_registry())
    snap = load_snapshot(snapshot) if isinstance(snapshot, str) else snapshot
    cluster = ClusterState.from_snapshot(snap)
    metric_objects: list[dict[str, Any]] = []
    services = DeschedulerServices(seed=seed, snapshot=snap)
    live = source_from_address(metrics) if metrics is not None else None
    if live is not None:
        services.usage = live.fetch(now)  # an address (load-watcher, Prometheus, metrics-server), read once
    elif metrics is not None:
        metric_objects, others = read_metrics_objects(metrics)
        recorded = [d for d in others if _is_prometheus_response(d)]
        if recorded:
            # A recorded Prometheus query response answers LowNodeUtilization's Prometheus source.
            services.prometheus_client = RecordedPrometheus(recorded[0], metrics)
            others = [d for d in others if not _is_prometheus_response(d)]
        if others:
            # Another kind of usage (load-watcher WatcherMetrics, ...) for load-aware strategies.
            services.usage = load_metrics(metrics, now)
        services.metric_objects = metric_objects  # for usage-based strategies that read the objects (LowNodeLoad)
    collector = MetricsCollector.from_cluster(
        cluster, metric_objects, parse_label_selector_string(pol.node_selector, "nodeSelector"), metrics or "")
    provider = pol.metrics_provider("Prometheus")
    url = (provider.prometheus or {}).get("url") if provider is not None else None
    if url and services.prometheus_client is None:
        # The policy's Prometheus provider, asked at --now (the authToken secret cannot be read offline).
        services.prometheus_client = DeschedulerPrometheusClient(PrometheusClient(str(url)), now.timestamp())
    sched_cfg = None
    warnings: list[str] = []
    if scheduler_config is not None:
        sched_cfg = load_scheduler_config(scheduler_config)
        # Warn when the scheduler's and the descheduler's usage thresholds are set up to fight.
        warnings = check_coherence(sched_cfg, pol)
        for w in warnings:
            warn(w)
    services.scheduler_config = sched_cfg
    # By default a dry run that no server refuses: what upstream's plugin tests and its dry-run mode see
    # (evicted pods stay as they were for the rest of the cycle). With --enforce-pdbs the evictions are
    # made against the in-process API server (nothing leaves this process): each spends its PDB's budget
    # and the evicted pod terminates, as in a real cluster.
    server = InProcessAPIServer(cluster, lambda: now.timestamp(), enforce_pdbs=enforce_pdbs)
    d = Descheduler(cluster, pol, now=now, metrics=collector, client=server, dry_run=not enforce_pdbs,
                    min_ready_nodes=min_ready_nodes, services=services)
    # The snapshot's objects live through the cycle: keep the cyclic GC from rescanning them on every
    # collection (on a large cluster that scanning costs more than the cycle itself).
    with gc_frozen():
        result = d.run_cycle(now, metrics=collector)
    removed: dict[str, list[Any]] = {}
    for r in result.evictions:
        removed.setdefault(r.node, []).append(r.pod)
    basis = _usage_basis(pol)
    if basis == "prometheus":
        warn("the policy balances on a Prometheus query; the utilisation shown is requested resources")
    on_usage = basis == "metrics" and bool(collector.nodes)
    if basis == "metrics" and not collector.nodes:
        warn("the policy balances on actual usage but no NodeMetrics were given (--metrics or the snapshot); the "
             "utilisation shown is requested resources")
    return {
        "evictions": [r.to_json() for r in result.evictions],
        "skipped": result.skipped,
        "errors": result.errors,
        "nodes": [n.name for n in result.nodes],
        "utilizationBasis": "usage" if on_usage else "requests",
        "utilization": _utilization(cluster, list(cluster.nodes.values()), removed, collector if on_usage else None),
        "warnings": warnings,
    }


def _is_prometheus_response(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("status") == "success" and isinstance(doc.get("data"), dict) \
        and "resultType" in doc["data"]


class RecordedPrometheus:
    """A recorded `/api/v1/query` response, given back for any query: node (`instance`) → value."""

    def __init__(self, doc: dict[str, Any], source: str) -> None:
        data = doc["data"]
        self.kind = str(data.get("resultType"))
        self.result = data.get("result") or []
        self.source = source

    def query(self, query: str) -> dict[str, float]:
        if self.kind != "vector":
            raise ValueError(f'expected query results to be of type "vector", got "{self.kind}" instead')
        out: dict[str, float] = {}
        for r in self.result:
            labels = r.get("metric") if isinstance(r, dict) else None
            name = (labels or {}).get("instance")
            if name is None:
                raise ValueError("the collected metrics sample is missing 'instance' key")
            try:
                out[str(name)] = float(r["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                raise ValueError(f"sample of {name!r}: expected a value [time, \"number\"]") from None
        return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def deschedule_table(data: dict[str, Any]) -> None:
    console = Console()
    if data.get("skipped"):
        console.print(f"[yellow]{data['skipped']}[/yellow]")
    for err in data.get("errors") or []:
        console.print(f"[red]error:[/red] {err}")
    evictions = data.get("evictions") or []
    table = Table(title="evictions")
    for col in ("node", "pod", "plugin", "profile", "reason"):
        table.add_column(col)
    for e in evictions:
        table.add_row(e["node"], e["pod"], e["plugin"], e["profile"], e["reason"])
    if evictions:
        console.print(table)
    console.print(f"{len(evictions)} pod(s) would be evicted from {len({e['node'] for e in evictions})} node(s)")
    util = data.get("utilization") or {}
    names = list(util)
    if len(names) > TABLE_NODE_LIMIT:
        touched = [n for n in names if util[n]["evicted"]]
        names = touched[:TABLE_NODE_LIMIT]
        note = f"(showing {len(names)} of {len(util)} nodes: those with evictions)"
    else:
        note = ""
    basis = "actual (metrics)" if data.get("utilizationBasis") == "usage" else "requested"
    summary = Table(title=f"{basis} utilisation before → after {note}".strip())
    summary.add_column("node")
    for r in SUMMARY_RESOURCES:
        summary.add_column(r, justify="right")
    summary.add_column("evicted", justify="right")
    for n in names:
        u = util[n]
        cells = [n] + [f"{_fmt(u['before'][r])} → {_fmt(u['after'][r])}" if u["evicted"] else _fmt(u["before"][r])
                       for r in SUMMARY_RESOURCES]
        summary.add_row(*cells, str(u["evicted"]))
    if names:
        console.print(summary)

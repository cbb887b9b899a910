"""Trimaran's Collector: where a plugin's node metrics come from, refreshed, and judged for staleness.

Sources, first that applies (upstream has only the plugin's own TrimaranSpec; the Handle's services are
how kubesched replays a capture or plugs in a simulated load-watcher):

1. The Handle's `services.load_watcher`: a `MetricsSource` the caller runs (the simulator's load-watcher
   view), polled like a live source below, in place of the one the args configure.
2. The Handle's `services.metrics`: a `Metrics` reading (`--metrics`), used as is; or a `MetricsFeed`,
   whose `latest()` reading is asked for every time (its owner calls `set_metrics` for each new one).
3. `watcherAddress`: a load-watcher service, `GET <address>/watcher`.
4. `metricProvider.type: Prometheus`: load-watcher's Prometheus queries against `metricProvider.address`.
5. `metricProvider.type: KubernetesMetricsServer` (the default): the cluster's metrics-server at
   `metricProvider.address` when one is given, else the NodeMetrics objects in the snapshot.

The Handle's services are read when the plugin is built (give them in the Scheduler's `services`). Live
sources are read again every 30 seconds of the scheduler's clock (metricsUpdateIntervalSeconds).
A failed read keeps the previous reading, as upstream does; a first read that fails leaves the plugin
without metrics, so every node scores the minimum (upstream logs "Metrics not available from watcher").

Staleness (kubesched's addition; upstream Trimaran never checks): `metricsMaxAgeSeconds` in the
plugin's args. A node whose data is older than that — or whose age is unknown — is treated as a node
without metrics. 0 or absent means no limit, as upstream.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api.objects import Node
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.errors import InputError, RuntimeFailure
from kubesched.metrics.base import (
    CPU_TYPE,
    MEMORY_TYPE,
    Metric,
    Metrics,
    MetricsFeed,
    MetricsSource,
    clock_datetime,
    is_stale,
    reference_time,
    resource_data,
    watcher_metrics,
)
from kubesched.metrics.kubernetes_metrics import MetricsServerSource, snapshot_metrics
from kubesched.metrics.prometheus import DEFAULT_ADDRESS, PrometheusSource
from kubesched.metrics.watcher import WatcherHTTPSource
from kubesched.scheduler.framework import Handle
from kubesched.scheduler.plugins.trimaran.resourcestats import capacity_units

METRICS_UPDATE_INTERVAL_SECONDS = 30.0
PROVIDER_TYPES = ("KubernetesMetricsServer", "Prometheus", "SignalFx")


KUBERNETES_METRICS_SERVER = "KubernetesMetricsServer"
PROMETHEUS = "Prometheus"
SIGNALFX = "SignalFx"
TRIMARAN_SPEC_FIELDS = ("watcherAddress", "metricProvider", "metricsMaxAgeSeconds")


@dataclass(frozen=True, slots=True)
class MetricProviderSpec:
    """config.MetricProviderSpec: the metrics backend (type, address, token, insecureSkipVerify)."""

    type: str = KUBERNETES_METRICS_SERVER
    address: str = dataclasses.field(default="", metadata=OMITEMPTY)
    token: str = dataclasses.field(default="", metadata=OMITEMPTY)
    insecure_skip_verify: bool = dataclasses.field(default=False, metadata=OMITEMPTY)


@dataclass(frozen=True, slots=True)
class TrimaranArgs(PluginArgs):
    """config.TrimaranSpec, the fields every Trimaran plugin's args share, with v1 defaulting (metricProvider.type
    KubernetesMetricsServer when no watcherAddress is given; insecureSkipVerify true for Prometheus) and
    kubesched's `metricsMaxAgeSeconds` (0: no limit)."""

    watcher_address: str = dataclasses.field(default="", metadata=OMITEMPTY)
    metric_provider: MetricProviderSpec = MetricProviderSpec()
    metrics_max_age_seconds: int = dataclasses.field(default=0, metadata=OMITEMPTY)

    @property
    def max_age(self) -> float | None:
        return float(self.metrics_max_age_seconds) if self.metrics_max_age_seconds else None

    @staticmethod
    def spec_of(a: fields.Fields) -> dict[str, Any]:
        """The TrimaranSpec fields of one plugin's args object, as keyword arguments."""
        watcher = a.string("watcherAddress")
        provider = a.object("metricProvider", {"type", "address", "token", "insecureSkipVerify"})
        ptype = provider.string("type") or ""
        if watcher is None and not ptype:
            ptype = KUBERNETES_METRICS_SERVER
        if not watcher and ptype not in PROVIDER_TYPES:
            raise provider.error("type", f"invalid MetricProvider.Type, got {ptype}")
        if not watcher and ptype == SIGNALFX:
            raise provider.error("type", "the SignalFx metric provider is not available in kubesched; give a "
                                 "load-watcher (watcherAddress) or --metrics")
        insecure = provider.boolean("insecureSkipVerify", ptype == PROMETHEUS)
        spec = MetricProviderSpec(ptype, provider.string("address") or "", provider.string("token") or "", insecure)
        return {"watcher_address": watcher or "", "metric_provider": spec,
                "metrics_max_age_seconds": a.integer("metricsMaxAgeSeconds", 0, lo=0)}


def _source(args: TrimaranArgs) -> MetricsSource | None:
    provider = args.metric_provider
    if args.watcher_address:
        return WatcherHTTPSource(args.watcher_address)
    if provider.type == PROMETHEUS:
        return PrometheusSource(provider.address or DEFAULT_ADDRESS, token=provider.token or None,
                                insecure=provider.insecure_skip_verify)
    if provider.address:
        return MetricsServerSource(provider.address, token=provider.token or None,
                                   insecure=provider.insecure_skip_verify, pods=False)
    return None


@dataclass(slots=True)
class Columns:
    """Per node-table row, what the Trimaran formulas read from the metrics (NaN-free)."""

    has: np.ndarray  # node has metrics (and they are fresh)
    tlp_cpu: np.ndarray  # TargetLoadPacking's CPU percentage (the last AVG or Latest)
    tlp_found: np.ndarray
    cpu_avg: np.ndarray
    cpu_std: np.ndarray
    cpu_valid: np.ndarray
    mem_avg: np.ndarray
    mem_std: np.ndarray
    mem_valid: np.ndarray
    cap_cpu: np.ndarray  # status.capacity cpu in millicores (TargetLoadPacking's capacity)


def tlp_cpu_percent(metrics: list[Metric]) -> tuple[float, bool]:
    """TargetLoadPacking reads the last CPU metric whose operator is AVG or Latest."""
    value, found = 0.0, False
    for m in metrics:
        if m.type == CPU_TYPE and m.operator in ("AVG", "Latest"):
            value, found = m.value, True
    return value, found


class Collector:
    """One plugin's view of the metrics (upstream gives each Trimaran plugin its own Collector)."""

    def __init__(self, args: TrimaranArgs, handle: Handle, plugin: str) -> None:
        self.args = args
        self.handle = handle
        self.plugin = plugin
        given = handle.services.metrics
        live = handle.services.load_watcher
        # Exactly one of: a live source polled every interval, a feed asked each time, a fixed reading.
        self.source: MetricsSource | None = live if isinstance(live, MetricsSource) else None
        self.feed: MetricsFeed | None = given if self.source is None and isinstance(given, MetricsFeed) else None
        self._metrics: Metrics | None = given if self.source is None and isinstance(given, Metrics) else None
        self._fetched_at: float | None = None
        self._fixed = self._metrics is not None
        if self.source is None and self.feed is None and not self._fixed:
            self.source = _source(args)
            if self.source is None:
                self._metrics = snapshot_metrics(handle.services.snapshot)
                self._fixed = True
        self._columns_key: tuple[Any, ...] | None = None
        self._columns: Columns | None = None
        self._capacity: dict[str, tuple[Node, dict[str, int]]] = {}
        self._version = 0

    # ------------------------------------------------------------ time and refresh

    def now(self) -> datetime:
        """The scheduler's clock as a datetime (keeping the "nobody gave --now" mark)."""
        return clock_datetime(self.handle.now(), self.handle.services.start)

    def metrics(self) -> Metrics | None:
        """The reading the formulas use now (a feed's latest, a live source's last, or the fixed one)."""
        if self.feed is not None:
            latest = self.feed.latest()
            if latest is not self._metrics:
                self._metrics = latest
                self._version += 1
            return latest
        if self._fixed or self.source is None:
            return self._metrics
        t = self.handle.now()
        if self._fetched_at is None or t - self._fetched_at >= METRICS_UPDATE_INTERVAL_SECONDS:
            self._fetched_at = t
            try:
                self._metrics = self.source.fetch(self.now())
                self._version += 1
            except (InputError, RuntimeFailure) as e:
                # Upstream logs and keeps what it had; the run goes on.
                print(f"warning: {self.plugin}: unable to update metrics from {self.source.describe()}: {e}",
                      file=sys.stderr)
        return self._metrics

    # ------------------------------------------------------------ per node

    def _fresh(self, metrics: Metrics, name: str) -> bool:
        if self.args.max_age is None:
            return True
        return not is_stale(metrics.age(name, self.now()), self.args.max_age)

    def capacity(self, node: Node) -> dict[str, int]:
        cached = self._capacity.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        cap = capacity_units(node)
        self._capacity[node.name] = (node, cap)
        return cap

    def node_metrics(self, node: Node) -> tuple[list[Metric] | None, Metrics | None]:
        """GetNodeMetrics: the node's metrics (None when none, or stale) and the whole collection."""
        metrics = self.metrics()
        if metrics is None or metrics.nodes is None:
            return None, None
        usage = metrics.node(node.name)
        if usage is None or not self._fresh(metrics, node.name):
            return None, metrics
        return watcher_metrics(usage, self.capacity(node)), metrics

    def columns(self, cluster: ClusterState) -> Columns:
        """The per-row numbers of the formulas, recomputed when the metrics, nodes or clock change."""
        metrics = self.metrics()
        ref = reference_time(self.now(), metrics) if self.args.max_age is not None else None
        key = (self._version, cluster.node_generation, cluster.num_nodes, ref)
        if self._columns is not None and self._columns_key == key:
            return self._columns
        n = cluster.num_nodes
        flags = [np.zeros(n, dtype=bool) for _ in range(4)]
        values = [np.zeros(n, dtype=np.float64) for _ in range(5)]
        cols = Columns(has=flags[0], tlp_cpu=values[0], tlp_found=flags[1], cpu_avg=values[1], cpu_std=values[2],
                       cpu_valid=flags[2], mem_avg=values[3], mem_std=values[4], mem_valid=flags[3],
                       cap_cpu=np.zeros(n, dtype=np.float64))
        for info in cluster.node_infos:
            cols.cap_cpu[info.index] = float(self.capacity(info.node).get("cpu", 0))
            ms, _ = self.node_metrics(info.node)
            if ms is None:
                continue
            r = info.index
            cols.has[r] = True
            cols.tlp_cpu[r], cols.tlp_found[r] = tlp_cpu_percent(ms)
            cols.cpu_avg[r], cols.cpu_std[r], cols.cpu_valid[r] = resource_data(ms, CPU_TYPE)
            cols.mem_avg[r], cols.mem_std[r], cols.mem_valid[r] = resource_data(ms, MEMORY_TYPE)
        self._columns_key, self._columns = key, cols
        return cols

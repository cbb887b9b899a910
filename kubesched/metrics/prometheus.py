"""Prometheus through its HTTP API: the windowed averages and standard deviations load-watcher produces.

load-watcher's Prometheus provider asks, for each node-level recording rule, `avg_over_time(M[15m])` and
`stddev_over_time(M[15m])` at the current time, labels each sample's node by its `instance` label, and
multiplies the ratio by 100 — a percentage of capacity. `PrometheusSource` asks exactly that (the rule
names, node label and window are settable), evaluated at `--now` when one is given. It also reads the
raw samples of the window (`M[15m]`) to learn when each node was last measured: that is the node's
timestamp, so consumers can judge staleness (Prometheus itself will average whatever old samples the
window still holds).

`PrometheusClient.query_range` gives the usage history between two moments (`PrometheusSource.series`);
`node_usage_from_prometheus` is the descheduler's Prometheus mode of LowNodeUtilization (one query whose
vector holds each node's utilisation in [0, 1] under the `instance` label).
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubesched.errors import InputError
from kubesched.metrics.base import (
    AVERAGE,
    CPU_TYPE,
    LATEST,
    MEMORY_TYPE,
    STD,
    Metric,
    Metrics,
    MetricsSource,
    NodeUsage,
    Window,
    parse_window,
)
from kubesched.metrics.http import get_json

# load-watcher's defaults (pkg/watcher/internal/metricsprovider/prometheus.go).
DEFAULT_ADDRESS = "http://prometheus-k8s:9090"
CPU_METRIC = "instance:node_cpu:ratio"
MEMORY_METRIC = "instance:node_memory_utilisation:ratio"
NODE_LABEL = "instance"
DEFAULT_WINDOW = "15m"
# The descheduler's name for the one resource its Prometheus mode measures.
METRIC_RESOURCE = "MetricResource"


@dataclass(frozen=True, slots=True)
class Sample:
    labels: dict[str, str]
    value: float
    timestamp: float


def _fmt_time(t: float) -> str:
    return f"{t:.3f}"


class PrometheusClient:
    """The two query endpoints of Prometheus's HTTP API."""

    def __init__(self, address: str, token: str | None = None, insecure: bool = False,
                 ca_file: str | None = None, timeout: float = 10.0) -> None:
        self.address = address.rstrip("/")
        self.token = token
        self.insecure = insecure
        self.ca_file = ca_file
        self.timeout = timeout

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        try:
            doc = get_json(self.address + path, params=params, token=self.token, insecure=self.insecure,
                           ca_file=self.ca_file, timeout=self.timeout, what="prometheus")
        except InputError as e:
            raise InputError(f"prometheus: query {params.get('query')!r} failed: {e.message}") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            err = doc.get("error") if isinstance(doc, dict) else None
            raise InputError(f"prometheus: query {params.get('query')!r} failed: {err or doc!r}")
        data = doc.get("data")
        if not isinstance(data, dict):
            raise InputError(f"prometheus: query {params.get('query')!r} returned no data")
        return data

    def query(self, expr: str, at: float) -> tuple[str, list[dict[str, Any]]]:
        """/api/v1/query at a moment: (resultType, result)."""
        data = self._get("/api/v1/query", {"query": expr, "time": _fmt_time(at)})
        return str(data.get("resultType")), list(data.get("result") or [])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """/api/v1/query_range: a matrix of (labels, [(t, value)...])."""
        data = self._get("/api/v1/query_range", {"query": expr, "start": _fmt_time(start), "end": _fmt_time(end),
                                                 "step": f"{step:g}"})
        if data.get("resultType") != "matrix":
            raise InputError(f"prometheus: query_range {expr!r} returned {data.get('resultType')}, expected a matrix")
        return list(data.get("result") or [])

    def vector(self, expr: str, at: float) -> list[Sample]:
        kind, result = self.query(expr, at)
        if kind != "vector":
            raise InputError(f"prometheus: query {expr!r} returned a {kind}, expected a vector")
        return [Sample(dict(r.get("metric") or {}), float(r["value"][1]), float(r["value"][0])) for r in result]

    def matrix(self, expr: str, at: float) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        kind, result = self.query(expr, at)
        if kind != "matrix":
            raise InputError(f"prometheus: query {expr!r} returned a {kind}, expected a matrix")
        return [(dict(r.get("metric") or {}), [(float(t), float(v)) for t, v in r.get("values") or []])
                for r in result]


class PrometheusSource(MetricsSource):
    """Node usage from Prometheus, in load-watcher's form (AVG and STD over a window, in percent)."""

    kind = "prometheus"

    def __init__(self, address: str = DEFAULT_ADDRESS, *, window: str = DEFAULT_WINDOW,
                 cpu_metric: str = CPU_METRIC, memory_metric: str = MEMORY_METRIC, node_label: str = NODE_LABEL,
                 token: str | None = None, insecure: bool = False, ca_file: str | None = None,
                 include_latest: bool = False) -> None:
        self.client = PrometheusClient(address, token, insecure, ca_file)
        self.window = window
        self.window_seconds = parse_window(window, "window")
        if self.window_seconds <= 0:
            raise InputError(f"expected a positive duration, got {window!r}", field="window")
        self.metrics = [(CPU_TYPE, cpu_metric), (MEMORY_TYPE, memory_metric)]
        self.node_label = node_label
        self.include_latest = include_latest

    def _node(self, labels: dict[str, str]) -> str | None:
        return labels.get(self.node_label) or None

    def fetch(self, now: datetime) -> Metrics:
        at = now.timestamp()
        nodes: dict[str, NodeUsage] = {}

        def node(name: str) -> NodeUsage:
            n = nodes.get(name)
            if n is None:
                n = nodes[name] = NodeUsage(name=name, window=Window(self.window, at - self.window_seconds, at))
            return n

        # load-watcher's order: every metric's average, then every metric's standard deviation.
        for func, operator in (("avg_over_time", AVERAGE), ("stddev_over_time", STD)):
            for metric_type, metric in self.metrics:
                for s in self.client.vector(f"{func}({metric}[{self.window}])", at):
                    name = self._node(s.labels)
                    if name is not None and math.isfinite(s.value):
                        node(name).metrics.append(Metric(metric_type, operator, s.value * 100, metric, self.window))
        # The raw samples say when each node was last measured (its staleness) and its latest value.
        for metric_type, metric in self.metrics:
            for labels, values in self.client.matrix(f"{metric}[{self.window}]", at):
                name = self._node(labels)
                if name is None or not values:
                    continue
                n = node(name)
                t, v = values[-1]
                n.timestamp = t if n.timestamp is None else max(n.timestamp, t)
                if self.include_latest:
                    # First, so that an AVG of the same type wins for every consumer.
                    n.metrics.insert(0, Metric(metric_type, LATEST, v * 100, metric))
        return Metrics(source="Prometheus", nodes=nodes, timestamp=at,
                       window=Window(self.window, at - self.window_seconds, at), captured=False)

    def series(self, start: float, end: float, step: float) -> dict[str, dict[str, list[tuple[float, float]]]]:
        """Usage history: node → metric type → [(t, percent)] between start and end."""
        out: dict[str, dict[str, list[tuple[float, float]]]] = {}
        for metric_type, metric in self.metrics:
            for r in self.client.query_range(metric, start, end, step):
                name = self._node(dict(r.get("metric") or {}))
                if name is None:
                    continue
                out.setdefault(name, {})[metric_type] = [(float(t), float(v) * 100) for t, v in r.get("values") or []]
        return out

    def describe(self) -> str:
        return f"Prometheus at {self.client.address}"


def node_usage_from_prometheus(client: PrometheusClient, query: str, at: float) -> dict[str, dict[str, int]]:
    """The descheduler's NodeUsageFromPrometheusMetrics: node → {MetricResource: int(value × 100)}.

    The query must return a vector; each sample needs an `instance` label and a value in [0, 1].
    """
    kind, result = client.query(query, at)
    if kind != "vector":
        raise InputError(f'expected query results to be of type "vector", got "{kind}" instead')
    out: dict[str, dict[str, int]] = {}
    for r in result:
        labels = r.get("metric") or {}
        name = labels.get("instance")
        if name is None:
            raise InputError("the collected metrics sample is missing 'instance' key")
        value = float(r["value"][1])
        if value < 0 or value > 1:
            raise InputError(f"the collected metrics sample for {name!r} has value {value:g} outside of <0; 1> interval")
        out[str(name)] = {METRIC_RESOURCE: int(value * 100)}
    return out


class DeschedulerPrometheusClient:
    """What the descheduler's Prometheus mode asks: one query's value per node (`instance` label) at `at`."""

    def __init__(self, client: PrometheusClient, at: float) -> None:
        self.client = client
        self.at = at

    def query(self, query: str) -> dict[str, float]:
        kind, result = self.client.query(query, self.at)
        if kind != "vector":
            raise InputError(f'expected query results to be of type "vector", got "{kind}" instead')
        out: dict[str, float] = {}
        for r in result:
            name = (r.get("metric") or {}).get("instance")
            if name is None:
                raise InputError("the collected metrics sample is missing 'instance' key")
            out[str(name)] = float(r["value"][1])
        return out


def secret_token(snapshot: Any, namespace: str, name: str) -> str | None:
    """The `prometheusAuthToken` of a Secret in the snapshot (data is base64, stringData plain)."""
    for o in getattr(snapshot, "others", []):
        meta = o.meta
        if o.kind != "Secret" or meta is None or meta.name != name or meta.namespace != namespace:
            continue
        string_data = o.raw.get("stringData") or {}
        if isinstance(string_data, dict) and isinstance(string_data.get("prometheusAuthToken"), str):
            return str(string_data["prometheusAuthToken"])
        data = o.raw.get("data") or {}
        value = data.get("prometheusAuthToken") if isinstance(data, dict) else None
        if isinstance(value, str):
            try:
                return base64.b64decode(value, validate=True).decode().strip()
            except (binascii.Error, UnicodeDecodeError):
                raise InputError("expected base64", obj=f"Secret {namespace}/{name}",
                                 field="data.prometheusAuthToken") from None
    return None


def descheduler_client(policy: Any, snapshot: Any, now: datetime) -> DeschedulerPrometheusClient | None:
    """The client a DeschedulerPolicy's Prometheus metrics provider describes, or None when it has none
    (or its token Secret is not in the snapshot: upstream then has no client either)."""
    provider = policy.metrics_provider("Prometheus") if policy is not None else None
    if provider is None or not provider.prometheus:
        return None
    token = None
    ref = (provider.prometheus.get("authToken") or {}).get("secretReference")
    if ref:
        token = secret_token(snapshot, str(ref.get("namespace")), str(ref.get("name")))
        if token is None:
            return None
    return DeschedulerPrometheusClient(PrometheusClient(str(provider.prometheus["url"]), token=token), now.timestamp())

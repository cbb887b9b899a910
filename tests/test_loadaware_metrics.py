"""Metrics sources: load-watcher JSON (file and HTTP), metrics.k8s.io and koordinator objects, staleness."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from fractions import Fraction
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from kubesched.errors import InputError
from kubesched.metrics.base import (
    AVERAGE,
    LATEST,
    STD,
    Metric,
    Metrics,
    NodeUsage,
    WallClockTime,
    is_stale,
    reference_time,
    resource_data,
    wall_clock_now,
    watcher_metrics,
)
from kubesched.metrics.kubernetes_metrics import MetricsServerSource, metrics_from_objects
from kubesched.metrics.loader import load_metrics, source_from_address, source_from_config
from kubesched.metrics.watcher import WatcherHTTPSource, parse_watcher_metrics, to_watcher_metrics

NOW = datetime(2024, 1, 1, tzinfo=UTC)

WATCHER = {
    "timestamp": 1704067200, "window": {"duration": "15m", "start": 1704066300, "end": 1704067200}, "source": "Prometheus",
    "data": {"NodeMetricsMap": {"node-1": {"metrics": [
        {"name": "instance:node_cpu:ratio", "type": "CPU", "operator": "AVG", "rollup": "15m", "value": 30.5},
        {"name": "instance:node_cpu:ratio", "type": "CPU", "operator": "STD", "rollup": "15m", "value": 4}]}}},
}


def test_watcher_metrics_document_is_read_field_by_field() -> None:
    m = parse_watcher_metrics(WATCHER)
    assert m.timestamp == 1704067200 and m.window is not None and m.window.seconds == 900
    assert m.source == "Prometheus"
    node = m.node("node-1")
    assert node is not None
    assert resource_data(node.metrics, "CPU") == (30.5, 4.0, True)
    assert resource_data(node.metrics, "Memory") == (0.0, 0.0, False)
    # Round trip through load-watcher's own shape.
    again = parse_watcher_metrics(to_watcher_metrics(m))
    assert again.node("node-1") == node


def test_watcher_metrics_null_map_means_populated_but_empty() -> None:
    m = parse_watcher_metrics({"timestamp": 0, "window": {}, "data": {"NodeMetricsMap": None}})
    assert m.nodes == {} and m.node("anything") is None and m.timestamp is None


@pytest.mark.parametrize("doc, field", [
    ({"data": {"NodeMetricsMap": {"n": {"metrics": [{"type": "CPU", "value": "high"}]}}}},
     "data.NodeMetricsMap.n.metrics[0].value"),
    ({"timestamp": "yesterday", "data": {}}, "timestamp"),
    ({"data": {"NodeMetricsMap": []}}, "data.NodeMetricsMap"),
])
def test_watcher_metrics_errors_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_watcher_metrics(doc)
    assert e.value.field == field


def test_resource_data_prefers_average_over_latest() -> None:
    ms = [Metric("CPU", LATEST, 80), Metric("CPU", AVERAGE, 30), Metric("CPU", LATEST, 90), Metric("CPU", STD, 5)]
    assert resource_data(ms, "CPU") == (30, 5, True)
    assert resource_data([Metric("CPU", "", 12)], "CPU") == (12, 0, True)


def test_absolute_usage_becomes_load_watcher_percentages_of_capacity() -> None:
    node = NodeUsage("n", usage={"cpu": 1500, "memory": 2 * 2**30})
    ms = watcher_metrics(node, {"cpu": 4000, "memory": 8 * 2**30})
    assert [(m.type, m.operator, m.value) for m in ms] == [("CPU", LATEST, 37.5), ("Memory", LATEST, 25.0)]


def test_metrics_k8s_io_objects_keep_exact_quantities() -> None:
    objects = [
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n1"},
         "timestamp": "2024-01-01T00:00:00Z", "window": "30s", "usage": {"cpu": "1500000001n", "memory": "1Gi"}},
        {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics", "metadata": {"name": "p", "namespace": "ns"},
         "timestamp": "2024-01-01T00:00:00Z", "window": "30s",
         "containers": [{"name": "a", "usage": {"cpu": "250m", "memory": "100Mi"}},
                        {"name": "b", "usage": {"cpu": "1n", "memory": "1"}}]},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ignored"}},
    ]
    m = metrics_from_objects(objects)
    n1 = m.node("n1")
    assert n1 is not None and n1.usage == {"cpu": 1501, "memory": 2**30}  # rounded up, as MilliValue()
    assert n1.exact["cpu"] == Fraction(1500000001, 10**6)
    assert n1.window is not None and n1.window.seconds == 30
    pod = m.pods["ns/p"]
    assert pod.usage == {"cpu": 251, "memory": 100 * 2**20 + 1}
    assert pod.exact["cpu"] == Fraction(250) + Fraction(1, 10**6)


def test_koordinator_node_metric_has_system_usage_pods_and_aggregates() -> None:
    obj = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": "n1"},
           "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}},
           "status": {"updateTime": "2024-01-01T00:00:00Z",
                      "nodeMetric": {"nodeUsage": {"resources": {"cpu": "2", "memory": "4Gi"}},
                                     "systemUsage": {"resources": {"cpu": "500m"}},
                                     "aggregatedNodeUsages": [{"duration": "5m", "usage": {
                                         "p90": {"resources": {"cpu": "3"}}}}]},
                      "podsMetric": [{"namespace": "ns", "name": "p", "priority": "koord-prod",
                                      "podUsage": {"resources": {"cpu": "1500m"}}}]}}
    m = metrics_from_objects([obj])
    n1 = m.node("n1")
    assert n1 is not None and n1.report_interval == 30 and n1.system_usage == {"cpu": 500}
    assert n1.aggregated[("p90", 300.0)] == {"cpu": 3000}
    assert m.pods["ns/p"].node == "n1" and m.pods["ns/p"].priority_class == "koord-prod"
    assert m.node_timestamp("n1") == NOW.timestamp()


def test_staleness_is_judged_at_now_or_at_a_captures_own_moment() -> None:
    m = Metrics("file", {"n": NodeUsage("n", timestamp=NOW.timestamp() - 100)}, timestamp=None, captured=True)
    later = datetime(2024, 1, 1, 0, 10, tzinfo=UTC)
    assert m.age("n", later) == 700  # an explicit --now is honoured
    wall = WallClockTime(2030, 1, 1, tzinfo=UTC)
    assert m.age("n", wall) == 0  # replayed without --now: judged at the capture's newest timestamp
    live = Metrics("live", m.nodes, captured=False)
    assert reference_time(wall, live) == wall.timestamp()
    assert isinstance(wall_clock_now(), WallClockTime)
    assert not is_stale(700, None) and not is_stale(None, 0)
    assert is_stale(700, 600) and not is_stale(600, 600) and is_stale(None, 600)


class _Server:
    """A loopback HTTP server answering GETs from a path → (status, JSON) table."""

    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        routes_ = routes
        self.seen: list[tuple[str, str | None]] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                seen.append((self.path, self.headers.get("Authorization")))
                status, body = routes_.get(self.path.split("?")[0], (404, {"message": "not found"}))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_load_watcher_http_api_is_read_from_watcher_path() -> None:
    with _Server({"/watcher": (200, WATCHER)}) as srv:
        m = WatcherHTTPSource(srv.url).fetch(NOW)
        assert m.node("node-1") is not None and not m.captured
        assert srv.seen[0][0] == "/watcher"
        # --metrics http://... is a load-watcher too.
        assert load_metrics(srv.url, NOW).node("node-1") is not None


def test_load_watcher_http_errors_are_input_errors() -> None:
    with _Server({"/watcher": (500, {"error": "boom"})}) as srv:
        with pytest.raises(InputError, match="answered 500"):
            WatcherHTTPSource(srv.url).fetch(NOW)


def test_metrics_server_source_lists_nodes_and_pods_with_a_token() -> None:
    nodes = {"kind": "NodeMetricsList", "items": [{"metadata": {"name": "n1"}, "timestamp": "2024-01-01T00:00:00Z",
                                                   "window": "20s", "usage": {"cpu": "100m", "memory": "1Mi"}}]}
    pods = {"kind": "PodMetricsList", "items": [{"metadata": {"name": "p", "namespace": "ns"},
                                                 "timestamp": "2024-01-01T00:00:00Z", "window": "20s",
                                                 "containers": [{"name": "c", "usage": {"cpu": "10m"}}]}]}
    with _Server({"/apis/metrics.k8s.io/v1beta1/nodes": (200, nodes),
                  "/apis/metrics.k8s.io/v1beta1/pods": (200, pods)}) as srv:
        m = MetricsServerSource(srv.url, token="t0k").fetch(NOW)
        assert m.node("n1") is not None and m.pods["ns/p"].usage == {"cpu": 10}
        assert all(auth == "Bearer t0k" for _, auth in srv.seen)


def test_loader_reads_files_by_their_content(tmp_path: Path) -> None:
    w = tmp_path / "watcher.json"
    w.write_text(json.dumps(WATCHER))
    assert load_metrics(str(w), NOW).node("node-1") is not None
    objs = tmp_path / "objects.yaml"
    objs.write_text("apiVersion: metrics.k8s.io/v1beta1\nkind: NodeMetrics\nmetadata: {name: a}\n"
                    "timestamp: '2024-01-01T00:00:00Z'\nusage: {cpu: '1'}\n")
    assert load_metrics(str(objs), NOW).node("a") is not None
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(InputError, match="found ConfigMap"):
        load_metrics(str(bad), NOW)


def test_metrics_source_documents_are_validated() -> None:
    src = source_from_config({"apiVersion": "kubesched.io/v1alpha1", "kind": "MetricsSource",
                              "prometheus": {"address": "http://127.0.0.1:9", "window": "5m"}})
    assert src.describe() == "Prometheus at http://127.0.0.1:9"
    with pytest.raises(InputError) as e:
        source_from_config({"kind": "MetricsSource", "prometheus": {"address": "x", "windw": "5m"}})
    assert e.value.field == "prometheus.windw"
    with pytest.raises(InputError, match="exactly one"):
        source_from_config({"kind": "MetricsSource"})
    assert source_from_address("prometheus+http://h:9090") is not None
    assert source_from_address("./file.json") is None


"""The Prometheus source against a real Prometheus server, started here on a loopback port.

The data is written deterministically with `promtool tsdb create-blocks-from openmetrics`, so every query
has a known answer. Prometheus comes from Debian's `prometheus` package (scripts/install-system-deps.sh
installs it); where it cannot be installed the tests are skipped with that message — except under CI
(`CI` or `KUBESCHED_REQUIRE_PROMETHEUS` set), where a missing server is a failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kubesched.errors import InputError
from kubesched.metrics.base import resource_data
from kubesched.metrics.loader import load_metrics
from kubesched.metrics.prometheus import (
    DeschedulerPrometheusClient,
    PrometheusClient,
    PrometheusSource,
    node_usage_from_prometheus,
)

T0 = 1704067200  # 2024-01-01T00:00:00Z: the queries' evaluation time
NOW = datetime.fromtimestamp(T0, UTC)


def _openmetrics() -> str:
    """node-1: cpu alternates 0.2/0.3 every minute for 15 minutes, memory 0.5; node-2: cpu 0.8, whose
    samples stop 10 minutes before T0 (a node whose exporter went away)."""
    lines = ["# TYPE instance:node_cpu:ratio gauge"]
    for i in range(16):
        t = T0 - 900 + 60 * i
        lines.append(f'instance:node_cpu:ratio{{instance="node-1"}} {0.2 if i % 2 == 0 else 0.3} {t}')
        if t <= T0 - 600:
            lines.append(f'instance:node_cpu:ratio{{instance="node-2"}} 0.8 {t}')
    lines.append("# TYPE instance:node_memory_utilisation:ratio gauge")
    for i in range(16):
        lines.append(f'instance:node_memory_utilisation:ratio{{instance="node-1"}} 0.5 {T0 - 900 + 60 * i}')
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _require() -> tuple[str, str]:
    prom, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prom and promtool:
        return prom, promtool
    msg = ("prometheus/promtool are not installed: install Debian's prometheus package "
           "(scripts/install-system-deps.sh does, as root)")
    if os.environ.get("CI") or os.environ.get("KUBESCHED_REQUIRE_PROMETHEUS"):
        pytest.fail(msg + " — required under CI")
    pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    prom, promtool = _require()
    work = tmp_path_factory.mktemp("prometheus")
    (work / "data.om").write_text(_openmetrics())
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "data.om"), str(work / "tsdb")],
                   check=True, capture_output=True, timeout=60)
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    port = _free_port()
    log = open(work / "prometheus.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen([prom, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                with opener.open(url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready:\n" + (work / "prometheus.log").read_text()[-2000:])
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_windowed_average_and_stddev_as_load_watcher_computes_them(prometheus: str) -> None:
    m = PrometheusSource(prometheus, window="15m").fetch(NOW)
    assert m.window is not None and (m.window.start, m.window.end) == (T0 - 900, T0) and not m.captured
    n1 = m.node("node-1")
    assert n1 is not None
    # Every average first, then every standard deviation, as load-watcher orders them.
    assert [(x.type, x.operator) for x in n1.metrics] == [("CPU", "AVG"), ("Memory", "AVG"), ("CPU", "STD"),
                                                          ("Memory", "STD")]
    avg, std, found = resource_data(n1.metrics, "CPU")
    assert found and avg == pytest.approx(25.0) and std == pytest.approx(5.0)
    assert resource_data(n1.metrics, "Memory")[:2] == (pytest.approx(50.0), pytest.approx(0.0))
    assert n1.metrics[0].name == "instance:node_cpu:ratio" and n1.metrics[0].rollup == "15m"
    # The raw samples say when each node was last measured.
    assert n1.timestamp == T0
    n2 = m.node("node-2")
    assert n2 is not None and n2.timestamp == T0 - 600 and m.age("node-2", NOW) == 600
    assert resource_data(n2.metrics, "CPU")[0] == pytest.approx(80.0)


def test_a_shorter_window_sees_only_recent_samples(prometheus: str) -> None:
    m = PrometheusSource(prometheus, window="5m", include_latest=True).fetch(NOW)
    assert m.node("node-2") is None  # nothing in the last five minutes
    n1 = m.node("node-1")
    assert n1 is not None
    latest = [x for x in n1.metrics if x.operator == "Latest"]
    assert sorted((x.type, round(x.value, 6)) for x in latest) == [("CPU", 30.0), ("Memory", 50.0)]
    assert n1.metrics.index(latest[-1]) < 2  # placed first, so that AVG still wins for every consumer
    assert resource_data(n1.metrics, "CPU")[0] == pytest.approx(25.0)  # the 5-minute average, not Latest


def test_query_range_gives_the_usage_history(prometheus: str) -> None:
    series = PrometheusSource(prometheus).series(T0 - 600, T0, 300)
    assert [v for _, v in series["node-1"]["CPU"]] == pytest.approx([30.0, 20.0, 30.0])
    assert [t for t, _ in series["node-2"]["CPU"]] == [T0 - 600, T0 - 300]  # within the 5-minute lookback


def test_prometheus_mode_of_the_descheduler(prometheus: str) -> None:
    client = PrometheusClient(prometheus)
    usage = node_usage_from_prometheus(client, "avg_over_time(instance:node_cpu:ratio[15m])", T0)
    assert usage == {"node-1": {"MetricResource": 25}, "node-2": {"MetricResource": 80}}
    assert DeschedulerPrometheusClient(client, T0).query("instance:node_cpu:ratio") == {"node-1": pytest.approx(0.3)}
    with pytest.raises(InputError, match="outside of <0; 1>"):
        node_usage_from_prometheus(client, "instance:node_cpu:ratio * 10", T0)
    with pytest.raises(InputError, match='type "vector"'):
        node_usage_from_prometheus(client, "instance:node_cpu:ratio[5m]", T0)
    with pytest.raises(InputError, match="failed"):
        client.query("avg_over_time(", T0)


def test_metrics_flag_reads_a_prometheus_address(prometheus: str) -> None:
    m = load_metrics("prometheus+" + prometheus, NOW)
    assert m.node("node-1") is not None


def _run(args: list[str]) -> dict:
    """The command line, in this process."""
    from kubesched.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "-o", "json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_target_load_packing_fed_by_a_configured_prometheus(prometheus: str, tmp_path: Path) -> None:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
              "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "10"}}} for n in ("node-1", "node-2")]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": []}, "status": {"phase": "Pending"}}
    (tmp_path / "snap.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + [pod]}))

    def config(extra: dict) -> str:
        path = tmp_path / f"cfg{len(extra)}.json"
        args = {"metricProvider": {"type": "Prometheus", "address": prometheus}, **extra}
        path.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler",
                          "plugins": {"score": {"disabled": [{"name": "*"}],
                                                "enabled": [{"name": "TargetLoadPacking", "weight": 1}]}},
                          "pluginConfig": [{"name": "TargetLoadPacking", "args": args}]}]}))
        return str(path)

    def scores(cfg: str) -> dict[str, int]:
        out = _run(["explain", "--snapshot", str(tmp_path / "snap.json"), "--config", cfg, "--pod", "default/p",
                    "--now", "2024-01-01T00:00:00Z"])
        return {n: v["scores"]["TargetLoadPacking"]["raw"] for n, v in out["nodes"].items()}

    # node-1 at 25% of target 40%: (100-40)·25/40 + 40 = 77.5 → 78; node-2 at 80%: 40·20/60 → 13.
    assert scores(config({})) == {"node-1": 78, "node-2": 13}
    # node-2's data is 10 minutes old: with a 5-minute limit it counts as a node without metrics.
    assert scores(config({"metricsMaxAgeSeconds": 300})) == {"node-1": 78, "node-2": 0}


def test_low_node_utilization_prometheus_mode_queries_the_policys_server(prometheus: str, tmp_path: Path) -> None:
    def n(name: str) -> dict:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                           "conditions": [{"type": "Ready", "status": "True"}]}}

    def p(name: str, node: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}]},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
                "status": {"phase": "Running"}}

    items = [n("node-1"), n("node-2"), p("a", "node-1"), p("b", "node-2"), p("c", "node-2")]
    (tmp_path / "snap.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    (tmp_path / "policy.json").write_text(json.dumps({
        "apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
        "metricsProviders": [{"source": "Prometheus", "prometheus": {"url": prometheus}}],
        "profiles": [{"name": "p", "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
                      "pluginConfig": [{"name": "LowNodeUtilization", "args": {
                          "thresholds": {"MetricResource": 30}, "targetThresholds": {"MetricResource": 50},
                          "metricsUtilization": {"source": "Prometheus", "prometheus": {
                              "query": "avg_over_time(instance:node_cpu:ratio[15m])"}}}}]}]}))
    out = _run(["deschedule", "--snapshot", str(tmp_path / "snap.json"), "--policy", str(tmp_path / "policy.json"),
                "--now", "2024-01-01T00:00:00Z", "--min-ready-nodes", "0"])
    assert out["errors"] == []
    # node-2 is at 80% (> 50%), node-1 at 25% (< 30%): pods leave node-2 only.
    assert out["evictions"] and {e["node"] for e in out["evictions"]} == {"node-2"}

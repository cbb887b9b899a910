"""Usage history from a real Prometheus (loaded with real TSDB blocks) round-trips into usage traces, and
replaying the capture with no descheduler reproduces what was recorded."""

from __future__ import annotations

import csv
import json
import math
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kubesched.errors import RemoteError
from kubesched.live.history import CPU_QUERY, MEMORY_QUERY, History, Prometheus, Queries, TableWriter, parse_points
from kubesched.sim.traces import read_rows
from tests.kube_apiserver_double import KubeAPIServerDouble
from tests.prometheus_server import PodHistory, cadvisor_history, prometheus_with, require
from tests.test_live_capture import owned, run
from tests.test_live_double import node, pod

T_END = 1704067200  # 2024-01-01T00:00:00Z: the capture's --now
START = T_END - 3600
MI = 1024 * 1024


def num(v: Any) -> float:
    """A table cell as a number: empty (null in Parquet, "" in CSV) is NaN."""
    return math.nan if v is None or v == "" else float(v)


def histories() -> list[PodHistory]:
    return [
        # Running throughout; its CPU doubles half way, its memory grows by 1Mi a minute.
        PodHistory("apps", "web-5f7b9-aaaaa", "n1", START - 900, T_END + 120,
                   lambda t: 0.5 if t < START + 1800 else 1.0, lambda t: 300 * MI + (t - START) // 60 * MI),
        PodHistory("apps", "web-5f7b9-bbbbb", "n2", START - 900, T_END + 120, lambda t: 0.25, lambda t: 200 * MI),
        # Gone 20 minutes in (not in the snapshot); its replacement came 5 minutes later.
        PodHistory("apps", "web-5f7b9-ddddd", "n3", START - 900, START + 1200, lambda t: 0.75, lambda t: 400 * MI),
        PodHistory("apps", "web-5f7b9-ccccc", "n3", START + 1500, T_END + 120, lambda t: 0.6, lambda t: 350 * MI),
        # A Job's pod that ran from minute 30 to 45, long gone at capture time.
        PodHistory("apps", "once-x7k2p", "n1", START + 1800, START + 2700, lambda t: 1.5, lambda t: 1024 * MI),
    ]


def objects() -> list[dict[str, Any]]:
    tmpl = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "nginx", "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"}}}]}}
    objs: list[dict[str, Any]] = [node("n1"), node("n2"), node("n3")]
    objs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "apps",
                                                                            "uid": "d-uid"},
                 "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}})
    objs.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                 "metadata": {"name": "web-5f7b9", "namespace": "apps", "uid": "rs-uid",
                              "ownerReferences": owned("Deployment", "web", "d-uid")},
                 "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": tmpl}})
    objs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "apps",
                                                                      "uid": "job-uid"},
                 "spec": {"template": {"metadata": {"labels": {"job-name": "once"}}, "spec": {
                     "restartPolicy": "Never", "containers": [{"name": "main", "image": "batch", "resources": {
                         "requests": {"cpu": "1", "memory": "1Gi"}}}]}}}})
    for name, n in (("web-5f7b9-aaaaa", "n1"), ("web-5f7b9-bbbbb", "n2"), ("web-5f7b9-ccccc", "n3")):
        p = pod(name, n, ns="apps")
        p["metadata"]["ownerReferences"] = owned("ReplicaSet", "web-5f7b9", "rs-uid")
        p["spec"]["containers"] = tmpl["spec"]["containers"]  # type: ignore[index]
        objs.append(p)
    return objs


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    prom, promtool = require()
    work = tmp_path_factory.mktemp("prometheus-history")
    with (work / "history.om").open("w") as fh:
        cadvisor_history(fh, histories(), START - 900, T_END + 120, scrape=15.0)
    with prometheus_with(work / "history.om", work, prom=prom, promtool=promtool) as url:
        yield url


@pytest.fixture(scope="module")
def captured(prometheus: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    work = tmp_path_factory.mktemp("capture")
    with KubeAPIServerDouble() as api:
        api.add(objects())
        api.kubeconfig(work / "kubeconfig")
        code, stdout, err = run("capture", "--kubeconfig", str(work / "kubeconfig"), "--out", str(work / "cap"),
                                "--prometheus", prometheus, "--since", "1h", "--step", "1m", "--now",
                                "2024-01-01T00:00:00Z", "--max-points", "7", "--no-progress", "--json")
    assert code == 0, err
    return work / "cap", json.loads(stdout)


def query_range(url: str, expr: str) -> dict[tuple[str, str], dict[int, float]]:
    """What Prometheus answers for the whole window in one query, by (namespace/pod, node) and t."""
    form = urllib.parse.urlencode({"query": expr, "start": START, "end": T_END, "step": 60}).encode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url + "/api/v1/query_range", data=form), timeout=30) as r:
        doc = json.loads(r.read())
    out: dict[tuple[str, str], dict[int, float]] = {}
    for s in doc["data"]["result"]:
        m = s["metric"]
        out[(f"{m['namespace']}/{m['pod']}", m["node"])] = {int(float(t)) - START: float(v) for t, v in s["values"]}
    return out


def test_history_round_trips_into_usage_traces(prometheus: str, captured: tuple[Path, dict[str, Any]]) -> None:
    out, summary = captured
    h = summary["history"]
    assert (h["start"], h["end"], h["step"], h["points"]) == ("2023-12-31T23:00:00Z", "2024-01-01T00:00:00Z", "1m", 61)
    assert (h["podsWithUsage"], h["capturedPodsWithUsage"], h["capturedPodsWithoutUsage"],
            h["podsGoneBeforeCapture"]) == (5, 3, 0, 2)
    # 61 points, at most 7 per query: 9 chunks of two pod queries, and 9 of two node queries.
    assert h["rangeQueries"] == 2 * 9 + 2 * 9
    rows = read_rows(str(out / "usage.parquet"), "usage")
    traced: dict[tuple[str, str], dict[int, tuple[float, float]]] = {}
    for r in rows:
        traced.setdefault((r["pod"], r["node"]), {})[r["t"]] = (num(r["cpu"]), num(r["memory"]))
    cpu, mem = query_range(prometheus, CPU_QUERY), query_range(prometheus, MEMORY_QUERY)
    assert set(traced) == set(cpu) | set(mem) and len(traced) == 5
    for key, points in traced.items():
        # Every point of every series, exactly as Prometheus answers the whole window in one query.
        assert {t: v[0] for t, v in points.items() if not math.isnan(v[0])} == cpu.get(key, {})
        assert {t: v[1] for t, v in points.items() if not math.isnan(v[1])} == mem.get(key, {})
    # And what cAdvisor measured: a steady 0.25 cores and 200Mi.
    steady = traced[("apps/web-5f7b9-bbbbb", "n2")]
    assert sorted(steady) == list(range(0, 3601, 60))
    assert all(abs(c - 0.25) < 1e-9 and m == 200 * MI for c, m in steady.values())
    pods = {r["pod"]: r for r in read_rows(str(out / "pods.parquet"), "pods")}
    assert pods["web-5f7b9-aaaaa"]["start"] == 0 and math.isnan(num(pods["web-5f7b9-aaaaa"]["end"]))
    assert pods["web-5f7b9-ccccc"]["start"] == 1500 and pods["web-5f7b9-ccccc"]["owner"] == "ReplicaSet/web-5f7b9"
    gone = pods["web-5f7b9-ddddd"]
    assert gone["node"] == "n3" and gone["start"] == 0 and gone["end"] == max(traced[("apps/web-5f7b9-ddddd", "n3")]) + 60
    assert pods["once-x7k2p"]["start"] == 1800 and pods["once-x7k2p"]["node"] == "n1"
    nodes = read_rows(str(out / "node-usage.parquet"), "nodes")
    assert {r["node"] for r in nodes} == {"n1", "n2", "n3"}
    n2 = [r for r in nodes if r["node"] == "n2"]
    assert all(abs(r["cpu"] - 0.25) < 1e-9 for r in n2) and len(n2) == 61


def test_replay_with_no_descheduler_reproduces_the_recording(captured: tuple[Path, dict[str, Any]],
                                                            tmp_path: Path) -> None:
    out, _ = captured
    code, stdout, err = run("simulate", str(out / "scenario.yaml"), "--out", str(tmp_path / "sim"), "--no-html",
                            "--no-progress", "--json")
    assert code == 0, err
    # Expected: at each step, each node carries the sum of the captured series of the pods seen there (the
    # recorder keeps utilisation as float32: a relative 1e-6).
    expected: dict[tuple[int, str], list[float]] = {}
    for r in read_rows(str(out / "usage.parquet"), "usage"):
        acc = expected.setdefault((r["t"], r["node"]), [0.0, 0.0])
        acc[0] += 0.0 if math.isnan(num(r["cpu"])) else num(r["cpu"])
        acc[1] += 0.0 if math.isnan(num(r["memory"])) else num(r["memory"])
    recorded = read_rows(str(tmp_path / "sim" / "variants" / "baseline" / "nodes.parquet"), "nodes")
    alloc_cpu, alloc_mem = 4.0, 8 * 1024.0 * MI
    checked = 0
    for r in recorded:
        t, n = int(r["t"]), r["node"]
        want = expected.get((t, n), [0.0, 0.0])
        assert r["cpu"] * alloc_cpu == pytest.approx(want[0], rel=1e-6, abs=1e-9), (t, n)
        assert r["memory"] * alloc_mem == pytest.approx(want[1], rel=1e-6, abs=1.0), (t, n)
        checked += 1
    assert checked == 61 * 3
    # Pods came and went at their recorded times: running pods per step match the recording.
    pods = read_rows(str(out / "pods.parquet"), "pods")
    with (tmp_path / "sim" / "variants" / "baseline" / "series.csv").open() as fh:
        series = {int(float(r["t"])): int(r["running"]) for r in csv.DictReader(fh)}
    for t, running in series.items():
        want = sum(1 for p in pods if p["start"] <= t and (math.isnan(num(p["end"])) or t < p["end"]))
        assert running == want, t
    assert series[0] == 3 and series[1800] == 4 and series[3600] == 3
    doc = json.loads(stdout)
    baseline = next(v for v in doc["variants"] if v["name"] == "baseline")
    assert baseline["summary"]["evictions"] == 0


def test_the_descheduler_variant_replaces_what_it_evicts(captured: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, _ = captured
    code, stdout, err = run("simulate", str(out / "scenario.yaml"), "--out", str(tmp_path / "sim"), "--no-html",
                            "--no-progress", "--json")
    assert code == 0, err
    lnu = next(v for v in json.loads(stdout)["variants"] if v["name"] == "lnu-usage")
    assert lnu["summary"]["podsCreated"] >= 5


def test_csv_tables_hold_the_same_rows_as_parquet(prometheus: str, captured: tuple[Path, dict[str, Any]],
                                                  tmp_path: Path) -> None:
    with KubeAPIServerDouble() as api:
        api.add(objects())
        api.kubeconfig(tmp_path / "kubeconfig")
        code, _, err = run("capture", "--kubeconfig", str(tmp_path / "kubeconfig"), "--out", str(tmp_path / "cap"),
                           "--prometheus", prometheus, "--since", "1h", "--step", "1m", "--now",
                           "2024-01-01T00:00:00Z", "--max-points", "7", "--tables", "csv", "--no-progress", "--json")
    assert code == 0, err
    out, _ = captured
    for name, kind in (("usage", "usage"), ("node-usage", "nodes"), ("pods", "pods")):
        with (tmp_path / "cap" / f"{name}.csv").open() as fh:
            from_csv = [{k: num(v) if k in ("t", "cpu", "memory", "start", "end") else v for k, v in r.items()}
                        for r in csv.DictReader(fh)]
        from_parquet = [{k: num(v) if k in ("t", "cpu", "memory", "start", "end") else v for k, v in r.items()}
                        for r in read_rows(str(out / f"{name}.parquet"), kind)]
        assert len(from_csv) == len(from_parquet) > 0
        for a, b in zip(from_csv, from_parquet, strict=True):
            assert a.keys() == b.keys()
            assert all(a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def test_points_read_every_form_prometheus_writes_values_in() -> None:
    raw = b'[[1704067200,"0.1"],[1704067260.5,"NaN"],[1704067320,"+Inf"],[1704067380,"-Inf"],[1704067440,"1e-05"]]'
    ts, ys = parse_points(raw)
    assert ts.tolist() == [1704067200.0, 1704067260.5, 1704067320.0, 1704067380.0, 1704067440.0]
    expect = [0.1, math.nan, math.inf, -math.inf, 1e-05]
    assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(ys.tolist(), expect, strict=True))
    # JSON spacing, and an escaped string NumPy's reader does not take (the JSON decoder reads it): the same.
    ts2, ys2 = parse_points(b'[ [1704067200, "0.25"] ,\n [1704067260, "\\u0031e3"] ]')
    assert ts2.tolist() == [1704067200.0, 1704067260.0] and ys2.tolist() == [0.25, 1000.0]
    assert parse_points(b"[]")[0].size == 0


def test_an_answer_with_values_that_are_not_numbers_is_a_remote_error() -> None:
    prom = Prometheus("http://127.0.0.1:9")
    prom._post = lambda path, form: (  # type: ignore[method-assign]
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"pod":"a"},'
        b'"values":[[1704067200,"lots"]]}]}}')
    with pytest.raises(RemoteError, match="unreadable /api/v1/query_range answer"):
        prom.query_range("x", 1704067200, 1704067200, 60)
    prom._post = lambda path, form: b"<html>proxy error</html>"  # type: ignore[method-assign]
    with pytest.raises(RemoteError, match="unreadable"):
        prom.query_range("x", 1704067200, 1704067200, 60)


class _FakeAnswers(Prometheus):
    """Answers every range query with `series` pods' points over the asked window (no HTTP)."""

    def __init__(self, series: int) -> None:
        super().__init__("http://127.0.0.1:9")
        self.series = series
        self.asked: list[int] = []

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[tuple[dict[str, str], Any, Any]]:
        ts = np.arange(start, end + step / 2, step)
        self.asked.append(len(ts))
        self.queries_made += 1
        return [({"namespace": "ns", "pod": f"p{i:03d}", "node": f"n{i % 3}"}, ts, np.full(len(ts), float(i)))
                for i in range(self.series)]


def test_chunks_after_the_first_are_sized_by_its_series(tmp_path: Path) -> None:
    prom = _FakeAnswers(series=40)
    h = History(prom, Queries(), 0.0, 599 * 60.0, 60.0, max_samples=2000)
    w = TableWriter(tmp_path / "usage.csv", [("pod", "string"), ("node", "string"), ("t", "int"), ("cpu", "float"),
                                             ("memory", "float")], parquet=False)
    h.fetch_pods(w)
    w.close()
    # 600 steps: a first chunk of 60, then 2000 points / 40 series = 50 steps per answer (CPU and memory each).
    assert prom.asked == [60, 60] + [50, 50] * 10 + [40, 40]
    assert h.result.usage_rows == 40 * 600 and len(h.result.pods_with_usage) == 40
    with (tmp_path / "usage.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["pod"], r["t"]) for r in rows[:2]] == [("ns/p000", "0"), ("ns/p000", "60")]
    assert rows[60]["pod"] == "ns/p001" and rows[60]["node"] == "n1" and rows[60]["cpu"] == "1.0"

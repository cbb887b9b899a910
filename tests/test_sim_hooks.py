"""The public hooks the simulator drives other components through: a MetricsFeed as the scheduler Handle's
`services.metrics` (LoadAwareScheduling, Trimaran), a live `services.load_watcher` source for Trimaran,
`Descheduler.run_cycle(now, metrics=..., usage=...)` and `MetricsCollector.from_usage`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.config.plugin_args import build_args
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.framework import BalancePlugin, Status
from kubesched.descheduler.metricscollector import MetricsCollector, NodeUsageColumns
from kubesched.descheduler.registry import Registry
from kubesched.metrics.base import Metric, Metrics, MetricsFeed, MetricsSource, NodeUsage, Window
from kubesched.metrics.kubernetes_metrics import metrics_from_objects
from kubesched.scheduler.framework import CycleState, Handle, SchedulerServices
from kubesched.scheduler.plugins.load_aware_scheduling import LoadAwareScheduling
from kubesched.scheduler.plugins.trimaran.target_load_packing import TargetLoadPacking

T = datetime(2024, 1, 1, tzinfo=UTC)


def node(name: str) -> Any:
    return parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "32"},
                                  "capacity": {"cpu": "4", "memory": "8Gi", "pods": "32"}}})


def pending(name: str = "p") -> Any:
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                      "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
                      "status": {"phase": "Pending"}})


def cluster_with(*names: str) -> ClusterState:
    cluster = ClusterState()
    for n in names:
        cluster.add(node(n))
    return cluster


def node_metrics(cpu: dict[str, str]) -> Metrics:
    stamp = T.strftime("%Y-%m-%dT%H:%M:%SZ")
    return metrics_from_objects([{"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
                                  "metadata": {"name": n}, "timestamp": stamp, "window": "1m",
                                  "usage": {"cpu": c, "memory": "1Gi"}} for n, c in cpu.items()])


def filter_and_score(pl: Any, cluster: ClusterState, p: Any) -> tuple[list[bool], list[int]]:
    """Both forms of filter and score (they must agree)."""
    state = CycleState()
    rows = np.arange(cluster.num_nodes)
    passed: list[bool] = []
    if hasattr(pl, "filter"):
        pl.pre_filter(state, p, cluster)
        passed = [pl.filter(state, p, info).is_success for info in cluster.node_infos]
        assert passed == [bool(x) for x in pl.filter_nodes(state, p, cluster, rows)]
    scores = [pl.score(state, p, info)[0] for info in cluster.node_infos]
    assert scores == [int(x) for x in pl.score_nodes(state, p, cluster, rows)]
    return passed, scores


# ---------------------------------------------------------------- scheduler side


def test_load_aware_scheduling_reads_each_new_reading_of_a_feed() -> None:
    cluster = cluster_with("a", "b")
    feed = MetricsFeed()
    handle = Handle(cluster, now=lambda: T.timestamp() + 30, services=SchedulerServices(start=T, metrics=feed))
    pl = LoadAwareScheduling(LoadAwareScheduling.Args(), handle)
    # No reading yet: no node has metrics, so every node passes and scores the minimum.
    assert filter_and_score(pl, cluster, pending()) == ([True, True], [0, 0])
    feed.set_metrics(node_metrics({"a": "3800m", "b": "400m"}))  # a is over the default 65% threshold
    passed, scores = filter_and_score(pl, cluster, pending())
    assert passed == [False, True] and scores[1] > scores[0]
    feed.set_metrics(node_metrics({"a": "400m", "b": "3800m"}))
    passed, scores = filter_and_score(pl, cluster, pending())
    assert passed == [True, False] and scores[0] > scores[1]
    assert feed.version == 2


def test_load_aware_scheduling_keeps_a_fixed_reading() -> None:
    cluster = cluster_with("a", "b")
    handle = Handle(cluster, now=lambda: T.timestamp() + 30,
                    services=SchedulerServices(start=T, metrics=node_metrics({"a": "3800m", "b": "400m"})))
    pl = LoadAwareScheduling(LoadAwareScheduling.Args(), handle)
    assert filter_and_score(pl, cluster, pending())[0] == [False, True]
    # `--metrics` is one reading, read once: replacing the dict entry later changes nothing.
    handle.services.metrics = node_metrics({"a": "400m", "b": "3800m"})
    assert filter_and_score(pl, cluster, pending())[0] == [False, True]


def watcher(cpu: dict[str, float], end: float) -> Metrics:
    return Metrics("test", {n: NodeUsage(n, [Metric("CPU", "AVG", v)]) for n, v in cpu.items()},
                   timestamp=end, window=Window("15m", end - 900, end))


class CountingWatcher(MetricsSource):
    """A live load-watcher whose answer the test changes; counts how often it is read."""

    kind = "test watcher"

    def __init__(self, cpu: dict[str, float]) -> None:
        self.cpu = cpu
        self.reads = 0

    def fetch(self, now: datetime) -> Metrics:
        self.reads += 1
        return watcher(dict(self.cpu), now.timestamp())


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_trimaran_polls_a_given_load_watcher_every_30_seconds_of_the_scheduler_clock() -> None:
    cluster = cluster_with("a", "b")
    clock = Clock(T.timestamp())
    live = CountingWatcher({"a": 10.0, "b": 45.0})
    # The live source wins over a fixed reading in services.metrics (the simulator gives both).
    handle = Handle(cluster, now=clock, services=SchedulerServices(load_watcher=live,
                                                                   metrics=watcher({"a": 90, "b": 90}, 0.0)))
    pl = TargetLoadPacking(build_args(TargetLoadPacking, {"targetUtilization": 50}), handle)
    first = filter_and_score(pl, cluster, pending())[1]
    assert live.reads == 1 and first[0] < first[1]  # b is nearer the 50% target
    live.cpu = {"a": 45.0, "b": 10.0}
    clock.t += 20
    assert filter_and_score(pl, cluster, pending())[1] == first and live.reads == 1
    clock.t += 10
    assert filter_and_score(pl, cluster, pending())[1] == first[::-1] and live.reads == 2


def test_trimaran_asks_a_feed_for_its_latest_reading() -> None:
    cluster = cluster_with("a", "b")
    feed = MetricsFeed(watcher({"a": 10.0, "b": 45.0}, T.timestamp()))
    pl = TargetLoadPacking(build_args(TargetLoadPacking, {"targetUtilization": 50}), Handle(cluster, now=Clock(T.timestamp()),
                                                             services=SchedulerServices(metrics=feed)))
    first = filter_and_score(pl, cluster, pending())[1]
    feed.set_metrics(watcher({"a": 45.0, "b": 10.0}, T.timestamp()))
    assert filter_and_score(pl, cluster, pending())[1] == first[::-1]
    feed.set_metrics(None)
    assert filter_and_score(pl, cluster, pending())[1] == [0, 0]


# ---------------------------------------------------------------- descheduler side


class Seen(BalancePlugin):
    """Records what each cycle hands the plugins."""

    name = "Seen"
    log: list[tuple[Any, ...]] = []

    def balance(self, nodes: list[Any]) -> Status:
        h = self.handle
        Seen.log.append((h.now, h.metrics, h.services.metrics_collector, h.services.usage))
        return Status()


def _descheduler(now: datetime, mc: MetricsCollector) -> Descheduler:
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
              "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                         "conditions": [{"type": "Ready", "status": "True"}]}} for n in ("a", "b")]
    cluster = ClusterState.from_snapshot(parse_objects(nodes, "<test>"))
    reg = Registry()
    reg.register("Seen", Seen)
    pol = parse_descheduler_policy({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
                                    "metricsProviders": [{"source": "KubernetesMetrics"}],
                                    "profiles": [{"name": "p", "pluginConfig": [],
                                                  "plugins": {"balance": {"enabled": ["Seen"]}}}]}, "<test>", reg)
    return Descheduler(cluster, pol, now=now, metrics=mc, registry=reg)


def test_one_descheduler_is_moved_on_by_run_cycle() -> None:
    Seen.log = []
    first, second = MetricsCollector(), MetricsCollector()
    d = _descheduler(T, first)
    d.run_cycle()
    later = T + timedelta(minutes=2)
    reading = node_metrics({"a": "1"})
    d.run_cycle(later, metrics=second, usage=reading)
    d.run_cycle()  # nothing given: the last inputs stay
    assert Seen.log[0] == (T, first, first, None)
    assert Seen.log[1] == (later, second, second, reading) == Seen.log[2]
    assert d.now == later and d.metrics_collector is second


class LazyTable(Mapping[str, list[tuple[str, dict[str, Fraction]]]]):
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getitem__(self, key: str) -> list[tuple[str, dict[str, Fraction]]]:
        self.asked.append(key)
        if key != "default/p":
            raise KeyError(key)
        return [("c", {"cpu": Fraction(1, 2), "memory": Fraction(100)})]

    def __iter__(self) -> Iterator[str]:
        return iter(["default/p"])

    def __len__(self) -> int:
        return 1


def test_node_usage_columns_read_as_the_dict_they_stand_for() -> None:
    """The simulator's node table in columns reads as the dict of per-node dicts it replaces: the same
    entries in the same order, absent where not ok or past the columns, and the actual-usage client's
    matrix and missing-node error are the same from either."""
    from kubesched.descheduler.plugins.nodeutilization import ActualUsageClient, UsageError

    positions = {"a": 0, "b": 1, "c": 2, "late": 3}
    cols = NodeUsageColumns(positions, [1500, 250, 900], [2048, 10, 7], [True, False, True])
    as_dict = {"a": {"cpu": 1500, "memory": 2048}, "c": {"cpu": 900, "memory": 7}}
    assert dict(cols) == as_dict and list(cols) == ["a", "c"] and len(cols) == 2
    assert "b" not in cols and "late" not in cols and cols.get("zz") is None
    with pytest.raises(KeyError):
        cols["b"]  # noqa: B018
    cluster = ClusterState()
    for name in ("a", "b", "c"):
        cluster.add(parse_node({"kind": "Node", "metadata": {"name": name},
                                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    cluster.add(parse_pod({"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"nodeName": "c", "containers": [{"name": "c"}]}}))
    nodes = [cluster.nodes["c"], cluster.nodes["a"]]
    got = []
    for table in (cols, as_dict):
        mc = MetricsCollector.from_usage(table, {}, adopt=True)
        assert mc.nodes is table and mc.all_nodes_usage() == {n: mc.node_usage_of(n) for n in as_dict}
        for names in (["cpu", "memory", "pods"], ["pods", "cpu"]):
            client = ActualUsageClient(cluster, names, mc)
            client.sync(nodes)
            got.append(client.node_usage().tolist())
        with pytest.raises(UsageError, match="unable to find node 'b' in the collected metrics"):
            ActualUsageClient(cluster, ["cpu", "memory"], mc).sync([cluster.nodes["b"]])
    assert got[:2] == got[2:] == [[[900, 7, 1], [1500, 2048, 0]], [[1, 900], [0, 1500]]]


def test_metrics_collector_from_usage_reads_pods_from_the_given_table() -> None:
    table = LazyTable()
    mc = MetricsCollector.from_usage({"a": {"cpu": 1500, "memory": 2048}}, table)
    assert mc.has_synced and mc.node_usage("a") == {"cpu": Fraction(3, 2), "memory": Fraction(2048)}
    assert mc.pod_usage("default", "p", ["cpu"]) == {"cpu": Fraction(1, 2)}
    with pytest.raises(KeyError):
        mc.pod_usage("default", "q", ["cpu"])
    assert table.asked == ["default/p", "default/q"]
    assert not MetricsCollector.from_usage({}, {}).has_synced
    # A table the caller gives up is kept as it is; otherwise the collector keeps a copy in Python ints.
    given = {"a": {"cpu": 1500, "memory": 2048}}
    assert MetricsCollector.from_usage(given, table, adopt=True).nodes is given
    copied = MetricsCollector.from_usage({"a": {"cpu": np.int64(7), "memory": 2.0}}, table).nodes
    assert copied == {"a": {"cpu": 7, "memory": 2}} and type(copied["a"]["cpu"]) is int
    # A given table is read-only to the collector.
    with pytest.raises(TypeError):
        mc.add_objects([{"kind": "PodMetrics", "metadata": {"name": "x"}, "containers": []}])

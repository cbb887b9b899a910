"""Trimaran: TargetLoadPacking, LoadVariationRiskBalancing, LowRiskOverCommitment and what they share."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import build_args
from kubesched.errors import InputError
from kubesched.metrics.base import Metric, Metrics, NodeUsage, Window
from kubesched.scheduler.framework import CycleState, Handle, SchedulerServices
from kubesched.scheduler.plugins.trimaran.beta import compute_probability, match_moments, reg_inc_beta
from kubesched.scheduler.plugins.trimaran.handler import is_missing
from kubesched.scheduler.plugins.trimaran.load_variation_risk_balancing import LoadVariationRiskBalancing
from kubesched.scheduler.plugins.trimaran.low_risk_over_commitment import LowRiskOverCommitment
from kubesched.scheduler.plugins.trimaran.target_load_packing import TargetLoadPacking


def node(name: str, cpu: str = "4", memory: str = "8Gi") -> Any:
    return parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                       "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "32"}}})


def pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        node_name: str = "") -> Any:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": res}]}
    if node_name:
        spec["nodeName"] = node_name
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                      "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}})


def watcher(values: dict[str, list[tuple[str, str, float]]], end: float = 0.0) -> Metrics:
    return Metrics("test", {n: NodeUsage(n, [Metric(t, op, v) for t, op, v in ms]) for n, ms in values.items()},
                   timestamp=end or None, window=Window("15m", end - 900 if end else 0, end))


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def setup(plugin: type, args: dict[str, Any], nodes: list[Any], metrics: Metrics | None,
          pods: list[Any] = (), clock: Clock | None = None) -> tuple[Any, ClusterState]:  # type: ignore[assignment]
    cluster = ClusterState()
    for n in nodes:
        cluster.add(n)
    for p in pods:
        cluster.add(p)
    handle = Handle(cluster, now=clock or Clock(), services=SchedulerServices(metrics=metrics))
    return plugin(build_args(plugin, args), handle), cluster


def both_forms(pl: Any, cluster: ClusterState, p: Any) -> list[int]:
    """Score every node with the per-node form and the vectorised form; they must agree."""
    state = CycleState()
    if hasattr(pl, "pre_score"):
        pl.pre_score(state, p, cluster, np.arange(cluster.num_nodes))
    one = [pl.score(state, p, info)[0] for info in cluster.node_infos]
    rows = np.arange(cluster.num_nodes)
    vec = [int(x) for x in pl.score_nodes(state, p, cluster, rows)]
    assert one == vec
    return one


# ---------------------------------------------------------------- TargetLoadPacking


def test_target_load_packing_kep_example_and_prediction() -> None:
    m = watcher({"x": [("CPU", "Latest", 25)], "y": [("CPU", "AVG", 50)], "z": [("CPU", "Latest", 75)],
                 "w": [("Memory", "AVG", 10)]})
    pl, cluster = setup(TargetLoadPacking, {"targetUtilization": 50}, [node(n) for n in "xyzw"], m)
    assert both_forms(pl, cluster, pod("p", limits={"cpu": "0"})) == [75, 100, 25, 0]
    # Prediction: limit, else request × 1.5 (rounded half away from zero), else defaultRequests (1 core).
    assert pl.predict_utilisation(pod("a", requests={"cpu": "101m"}).containers[0]) == 152  # 151.5
    assert pl.predict_utilisation(pod("b", requests={"cpu": "1"}, limits={"cpu": "3"}).containers[0]) == 3000
    assert pl.predict_utilisation(pod("c").containers[0]) == 1000
    # Over 100% predicted: the minimum score.
    assert both_forms(pl, cluster, pod("big", limits={"cpu": "2"}))[2] == 0


def test_target_load_packing_counts_pods_bound_after_the_metrics_window() -> None:
    clock = Clock(2000.0)
    m = watcher({"a": [("CPU", "AVG", 10)], "b": [("CPU", "AVG", 10)]}, end=1000.0)
    pl, cluster = setup(TargetLoadPacking, {}, [node("a"), node("b")], m, clock=clock)
    p = pod("p", requests={"cpu": "400m"})
    before = both_forms(pl, cluster, p)
    assert before[0] == before[1]
    cluster.bind(pod("new", requests={"cpu": "200m"}), "a")  # predicted 300m, after the window's end
    after = both_forms(pl, cluster, p)
    assert after[0] > before[0] and after[1] == before[1]  # node a is now nearer the 40% target
    # The handler's cleanup (every 5 minutes) drops stamps older than 60 s.
    clock.t += 301
    assert both_forms(pl, cluster, p) == before


def test_missing_window_rule() -> None:
    assert is_missing(1001.5, 1000)  # after the window
    assert is_missing(950, 1000)  # within the reporting interval before its end
    assert not is_missing(940, 1000)


def test_target_load_packing_args_are_checked() -> None:
    with pytest.raises(InputError) as e:
        setup(TargetLoadPacking, {"defaultRequestsMultiplier": "1,5"}, [node("a")], watcher({}))
    assert e.value.field == "defaultRequestsMultiplier"
    with pytest.raises(InputError) as e:
        setup(TargetLoadPacking, {"targetUtilisation": 50}, [node("a")], watcher({}))
    assert e.value.field == "targetUtilisation"
    with pytest.raises(InputError, match="invalid MetricProvider.Type"):
        setup(TargetLoadPacking, {"metricProvider": {"type": "Graphite"}}, [node("a")], None)
    pl, _ = setup(TargetLoadPacking, {"targetUtilization": 0}, [node("a")], watcher({}))
    assert pl.target == 40  # v1 defaulting: <= 0 means the default


def test_stale_metrics_make_a_node_unknown_when_a_maximum_age_is_set() -> None:
    m = watcher({"a": [("CPU", "AVG", 10)]}, end=1000.0)
    m.captured = False
    for max_age, expected in ((0, [55]), (600, [0]), (2000, [55])):
        pl, cluster = setup(TargetLoadPacking, {"metricsMaxAgeSeconds": max_age}, [node("a")], m, clock=Clock(2000.0))
        assert both_forms(pl, cluster, pod("p", limits={"cpu": "0"})) == expected


# ---------------------------------------------------------------- LoadVariationRiskBalancing


def test_load_variation_risk_balancing_worst_resource_and_rounding() -> None:
    m = watcher({"a": [("CPU", "AVG", 90), ("CPU", "STD", 20), ("Memory", "AVG", 75), ("Memory", "STD", 15)],
                 "b": [("CPU", "AVG", 30)], "c": []})
    pl, cluster = setup(LoadVariationRiskBalancing, {}, [node("a", "1", "1Gi"), node("b", "2", "256"),
                                                         node("c")], m)
    # a: cpu risk (0.9+0.2)/2 → 45, memory (0.75+0.15)/2 → 55 → min 45; b: only cpu (mu .3) → 85; c: metrics
    # without cpu or memory → 0.
    assert both_forms(pl, cluster, parse_pod({"metadata": {"name": "empty"}, "spec": {}})) == [45, 85, 0]


@pytest.mark.parametrize("sensitivity, expected", [(1, 57), (2, 45), (0, 75)])
def test_load_variation_risk_balancing_sensitivity(sensitivity: float, expected: int) -> None:
    m = watcher({"a": [("CPU", "AVG", 40), ("CPU", "STD", 36)]})
    pl, cluster = setup(LoadVariationRiskBalancing, {"safeVarianceSensitivity": sensitivity},
                        [node("a", "100m")], m)
    # mu = (40 + 10)/100 = .5, sigma .36: ^1 → 57; ^(1/2) = .6 → 45; ^∞ → 0 → 75.
    assert both_forms(pl, cluster, pod("p", requests={"cpu": "10m"})) == [expected]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 120), st.floats(-5, 60), st.floats(0, 120), st.floats(0, 60)),
                min_size=1, max_size=6),
       st.integers(0, 3000), st.floats(0, 3), st.floats(0, 3))
def test_trimaran_forms_agree(stats: list[tuple[float, float, float, float]], req: int, margin: float,
                              sensitivity: float) -> None:
    nodes = [node(f"n{i}", "2", "4Gi") for i in range(len(stats))]
    m = watcher({f"n{i}": [("CPU", "AVG", a), ("CPU", "STD", s), ("Memory", "AVG", ma), ("Memory", "STD", ms)]
                 for i, (a, s, ma, ms) in enumerate(stats)})
    p = pod("p", requests={"cpu": f"{req}m", "memory": "1Gi"})
    for plugin, args in ((LoadVariationRiskBalancing, {"safeVarianceMargin": margin,
                                                       "safeVarianceSensitivity": sensitivity}),
                         (TargetLoadPacking, {}), (LowRiskOverCommitment, {})):
        pl, cluster = setup(plugin, args, nodes, m)
        for score in both_forms(pl, cluster, p):
            assert 0 <= score <= 100


# ---------------------------------------------------------------- LowRiskOverCommitment


def test_regularized_incomplete_beta_identities() -> None:
    for x in (0.1, 0.37, 0.5, 0.93):
        assert reg_inc_beta(1.0, 1.0, x) == pytest.approx(x, abs=1e-15)
        assert reg_inc_beta(3.0, 1.0, x) == pytest.approx(x ** 3, rel=1e-13)
        assert reg_inc_beta(1.0, 4.0, x) == pytest.approx(1 - (1 - x) ** 4, rel=1e-13)
        assert reg_inc_beta(2.5, 7.0, x) + reg_inc_beta(7.0, 2.5, 1 - x) == pytest.approx(1.0, abs=1e-14)
    assert reg_inc_beta(40.0, 40.0, 0.5) == pytest.approx(0.5, abs=1e-14)
    assert math.isnan(reg_inc_beta(0.0, 1.0, 0.5)) and reg_inc_beta(2.0, 3.0, 0.0) == 0.0


def test_beta_fit_by_moment_matching() -> None:
    d = match_moments(0.3, 0.01 + 0.09)
    assert d is not None and d.mean == pytest.approx(0.3) and d.variance == pytest.approx(0.01)
    assert match_moments(0.5, 0.5) is None  # variance .25 = m1(1 - m1): no Beta distribution
    assert compute_probability(0.0, 0.2, 0.5) == (1.0, None)
    assert compute_probability(0.6, 0.0, 0.5) == (0.0, None)


def test_low_risk_over_commitment_kep_example() -> None:
    """KEP 357 example 2: allocation probabilities .471/.600/.984 → scores 44/63/70."""
    nodes, pods = [], []
    data = {"node-21": (2517, 5716, 62.73376, 11.955243), "node-24": (2444, 4520, 48.638875, 15.511253),
            "node-28": (3468, 4280, 33.932225, 10.782353)}
    for name, (req, lim, _avg, _std) in data.items():
        nodes.append(node(name, "3910m", "16Gi"))
        pods.append(pod(f"load-{name}", {"cpu": f"{req}m"}, {"cpu": f"{lim}m"}, name))
    m = watcher({n: [("CPU", "AVG", avg), ("CPU", "STD", std)] for n, (_r, _l, avg, std) in data.items()})
    pl, cluster = setup(LowRiskOverCommitment, {"smoothingWindowSize": 5, "riskLimitWeights": {"cpu": 0.5}},
                        nodes, m, pods)
    assert both_forms(pl, cluster, pod("p", {"cpu": "100m"})) == [44, 63, 70]
    # A best-effort pod is not this plugin's concern.
    assert both_forms(pl, cluster, pod("be")) == [0, 0, 0]


def test_low_risk_over_commitment_weights_out_of_range_take_the_default() -> None:
    pl, _ = setup(LowRiskOverCommitment, {"riskLimitWeights": {"cpu": 1.5, "memory": 0.2}}, [node("a")], watcher({}))
    assert pl.risk_limit_weights == {"cpu": 0.5, "memory": 0.2}
    with pytest.raises(InputError) as e:
        setup(LowRiskOverCommitment, {"riskLimitWeights": {"cpu": "high"}}, [node("a")], watcher({}))
    assert e.value.field == "riskLimitWeights.cpu"

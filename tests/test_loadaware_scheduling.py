"""koordinator's LoadAwareScheduling: usage thresholds, estimation of freshly placed pods, scoring."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import build_args
from kubesched.errors import InputError
from kubesched.metrics.kubernetes_metrics import metrics_from_objects
from kubesched.scheduler.framework import CycleState, Handle, SchedulerServices
from kubesched.scheduler.plugins.load_aware_scheduling import LoadAwareScheduling

T = datetime(2024, 1, 1, tzinfo=UTC)
STAMP = "2024-01-01T00:00:00Z"


def node(name: str, annotations: dict[str, str] | None = None) -> Any:
    return parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations or {}},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "32"}}})


def pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        node_name: str = "", scheduled: str | None = None, owner: str | None = None,
        labels: dict[str, str] | None = None) -> Any:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "x", "uid": "x"}]
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if scheduled:
        status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                      "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": res}]},
                      "status": status})


def usage(name: str, cpu: str, memory: str = "1Gi", stamp: str = STAMP) -> dict[str, Any]:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": name},
            "timestamp": stamp, "window": "1m", "usage": {"cpu": cpu, "memory": memory}}


def pod_usage(name: str, cpu: str, memory: str = "100Mi") -> dict[str, Any]:
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
            "metadata": {"name": name, "namespace": "default"}, "timestamp": STAMP, "window": "1m",
            "containers": [{"name": "c", "usage": {"cpu": cpu, "memory": memory}}]}


def setup(args: dict[str, Any], nodes: list[Any], objects: list[dict[str, Any]], pods: list[Any] = (),  # type: ignore[assignment]
          now: float = T.timestamp() + 30) -> tuple[LoadAwareScheduling, ClusterState]:
    cluster = ClusterState()
    for n in nodes:
        cluster.add(n)
    for p in pods:
        cluster.add(p)
    handle = Handle(cluster, now=lambda: now, services=SchedulerServices(start=T, metrics=metrics_from_objects(objects)))
    return LoadAwareScheduling(build_args(LoadAwareScheduling, args), handle), cluster


def run(pl: LoadAwareScheduling, cluster: ClusterState, p: Any) -> tuple[list[Any], list[int]]:
    """Filter and score every node in both forms (which must agree)."""
    state = CycleState()
    pl.pre_filter(state, p, cluster)
    rows = np.arange(cluster.num_nodes)
    statuses = [pl.filter(state, p, info) for info in cluster.node_infos]
    assert [s.is_success for s in statuses] == list(pl.filter_nodes(state, p, cluster, rows))
    scores = [pl.score(state, p, info)[0] for info in cluster.node_infos]
    assert scores == [int(x) for x in pl.score_nodes(state, p, cluster, rows)]
    return [s.reasons[0] if s.reasons else "ok" for s in statuses], scores


def test_estimation_is_max_of_request_and_limit_times_the_scaling_factor() -> None:
    pl, _ = setup({}, [node("a")], [])
    # cpu: max(1, 2) × 85% = 1700m; memory: 1Gi × 70% rounded half away from zero.
    assert pl.estimate_pod(pod("p", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})) == {
        "cpu": 1700, "memory": round(2**30 * 0.7)}
    # Neither set: 250m and 200Mi; a limit caps the estimate.
    assert pl.estimate_pod(pod("q")) == {"cpu": 250, "memory": 200 * 2**20}
    pl2, _ = setup({"estimatedScalingFactors": {"cpu": 100}}, [node("a")], [])
    assert pl2.estimate_pod(pod("r", {"cpu": "3"}, {"cpu": "2"}))["cpu"] == 2000  # max(3, 2) × 100%, capped at the limit


def test_filter_on_usage_thresholds_and_score_on_least_used() -> None:
    objects = [usage("hot", "2500m"), usage("cold", "500m")]
    pl, cluster = setup({}, [node("hot"), node("cold")], objects)
    reasons, scores = run(pl, cluster, pod("p", {"cpu": "500m"}))
    # hot: (2500 + 425) / 4000 = 73% > 65%.
    assert reasons == ["node(s) cpu usage exceed threshold", "ok"]
    # cold: cpu (4000-925)·100/4000 = 76, memory (8Gi - 1Gi - 200Mi est.)·100/8Gi = 85 → (76 + 85) / 2 = 80.
    assert scores[1] == 80 and scores[0] < scores[1]


def test_daemonset_pods_pass_and_nodes_without_metrics_pass() -> None:
    pl, cluster = setup({}, [node("hot"), node("unknown")], [usage("hot", "3900m")])
    reasons, scores = run(pl, cluster, pod("ds", {"cpu": "1"}, owner="DaemonSet"))
    assert reasons == ["ok", "ok"] and scores[1] == 0
    reasons, _ = run(pl, cluster, pod("p", {"cpu": "1"}))
    assert reasons == ["node(s) cpu usage exceed threshold", "ok"]


def test_expired_metrics_reject_unless_allowed() -> None:
    old = [usage("a", "100m", stamp="2023-12-31T23:50:00Z")]
    pl, cluster = setup({}, [node("a")], old)
    assert run(pl, cluster, pod("p"))[0] == ["node(s) nodeMetric expired"]
    pl, cluster = setup({"enableScheduleWhenNodeMetricsExpired": True}, [node("a")], old)
    assert run(pl, cluster, pod("p")) == (["ok"], [0])
    pl, cluster = setup({"nodeMetricExpirationSeconds": 3600}, [node("a")], old)
    assert run(pl, cluster, pod("p"))[0] == ["ok"]


def test_pods_the_metrics_do_not_show_yet_are_estimated() -> None:
    objects = [usage("a", "1"), pod_usage("old", "900m")]
    # Scheduled long before the metrics: its usage is in them.
    old = pod("old", {"cpu": "1"}, node_name="a", scheduled="2023-12-31T20:00:00Z")
    pl, cluster = setup({}, [node("a")], objects, [old])
    base = run(pl, cluster, pod("p", {"cpu": "100m"}))[1][0]
    # Scheduled within the report interval before the metrics' update: its estimate beyond its usage counts.
    fresh = pod("fresh", {"cpu": "1"}, node_name="a", scheduled="2023-12-31T23:59:30Z")
    pl, cluster = setup({}, [node("a")], objects, [old, fresh])
    assert run(pl, cluster, pod("p", {"cpu": "100m"}))[1][0] < base
    # A pod bound during this run counts at once (and stops counting when it is gone).
    pl, cluster = setup({}, [node("a")], objects, [old])
    new = pod("new", {"cpu": "2"})
    cluster.add(new)
    cluster.bind(new, "a")
    reasons, scores = run(pl, cluster, pod("p", {"cpu": "100m"}))
    assert reasons == ["node(s) cpu usage exceed threshold"]  # 1000 + 1700 + 85 → 70%
    cluster.delete(cluster.pods[new.key])
    assert run(pl, cluster, pod("p", {"cpu": "100m"}))[1][0] == base


def test_prod_thresholds_and_node_annotation_override() -> None:
    objects = [usage("a", "2"), pod_usage("prod", "1500m")]
    prod = pod("prod", {"cpu": "1"}, node_name="a", scheduled="2023-12-31T20:00:00Z")
    pl, cluster = setup({"prodUsageThresholds": {"cpu": 30}}, [node("a")], objects, [prod])
    # The incoming burstable pod is koord-prod: prod usage 1500 + 85 = 40% > 30%.
    assert run(pl, cluster, pod("p", {"cpu": "100m"}))[0] == ["node(s) cpu usage exceed threshold"]
    # A batch (best-effort) pod is held to the node thresholds: (2000 + 250) / 4000 = 56% <= 65%.
    assert run(pl, cluster, pod("b"))[0] == ["ok"]
    custom = node("a", {"scheduling.koordinator.sh/usage-thresholds": '{"usageThresholds": {"cpu": 50}}'})
    pl, cluster = setup({}, [custom], objects, [prod])
    assert run(pl, cluster, pod("b"))[0] == ["node(s) cpu usage exceed threshold"]


def test_args_are_validated() -> None:
    with pytest.raises(InputError) as e:
        setup({"usageThresholds": {"cpu": 120}}, [node("a")], [])
    assert e.value.field == "usageThresholds.cpu"
    with pytest.raises(InputError) as e:
        setup({"resourceWeights": {"nvidia.com/gpu": 1}, "estimatedScalingFactors": {}}, [node("a")], [])
    assert e.value.field == "estimatedScalingFactors"
    with pytest.raises(InputError) as e:
        setup({"aggregated": {"usageAggregationType": "p42"}}, [node("a")], [])
    assert e.value.field == "aggregated.usageAggregationType"
    with pytest.raises(InputError) as e:
        setup({"usageThreshold": {"cpu": 60}}, [node("a")], [])
    assert e.value.field == "usageThreshold"


def test_dominant_resource_weight() -> None:
    objects = [usage("a", "3", "1Gi")]
    pl, cluster = setup({"resourceWeights": {"cpu": 1, "memory": 1}, "dominantResourceWeight": 2,
                         "usageThresholds": {"cpu": 100}}, [node("a")], objects)
    _, scores = run(pl, cluster, pod("p", {"cpu": "100m"}))
    # cpu (4000-3085)·100/4000 = 22, memory 85; (22 + 85 + 2·22) / 4 = 37.
    assert scores == [37]


def bare_node_metric(name: str, update: str | None) -> dict[str, Any]:
    """A koordinator NodeMetric that has no status.nodeMetric (koordlet has not reported usage yet)."""
    status: dict[str, Any] = {"updateTime": update} if update else {}
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}, "status": status}


def test_node_metric_without_usage_is_still_judged_for_freshness() -> None:
    # Upstream checks expiry before it skips a NodeMetric whose status.nodeMetric is nil: a stale or
    # never-updated one rejects the node, a fresh one passes; none of them is scored.
    objects = [bare_node_metric("fresh", STAMP), bare_node_metric("stale", "2023-12-31T23:57:00Z"),
               bare_node_metric("never", None)]
    nodes = [node("fresh"), node("stale"), node("never")]
    pl, cluster = setup({}, nodes, objects, now=T.timestamp())
    reasons, scores = run(pl, cluster, pod("p", {"cpu": "3900m"}))
    assert reasons == ["ok", "node(s) nodeMetric expired", "node(s) nodeMetric expired"]
    assert scores == [0, 0, 0]
    pl, cluster = setup({"enableScheduleWhenNodeMetricsExpired": True}, nodes, objects, now=T.timestamp())
    assert run(pl, cluster, pod("p", {"cpu": "3900m"})) == (["ok", "ok", "ok"], [0, 0, 0])

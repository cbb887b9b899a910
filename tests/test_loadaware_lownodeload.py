"""koordinator's LowNodeLoad, its configuration format, and the scheduler/descheduler coherence check."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.config.koordinator_descheduler import convert, label_selector_string
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.framework import DeschedulerServices
from kubesched.descheduler.loadaware_coherence import check
from kubesched.descheduler.plugins.low_node_load import DEFAULT_NODE_POOL, Detector, LoadAnomalyCondition, LowNodeLoadArgs
from kubesched.descheduler.registry import default_registry
from kubesched.errors import InputError

T = datetime(2024, 1, 1, tzinfo=UTC)
STAMP = "2024-01-01T00:00:00Z"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "hotspot-descheduling"


def koord_config(args: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration", **top,
            "profiles": [{"name": "koord-descheduler",
                          "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]},
                                      "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
                                      "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}},
                          "pluginConfig": [{"name": "LowNodeLoad", "args": args}]}]}


def cluster_objects(hot_cpu: int = 3600) -> list[dict[str, Any]]:
    """n1 runs three 1200m pods (hot); n2 is idle."""
    objs: list[dict[str, Any]] = []
    for n in ("n1", "n2"):
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": n},
                     "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"},
                                "conditions": [{"type": "Ready", "status": "True"}]}})
    for i in range(3):
        name = f"p{i}"
        objs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": "default",
                                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                                       "uid": "rs", "controller": True}]},
                     "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {
                         "requests": {"cpu": "500m", "memory": "256Mi"}}}]},
                     "status": {"phase": "Running"}})
        objs.append({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
                     "metadata": {"name": name, "namespace": "default"}, "timestamp": STAMP,
                     "containers": [{"name": "c", "usage": {"cpu": f"{hot_cpu // 3}m", "memory": "256Mi"}}]})
    objs.append({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n1"},
                 "timestamp": STAMP, "usage": {"cpu": f"{hot_cpu}m", "memory": "768Mi"}})
    objs.append({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": "n2"},
                 "timestamp": STAMP, "usage": {"cpu": "200m", "memory": "100Mi"}})
    return objs


def descheduler(config: dict[str, Any], objects: list[dict[str, Any]]) -> Descheduler:
    snap = parse_objects(objects, "<test>")
    cluster = ClusterState.from_snapshot(snap)
    policy = parse_descheduler_policy(config, "<test>", default_registry())
    return Descheduler(cluster, policy, now=T + timedelta(seconds=30), min_ready_nodes=0,
                       services=DeschedulerServices(snapshot=snap))


def test_v1alpha2_args_become_the_default_pool_with_defaults() -> None:
    a = LowNodeLoadArgs.from_raw({"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 60},
                                  "nodePools": [{"name": "gpu", "nodeSelector": {"matchLabels": {"gpu": "true"}},
                                                 "anomalyCondition": {"consecutiveAbnormalities": 2}}]})
    assert a.node_fit is True and a.node_metric_expiration_seconds == 180 and a.detector_cache_timeout == 300
    default, gpu = a.node_pools
    assert default.name == DEFAULT_NODE_POOL and default.node_selector is None
    assert default.resource_weights == {"cpu": 1, "memory": 1}
    assert default.anomaly_condition == LoadAnomalyCondition(60.0, 5, 3)
    # A pool without thresholds inherits the top level's; a partial anomaly condition is completed.
    assert gpu.low_thresholds == {"cpu": 30} and gpu.anomaly_condition.consecutive_abnormalities == 2
    assert gpu.anomaly_condition.consecutive_normalities == 3
    assert gpu.node_selector is not None and gpu.node_selector.matches({"gpu": "true"})


@pytest.mark.parametrize("args, field", [
    ({"lowThresholds": {"cpu": 70}, "highThresholds": {"cpu": 60}}, "args.lowThresholds.cpu"),
    ({"highThresholds": {"cpu": 50}, "prodHighThresholds": {"cpu": 60}}, "args.prodHighThresholds.cpu"),
    ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "args.evictableNamespaces"),
    ({"nodeMetricExpirationSeconds": 0}, "args.nodeMetricExpirationSeconds"),
    ({"highThreshold": {"cpu": 50}}, "args.highThreshold"),
])
def test_invalid_args_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as e:
        LowNodeLoadArgs.from_raw(args, "args")
    assert e.value.field == field


def test_anomaly_detector_needs_more_than_n_consecutive_abnormal_rounds() -> None:
    d = Detector(timeout=60, anomaly_after=2, normal_after=1)
    assert [d.mark(False, t) for t in (0, 1, 2)] == [False, False, True]
    assert d.mark(True, 3) is True  # one normal round is not more than 1
    assert d.mark(True, 4) is False
    d2 = Detector(timeout=60, anomaly_after=0, normal_after=3)
    assert d2.mark(False, 0) is True
    assert d2.state(61) is False  # the anomaly state times out


def test_hot_node_is_drained_only_after_consecutive_abnormal_cycles() -> None:
    args = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 60},
            "anomalyCondition": {"consecutiveAbnormalities": 2, "consecutiveNormalities": 1}}
    d = descheduler(koord_config(args), cluster_objects())
    counts = [len(d.run_cycle().evictions) for _ in range(3)]
    # Cycles 1 and 2 only count the node as abnormal; the third (more than 2 in a row) evicts: 90% → 60%.
    assert counts == [0, 0, 1]


def test_stale_node_metrics_are_left_out() -> None:
    args = {"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 60}, "anomalyCondition": {"consecutiveAbnormalities": 1},
            "nodeMetricExpirationSeconds": 10}
    assert not descheduler(koord_config(args), cluster_objects()).run_cycle().evictions
    args["nodeMetricExpirationSeconds"] = 60
    evictions = descheduler(koord_config(args), cluster_objects()).run_cycle().evictions
    assert [e.pod.name for e in evictions] == ["p0"] and "node cpu usage(90.00%)>threshold(60.00%)" in evictions[0].reason


def test_koordinator_configuration_converts_to_a_policy() -> None:
    doc = koord_config({"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 60}},
                       nodeSelector={"matchLabels": {"pool": "a"}, "matchExpressions": [
                           {"key": "zone", "operator": "In", "values": ["x", "y"]}]},
                       deschedulingInterval="60s", leaderElection={"leaderElect": False})
    out = convert(doc)
    assert out["kind"] == "DeschedulerPolicy" and out["nodeSelector"] == "pool=a,zone in (x,y)"
    assert out["profiles"][0]["plugins"]["balance"] == {"enabled": ["LowNodeLoad"]}
    policy = parse_descheduler_policy(doc, "<test>", default_registry())
    assert policy.kind == "DeschedulerConfiguration"
    assert policy.profiles[0].plugin_config["LowNodeLoad"].node_pools[0].high_thresholds == {"cpu": 60}
    # koordinator's default evictor is MigrationController: DefaultEvictor's filters and its per-node limit (2).
    default = convert({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
                       "profiles": [{"plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}]}}}]})
    assert default["maxNoOfPodsToEvictPerNode"] == 2 and default["profiles"][0]["name"] == "koord-descheduler"
    assert label_selector_string({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, "s") == "!k"
    with pytest.raises(InputError) as e:
        convert({**doc, "profile": []})
    assert e.value.field == "profile"


def test_coherence_warns_when_scheduler_and_descheduler_fight() -> None:
    def sched(cpu: int) -> Any:
        return parse_scheduler_config({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler",
                          "plugins": {"multiPoint": {"enabled": [{"name": "LoadAwareScheduling"}]}},
                          "pluginConfig": [{"name": "LoadAwareScheduling",
                                            "args": {"usageThresholds": {"cpu": cpu, "memory": 85}}}]}]})

    policy = parse_descheduler_policy(koord_config({"lowThresholds": {"cpu": 45, "memory": 80},
                                                    "highThresholds": {"cpu": 75, "memory": 90}}), "<test>",
                                      default_registry())
    assert check(sched(65), policy) == []
    high = check(sched(80), policy)
    assert len(high) == 1 and "highThresholds.cpu 75% is not above" in high[0] and "usageThresholds.cpu 80%" in high[0]
    low = check(sched(40), policy)
    assert len(low) == 1 and "lowThresholds.cpu 45% is not below" in low[0]


def test_the_hotspot_example_tells_the_seeds_story() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE / "run.py")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "The story holds." in proc.stdout


def test_a_descheduler_policy_can_enable_low_node_load() -> None:
    policy = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy",
              "profiles": [{"name": "usage", "plugins": {"balance": {"enabled": ["LowNodeLoad"]}},
                            "pluginConfig": [{"name": "LowNodeLoad", "args": {
                                "lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 60},
                                "anomalyCondition": {"consecutiveAbnormalities": 1}}}]}]}
    evictions = descheduler(policy, cluster_objects()).run_cycle().evictions
    assert [(e.pod.name, e.plugin) for e in evictions] == [("p0", "LowNodeLoad")]
    with pytest.raises(InputError) as e:
        parse_descheduler_policy({**policy, "profiles": [{**policy["profiles"][0], "pluginConfig": [
            {"name": "LowNodeLoad", "args": {"lowThresholds": {"cpu": -1}}}]}]}, "<test>", default_registry())
    assert e.value.field == "profiles[0].pluginConfig[0].args.lowThresholds.cpu"

"""KubeSchedulerConfiguration merge semantics, framework building, and ClusterState bookkeeping."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.api.objects import parse_node, parse_pod
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import PluginRef, PluginSet, merge_plugin_set, parse_scheduler_config
from kubesched.errors import InputError
from kubesched.scheduler.framework import Handle
from kubesched.scheduler.registry import Registry
from kubesched.scheduler.runtime import Framework


def cfg(profile: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [profile]}


def test_merge_replaces_in_place_and_appends() -> None:
    default = PluginSet([PluginRef("A", 1), PluginRef("B", 2), PluginRef("C")])
    custom = PluginSet([PluginRef("B", 5), PluginRef("X")], ["C"])
    merged = merge_plugin_set(default, custom)
    assert merged.enabled == [PluginRef("A", 1), PluginRef("B", 5), PluginRef("X")]
    star = merge_plugin_set(default, PluginSet([PluginRef("X")], ["*"]))
    assert star.enabled == [PluginRef("X")]


def test_default_profile_weights_and_points() -> None:
    config = parse_scheduler_config(cfg({"schedulerName": "default-scheduler"}))
    fwk = Framework(config.profiles[0], Registry(include_entry_points=False), Handle(ClusterState()))
    assert fwk.weights["TaintToleration"] == 3
    assert fwk.weights["NodeAffinity"] == 2
    assert fwk.weights["NodeResourcesFit"] == 1
    assert fwk.queue_sort.name == "PrioritySort"
    assert [p.name for p in fwk.bind] == ["DefaultBinder"]
    assert "NodeResourcesFit" in [p.name for p in fwk.filter]


def test_score_point_disable_star_keeps_multipoint_filters() -> None:
    config = parse_scheduler_config(cfg({"plugins": {
        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 7}], "disabled": [{"name": "*"}]}}}))
    fwk = Framework(config.profiles[0], Registry(include_entry_points=False), Handle(ClusterState()))
    assert [p.name for p in fwk.score] == ["NodeResourcesFit"]
    assert fwk.weights["NodeResourcesFit"] == 7
    assert len(fwk.filter) > 3  # multiPoint defaults still fill the filter point


@pytest.mark.parametrize("profile,fragment", [
    ({"plugins": {"multiPoint": {"enabled": [{"name": "NoSuchPlugin"}]}}}, "unknown plugin 'NoSuchPlugin'"),
    ({"plugins": {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"},
                                                                          {"name": "DefaultBinder"}]}},
      "pluginConfig": [{"name": "NodeResourcesFit", "args": {}}]}, "does not enable"),
    ({"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}, "only one queue sort plugin"),
    ({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Fancy"}}}]},
     "scoringStrategy.type"),
    ({"pluginConfig": [{"name": "NodeResourcesFit", "args": {"bogus": 1}}]}, "unknown field 'bogus'"),
    ({"plugins": {"postScore": {}}}, "unknown extension point"),
])
def test_bad_profiles(profile: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError) as e:
        config = parse_scheduler_config(cfg(profile), source="c.yaml")
        Framework(config.profiles[0], Registry(include_entry_points=False), Handle(ClusterState()))
    assert fragment in str(e.value)


def test_bad_config_documents() -> None:
    with pytest.raises(InputError, match="kind"):
        parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "Nope"})
    with pytest.raises(InputError, match="apiVersion"):
        parse_scheduler_config({"apiVersion": "v1beta3", "kind": "KubeSchedulerConfiguration"})
    with pytest.raises(InputError, match="percentageOfNodesToScore"):
        parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                "percentageOfNodesToScore": 120})


def _node(name: str, cpu: str = "4", zone: str | None = None) -> Any:
    labels = {"topology.kubernetes.io/zone": zone} if zone else {}
    return parse_node({"kind": "Node", "metadata": {"name": name, "labels": labels},
                       "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10", "example.com/gpu": "2"}}})


def _pod(name: str, node: str = "", cpu: str = "1", phase: str = "Running") -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "example.com/gpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return parse_pod({"kind": "Pod", "metadata": {"name": name, "namespace": "d"}, "spec": spec,
                      "status": {"phase": phase}})


def test_cluster_state_columns_follow_events() -> None:
    cs = ClusterState()
    cs.add(_node("n1"))
    cs.add(_node("n2"))
    cs.add(_pod("a", "n1"))
    cs.add(_pod("done", "n1", phase="Succeeded"))  # terminal pods do not count
    p = _pod("b")
    cs.add(p)
    t = cs.table
    cpu, gpu = t.column["cpu"], t.column["example.com/gpu"]
    assert t.requested[0, cpu] == 1000 and t.requested[0, gpu] == 1 and t.pod_count[0] == 1
    cs.bind(p, "n2")
    assert t.requested[1, cpu] == 1000 and cs.node_info_by_name["n2"].pods.keys() == {"d/b"}
    cs.delete(cs.pods["d/b"])
    assert t.requested[1, cpu] == 0 and t.pod_count[1] == 0 and "d/b" not in cs.pods
    # Node columns agree with NodeInfo after a node is removed: its row goes, the rows after it move up.
    cs.add(_pod("c", "n2"))
    cs.delete(_node("n1"))
    t = cs.table
    assert cs.num_nodes == 1 and cs.node_infos[0].name == "n2" and cs.node_infos[0].index == 0 and t.n == 1
    assert t.requested[0, cpu] == 1000 and t.requested[0, gpu] == 1 and t.pod_count[0] == 1
    assert not t.requested[1:].any() and not t.pod_count[1:].any()


def test_node_order_round_robins_zones() -> None:
    cs = ClusterState()
    for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("a3", "a"), ("b2", "b")]:
        cs.add(_node(name, zone=zone))
    names = [cs.node_infos[r].name for r in cs.node_order()]
    assert names == ["a1", "b1", "a2", "b2", "a3"]


def test_listeners_see_every_change_once() -> None:
    cs = ClusterState()
    seen: list[tuple[str, str, str]] = []
    cs.subscribe(lambda ev: seen.append((ev.type.value, ev.kind, ev.cause.value)))
    cs.add(_node("n1"))
    p = _pod("x")
    cs.add(p)
    cs.assume(p, "n1")
    cs.bind(p, "n1")
    cs.delete(p, cause=Cause.PREEMPTION)
    assert seen == [("added", "Node", "user"), ("added", "Pod", "user"), ("assumed", "Pod", "scheduler"),
                    ("bound", "Pod", "scheduler"), ("deleted", "Pod", "preemption")]
    assert np.all(cs.table.requested[:cs.num_nodes] == 0)


def test_listeners_hear_only_the_kinds_and_types_they_watch_in_event_order() -> None:
    cs = ClusterState()
    log: list[tuple[str, str, str]] = []
    pods_only: list[str] = []
    cs.subscribe(lambda ev: pods_only.append(ev.type.value), kinds=("Pod",), types=(EventType.BOUND, EventType.DELETED))
    p = _pod("x")

    def react(ev: Event) -> None:
        log.append(("all", ev.type.value, ev.kind))
        if ev.kind == "Pod" and ev.type is EventType.ADDED:
            cs.bind(p, "n1")  # a listener's own change is heard after the current event, by everyone

    cs.subscribe(react)
    cs.subscribe(lambda ev: log.append(("nodes", ev.type.value, ev.kind)), kinds=("Node",))
    cs.add(_node("n1"))
    cs.add(p)
    cs.delete(cs.pods[p.key])
    assert pods_only == ["bound", "deleted"]
    assert log == [("all", "added", "Node"), ("nodes", "added", "Node"), ("all", "added", "Pod"),
                   ("all", "bound", "Pod"), ("all", "deleted", "Pod")]
    cs.unsubscribe(react)
    cs.delete(cs.nodes["n1"])
    assert log[-1] == ("nodes", "deleted", "Node") and len(log) == 6

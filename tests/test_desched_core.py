"""The descheduler core: policy loading, the cycle, the evictor's limits, dry-run, DefaultEvictor, node fit,
the sort extension point, the scheduler-profile node fit, and property tests over generated clusters."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.selectors import parse_label_selector_string
from kubesched.api.snapshot import Snapshot, parse_objects
from kubesched.cli import main as cli_main
from kubesched.client.inprocess import InProcessAPIServer
from kubesched.cluster.state import ClusterState
from kubesched.config import koordinator_descheduler
from kubesched.config.descheduler_policy import DeschedulerPolicy, parse_descheduler_policy
from kubesched.descheduler import nodeutil, podutil
from kubesched.descheduler.descheduler import Descheduler
from kubesched.descheduler.evictor import PodEvictor
from kubesched.descheduler.framework import (
    BalancePlugin,
    DeschedulePlugin,
    DeschedulerServices,
    EvictionLimitError,
    EvictOptions,
    Status,
)
from kubesched.descheduler.metricscollector import MetricsCollector
from kubesched.descheduler.plugins.default_evictor import DefaultEvictorArgs
from kubesched.descheduler.registry import Registry
from kubesched.errors import InputError

NOW = datetime(2024, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- builders


def node(name: str, cpu: str = "4", mem: str = "8Gi", pods: str = "10", *, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, unschedulable: bool = False, ready: bool | None = True) -> dict:
    status: dict[str, Any] = {"allocatable": {"cpu": cpu, "memory": mem, "pods": pods},
                              "capacity": {"cpu": cpu, "memory": mem, "pods": pods}}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable}, "status": status}


def pod(name: str, node_name: str, cpu: str = "400m", *, ns: str = "default", owner: str | None = "ReplicaSet",
        owner_name: str = "rs", priority: int | None = None, annotations: dict[str, str] | None = None,
        volumes: list[dict] | None = None, labels: dict[str, str] | None = None, phase: str = "Running",
        mem: str = "100Mi", **spec_extra: Any) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "labels": labels or {},
                            "annotations": annotations or {}, "creationTimestamp": "2023-12-01T00:00:00Z"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": owner_name,
                                    "uid": f"uid-{owner_name}", "controller": True}]
    spec: dict[str, Any] = {"nodeName": node_name,
                            "containers": [{"name": "c", "image": "img",
                                            "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}
    if priority is not None:
        spec["priority"] = priority
    if volumes:
        spec["volumes"] = volumes
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def cluster_of(items: list[dict]) -> ClusterState:
    return ClusterState.from_snapshot(parse_objects(items, "<test>"))


def policy(profiles: list[dict], **top: Any) -> dict:
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": profiles, **top}


def profile(name: str = "p", *, deschedule: list[str] | None = None, balance: list[str] | None = None,
            config: list[dict] | None = None, sort: list[str] | None = None, pre_key: str = "preevictionfilter") -> dict:
    plugins: dict[str, Any] = {}
    if deschedule:
        plugins["deschedule"] = {"enabled": deschedule}
    if balance:
        plugins["balance"] = {"enabled": balance}
    if sort:
        plugins["sort"] = {"enabled": sort}
    plugins["filter"] = {"enabled": ["DefaultEvictor"]}
    plugins[pre_key] = {"enabled": ["DefaultEvictor"]}
    return {"name": name, "pluginConfig": config or [], "plugins": plugins}


class EvictAll(DeschedulePlugin):
    """A test strategy: every pod that passes the evictor's filters, node by node (as upstream plugins
    react to limit errors: node → next node, total → stop, namespace → next pod)."""

    name = "EvictAll"

    def deschedule(self, nodes: list[Any]) -> Status:
        ev = self.handle.evictor
        for n in nodes:
            for p in self.handle.pods_on_node(n.name, ev.filter):
                if not ev.pre_eviction_filter(p):
                    continue
                try:
                    ev.evict(p, EvictOptions(reason="test"))
                except EvictionLimitError as e:
                    if e.limit == "node":
                        break
                    if e.limit == "total":
                        return Status()
        return Status()


class Recorder(DeschedulePlugin, BalancePlugin):
    """Records the order in which extension points run."""

    name = "Recorder"
    log: list[str] = []

    def deschedule(self, nodes: list[Any]) -> Status:
        Recorder.log.append(f"{self.handle.profile}:deschedule")
        return Status()

    def balance(self, nodes: list[Any]) -> Status:
        Recorder.log.append(f"{self.handle.profile}:balance")
        return Status()


def registry() -> Registry:
    r = Registry()
    r.register("EvictAll", EvictAll)
    r.register("Recorder", Recorder)
    return r


def run(items: list[dict], pol: dict, *, min_ready: int = 0, dry_run: bool = True, sched_cfg: Any = None,
        metrics: MetricsCollector | None = None) -> tuple[ClusterState, Any]:
    reg = registry()
    cluster = cluster_of(items)
    parsed = parse_descheduler_policy(pol, "<test>", reg)
    mc = metrics if metrics is not None else MetricsCollector.from_cluster(cluster)
    d = Descheduler(cluster, parsed, now=NOW, registry=reg, min_ready_nodes=min_ready, dry_run=dry_run,
                    services=DeschedulerServices(scheduler_config=sched_cfg), metrics=mc)
    return cluster, d.run_cycle()


# ---------------------------------------------------------------- policy loading


def test_both_spellings_of_pre_eviction_filter_and_default_evictor_is_added() -> None:
    for key in ("preevictionfilter", "preEvictionFilter"):
        pol = policy([{"name": "p", "pluginConfig": [], "plugins": {key: {"enabled": ["DefaultEvictor"]},
                                                                      "deschedule": {"enabled": ["EvictAll"]}}}])
        parsed = parse_descheduler_policy(pol, "<t>", registry())
        prof = parsed.profiles[0]
        assert prof.plugins["preEvictionFilter"].enabled == ["DefaultEvictor"]
        assert prof.plugins["filter"].enabled == ["DefaultEvictor"]  # added as upstream's setDefaultEvictor does
        assert "DefaultEvictor" in prof.plugin_config


def test_plugin_without_plugin_config_gets_valid_defaults_or_a_named_error() -> None:
    ok = parse_descheduler_policy(policy([profile(balance=["RemoveDuplicates"])]), "<t>", registry())
    assert "RemoveDuplicates" in ok.profiles[0].plugin_config
    with pytest.raises(InputError) as e:
        parse_descheduler_policy(policy([profile(balance=["LowNodeUtilization"])]), "<t>", registry())
    assert "LowNodeUtilization" in e.value.render() and "no pluginConfig" in e.value.render()


@pytest.mark.parametrize("pol,field", [
    (policy([profile(balance=["LowNodeUtilization"], config=[
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 120}, "targetThresholds": {"cpu": 130}}}])]),
     "profiles[0].pluginConfig[0].args.thresholds.cpu"),
    (policy([profile(balance=["LowNodeUtilization"], config=[
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}}}])]),
     "profiles[0].pluginConfig[0].args.thresholds.cpu"),
    (policy([profile(balance=["LowNodeUtilization"], config=[
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20}, "targetThresholds": {"memory": 50}}}])]),
     "profiles[0].pluginConfig[0].args.targetThresholds"),
    (policy([profile(config=[{"name": "DefaultEvictor", "args": {
        "evictLocalStoragePods": True, "podProtections": {"defaultDisabled": ["DaemonSetPods"]}}}])]),
     "profiles[0].pluginConfig[0].args.podProtections"),
    (policy([profile(config=[{"name": "DefaultEvictor", "args": {"priorityThreshold": {"value": 1, "name": "x"}}}])]),
     "profiles[0].pluginConfig[0].args.priorityThreshold"),
    (policy([profile(config=[{"name": "DefaultEvictor", "args": {"nodeFitt": True}}])]),
     "profiles[0].pluginConfig[0].args.nodeFitt"),
    (policy([profile(balance=["HighNodeUtilization"], config=[
        {"name": "HighNodeUtilization", "args": {"thresholds": {"cpu": 20},
                                                 "evictableNamespaces": {"include": ["a"]}}}])]),
     "profiles[0].pluginConfig[0].args.evictableNamespaces.include"),
    (policy([profile(deschedule=["LowNodeUtilization"], config=[
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}}])]),
     "profiles[0].plugins.deschedule.enabled[0]"),
    (policy([profile(deschedule=["NoSuchPlugin"])]), "profiles[0].plugins.deschedule.enabled[0]"),
    (policy([profile()], maxNoOfPodsToEvictPerNode=-1), "maxNoOfPodsToEvictPerNode"),
    (policy([profile()], nodeSelector="a in (b"), "nodeSelector"),
    (policy([profile()], metricsProviders=[{"source": "Prometheus"}]), "metricsProviders[0].prometheus"),
    (policy([profile()], metricsProviders=[{"source": "KubernetesMetrics"}], metricsCollector={"enabled": True}),
     "metricsCollector.enabled"),
    (policy([profile()], profilez=[]), "profilez"),
])
def test_bad_policies_name_the_field(pol: dict, field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_descheduler_policy(pol, "<t>", registry())
    assert e.value.field == field, e.value.render()


def test_bad_policy_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("n1"), node("n2")]}))
    pol = tmp_path / "p.json"
    pol.write_text(json.dumps(policy([profile(balance=["LowNodeUtilization"], config=[
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 101}, "targetThresholds": {"cpu": 101}}}])])))
    code = cli_main(["deschedule", "--snapshot", str(snap), "--policy", str(pol), "-o", "json"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and "thresholds.cpu" in lines[0] and "p.json" in lines[0]


def test_koordinator_configuration_goes_through_the_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def convert(raw: dict, source: str) -> dict:
        seen.append(source)
        return policy([profile(deschedule=["EvictAll"])])

    monkeypatch.setattr(koordinator_descheduler, "convert", convert)
    parsed = parse_descheduler_policy({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration"},
                                      "koord.yaml", registry())
    assert seen == ["koord.yaml"] and parsed.kind == "DeschedulerConfiguration"
    assert parsed.profiles[0].plugins["deschedule"].enabled == ["EvictAll"]


# ---------------------------------------------------------------- the cycle


def test_deschedule_plugins_of_all_profiles_run_before_balance_plugins() -> None:
    Recorder.log = []
    run([node("n1"), node("n2")], policy([profile("a", deschedule=["Recorder"], balance=["Recorder"]),
                                          profile("b", deschedule=["Recorder"], balance=["Recorder"])]))
    assert Recorder.log == ["a:deschedule", "b:deschedule", "a:balance", "b:balance"]


def test_cycle_guard_counts_ready_nodes_matching_the_node_selector() -> None:
    items = [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"}), node("n3", ready=False),
             pod("p1", "n1"), pod("p2", "n2")]
    pol = policy([profile(deschedule=["EvictAll"])])
    _, res = run(items, pol, min_ready=2)
    assert res.skipped is None and len(res.evictions) == 2
    _, res = run(items, {**pol, "nodeSelector": "pool=a"}, min_ready=2)
    assert res.skipped and res.evictions == []
    # Upstream's IsReady: a node without a Ready condition counts as ready.
    _, res = run([node("n1", ready=None), node("n2", ready=None), pod("p1", "n1")], pol, min_ready=2)
    assert res.skipped is None and [e.pod.key for e in res.evictions] == ["default/p1"]


def test_global_node_selector_limits_the_nodes_plugins_see() -> None:
    items = [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "b"}), pod("p1", "n1"), pod("p2", "n2")]
    _, res = run(items, policy([profile(deschedule=["EvictAll"])], nodeSelector="pool!=b"))
    assert [e.pod.key for e in res.evictions] == ["default/p1"]


# ---------------------------------------------------------------- limits


def many_pods() -> list[dict]:
    items = [node("n1", pods="50"), node("n2", pods="50"), node("n3", pods="50")]
    for n in ("n1", "n2", "n3"):
        for i in range(4):
            items.append(pod(f"{n}-a{i}", n, ns="a"))
            items.append(pod(f"{n}-b{i}", n, ns="b"))
    return items


@pytest.mark.parametrize("limits,check", [
    ({"maxNoOfPodsToEvictPerNode": 3}, lambda ev: max(_count(ev, "node").values()) == 3 and len(ev) == 9),
    ({"maxNoOfPodsToEvictPerNamespace": 5}, lambda ev: _count(ev, "ns") == {"a": 5, "b": 5}),
    ({"maxNoOfPodsToEvictTotal": 7}, lambda ev: len(ev) == 7),
    ({"maxNoOfPodsToEvictPerNode": 0}, lambda ev: len(ev) == 0),
])
def test_each_limit_holds_across_plugins_and_profiles(limits: dict, check: Any) -> None:
    pol = policy([profile("a", deschedule=["EvictAll"]), profile("b", deschedule=["EvictAll"])], **limits)
    _, res = run(many_pods(), pol)
    assert check(res.evictions), [(e.pod.key, e.profile) for e in res.evictions]
    assert len({e.pod.key for e in res.evictions}) == len(res.evictions)  # never the same pod twice


def _count(evictions: list[Any], by: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in evictions:
        k = e.node if by == "node" else e.pod.namespace
        out[k] = out.get(k, 0) + 1
    return out


def test_records_name_pod_node_profile_plugin_and_reason() -> None:
    _, res = run([node("n1"), node("n2"), pod("p1", "n1")], policy([profile("prof", deschedule=["EvictAll"])]))
    assert [e.to_json() for e in res.evictions] == [
        {"pod": "default/p1", "node": "n1", "profile": "prof", "plugin": "EvictAll", "reason": "test"}]


def test_dry_run_changes_nothing_and_a_real_run_evicts_through_the_api() -> None:
    items = [node("n1"), node("n2"), pod("p1", "n1"), pod("p2", "n2"), pod("p3", "n2", phase="Pending")]
    pol = policy([profile(deschedule=["EvictAll"])])
    cluster, res = run(items, pol, dry_run=True)
    assert len(res.evictions) == 3
    assert set(cluster.pods) == {"default/p1", "default/p2", "default/p3"}
    assert not any(p.is_terminating for p in cluster.pods.values())
    assert cluster.node_info_by_name["n1"].requested["cpu"] == 400
    # A real eviction is a graceful deletion: bound pods terminate (30 s from now, their resources still held
    # on the node meanwhile; the Pending one needs no PDB check but its kubelet must still confirm).
    cluster, res = run(items, pol, dry_run=False)
    assert len(res.evictions) == 3 and set(cluster.pods) == {"default/p1", "default/p2", "default/p3"}
    for p in cluster.pods.values():
        assert p.meta.deletion_timestamp == NOW + timedelta(seconds=30)
    assert cluster.node_info_by_name["n1"].requested["cpu"] == 400


# ---------------------------------------------------------------- DefaultEvictor


def evictable(items: list[dict], args: dict, *, cluster_items: list[dict] | None = None) -> set[str]:
    base = [node("n1", pods="50"), node("n2", pods="50")]
    pol = policy([profile(deschedule=["EvictAll"], config=[{"name": "DefaultEvictor", "args": args}])])
    _, res = run(base + (cluster_items or []) + items, pol)
    return {e.pod.name for e in res.evictions}


def test_default_protections() -> None:
    items = [
        pod("plain", "n1"),
        pod("ds", "n1", owner="DaemonSet"),
        pod("mirror", "n1", annotations={"kubernetes.io/config.mirror": "x"}),
        pod("static", "n1", annotations={"kubernetes.io/config.source": "file"}),
        pod("api-source", "n1", annotations={"kubernetes.io/config.source": "api"}),
        pod("critical", "n1", priority=2_000_000_000),
        pod("local", "n1", volumes=[{"name": "v", "emptyDir": {}}]),
        pod("pvc", "n1", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
        pod("bare", "n1", owner=None),
        pod("bare-failed", "n1", owner=None, phase="Failed"),
        pod("annotated-ds", "n1", owner="DaemonSet", annotations={"descheduler.alpha.kubernetes.io/evict": ""}),
    ]
    assert evictable(items, {}) == {"plain", "api-source", "pvc", "annotated-ds"}
    assert evictable(items, {"evictSystemCriticalPods": True, "evictLocalStoragePods": True, "ignorePvcPods": True,
                             "evictDaemonSetPods": True}) == {"plain", "api-source", "critical", "local", "ds",
                                                              "annotated-ds"}
    # The newer form: same meaning, without the booleans.
    assert evictable(items, {"podProtections": {"defaultDisabled": ["SystemCriticalPods", "PodsWithLocalStorage",
                                                                    "DaemonSetPods"],
                                                "extraEnabled": ["PodsWithPVC"]}}) == \
        {"plain", "api-source", "critical", "local", "ds", "annotated-ds"}


def test_priority_threshold_by_value_and_by_class_name() -> None:
    items = [pod("low", "n1", priority=10), pod("high", "n1", priority=1000), pod("none", "n1")]
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "mid"}, "value": 500}
    assert evictable(items, {"priorityThreshold": {"value": 1000}}) == {"low", "none"}
    assert evictable(items, {"priorityThreshold": {"name": "mid"}}, cluster_items=[pc]) == {"low", "none"}
    with pytest.raises(InputError, match="priorityThreshold.name"):
        evictable(items, {"priorityThreshold": {"name": "missing"}})


def test_label_selector_min_replicas_min_pod_age_namespace_selector_and_no_eviction_policy() -> None:
    items = [pod("a", "n1", labels={"app": "web"}, owner_name="rs-a"), pod("b", "n1", labels={"app": "db"},
                                                                            owner_name="rs-b")]
    assert evictable(items, {"labelSelector": {"matchLabels": {"app": "web"}}}) == {"a"}
    three = [pod(f"r{i}", "n1", owner_name="big") for i in range(3)] + [pod("s0", "n1", owner_name="small")]
    assert evictable(three, {"minReplicas": 3}) == {"r0", "r1", "r2"}
    young, old = pod("young", "n1"), pod("old", "n1")
    young["status"]["startTime"] = "2023-12-31T23:59:00Z"
    old["status"]["startTime"] = "2023-12-31T00:00:00Z"
    assert evictable([young, old, pod("unstarted", "n1")], {"minPodAge": "5m"}) == {"old"}
    ns = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"evict": "yes"}}}]
    assert evictable([pod("in", "n1", ns="team"), pod("out", "n1")],
                     {"namespaceLabelSelector": {"matchLabels": {"evict": "yes"}}}, cluster_items=ns) == {"in"}
    soft = [pod("soft", "n1", annotations={"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}), pod("x", "n1")]
    assert evictable(soft, {"noEvictionPolicy": "Mandatory"}) == {"x"}
    assert evictable(soft, {"noEvictionPolicy": "Preferred"}) == {"soft", "x"}


def test_pods_without_pdb_and_resource_claims_protections() -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}}
    items = [pod("covered", "n1", labels={"app": "web"}), pod("uncovered", "n1"),
             pod("claims", "n1", labels={"app": "web"}, resourceClaims=[{"name": "gpu"}])]
    assert evictable(items, {"podProtections": {"extraEnabled": ["PodsWithoutPDB", "PodsWithResourceClaims"]}},
                     cluster_items=[pdb]) == {"covered"}


def test_node_fit_upstream_reasons() -> None:
    cluster = cluster_of([
        node("n1"), node("tainted", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("cordoned", unschedulable=True), node("small", cpu="300m"), node("west", labels={"zone": "west"}),
        pod("p", "n1", nodeSelector={"zone": "west"}), pod("q", "n1")])
    p, q = cluster.pods["default/p"], cluster.pods["default/q"]
    n = cluster.nodes
    assert nodeutil.pod_fits_node(cluster, q, n["tainted"]) == (False, ["pod does not tolerate taints on the node"])
    assert nodeutil.pod_fits_node(cluster, q, n["cordoned"]) == (False, ["node is not schedulable"])
    assert nodeutil.pod_fits_node(cluster, q, n["small"]) == (False, ["insufficient cpu"])
    assert nodeutil.pod_fits_node(cluster, p, n["n1"])[1] == ["pod node selector does not match the node label"]
    assert nodeutil.pod_fits_any_other_node(cluster, p, list(n.values()))
    assert not nodeutil.pod_fits_any_other_node(cluster, p, [n["n1"], n["tainted"]])
    assert nodeutil.pod_fits_node(cluster, q, n["n1"]) == (True, [])  # own node: requests not checked again


def test_label_selector_strings() -> None:
    sel = parse_label_selector_string("a=b,c!=d,e in (x, y),f notin (z),g,!h", "f")
    assert sel.matches({"a": "b", "e": "y", "g": ""})
    assert not sel.matches({"a": "b", "e": "y", "g": "", "h": "1"})
    assert not sel.matches({"a": "b", "c": "d", "e": "x", "g": ""})
    assert parse_label_selector_string("", "f").matches({})
    with pytest.raises(InputError):
        parse_label_selector_string("a in (b", "f")


def test_pod_order_priority_then_qos() -> None:
    pods = [parse_pod(p) for p in (
        pod("guaranteed", "n1", priority=0, **{"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}),
        pod("besteffort", "n1", priority=0, **{"containers": [{"name": "c"}]}),
        pod("burstable", "n1", priority=0),
        pod("high", "n1", priority=100),
        pod("nopriority", "n1"),
    )]
    ordered = podutil.sort_pods_based_on_priority_low_to_high(pods)
    assert [p.name for p in ordered] == ["nopriority", "besteffort", "burstable", "guaranteed", "high"]


# ---------------------------------------------------------------- metrics, sort, scheduler node fit


def test_metrics_collector_smooths_like_upstream() -> None:
    mc = MetricsCollector()
    mc.add_objects([
        {"kind": "NodeMetrics", "metadata": {"name": "n1"}, "timestamp": "2024-01-01T00:00:05Z",
         "usage": {"cpu": "2", "memory": "2000"}},
        {"kind": "NodeMetrics", "metadata": {"name": "n1"}, "timestamp": "2024-01-01T00:00:00Z",
         "usage": {"cpu": "1", "memory": "1000"}},
    ])
    # First sample as is (1000m), then round(0.9*1000 + 0.1*2000).
    assert mc.nodes["n1"] == {"cpu": 1100, "memory": 1100}


def _lnu_items() -> list[dict]:
    items = [node("n1"), node("n2"), node("n3")]
    items += [pod(f"a{i}", "n1") for i in range(8)]
    items += [pod("b0", "n2")]
    return items


def _lnu_policy(evictor_args: dict, **extra: Any) -> dict:
    return policy([profile(balance=["LowNodeUtilization"], config=[
        {"name": "DefaultEvictor", "args": evictor_args},
        {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}}], **extra)])


def test_actual_usage_sorter_moves_the_busiest_pod_first() -> None:
    items = _lnu_items()
    metrics = [{"kind": "PodMetrics", "metadata": {"name": f"a{i}", "namespace": "default"},
                "containers": [{"name": "c", "usage": {"cpu": f"{(i * 37) % 8 * 100 + 50}m", "memory": "1Mi"}}]}
               for i in range(8)]
    cluster = cluster_of(items)
    mc = MetricsCollector.from_cluster(cluster, metrics)
    _, plain = run(items, _lnu_policy({}), metrics=mc)
    _, sorted_ = run(items, _lnu_policy({}, sort=["ActualUsageSort"]), metrics=mc)
    assert len(plain.evictions) == len(sorted_.evictions) == 3
    usage = {f"a{i}": (i * 37) % 8 * 100 + 50 for i in range(8)}
    busiest = sorted(usage, key=lambda k: -usage[k])[:3]
    assert [e.pod.name for e in sorted_.evictions] == busiest
    assert [e.pod.name for e in plain.evictions] != busiest


SCHED_MOST_ALLOCATED = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
                            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}]}


def test_scheduler_profile_node_fit_refuses_what_the_scheduler_would_put_back() -> None:
    """LowNodeUtilization moves pods off a hot node. With a bin-packing (MostAllocated) scheduler the
    replacement would land on the same hot node again: upstream's nodeFit evicts anyway, the scheduler-
    profile node fit does not; with the default (LeastAllocated) scheduler both evict."""
    from kubesched.config.scheduler_config import default_config, parse_scheduler_config

    items = _lnu_items()
    _, upstream = run(items, _lnu_policy({"nodeFit": True}))
    assert len(upstream.evictions) == 3
    most = parse_scheduler_config(SCHED_MOST_ALLOCATED)
    _, with_sched = run(items, _lnu_policy({"nodeFitProfile": "default-scheduler"}), sched_cfg=most)
    assert with_sched.evictions == []
    _, least = run(items, _lnu_policy({"nodeFitProfile": "default-scheduler"}), sched_cfg=default_config())
    assert len(least.evictions) == 3


def test_scheduler_profile_node_fit_counts_capacity_taken_on_the_target() -> None:
    """Two pods violate a taint; the only other node has room for one. Upstream's nodeFit (which does not
    count the first replacement) evicts both; the scheduler-profile node fit evicts one."""
    from kubesched.config.scheduler_config import default_config

    items = [node("n1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]), node("n2", cpu="1"),
             pod("p1", "n1", cpu="600m"), pod("p2", "n1", cpu="600m")]
    reg = registry()
    try:
        reg.get("RemovePodsViolatingNodeTaints")
    except InputError:
        pytest.skip("RemovePodsViolatingNodeTaints not available yet")

    def pol(args: dict) -> dict:
        return policy([profile(deschedule=["RemovePodsViolatingNodeTaints"],
                               config=[{"name": "DefaultEvictor", "args": args}])])

    _, upstream = run(items, pol({"nodeFit": True}))
    assert len(upstream.evictions) == 2
    _, sched = run(items, pol({"nodeFitProfile": "default-scheduler"}), sched_cfg=default_config())
    assert len(sched.evictions) == 1


def test_node_fit_profile_must_name_a_scheduler_profile() -> None:
    with pytest.raises(InputError, match="no scheduler profile"):
        run(_lnu_items(), _lnu_policy({"nodeFitProfile": "nope"}))


# ---------------------------------------------------------------- entry points and the example plugin


def test_registry_loads_module_class_specs_and_the_example_plugin() -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "descheduler-plugin"
    sys.path.insert(0, str(example))
    try:
        reg = Registry()
        name = reg.register_spec("kubesched_example_plugins.evict_old_images:EvictOldImages")
        assert name == "EvictOldImages"
        items = [node("n1"), node("n2"), pod("old", "n1"), pod("new", "n1")]
        items[2]["spec"]["containers"][0]["image"] = "web:1.0"
        items[3]["spec"]["containers"][0]["image"] = "web:2.0"
        cluster = cluster_of(items)
        pol = parse_descheduler_policy(policy([profile(deschedule=["EvictOldImages"], config=[
            {"name": "EvictOldImages", "args": {"images": {"web": "2.0"}}}])]), "<t>", reg)
        res = Descheduler(cluster, pol, now=NOW, registry=reg, min_ready_nodes=0).run_cycle()
        assert [e.pod.name for e in res.evictions] == ["old"]
        with pytest.raises(InputError):
            reg.register_spec("kubesched_example_plugins.evict_old_images:NotThere")
    finally:
        sys.path.remove(str(example))


# ---------------------------------------------------------------- properties over generated clusters

KINDS = ("rs", "ds", "mirror", "critical", "local", "pvc", "soft", "bare", "evict-annotated")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict], dict[str, str]]:
    n_nodes = draw(st.integers(2, 5))
    items = [node(f"n{i}", cpu=str(draw(st.integers(1, 8))), pods=str(draw(st.integers(4, 20))))
             for i in range(n_nodes)]
    kinds: dict[str, str] = {}
    for i in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(KINDS))
        n = f"n{draw(st.integers(0, n_nodes - 1))}"
        ns = draw(st.sampled_from(("a", "b", "c")))
        cpu = f"{draw(st.integers(0, 8)) * 100}m"
        args: dict[str, Any] = {"ns": ns, "owner_name": f"rs{draw(st.integers(0, 3))}"}
        if kind == "ds":
            args["owner"] = "DaemonSet"
        elif kind == "mirror":
            args["annotations"] = {"kubernetes.io/config.mirror": "m"}
        elif kind == "critical":
            args["priority"] = 2_000_000_000
        elif kind == "local":
            args["volumes"] = [{"name": "v", "hostPath": {"path": "/x"}}]
        elif kind == "pvc":
            args["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]
        elif kind == "soft":
            args["annotations"] = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}
        elif kind == "bare":
            args["owner"] = None
        elif kind == "evict-annotated":
            args["owner"] = "DaemonSet"
            args["annotations"] = {"descheduler.alpha.kubernetes.io/evict": ""}
        name = f"p{i}"
        kinds[f"{ns}/{name}"] = kind
        items.append(pod(name, n, cpu, **args))
    return items, kinds


LIMITS = st.fixed_dictionaries({}, optional={"maxNoOfPodsToEvictPerNode": st.integers(0, 4),
                                             "maxNoOfPodsToEvictPerNamespace": st.integers(0, 4),
                                             "maxNoOfPodsToEvictTotal": st.integers(0, 8)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), limits=LIMITS, ignore_pvc=st.booleans(), node_fit=st.booleans())
def test_no_limit_exceeded_and_no_protected_pod_evicted(cluster: tuple[list[dict], dict[str, str]], limits: dict,
                                                        ignore_pvc: bool, node_fit: bool) -> None:
    items, kinds = cluster
    evictor_args = {"ignorePvcPods": ignore_pvc, "nodeFit": node_fit, "noEvictionPolicy": "Mandatory"}
    pol = policy([
        profile("first", deschedule=["EvictAll"], config=[{"name": "DefaultEvictor", "args": evictor_args}]),
        profile("second", balance=["LowNodeUtilization", "HighNodeUtilization"], config=[
            {"name": "DefaultEvictor", "args": evictor_args},
            {"name": "LowNodeUtilization", "args": {"thresholds": {"cpu": 30, "pods": 30},
                                                    "targetThresholds": {"cpu": 50, "pods": 50}}},
            {"name": "HighNodeUtilization", "args": {"thresholds": {"cpu": 40}}}]),
    ], **limits)
    _, res = run(items, pol)
    ev = res.evictions
    assert len({e.pod.key for e in ev}) == len(ev)
    if "maxNoOfPodsToEvictTotal" in limits:
        assert len(ev) <= limits["maxNoOfPodsToEvictTotal"]
    if "maxNoOfPodsToEvictPerNode" in limits:
        assert all(v <= limits["maxNoOfPodsToEvictPerNode"] for v in _count(ev, "node").values())
    if "maxNoOfPodsToEvictPerNamespace" in limits:
        assert all(v <= limits["maxNoOfPodsToEvictPerNamespace"] for v in _count(ev, "ns").values())
    protected = {"ds", "mirror", "critical", "local", "soft", "bare"} | ({"pvc"} if ignore_pvc else set())
    for e in ev:
        assert kinds[e.pod.key] not in protected, (e.pod.key, kinds[e.pod.key])


def test_policy_object_defaults() -> None:
    parsed = parse_descheduler_policy(policy([profile()]), "<t>", registry())
    assert isinstance(parsed, DeschedulerPolicy)
    args = parsed.profiles[0].plugin_config["DefaultEvictor"]
    assert args == DefaultEvictorArgs() and args.to_raw() == {}
    assert parsed.max_pods_to_evict_per_node is None and not parsed.kubernetes_metrics_enabled
    snap = Snapshot(nodes=[parse_node(node("n1"))])
    assert ClusterState.from_snapshot(snap).num_nodes == 1


# ---------------------------------------------------------------- command output, metrics errors, PDBs


def test_command_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _lnu_items()}))
    pol = tmp_path / "p.json"
    pol.write_text(json.dumps(_lnu_policy({})))
    assert cli_main(["deschedule", "--snapshot", str(snap), "--policy", str(pol), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["evictions"]) == 3 and data["skipped"] is None and data["errors"] == []
    assert data["utilization"]["n1"]["before"]["cpu"] == 80.0 and data["utilization"]["n1"]["after"]["cpu"] == 50.0
    assert cli_main(["deschedule", "--snapshot", str(snap), "--policy", str(pol)]) == 0
    out = capsys.readouterr().out
    assert "LowNodeUtilization" in out and "80.0% → 50.0%" in out


def test_actual_usage_without_a_metrics_provider_is_a_plugin_error() -> None:
    pol = _lnu_policy({})
    pol["profiles"][0]["pluginConfig"][1]["args"]["metricsUtilization"] = {"source": "KubernetesMetrics"}
    _, res = run(_lnu_items(), pol)
    assert res.evictions == [] and "metrics client not initialized" in res.errors[0]


def test_high_node_utilization_only_thresholding_resources() -> None:
    items = [node("n1"), node("n2"), node("n3"),
             pod("gpu", "n1", **{"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}),
             pod("cpu", "n1", cpu="100m")]
    items[0]["status"]["allocatable"]["example.com/gpu"] = "4"
    items[1]["status"]["allocatable"]["example.com/gpu"] = "4"
    items += [pod(f"busy{i}", "n2", **{"containers": [{"name": "c", "resources": {
        "requests": {"example.com/gpu": "1", "cpu": "100m"}}}]}) for i in range(2)]

    def pol(modes: list[str]) -> dict:
        return policy([profile(balance=["HighNodeUtilization"], config=[{"name": "HighNodeUtilization", "args": {
            "thresholds": {"example.com/gpu": 30}, "evictionModes": modes}}])])

    _, every = run(items, pol([]))
    _, only = run(items, pol(["OnlyThresholdingResources"]))
    assert {e.pod.name for e in every.evictions} == {"gpu", "cpu"}
    assert {e.pod.name for e in only.evictions} == {"gpu"}


def test_the_api_server_decides_whether_a_pdb_refuses_an_eviction() -> None:
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    items = [node("n1"), pdb] + [pod(f"w{i}", "n1", labels={"app": "web"}) for i in range(3)]
    # Upstream's plugin tests and dry-run mode: a server that refuses nothing (kubesched deschedule's default).
    cluster = cluster_of(items)
    pods = sorted(cluster.pods.values(), key=lambda p: p.name)
    loose = PodEvictor(InProcessAPIServer(cluster, enforce_pdbs=False), dry_run=False)
    assert all(loose.evict_pod(p, EvictOptions(plugin="x")) for p in pods)
    # A real API server: the budget allows one; the others are refused with 429 (a failed eviction).
    cluster = cluster_of(items)
    pods = sorted(cluster.pods.values(), key=lambda p: p.name)
    strict = PodEvictor(InProcessAPIServer(cluster, enforce_pdbs=True), dry_run=False)
    assert [strict.evict_pod(p, EvictOptions(plugin="x")) for p in pods] == [True, False, False]
    assert cluster.pdbs["default/b"].disruptions_allowed == 0 and "w0" in cluster.pdbs["default/b"].disrupted_pods
    assert strict.failures[-1][1] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert strict.total_evicted() == 1  # refusals do not count against the limits


def test_prometheus_source_from_a_recorded_query_response(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Upstream's "with instance:node_cpu:rate:sum query": one pod leaves the hot node (no per-pod usage, so
    eviction is not resource-constrained and stops after one)."""
    items = [node("n1", pods="9"), node("n2"), node("n3")]
    items += [pod(f"p{i}", "n1") for i in range(1, 6)] + [pod("p6", "n1", owner="DaemonSet"), pod("p9", "n2")]
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    pol = tmp_path / "p.json"
    pol.write_text(json.dumps(policy([profile(balance=["LowNodeUtilization"], config=[
        {"name": "DefaultEvictor", "args": {"nodeFit": True}},
        {"name": "LowNodeUtilization", "args": {
            "thresholds": {"MetricResource": 30}, "targetThresholds": {"MetricResource": 50},
            "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": "instance:node_cpu:rate:sum"}}}}])])))
    prom = tmp_path / "m.json"
    prom.write_text(json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": n}, "value": [0, str(v)]}
        for n, v in (("n1", 0.5695757575757561), ("n2", 0.4245454545454522), ("n3", 0.20381818181818104))]}}))
    args = ["deschedule", "--snapshot", str(snap), "--policy", str(pol), "--metrics", str(prom), "-o", "json"]
    assert cli_main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["evictions"]) == 1 and data["evictions"][0]["node"] == "n1", data

"""scheduler-plugins' objects and configs: PodGroup, ElasticQuota and NodeResourceTopology are read from
snapshots (bad fields: exit 2 with file, object and field); the real configurations that name Coscheduling,
CapacityScheduling, NodeResourcesAllocatable, NodeResourceTopologyMatch, PodState or QOSSort are accepted
and their plugins are used; explain shows why a gang member would wait."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.scheduling import ElasticQuota, PodGroup
from kubesched.api.snapshot import load_snapshot
from kubesched.api.topology import NodeResourceTopology
from kubesched.cli import main
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import build_args
from kubesched.config.scheduler_config import load_scheduler_config, parse_scheduler_config
from kubesched.errors import InputError
from kubesched.scheduler.oneshot import VirtualClock, schedule_all
from kubesched.scheduler.registry import default_registry
from kubesched.scheduler.scheduler import Scheduler

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "realworld" / "docs"
SNAPSHOT = ROOT / "examples" / "gang" / "snapshot.yaml"
COSCHED = ROOT / "examples" / "gang" / "variants" / "coscheduling.yaml"

PG = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
      "metadata": {"name": "pg", "namespace": "ns", "creationTimestamp": "2025-01-06T07:00:00Z"},
      "spec": {"minMember": 3, "minResources": {"cpu": "6", "nvidia.com/gpu": "2"}, "scheduleTimeoutSeconds": 30},
      "status": {"phase": "Running", "running": 3}}
EQ = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
      "metadata": {"name": "quota", "namespace": "ns"}, "spec": {"min": {"cpu": "2"}, "max": {"cpu": "8", "memory": "16Gi"}}}
NRT = {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology", "metadata": {"name": "n1"},
       "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
       "zones": [{"name": "node-0", "type": "Node", "costs": [{"name": "node-0", "value": 10}],
                  "resources": [{"name": "cpu", "capacity": "16", "allocatable": "15", "available": "12"}]}]}


def write(tmp: Path, items: list[dict[str, Any]], name: str = "snap.yaml") -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return p


def test_scheduling_objects_are_read_typed(tmp_path: Path) -> None:
    snap = load_snapshot(write(tmp_path, [PG, EQ, NRT]))
    pg, eq, nrt = snap.others
    assert isinstance(pg, PodGroup) and pg.min_member == 3 and pg.schedule_timeout_seconds == 30
    assert pg.min_resources is not None and pg.min_resources["nvidia.com/gpu"] == 2
    assert pg.status.phase == "Running" and pg.status.running == 3
    assert isinstance(eq, ElasticQuota) and eq.min == {"cpu": 2} and eq.max is not None and eq.max["memory"] == 16 * 2**30
    assert isinstance(nrt, NodeResourceTopology) and nrt.zones[0].resources[0].available == 12
    cluster = ClusterState.from_snapshot(snap)
    assert cluster.others["PodGroup/ns/pg"] is pg and cluster.others["NodeResourceTopology/n1"] is nrt


def _bad(pg_changes: dict[str, Any] | None = None, obj: dict[str, Any] | None = None) -> dict[str, Any]:
    if obj is not None:
        return obj
    out = json.loads(json.dumps(PG))
    out["spec"].update(pg_changes or {})
    return out


@pytest.mark.parametrize("obj, where", [
    (_bad({"minMember": 0}), "PodGroup ns/pg: field spec.minMember"),
    (_bad({"minMember": "three"}), "PodGroup ns/pg: field spec.minMember"),
    (_bad({"minResources": {"cpu": "lots"}}), "PodGroup ns/pg: field spec.minResources.cpu"),
    (_bad({"scheduleTimeoutSeconds": 2**31}), "PodGroup ns/pg: field spec.scheduleTimeoutSeconds"),
    (dict(EQ, spec={"max": {"cpu": "-1"}}), "ElasticQuota ns/quota: field spec.max.cpu"),
    (dict(EQ, apiVersion="scheduling.sigs.k8s.io/v1alpha1"), "ElasticQuota ns/quota: field apiVersion"),
    (dict(NRT, zones=[{"type": "Node"}]), "NodeResourceTopology n1: field zones[0].name"),
    (dict(NRT, zones=[{"name": "node-0", "resources": [{"name": "cpu", "available": "x"}]}]),
     "NodeResourceTopology n1: field zones[0].resources[0].available"),
    (dict(NRT, attributes="single-numa-node"), "NodeResourceTopology n1: field attributes"),
])
def test_bad_fields_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], obj: dict[str, Any],
                                         where: str) -> None:
    path = write(tmp_path, [obj])
    assert main(["qos", "--snapshot", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert str(path) in err and where in err


def test_a_duplicate_pod_group_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["qos", "--snapshot", str(write(tmp_path, [PG, PG]))]) == 2
    assert "duplicate object" in capsys.readouterr().err


# ---------------------------------------------------------------- real configurations

# Real v1 documents that name the plugins, and where each plugin must end up.
REAL_V1 = {
    "sp__charts_as-a-second-scheduler_rendered-defaults.yaml": {
        "queueSort": ["Coscheduling"], "preFilter": ["Coscheduling", "CapacityScheduling", "NodeResourceTopologyMatch"],
        "filter": ["NodeResourceTopologyMatch"], "postFilter": ["Coscheduling", "CapacityScheduling"],
        "permit": ["Coscheduling"], "score": ["NodeResourceTopologyMatch", "NodeResourcesAllocatable"]},
    "sp__manifests_capacityscheduling_scheduler-config.yaml": {
        "preFilter": ["CapacityScheduling"], "postFilter": ["CapacityScheduling"], "reserve": ["CapacityScheduling"]},
    "sp__manifests_coscheduling_scheduler-config.yaml": {
        "queueSort": ["Coscheduling"], "permit": ["Coscheduling"], "reserve": ["Coscheduling"]},
    "sp__manifests_noderesources_scheduler-config.yaml": {"score": ["NodeResourcesAllocatable"]},
    "sp__manifests_noderesourcetopology_scheduler-configmap.yaml_data.yaml": {
        "filter": ["NodeResourceTopologyMatch"], "score": ["NodeResourceTopologyMatch"]},
    "sp__manifests_podstate_scheduler-config.yaml": {"score": ["PodState"]},
}
# Older versions: issue 13's `kubesched convert` turns them into v1; these carry nothing else to convert.
REAL_OLDER = {
    "sp__manifests_qos_scheduler-config.yaml": {"queueSort": ["QOSSort"]},
    "sp__manifests_noderesourcetopology_scheduler-config.yaml": {
        "filter": ["NodeResourceTopologyMatch"], "score": ["NodeResourceTopologyMatch"]},
}


def _check_used(sched: Scheduler, points: dict[str, list[str]]) -> None:
    fwk = next(iter(sched.frameworks.values()))
    for point, names in points.items():
        have = [pl.name for pl in fwk.points[point]]
        for name in names:
            assert name in have, f"{name} not at {point}: {have}"
    # The profile schedules: the example's pods, given the profile's scheduler name.
    snap = load_snapshot(SNAPSHOT)
    snap.pods = [dataclasses.replace(p, scheduler_name=fwk.scheduler_name, cache={}) for p in snap.pods]
    clock = VirtualClock(1_736_150_400.0)
    sched2 = Scheduler(ClusterState.from_snapshot(snap), sched.config, clock=clock)
    placed = schedule_all(sched2, clock)["placements"]
    assert len(placed) == len(snap.pods)


@pytest.mark.parametrize("name", sorted(REAL_V1))
def test_real_v1_configs_are_accepted_and_used(name: str) -> None:
    cfg = load_scheduler_config(str(REAL / name))
    _check_used(Scheduler(ClusterState(), cfg), REAL_V1[name])


@pytest.mark.parametrize("name", sorted(REAL_OLDER))
def test_older_real_configs_once_converted(name: str) -> None:
    raw = yaml.safe_load((REAL / name).read_text())
    raw["apiVersion"] = "kubescheduler.config.k8s.io/v1"
    _check_used(Scheduler(ClusterState(), parse_scheduler_config(raw, name)), REAL_OLDER[name])


def test_koordinators_config_is_refused_naming_its_own_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    path = REAL / "koord__config_manager_scheduler-config.yaml"
    assert main(["schedule", "--snapshot", str(SNAPSHOT), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown plugin 'SchedulingHint'" in err and "Coscheduling" in err


# ---------------------------------------------------------------- explain of a gang member


def test_explain_shows_the_permit_wait_and_its_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--config", str(COSCHED), "--pod", "ml/train-3",
                 "--now", "2025-01-06T08:00:00Z", "-o", "json"]) == 0
    permit = json.loads(capsys.readouterr().out)["permit"]
    assert permit["code"] == "Wait"
    wait = permit["waitingOn"]["Coscheduling"]
    assert wait["timeoutSeconds"] == 10.0
    assert wait["reason"] == "PodGroup ml/train: 1 of minMember 8 pods assumed or bound (8 in the group)"
    # explain leaves nothing behind: the same pod explained again waits the same way.
    assert main(["explain", "--snapshot", str(SNAPSHOT), "--config", str(COSCHED), "--pod", "ml/train-3",
                 "--now", "2025-01-06T08:00:00Z", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["permit"] == permit


# ---------------------------------------------------------------- typed args

@pytest.mark.parametrize(("name", "want"), [
    ("Coscheduling", {"permitWaitingTimeSeconds": 60, "podGroupBackoffSeconds": 0, "podGroupRejectPercentage": 10}),
    # A millicore weighs as much as a MiB by default (defaults.go).
    ("NodeResourcesAllocatable", {"resources": [{"name": "cpu", "weight": 1 << 20}, {"name": "memory", "weight": 1}],
                                  "mode": "Least"}),
    ("NodeResourceTopologyMatch", {"scoringStrategy": {"type": "LeastAllocated", "resources": [
        {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}, "cacheResyncPeriodSeconds": 0,
        "cache": {"foreignPodsDetect": "All", "resyncMethod": "Autodetect", "informerMode": "Dedicated"},
        "preemptionMode": "Disabled"}),
    ("CapacityScheduling", None), ("PodState", None), ("QOSSort", None),
])
def test_scheduler_plugins_args_defaults(name: str, want: Any) -> None:
    cls = default_registry().get(name)
    assert cls.default_args() == want
    if want is not None:
        assert cls.Args.from_raw(want) == cls.Args.from_raw(None)


def test_scheduler_plugins_args_are_read_as_upstream() -> None:
    nra = default_registry().get("NodeResourcesAllocatable").Args.from_raw(
        {"mode": "Most", "resources": [{"name": "cpu", "weight": 2}, {"name": "nvidia.com/gpu", "weight": 5},
                                       {"name": "cpu", "weight": 3}]})
    # A repeated name keeps its last weight; the order of first appearance stays.
    assert nra.mode == "Most" and [(r.name, r.weight) for r in nra.resources] == [("cpu", 3), ("nvidia.com/gpu", 5)]
    nrt = default_registry().get("NodeResourceTopologyMatch").Args.from_raw(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 0}]},
         "cache": {"resyncScope": "OnlyResources"}})
    assert nrt.scoring_strategy.type == "MostAllocated"
    assert [(r.name, r.weight) for r in nrt.scoring_strategy.resources] == [("cpu", 1)]  # weight 0 means 1
    assert nrt.cache.resync_scope == "OnlyResources" and nrt.cache.informer_mode == "Dedicated"
    with pytest.raises(InputError) as e:
        default_registry().get("NodeResourceTopologyMatch").Args.from_raw({"scoringStrategy": {}}, "args")
    assert e.value.field == "args.scoringStrategy.type"  # given without a type: refused, as upstream
    with pytest.raises(InputError, match="takes no args") as e:
        build_args(default_registry().get("CapacityScheduling"), {"kubeConfigPath": "x"}, "args")
    assert e.value.field == "args.kubeConfigPath"

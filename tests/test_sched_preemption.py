"""DefaultPreemption: eligibility, victim selection, node choice, nomination, and the whole flow in the scheduler."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesched.api.objects import parse_pod
from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.errors import InputError
from kubesched.scheduler.oneshot import schedule_all
from kubesched.scheduler.plugins.default_preemption import DefaultPreemption
from kubesched.scheduler.preemption import Victims, filter_pods_with_pdb_violation, pick_one_node_for_preemption
from kubesched.scheduler.scheduler import Scheduler

T0 = 1_700_000_000.0
PLUGINS = ["SchedulingGates", "PrioritySort", "NodeResourcesFit", "DefaultPreemption", "DefaultBinder"]


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, t: float) -> None:
        self.t = max(self.t, t)


def node(name: str, cpu: str = "2", pods: str = "110", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": pods}}}


def pod(name: str, prio: int | None = None, cpu: str = "1", node_name: str = "", labels: dict[str, str] | None = None,
        start: str | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    if prio is not None:
        s["priority"] = prio
    if node_name:
        s["nodeName"] = node_name
    status: dict[str, Any] = {"phase": "Running" if node_name else "Pending"}
    if start:
        status["startTime"] = start
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": s, "status": status}


def pdb(name: str, match: dict[str, str], allowed: int, disrupted: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": match}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted or {}}}


def config(args: dict[str, Any] | None = None) -> Any:
    profile: dict[str, Any] = {"plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                          "enabled": [{"name": n} for n in PLUGINS]}}}
    if args is not None:
        profile["pluginConfig"] = [{"name": "DefaultPreemption", "args": args}]
    return parse_scheduler_config({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                   "kind": "KubeSchedulerConfiguration", "profiles": [profile]})


def make(objs: list[dict[str, Any]], args: dict[str, Any] | None = None) -> tuple[Scheduler, Clock]:
    cluster = ClusterState.from_snapshot(parse_objects(objs, "<test>"))
    clock = Clock()
    return Scheduler(cluster, config(args), seed=0, clock=clock), clock


def run(objs: list[dict[str, Any]], args: dict[str, Any] | None = None) -> tuple[Scheduler, dict[str, dict[str, Any]]]:
    sched, clock = make(objs, args)
    out = schedule_all(sched, clock)
    return sched, {p["pod"]: p for p in out["placements"]}


def test_preempts_the_lowest_priority_victims_only() -> None:
    sched, res = run([node("n1", cpu="3"),
                      pod("p1", 1, node_name="n1"), pod("p5", 5, node_name="n1"), pod("p7", 7, node_name="n1"),
                      pod("high", 10, cpu="1")])
    assert res["default/high"]["node"] == "n1"
    assert res["default/high"]["nominatedNode"] == "n1"
    # Reprieve runs from the most important down: p7 and p5 stay, p1 alone makes room.
    assert res["default/high"]["preempted"] == ["default/p1"]
    assert "default/p1" not in sched.cluster.pods
    assert set(sched.cluster.node_info_by_name["n1"].pods) == {"default/p5", "default/p7", "default/high"}


def test_picks_the_node_whose_highest_victim_priority_is_lowest() -> None:
    _, res = run([node("n1"), node("n2"),
                  pod("a", 5, cpu="2", node_name="n1"), pod("b", 3, cpu="2", node_name="n2"),
                  pod("high", 10, cpu="1")])
    assert res["default/high"]["node"] == "n2"
    assert res["default/high"]["preempted"] == ["default/b"]


def test_pdb_protected_victims_are_avoided_when_another_node_has_none() -> None:
    objs = [node("n1"), node("n2"),
            pod("guarded", 1, cpu="2", node_name="n1", labels={"app": "db"}),
            pod("plain", 5, cpu="2", node_name="n2", labels={"app": "web"}),
            pdb("db", {"app": "db"}, allowed=0),
            pod("high", 10, cpu="1")]
    sched, res = run(objs)
    # n1's victim has the lower priority, but evicting it violates its PDB: fewest violations wins first.
    assert res["default/high"]["node"] == "n2"
    assert res["default/high"]["preempted"] == ["default/plain"]
    assert "default/guarded" in sched.cluster.pods


def test_pdb_budget_left_or_already_disrupted_is_no_violation() -> None:
    pods = [parse_pod(pod(n, 1, node_name="n1", labels={"app": "db"})) for n in ("a", "b", "c")]
    from kubesched.api.objects import parse_pdb

    budget = parse_pdb(pdb("db", {"app": "db"}, allowed=1, disrupted={"a": "2024-01-01T00:00:00Z"}))
    violating, ok = filter_pods_with_pdb_violation(pods, [budget])
    # a is already disrupted (not counted), b uses the one allowed disruption, c exceeds it.
    assert [p.name for p in ok] == ["a", "b"]
    assert [p.name for p in violating] == ["c"]
    empty = parse_pdb({**pdb("all", {}, allowed=0), "spec": {"selector": {}}})
    assert filter_pods_with_pdb_violation(pods, [empty]) == ([], pods)


def test_preemption_policy_never_does_not_preempt() -> None:
    sched, res = run([node("n1"), pod("low", 1, cpu="2", node_name="n1"),
                      pod("high", 10, cpu="1", preemptionPolicy="Never")])
    r = res["default/high"]
    assert r["node"] is None and r["preempted"] == [] and r["nominatedNode"] is None
    assert r["reason"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                           "preemption: not eligible due to preemptionPolicy=Never..")
    assert "default/low" in sched.cluster.pods


def test_no_victims_and_unresolvable_nodes_in_the_message() -> None:
    _, res = run([node("n1"), node("small", cpu="500m"), pod("same", 10, cpu="2", node_name="n1"),
                  pod("high", 10, cpu="1")])
    assert res["default/high"]["reason"] == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling..")


def test_nominated_node_is_honoured_in_the_next_cycle() -> None:
    objs = [node("n1"), node("n2"),
            pod("low", 1, cpu="2", node_name="n1"), pod("mid", 50, cpu="2", node_name="n2"),
            pod("high", 10, cpu="2"),
            # Lower priority than the preemptor: must not take the room made for it.
            pod("filler", 2, cpu="2")]
    sched, clock = make(objs)
    out = schedule_all(sched, clock)
    res = {p["pod"]: p for p in out["placements"]}
    assert res["default/high"] == {"pod": "default/high", "node": "n1", "nominatedNode": "n1",
                                   "preempted": ["default/low"]}
    assert res["default/filler"]["node"] is None
    # The preemptor waited its backoff (1s) on the virtual clock before it was placed.
    assert clock.t >= T0 + 1
    assert sched.nominated == {}
    assert sched.cluster.pods["default/high"].nominated_node_name == ""


def test_nominated_pod_counts_on_its_node_for_lower_priority_pods() -> None:
    objs = [node("n1"), pod("waiting", 10, cpu="2"), pod("other", 1, cpu="1")]
    objs[1]["status"]["nominatedNodeName"] = "n1"
    sched, clock = make(objs)
    sched.enqueue_pending()
    qpi = sched.queue.pop()
    assert qpi is not None and qpi.pod.name == "waiting"
    # Take 'waiting' out of the way to schedule 'other' alone: the nomination must still hold the room.
    sched.queue.add_unschedulable(qpi, sched.queue.scheduling_cycle)
    qpi2 = sched.queue.pop()
    assert qpi2 is not None and qpi2.pod.name == "other"
    out = sched.schedule_one(qpi2)
    assert out.node is None and "Insufficient cpu" in out.reason


def test_terminating_victim_on_nominated_node_blocks_more_preemption() -> None:
    victim = pod("going", 1, cpu="2", node_name="n1")
    victim["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    preemptor = pod("high", 10, cpu="2")
    preemptor["status"]["nominatedNodeName"] = "n1"
    _, res = run([node("n1"), node("n2"), victim, pod("low2", 1, cpu="2", node_name="n2"), preemptor])
    r = res["default/high"]
    assert r["node"] is None and r["preempted"] == []
    assert r["reason"].endswith("preemption: not eligible due to a terminating pod on the nominated node..")


def test_lower_priority_nominations_on_the_chosen_node_are_cleared() -> None:
    small = pod("small", 5, cpu="1")
    small["status"]["nominatedNodeName"] = "n1"
    sched, clock = make([node("n1"), pod("low", 1, cpu="2", node_name="n1"), pod("high", 10, cpu="2"), small])
    sched.enqueue_pending()
    qpi = sched.queue.pop()
    assert qpi is not None and qpi.pod.name == "high"
    out = sched.schedule_one(qpi)
    assert out.nominated_node == "n1" and out.preempted == ["default/low"]
    assert sched.nominated == {"default/high": "n1"}
    assert sched.cluster.pods["default/small"].nominated_node_name == ""


def test_no_candidate_clears_an_old_nomination() -> None:
    p = pod("high", 10, cpu="4")
    p["status"]["nominatedNodeName"] = "n1"
    sched, _ = run([node("n1"), p])
    assert sched.nominated == {}
    assert sched.cluster.pods["default/high"].nominated_node_name == ""


def test_pick_one_node_criteria_in_order() -> None:
    def v(prios: list[int], starts: list[str] | None = None, pdb_violations: int = 0) -> Victims:
        starts = starts or ["2024-01-01T00:00:00Z"] * len(prios)
        pods = [parse_pod(pod(f"v{i}", p, node_name="x", start=s))
                for i, (p, s) in enumerate(zip(prios, starts, strict=True))]
        return Victims(pods, pdb_violations)

    now = T0
    assert pick_one_node_for_preemption({"a": v([1], pdb_violations=1), "b": v([9])}, now) == "b"
    assert pick_one_node_for_preemption({"a": v([5, 1]), "b": v([4, 4])}, now) == "b"
    assert pick_one_node_for_preemption({"a": v([5, 4]), "b": v([5, 1])}, now) == "b"
    # Each victim adds MaxInt32+1 to the sum, so fewer victims usually win already on the sum ...
    assert pick_one_node_for_preemption({"a": v([5, 1, 1]), "b": v([5, 2])}, now) == "b"
    # ... and "fewest victims" decides only when the shifted sums tie.
    x = -(2**30 + 1)
    assert pick_one_node_for_preemption({"a": v([0, x, x]), "b": v([0, -2])}, now) == "b"
    # Sum is shifted by MaxInt32+1 per pod: two negative-priority pods never beat one.
    assert pick_one_node_for_preemption({"a": v([-5, -5]), "b": v([-5])}, now) == "b"
    assert pick_one_node_for_preemption({"a": v([5, 1]), "b": v([5, 1])}, now) == "a"
    later = v([5, 1], ["2024-02-01T00:00:00Z", "2023-01-01T00:00:00Z"])
    assert pick_one_node_for_preemption({"a": v([5, 1]), "b": later}, now) == "b"


def test_candidate_count_and_args_validation() -> None:
    sched, _ = make([node("n1")], {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 3})
    pl = sched.frameworks["default-scheduler"].plugins["DefaultPreemption"]
    assert isinstance(pl, DefaultPreemption)
    assert pl.calculate_num_candidates(100) == 20
    assert pl.calculate_num_candidates(10) == 3
    assert pl.calculate_num_candidates(2) == 2
    defaults, _ = make([node("n1")])
    d = defaults.frameworks["default-scheduler"].plugins["DefaultPreemption"]
    assert isinstance(d, DefaultPreemption)
    assert (d.args.min_candidate_nodes_percentage, d.args.min_candidate_nodes_absolute) == (10, 100)
    for bad, fld in [({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage"),
                     ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute"),
                     ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "minCandidateNodesPercentage"),
                     ({"minCandidateNodesPercentage": "ten"}, "minCandidateNodesPercentage"),
                     ({"bogus": 1}, "bogus")]:
        with pytest.raises(InputError) as ei:
            make([node("n1")], bad)
        assert f"pluginConfig[DefaultPreemption].args.{fld}" in str(ei.value)


def test_dry_run_stops_after_enough_candidates() -> None:
    # 5 equal nodes; with minCandidateNodesAbsolute 1 the dry run stops at the first candidate after
    # the random offset, so the chosen node depends on the seeded RNG only.
    objs = [node(f"n{i}") for i in range(5)] + [pod(f"low{i}", 1, cpu="2", node_name=f"n{i}") for i in range(5)]
    objs.append(pod("high", 10, cpu="2"))
    chosen = set()
    for seed in range(6):
        cluster = ClusterState.from_snapshot(parse_objects(copy.deepcopy(objs), "<test>"))
        clock = Clock()
        sched = Scheduler(cluster, config({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1}),
                          seed=seed, clock=clock)
        res = {p["pod"]: p for p in schedule_all(sched, clock)["placements"]}
        assert len(res["default/high"]["preempted"]) == 1
        chosen.add(res["default/high"]["node"])
    assert len(chosen) > 1

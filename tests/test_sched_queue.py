"""The scheduling queue: PrioritySort order, backoff, the unschedulable pool and its moves, scheduling gates."""

from __future__ import annotations

import copy
from typing import Any

from kubesched.api.objects import parse_node, parse_pod
from kubesched.api.snapshot import parse_objects
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.scheduler.framework import QueuedPodInfo
from kubesched.scheduler.oneshot import schedule_all
from kubesched.scheduler.scheduler import Scheduler

T0 = 1_000_000.0
PLUGINS = ["SchedulingGates", "PrioritySort", "NodeResourcesFit", "DefaultBinder"]


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t

    def advance(self, t: float) -> None:
        self.t = max(self.t, t)


def node(name: str, cpu: str = "2") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def pod(name: str, prio: int | None = None, cpu: str = "1", node_name: str = "", **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}
    if prio is not None:
        s["priority"] = prio
    if node_name:
        s["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": s,
            "status": {"phase": "Running" if node_name else "Pending"}}


def make(objs: list[dict[str, Any]], initial: float = 1, maximum: float = 10) -> tuple[Scheduler, Clock]:
    cfg = parse_scheduler_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "podInitialBackoffSeconds": initial, "podMaxBackoffSeconds": maximum,
        "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                 "enabled": [{"name": n} for n in PLUGINS]}}}]})
    clock = Clock()
    return Scheduler(ClusterState.from_snapshot(parse_objects(objs, "<test>")), cfg, clock=clock), clock


def test_priority_sort_order_then_queue_time() -> None:
    sched, clock = make([node("n1")])
    q = sched.queue
    for i, (name, prio) in enumerate([("low", 1), ("none", None), ("high-late", 10), ("mid", 5)]):
        clock.t = T0 + i
        q.add(parse_pod(pod(name, prio)))
    clock.t = T0 - 1  # an earlier queue timestamp breaks the tie between equal priorities
    q.add(parse_pod(pod("high-early", 10)))
    order = []
    while (qpi := q.pop()) is not None:
        order.append(qpi.pod.name)
    assert order == ["high-early", "high-late", "mid", "low", "none"]


def test_backoff_starts_at_initial_and_doubles_to_max() -> None:
    sched, _ = make([node("n1")])
    q = sched.queue
    qpi = QueuedPodInfo(parse_pod(pod("x")), timestamp=T0)
    got = []
    for attempts in range(1, 8):
        qpi.attempts = attempts
        got.append(q.backoff_duration(qpi))
    assert got == [1, 2, 4, 8, 10, 10, 10]
    sched3, _ = make([node("n1")], initial=3, maximum=20)
    assert [sched3.queue.backoff_duration(QueuedPodInfo(qpi.pod, T0, attempts=a)) for a in (1, 2, 3, 4)] == [3, 6, 12, 20]


def test_failed_pod_with_move_request_backs_off_on_the_clock() -> None:
    sched, clock = make([node("n1", cpu="1"), pod("blocker", cpu="1", node_name="n1"), pod("p", cpu="1")])
    sched.enqueue_pending()
    q = sched.queue
    qpi = q.pop()
    assert qpi is not None
    out = sched.schedule_one(qpi)
    assert out.node is None
    assert q.where["default/p"] == "unschedulable"
    # The blocker goes away: NodeResourcesFit registered Pod/delete, so p moves; its 1s backoff still runs.
    sched.cluster.delete(sched.cluster.pods["default/blocker"])
    assert q.where["default/p"] == "backoff"
    assert q.pop() is None
    assert q.next_backoff_expiry() == T0 + 1
    clock.t = T0 + 1
    again = q.pop()
    assert again is not None and again.pod.name == "p" and again.attempts == 2
    assert sched.schedule_one(again).node == "n1"


def test_move_request_during_the_cycle_sends_the_pod_to_backoff() -> None:
    sched, _ = make([node("n1", cpu="1"), pod("blocker", cpu="1", node_name="n1"), pod("p", cpu="1")])
    sched.enqueue_pending()
    q = sched.queue
    qpi = q.pop()
    assert qpi is not None
    cycle = q.scheduling_cycle
    q.on_cluster_event("Node", "add")  # an event while p is being scheduled
    q.add_unschedulable(qpi, cycle)
    assert q.where["default/p"] == "backoff"


def test_only_relevant_cluster_events_move_unschedulable_pods() -> None:
    sched, clock = make([node("n1", cpu="1"), pod("blocker", cpu="1", node_name="n1"), pod("p", cpu="1")])
    sched.enqueue_pending()
    q = sched.queue
    qpi = q.pop()
    assert qpi is not None
    sched.schedule_one(qpi)
    assert qpi.unschedulable_plugins == {"NodeResourcesFit"}
    clock.t += 30  # past the backoff: a move goes straight to activeQ
    # NodeResourcesFit does not register assigned-pod adds nor PVC events.
    sched.cluster.add(parse_pod(pod("other", cpu="0", node_name="n1")))
    q.on_cluster_event("PersistentVolumeClaim", "add")
    assert q.where["default/p"] == "unschedulable"
    sched.cluster.add(parse_node(node("n2")))
    assert q.where["default/p"] == "active"
    again = q.pop()
    assert again is not None
    assert sched.schedule_one(again).node == "n2"


def test_unschedulable_pods_are_flushed_after_five_minutes() -> None:
    sched, clock = make([node("n1", cpu="1"), pod("p", cpu="2")])
    sched.enqueue_pending()
    q = sched.queue
    qpi = q.pop()
    assert qpi is not None
    sched.schedule_one(qpi)
    assert q.where["default/p"] == "unschedulable"
    clock.t = T0 + 300
    assert q.pop() is None  # exactly 5 minutes is not yet "longer than"
    clock.t = T0 + 300.5
    flushed = q.pop()
    assert flushed is not None and flushed.pod.name == "p"


def test_scheduling_gates_hold_a_pod_until_removed() -> None:
    gated = pod("g", schedulingGates=[{"name": "example.com/wait"}])
    sched, clock = make([node("n1"), copy.deepcopy(gated)])
    out = schedule_all(sched, clock)
    assert out["placements"] == [{"pod": "default/g", "node": None, "nominatedNode": None, "preempted": [],
                                  "reason": "waiting for scheduling gates: example.com/wait"}]
    assert sched.queue.where["default/g"] == "gated"
    # Still gated after an unrelated update and after any amount of time.
    clock.t += 3600
    assert sched.queue.pop() is None
    ungated = copy.deepcopy(gated)
    del ungated["spec"]["schedulingGates"]
    sched.cluster.update(parse_pod(ungated))
    assert sched.queue.where["default/g"] == "active"
    qpi = sched.queue.pop()
    assert qpi is not None
    assert sched.schedule_one(qpi).node == "n1"


def test_schedule_all_places_in_priority_order() -> None:
    # One slot: the higher-priority pod wins it although it comes later in the snapshot.
    sched, clock = make([node("n1", cpu="1"), pod("first", 1, cpu="1"), pod("second", 100, cpu="1")])
    res = {p["pod"]: p for p in schedule_all(sched, clock)["placements"]}
    assert res["default/second"]["node"] == "n1"
    assert res["default/first"]["node"] is None
    assert res["default/first"]["reason"] == "0/1 nodes are available: 1 Insufficient cpu."

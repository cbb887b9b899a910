"""Permit that waits: the waiting pods map (allow, reject, timers), the parked binding cycle, gangs.

The map is tested on its own (upstream's waiting_pods_map semantics: every plugin must allow; the first
signal wins; a timer rejects with upstream's message; timeouts are capped at 15 minutes); then through the
scheduler with a small Permit plugin of the test's own (wait, allow, reject, timeout, deletion while
waiting); then Coscheduling's gangs end to end (quorum allows the group, a timeout or an unplaceable
member releases the siblings through Unreserve) and the run is deterministic.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.objects import parse_pod
from kubesched.api.snapshot import parse_objects
from kubesched.cluster.events import EventType
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import parse_scheduler_config
from kubesched.scheduler.framework import Code, CycleState, PermitPlugin, ReservePlugin, Status
from kubesched.scheduler.oneshot import VirtualClock, schedule_all
from kubesched.scheduler.registry import Registry
from kubesched.scheduler.scheduler import Outcome, Scheduler
from kubesched.scheduler.waiting_pods import MAX_PERMIT_TIMEOUT, WaitingPods

T0 = 1_000_000.0
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def node(name: str, cpu: str = "4", gpu: str | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    if gpu is not None:
        alloc["nvidia.com/gpu"] = gpu
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}


def pod(name: str, cpu: str = "1", group: str = "", gpu: str | None = None, ns: str = "default") -> dict[str, Any]:
    req = {"cpu": cpu}
    if gpu is not None:
        req["nvidia.com/gpu"] = gpu
    labels = {GROUP_LABEL: group} if group else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}",
                                                            "labels": labels},
            "spec": {"containers": [{"name": "c", "resources": {"requests": req}}]}, "status": {"phase": "Pending"}}


def pod_group(name: str, min_member: int, ns: str = "default", timeout: int | None = None,
              created: str = "2025-01-01T00:00:00Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": created}, "spec": spec}


# ---------------------------------------------------------------- the map on its own


def test_waiting_pod_signals_success_only_when_every_plugin_allowed() -> None:
    wps = WaitingPods()
    p = parse_pod(pod("p"))
    wp = wps.add(p, "n1", {"A": 10.0, "B": 20.0}, T0)
    assert sorted(wp.get_pending_plugins()) == ["A", "B"]
    wp.allow("A")
    assert wp.signal is None and wp.get_pending_plugins() == ["B"]
    wp.allow("B")
    assert wp.signal is not None and wp.signal.allowed
    assert [w.pod.key for w in wps.take_signalled()] == ["default/p"]
    assert len(wps) == 0 and wps.get("uid-p") is None


def test_first_signal_wins_and_reject_stops_every_timer() -> None:
    wps = WaitingPods()
    wp = wps.add(parse_pod(pod("p")), "n1", {"A": 10.0, "B": 20.0}, T0)
    wp.reject("B", "no")
    wp.allow("A")
    wp.reject("A", "again")
    assert wp.signal is not None and (wp.signal.allowed, wp.signal.plugin, wp.signal.message) == (False, "B", "no")
    assert wps.next_deadline() is None  # stopped timers never fire
    assert wps.fire_timers(T0 + 100) == 0


def test_timer_fires_at_its_deadline_with_upstreams_message() -> None:
    wps = WaitingPods()
    wp = wps.add(parse_pod(pod("p")), "n1", {"A": 90.0, "B": 10.0}, T0)
    assert wps.next_deadline() == T0 + 10
    assert wps.fire_timers(T0 + 9.999) == 0 and wp.signal is None
    assert wps.fire_timers(T0 + 10) == 1
    assert wp.signal is not None and wp.signal.timed_out
    assert wp.signal.message == "rejected due to timeout after waiting 10s at plugin B"
    assert wp.signal.plugin == "B"


def test_timeouts_are_capped_at_fifteen_minutes_and_formatted_as_go_durations() -> None:
    wps = WaitingPods()
    wp = wps.add(parse_pod(pod("p")), "n1", {"A": 3600.0}, T0)
    assert wps.next_deadline() == T0 + MAX_PERMIT_TIMEOUT
    wps.fire_timers(T0 + MAX_PERMIT_TIMEOUT)
    assert wp.signal is not None and wp.signal.message == "rejected due to timeout after waiting 15m0s at plugin A"


def test_iteration_get_and_reject_removed() -> None:
    wps = WaitingPods()
    a = wps.add(parse_pod(pod("a")), "n1", {"A": 10.0}, T0)
    wps.add(parse_pod(pod("b")), "n1", {"A": 10.0}, T0)
    seen: list[str] = []
    wps.iterate(lambda wp: seen.append(wp.pod.name))
    assert seen == ["a", "b"] and wps.get("uid-a") is a
    assert wps.reject_removed(parse_pod(pod("a")))
    assert a.signal is not None and (a.signal.plugin, a.signal.message) == ("", "removed")
    assert not wps.reject_removed(parse_pod(pod("c")))


# ---------------------------------------------------------------- through the scheduler


class WaitFor(PermitPlugin, ReservePlugin):
    """Makes every pod wait `timeout` seconds; records Unreserve calls."""

    name = "WaitFor"
    timeout = 30.0
    unreserved: list[str] = []

    def permit(self, state: CycleState, pod: Any, node_name: str) -> tuple[Status, float]:
        return Status(Code.WAIT), self.timeout

    def unreserve(self, state: CycleState, pod: Any, node_name: str) -> None:
        WaitFor.unreserved.append(pod.key)


def make(objs: list[dict[str, Any]], plugins: list[str], args: dict[str, Any] | None = None,
         queue_sort: str = "PrioritySort") -> tuple[Scheduler, VirtualClock]:
    registry = Registry()
    registry.register("WaitFor", WaitFor)
    config = parse_scheduler_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "*"}],
                                                 "enabled": [{"name": n} for n in dict.fromkeys(
                                                     [queue_sort, "NodeResourcesFit", "DefaultBinder", *plugins])]}},
                      "pluginConfig": [{"name": k, "args": v} for k, v in (args or {}).items()]}]})
    clock = VirtualClock(T0)
    cluster = ClusterState.from_snapshot(parse_objects(objs, "<test>"))
    return Scheduler(cluster, config, registry, clock=clock), clock


def pop_and_schedule(sched: Scheduler) -> Outcome:
    qpi = sched.queue.pop()
    assert qpi is not None
    return sched.schedule_one(qpi)


def test_a_waiting_pod_is_assumed_on_its_node_but_not_bound() -> None:
    WaitFor.unreserved = []
    sched, clock = make([node("n1", cpu="1"), pod("p")], ["WaitFor"])
    bindings: list[str] = []
    sched.cluster.subscribe(lambda ev: bindings.append("bind") if ev.type is EventType.BOUND else None)
    sched.enqueue_pending()
    out = pop_and_schedule(sched)
    assert out.node is None and out.waiting_on == "n1"
    assert out.status is not None and out.status.code is Code.WAIT
    assert "default/p" in sched.cluster.assumed and bindings == []
    # It counts on the node: a second pod does not fit.
    assert sched.cluster.node_info_by_name["n1"].requested["cpu"] == 1000
    wp = sched.waiting_pods.get("uid-p")
    assert wp is not None
    wp.allow("WaitFor")
    done = sched.settle_permits()
    assert [(o.pod.key, o.node, o.waited) for o in done] == [("default/p", "n1", 0.0)]
    assert bindings == ["bind"] and not sched.cluster.assumed and sched.cluster.pods["default/p"].node_name == "n1"


def test_a_timeout_unreserves_and_requeues_with_upstreams_message() -> None:
    WaitFor.unreserved = []
    sched, clock = make([node("n1"), pod("p")], ["WaitFor"])
    sched.enqueue_pending()
    pop_and_schedule(sched)
    clock.t = T0 + 29
    assert sched.settle_permits() == []
    clock.t = T0 + 30
    (out,) = sched.settle_permits()
    assert out.node is None and out.timed_out and out.waited == 30.0
    assert out.reason == "0/1 nodes are available: 1 rejected due to timeout after waiting 30s at plugin WaitFor."
    assert WaitFor.unreserved == ["default/p"]
    assert sched.cluster.pods["default/p"].node_name == "" and not sched.cluster.assumed
    assert sched.cluster.node_info_by_name["n1"].requested.get("cpu", 0) == 0
    assert sched.queue.where["default/p"] in ("unschedulable", "backoff")
    assert sched.queue.infos["default/p"].unschedulable_plugins == {"WaitFor"}


def test_a_rejection_from_other_code_ends_the_wait() -> None:
    sched, clock = make([node("n1"), pod("p")], ["WaitFor"])
    sched.enqueue_pending()
    pop_and_schedule(sched)
    wp = sched.waiting_pods.get("uid-p")
    assert wp is not None
    wp.reject("Other", "not now")
    (out,) = sched.settle_permits()
    assert out.reason == "0/1 nodes are available: 1 not now." and not out.timed_out
    assert sched.queue.infos["default/p"].unschedulable_plugins == {"Other"}


def test_a_pod_deleted_while_waiting_is_rejected_and_not_retried() -> None:
    sched, clock = make([node("n1"), pod("p")], ["WaitFor"])
    sched.enqueue_pending()
    pop_and_schedule(sched)
    sched.cluster.delete(sched.cluster.pods["default/p"])
    (out,) = sched.settle_permits()
    assert out.reason == "0/1 nodes are available: 1 removed." and "default/p" not in sched.queue.infos
    assert sched.cluster.node_info_by_name["n1"].requested.get("cpu", 0) == 0


def test_one_shot_waits_out_the_timeout_on_the_virtual_clock() -> None:
    sched, clock = make([node("n1"), pod("p")], ["WaitFor"])
    out = schedule_all(sched, clock)
    (rec,) = out["placements"]
    assert rec["node"] is None and rec["permitWaitSeconds"] == 30.0
    assert clock.t >= T0 + 30


# ---------------------------------------------------------------- gangs (Coscheduling)


COSCHED = {"Coscheduling": {"permitWaitingTimeSeconds": 10}}


def gang_objects(group: str, n: int, min_member: int, gpu_nodes: int = 2, gpus: str = "4",
                 timeout: int | None = None) -> list[dict[str, Any]]:
    objs = [node(f"n{i}", cpu="8", gpu=gpus) for i in range(gpu_nodes)]
    objs.append(pod_group(group, min_member, timeout=timeout))
    objs += [pod(f"{group}-{i}", group=group, gpu="1") for i in range(n)]
    return objs


def test_a_gang_that_fits_is_bound_all_together() -> None:
    sched, clock = make(gang_objects("a", 6, 6), ["Coscheduling"], COSCHED, queue_sort="Coscheduling")
    outcomes: list[Outcome] = []
    sched.enqueue_pending()
    sched.run_until_idle(advance=clock.advance, on_outcome=outcomes.append)
    waiting = [o for o in outcomes if o.waiting_on]
    bound = [o for o in outcomes if o.node]
    # The first five wait; the sixth completes the quorum and allows them.
    assert len(waiting) == 5 and len(bound) == 6
    assert all(o.waited == 0.0 for o in bound if o.waited is not None)
    assert {p.node_name for p in sched.cluster.pods.values()} <= {"n0", "n1"}
    assert clock.t == T0


def test_a_gang_that_cannot_fit_holds_nothing_once_rejected() -> None:
    # 8 GPUs, a gang of 10: the ninth pod fails Filter, PostFilter rejects the eight waiting siblings.
    sched, clock = make(gang_objects("b", 10, 10), ["Coscheduling"], COSCHED, queue_sort="Coscheduling")
    out = schedule_all(sched, clock)
    assert all(p["node"] is None for p in out["placements"])
    reasons = {p["reason"] for p in out["placements"]}
    assert "0/1 nodes are available: 1 optimistic rejection in PostFilter." in reasons
    # Whatever is left waiting when the run stops holds no GPU once it is rejected; nothing is bound.
    assert not any(p.node_name and p.key not in sched.cluster.assumed for p in sched.cluster.pods.values())


def test_a_timeout_of_one_member_rejects_its_waiting_siblings_through_unreserve() -> None:
    # Four pods on three GPUs: the fourth fails Filter; with a 50% reject threshold (a 25% gap) PostFilter
    # leaves the three waiting siblings alone, so they wait for their timeout.
    objs = gang_objects("c", 4, 4, gpu_nodes=1, gpus="3")
    sched, clock = make(objs, ["Coscheduling"],
                        {"Coscheduling": {"permitWaitingTimeSeconds": 10, "podGroupRejectPercentage": 50}},
                        queue_sort="Coscheduling")
    sched.enqueue_pending()
    outs = []
    for i in range(4):  # one second apart, so the first pod's timer fires first
        clock.t = T0 + i
        outs.append(pop_and_schedule(sched))
    assert [bool(o.waiting_on) for o in outs] == [True, True, True, False]
    assert len(sched.waiting_pods) == 3
    clock.t = T0 + 10
    late = sched.settle_permits()
    # The first timer fires; its Unreserve rejects the two others ("rejection in Unreserve").
    assert [o.timed_out for o in late] == [True, False, False]
    assert [o.waited for o in late] == [10.0, 9.0, 8.0]
    assert all("rejection in Unreserve" in o.reason for o in late[1:])
    assert not sched.waiting_pods and not sched.cluster.assumed


def test_permit_reject_percentage_validation_names_the_field() -> None:
    with pytest.raises(Exception) as e:
        make(gang_objects("d", 2, 2), ["Coscheduling"], {"Coscheduling": {"podGroupRejectPercentage": 101}},
             queue_sort="Coscheduling")
    assert "podGroupRejectPercentage" in str(e.value) and "must be between 0 and 100" in str(e.value)


def _run_gangs() -> list[tuple[str, Any, Any, Any]]:
    objs = gang_objects("a", 6, 6) + [pod_group("b", 6, created="2025-01-01T00:00:01Z")]
    objs += [pod(f"b-{i}", group="b", gpu="1") for i in range(6)]
    sched, clock = make(objs, ["Coscheduling"], COSCHED, queue_sort="Coscheduling")
    out = schedule_all(sched, clock)
    return [(p["pod"], p["node"], p.get("permitWaitSeconds"), p.get("reason")) for p in out["placements"]]


def test_gang_scheduling_is_deterministic() -> None:
    first = _run_gangs()
    assert first == _run_gangs()
    # The older group gets the GPUs; the other waits in vain and is released.
    assert all(node for pod_key, node, _, _ in first if pod_key.startswith("default/a-"))
    assert not any(node for pod_key, node, _, _ in first if pod_key.startswith("default/b-"))

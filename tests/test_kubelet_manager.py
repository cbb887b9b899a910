"""The eviction manager as a component: one synchronize per housekeeping pass, state kept between passes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubesched.api.objects import Pod, parse_pod
from kubesched.kubelet.kubelet_config import parse_kubelet_config
from kubesched.kubelet.manager import (
    DELETE_ALL_UNUSED_CONTAINERS,
    DELETE_UNUSED_IMAGES,
    DiskLayout,
    EvictionManager,
)
from kubesched.kubelet.signals import Summary, parse_summary

GI = 2**30
MI = 2**20
T0 = 1_700_000_000.0


def config(**fields: Any) -> Any:
    return parse_kubelet_config({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                                 "enforceNodeAllocatable": [], **fields})


def pod(name: str, priority: int = 0, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        grace: int | None = None, annotations: dict[str, str] | None = None, volumes: list[Any] | None = None,
        namespace: str = "default", node: str = "n1", tolerations: list[Any] | None = None) -> Pod:
    spec: dict[str, Any] = {"priority": priority, "containers": [
        {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}]}
    if node:
        spec["nodeName"] = node
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if volumes:
        spec["volumes"] = volumes
    if tolerations:
        spec["tolerations"] = tolerations
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": {"phase": "Running"},
                      "metadata": {"name": name, "namespace": namespace, "uid": name, "annotations": annotations or {}}})


def memory_stats(available: int, usage: dict[str, int]) -> Summary:
    return parse_summary({"node": {"nodeName": "n1", "memory": {"availableBytes": available, "workingSetBytes": GI}},
                          "pods": [{"podRef": {"name": n, "namespace": "default", "uid": n},
                                    "memory": {"workingSetBytes": u}} for n, u in usage.items()]})


def disk_stats(available: int, usage: dict[str, tuple[int, int]], image_available: int = 50 * GI) -> Summary:
    """usage: pod -> (rootfs bytes, logs bytes)."""
    return parse_summary({
        "node": {"nodeName": "n1", "fs": {"availableBytes": available, "capacityBytes": 100 * GI},
                 "runtime": {"imageFs": {"availableBytes": image_available, "capacityBytes": 100 * GI}}},
        "pods": [{"podRef": {"name": n, "namespace": "default", "uid": n},
                  "containers": [{"name": n, "rootfs": {"usedBytes": r}, "logs": {"usedBytes": lg}}]}
                 for n, (r, lg) in usage.items()]})


def keys(pods: Sequence[Pod]) -> list[str]:
    return [p.name for p in pods]


PODS = [pod("guaranteed", 0, {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
        pod("burstable", 0, {"memory": "100Mi"}, {"memory": "1Gi"}, grace=3),
        pod("best-effort", 0)]
USAGE = {"guaranteed": 900 * MI, "burstable": 400 * MI, "best-effort": 300 * MI}


def test_soft_threshold_waits_its_grace_period_then_uses_the_smaller_grace() -> None:
    m = EvictionManager(config(evictionHard={"memory.available": "500Mi"}, evictionSoft={"memory.available": "1Gi"},
                               evictionSoftGracePeriod={"memory.available": "1m"}, evictionMaxPodGracePeriod=30))
    low = memory_stats(800 * MI, USAGE)
    r = m.synchronize(T0, low, PODS)
    assert r.conditions == ["MemoryPressure"] and r.evictions == [] and r.thresholds_met == []
    r = m.synchronize(T0 + 59, low, PODS)
    assert r.evictions == []
    r = m.synchronize(T0 + 60, low, PODS)
    # Both pods above their request: same priority, burstable is further above it (300Mi vs 300Mi-0)...
    assert keys(r.rank_order)[:2] == ["burstable", "best-effort"]
    assert [(e.pod.name, e.grace_period_seconds) for e in r.evictions] == [("burstable", 3)]
    # ... and a hard threshold gives 1 second whatever the pod asks for.
    r = m.synchronize(T0 + 70, memory_stats(100 * MI, USAGE), PODS)
    assert [(e.pod.name, e.grace_period_seconds) for e in r.evictions] == [("burstable", 1)]


def test_evicted_pod_status_carries_upstream_message_and_disruption_condition() -> None:
    m = EvictionManager(config(evictionHard={"memory.available": "1Gi"}))
    r = m.synchronize(T0, memory_stats(512 * MI, USAGE), PODS)
    status = r.evictions[0].status()
    assert status["phase"] == "Failed" and status["reason"] == "Evicted"
    assert status["message"] == "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionTarget", "True", "TerminationByKubelet")
    assert cond["message"] == status["message"]


def test_condition_is_held_for_the_transition_period_and_min_reclaim_keeps_evicting() -> None:
    m = EvictionManager(config(evictionHard={"memory.available": "1Gi"}, evictionMinimumReclaim={"memory.available": "1Gi"},
                               evictionPressureTransitionPeriod="1m"))
    assert m.synchronize(T0, memory_stats(900 * MI, USAGE), PODS).evictions
    # 1.5Gi is above 1Gi but below 1Gi + 1Gi: still met, still evicting.
    r = m.synchronize(T0 + 10, memory_stats(1536 * MI, USAGE), PODS)
    assert [t.signal for t in r.thresholds_met] == ["memory.available"] and r.evictions
    r = m.synchronize(T0 + 20, memory_stats(3 * GI, USAGE), PODS)
    assert r.thresholds_met == [] and r.evictions == [] and r.conditions == ["MemoryPressure"]
    # Last observed at +10: held while less than 1m has passed.
    assert m.synchronize(T0 + 69, memory_stats(3 * GI, USAGE), PODS).conditions == ["MemoryPressure"]
    assert m.synchronize(T0 + 70, memory_stats(3 * GI, USAGE), PODS).conditions == []


def test_critical_pods_are_ranked_but_never_evicted() -> None:
    static = pod("static", 0, annotations={"kubernetes.io/config.source": "file"})
    system = pod("system", 2_000_000_000, namespace="kube-system")
    regular = pod("regular", 10)
    m = EvictionManager(config(evictionHard={"memory.available": "1Gi"}))
    stats = memory_stats(100 * MI, {"static": GI, "system": GI, "regular": MI})
    r = m.synchronize(T0, stats, [system, static, regular])
    assert keys(r.rank_order) == ["static", "regular", "system"]
    assert keys(r.skipped_critical) == ["static"]
    assert keys(r.evicted) == ["regular"]
    # The only other pod is critical too: nothing is evicted.
    r = m.synchronize(T0 + 10, stats, [system, static])
    assert keys(r.skipped_critical) == ["static", "system"] and r.evictions == []


def test_pods_without_stats_rank_first_and_priority_breaks_ties() -> None:
    m = EvictionManager(config(evictionHard={"memory.available": "1Gi"}))
    pods = [pod("high", 100), pod("low", -5), pod("no-stats", 1000)]
    r = m.synchronize(T0, memory_stats(100 * MI, {"high": 10 * MI, "low": 10 * MI}), pods)
    assert keys(r.rank_order) == ["no-stats", "low", "high"]


def test_pid_pressure_ranks_by_priority_then_processes() -> None:
    pods = [pod("a", 0), pod("b", 0), pod("c", -1)]
    stats = parse_summary({"node": {"rlimit": {"maxpid": 1000, "curproc": 950}},
                           "pods": [{"podRef": {"name": n, "namespace": "default", "uid": n},
                                     "process_stats": {"process_count": c}} for n, c in (("a", 5), ("b", 50), ("c", 1))]})
    r = EvictionManager(config(evictionHard={"pid.available": "100"})).synchronize(T0, stats, pods)
    assert r.conditions == ["PIDPressure"]
    assert keys(r.rank_order) == ["c", "b", "a"]
    assert r.evictions[0].message == "The node was low on resource: pids. Threshold quantity: 100, available: 50. "


def test_node_reclaim_runs_first_and_can_spare_the_pods() -> None:
    pods = [pod("a"), pod("b")]
    calls: list[tuple[str, ...]] = []

    def gc_frees_everything(actions: Sequence[str]) -> Summary:
        calls.append(tuple(actions))
        return disk_stats(60 * GI, {"a": (GI, 0), "b": (2 * GI, 0)})

    m = EvictionManager(config(evictionHard={"nodefs.available": "10Gi"}))
    r = m.synchronize(T0, disk_stats(5 * GI, {"a": (GI, 0), "b": (2 * GI, 0)}), pods, reclaim=gc_frees_everything)
    assert calls == [(DELETE_ALL_UNUSED_CONTAINERS, DELETE_UNUSED_IMAGES)]
    assert r.node_reclaim is not None and r.node_reclaim.resolved
    assert r.evictions == [] and r.conditions == ["DiskPressure"]
    # A collector that frees nothing: the pod using the most disk goes.
    r = m.synchronize(T0 + 10, disk_stats(5 * GI, {"a": (GI, 0), "b": (2 * GI, 0)}), pods, reclaim=lambda _a: None)
    assert r.node_reclaim is not None and not r.node_reclaim.resolved
    assert keys(r.evicted) == ["b"]


def test_dedicated_imagefs_changes_what_nodefs_ranking_measures() -> None:
    pods = [pod("big-rootfs"), pod("big-logs")]
    usage = {"big-rootfs": (5 * GI, 0), "big-logs": (0, GI)}
    cfg = config(evictionHard={"nodefs.available": "10Gi"})
    single = EvictionManager(cfg).synchronize(T0, disk_stats(5 * GI, usage), pods)
    assert keys(single.rank_order) == ["big-rootfs", "big-logs"]
    dedicated = EvictionManager(cfg, disk_layout=DiskLayout(dedicated_image_fs=True))
    r = dedicated.synchronize(T0, disk_stats(5 * GI, usage), pods)
    # With an imagefs, nodefs holds logs and volumes only, and no collector helps nodefs.
    assert keys(r.rank_order) == ["big-logs", "big-rootfs"]
    assert r.node_reclaim is None
    # Imagefs pressure ranks by writable layers and garbage-collects first.
    m = EvictionManager(config(evictionHard={"imagefs.available": "10Gi"}), disk_layout=DiskLayout(True))
    r = m.synchronize(T0, disk_stats(50 * GI, usage, image_available=GI), pods)
    assert r.node_reclaim is not None and keys(r.rank_order) == ["big-rootfs", "big-logs"]


def test_local_storage_limits_evict_every_violator_at_once() -> None:
    empty_dir = pod("empty-dir", volumes=[{"name": "scratch", "emptyDir": {"sizeLimit": "100Mi"}}])
    limited = pod("limited", limits={"ephemeral-storage": "200Mi"})
    critical = pod("critical", annotations={"kubernetes.io/config.mirror": "x"}, limits={"ephemeral-storage": "1Mi"})
    fine = pod("fine", limits={"ephemeral-storage": "10Gi"})
    stats = parse_summary({"node": {}, "pods": [
        {"podRef": {"name": "empty-dir", "namespace": "default", "uid": "empty-dir"},
         "volume": [{"name": "scratch", "usedBytes": 150 * MI}]},
        {"podRef": {"name": "limited", "namespace": "default", "uid": "limited"},
         "containers": [{"name": "limited", "rootfs": {"usedBytes": 150 * MI}, "logs": {"usedBytes": 100 * MI}}]},
        {"podRef": {"name": "critical", "namespace": "default", "uid": "critical"},
         "ephemeral-storage": {"usedBytes": 10 * MI}},
        {"podRef": {"name": "fine", "namespace": "default", "uid": "fine"}, "ephemeral-storage": {"usedBytes": MI}},
    ]})
    r = EvictionManager(config(evictionHard={})).synchronize(T0, stats, [empty_dir, limited, critical, fine])
    assert keys(r.evicted) == ["empty-dir", "limited"]
    assert r.evictions[0].message == 'Usage of EmptyDir volume "scratch" exceeds the limit "100Mi". '
    assert r.evictions[1].message == 'Container limited exceeded its local ephemeral storage limit "200Mi". '
    assert all(e.grace_period_seconds == 1 and e.conditions == [] for e in r.evictions)
    off = EvictionManager(config(evictionHard={}, localStorageCapacityIsolation=False))
    assert off.synchronize(T0, stats, [empty_dir, limited]).evictions == []


def test_admission_and_taints_follow_the_conditions() -> None:
    best_effort = pod("be", node="")
    burstable = pod("bu", requests={"memory": "1Mi"}, node="")
    tolerant = pod("tol", node="", tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
                                                 "effect": "NoSchedule"}])
    critical = pod("crit", priority=2_000_000_000, node="")
    m = EvictionManager(config(evictionHard={"memory.available": "1Gi", "nodefs.available": "1Gi"}))
    assert all(m.admit(p).admit for p in (best_effort, burstable))
    m.synchronize(T0, memory_stats(512 * MI, {}), [])
    assert [(t.key, t.effect) for t in m.taints] == [("node.kubernetes.io/memory-pressure", "NoSchedule")]
    assert not m.admit(best_effort).admit
    assert m.admit(best_effort).message == "The node had condition: [MemoryPressure]. "
    assert m.admit(burstable).admit and m.admit(tolerant).admit and m.admit(critical).admit
    disk = parse_summary({"node": {"memory": {"availableBytes": 512 * MI, "workingSetBytes": GI},
                                   "fs": {"availableBytes": 1, "capacityBytes": 100 * GI}}})
    r = m.synchronize(T0 + 10, disk, [])
    assert r.conditions == ["MemoryPressure", "DiskPressure"]
    assert not m.admit(burstable).admit and not m.admit(tolerant).admit and m.admit(critical).admit


def test_injected_clock_and_stale_stats() -> None:
    now = [T0]
    m = EvictionManager(config(evictionHard={"memory.available": "1Gi"}), clock=lambda: now[0])
    stats = parse_summary({"node": {"memory": {"availableBytes": 512 * MI, "workingSetBytes": GI,
                                               "time": "2023-11-14T22:13:20Z"}},
                           "pods": [{"podRef": {"name": "best-effort", "namespace": "default", "uid": "best-effort"},
                                     "memory": {"workingSetBytes": MI}}]})
    r = m.synchronize(None, stats, PODS)
    assert r.at == T0 and r.evictions
    now[0] += 10
    # The same measurement again: the threshold is still met but nothing new to act on.
    r = m.synchronize(None, stats, PODS)
    assert r.conditions == ["MemoryPressure"] and r.evictions == []


def test_no_thresholds_and_no_local_storage_isolation_does_nothing() -> None:
    m = EvictionManager(config(evictionHard={}, localStorageCapacityIsolation=False))
    r = m.synchronize(T0, memory_stats(1, USAGE), PODS)
    assert r.conditions == [] and r.evictions == [] and r.observations == {}


def test_memory_backed_empty_dir_is_held_to_its_real_size_when_resizable() -> None:
    vol = [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    p = pod("p", volumes=vol)

    def stats(capacity: int | None) -> Summary:
        v: dict[str, Any] = {"name": "shm", "usedBytes": 2 * GI}
        if capacity is not None:
            v["capacityBytes"] = capacity
        return parse_summary({"node": {"nodeName": "n1"},
                              "pods": [{"podRef": {"name": "p", "namespace": "default", "uid": "p"}, "volume": [v]}]})

    off = EvictionManager(config(evictionHard={}, localStorageCapacityIsolation=True))
    assert [e.pod.name for e in off.synchronize(T0, stats(3 * GI), [p]).evictions] == ["p"]  # sizeLimit 1Gi
    gate = {"InPlacePodVerticalScalingMemoryBackedVolumes": True}
    on = EvictionManager(config(evictionHard={}, localStorageCapacityIsolation=True, featureGates=gate))
    assert on.synchronize(T0, stats(3 * GI), [p]).evictions == []  # 2Gi fits the 3Gi the volume has
    assert on.synchronize(T0 + 10, stats(None), [p]).evictions == []  # no capacity in the stats: not judged
    ev = on.synchronize(T0 + 20, stats(GI), [p]).evictions
    assert [e.pod.name for e in ev] == ["p"] and "1Gi" in ev[0].message

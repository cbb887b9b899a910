"""The kubelets: start bound pods, finish terminating ones, kill containers over their memory, evict under
node pressure.

Per node, as the kubelet does it:
- a pod bound to the node starts after the scenario's startup delay, if the node's eviction manager admits
  it (a node under memory pressure refuses BestEffort pods: the pod fails with the admission reason);
  a Job pod succeeds after the scenario's job duration;
- a terminating pod's containers stop when its grace period ends, and the kubelet confirms the deletion;
- a container over its memory limit is OOM-killed and restarts with CrashLoopBackOff (10 s doubling to
  5 min; restartPolicy Never: the pod fails); when the node's memory runs out before the eviction
  manager acts, the kernel kills the container with the highest oom_score first;
- every housekeeping interval the node-pressure eviction manager (`kubesched.kubelet.manager`) runs on
  Summary API stats synthesized from actual usage, on the nodes near a memory threshold (and those with
  pressure or pending thresholds); its conditions go to the node (node_lifecycle.py taints it) and its
  evictions kill the pod after the grace period, leaving it Failed with reason Evicted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kubesched.client.simulated import rfc3339
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.kubelet.kubelet_config import KubeletEvictionConfig
from kubesched.kubelet.manager import EvictionManager
from kubesched.kubelet.oom import pod_oom_score_adjust
from kubesched.kubelet.signals import SYSTEM_CONTAINER_PODS, ContainerStats, MemoryStats, NodeStats, PodStats, Summary
from kubesched.sim.context import ORDER_KUBELET, ORDER_POD, Sim
from kubesched.sim.loops import Eviction
from kubesched.sim.node_usage import ResourceUsage
from kubesched.sim.pods import SimPod

CRASH_LOOP_INITIAL = 10.0
CRASH_LOOP_MAX = 300.0


class Kubelets:
    def __init__(self, sim: Sim, usage: ResourceUsage, config: KubeletEvictionConfig) -> None:
        self.sim = sim
        self.usage = usage
        self.config = config
        self.managers: dict[str, EvictionManager] = {}
        # Nodes whose eviction manager holds state (conditions, thresholds observed or met): synced every
        # housekeeping whatever their usage, without walking every manager.
        self._engaged: set[str] = set()
        self._killing: set[str] = set()
        # Set by the wiring: where pressure conditions go (the node lifecycle controller).
        self.on_conditions = lambda name, conditions: None
        # Set by the wiring: whether a pod that started waits for others before it works (a gang member;
        # that driver then ends the pod's work itself).
        self.holds_work: Callable[[SimPod, int], bool] = lambda sp, serial: False

    # ------------------------------------------------------------ pod lifecycle

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        sim = self.sim
        if ev.type is EventType.BOUND:
            sim.push(sim.t + sim.scenario.startup_delay, ORDER_POD, self.start_pod, sp, sp.serial)
        elif ev.type is EventType.UPDATED:
            obj, old = ev.obj, ev.old
            if obj.is_terminating and (old is None or not old.is_terminating) and obj.node_name:
                assert obj.meta.deletion_timestamp is not None
                at = obj.meta.deletion_timestamp.timestamp() - sim.epoch
                sim.push(max(at, sim.t), ORDER_POD, self.finish_termination, sp, sp.serial)
        elif ev.type is EventType.DELETED:
            self._killing.discard(sp.key)

    def start_pod(self, sp: SimPod, serial: int) -> None:
        """The kubelet starts a bound pod: admission first (pressure conditions), then it runs."""
        if (not self.sim.pods.current(sp) or sp.serial != serial or sp.terminating or sp.phase != "Pending"
                or not sp.node):
            return
        nid = self.usage.node_ids.get(sp.node)
        if nid is None or not self.usage.nodes["present"][nid]:
            return
        mgr = self.managers.get(sp.node)
        if mgr is not None:
            verdict = mgr.admit(sp.pod)
            if not verdict.admit:
                self.sim.rec.event(self.sim.t, "admissionRejected", pod=sp.key, node=sp.node, reason=verdict.reason,
                                   message=verdict.message)
                self.fail_pod(sp, verdict.reason or "Evicted", verdict.message)
                return
        start = rfc3339(self.sim.clock())
        cname = sp.pod.containers[0].name if sp.pod.containers else "main"
        sp.started_at = self.sim.t
        self.sim.server.update_pod_status(
            sp.pod, cause=Cause.KUBELET, phase="Running", startTime=start, hostIP="", conditions=[
                {"type": "Ready", "status": "True", "lastTransitionTime": start},
                {"type": "PodScheduled", "status": "True"}],
            containerStatuses=[{"name": c.name, "ready": True, "restartCount": 0, "started": True,
                                "state": {"running": {"startedAt": start}}} for c in sp.pod.containers]
            or [{"name": cname, "ready": True, "restartCount": 0}])
        held = self.holds_work(sp, serial)
        if sp.run_seconds > 0 and not held:
            self.sim.push(self.sim.t + sp.run_seconds, ORDER_POD, self.succeed_pod, sp, serial)

    def succeed_pod(self, sp: SimPod, serial: int) -> None:
        if not self.sim.pods.current(sp) or sp.serial != serial or sp.phase != "Running" or sp.terminating:
            return
        self.usage.free_slot(sp)
        self.sim.rec.event(self.sim.t, "podSucceeded", pod=sp.key, node=sp.node)
        self.sim.server.update_pod_status(sp.pod, cause=Cause.KUBELET, phase="Succeeded")

    def fail_pod(self, sp: SimPod, reason: str, message: str) -> None:
        """The pod fails where it is (kubelet eviction, admission rejection): phase Failed, not deleted."""
        if not self.sim.pods.current(sp) or sp.phase in ("Succeeded", "Failed"):
            return
        self.usage.free_slot(sp)
        self._killing.discard(sp.key)
        self.sim.server.update_pod_status(sp.pod, cause=Cause.KUBELET, phase="Failed", reason=reason, message=message)

    def finish_termination(self, sp: SimPod, serial: int) -> None:
        """The grace period is over: the containers are stopped and the kubelet confirms the deletion."""
        if not self.sim.pods.current(sp) or sp.serial != serial:
            return
        self.usage.free_slot(sp)
        self.sim.server.finish_termination(sp.pod)

    # ------------------------------------------------------------ OOM

    def check_oom(self, live: np.ndarray, down: np.ndarray, mem: np.ndarray) -> None:
        """Containers over their memory limit are killed (before node sums are taken); `mem`: the memory of
        the slots `live` as `compute` set it."""
        s = self.usage.slots
        over = mem > self.usage.memory_limits(live)
        if down.any():
            over &= ~down
        for i in np.flatnonzero(over):
            slot = int(live[i])
            self._oom_kill(slot, "container", float(mem[i]))
            s["cpu"][slot] = s["mem"][slot] = 0.0

    def check_system_oom(self) -> None:
        """Node memory exhausted before the kubelet acted (after node sums are taken)."""
        u = self.usage
        n = u.n
        if not n:
            return
        ws = u.col("mem") + u.system_reserved_memory
        cap = u.col("cap_mem")
        for nid in np.flatnonzero((ws > cap) & (cap > 0) & u.col("present")):
            self._system_oom(int(nid))

    def _oom_kill(self, slot: int, scope: str, mem: float) -> None:
        """A container over its memory limit is killed; it restarts with CrashLoopBackOff (restartPolicy
        Never: the pod fails)."""
        sp = self.usage.slot_pod[slot]
        if sp is None:
            return
        sp.restarts += 1
        self.sim.rec.oom_kills.append({"t": self.sim.t, "pod": sp.key, "node": sp.node, "scope": scope,
                                       "memory": int(mem), "workload": sp.workload})
        statuses = [dict(cs) for cs in sp.pod.status.get("containerStatuses") or [] if isinstance(cs, dict)]
        if statuses:
            statuses[0]["restartCount"] = sp.restarts
            statuses[0]["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
            self.sim.server.update_pod_status(sp.pod, cause=Cause.KUBELET, containerStatuses=statuses)
        if sp.pod.restart_policy == "Never":
            self.fail_pod(sp, "OOMKilled", "container exceeded its memory limit")
            return
        backoff = min(CRASH_LOOP_INITIAL * (2 ** (sp.restarts - 1)), CRASH_LOOP_MAX)
        self.usage.slots["down"][slot] = self.sim.t + backoff
        # The restarted container's memory starts afresh.
        self.usage.table.restart(sp.usage_row, "memory")

    def _system_oom(self, nid: int) -> None:
        """The kernel kills the highest oom_score first until the node's memory fits."""
        u = self.usage
        s = u.slots
        cap = u.nodes["cap_mem"][nid]
        ws = u.nodes["mem"][nid] + u.system_reserved_memory

        def score(slot: int) -> tuple[float, int]:
            sp = u.slot_pod[slot]
            assert sp is not None
            adj = max((v for v in pod_oom_score_adjust(sp.pod, int(cap)).values() if v is not None), default=0)
            return (s["mem"][slot] / cap * 1000 + adj, -slot)

        for slot in sorted(u.live_slots_on(nid), key=score, reverse=True):
            if ws <= cap:
                break
            mem = float(s["mem"][slot])
            if mem <= 0:
                continue
            self._oom_kill(slot, "node", mem)
            s["mem"][slot] = s["cpu"][slot] = 0.0
            ws -= mem
            u.nodes["mem"][nid] -= mem

    # ------------------------------------------------------------ node-pressure eviction

    def node_removed(self, ev: Event) -> None:
        if ev.kind == "Node" and ev.type is EventType.DELETED:
            self.managers.pop(ev.obj.name, None)
            self._engaged.discard(ev.obj.name)

    def tick(self) -> None:
        u = self.usage
        u.current()
        n = u.n
        present = u.col("present")
        ws = u.col("mem") + u.system_reserved_memory
        avail = u.col("cap_mem") - ws
        alloc_avail = u.col("alloc_mem") - u.col("mem")
        look = ((avail < u.col("thr_mem")) | (alloc_avail < u.col("thr_alloc"))) & present
        for name in self._engaged:
            nid = u.node_ids[name]
            if nid < n:
                look[nid] = present[nid]
        for row in np.flatnonzero(look):
            self._sync(int(row))
        self.sim.push(self.sim.t + self.sim.scenario.kubelet.housekeeping_interval, ORDER_KUBELET, self.tick)

    def _sync(self, nid: int) -> None:
        u = self.usage
        name = u.node_names[nid]
        node = self.sim.cluster.nodes.get(name)
        if node is None:
            return
        mgr = self.managers.get(name)
        if mgr is None:
            mgr = EvictionManager(self.config, clock=self.sim.clock)
            self.managers[name] = mgr
        now = self.sim.clock()
        pods_stats = []
        pods = []
        s = u.slots
        for slot in u.live_slots_on(nid):
            sp = u.slot_pod[slot]
            if sp is None or sp.key in self._killing:
                continue
            m = int(s["mem"][slot])
            cname = sp.pod.containers[0].name if sp.pod.containers else "main"
            pods_stats.append(PodStats(sp.pod.name, sp.pod.namespace, sp.pod.uid,
                                       containers=(ContainerStats(cname, memory=MemoryStats(now, None, m)),),
                                       memory=MemoryStats(now, None, m)))
            pods.append(sp.pod)
        pods_ws = int(u.nodes["mem"][nid])
        ws = pods_ws + u.system_reserved_memory
        cap = int(u.nodes["cap_mem"][nid])
        alloc = int(u.nodes["alloc_mem"][nid])
        summary = Summary(node=NodeStats(name, memory=MemoryStats(now, max(cap - ws, 0), ws),
                                         system_containers=(ContainerStats(SYSTEM_CONTAINER_PODS, memory=MemoryStats(
                                             now, max(alloc - pods_ws, 0), pods_ws)),)),
                          pods=tuple(pods_stats))
        before = list(mgr.node_conditions)
        result = mgr.synchronize(now, summary, pods, node)
        if mgr.node_conditions or mgr.thresholds_first_observed_at or mgr.thresholds_met:
            self._engaged.add(name)
        else:
            self._engaged.discard(name)
        if list(result.conditions) != before:
            self.on_conditions(name, list(result.conditions))
            self.sim.rec.event(self.sim.t, "nodeConditions", node=name, conditions=list(result.conditions))
        for ev in result.evictions:
            sp = self.sim.pods.get(ev.pod.key)
            if sp is None or sp.key in self._killing:
                continue
            self._killing.add(sp.key)
            self.sim.rec.evictions.append(Eviction(self.sim.t, sp.key, sp.workload, sp.node, "kubelet", ev.signal))
            self.sim.push(self.sim.t + ev.grace_period_seconds, ORDER_POD, self._killed, sp, sp.serial, ev.message,
                          ev.conditions)

    def _killed(self, sp: SimPod, serial: int, message: str, conditions: list[dict[str, str]]) -> None:
        if not self.sim.pods.current(sp) or sp.serial != serial:
            return
        self.fail_pod(sp, "Evicted", message)
        if conditions and self.sim.pods.current(sp):
            self.sim.server.update_pod_status(sp.pod, cause=Cause.KUBELET, conditions=list(conditions))

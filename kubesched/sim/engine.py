"""The discrete-event engine: a virtual clock, a heap of timed events, and the wiring of the drivers.

One `ClusterState` is the cluster; the `SimulatedAPIServer` is the only way anything changes it; every
simulated component is a driver in its own module that acts through the server and learns from the
state's typed events:

- the scheduler (`kubesched.scheduler`) places pods from its queue, binding and preempting through the
  server; the engine drains its queue before the clock moves on;
- kubelet.py: pods start after the startup delay, terminate gracefully, get OOM-killed, are evicted under
  node pressure; node_usage.py: what they use; metrics.py: the metrics pipeline consumers read;
- controller_manager.py (controllers.py): workload controllers; trace_pods.py: pods from traces;
- node_lifecycle.py: nodes, cordon, drain, pressure taints; disruption.py: PDB status; podgc.py;
- descheduling.py: the descheduler every interval; recorder.py: what a run measures; gpu_allocation.py:
  GPU allocation against arrived GPU demand (report.gpuAllocation).

Events at one instant run in a fixed order (scenario events, pod lifecycle, usage, metrics, kubelet,
descheduler, recording); the same scenario and seed give the same run.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from kubesched.api.snapshot import FrozenHeap, Snapshot, gc_frozen, load_snapshot, parse_objects
from kubesched.client.simulated import SimulatedAPIServer
from kubesched.cluster.events import EventType
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import DeschedulerPolicy, parse_descheduler_policy
from kubesched.config.scheduler_config import SchedulerConfig, default_config, parse_scheduler_config
from kubesched.descheduler.registry import default_registry
from kubesched.kubelet.kubelet_config import default_kubelet_config, parse_kubelet_config
from kubesched.scheduler.framework import SchedulerServices
from kubesched.scheduler.scheduler import Outcome, Scheduler
from kubesched.sim.context import (
    ORDER_DESCHEDULER,
    ORDER_KUBELET,
    ORDER_POD,
    ORDER_RECORD,
    ORDER_SAMPLE,
    ORDER_SCENARIO,
    ORDER_USAGE,
    ORDER_WAKE,
)
from kubesched.sim.controller_manager import ControllerManager
from kubesched.sim.descheduling import DeschedulerDriver
from kubesched.sim.disruption import DisruptionController
from kubesched.sim.gangs import GangDriver
from kubesched.sim.gpu_allocation import GpuAllocationRecorder
from kubesched.sim.kubelet import Kubelets
from kubesched.sim.metrics import MetricsDriver
from kubesched.sim.node_lifecycle import NodeLifecycle
from kubesched.sim.node_usage import ResourceUsage
from kubesched.sim.podgc import PodGC
from kubesched.sim.pods import PodRegistry, SimPod
from kubesched.sim.recorder import Recorder, Recording
from kubesched.sim.replay import Replay
from kubesched.sim.scenario import ComponentConfig, DeschedulerSpec, Scenario, VariantSpec
from kubesched.sim.trace_pods import TracePods

# Pods left unschedulable this long are retried without any event (upstream's periodic flush).
MAX_IN_UNSCHEDULABLE = 300.0
# Net new GC-tracked objects after which the run collects reference cycles (see gc_frozen).
GC_COLLECT_AFTER = 2_000_000
# Scheduling objects of the scheduler-plugins (gangs, quotas, NUMA topology) the cluster starts with.
SCHEDULING_KINDS = ("PodGroup", "ElasticQuota", "NodeResourceTopology")


@dataclasses.dataclass(slots=True)
class RunResult:
    scenario: str
    variant: str
    recorder: Recorder
    node_names: list[str]
    node_alloc_cpu: np.ndarray
    node_alloc_mem: np.ndarray
    descheduler_cycles: int
    end: float
    notes: list[str]
    gangs: dict[str, Any] = dataclasses.field(default_factory=dict)  # gangs.py: GangDriver.result
    gpu: dict[str, Any] | None = None  # GPU allocation / fragmentation by arrived demand (report.gpuAllocation)


class Engine:
    """One run of a scenario under one variant."""

    def __init__(self, scenario: Scenario, variant: VariantSpec | None = None,
                 progress: Callable[[float], None] | None = None) -> None:
        self.scenario = self.s = scenario
        self.variant = variant or dataclasses.replace(_NO_VARIANT)
        self.progress = progress
        self.t = 0.0
        self.epoch = scenario.start.timestamp()
        self._heap: list[tuple[float, int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._wakes: set[float] = set()
        self.notes: list[str] = []
        self._load_components()

        self.cluster = ClusterState()
        self.server = SimulatedAPIServer(self.cluster, self.clock, scenario.seed, where=scenario.path)
        self.rec = Recorder(scenario.report.record_interval, scenario.report.hot_threshold)
        self.pods = PodRegistry(self)
        self.usage = ResourceUsage(self, self.kubelet_config)
        self.kubelets = Kubelets(self, self.usage, self.kubelet_config)
        self.metrics = MetricsDriver(self, self.usage)
        self.disruption = DisruptionController(self)
        self.nodes = NodeLifecycle(self, self.disruption.sync)
        self.controllers = ControllerManager(self)
        self.podgc = PodGC(self)
        self.traces = TracePods(self, self.controllers)
        self.cluster.subscribe(self.usage.on_event, kinds=("Node",))
        self.kubelets.on_conditions = self.nodes.set_pressure
        self.pods.on_register.append(self.usage.assign_identity)
        self.pods.on_register.append(self.disruption.pod_registered)
        self._build()

    # ------------------------------------------------------------ configuration

    def _load_components(self) -> None:
        v, s = self.variant, self.s
        src: ComponentConfig | None = v.scheduler or s.scheduler
        self.sched_config: SchedulerConfig = parse_scheduler_config(src.raw, src.source) if src else default_config()
        self.desched: DeschedulerSpec | None = v.descheduler if v.descheduler_set else s.descheduler
        self.policy: DeschedulerPolicy | None = (
            parse_descheduler_policy(self.desched.policy.raw, self.desched.policy.source, default_registry())
            if self.desched is not None else None)
        kcfg = v.kubelet or s.kubelet.config
        self.kubelet_config = parse_kubelet_config(kcfg.raw, kcfg.source) if kcfg else default_kubelet_config()

    def now_dt(self) -> datetime:
        return datetime.fromtimestamp(self.epoch + self.t, UTC)

    def clock(self) -> float:
        return self.epoch + self.t

    # ------------------------------------------------------------ the cluster at the start

    def _build(self) -> None:
        s = self.s
        snap = load_snapshot(s.cluster.snapshot) if s.cluster.snapshot else Snapshot()
        self.snapshot = snap
        extra = parse_objects(list(s.cluster.objects), s.path)
        self.nodes.initial_nodes(snap.nodes)
        for group in (snap, extra):
            for obj in (*group.namespaces, *group.priority_classes, *group.pdbs, *group.pvcs, *group.workloads,
                        *(o for o in group.others if o.kind in SCHEDULING_KINDS)):
                self.cluster.add(obj)
        for o in snap.others:
            if getattr(o, "kind", "") in ("NodeMetrics", "PodMetrics"):
                self.usage.note_snapshot_metrics(o.raw)
        # The scheduler, after the nodes and before any pod: pods reach its queue through its event handler.
        self.sched = Scheduler(self.cluster, self.sched_config, seed=s.seed, clock=self.clock,
                               services=SchedulerServices(start=s.start, snapshot=snap,
                                                          load_watcher=self.metrics.load_watcher,
                                                          metrics=self.metrics.koordlet_feed),
                               client=self.server, tie_break=s.tie_break)
        self.gpu_recorder = (GpuAllocationRecorder(self.cluster, s.report.gpu_fragmentation)
                             if s.report.gpu_allocation else None)
        # koord-scheduler's LoadAwareScheduling reads koordlet's NodeMetric, reported every minute.
        self._koord_plugins = [p for fwk in self.sched.frameworks.values() for p in fwk.plugins.values()
                               if getattr(p, "name", "") == "LoadAwareScheduling"]
        # Gangs: PodGroups for labelled workloads (before their pods), members that work only together.
        self.gangs = GangDriver(self, self.kubelets.succeed_pod)
        self.kubelets.holds_work = self.gangs.holds
        # The simulation's pod records first, then the drivers that react to pods, in this order.
        self.cluster.subscribe(self.pods.on_event, kinds=("Pod",))
        updated, deleted, bound = EventType.UPDATED, EventType.DELETED, EventType.BOUND
        self.pods.watch(self.usage.pod_changed, updated, deleted)
        self.pods.watch(self.kubelets.pod_changed, bound, updated, deleted)
        self.pods.watch(self.controllers.pod_changed, updated, deleted)
        self.pods.watch(self.podgc.pod_changed, updated)
        self.pods.watch(self.disruption.pod_changed, bound, updated, deleted)
        self.recording = Recording(self, self.usage, self.traces, lambda: len(self.sched.queue))
        self.pods.watch(self.recording.pod_changed, bound, updated)
        self.cluster.subscribe(self.kubelets.node_removed, kinds=("Node",), types=(deleted,))
        self.cluster.subscribe(self.podgc.on_event, kinds=("Node",), types=(deleted,))
        self.cluster.subscribe(self.controllers.on_event, kinds=("Node",), types=(EventType.ADDED, EventType.DELETED))
        self.cluster.subscribe(self.disruption.on_event, kinds=("PodDisruptionBudget",))
        self.controllers.start_bound = self._start_bound
        # A replayed recording takes over the snapshot pods (and controllers) of the workloads it recorded.
        self.replay = Replay(self, self.controllers, s.replay, snap) if s.replay is not None else None
        if self.replay is not None:
            self.controllers.adopt_snapshot(snap, self.kubelets.start_pod, self.replay.pod_keys,
                                            self.replay.workloads)
            self.replay.start()
        else:
            self.controllers.adopt_snapshot(snap, self.kubelets.start_pod)
        self.controllers.from_scenario()
        for pt in s.pod_traces:
            self.traces.schedule(pt)
        self.descheduler = (DeschedulerDriver(self, self.policy, self.desched.interval, self.sched_config, self.usage,
                                              self.metrics, self.disruption)
                            if self.policy is not None and self.desched is not None else None)

    def _start_bound(self, sp: SimPod) -> None:
        """A pod created bound (spec.nodeName): its kubelet starts it after the startup delay."""
        self.pods.set_node(sp, sp.pod.node_name)
        sp.bound_at = self.t
        self.push(self.t + self.s.startup_delay, ORDER_POD, self.kubelets.start_pod, sp, sp.serial)

    # ------------------------------------------------------------ scenario events

    def _scenario_event(self, ev: Any) -> None:
        p = ev.params
        if ev.action == "scale":
            self.controllers.scale(p["workload"], p["replicas"])
            self.rec.event(self.t, "scale", workload=p["workload"], replicas=p["replicas"])
        elif ev.action == "addNodes":
            self.nodes.add_nodes(p["template"], p["count"])
        elif ev.action == "setUsage":
            self.usage.set_usage(p["rule"])
            self.rec.event(self.t, "setUsage", rule=p["rule"].where)
        else:
            names = list(p["nodes"])
            if p.get("template"):
                prefix = f"{p['template']}-"
                names = sorted((n for n in self.cluster.nodes if n.startswith(prefix)),
                               key=lambda n: int(n[len(prefix):]) if n[len(prefix):].isdigit() else 0)
                names = names[-p["count"]:] if ev.action == "removeNodes" else names[: p["count"]]
            for name in names:
                if name not in self.cluster.nodes:
                    self.notes.append(f"{ev.where}: node {name} does not exist at {self.t:g}s; ignored")
                    continue
                if ev.action == "removeNodes":
                    self.nodes.remove(name)
                elif ev.action == "cordon":
                    self.nodes.cordon(name, True)
                elif ev.action == "uncordon":
                    self.nodes.cordon(name, False)
                else:
                    self.nodes.drain(name)

    # ------------------------------------------------------------ periodic work

    def _usage_step(self) -> None:
        u = self.usage
        u.step()
        live, down, mem = u.compute()
        self.kubelets.check_oom(live, down, mem)
        u.aggregate(live)
        self.kubelets.check_system_oom()
        self.push(self.t + self.s.usage_step, ORDER_USAGE, self._usage_step)

    def _record(self) -> None:
        # The scheduler runs continuously: what is pending at this instant has been tried.
        self._schedule()
        self.recording.record()
        if self.progress is not None:
            self.progress(min(1.0, self.t / self.s.duration))
        nxt = self.t + self.rec.interval
        if nxt <= self.s.duration + 1e-9:
            self.push(nxt, ORDER_RECORD, self._record)

    # ------------------------------------------------------------ the loop

    def push(self, t: float, order: int, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, order, self._seq, fn, args))

    def _wake(self, t: float) -> None:
        t = max(t, self.t)
        if t in self._wakes or t > self.s.duration:
            return
        self._wakes.add(t)
        self.push(t, ORDER_WAKE, self._woken, t)

    def _woken(self, t: float) -> None:
        self._wakes.discard(t)

    def _schedule(self) -> None:
        q = self.sched.queue
        while True:
            for late in self.sched.settle_permits():  # Permit timers due now; pods allowed or rejected
                self._scheduled(late)
            qpi = q.pop()
            if qpi is None:
                break
            self._scheduled(self.sched.schedule_one(qpi))
        nxt = q.next_backoff_expiry()
        if nxt is not None:
            self._wake(nxt - self.epoch)
        deadline = self.sched.waiting_pods.next_deadline()
        if deadline is not None:
            self._wake(deadline - self.epoch)
        if q.unschedulable_since:
            oldest = next(iter(q.unschedulable_since.values()))
            self._wake(oldest - self.epoch + MAX_IN_UNSCHEDULABLE + 0.001)

    def _scheduled(self, out: Outcome) -> None:
        self.gangs.outcome(out)
        if out.node is None and out.waiting_on is None:
            self.rec.failed_attempts += 1
            sp = self.pods.get(out.pod.key)
            if sp is not None and not out.nominated_node:
                self.traces.unschedulable(sp, out.reason)

    def run(self) -> RunResult:
        s = self.s
        for ev in s.events:
            self.push(ev.at, ORDER_SCENARIO, self._scenario_event, ev)
        if s.usage_step > 0:
            self.push(0.0, ORDER_USAGE, self._usage_step)
        if s.metrics.sampling_interval > 0:
            self.push(0.0, ORDER_SAMPLE, self.metrics.sample)
        if self._koord_plugins:
            self.push(0.0, ORDER_SAMPLE, self.metrics.koordlet_report)
        if self.descheduler is not None:
            assert self.policy is not None
            if self.policy.kubernetes_metrics_enabled:
                self.push(0.0, ORDER_SAMPLE, self.metrics.collector_poll)
            # Upstream runs a cycle at start, then every interval.
            self.push(0.0, ORDER_DESCHEDULER, self.descheduler.cycle)
        if s.kubelet.housekeeping_interval > 0:
            self.push(0.0, ORDER_KUBELET, self.kubelets.tick)
        self.push(0.0, ORDER_RECORD, self._record)
        # The objects built so far live through the run; the run replaces its objects all the time and makes
        # almost no reference cycles, so the heap is collected only once it has grown by 2 M objects.
        with gc_frozen(collect_after=GC_COLLECT_AFTER) as heap:
            self._loop(heap)
        self.rec.node_names = list(self.usage.node_names)
        cycles = self.descheduler.cycles if self.descheduler is not None else 0
        return RunResult(s.name, self.variant.name, self.rec, list(self.usage.node_names),
                         self.usage.col("alloc_cpu").copy(), self.usage.col("alloc_mem").copy(), cycles, self.t,
                         self.notes, self.gangs.result(self.t),
                         self.gpu_recorder.finish() if self.gpu_recorder is not None else None)

    def _loop(self, heap: FrozenHeap) -> None:
        s = self.s
        dirty = False
        while self._heap:
            t_next = self._heap[0][0]
            if dirty and t_next > self.t:
                self._schedule()
                dirty = False
                heap.maybe_collect()
                continue
            if t_next > s.duration:
                break
            t, _, _, fn, args = heapq.heappop(self._heap)
            self.t = t
            fn(*args)
            dirty = True
        if dirty:
            self._schedule()
        self.t = min(self.t, s.duration)
        if not self.rec.times or self.rec.times[-1] < s.duration - 1e-9:
            self.t = s.duration
            self._record()


_NO_VARIANT = VariantSpec(name="default")

"""The discrete-event engine: a heap of timed events on a virtual clock driving one ClusterState.

Pods arrive (controllers, traces) → the scheduling queue → bound (the scheduler's own bind through
`ClusterState.apply`) → running after the startup delay (the kubelet admits them first) → usage follows
the model every usage step → each node's kubelet eviction manager runs every housekeeping interval on
Summary stats synthesized from that usage (and a container over its memory limit is OOM-killed) →
pressure conditions and taints feed the scheduler → the descheduler runs every interval on what the
metrics pipeline reports → an evicted pod terminates after its grace period while its controller
replaces it → the scheduler places the replacement. No real time passes; the same scenario and seed
give the same run.

Events at one instant run in a fixed order (scenario events, pod lifecycle, usage, metrics, kubelet,
descheduler, recording) and the scheduler drains its queue before the clock moves on.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from collections.abc import Callable
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api.defaulting import admit_pod, default_workload
from kubesched.api.objects import (
    Node,
    ObjectMeta,
    Pod,
    PriorityClass,
    parse_node,
    parse_pod,
    parse_workload,
)
from kubesched.api.resources import pod_limits, scheduler_request
from kubesched.api.snapshot import Snapshot, load_snapshot, parse_objects
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.cluster.state import ClusterState
from kubesched.config.scheduler_config import SchedulerConfig, default_config, parse_scheduler_config
from kubesched.errors import InputError
from kubesched.metrics.base import MetricsFeed
from kubesched.sim import controllers as ctl
from kubesched.sim.controllers import Controller, SimPod
from kubesched.sim.loops import Binding, Eviction
from kubesched.sim.metrics import LazyPodMetrics, MetricsPipeline, Sample, SimMetricsSource, smooth
from kubesched.sim.recorder import Recorder
from kubesched.sim.scenario import (
    ComponentConfig,
    DeschedulerSpec,
    Match,
    ModelSpec,
    Scenario,
    UsageRule,
    VariantSpec,
)
from kubesched.sim.traces import TracePod, load_node_table, load_pod_trace, load_usage_trace, pod_trace_manifest
from kubesched.sim.units import stable_hash64
from kubesched.sim.usage import UsageTable

ORDER_SCENARIO, ORDER_POD, ORDER_USAGE, ORDER_SAMPLE, ORDER_KUBELET, ORDER_DESCHEDULER, ORDER_WAKE, ORDER_RECORD = range(8)

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
PRESSURE_TAINTS = ("node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure",
                   "node.kubernetes.io/pid-pressure")
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
CRASH_LOOP_INITIAL = 10.0
CRASH_LOOP_MAX = 300.0
TERMINATED_POD_GC_THRESHOLD = 12500
DRAIN_RETRY = 5.0
MAX_IN_UNSCHEDULABLE = 300.0
SAFE_CACHE_KEYS = ("sched_request", "non_zero", "host_ports", "sim_limits", "sim_request")


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


class Engine:
    """One run of a scenario under one variant."""

    def __init__(self, scenario: Scenario, variant: VariantSpec | None = None,
                 progress: Callable[[float], None] | None = None) -> None:
        self.s = scenario
        self.variant = variant or dataclasses.replace(_NO_VARIANT)
        self.progress = progress
        self.t = 0.0
        self.epoch = scenario.start.timestamp()
        self.seed = scenario.seed
        self.name_rng = random.Random(stable_hash64("names", scenario.seed))
        self._uid_counter = 0
        self._heap: list[tuple[float, int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._wakes: set[float] = set()
        self._internal = 0
        self.notes: list[str] = []

        self.cluster = ClusterState()
        self.pods: dict[str, SimPod] = {}
        self.serial: dict[str, int] = {}
        self._serial_next = 0
        self.controllers: list[Controller] = []
        self.by_workload: dict[str, Controller] = {}
        self._protos: dict[Any, tuple[Pod, dict[str, Any]]] = {}
        self._terminated: list[str] = []
        self._killing: set[str] = set()

        # Nodes by a stable id (rows of every per-node array and of the recorded series).
        self.node_ids: dict[str, int] = {}
        self.node_names: list[str] = []
        self.node_present = np.zeros(0, dtype=bool)
        self.alloc_cpu = np.zeros(0)
        self.alloc_mem = np.zeros(0)
        self.cap_cpu = np.zeros(0)
        self.cap_mem = np.zeros(0)
        self.thr_mem = np.zeros(0)
        self.thr_alloc = np.zeros(0)
        self.node_cpu = np.zeros(0)
        self.node_mem = np.zeros(0)
        self._template_next: dict[str, int] = {t.name: 0 for t in scenario.cluster.templates}
        self._templates = {t.name: t for t in scenario.cluster.templates}

        # Pod slots: the usage of running pods.
        cap = 1024
        self.slot_row = np.zeros(cap, dtype=np.int64)
        self.slot_node = np.full(cap, -1, dtype=np.int64)
        self.slot_serial = np.full(cap, -1, dtype=np.int64)
        self.slot_live = np.zeros(cap, dtype=bool)
        self.slot_lim_cpu = np.full(cap, np.inf)
        self.slot_lim_mem = np.full(cap, np.inf)
        self.slot_cpu = np.zeros(cap)
        self.slot_mem = np.zeros(cap)
        self.slot_down = np.full(cap, -1.0)
        self.slot_pod: list[SimPod | None] = [None] * cap
        self._free_slots: list[int] = list(range(cap - 1, -1, -1))
        self._usage_dirty = True
        self._usage_version = 0

        self.rec = Recorder(scenario.report.record_interval, scenario.report.hot_threshold)
        self.usage = UsageTable(scenario.seed, self.epoch, scenario.usage_step or 60.0)
        self._usage_rules: list[UsageRule] = list(scenario.usage_rules)
        self._trace_grids: dict[int, int] = {}
        self._snapshot_usage: dict[str, tuple[float, float]] = {}
        self._arrived: dict[str, float] = {}
        self._trace_resources: list[str] = []
        self.descheduler_cycles = 0
        self.ema_cpu = np.zeros(0)
        self.ema_mem = np.zeros(0)
        self.ema_seen = np.zeros(0, dtype=bool)
        self._row_map_gen = -1
        self._poll_cache: tuple[Any, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._descheduler: Any = None
        self._own_rules: dict[str, list[UsageRule]] = {}
        self._trace_shape: Any = None
        self._fresh_rows: list[int] = []
        self._drop_workloads = {f"PodTrace/{pt.name}" for pt in scenario.pod_traces if pt.drop_unschedulable}
        self._row_of_nid = np.zeros(0, dtype=np.int64)

        self._load_components()
        self._build_cluster()
        self._build_usage_traces()

    # ------------------------------------------------------------ configuration

    def _load_components(self) -> None:
        from kubesched.config.kubelet_config import default_kubelet_config, parse_kubelet_config
        from kubesched.scheduler.scheduler import Scheduler

        v = self.variant
        sched_cfg_src: ComponentConfig | None = v.scheduler or self.s.scheduler
        self.sched_config: SchedulerConfig = (parse_scheduler_config(sched_cfg_src.raw, sched_cfg_src.source)
                                              if sched_cfg_src else default_config())
        self.desched: DeschedulerSpec | None = v.descheduler if v.descheduler_set else self.s.descheduler
        self.policy = None
        if self.desched is not None:
            from kubesched.config.descheduler_policy import parse_descheduler_policy

            self.policy = parse_descheduler_policy(self.desched.policy.raw, self.desched.policy.source)
        names = {n for prof in (self.policy.profiles if self.policy else []) for ps in prof.plugins.values()
                 for n in ps.enabled}
        self._policy_wants_koordlet = bool(names & {"LowNodeLoad"})
        kcfg = v.kubelet or self.s.kubelet.config
        self.kubelet_config = parse_kubelet_config(kcfg.raw, kcfg.source) if kcfg else default_kubelet_config()
        self.kubelets: dict[int, Any] = {}
        self._sched_cls = Scheduler

    def now_dt(self) -> datetime:
        return datetime.fromtimestamp(self.epoch + self.t, UTC)

    def clock(self) -> float:
        return self.epoch + self.t

    # ------------------------------------------------------------ the cluster at the start

    def _build_cluster(self) -> None:
        s = self.s
        snap = load_snapshot(s.cluster.snapshot) if s.cluster.snapshot else Snapshot()
        self.snapshot = snap
        extra = parse_objects([o for o in s.cluster.objects], s.path)
        for n in snap.nodes:
            self._add_node(n, initial=True)
        for t in s.cluster.templates:
            for _ in range(t.count):
                self._add_node(self._node_from_template(t.name), initial=True)
        if s.cluster.node_table is not None:
            for raw in load_node_table(s.cluster.node_table):
                try:
                    node = parse_node(raw)
                except InputError as e:
                    raise e.located(file=s.cluster.node_table.file) from None
                self._add_node(node, initial=True)
        for group in (snap, extra):
            for ns in group.namespaces:
                self.cluster.add(ns)
            for pc in group.priority_classes:
                self.cluster.add(pc)
            for pdb in group.pdbs:
                self.cluster.add(pdb)
            for pvc in group.pvcs:
                self.cluster.add(pvc)
            for w in group.workloads:
                self.cluster.add(w)
        for o in snap.others:
            if getattr(o, "kind", "") in ("NodeMetrics", "PodMetrics"):
                self._note_snapshot_metrics(o.raw)
        self._load_sources()
        # The scheduler, after the nodes and before any pod, so its queue sees every pod.
        self.sched = self._sched_cls(self.cluster, self.sched_config, seed=self.seed, clock=self.clock,
                                     extra={"now": self.s.start, "snapshot": snap,
                                            "load_watcher": self.watcher_source, "metrics": self.koordlet_feed})
        # koord-scheduler's LoadAwareScheduling reads koordlet's NodeMetric, reported every minute.
        self._koord_plugins = [p for fwk in self.sched.frameworks.values() for p in fwk.plugins.values()
                               if getattr(p, "name", "") == "LoadAwareScheduling"]
        self.cluster.subscribe(self._on_cluster_event)
        self._snapshot_pods(snap)
        self._workload_controllers()

    def _node_from_template(self, name: str) -> Node:
        t = self._templates[name]
        i = self._template_next[name]
        self._template_next[name] = i + 1
        raw = _deepcopy(t.node)
        meta = raw.setdefault("metadata", {})
        node_name = f"{name}-{i}"
        meta["name"] = node_name
        meta.setdefault("labels", {})["kubernetes.io/hostname"] = node_name
        meta.setdefault("uid", self.new_uid(f"Node/{node_name}"))
        status = raw.setdefault("status", {})
        if not status.get("conditions"):
            status["conditions"] = [{"type": "Ready", "status": "True"}]
        return parse_node(raw)

    def _add_node(self, node: Node, initial: bool = False) -> None:
        self.cluster.add(node)
        nid = self.node_ids.get(node.name)
        if nid is None:
            nid = len(self.node_names)
            self.node_ids[node.name] = nid
            self.node_names.append(node.name)
            for name in ("node_present", "alloc_cpu", "alloc_mem", "cap_cpu", "cap_mem", "thr_mem", "thr_alloc",
                         "node_cpu", "node_mem"):
                old = getattr(self, name)
                new = np.zeros(nid + 1, dtype=old.dtype)
                new[:nid] = old
                setattr(self, name, new)
        self.node_present[nid] = True
        info = self.cluster.node_info_by_name[node.name]
        self.alloc_cpu[nid] = info.allocatable.get("cpu", 0)
        self.alloc_mem[nid] = info.allocatable.get("memory", 0)
        cap = node.capacity or node.allocatable
        self.cap_cpu[nid] = float(cap.get("cpu", Fraction(0)) * 1000)
        self.cap_mem[nid] = float(cap.get("memory", Fraction(0)))
        self.thr_mem[nid], self.thr_alloc[nid] = self._memory_thresholds(nid)
        self._usage_dirty = True
        if not initial:
            self.rec.event(self.t, "nodeAdded", node=node.name)
            for c in list(self.controllers):
                c.node_added(node)

    def _memory_thresholds(self, nid: int) -> tuple[float, float]:
        """The largest memory.available / allocatableMemory.available threshold in bytes (plus minimum
        reclaim): below it the node's eviction manager must look; above it nothing can happen."""
        out = [0.0, 0.0]
        for th in self.kubelet_config.thresholds:
            which = {"memory.available": 0, "allocatableMemory.available": 1}.get(th.signal)
            if which is None:
                continue
            cap = self.cap_mem[nid] if which == 0 else self.alloc_mem[nid]
            v = th.value
            amount = float(v.quantity.value) if v.quantity is not None else float(v.percentage) * cap
            if th.min_reclaim is not None:
                mr = th.min_reclaim
                amount += float(mr.quantity.value) if mr.quantity is not None else float(mr.percentage) * cap
            out[which] = max(out[which], amount)
        return out[0], out[1]

    def node_objects(self) -> list[Node]:
        return list(self.cluster.nodes.values())

    # ------------------------------------------------------------ load-aware sources

    def _load_sources(self) -> None:
        """The pipeline and what load-aware components read of it, handed to the scheduler as its Handle's
        services: Trimaran's collectors poll `load_watcher` every 30 s of the scheduler clock;
        LoadAwareScheduling asks the `metrics` feed, which each koordlet report replaces."""
        ms = self.s.metrics
        horizon = max(v.window + v.delay for v in (ms.default, ms.metrics_server, ms.load_watcher, ms.koordlet))
        self.pipeline = MetricsPipeline(ms.sampling_interval, horizon)
        self.watcher_source = SimMetricsSource(self.pipeline, ms.load_watcher, self.epoch, self._node_info_list,
                                               None, "load-watcher", watcher_form=True)
        self.koordlet_source = SimMetricsSource(self.pipeline, ms.koordlet, self.epoch, self._node_info_list,
                                                self._pod_info_list, "koordlet", watcher_form=False)
        self.koordlet_feed = MetricsFeed()

    def _koordlet_report(self) -> None:
        self.koordlet_feed.set_metrics(self.koordlet_source.fetch(self.now_dt()))
        self._push(self.t + self.s.metrics.watcher_refresh, ORDER_SAMPLE, self._koordlet_report)

    def _node_info_list(self) -> list[tuple[int, str, int, int]]:
        return [(nid, name, int(self.cap_cpu[nid]), int(self.cap_mem[nid]))
                for name, nid in self.node_ids.items() if self.node_present[nid]]

    def _pod_info_list(self) -> list[tuple[str, str, int, int]]:
        out = []
        for slot in np.flatnonzero(self.slot_live):
            sp = self.slot_pod[int(slot)]
            if sp is not None:
                out.append((sp.key, sp.node, int(slot), int(self.slot_serial[slot])))
        return out

    # ------------------------------------------------------------ ids and names

    def new_uid(self, name: str) -> str:
        self._uid_counter += 1
        h = f"{stable_hash64(self.seed, name, self._uid_counter):016x}{stable_hash64(name, self._uid_counter):016x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def random_suffix(self) -> str:
        choice = self.name_rng.choice
        return "".join(choice(ctl.ALPHANUMS) for _ in range(5))

    # ------------------------------------------------------------ workloads

    def _priority_classes(self) -> dict[str, PriorityClass]:
        return self.cluster.priority_classes

    def _snapshot_pods(self, snap: Snapshot) -> None:
        """Snapshot pods start as they are: bound ones running, the others pending. Their controllers
        (from the snapshot, the scenario, or implicit) adopt them."""
        snap_ctrl: dict[tuple[str, str, str], Controller] = {}
        for o in snap.others:
            kind = o.kind
            if kind in ("ReplicaSet", "StatefulSet", "DaemonSet", "Job") and o.meta is not None:
                owners = (o.raw.get("metadata") or {}).get("ownerReferences") or []
                top = f"{kind}/{o.meta.namespace}/{o.meta.name}"
                for ow in owners:
                    if isinstance(ow, dict) and ow.get("controller") and ow.get("kind") == "Deployment":
                        top = f"Deployment/{o.meta.namespace}/{ow.get('name')}"
                c = self._make_controller(o.raw, top, 600.0)
                snap_ctrl[(kind, o.meta.namespace, o.meta.name)] = c
        implicit: dict[tuple[str, str, str], ctl.ImplicitController] = {}
        for p in snap.pods:
            ref = p.controller_ref()
            owner: Controller | None = None
            if ref is not None:
                owner = snap_ctrl.get((ref.kind, p.namespace, ref.name))
                if owner is None:
                    k = (ref.kind, p.namespace, ref.name)
                    if k not in implicit:
                        implicit[k] = ctl.ImplicitController(self, ref.kind, p.namespace, ref.name, ref.uid, p.raw,
                                                             f"{ref.kind}/{p.namespace}/{ref.name}")
                        self.controllers.append(implicit[k])
                    owner = implicit[k]
            workload = owner.workload if owner is not None else f"Pod/{p.key}"
            ordinal = len(owner.pods) if owner is not None else 0
            if isinstance(owner, ctl.StatefulSetController):
                try:
                    ordinal = int(p.name.rsplit("-", 1)[1])
                except (IndexError, ValueError):
                    pass
            identity = owner.identity(ordinal) if owner is not None else workload
            if isinstance(owner, ctl.DaemonSetController) or (isinstance(owner, ctl.ImplicitController) and owner.daemon):
                identity = f"{workload}@{p.node_name}"
            sp = self._register(p, owner, identity, ordinal, None, workload)
            if owner is not None:
                owner.adopt(sp)
            self.cluster.add(p)
            if p.node_name and not p.is_terminal:
                sp.node = p.node_name
                sp.bound_at = 0.0
                self._push(0.0, ORDER_POD, self._start_pod, sp, self.serial[sp.key])
            elif p.is_terminal:
                sp.phase = p.phase
        for c in snap_ctrl.values():
            self.controllers.append(c)
            self._push(0.0, ORDER_SCENARIO, c.start)

    def _make_controller(self, obj: dict[str, Any], workload: str, job_duration: float) -> Controller:
        kind = obj.get("kind")
        if kind == "Deployment":
            d = ctl.DeploymentController(self, obj, workload)
            self.cluster.add(parse_workload(d.rs_object, "ReplicaSet"))
            self.by_workload[workload] = d
            return d
        if kind == "ReplicaSet":
            c: Controller = ctl.ReplicaSetController(self, obj, workload)
        elif kind == "StatefulSet":
            c = ctl.StatefulSetController(self, obj, workload)
        elif kind == "DaemonSet":
            c = ctl.DaemonSetController(self, obj, workload)
        elif kind == "Job":
            c = ctl.JobController(self, obj, workload, job_duration)
        else:
            c = ctl.BarePodController(self, obj, workload)
        self.by_workload.setdefault(workload, c)
        return c

    def _workload_controllers(self) -> None:
        for w in self.s.workloads:
            try:
                obj = default_workload(w.manifest, w.where)
                if obj.get("kind") in ("ReplicaSet", "StatefulSet"):
                    self.cluster.add(parse_workload(obj, obj["kind"]))
            except InputError as e:
                raise e.located(file=self.s.path) from None
            c = self._make_controller(obj, w.key, w.job_duration)
            self.controllers.append(c)
            self._push(0.0, ORDER_SCENARIO, self._start_controller, c)
        for pt in self.s.pod_traces:
            self._schedule_trace(pt)

    def _start_controller(self, c: Controller) -> None:
        try:
            c.start()
        except InputError as e:
            raise e.located(file=self.s.path) from None

    # ------------------------------------------------------------ pods

    def _register(self, pod: Pod, owner: Controller | None, identity: str, ordinal: int, replaces: str | None,
                  workload: str) -> SimPod:
        sp = SimPod(key=pod.key, pod=pod, owner=owner, workload=workload, identity=identity, ordinal=ordinal,
                    created=self.t, replaces=replaces)
        if pod.key in self.pods and not self.pods[pod.key].gone:
            raise InputError(f"two pods named {pod.key}", obj=f"Pod {pod.key}")
        self.pods[pod.key] = sp
        self._serial_next += 1
        self.serial[pod.key] = self._serial_next
        sp.usage_row = self._identity_row(sp)
        self.rec.created_pods += 1
        if replaces:
            self.rec.replaces[sp.key] = replaces
        return sp

    def create_pod(self, raw: dict[str, Any], owner: Controller | None, identity: str, ordinal: int,
                   replaces: str | None, workload: str | None = None) -> SimPod:
        """A pod a controller (or a trace) creates: admitted and defaulted by the API server, then queued."""
        meta = raw.setdefault("metadata", {})
        name = str(meta.get("name"))
        ns = str(meta.get("namespace") or "default")
        meta["namespace"] = ns
        uid = self.new_uid(f"Pod/{ns}/{name}")
        created = rfc3339(self.epoch + self.t)
        pod = self._instantiate(raw, owner, name, ns, uid, created)
        wl = owner.workload if owner is not None else (workload or identity)
        sp = self._register(pod, owner, identity, ordinal, replaces, wl)
        if owner is not None:
            owner.pods[sp.key] = sp
        self.cluster.add(pod, cause=Cause.TRACE if owner is None else Cause.CONTROLLER)
        return sp

    def _instantiate(self, raw: dict[str, Any], owner: Controller | None, name: str, ns: str, uid: str,
                     created: str) -> Pod:
        """Parse through admission once per template; later pods of the template are copies of the first."""
        key: Any = None
        if owner is None and self._trace_shape is not None:
            key = self._trace_shape
        elif owner is not None and not isinstance(owner, (ctl.StatefulSetController, ctl.BarePodController)):
            spec = raw.get("spec") or {}
            aff = spec.get("affinity") if isinstance(spec, dict) else None
            key = (owner.key, repr(aff) if isinstance(owner, (ctl.DaemonSetController, ctl.ImplicitController)) else "")
        cached = self._protos.get(key) if key is not None else None
        if cached is None:
            full = _deepcopy(raw)
            full["metadata"]["uid"] = uid
            full["metadata"]["creationTimestamp"] = created
            full["status"] = {"phase": "Pending"}
            try:
                admit_pod(full, self._priority_classes(), "spec")
                pristine = _deepcopy(full)
                pod = parse_pod(full)
            except InputError as e:
                raise e.located(file=self.s.path, obj=f"Pod {ns}/{name}") from None
            scheduler_request(pod)
            if key is not None:
                self._protos[key] = (pod, pristine)
            return pod
        proto, pristine = cached
        new_raw = dict(pristine)
        new_meta = dict(pristine["metadata"])
        new_meta.update({"name": name, "namespace": ns, "uid": uid, "creationTimestamp": created})
        new_meta["labels"] = dict(proto.meta.labels)
        new_raw["metadata"] = new_meta
        new_raw["spec"] = dict(pristine["spec"])
        new_raw["status"] = {"phase": "Pending"}
        m = proto.meta
        new_pod_meta = ObjectMeta(name=name, namespace=ns, uid=uid, labels=new_meta["labels"],
                                  annotations=dict(m.annotations), owner_references=list(m.owner_references),
                                  creation_timestamp=datetime.fromtimestamp(self.epoch + self.t, UTC),
                                  deletion_timestamp=None)
        cache = {k: proto.cache[k] for k in SAFE_CACHE_KEYS if k in proto.cache}
        return dataclasses.replace(proto, meta=new_pod_meta, raw=new_raw, node_name="", phase="Pending",
                                   nominated_node_name="", cache=cache)

    def _set_status(self, sp: SimPod, phase: str, cause: Cause = Cause.KUBELET, **fields: Any) -> None:
        sp.phase = phase
        self._update_pod(sp, sp.pod.with_status(phase=phase, **fields), cause=cause)

    def _update_pod(self, sp: SimPod, new: Pod, cause: Cause) -> None:
        sp.pod = new
        self.cluster.update(new, cause=cause)

    def _start_pod(self, sp: SimPod, serial: int) -> None:
        """The kubelet starts a bound pod: admission first (pressure conditions), then it runs."""
        if sp.gone or self.serial.get(sp.key) != serial or sp.terminating or sp.phase != "Pending" or not sp.node:
            return
        nid = self.node_ids.get(sp.node)
        if nid is None or not self.node_present[nid]:
            return
        mgr = self.kubelets.get(nid)
        if mgr is not None:
            verdict = mgr.admit(sp.pod)
            if not verdict.admit:
                self.rec.event(self.t, "admissionRejected", pod=sp.key, node=sp.node, reason=verdict.reason,
                               message=verdict.message)
                self._fail_pod(sp, verdict.reason or "Evicted", verdict.message, component="kubelet-admission")
                return
        start = rfc3339(self.epoch + self.t)
        cname = sp.pod.containers[0].name if sp.pod.containers else "main"
        self._set_status(sp, "Running", startTime=start, hostIP="", conditions=[
            {"type": "Ready", "status": "True", "lastTransitionTime": start},
            {"type": "PodScheduled", "status": "True"}],
            containerStatuses=[{"name": c.name, "ready": True, "restartCount": 0, "started": True,
                                "state": {"running": {"startedAt": start}}} for c in sp.pod.containers]
            or [{"name": cname, "ready": True, "restartCount": 0}])
        sp.started_at = self.t
        self._alloc_slot(sp, nid)
        if sp.owner is not None:
            sp.owner.pod_running(sp)
        if sp.run_seconds > 0:
            self._push(self.t + sp.run_seconds, ORDER_POD, self._succeed_pod, sp, serial)

    def _succeed_pod(self, sp: SimPod, serial: int) -> None:
        if sp.gone or self.serial.get(sp.key) != serial or sp.phase != "Running" or sp.terminating:
            return
        self._free_slot(sp)
        self._set_status(sp, "Succeeded")
        self.rec.event(self.t, "podSucceeded", pod=sp.key, node=sp.node)
        self._terminated.append(sp.key)
        if sp.owner is not None:
            sp.owner.pod_succeeded(sp)
        self._pod_gc()

    def _fail_pod(self, sp: SimPod, reason: str, message: str, component: str) -> None:
        """The pod fails where it is (kubelet eviction, admission rejection): phase Failed, not deleted."""
        if sp.gone or sp.phase in ("Succeeded", "Failed"):
            return
        self._free_slot(sp)
        self._killing.discard(sp.key)
        self._set_status(sp, "Failed", reason=reason, message=message)
        self._terminated.append(sp.key)
        if sp.owner is not None:
            sp.owner.pod_failed(sp)
        self._pod_gc()

    def _pod_gc(self) -> None:
        """PodGC: terminated pods beyond the threshold are deleted, oldest first."""
        while len(self._terminated) > TERMINATED_POD_GC_THRESHOLD:
            key = self._terminated.pop(0)
            sp = self.pods.get(key)
            if sp is not None and not sp.gone:
                self._remove_pod(sp)

    def delete_pod(self, sp: SimPod, component: str, reason: str, grace: float | None) -> None:
        """Graceful deletion (API delete or eviction): terminating now, gone after the grace period."""
        if sp.gone or sp.terminating:
            return
        if sp.phase in ("Succeeded", "Failed") or not sp.node:
            self._remove_pod(sp)
            return
        g = float(sp.pod.termination_grace_period_seconds if sp.pod.termination_grace_period_seconds is not None
                  else 30) if grace is None else float(grace)
        sp.terminating = True
        sp.deletion_at = self.t
        dt = datetime.fromtimestamp(self.epoch + self.t + g, UTC)
        self._update_pod(sp, sp.pod.marked_for_deletion(dt, int(g)), cause=Cause.CONTROLLER)
        self._push(self.t + g, ORDER_POD, self._finish_deletion, sp, self.serial[sp.key])
        if sp.owner is not None:
            sp.owner.pod_terminating(sp)

    def evict(self, sp: SimPod, component: str, reason: str, grace: float | None) -> None:
        """An eviction through the Eviction API (descheduler, drain): recorded, then a graceful deletion."""
        if sp.gone or sp.terminating:
            return
        self.rec.evictions.append(Eviction(self.t, sp.key, sp.workload, sp.node, component, reason,
                                           sp.phase in ("Succeeded", "Failed")))
        self.delete_pod(sp, component, reason, grace)

    def _finish_deletion(self, sp: SimPod, serial: int) -> None:
        if sp.gone or self.serial.get(sp.key) != serial:
            return
        self._remove_pod(sp)

    def _remove_pod(self, sp: SimPod) -> None:
        """The pod object is deleted from the cluster."""
        self._free_slot(sp)
        sp.gone = True
        cur = self.cluster.pods.get(sp.key)
        if cur is not None and cur.uid == sp.pod.uid:
            self.cluster.delete(cur, cause=Cause.API)
        self._gone(sp)

    def _gone(self, sp: SimPod) -> None:
        sp.gone = True
        self._killing.discard(sp.key)
        if self.pods.get(sp.key) is sp:
            del self.pods[sp.key]
        if sp.owner is not None:
            sp.owner.pod_gone(sp)

    # ------------------------------------------------------------ cluster events (bindings, preemption)

    def _on_cluster_event(self, ev: Event) -> None:
        if ev.kind != "Pod":
            return
        obj = ev.obj
        sp = self.pods.get(obj.key)
        if sp is None or sp.pod.uid != obj.uid:
            return
        if ev.type is not EventType.DELETED:
            sp.pod = obj
        action = ev.type
        if action is EventType.BOUND:
            sp.node = ev.node
            sp.bound_at = self.t
            latency = self.t - sp.created
            self.rec.latencies.append(latency)
            self.rec.bindings.append(Binding(self.t, sp.key, sp.workload, sp.node, sp.created))
            self._push(self.t + self.s.startup_delay, ORDER_POD, self._start_pod, sp, self.serial[sp.key])
        elif action is EventType.UNBOUND:
            sp.node = ""
            sp.bound_at = None
        elif action is EventType.DELETED and ev.cause is Cause.PREEMPTION:
            # Deleted by someone else: the scheduler's preemption deletes its victims.
            self.rec.evictions.append(Eviction(self.t, sp.key, sp.workload, sp.node, "scheduler", "Preempted"))
            self._free_slot(sp)
            self._gone(sp)

    # ------------------------------------------------------------ usage slots

    def _alloc_slot(self, sp: SimPod, nid: int) -> None:
        if not self._free_slots:
            old = len(self.slot_row)
            cap = old * 2
            for name, fill in (("slot_row", 0), ("slot_node", -1), ("slot_serial", -1), ("slot_live", False),
                               ("slot_lim_cpu", np.inf), ("slot_lim_mem", np.inf), ("slot_cpu", 0.0),
                               ("slot_mem", 0.0), ("slot_down", -1.0)):
                a = getattr(self, name)
                b = np.full(cap, fill, dtype=a.dtype)
                b[:old] = a
                setattr(self, name, b)
            self.slot_pod.extend([None] * (cap - old))
            self._free_slots = list(range(cap - 1, old - 1, -1))
        slot = self._free_slots.pop()
        sp.slot = slot
        self.slot_pod[slot] = sp
        self.slot_row[slot] = sp.usage_row
        self.slot_node[slot] = nid
        self.slot_serial[slot] = self.serial[sp.key]
        self.slot_live[slot] = True
        self.slot_down[slot] = -1.0
        lim = sp.pod.cache.get("sim_limits")
        if lim is None:
            limits = pod_limits(sp.pod)
            lim = (float(limits["cpu"] * 1000) if "cpu" in limits else np.inf,
                   float(limits["memory"]) if "memory" in limits else np.inf)
            sp.pod.cache["sim_limits"] = lim
        self.slot_lim_cpu[slot], self.slot_lim_mem[slot] = lim
        row = sp.usage_row
        if row >= 0:
            if sp.replaces is not None:
                # A new pod for the identity: a new process, whose memory starts afresh.
                self.usage.restart(row, "memory")
                self._fresh_rows.append(row)
            elif self.usage.res["cpu"].last_step[row] < 0 or self.usage.step_index < 0:
                self._fresh_rows.append(row)
        self._usage_dirty = True

    def _free_slot(self, sp: SimPod) -> None:
        slot = sp.slot
        if slot < 0:
            return
        self.slot_live[slot] = False
        self.slot_node[slot] = -1
        self.slot_serial[slot] = -1
        self.slot_pod[slot] = None
        self.slot_cpu[slot] = self.slot_mem[slot] = 0.0
        self._free_slots.append(slot)
        sp.slot = -1
        self._usage_dirty = True

    # ------------------------------------------------------------ usage identities and rules

    def _request_of(self, pod: Pod) -> tuple[float, float]:
        cached = pod.cache.get("sim_request")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        out = self._compute_request(pod)
        pod.cache["sim_request"] = out
        return out

    def _compute_request(self, pod: Pod) -> tuple[float, float]:
        req = scheduler_request(pod)
        cpu = float(req.get("cpu", 0))
        mem = float(req.get("memory", 0))
        if cpu == 0 or mem == 0:
            lim = pod_limits(pod)
            if cpu == 0:
                cpu = float(lim["cpu"] * 1000) if "cpu" in lim else 100.0
            if mem == 0:
                mem = float(lim["memory"]) if "memory" in lim else 200.0 * 1024 * 1024
        return cpu, mem

    def _rule_for(self, sp: SimPod, resource: str) -> ModelSpec | None | bool:
        """The usage model for a pod's resource: later rules win; False when no rule names it."""
        found: ModelSpec | None | bool = False
        for rule in self._rules_in_order(sp):
            spec = getattr(rule, resource)
            if spec is not None:
                found = spec
        return found

    def _rules_in_order(self, sp: SimPod) -> list[UsageRule]:
        own = self._own_rules.get(sp.workload)
        if own is None:
            own = [w.usage for w in self.s.workloads if w.usage is not None and w.key == sp.workload]
            own += [pt.usage for pt in self.s.pod_traces if pt.usage is not None
                    and sp.workload == f"PodTrace/{pt.name}"]
            self._own_rules[sp.workload] = own
        out = list(own)
        for r in self._usage_rules:
            if _matches(r.match, sp):
                out.append(r)
        return out

    def _identity_row(self, sp: SimPod) -> int:
        known = sp.identity in self.usage.index
        row = self.usage.identity(sp.identity)
        if known:
            return row
        req_cpu, req_mem = self._request_of(sp.pod)
        for resource, request in (("cpu", req_cpu), ("memory", req_mem)):
            spec = self._rule_for(sp, resource)
            if spec is not False:
                self.usage.assign(row, resource, spec if isinstance(spec, ModelSpec) else None, request)
                continue
            traced = self._trace_for(sp, resource, row)
            if traced:
                continue
            snap = self._snapshot_usage.get(sp.key)
            if snap is not None:
                value = snap[0] if resource == "cpu" else snap[1]
                self.usage.assign(row, resource, None, value)
            else:
                self.usage.assign(row, resource, None, request)
        return row

    def _build_usage_traces(self) -> None:
        self._traces: list[tuple[Any, int]] = []
        for spec in self.s.usage_traces:
            grid = load_usage_trace(spec, self.epoch, self.s.usage_step or 60.0, self.s.duration)
            self._traces.append((spec, self.usage.add_grid(grid)))

    def _trace_for(self, sp: SimPod, resource: str, row: int) -> bool:
        for spec, gid in self._traces:
            grid = self.usage.grids[gid]
            values = grid.cpu if resource == "cpu" else grid.memory
            if values is None or not grid.names:
                continue
            if spec.workload is not None:
                if spec.workload != sp.workload:
                    continue
                series = max(sp.ordinal, 0) % len(grid.names)
            else:
                idx = grid.index(sp.pod.name)
                if idx is None:
                    continue
                series = idx
            self.usage.assign_trace(row, resource, gid, series)
            return True
        return False

    def _note_snapshot_metrics(self, raw: dict[str, Any]) -> None:
        if raw.get("kind") != "PodMetrics":
            return
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        cpu = mem = 0.0
        from kubesched.api.quantity import parse_quantity

        for c in raw.get("containers") or []:
            usage = (c or {}).get("usage") or {}
            try:
                cpu += float(parse_quantity(usage.get("cpu", "0")) * 1000)
                mem += float(parse_quantity(usage.get("memory", "0")))
            except (ValueError, TypeError):
                continue
        self._snapshot_usage[key] = (cpu, mem)

    def set_usage(self, rule: UsageRule) -> None:
        """A setUsage event: the rule applies from now on, to current and future pods it matches."""
        self._usage_rules.append(rule)
        done: set[int] = set()
        for sp in list(self.pods.values()):
            if sp.usage_row in done or not _matches(rule.match, sp):
                continue
            done.add(sp.usage_row)
            req_cpu, req_mem = self._request_of(sp.pod)
            if rule.cpu is not None:
                self.usage.assign(sp.usage_row, "cpu", rule.cpu, req_cpu)
            if rule.memory is not None:
                self.usage.assign(sp.usage_row, "memory", rule.memory, req_mem)
        if done:
            self.usage.evaluate(self.t, np.array(sorted(done)))
        self._usage_dirty = True

    # ------------------------------------------------------------ usage: effective values and OOM

    def _usage_step(self) -> None:
        self._fresh_rows = []
        self.usage.evaluate(self.t)
        self._usage_dirty = True
        self._apply_usage(check_oom=True)
        self._push(self.t + self.s.usage_step, ORDER_USAGE, self._usage_step)

    def _apply_usage(self, check_oom: bool = False) -> None:
        if self._fresh_rows:
            # Identities whose pods started since the last step get their value now, all at once.
            self.usage.evaluate(self.t, np.unique(np.array(self._fresh_rows, dtype=np.int64)))
            self._fresh_rows = []
        live = np.flatnonzero(self.slot_live)
        n = len(self.node_names)
        cpu_all = self.usage.values("cpu")
        mem_all = self.usage.values("memory")
        rows = self.slot_row[live]
        cpu = np.minimum(cpu_all[rows], self.slot_lim_cpu[live])
        mem = mem_all[rows].copy()
        down = self.slot_down[live] > self.t
        cpu[down] = 0.0
        mem[down] = 0.0
        if check_oom:
            over = np.flatnonzero((mem > self.slot_lim_mem[live]) & ~down)
            for i in over:
                self._oom_kill(int(live[i]), "container", float(mem[i]))
                cpu[i] = mem[i] = 0.0
            live_ok = self.slot_live[live]
            cpu[~live_ok] = 0.0
            mem[~live_ok] = 0.0
        nodes = self.slot_node[live]
        valid = nodes >= 0
        demand = np.bincount(nodes[valid], weights=cpu[valid], minlength=n) if n else np.zeros(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(demand > self.cap_cpu, self.cap_cpu / np.maximum(demand, 1e-9), 1.0)
        if n and (factor < 1.0).any():
            cpu[valid] *= factor[nodes[valid]]
        self.slot_cpu[live] = cpu
        self.slot_mem[live] = mem
        self.node_cpu = np.bincount(nodes[valid], weights=cpu[valid], minlength=n).astype(np.float64)
        self.node_mem = np.bincount(nodes[valid], weights=mem[valid], minlength=n).astype(np.float64)
        self._usage_dirty = False
        self._usage_version += 1
        if check_oom and n:
            ws = self.node_mem + self.s.kubelet.system_reserved_memory
            for nid in np.flatnonzero((ws > self.cap_mem) & (self.cap_mem > 0) & self.node_present):
                self._system_oom(int(nid))

    def _current_usage(self) -> None:
        if self._usage_dirty:
            self._apply_usage()

    def _oom_kill(self, slot: int, scope: str, mem: float) -> None:
        """A container over its memory limit is killed; it restarts with CrashLoopBackOff (restartPolicy
        Never: the pod fails)."""
        sp = self.slot_pod[slot]
        if sp is None:
            return
        sp.restarts += 1
        self.rec.oom_kills.append({"t": self.t, "pod": sp.key, "node": sp.node, "scope": scope,
                                   "memory": int(mem), "workload": sp.workload})
        statuses = [dict(cs) for cs in sp.pod.status.get("containerStatuses") or [] if isinstance(cs, dict)]
        if statuses:
            statuses[0]["restartCount"] = sp.restarts
            statuses[0]["lastState"] = {"terminated": {"reason": "OOMKilled", "exitCode": 137}}
            self._update_pod(sp, sp.pod.with_status(containerStatuses=statuses), cause=Cause.KUBELET)
        if sp.pod.restart_policy == "Never":
            self._fail_pod(sp, "OOMKilled", "container exceeded its memory limit", component="oom")
            return
        backoff = min(CRASH_LOOP_INITIAL * (2 ** (sp.restarts - 1)), CRASH_LOOP_MAX)
        self.slot_down[slot] = self.t + backoff
        # The restarted container's memory starts afresh.
        self.usage.restart(sp.usage_row, "memory")

    def _system_oom(self, nid: int) -> None:
        """Node memory exhausted before the kubelet acted: the kernel kills the highest oom_score first."""
        from kubesched.kubelet.oom import pod_oom_score_adjust

        cap = self.cap_mem[nid]
        ws = self.node_mem[nid] + self.s.kubelet.system_reserved_memory
        slots = [int(s) for s in np.flatnonzero(self.slot_live & (self.slot_node == nid))]

        def score(slot: int) -> tuple[float, int]:
            sp = self.slot_pod[slot]
            assert sp is not None
            adj = max((v for v in pod_oom_score_adjust(sp.pod, int(cap)).values() if v is not None), default=0)
            return (self.slot_mem[slot] / cap * 1000 + adj, -slot)

        for slot in sorted(slots, key=score, reverse=True):
            if ws <= cap:
                break
            mem = float(self.slot_mem[slot])
            if mem <= 0:
                continue
            self._oom_kill(slot, "node", mem)
            self.slot_mem[slot] = self.slot_cpu[slot] = 0.0
            ws -= mem
            self.node_mem[nid] -= mem

    # ------------------------------------------------------------ metrics pipeline

    def _sample(self) -> None:
        self._current_usage()
        n = len(self.node_names)
        node_cpu = np.where(self.node_present, self.node_cpu[:n], np.nan)
        node_mem = np.where(self.node_present, self.node_mem[:n] + self.s.kubelet.system_reserved_memory, np.nan)
        last = self.pipeline.samples[-1] if self.pipeline.samples else None
        if last is not None and last.version == self._usage_version and len(last.node_cpu) == n:
            sample = Sample(self.t, last.node_cpu, last.node_mem, last.slot_cpu, last.slot_mem, last.slot_key,
                            self._usage_version)
        else:
            sample = Sample(self.t, node_cpu, node_mem, self.slot_cpu.copy(), self.slot_mem.copy(),
                            self.slot_serial.copy(), self._usage_version)
        self.pipeline.add(sample)
        self._push(self.t + self.pipeline.sampling_interval, ORDER_SAMPLE, self._sample)

    def _collector_poll(self) -> None:
        """The descheduler's MetricsCollector: smoothed node usage from metrics-server every poll."""
        nv = self.pipeline.node_view(self.s.metrics.metrics_server, self.t)
        if nv is not None:
            n = len(nv.cpu)
            if len(self.ema_cpu) < n:
                for name in ("ema_cpu", "ema_mem"):
                    a = getattr(self, name)
                    b = np.zeros(n)
                    b[: len(a)] = a
                    setattr(self, name, b)
                seen = np.zeros(n, dtype=bool)
                seen[: len(self.ema_seen)] = self.ema_seen
                self.ema_seen = seen
            cached = self._poll_cache
            if cached is None or cached[0] is not nv:
                have = ~np.isnan(nv.cpu)
                cpu = np.ceil(np.where(have, nv.cpu, 0.0))
                mem = np.ceil(np.where(have, nv.mem, 0.0))
                cached = self._poll_cache = (nv, have, cpu, mem)
            _, have, cpu, mem = cached
            seen = self.ema_seen[:n] & have
            self.ema_cpu[:n] = np.where(have, smooth(self.ema_cpu[:n], cpu, seen), self.ema_cpu[:n])
            self.ema_mem[:n] = np.where(have, smooth(self.ema_mem[:n], mem, seen), self.ema_mem[:n])
            self.ema_seen[:n] |= have
        self._push(self.t + self.s.metrics.descheduler_poll, ORDER_SAMPLE, self._collector_poll)

    def _metrics_collector(self) -> Any:
        from kubesched.descheduler.metricscollector import MetricsCollector

        nodes = {name: {"cpu": int(self.ema_cpu[nid]), "memory": int(self.ema_mem[nid])}
                 for name, nid in self.node_ids.items()
                 if self.node_present[nid] and nid < len(self.ema_seen) and self.ema_seen[nid]}
        view = self.pipeline.node_view(self.s.metrics.metrics_server, self.t)

        def locate(key: str) -> tuple[int, int] | None:
            sp = self.pods.get(key)
            if sp is None or sp.slot < 0:
                return None
            return sp.slot, self.serial[sp.key]

        return MetricsCollector.from_usage(
            nodes, LazyPodMetrics(view, locate, lambda: [k for k, sp in self.pods.items() if sp.slot >= 0]))

    # ------------------------------------------------------------ kubelet

    def _kubelet_tick(self) -> None:
        self._current_usage()
        n = len(self.node_names)
        sys_mem = self.s.kubelet.system_reserved_memory
        ws = self.node_mem[:n] + sys_mem
        avail = self.cap_mem[:n] - ws
        alloc_avail = self.alloc_mem[:n] - self.node_mem[:n]
        look = ((avail < self.thr_mem[:n]) | (alloc_avail < self.thr_alloc[:n])) & self.node_present[:n]
        for nid, mgr in self.kubelets.items():
            if mgr.node_conditions or mgr.thresholds_first_observed_at or mgr.thresholds_met:
                look[nid] = self.node_present[nid]
        for row in np.flatnonzero(look):
            self._kubelet_sync(int(row))
        self._push(self.t + self.s.kubelet.housekeeping_interval, ORDER_KUBELET, self._kubelet_tick)

    def _kubelet_sync(self, nid: int) -> None:
        from kubesched.kubelet.manager import EvictionManager
        from kubesched.kubelet.signals import (
            SYSTEM_CONTAINER_PODS,
            ContainerStats,
            MemoryStats,
            NodeStats,
            PodStats,
            Summary,
        )

        mgr = self.kubelets.get(nid)
        if mgr is None:
            mgr = EvictionManager(self.kubelet_config, clock=self.clock)
            self.kubelets[nid] = mgr
        name = self.node_names[nid]
        node = self.cluster.nodes.get(name)
        if node is None:
            return
        now = self.clock()
        slots = [int(s) for s in np.flatnonzero(self.slot_live & (self.slot_node == nid))]
        pods_stats = []
        pods = []
        for slot in slots:
            sp = self.slot_pod[slot]
            if sp is None or sp.key in self._killing:
                continue
            m = int(self.slot_mem[slot])
            cname = sp.pod.containers[0].name if sp.pod.containers else "main"
            pods_stats.append(PodStats(sp.pod.name, sp.pod.namespace, sp.pod.uid,
                                       containers=(ContainerStats(cname, memory=MemoryStats(now, None, m)),),
                                       memory=MemoryStats(now, None, m)))
            pods.append(sp.pod)
        pods_ws = int(self.node_mem[nid])
        ws = pods_ws + self.s.kubelet.system_reserved_memory
        cap = int(self.cap_mem[nid])
        alloc = int(self.alloc_mem[nid])
        summary = Summary(node=NodeStats(name, memory=MemoryStats(now, max(cap - ws, 0), ws),
                                         system_containers=(ContainerStats(SYSTEM_CONTAINER_PODS, memory=MemoryStats(
                                             now, max(alloc - pods_ws, 0), pods_ws)),)),
                          pods=tuple(pods_stats))
        before = list(mgr.node_conditions)
        result = mgr.synchronize(now, summary, pods, node)
        if list(result.conditions) != before:
            self._set_node_pressure(name, list(result.conditions))
            self.rec.event(self.t, "nodeConditions", node=name, conditions=list(result.conditions))
        for ev in result.evictions:
            sp = self.pods.get(ev.pod.key)
            if sp is None or sp.gone or sp.key in self._killing:
                continue
            self._killing.add(sp.key)
            self.rec.evictions.append(Eviction(self.t, sp.key, sp.workload, sp.node, "kubelet", ev.signal))
            self._push(self.t + ev.grace_period_seconds, ORDER_POD, self._kubelet_killed, sp, self.serial[sp.key],
                       ev.message, ev.conditions)

    def _kubelet_killed(self, sp: SimPod, serial: int, message: str, conditions: list[dict[str, str]]) -> None:
        if sp.gone or self.serial.get(sp.key) != serial:
            return
        self._fail_pod(sp, "Evicted", message, component="kubelet")
        if conditions:
            self._update_pod(sp, sp.pod.with_status(conditions=list(conditions)), cause=Cause.KUBELET)

    # ------------------------------------------------------------ node changes

    def _update_node(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        node = self.cluster.nodes.get(name)
        if node is None:
            return
        raw = _deepcopy(node.raw)
        change(raw)
        new = parse_node(raw)
        self.cluster.update(new, cause=Cause.NODE_LIFECYCLE)

    def _set_node_pressure(self, name: str, conditions: list[str]) -> None:
        """The kubelet reports pressure conditions; the node lifecycle controller keeps taints in step."""
        from kubesched.kubelet.admission import CONDITION_TAINT

        def change(raw: dict[str, Any]) -> None:
            status = raw.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if isinstance(c, dict)
                     and c.get("type") not in PRESSURE_CONDITIONS]
            for c in PRESSURE_CONDITIONS:
                conds.append({"type": c, "status": "True" if c in conditions else "False"})
            status["conditions"] = conds
            spec = raw.setdefault("spec", {})
            taints = [t for t in spec.get("taints") or [] if isinstance(t, dict) and t.get("key") not in PRESSURE_TAINTS]
            for c in conditions:
                if c in CONDITION_TAINT:
                    taints.append({"key": CONDITION_TAINT[c], "effect": "NoSchedule"})
            spec["taints"] = taints

        self._update_node(name, change)

    def _cordon(self, name: str, on: bool) -> None:
        def change(raw: dict[str, Any]) -> None:
            spec = raw.setdefault("spec", {})
            taints = [t for t in spec.get("taints") or [] if isinstance(t, dict) and t.get("key") != UNSCHEDULABLE_TAINT]
            if on:
                spec["unschedulable"] = True
                taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
            else:
                spec.pop("unschedulable", None)
            spec["taints"] = taints

        self._update_node(name, change)
        self.rec.event(self.t, "cordon" if on else "uncordon", node=name)

    def _remove_node(self, name: str) -> None:
        node = self.cluster.nodes.get(name)
        if node is None:
            return
        self.cluster.delete(node, cause=Cause.NODE_LIFECYCLE)
        nid = self.node_ids[name]
        self.node_present[nid] = False
        self.kubelets.pop(nid, None)
        self._usage_dirty = True
        for c in list(self.controllers):
            c.node_removed(name)
        for sp in [p for p in self.pods.values() if p.node == name and not p.gone]:
            # Pod GC deletes the pods of a deleted node at once.
            self.rec.event(self.t, "podDeletedWithNode", pod=sp.key, node=name)
            self._remove_pod(sp)
        self.rec.event(self.t, "nodeRemoved", node=name)

    def _drain(self, name: str) -> None:
        """kubectl drain: cordon, then evict every pod but DaemonSet pods, retrying while a PDB refuses."""
        node = self.cluster.nodes.get(name)
        if node is None:
            return
        if not node.unschedulable:
            self._cordon(name, True)
        self._update_pdbs()
        left = False
        for sp in sorted((p for p in self.pods.values() if p.node == name and not p.gone and not p.terminating
                          and p.phase not in ("Succeeded", "Failed")), key=lambda p: p.key):
            ref = sp.pod.controller_ref()
            if ref is not None and ref.kind == "DaemonSet":
                continue
            if not self._pdb_allows(sp.pod):
                left = True
                continue
            self.evict(sp, "drain", "Drain", None)
        if left:
            self._push(self.t + DRAIN_RETRY, ORDER_SCENARIO, self._drain, name)

    # ------------------------------------------------------------ disruption budgets

    def _update_pdbs(self) -> None:
        """The disruption controller: current and desired healthy pods, disruptions allowed."""
        for pdb in list(self.cluster.pdbs.values()):
            pods = [sp for sp in self.pods.values() if sp.pod.namespace == pdb.meta.namespace and not sp.gone
                    and sp.phase not in ("Succeeded", "Failed") and pdb.selector.matches(sp.pod.labels)]
            expected = len([p for p in pods if not p.terminating])
            healthy = len([p for p in pods if p.phase == "Running" and not p.terminating])
            if pdb.min_available is not None:
                desired = _int_or_percent(pdb.min_available, expected, round_up=True)
            elif pdb.max_unavailable is not None:
                desired = max(0, expected - _int_or_percent(pdb.max_unavailable, expected, round_up=True))
            else:
                desired = expected
            allowed = max(0, healthy - desired)
            if (pdb.expected_pods, pdb.current_healthy, pdb.desired_healthy, pdb.disruptions_allowed) != (
                    expected, healthy, desired, allowed):
                self.cluster.update(pdb.with_status(disruptions_allowed=allowed, current_healthy=healthy,
                                                    desired_healthy=desired, expected_pods=expected),
                                    cause=Cause.DISRUPTION)

    def _pdb_allows(self, pod: Pod) -> bool:
        for pdb in self.cluster.pdbs.values():
            if pdb.meta.namespace == pod.namespace and pdb.selector.matches(pod.labels):
                if pdb.disruptions_allowed <= 0:
                    return False
        for pdb in list(self.cluster.pdbs.values()):
            if pdb.meta.namespace == pod.namespace and pdb.selector.matches(pod.labels):
                self.cluster.update(pdb.with_status(disruptions_allowed=pdb.disruptions_allowed - 1), cause=Cause.API)
        return True

    # ------------------------------------------------------------ descheduler

    def _descheduler_cycle(self) -> None:
        from kubesched.descheduler.descheduler import Descheduler

        assert self.policy is not None and self.desched is not None
        self._current_usage()
        self._update_pdbs()
        now = self.now_dt()
        collector = self._metrics_collector()
        d = self._descheduler
        if d is None:
            d = Descheduler(self.cluster, self.policy, now=now, metrics=collector, scheduler_config=self.sched_config,
                            seed=self.seed, dry_run=True, enforce_pdbs=True, extra={"now": now})
            self._descheduler = d
        # One descheduler for the whole run (strategies keep state across cycles, e.g. LowNodeLoad's anomaly
        # detector); each cycle moves its clock and hands it the metrics of the moment.
        usage = self.koordlet_source.fetch(now) if self._policy_wants_koordlet else None
        result = d.run_cycle(now, metrics=collector, usage=usage)
        self.descheduler_cycles += 1
        grace = float(self.policy.grace_period_seconds) if self.policy.grace_period_seconds is not None else None
        for r in result.evictions:
            sp = self.pods.get(r.pod.key)
            if sp is None or sp.gone:
                continue
            self.evict(sp, "descheduler", r.plugin or "descheduler", grace)
        if result.evictions or result.errors or result.skipped:
            self.rec.event(self.t, "deschedulerCycle", evictions=len(result.evictions), skipped=result.skipped,
                           errors=list(result.errors)[:5])
        self._push(self.t + self.desched.interval, ORDER_DESCHEDULER, self._descheduler_cycle)

    # ------------------------------------------------------------ pod traces

    def _schedule_trace(self, spec: Any) -> None:
        pods = load_pod_trace(spec)
        if spec.inflate is not None:
            pods = self._inflate(spec, pods)
        ns = str((spec.template.get("metadata") or {}).get("namespace") or "default")
        workload = f"PodTrace/{spec.name}"
        for res in sorted({r for p in pods for r in p.requests}):
            if res not in self._trace_resources:
                self._trace_resources.append(res)
        for p in pods:
            if p.arrival > self.s.duration:
                continue
            self._push(max(p.arrival, 0.0), ORDER_POD, self._trace_arrive, spec, p, ns, workload)

    def _inflate(self, spec: Any, pods: list[TracePod]) -> list[TracePod]:
        """Sample more pods (with replacement, seeded) until the demand reaches factor × capacity."""
        res, factor = spec.inflate
        cap = sum(float(info.allocatable.get(res, 0)) for info in self.cluster.node_infos)
        if cap <= 0 or not pods:
            return pods
        demand = sum(float(p.requests.get(res, 0)) for p in pods)
        rng = np.random.default_rng([self.seed, 7])
        out = list(pods)
        i = 0
        if not any(p.requests.get(res) for p in pods):
            return pods
        while demand < factor * cap:
            src = pods[int(rng.integers(len(pods)))]
            i += 1
            t = out[-1].arrival + (spec.interval if spec.timing == "sequential" else 0.0)
            out.append(TracePod(f"{src.name}-x{i}", t, None, dict(src.requests), list(src.affinity_values)))
            demand += float(src.requests.get(res, 0))
        return out

    def _trace_arrive(self, spec: Any, p: TracePod, ns: str, workload: str) -> None:
        raw = pod_trace_manifest(spec, p, ns)
        # Trace pods with the same requests and affinity are copies of one admitted pod.
        self._trace_shape = (workload, tuple(sorted((k, str(v)) for k, v in p.requests.items())),
                             tuple(p.affinity_values))
        try:
            sp = self.create_pod(raw, None, f"{workload}/{p.name}", -1, None, workload)
        finally:
            self._trace_shape = None
        for res, v in p.requests.items():
            self._arrived[res] = self._arrived.get(res, 0.0) + float(v * 1000 if res == "cpu" else v)
        if p.departure is not None and p.departure >= p.arrival:
            self._push(p.departure, ORDER_POD, self._trace_depart, sp, self.serial[sp.key])

    def _trace_depart(self, sp: SimPod, serial: int) -> None:
        if sp.gone or self.serial.get(sp.key) != serial:
            return
        self._remove_pod(sp)

    # ------------------------------------------------------------ scenario events

    def _scenario_event(self, ev: Any) -> None:
        p = ev.params
        if ev.action == "scale":
            c = self.by_workload.get(p["workload"])
            if c is not None:
                c.scale(p["replicas"])
            self.rec.event(self.t, "scale", workload=p["workload"], replicas=p["replicas"])
        elif ev.action == "addNodes":
            for _ in range(p["count"]):
                self._add_node(self._node_from_template(p["template"]))
        elif ev.action == "setUsage":
            self.set_usage(p["rule"])
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
                    self._remove_node(name)
                elif ev.action == "cordon":
                    self._cordon(name, True)
                elif ev.action == "uncordon":
                    self._cordon(name, False)
                else:
                    self._drain(name)

    # ------------------------------------------------------------ recording

    def _record(self) -> None:
        # The scheduler runs continuously: what is pending at this instant has been tried.
        self._schedule()
        self._current_usage()
        n = len(self.node_names)
        present = self.node_present[:n]
        with np.errstate(divide="ignore", invalid="ignore"):
            cpu = np.where(present & (self.alloc_cpu > 0), self.node_cpu[:n] / self.alloc_cpu, np.nan)
            mem = np.where(present & (self.alloc_mem > 0), self.node_mem[:n] / self.alloc_mem, np.nan)
        table = self.cluster.table
        if self._row_map_gen != self.cluster.node_generation or len(self._row_of_nid) != n:
            rows_of = np.full(n, -1, dtype=np.int64)
            for info in self.cluster.node_infos:
                nid = self.node_ids.get(info.name)
                if nid is not None:
                    rows_of[nid] = info.index
            self._row_of_nid = rows_of
            self._row_map_gen = self.cluster.node_generation
        req = np.full(n, np.nan)
        col = table.column.get("cpu")
        ok = (self._row_of_nid >= 0) & (self.alloc_cpu[:n] > 0)
        if col is not None and ok.any():
            req[ok] = table.requested[self._row_of_nid[ok], col] / self.alloc_cpu[:n][ok]
        allocation: dict[str, float] = {}
        rows = table.n
        for res in ["cpu", "memory"] + [r for r in self._trace_resources if r not in ("cpu", "memory")]:
            c = table.column.get(res)
            if c is None:
                continue
            total = float(table.alloc[:rows, c].sum())
            if total > 0:
                allocation[res] = float(table.requested[:rows, c].sum()) / total
                if res in self._arrived:
                    allocation[f"{res}_arrived"] = self._arrived[res] / total
        self.rec.record(self.t, cpu, mem, req, len(self.sched.queue), int(self.slot_live.sum()), allocation)
        if self.progress is not None:
            self.progress(min(1.0, self.t / self.s.duration))
        nxt = self.t + self.rec.interval
        if nxt <= self.s.duration + 1e-9:
            self._push(nxt, ORDER_RECORD, self._record)

    # ------------------------------------------------------------ the loop

    def _push(self, t: float, order: int, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, order, self._seq, fn, args))

    def _wake(self, t: float) -> None:
        t = max(t, self.t)
        if t in self._wakes or t > self.s.duration:
            return
        self._wakes.add(t)
        self._push(t, ORDER_WAKE, self._woken, t)

    def _woken(self, t: float) -> None:
        self._wakes.discard(t)

    def _schedule(self) -> None:
        q = self.sched.queue
        while True:
            qpi = q.pop()
            if qpi is None:
                break
            out = self.sched.schedule_one(qpi)
            if out.node is None:
                self.rec.failed_attempts += 1
                sp = self.pods.get(out.pod.key)
                if sp is not None and sp.workload in self._drop_workloads and not out.nominated_node:
                    self.rec.event(self.t, "dropped", pod=sp.key, reason=out.reason[:200])
                    self._remove_pod(sp)
        nxt = q.next_backoff_expiry()
        if nxt is not None:
            self._wake(nxt - self.epoch)
        if q.unschedulable_since:
            oldest = next(iter(q.unschedulable_since.values()))
            self._wake(oldest - self.epoch + MAX_IN_UNSCHEDULABLE + 0.001)

    def run(self) -> RunResult:
        s = self.s
        for ev in s.events:
            self._push(ev.at, ORDER_SCENARIO, self._scenario_event, ev)
        if s.usage_step > 0:
            self._push(0.0, ORDER_USAGE, self._usage_step)
        if s.metrics.sampling_interval > 0:
            self._push(0.0, ORDER_SAMPLE, self._sample)
        if self._koord_plugins:
            self._push(0.0, ORDER_SAMPLE, self._koordlet_report)
        if self.policy is not None and self.desched is not None:
            if self.policy.kubernetes_metrics_enabled:
                self._push(0.0, ORDER_SAMPLE, self._collector_poll)
            # Upstream runs a cycle at start, then every interval.
            self._push(0.0, ORDER_DESCHEDULER, self._descheduler_cycle)
        if s.kubelet.housekeeping_interval > 0:
            self._push(0.0, ORDER_KUBELET, self._kubelet_tick)
        self._push(0.0, ORDER_RECORD, self._record)
        dirty = False
        while self._heap:
            t_next = self._heap[0][0]
            if dirty and t_next > self.t:
                self._schedule()
                dirty = False
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
        self.rec.node_names = list(self.node_names)
        return RunResult(s.name, self.variant.name, self.rec, list(self.node_names), self.alloc_cpu.copy(),
                         self.alloc_mem.copy(), self.descheduler_cycles, self.t, self.notes)

    def job_finished(self, job: Controller, how: str) -> None:
        self.rec.event(self.t, f"job{how}", workload=job.workload)


_NO_VARIANT = VariantSpec(name="default")


def _deepcopy(x: Any) -> Any:
    import copy

    return copy.deepcopy(x)


def _matches(m: Match, sp: SimPod) -> bool:
    if m.workload is not None:
        return m.workload == sp.workload
    if m.namespace is not None and m.namespace != sp.pod.namespace:
        return False
    return m.selector is not None and m.selector.matches(sp.pod.labels)


def _int_or_percent(v: int | str, total: int, round_up: bool) -> int:
    if isinstance(v, int):
        return v
    pct = int(v.rstrip("%"))
    x = pct * total / 100
    return math.ceil(x) if round_up else math.floor(x)

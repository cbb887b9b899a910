"""Actual usage: what each running pod uses (its usage identity's model or trace), and each node's sum.

This is the simulator's stand-in for the containers themselves (what cAdvisor would measure). It keeps,
in NumPy columns,
- per node (a stable id per node name, so recorded series keep their columns when nodes come and go):
  presence, allocatable and capacity CPU and memory, the memory eviction thresholds below which the
  node's kubelet has to look, and the node's CPU and memory usage;
- per pod slot (a running pod holds one): its usage-identity row, node, serial, CPU and memory limits,
  current CPU and memory use, and until when a crashed container is down.

A pod's usage follows its identity (`UsageTable` row): the newest scenario usage rule that names it, else
a usage trace (by workload replica or pod name), else the PodMetrics of the snapshot, else its requests.
CPU is throttled to the node's capacity (demand shared in proportion); memory is not, which is how nodes
come under memory pressure and containers get OOM-killed (kubelet.py).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api.objects import Node, Pod
from kubesched.api.quantity import parse_quantity
from kubesched.api.resources import memo_by_shape, pod_limits, scheduler_request
from kubesched.cluster.events import Event, EventType
from kubesched.kubelet.kubelet_config import KubeletEvictionConfig
from kubesched.sim.context import Sim
from kubesched.sim.pods import SimPod
from kubesched.sim.scenario import Match, ModelSpec, UsageRule
from kubesched.sim.traces import load_usage_trace
from kubesched.sim.usage import UsageTable

_NODE_COLUMNS: tuple[tuple[str, Any, Any], ...] = (
    ("present", bool, False), ("alloc_cpu", np.float64, 0.0), ("alloc_mem", np.float64, 0.0),
    ("cap_cpu", np.float64, 0.0), ("cap_mem", np.float64, 0.0), ("thr_mem", np.float64, 0.0),
    ("thr_alloc", np.float64, 0.0), ("cpu", np.float64, 0.0), ("mem", np.float64, 0.0))
_SLOT_COLUMNS: tuple[tuple[str, Any, Any], ...] = (
    ("row", np.int64, 0), ("node", np.int64, -1), ("serial", np.int64, -1), ("live", bool, False),
    ("lim_cpu", np.float64, np.inf), ("lim_mem", np.float64, np.inf), ("cpu", np.float64, 0.0),
    ("mem", np.float64, 0.0), ("down", np.float64, -1.0))


class Columns:
    """Equal-length NumPy columns that grow together (amortised doubling)."""

    def __init__(self, spec: tuple[tuple[str, Any, Any], ...], cap: int) -> None:
        self._spec = spec
        self.cap = cap
        self.data: dict[str, np.ndarray] = {name: np.full(cap, fill, dtype=dt) for name, dt, fill in spec}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def ensure(self, n: int) -> None:
        if n <= self.cap:
            return
        new = max(n, self.cap * 2)
        for name, dt, fill in self._spec:
            col = np.full(new, fill, dtype=dt)
            col[: self.cap] = self.data[name]
            self.data[name] = col
        self.cap = new


class ResourceUsage:
    """Pods' and nodes' actual usage in columns (see the module docstring)."""

    def __init__(self, sim: Sim, kubelet_config: KubeletEvictionConfig) -> None:
        self.sim = sim
        s = sim.scenario
        self.kubelet_config = kubelet_config
        self.system_reserved_memory = s.kubelet.system_reserved_memory
        # Nodes by stable id.
        self.node_ids: dict[str, int] = {}
        self.node_names: list[str] = []
        self.nodes = Columns(_NODE_COLUMNS, 16)
        # Pod slots.
        self.slots = Columns(_SLOT_COLUMNS, 1024)
        self.slot_pod: list[SimPod | None] = [None] * self.slots.cap
        self._free_slots: list[int] = list(range(self.slots.cap - 1, -1, -1))
        # Live slots by node id (the `node` and `live` columns, indexed): a kubelet reads its node's pods only.
        self._slots_on: dict[int, set[int]] = {}
        # Bumped when a slot is taken or given back; the live slots, their usage rows and nodes are kept
        # for the version they were gathered at.
        self._slots_version = 0
        self._live: _LiveSlots | None = None
        # The serials a metrics sample last copied, and the slots version they were copied at.
        self._serials_copy: tuple[int, np.ndarray] | None = None
        self.dirty = True
        self.version = 0
        # Usage identities.
        self.table = UsageTable(s.seed, sim.epoch, s.usage_step or 60.0)
        self.rules: list[UsageRule] = list(s.usage_rules)
        self._own_rules: dict[str, list[UsageRule]] = {}
        self.traces: list[tuple[Any, int]] = []
        for spec in s.usage_traces:
            grid = load_usage_trace(spec, sim.epoch, s.usage_step or 60.0, s.duration)
            self.traces.append((spec, self.table.add_grid(grid)))
        self.snapshot_usage: dict[str, tuple[float, float]] = {}
        self._fresh_rows: list[int] = []

    @property
    def n(self) -> int:
        return len(self.node_names)

    def col(self, name: str) -> np.ndarray:
        """A node column over the nodes known so far."""
        return self.nodes[name][: self.n]

    # ------------------------------------------------------------ nodes

    def on_event(self, ev: Event) -> None:
        if ev.kind != "Node":
            return
        node: Node = ev.obj
        if ev.type is EventType.DELETED:
            nid = self.node_ids.get(node.name)
            if nid is not None:
                self.nodes["present"][nid] = False
            self.dirty = True
        elif ev.type is EventType.ADDED or ev.type is EventType.UPDATED:
            self._set_node(node)

    def _set_node(self, node: Node) -> None:
        nid = self.node_ids.get(node.name)
        if nid is None:
            nid = len(self.node_names)
            self.node_ids[node.name] = nid
            self.node_names.append(node.name)
            self.nodes.ensure(nid + 1)
        cols = self.nodes
        cols["present"][nid] = True
        info = self.sim.cluster.node_info_by_name[node.name]
        cols["alloc_cpu"][nid] = info.allocatable.get("cpu", 0)
        cols["alloc_mem"][nid] = info.allocatable.get("memory", 0)
        cap = node.capacity or node.allocatable
        cols["cap_cpu"][nid] = float(cap.get("cpu", Fraction(0)) * 1000)
        cols["cap_mem"][nid] = float(cap.get("memory", Fraction(0)))
        cols["thr_mem"][nid], cols["thr_alloc"][nid] = self._memory_thresholds(nid)
        self.dirty = True

    def _memory_thresholds(self, nid: int) -> tuple[float, float]:
        """The largest memory.available / allocatableMemory.available threshold in bytes (plus minimum
        reclaim): below it the node's eviction manager must look; above it nothing can happen."""
        out = [0.0, 0.0]
        for th in self.kubelet_config.thresholds:
            which = {"memory.available": 0, "allocatableMemory.available": 1}.get(th.signal)
            if which is None:
                continue
            cap = self.nodes["cap_mem"][nid] if which == 0 else self.nodes["alloc_mem"][nid]
            v = th.value
            amount = float(v.quantity.value) if v.quantity is not None else float(v.percentage) * cap
            if th.min_reclaim is not None:
                mr = th.min_reclaim
                amount += float(mr.quantity.value) if mr.quantity is not None else float(mr.percentage) * cap
            out[which] = max(out[which], amount)
        return out[0], out[1]

    def node_info_list(self) -> list[tuple[int, str, int, int]]:
        """(node id, name, capacity milli-CPU, capacity memory) of the nodes present."""
        present = self.nodes["present"]
        cap_cpu, cap_mem = self.nodes["cap_cpu"], self.nodes["cap_mem"]
        return [(nid, name, int(cap_cpu[nid]), int(cap_mem[nid])) for name, nid in self.node_ids.items()
                if present[nid]]

    # ------------------------------------------------------------ pods: slots

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        """A running pod takes a slot; one that finished, failed or is gone gives it back."""
        if ev.type is EventType.DELETED or sp.gone:
            self.free_slot(sp)
        elif ev.type is EventType.UPDATED:
            phase = ev.obj.phase
            old_phase = ev.old.phase if ev.old is not None else ""
            if phase == "Running" and old_phase != "Running" and sp.slot < 0 and sp.node:
                nid = self.node_ids.get(sp.node)
                if nid is not None:
                    self.alloc_slot(sp, nid)
            elif phase in ("Succeeded", "Failed"):
                self.free_slot(sp)

    def alloc_slot(self, sp: SimPod, nid: int) -> None:
        if not self._free_slots:
            old = self.slots.cap
            self.slots.ensure(old * 2)
            self.slot_pod.extend([None] * (self.slots.cap - old))
            self._free_slots = list(range(self.slots.cap - 1, old - 1, -1))
        slot = self._free_slots.pop()
        sp.slot = slot
        self.slot_pod[slot] = sp
        s = self.slots.data
        s["row"][slot] = sp.usage_row
        s["node"][slot] = nid
        s["serial"][slot] = sp.serial
        s["live"][slot] = True
        self._slots_on.setdefault(nid, set()).add(slot)
        self._slots_version += 1
        s["down"][slot] = -1.0
        # Limits depend on the pod's resources only: once per pod shape (exact arithmetic is slow).
        lim = memo_by_shape(sp.pod, "sim_limits", lambda: _limits(sp.pod))
        s["lim_cpu"][slot], s["lim_mem"][slot] = lim
        row = sp.usage_row
        if row >= 0:
            if sp.replaces is not None:
                # A new pod for the identity: a new process, whose memory starts afresh.
                self.table.restart(row, "memory")
                self._fresh_rows.append(row)
            elif self.table.res["cpu"].last_step[row] < 0 or self.table.step_index < 0:
                self._fresh_rows.append(row)
        self.dirty = True

    def free_slot(self, sp: SimPod) -> None:
        slot = sp.slot
        if slot < 0:
            return
        s = self.slots
        on = self._slots_on.get(int(s["node"][slot]))
        if on is not None:
            on.discard(slot)
        s["live"][slot] = False
        s["node"][slot] = -1
        self._slots_version += 1
        s["serial"][slot] = -1
        self.slot_pod[slot] = None
        s["cpu"][slot] = s["mem"][slot] = 0.0
        self._free_slots.append(slot)
        sp.slot = -1
        self.dirty = True

    def live_slots_on(self, nid: int) -> list[int]:
        """The live slots on a node, in slot order."""
        return sorted(self._slots_on.get(nid, ()))

    def running_pods(self) -> list[tuple[str, str, int, int]]:
        """(pod key, node, slot, serial) of every pod holding a slot."""
        out = []
        for slot in np.flatnonzero(self.slots["live"]):
            sp = self.slot_pod[int(slot)]
            if sp is not None:
                out.append((sp.key, sp.node, int(slot), sp.serial))
        return out

    # ------------------------------------------------------------ usage identities and rules

    def request_of(self, pod: Pod) -> tuple[float, float]:
        """The pod's CPU (milli) and memory requests, with limits or small defaults standing in for none."""
        cached = pod.cache.get("sim_request")
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        req = scheduler_request(pod)
        cpu = float(req.get("cpu", 0))
        mem = float(req.get("memory", 0))
        if cpu == 0 or mem == 0:
            lim = pod_limits(pod)
            if cpu == 0:
                cpu = float(lim["cpu"] * 1000) if "cpu" in lim else 100.0
            if mem == 0:
                mem = float(lim["memory"]) if "memory" in lim else 200.0 * 1024 * 1024
        out = (cpu, mem)
        pod.cache["sim_request"] = out
        return out

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
            s = self.sim.scenario
            own = [w.usage for w in s.workloads if w.usage is not None and w.key == sp.workload]
            own += [pt.usage for pt in s.pod_traces if pt.usage is not None and sp.workload == f"PodTrace/{pt.name}"]
            self._own_rules[sp.workload] = own
        out = list(own)
        for r in self.rules:
            if matches(r.match, sp):
                out.append(r)
        return out

    def assign_identity(self, sp: SimPod) -> None:
        """The pod's usage row: its identity's, created with the identity's model the first time."""
        known = sp.identity in self.table.index
        row = self.table.identity(sp.identity)
        sp.usage_row = row
        if known:
            return
        req_cpu, req_mem = self.request_of(sp.pod)
        for resource, request in (("cpu", req_cpu), ("memory", req_mem)):
            spec = self._rule_for(sp, resource)
            if spec is not False:
                self.table.assign(row, resource, spec if isinstance(spec, ModelSpec) else None, request)
                continue
            if self._trace_for(sp, resource, row):
                continue
            snap = self.snapshot_usage.get(sp.key)
            if snap is not None:
                self.table.assign(row, resource, None, snap[0] if resource == "cpu" else snap[1])
            else:
                self.table.assign(row, resource, None, request)

    def _trace_for(self, sp: SimPod, resource: str, row: int) -> bool:
        for spec, gid in self.traces:
            grid = self.table.grids[gid]
            values = grid.cpu if resource == "cpu" else grid.memory
            if values is None or not grid.names:
                continue
            if spec.workload is not None:
                if spec.workload != sp.workload:
                    continue
                series = max(sp.ordinal, 0) % len(grid.names)
            else:
                # A series named namespace/name (what capture writes), or by the pod's name alone.
                idx = grid.index(sp.key)
                if idx is None:
                    idx = grid.index(sp.pod.name)
                if idx is None:
                    continue
                series = idx
            self.table.assign_trace(row, resource, gid, series)
            return True
        return False

    def note_snapshot_metrics(self, raw: dict[str, Any]) -> None:
        """A snapshot PodMetrics object: the pod's usage when no rule or trace names it."""
        if raw.get("kind") != "PodMetrics":
            return
        meta = raw.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        cpu = mem = 0.0
        for c in raw.get("containers") or []:
            usage = (c or {}).get("usage") or {}
            try:
                cpu += float(parse_quantity(usage.get("cpu", "0")) * 1000)
                mem += float(parse_quantity(usage.get("memory", "0")))
            except (ValueError, TypeError):
                continue
        self.snapshot_usage[key] = (cpu, mem)

    def set_usage(self, rule: UsageRule) -> None:
        """A setUsage event: the rule applies from now on, to current and future pods it matches."""
        self.rules.append(rule)
        done: set[int] = set()
        for sp in self.sim.pods.values():
            if sp.usage_row in done or not matches(rule.match, sp):
                continue
            done.add(sp.usage_row)
            req_cpu, req_mem = self.request_of(sp.pod)
            if rule.cpu is not None:
                self.table.assign(sp.usage_row, "cpu", rule.cpu, req_cpu)
            if rule.memory is not None:
                self.table.assign(sp.usage_row, "memory", rule.memory, req_mem)
        if done:
            self.table.evaluate(self.sim.t, np.array(sorted(done)))
        self.dirty = True

    # ------------------------------------------------------------ effective values

    def step(self) -> None:
        """A usage step: every identity's model moves on."""
        self._fresh_rows = []
        self.table.evaluate(self.sim.t)
        self.dirty = True

    def compute(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each live slot's usage (CPU capped by its limit; zero while its container is down). Returns the live
        slots, which of them are down and their memory (for OOM checks); `aggregate` makes the node sums."""
        if self._fresh_rows:
            # Identities whose pods started since the last step get their value now, all at once.
            self.table.evaluate(self.sim.t, np.unique(np.array(self._fresh_rows, dtype=np.int64)))
            self._fresh_rows = []
        s = self.slots
        c = self._live_slots()
        live = c.slots
        cpu = np.minimum(self.table.values("cpu")[c.rows], c.cpu_limits)
        mem = self.table.values("memory")[c.rows]  # a gather: already a new array
        down = s["down"][live] > self.sim.t
        if down.any():
            cpu[down] = 0.0
            mem[down] = 0.0
        s["cpu"][live] = cpu
        s["mem"][live] = mem
        return live, down, mem

    def memory_limits(self, live: np.ndarray) -> np.ndarray:
        """The memory limits of the slots `live` (gathered once per slot change when they are the live slots)."""
        c = self._live_slots()
        return c.mem_limits if live is c.slots else self.slots["lim_mem"][live]

    def slot_copies(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of the slots' CPU, memory and serial columns for a metrics sample (call `current` first).

        Only the slots up to the last live one are copied: every later slot is free (usage 0, serial -1),
        as a slot past the end of a copy reads. The serials change only when a slot is taken or given back,
        so samples between such changes share one copy (samples never modify them)."""
        c = self._live_slots()
        end = int(c.slots[-1]) + 1 if len(c.slots) else 0
        s = self.slots
        serials = self._serials_copy
        if serials is None or serials[0] != self._slots_version:
            serials = self._serials_copy = (self._slots_version, s["serial"][:end].copy())
        return s["cpu"][:end].copy(), s["mem"][:end].copy(), serials[1]

    def _live_slots(self) -> _LiveSlots:
        """The live slots and what is gathered of them, once per slot change."""
        c = self._live
        if c is None or c.version != self._slots_version:
            c = self._live = _LiveSlots(self._slots_version, self.slots)
        return c

    def aggregate(self, live: np.ndarray) -> None:
        """Node sums of the slots' usage, CPU shared out where a node's demand exceeds its capacity."""
        s = self.slots
        n = self.n
        c = self._live_slots()
        all_placed = False
        if live is c.slots:
            # No slot changed since `compute` gathered them: all live, each on its node.
            nodes = c.nodes
            all_placed = c.all_placed
        else:
            live = live[s["live"][live]]
            nodes = s["node"][live]
        cpu = s["cpu"][live]
        mem = s["mem"][live]
        if all_placed:
            on_nodes, cpu_on, mem_on = nodes, cpu, mem
        else:
            valid = nodes >= 0
            on_nodes, cpu_on, mem_on = nodes[valid], cpu[valid], mem[valid]
        cap_cpu = self.nodes["cap_cpu"][:n]
        demand = np.bincount(on_nodes, weights=cpu_on, minlength=n) if n else np.zeros(0)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(demand > cap_cpu, cap_cpu / np.maximum(demand, 1e-9), 1.0)
        if n and (factor < 1.0).any():
            cpu_on = cpu_on * factor[on_nodes]
            if all_placed:
                cpu = cpu_on
            else:
                cpu = cpu.copy()
                cpu[valid] = cpu_on
            s["cpu"][live] = cpu
            node_cpu: np.ndarray = np.bincount(on_nodes, weights=cpu_on, minlength=n)
        else:
            node_cpu = demand  # no node throttled: the same sums
        node_mem = np.bincount(on_nodes, weights=mem_on, minlength=n)
        self.nodes["cpu"][:n] = node_cpu
        self.nodes["mem"][:n] = node_mem
        self.dirty = False
        self.version += 1

    def current(self) -> None:
        """Bring node and slot usage up to date (between usage steps: after pods started or stopped)."""
        if self.dirty:
            live, _, _ = self.compute()
            self.aggregate(live)


class _LiveSlots:
    """The live slots (ascending) at one slots version, their usage rows, nodes and CPU and memory limits (all set when
    a slot is taken), and whether every one is on a node (the usual case: no per-step masking then)."""

    __slots__ = ("version", "slots", "rows", "nodes", "cpu_limits", "mem_limits", "all_placed")

    def __init__(self, version: int, s: Any) -> None:
        self.version = version
        self.slots = np.flatnonzero(s["live"])
        self.rows = s["row"][self.slots]
        self.nodes = s["node"][self.slots]
        self.cpu_limits = s["lim_cpu"][self.slots]
        self.mem_limits = s["lim_mem"][self.slots]
        self.all_placed = bool((self.nodes >= 0).all())


def _limits(pod: Pod) -> tuple[float, float]:
    """CPU (milli) and memory limits of a pod; inf where a resource has none."""
    limits = pod_limits(pod)
    return (float(limits["cpu"] * 1000) if "cpu" in limits else np.inf,
            float(limits["memory"]) if "memory" in limits else np.inf)


def matches(m: Match, sp: SimPod) -> bool:
    if m.workload is not None:
        return m.workload == sp.workload
    if m.namespace is not None and m.namespace != sp.pod.namespace:
        return False
    return m.selector is not None and m.selector.matches(sp.pod.labels)

"""What a run measures: time series (per node and for the cluster), events, and the summary.

Utilisation is actual usage over allocatable. Spread is the standard deviation and the max − min of
node CPU utilisation across the nodes present. A node is hot while its CPU utilisation is above the
scenario's hotThreshold; hot-node minutes add up hot nodes × recording interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api.snapshot import gc_paused
from kubesched.cluster.events import Cause, Event, EventType
from kubesched.sim.context import Sim
from kubesched.sim.loops import Binding, Eviction, LoopFinding, find_loops
from kubesched.sim.node_usage import ResourceUsage
from kubesched.sim.pods import SimPod
from kubesched.sim.trace_pods import TracePods


@dataclass(slots=True)
class Recorder:
    interval: float
    hot_threshold: float
    times: list[float] = field(default_factory=list)
    node_cpu: list[np.ndarray] = field(default_factory=list)  # utilisation per sim node id (NaN: absent)
    node_mem: list[np.ndarray] = field(default_factory=list)
    node_cpu_req: list[np.ndarray] = field(default_factory=list)  # requested / allocatable
    pending: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    allocation: dict[str, list[float]] = field(default_factory=dict)  # resource → requested / allocatable, cluster
    # Extended resource → per record, requested / allocatable per sim node id (NaN: absent, or none allocatable).
    node_requested: dict[str, list[np.ndarray]] = field(default_factory=dict)
    evictions: list[Eviction] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    oom_kills: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    replaces: dict[str, str] = field(default_factory=dict)
    failed_attempts: int = 0
    node_names: list[str] = field(default_factory=list)
    created_pods: int = 0

    def record(self, t: float, cpu_util: np.ndarray, mem_util: np.ndarray, cpu_req: np.ndarray, pending: int,
               running: int, allocation: dict[str, float]) -> None:
        self.times.append(t)
        self.node_cpu.append(cpu_util.astype(np.float32))
        self.node_mem.append(mem_util.astype(np.float32))
        self.node_cpu_req.append(cpu_req.astype(np.float32))
        self.pending.append(pending)
        self.running.append(running)
        for k, v in allocation.items():
            self.allocation.setdefault(k, []).append(v)

    def record_node_requests(self, requested: np.ndarray, allocatable: np.ndarray, columns: Mapping[str, int],
                             rows_of_nid: np.ndarray, resources: Iterable[str]) -> None:
        """Per node, the share of each extended resource requested, at the record just made.

        `requested` and `allocatable` are the node table's columns (rows × resources), `rows_of_nid` maps a
        sim node id to its table row (-1: absent). CPU and memory are recorded by `record` already.
        """
        ok = rows_of_nid >= 0
        for res in resources:
            c = columns.get(res)
            if c is None or res in ("cpu", "memory"):
                continue
            frac = np.full(len(rows_of_nid), np.nan, dtype=np.float32)
            alloc = allocatable[rows_of_nid[ok], c]
            with np.errstate(divide="ignore", invalid="ignore"):
                frac[ok] = np.where(alloc > 0, requested[rows_of_nid[ok], c] / alloc, np.nan)
            rows = self.node_requested.setdefault(res, [])
            # A resource first seen after some records gets empty rows before, so rows stay aligned with times.
            while len(rows) < len(self.times) - 1:
                rows.append(np.full(0, np.nan, dtype=np.float32))
            rows.append(frac)

    def event(self, t: float, kind: str, **data: Any) -> None:
        self.events.append({"t": round(t, 3), "event": kind, **data})

    # ------------------------------------------------------------ matrices

    def matrix(self, rows: list[np.ndarray]) -> np.ndarray:
        n = max((len(r) for r in rows), default=0)
        out = np.full((len(rows), n), np.nan, dtype=np.float32)
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out

    def series(self) -> dict[str, np.ndarray]:
        """Per-record cluster series: spread, hot nodes, pending, evictions per interval."""
        cpu = self.matrix(self.node_cpu)
        mem = self.matrix(self.node_mem)
        t = np.array(self.times)
        out: dict[str, np.ndarray] = {"t": t}
        with np.errstate(invalid="ignore"):
            present = ~np.isnan(cpu)
            counts = present.sum(axis=1)
            safe = np.where(present, cpu, 0.0)
            mean = np.where(counts > 0, safe.sum(axis=1) / np.maximum(counts, 1), np.nan)
            var = np.where(counts > 0, (np.where(present, (cpu - mean[:, None]) ** 2, 0.0)).sum(axis=1)
                           / np.maximum(counts, 1), np.nan)
            out["cpu_mean"] = mean
            out["cpu_std"] = np.sqrt(var)
            hi = np.where(present, cpu, -np.inf).max(axis=1) if cpu.size else np.zeros(len(t))
            lo = np.where(present, cpu, np.inf).min(axis=1) if cpu.size else np.zeros(len(t))
            out["cpu_max"] = np.where(counts > 0, hi, np.nan)
            out["cpu_range"] = np.where(counts > 0, hi - lo, np.nan)
            mpresent = ~np.isnan(mem)
            mcounts = mpresent.sum(axis=1)
            msafe = np.where(mpresent, mem, 0.0)
            mmean = np.where(mcounts > 0, msafe.sum(axis=1) / np.maximum(mcounts, 1), np.nan)
            out["mem_mean"] = mmean
            mvar = np.where(mcounts > 0, (np.where(mpresent, (mem - mmean[:, None]) ** 2, 0.0)).sum(axis=1)
                            / np.maximum(mcounts, 1), np.nan)
            out["mem_std"] = np.sqrt(mvar)
            out["hot_nodes"] = (np.where(present, cpu, 0.0) > self.hot_threshold).sum(axis=1).astype(np.float64)
        out["pending"] = np.array(self.pending, dtype=np.float64)
        out["running"] = np.array(self.running, dtype=np.float64)
        for comp in sorted({e.component for e in self.evictions}):
            out[f"evictions_{comp}"] = self._per_interval([e.t for e in self.evictions if e.component == comp], t)
        out["oom_kills"] = self._per_interval([o["t"] for o in self.oom_kills], t)
        for k, v in self.allocation.items():
            out[f"allocated_{k}"] = np.array(v, dtype=np.float64)
        return out

    @staticmethod
    def _per_interval(stamps: list[float], t: np.ndarray) -> np.ndarray:
        if len(t) == 0:
            return np.zeros(0)
        idx = np.searchsorted(t, np.array(stamps, dtype=np.float64), side="left")
        idx = np.clip(idx, 0, len(t) - 1)
        return np.bincount(idx, minlength=len(t)).astype(np.float64)

    # ------------------------------------------------------------ summary

    def loops(self, window: float) -> list[LoopFinding]:
        # Indexes over every eviction and binding of the run, acyclic: no collections while they are built.
        with gc_paused():
            return find_loops(self.evictions, self.bindings, self.replaces, window)

    def summary(self, loops: list[LoopFinding]) -> dict[str, Any]:
        s = self.series()
        minutes = self.interval / 60.0
        by: dict[str, dict[str, int]] = {}
        for e in self.evictions:
            comp = by.setdefault(e.component, {})
            comp[e.reason] = comp.get(e.reason, 0) + 1
        lat = np.array(self.latencies) if self.latencies else np.zeros(0)

        def stat(a: np.ndarray, fn: Any) -> float | None:
            a = a[~np.isnan(a)] if a.size else a
            return None if a.size == 0 else _round(float(fn(a)))

        kubelet = by.get("kubelet", {})
        return {
            "cpuUtilisationMean": stat(s["cpu_mean"], np.mean),
            "cpuSpreadStdMean": stat(s["cpu_std"], np.mean),
            "cpuSpreadStdFinal": stat(s["cpu_std"][-1:], np.mean) if len(s["cpu_std"]) else None,
            "cpuRangeMean": stat(s["cpu_range"], np.mean),
            "cpuMaxPeak": stat(s["cpu_max"], np.max),
            "memSpreadStdMean": stat(s["mem_std"], np.mean),
            "hotNodeMinutes": _round(float(np.nansum(s["hot_nodes"]) * minutes)),
            "pendingMax": int(np.max(s["pending"])) if len(s["pending"]) else 0,
            "pendingMean": stat(s["pending"], np.mean),
            "podsCreated": self.created_pods,
            "podsScheduled": len(self.bindings),
            "failedSchedulingAttempts": self.failed_attempts,
            # Scheduling takes no virtual time: a pod waits only while it cannot be placed.
            "podsWaited": int(np.count_nonzero(lat > 0)),
            "schedulingLatencyP50": stat(lat, lambda a: np.percentile(a, 50)),
            "schedulingLatencyP95": stat(lat, lambda a: np.percentile(a, 95)),
            "schedulingLatencyMax": stat(lat, np.max),
            "evictions": sum(len([e for e in self.evictions if e.component == c]) for c in by),
            "evictionsByComponent": {c: dict(sorted(r.items())) for c, r in sorted(by.items())},
            "kubeletEvictions": sum(kubelet.values()),
            "oomKills": len(self.oom_kills),
            "loopWorkloads": len(loops),
            "loopEpisodes": sum(f.episodes for f in loops),
            "loopingEvictions": sum(f.looping_evictions for f in loops),
        }


def _round(x: float) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    return float(f"{x:.6g}")


class Recording:
    """Feeds the Recorder: bindings and their latency, preemption's evictions, and the periodic sample of
    node utilisation, pending and running pods and cluster allocation."""

    def __init__(self, sim: Sim, usage: ResourceUsage, traces: TracePods, queue_length: Callable[[], int]) -> None:
        self.sim = sim
        self.rec = sim.rec
        self.usage = usage
        self.traces = traces
        self.queue_length = queue_length
        self._row_map_gen = -1
        self._row_of_nid = np.zeros(0, dtype=np.int64)

    def pod_changed(self, sp: SimPod, ev: Event) -> None:
        t = self.sim.t
        if ev.type is EventType.BOUND:
            self.rec.latencies.append(t - sp.created)
            self.rec.bindings.append(Binding(t, sp.key, sp.workload, ev.node, sp.created))
        elif (ev.type is EventType.UPDATED and ev.cause is Cause.PREEMPTION and ev.obj.is_terminating
              and (ev.old is None or not ev.old.is_terminating)):
            self.rec.evictions.append(Eviction(t, sp.key, sp.workload, sp.node, "scheduler", "Preempted"))

    def record(self) -> None:
        sim, u = self.sim, self.usage
        u.current()
        n = u.n
        present = u.col("present")
        alloc_cpu, alloc_mem = u.col("alloc_cpu"), u.col("alloc_mem")
        with np.errstate(divide="ignore", invalid="ignore"):
            cpu = np.where(present & (alloc_cpu > 0), u.col("cpu") / alloc_cpu, np.nan)
            mem = np.where(present & (alloc_mem > 0), u.col("mem") / alloc_mem, np.nan)
        cluster = sim.cluster
        table = cluster.table
        if self._row_map_gen != cluster.node_generation or len(self._row_of_nid) != n:
            rows_of = np.full(n, -1, dtype=np.int64)
            for info in cluster.node_infos:
                nid = u.node_ids.get(info.name)
                if nid is not None:
                    rows_of[nid] = info.index
            self._row_of_nid = rows_of
            self._row_map_gen = cluster.node_generation
        req = np.full(n, np.nan)
        col = table.column.get("cpu")
        ok = (self._row_of_nid >= 0) & (alloc_cpu > 0)
        if col is not None and ok.any():
            req[ok] = table.requested[self._row_of_nid[ok], col] / alloc_cpu[ok]
        allocation: dict[str, float] = {}
        rows = table.n
        arrived = self.traces.arrived
        for res in ["cpu", "memory"] + [r for r in self.traces.resources if r not in ("cpu", "memory")]:
            c = table.column.get(res)
            if c is None:
                continue
            total = float(table.alloc[:rows, c].sum())
            if total > 0:
                allocation[res] = float(table.requested[:rows, c].sum()) / total
                if res in self.traces.resources:
                    # From the first record on, even before the first arrival (series have equal lengths).
                    allocation[f"{res}_arrived"] = arrived.get(res, 0.0) / total
        self.rec.record(sim.t, cpu, mem, req, self.queue_length(), int(u.slots["live"].sum()), allocation)
        self.rec.record_node_requests(table.requested, table.alloc, table.column, self._row_of_nid, self.traces.resources)

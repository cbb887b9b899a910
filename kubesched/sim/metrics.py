"""The metrics pipeline: what load-aware components see of the true usage — sampled, averaged, late.

Every `samplingInterval` the kubelets' resource metrics are scraped: each node's usage and each pod's.
A consumer reads a *view*: the average of the samples taken in (t − delay − window, t − delay] (the
newest sample before t − delay when the window holds none), stamped with the time of its newest sample.
Views exist for metrics-server (NodeMetrics/PodMetrics: the descheduler's metricsUtilization), load-watcher
(WatcherMetrics with AVG and STD in percent of capacity: Trimaran) and koordlet (NodeMetric: koordinator's
LowNodeLoad and LoadAwareScheduling). The descheduler's MetricsCollector then smooths node usage itself
(0.9·previous + 0.1·sample every poll) as upstream does.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.descheduler.metricscollector import MetricsCollector, NodeUsageColumns
from kubesched.metrics.base import (
    AVERAGE,
    CPU_TYPE,
    MEMORY_TYPE,
    STD,
    Metric,
    Metrics,
    MetricsFeed,
    MetricsSource,
    NodeUsage,
    PodUsage,
    Window,
)
from kubesched.sim.context import ORDER_SAMPLE, Sim
from kubesched.sim.node_usage import ResourceUsage
from kubesched.sim.scenario import MetricsView
from kubesched.sim.units import format_duration


@dataclass(slots=True)
class Sample:
    t: float
    node_cpu: np.ndarray  # millicores, by sim node id (NaN: node absent)
    node_mem: np.ndarray  # bytes
    slot_cpu: np.ndarray  # millicores, by pod slot
    slot_mem: np.ndarray
    slot_key: np.ndarray  # which pod held the slot (its serial), -1 free
    version: int = -1  # the engine's usage version the sample was taken at


@dataclass(slots=True)
class NodeView:
    """A view's numbers per sim node id (NaN where the node has no data)."""

    cpu: np.ndarray
    mem: np.ndarray
    cpu_std: np.ndarray
    mem_std: np.ndarray
    stamp: float  # virtual time of the newest sample used
    window: float
    samples: list[Sample]


class MetricsPipeline:
    def __init__(self, sampling_interval: float, horizon: float) -> None:
        self.sampling_interval = sampling_interval
        self.horizon = horizon + 2 * sampling_interval
        self.samples: deque[Sample] = deque()
        self._views: dict[tuple[float, float, float, float, int], NodeView] = {}

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)
        while self.samples and self.samples[0].t < sample.t - self.horizon:
            self.samples.popleft()

    def window_samples(self, view: MetricsView, t: float) -> list[Sample]:
        end = t - view.delay
        chosen = [s for s in self.samples if end - view.window < s.t <= end]
        if not chosen:
            before = [s for s in self.samples if s.t <= end]
            if before:
                chosen = [before[-1]]
        return chosen

    def node_view(self, view: MetricsView, t: float) -> NodeView | None:
        chosen = self.window_samples(view, t)
        if not chosen:
            return None
        key = (view.window, view.delay, chosen[0].t, chosen[-1].t, len(chosen))
        cached = self._views.get(key)
        if cached is not None:
            return cached
        n = max(len(s.node_cpu) for s in chosen)
        if len(chosen) == 1 or all(len(s.node_cpu) == n for s in chosen):
            cpu = np.vstack([s.node_cpu for s in chosen]) if len(chosen) > 1 else chosen[0].node_cpu[None, :]
            mem = np.vstack([s.node_mem for s in chosen]) if len(chosen) > 1 else chosen[0].node_mem[None, :]
        else:
            cpu = np.full((len(chosen), n), np.nan)
            mem = np.full((len(chosen), n), np.nan)
            for i, s in enumerate(chosen):
                cpu[i, : len(s.node_cpu)] = s.node_cpu
                mem[i, : len(s.node_mem)] = s.node_mem
        if len(chosen) == 1:
            zeros = np.where(np.isnan(cpu[0]), np.nan, 0.0)
            nv = NodeView(cpu[0].copy(), mem[0].copy(), zeros, zeros.copy(), chosen[-1].t, view.window, chosen)
        elif not (np.isnan(cpu).any() or np.isnan(mem).any()):
            nv = NodeView(cpu.mean(axis=0), mem.mean(axis=0), cpu.std(axis=0), mem.std(axis=0), chosen[-1].t,
                          view.window, chosen)
        else:
            with np.errstate(invalid="ignore"), _quiet():
                nv = NodeView(np.nanmean(cpu, axis=0), np.nanmean(mem, axis=0), np.nanstd(cpu, axis=0),
                              np.nanstd(mem, axis=0), chosen[-1].t, view.window, chosen)
        if len(self._views) > 64:
            self._views.clear()
        self._views[key] = nv
        return nv

    @staticmethod
    def pod_usage(view: NodeView, slot: int, serial: int) -> tuple[float, float] | None:
        """A pod's average over the view's samples in which it held its slot."""
        cpu = mem = 0.0
        k = 0
        for s in view.samples:
            if slot < len(s.slot_key) and s.slot_key[slot] == serial:
                cpu += float(s.slot_cpu[slot])
                mem += float(s.slot_mem[slot])
                k += 1
        if not k:
            return None
        return cpu / k, mem / k


class _quiet:
    """Silence numpy's "mean of empty slice" warnings for nodes absent from every sample."""

    def __enter__(self) -> None:
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", category=RuntimeWarning)

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


# ---------------------------------------------------------------- sources the components read


NodeInfoFn = Callable[[], list[tuple[int, str, int, int]]]  # (sim node id, name, capacity cpu milli, memory)
PodInfoFn = Callable[[], list[tuple[str, str, int, int]]]  # (pod key, node, slot, serial)


class SimMetricsSource(MetricsSource):
    """A MetricsSource over the pipeline: one view, read at the virtual clock's `now`."""

    kind = "simulated"

    def __init__(self, pipeline: MetricsPipeline, view: MetricsView, epoch: float, nodes: NodeInfoFn,
                 pods: PodInfoFn | None, name: str, watcher_form: bool) -> None:
        self.pipeline = pipeline
        self.view = view
        self.epoch = epoch
        self.nodes = nodes
        self.pods = pods
        self.name = name
        self.watcher_form = watcher_form

    def describe(self) -> str:
        return f"simulated {self.name} (window {format_duration(self.view.window)}, delay " \
               f"{format_duration(self.view.delay)})"

    def fetch(self, now: datetime) -> Metrics:
        t = now.timestamp() - self.epoch
        nv = self.pipeline.node_view(self.view, t)
        if nv is None:
            return Metrics(source=self.name, nodes={}, timestamp=None, captured=False)
        stamp = self.epoch + nv.stamp
        window = Window(format_duration(self.view.window), stamp - self.view.window, stamp)
        nodes: dict[str, NodeUsage] = {}
        for nid, name, cap_cpu, cap_mem in self.nodes():
            if nid >= len(nv.cpu) or math.isnan(nv.cpu[nid]):
                continue
            cpu, mem = float(nv.cpu[nid]), float(nv.mem[nid])
            usage = {"cpu": int(math.ceil(cpu)), "memory": int(math.ceil(mem))}
            metrics: list[Metric] = []
            if self.watcher_form:
                for typ, value, std, cap in ((CPU_TYPE, cpu, float(nv.cpu_std[nid]), cap_cpu),
                                             (MEMORY_TYPE, mem, float(nv.mem_std[nid]), cap_mem)):
                    if cap > 0:
                        metrics.append(Metric(typ, AVERAGE, 100.0 * value / cap, rollup="AVG"))
                        metrics.append(Metric(typ, STD, 100.0 * std / cap, rollup="STD"))
            nodes[name] = NodeUsage(name, metrics=metrics, usage=usage, timestamp=stamp, window=window)
        pods: dict[str, PodUsage] = {}
        if self.pods is not None:
            for key, node, slot, serial in self.pods():
                u = MetricsPipeline.pod_usage(nv, slot, serial)
                if u is not None:
                    pods[key] = PodUsage(key, {"cpu": int(math.ceil(u[0])), "memory": int(math.ceil(u[1]))}, node=node,
                                         timestamp=stamp, window=window)
        return Metrics(source=self.name, nodes=nodes, pods=pods, timestamp=stamp, window=window, captured=False)


class LazyPodMetrics(Mapping[str, list[tuple[str, dict[str, Fraction]]]]):
    """The descheduler MetricsCollector's pod table, computed for the pods it asks about only."""

    def __init__(self, view: NodeView | None, locate: Callable[[str], tuple[int, int] | None],
                 keys: Callable[[], list[str]]) -> None:
        self.view = view
        self.locate = locate
        self._keys = keys
        self._cache: dict[str, list[tuple[str, dict[str, Fraction]]] | None] = {}

    def _compute(self, key: str) -> list[tuple[str, dict[str, Fraction]]] | None:
        if key in self._cache:
            return self._cache[key]
        out = None
        where = self.locate(key)
        if where is not None and self.view is not None:
            u = MetricsPipeline.pod_usage(self.view, *where)
            if u is not None:
                out = [("main", {"cpu": Fraction(int(math.ceil(u[0])), 1000), "memory": Fraction(int(math.ceil(u[1])))})]
        self._cache[key] = out
        return out

    def __getitem__(self, key: str) -> list[tuple[str, dict[str, Fraction]]]:
        v = self._compute(key)
        if v is None:
            raise KeyError(key)
        return v

    def get(self, key: str, default: Any = None) -> Any:
        v = self._compute(key)
        return default if v is None else v

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._compute(key) is not None

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._keys() if self._compute(k) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def smooth(prev: np.ndarray, value: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """The descheduler collector's weightedAverage, vectorised: the first sample as is, then
    round(0.9·prev + 0.1·value) with Go's rounding (halves away from zero)."""
    x = 0.9 * prev + 0.1 * value
    rounded = np.sign(x) * np.floor(np.abs(x) + 0.5)
    return np.where(seen, rounded, value)


def smooth_plain(prev: np.ndarray, value: np.ndarray, tenth: np.ndarray, seen: np.ndarray,
                 have: np.ndarray) -> np.ndarray:
    """np.where(have, smooth(prev, value, seen), prev) when every operand is +0.0 or positive (tenth: value
    * 0.1): Go's round(x) = sign(x)·floor(|x| + 0.5) is floor(x + 0.5) then, the same bits in fewer passes,
    and the result is again +0.0 or positive."""
    x = prev * 0.9
    x += tenth
    x += 0.5
    np.floor(x, out=x)
    return np.where(seen, x, np.where(have, value, prev))


def epoch_datetime(epoch: float, t: float) -> datetime:
    return datetime.fromtimestamp(epoch + t, UTC)


class MetricsDriver:
    """Scrapes usage into the pipeline every sampling interval, and serves what consumers read of it:
    the load-watcher source Trimaran polls, koordlet's NodeMetric reports (a MetricsFeed for
    LoadAwareScheduling, a reading for LowNodeLoad), and the descheduler's MetricsCollector (node usage
    from metrics-server, smoothed every poll)."""

    def __init__(self, sim: Sim, usage: ResourceUsage) -> None:
        self.sim = sim
        self.usage = usage
        ms = sim.scenario.metrics
        self.spec = ms
        horizon = max(v.window + v.delay for v in (ms.default, ms.metrics_server, ms.load_watcher, ms.koordlet))
        self.pipeline = MetricsPipeline(ms.sampling_interval, horizon)
        self.load_watcher = SimMetricsSource(self.pipeline, ms.load_watcher, sim.epoch, usage.node_info_list,
                                             None, "load-watcher", watcher_form=True)
        self.koordlet = SimMetricsSource(self.pipeline, ms.koordlet, sim.epoch, usage.node_info_list,
                                         usage.running_pods, "koordlet", watcher_form=False)
        self.koordlet_feed = MetricsFeed()
        # Smoothed node usage: row 0 CPU (millicores), row 1 memory (bytes), by sim node id; both resources
        # are smoothed by the same operations, so they are worked out together.
        self.ema = np.zeros((2, 0))
        self.ema_seen = np.zeros(0, dtype=bool)
        # Whether every smoothed value so far is +0.0 or positive (see `collector_poll`).
        self._ema_plain = True
        self._poll_cache: tuple[Any, np.ndarray, np.ndarray, np.ndarray | None] | None = None

    @property
    def ema_cpu(self) -> np.ndarray:
        return self.ema[0]

    @property
    def ema_mem(self) -> np.ndarray:
        return self.ema[1]

    def sample(self) -> None:
        u = self.usage
        u.current()
        n = u.n
        last = self.pipeline.samples[-1] if self.pipeline.samples else None
        if last is not None and last.version == u.version and len(last.node_cpu) == n:
            sample = Sample(self.sim.t, last.node_cpu, last.node_mem, last.slot_cpu, last.slot_mem, last.slot_key,
                            u.version)
        else:
            present = u.col("present")
            node_cpu = np.where(present, u.col("cpu"), np.nan)
            node_mem = np.where(present, u.col("mem") + u.system_reserved_memory, np.nan)
            slot_cpu, slot_mem, slot_key = u.slot_copies()
            sample = Sample(self.sim.t, node_cpu, node_mem, slot_cpu, slot_mem, slot_key, u.version)
        self.pipeline.add(sample)
        self.sim.push(self.sim.t + self.pipeline.sampling_interval, ORDER_SAMPLE, self.sample)

    def koordlet_report(self) -> None:
        self.koordlet_feed.set_metrics(self.koordlet.fetch(self.sim.now_dt()))
        self.sim.push(self.sim.t + self.spec.watcher_refresh, ORDER_SAMPLE, self.koordlet_report)

    def collector_poll(self) -> None:
        """The descheduler's MetricsCollector: smoothed node usage from metrics-server every poll."""
        nv = self.pipeline.node_view(self.spec.metrics_server, self.sim.t)
        if nv is not None:
            n = len(nv.cpu)
            if self.ema.shape[1] < n:
                ema = np.zeros((2, n))
                ema[:, : self.ema.shape[1]] = self.ema
                self.ema = ema
                seen = np.zeros(n, dtype=bool)
                seen[: len(self.ema_seen)] = self.ema_seen
                self.ema_seen = seen
            cached = self._poll_cache
            if cached is None or cached[0] is not nv:
                have = ~np.isnan(nv.cpu)
                values = np.ceil(np.where(have, np.stack([nv.cpu, nv.mem]), 0.0))
                # Samples that are all +0.0 or positive (no sign bit, no NaN), a tenth of each worked out once.
                plain = not (np.signbit(values).any() or np.isnan(values).any())
                cached = self._poll_cache = (nv, have, values, values * 0.1 if plain else None)
            _, have, values, tenth = cached
            seen = self.ema_seen[:n] & have
            prev = self.ema[:, :n]
            if tenth is not None and self._ema_plain:
                self.ema[:, :n] = smooth_plain(prev, values, tenth, seen, have)
            else:
                self._ema_plain = False
                self.ema[:, :n] = np.where(have, smooth(prev, values, seen), prev)
            self.ema_seen[:n] |= have
        self.sim.push(self.sim.t + self.spec.descheduler_poll, ORDER_SAMPLE, self.collector_poll)

    def metrics_collector(self) -> MetricsCollector:
        u = self.usage
        m = len(self.ema_seen)
        # Python ints, truncated toward zero as int() does, converted in one pass.
        ok = (u.nodes["present"][:m] & self.ema_seen).tolist()
        cpu = self.ema_cpu.astype(np.int64).tolist()
        mem = self.ema_mem.astype(np.int64).tolist()
        # The ids stay (nodes only join), so the collector reads the columns through them, without a dict per node.
        nodes = NodeUsageColumns(u.node_ids, cpu, mem, ok)
        view = self.pipeline.node_view(self.spec.metrics_server, self.sim.t)
        pods = self.sim.pods

        def locate(key: str) -> tuple[int, int] | None:
            sp = pods.get(key)
            if sp is None or sp.slot < 0:
                return None
            return sp.slot, sp.serial

        return MetricsCollector.from_usage(
            nodes, LazyPodMetrics(view, locate, lambda: [sp.key for sp in pods.values() if sp.slot >= 0]), adopt=True)

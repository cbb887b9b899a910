"""Actual usage: one interface over every metrics source, and what its consumers need to read it.

A source (`MetricsSource`) produces `Metrics`: per node (and where the source has them, per pod) what is
used, *when* it was measured (`timestamp`) and over what `window`. Two forms of a node's numbers exist
and both are kept as the source gave them:

- load-watcher's form (`Metric`): a type (CPU, Memory, ...), an operator (AVG, STD, Latest) and a value
  in percent of the node's capacity — what Trimaran consumes;
- absolute usage (`NodeUsage.usage`): cpu in millicores, everything else in units of `Quantity.Value()`
  — what metrics.k8s.io and koordinator's NodeMetric report, and what LoadAwareScheduling and LowNodeLoad
  consume.

`watcher_metrics` and `absolute_usage` convert between the two with the node's capacity, the way
load-watcher's metrics-server provider does (usage / status.capacity × 100).

Staleness: every source stamps its data; consumers decide what stale means (`is_stale`). Data is judged
at `reference_time`: the `--now` the user gave, or the wall clock for a live source. A *captured* source
(a snapshot or a file) replayed without `--now` is judged at its own moment — its newest timestamp —
because a capture is one moment: replaying last year's snapshot must not make every metric in it stale.

A consumer is handed usage in one of three ways: a fixed `Metrics` reading (`--metrics`, a snapshot), a
`MetricsFeed` whose owner pushes each new reading (`set_metrics`) and which the consumer asks for its
`latest()` each time, or a `MetricsSource` the consumer itself polls (Trimaran's 30-second refresh).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import ClassVar

from kubesched.api.duration import read_duration_seconds
from kubesched.errors import InputError

# load-watcher's metric types and operators (watcher.CPU, watcher.Average, ...).
CPU_TYPE = "CPU"
MEMORY_TYPE = "Memory"
AVERAGE = "AVG"
STD = "STD"
LATEST = "Latest"
TYPE_OF_RESOURCE = {"cpu": CPU_TYPE, "memory": MEMORY_TYPE}
RESOURCE_OF_TYPE = {CPU_TYPE: "cpu", MEMORY_TYPE: "memory"}


class WallClockTime(datetime):
    """The wall clock, as the CLI uses it when no --now was given.

    A plain datetime means "the user chose this moment"; this subclass means "nobody chose, it is just
    now" — which is what lets a replayed capture be judged at its own moment (see `reference_time`).
    """


def wall_clock_now() -> WallClockTime:
    return WallClockTime.now(UTC)


def is_wall_clock(now: datetime) -> bool:
    return isinstance(now, WallClockTime)


def clock_datetime(seconds: float, base: object = None) -> datetime:
    """A component's clock reading (unix seconds) as a datetime, keeping `base`'s wall-clock mark.

    `base` is the run's starting moment (the CLI's `--now`, or the marked wall clock); a clock that was
    never set (0) reads as `base`.
    """
    if not seconds and isinstance(base, datetime):
        return base
    if isinstance(base, datetime) and is_wall_clock(base):
        return WallClockTime.fromtimestamp(seconds, UTC)
    return datetime.fromtimestamp(seconds, UTC)


def parse_window(value: object, field: str) -> float:
    """A window or aggregation duration of a metrics document in seconds: a Go duration ("15m", "1m30s"), or
    the number of seconds some documents give."""
    return read_duration_seconds(value, field, example="5m or 90s", numbers=True)


@dataclass(frozen=True, slots=True)
class Window:
    """The interval the numbers summarise: load-watcher's Window (duration string, unix start/end)."""

    duration: str = ""
    start: float = 0.0
    end: float = 0.0

    @property
    def seconds(self) -> float:
        if self.end > self.start:
            return self.end - self.start
        try:
            return parse_window(self.duration, "window.duration")
        except InputError:
            return 0.0


@dataclass(frozen=True, slots=True)
class Metric:
    """load-watcher's Metric: a value in percent of the node's capacity."""

    type: str
    operator: str
    value: float
    name: str = ""
    rollup: str = ""


@dataclass(slots=True)
class NodeUsage:
    """What one node uses, as its source reported it."""

    name: str
    metrics: list[Metric] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    # The same usage exactly (cpu in millicores), when the source gave quantities (metrics.k8s.io reports
    # nanocores; sums over pods are exact before rounding, as apimachinery's Quantity sums are).
    exact: dict[str, Fraction] = field(default_factory=dict)
    # Usage not attributed to any pod (koordinator's SystemUsage), when the source knows it.
    system_usage: dict[str, int] | None = None
    system_exact: dict[str, Fraction] | None = None
    # Percentile aggregates over a duration (koordinator's AggregatedNodeUsages): (type, seconds) -> usage.
    aggregated: dict[tuple[str, float], dict[str, int]] = field(default_factory=dict)
    # How often the reporter refreshes this node (koordinator's collectPolicy.reportIntervalSeconds).
    report_interval: float | None = None
    timestamp: float | None = None
    window: Window | None = None


@dataclass(slots=True)
class PodUsage:
    """What one pod uses (the sum over its containers)."""

    key: str
    usage: dict[str, int]
    exact: dict[str, Fraction] = field(default_factory=dict)
    node: str = ""
    # The koordinator priority class the reporter attached (koordlet does; metrics-server does not).
    priority_class: str | None = None
    timestamp: float | None = None
    window: Window | None = None


@dataclass(slots=True)
class Metrics:
    """One collection from one source."""

    source: str
    nodes: dict[str, NodeUsage] | None  # None: never populated (upstream's nil NodeMetricsMap)
    pods: dict[str, PodUsage] = field(default_factory=dict)
    timestamp: float | None = None
    window: Window | None = None
    # A capture (snapshot, file) rather than a live reading: judged at its own moment without --now.
    captured: bool = True
    # koordinator NodeMetric objects that carry no status.nodeMetric: node -> status.updateTime (None when
    # unset). They are not usage, but LoadAwareScheduling still judges their freshness (upstream checks
    # expiry before it skips a NodeMetric without usage).
    without_usage: dict[str, float | None] = field(default_factory=dict)

    def node(self, name: str) -> NodeUsage | None:
        return self.nodes.get(name) if self.nodes is not None else None

    def node_timestamp(self, name: str) -> float | None:
        n = self.node(name)
        if n is not None and n.timestamp:
            return n.timestamp
        return self.timestamp or None

    def node_window(self, name: str) -> Window:
        n = self.node(name)
        if n is not None and n.window is not None:
            return n.window
        return self.window or Window()

    def newest_timestamp(self) -> float | None:
        stamps = [t for t in self._timestamps() if t]
        return max(stamps) if stamps else None

    def _timestamps(self) -> Iterable[float | None]:
        yield self.timestamp
        for n in (self.nodes or {}).values():
            yield n.timestamp
        for p in self.pods.values():
            yield p.timestamp
        yield from self.without_usage.values()

    def age(self, name: str, now: datetime) -> float | None:
        """Seconds since the node's data was measured, judged at `reference_time`; None when unknown."""
        t = self.node_timestamp(name)
        if t is None:
            return None
        return reference_time(now, self) - t

    def pods_on(self, node: str) -> list[PodUsage]:
        return [p for p in self.pods.values() if p.node == node]


def reference_time(now: datetime, metrics: Metrics | None = None) -> float:
    """The moment data is judged at: --now, or for a capture replayed without --now its newest timestamp."""
    if metrics is not None and metrics.captured and is_wall_clock(now):
        newest = metrics.newest_timestamp()
        if newest is not None:
            return newest
    return now.timestamp()


def is_stale(age: float | None, max_age: float | None) -> bool:
    """A consumer's rule: with a maximum age set, data older than it — or of unknown age — is stale."""
    if max_age is None or max_age <= 0:
        return False
    return age is None or age > max_age


def merge(collections: Iterable[Metrics]) -> Metrics:
    """Several collections as one; a later collection's node or pod replaces an earlier one's."""
    out = Metrics(source="", nodes=None, captured=True)
    names = []
    for m in collections:
        names.append(m.source)
        if m.nodes is not None:
            out.nodes = {**(out.nodes or {}), **m.nodes}
            for name in m.nodes:
                out.without_usage.pop(name, None)
        for name, stamp in m.without_usage.items():
            out.without_usage[name] = stamp
            if out.nodes is not None:
                out.nodes.pop(name, None)
        out.pods.update(m.pods)
        if m.timestamp and (out.timestamp is None or m.timestamp > out.timestamp):
            out.timestamp = m.timestamp
            out.window = m.window
        out.captured = out.captured and m.captured
    out.source = "+".join(n for n in names if n)
    return out


# ---------------------------------------------------------------- the two forms of a node's numbers


def resource_data(metrics: Iterable[Metric], metric_type: str) -> tuple[float, float, bool]:
    """trimaran.GetResourceData: (average, standard deviation, found) for one type.

    AVG wins; a Latest (or operator-less) value stands in for the average only while no AVG was seen.
    """
    avg = std = 0.0
    avg_found = found = False
    for m in metrics:
        if m.type != metric_type:
            continue
        if m.operator == AVERAGE:
            avg = m.value
            avg_found = True
        elif m.operator == STD:
            std = m.value
        elif m.operator in ("", LATEST) and not avg_found:
            avg = m.value
        found = True
    return avg, std, found


def watcher_metrics(node: NodeUsage, capacity: dict[str, int]) -> list[Metric]:
    """The node's numbers in load-watcher's form.

    Absolute usage becomes a Latest percentage of capacity, as load-watcher's metrics-server provider
    computes it: float(100 × usage) / capacity (cpu in millicores). A node without capacity for a
    resource gets no metric for it.
    """
    if node.metrics:
        return node.metrics
    out = []
    for resource in ("cpu", "memory"):
        used = node.usage.get(resource)
        cap = capacity.get(resource, 0)
        if used is None or cap <= 0:
            continue
        out.append(Metric(TYPE_OF_RESOURCE[resource], LATEST, float(100 * used) / float(cap)))
    return out


def absolute_usage(node: NodeUsage, resource: str, capacity: int) -> int | None:
    """The node's usage of one resource in absolute units, converting a percentage when that is all."""
    if resource in node.usage:
        return node.usage[resource]
    metric_type = TYPE_OF_RESOURCE.get(resource)
    if metric_type is None:
        return None
    avg, _std, found = resource_data(node.metrics, metric_type)
    if not found:
        return None
    return int(avg * capacity / 100)


def finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


class MetricsSource(abc.ABC):
    """Where actual usage comes from. `fetch` reads it once; sources stamp what they return."""

    kind: ClassVar[str] = ""

    @abc.abstractmethod
    def fetch(self, now: datetime) -> Metrics:
        """One reading, as of `now` (a live source asks for data at that moment where it can)."""

    def describe(self) -> str:
        return self.kind


class MetricsFeed:
    """The latest reading of usage that its owner keeps current (a simulator's koordlet reporting every
    minute, a controller relaying NodeMetric updates, ...).

    Give one as the scheduler Handle's `extra["metrics"]` (instead of a fixed `Metrics` reading) and the
    load-aware plugins ask it for `latest()` every time they need usage, so each `set_metrics` reaches
    them at once; `version` counts the readings set. Before the first `set_metrics` there is no reading
    (plugins see None: no node has metrics).
    """

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self.version = 0 if metrics is None else 1

    def set_metrics(self, metrics: Metrics | None) -> None:
        """Replace the reading (consumers see it from their next question on)."""
        self._metrics = metrics
        self.version += 1

    def latest(self) -> Metrics | None:
        return self._metrics

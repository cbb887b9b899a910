"""LoadAwareScheduling: koordinator's filter and score on a node's actual usage plus estimated new load.

Mirrors koord-scheduler's `plugins/loadaware`. A node's *estimated* usage is what its metrics report plus,
for every pod the metrics cannot show yet, the part of the pod's estimate beyond its reported usage:
a pod counts as not yet shown when it has no reported usage, when it was scheduled after the metrics'
update time minus the report interval, or while `estimatedSecondsAfterPodScheduled`/`...AfterInitialized`
say so. A pod's estimate is, per resource with a scaling factor, max(request, limit) × factor / 100
(rounded half away from zero, capped at the limit; 250m cpu / 200Mi memory when neither is set; batch and
mid pods are estimated on their batch-/mid- resources). The incoming pod's estimate is added on top.

Filter: for each resource with a threshold, round(estimated / allocatable × 100) must not exceed it
("node(s) cpu usage exceed threshold"); prod pods use `prodUsageThresholds` on prod usage when set;
`aggregated` thresholds use a percentile of the usage instead; a node's `usage-thresholds` annotation
overrides the args. DaemonSet pods always pass. A node without metrics passes (load awareness is an
optimisation); a node whose metrics are older than `nodeMetricExpirationSeconds` is rejected
("node(s) nodeMetric expired") unless `enableScheduleWhenNodeMetricsExpired`.
Score: the weighted mean over resources of (allocatable - estimated) × 100 / allocatable (integer
arithmetic), plus `dominantResourceWeight` × the smallest of them; 0 for nodes without fresh metrics.

Usage comes from the scheduler Handle's `services.metrics`, else the snapshot: koordinator NodeMetric
objects (slo.koordinator.sh) or metrics.k8s.io NodeMetrics/PodMetrics (update time = the NodeMetrics
timestamp, report interval 60 s). `services.metrics` is either a fixed `Metrics` reading (`--metrics`),
read once, or a `MetricsFeed` (kubesched.metrics.base) whose `latest()` reading the plugin asks for every
time it needs usage — koordlet reporting a new NodeMetric is the feed owner's `set_metrics` call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api import koordinator as koord
from kubesched.api.duration import read_duration_seconds
from kubesched.api.objects import Node, Pod, parse_time
from kubesched.api.resources import pod_limits, pod_requests
from kubesched.cluster.events import Event, EventType
from kubesched.cluster.state import ClusterState, NodeInfo
from kubesched.config.plugin_args import OMITEMPTY, PluginArgs
from kubesched.errors import InputError
from kubesched.metrics.base import Metrics, MetricsFeed, absolute_usage, clock_datetime, reference_time
from kubesched.metrics.kubernetes_metrics import attach_nodes, snapshot_metrics
from kubesched.scheduler.framework import (
    MAX_NODE_SCORE,
    SUCCESS,
    ClusterEvent,
    CycleState,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScorePlugin,
    Status,
    unschedulable,
)
from kubesched.scheduler.plugins.gomath import go_div_array, go_round, go_round_array

NAME = "LoadAwareScheduling"


INCOMING_KEY = "IncomingPodEstimated" + NAME
REASON_EXPIRED = "node(s) nodeMetric expired"
REASON_USAGE = "node(s) {} usage exceed threshold"
REASON_AGGREGATED = "node(s) {} aggregated usage exceed threshold"
DEFAULT_MILLI_CPU_REQUEST = 250
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
DEFAULT_REPORT_INTERVAL = 60.0
DEFAULT_EXPIRATION_SECONDS = 180
DEFAULT_RESOURCE_WEIGHTS = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS = {"cpu": 65, "memory": 95}
DEFAULT_SCALING_FACTORS = {"cpu": 85, "memory": 70}
AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
_ARGS = ("filterExpiredNodeMetrics", "nodeMetricExpirationSeconds", "enableScheduleWhenNodeMetricsExpired",
         "resourceWeights", "dominantResourceWeight", "usageThresholds", "prodUsageThresholds", "prodUsageIncludeSys",
         "scoreAccordingProdUsage", "estimator", "estimatedScalingFactors", "estimatedSecondsAfterPodScheduled",
         "estimatedSecondsAfterInitialized", "allowCustomizeEstimation", "aggregated", "supportedResources")
_AGGREGATED_ARGS = ("usageThresholds", "usageAggregationType", "usageAggregatedDuration", "scoreAggregationType",
                    "scoreAggregatedDuration")


# ---------------------------------------------------------------- args (LoadAwareSchedulingArgs)


def _int_map(a: fields.Fields, key: str, lo: int | None = None, hi: int | None = None,
             message: str = "") -> dict[str, int] | None:
    """A map of resource name to integer (None when unset); `message` names a value out of [lo, hi]."""
    if a.get(key) is None:
        return None
    m = a.object(key)
    out = {}
    for name, v in m.raw.items():
        v = fields.integer(v, m.path(str(name)))
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise m.error(str(name), message.format(name=name, value=v))
        out[str(name)] = v
    return out


@dataclass(frozen=True, slots=True)
class LoadAwareSchedulingAggregatedArgs:
    """LoadAwareSchedulingAggregatedArgs: thresholds on a percentile of usage, and the percentile scores use."""

    usage_thresholds: Mapping[str, int] = field(default_factory=dict)
    usage_aggregation_type: str = ""
    usage_aggregated_duration: float = 0.0  # seconds
    score_aggregation_type: str = ""
    score_aggregated_duration: float = 0.0  # seconds

    @classmethod
    def from_raw(cls, a: fields.Fields) -> LoadAwareSchedulingAggregatedArgs:
        thresholds = _int_map(a, "usageThresholds", 0, 100, "resource Threshold of {name} should be from 0 to 100, "
                                                           "got {value}") or {}
        types = []
        for key in ("usageAggregationType", "scoreAggregationType"):
            t = a.string(key) or ""
            if t and t not in AGGREGATION_TYPES:
                raise a.error(key, f"Unsupported value: {t!r}: supported values: {', '.join(AGGREGATION_TYPES)}")
            types.append(t)
        durations = []
        for key in ("usageAggregatedDuration", "scoreAggregatedDuration"):
            d = read_duration_seconds(a.raw.get(key, 0) or 0, a.path(key), example="5m or 90s", numbers=True)
            if d < 0:
                raise a.error(key, "duration must be >= 0")
            durations.append(d)
        return cls(thresholds, types[0], durations[0], types[1], durations[1])


@dataclass(frozen=True, slots=True)
class LoadAwareSchedulingArgs(PluginArgs):
    """koordinator's LoadAwareSchedulingArgs with its v1beta3 defaults and ValidateLoadAwareSchedulingArgs."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS
    enable_schedule_when_node_metrics_expired: bool = False
    resource_weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    dominant_resource_weight: int = field(default=0, metadata=OMITEMPTY)
    usage_thresholds: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE_THRESHOLDS))
    prod_usage_thresholds: Mapping[str, int] = field(default_factory=dict)
    prod_usage_include_sys: bool = field(default=False, metadata=OMITEMPTY)
    score_according_prod_usage: bool = field(default=False, metadata=OMITEMPTY)
    estimator: str = field(default="", metadata=OMITEMPTY)
    estimated_scaling_factors: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_SCALING_FACTORS))
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = field(default=False, metadata=OMITEMPTY)
    aggregated: LoadAwareSchedulingAggregatedArgs | None = None
    supported_resources: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> LoadAwareSchedulingArgs:
        a = fields.Fields(raw, field, allowed=frozenset(_ARGS))
        filter_expired = a.boolean("filterExpiredNodeMetrics", True)
        expiration = a.integer("nodeMetricExpirationSeconds", DEFAULT_EXPIRATION_SECONDS)
        if expiration <= 0:
            raise a.error("nodeMetricExpirationSeconds", "nodeMetricExpiredSeconds should be a positive value")
        schedule_when_expired = a.boolean("enableScheduleWhenNodeMetricsExpired")
        dominant = a.integer("dominantResourceWeight", 0, lo=0, hi=100)
        weights = _int_map(a, "resourceWeights", 1, 100, "resource Weight of {name} should be a positive value "
                                                        "no more than 100, got {value}")
        if not weights and dominant == 0:
            weights = dict(DEFAULT_RESOURCE_WEIGHTS)
        thresholds = _int_map(a, "usageThresholds", 0, 100, "resource Threshold of {name} should be from 0 to 100, "
                                                         "got {value}")
        prod_thresholds = _int_map(a, "prodUsageThresholds") or {}
        include_sys = a.boolean("prodUsageIncludeSys")
        according_prod = a.boolean("scoreAccordingProdUsage")
        estimator = a.string("estimator") or ""
        if estimator not in ("", "defaultEstimator"):
            raise a.error("estimator", f"unknown estimator {estimator!r}; kubesched has defaultEstimator")
        factors = _int_map(a, "estimatedScalingFactors", 1, 100, "estimated resource ScalingFactor of {name} should "
                                                                  "be from 1 to 100, got {value}")
        scaling = dict(DEFAULT_SCALING_FACTORS) if factors is None else {**DEFAULT_SCALING_FACTORS, **factors}
        for r in weights or {}:
            if r not in scaling:
                raise a.error("estimatedScalingFactors", f"Not found: {r!r}")
        after_scheduled = a.integer("estimatedSecondsAfterPodScheduled")
        after_initialized = a.integer("estimatedSecondsAfterInitialized")
        allow_customize = a.boolean("allowCustomizeEstimation")
        aggregated = (LoadAwareSchedulingAggregatedArgs.from_raw(a.object("aggregated", frozenset(_AGGREGATED_ARGS)))
                      if a.get("aggregated") is not None else None)
        supported = tuple(str(x) for x in a.sequence("supportedResources"))
        return cls(filter_expired, expiration, schedule_when_expired, weights or {}, dominant, thresholds or
                   dict(DEFAULT_USAGE_THRESHOLDS), prod_thresholds, include_sys, according_prod, estimator, scaling,
                   after_scheduled, after_initialized, allow_customize, aggregated, supported)


def _condition_time(pod: Pod, kind: str) -> float | None:
    """lastTransitionTime of the pod's `kind` condition when it is True (and stamped)."""
    for c in pod.status.get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True":
            try:
                t = parse_time(c.get("lastTransitionTime"), f"status.conditions[{kind}].lastTransitionTime")
            except InputError:
                return None
            return t.timestamp() if t is not None else None
    return None


@dataclass(slots=True)
class AssignInfo:
    timestamp: float
    pod: Pod
    estimated: np.ndarray | None
    deadline: float | None


@dataclass(slots=True)
class NodeState:
    """The cached sums of one node: usage, estimates of the pods the metrics miss, and their metric."""

    found: bool = False
    # False for a NodeMetric without status.nodeMetric: found (its freshness is judged) but not used.
    has_usage: bool = True
    update_time: float | None = None
    node_usage: np.ndarray | None = None
    prod_usage: np.ndarray | None = None
    node_delta: np.ndarray | None = None
    prod_delta: np.ndarray | None = None
    node_estimated: np.ndarray | None = None
    aggregated: dict[tuple[str, float], np.ndarray] = field(default_factory=dict)


@dataclass(slots=True)
class _Table:
    """Per node-table row: the estimated usage of existing pods (one variant), whether the node has a
    metric (and whether it carries usage), and its update time (NaN when unknown). Rows of nodes whose
    pods changed are `dirty`."""

    key: Any
    estimated: np.ndarray
    found: np.ndarray
    has_usage: np.ndarray
    update: np.ndarray
    dirty: set[str] = field(default_factory=set)


class LoadAwareScheduling(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin):
    name = NAME
    Args = LoadAwareSchedulingArgs
    args: LoadAwareSchedulingArgs

    def __init__(self, args: LoadAwareSchedulingArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        names = {"cpu", "memory", *args.usage_thresholds, *args.prod_usage_thresholds, *args.resource_weights,
                 *args.estimated_scaling_factors, *args.supported_resources}
        if args.aggregated is not None:
            names |= set(args.aggregated.usage_thresholds)
        self.resources = sorted(names)  # ResourceVectorizer: sorted names
        self.index = {r: i for i, r in enumerate(self.resources)}
        weights_vec = self.vec(args.resource_weights)
        self.score_weights = None if (args.dominant_resource_weight == 0 and not weights_vec.any()) else weights_vec
        # The cache of pods assigned to nodes (podAssignCache), kept current by the cluster's events.
        self.assigned: dict[str, dict[str, AssignInfo]] = {}
        self._where: dict[str, str] = {}
        self._states: dict[str, tuple[Any, NodeState]] = {}
        self._version = 0
        self._alloc: dict[str, tuple[Node, np.ndarray]] = {}
        self._tables: dict[tuple[bool, str, float], _Table] = {}
        self._static: tuple[Any, np.ndarray, np.ndarray] | None = None
        self._profiles: dict[str, tuple[Node, Any]] = {}
        # The reading in use and its number (caches key on the number: a new reading invalidates them).
        self._reading: Metrics | None = None
        self._reading_version = 0
        self._read_fixed = False
        for pod in handle.cluster.pods.values():
            if pod.node_name:
                self.assign(pod.node_name, pod)
        handle.cluster.subscribe(self._on_event, index=True)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", ("delete",)), ClusterEvent("NodeMetric", ("add", "update", "delete"))]

    # ------------------------------------------------------------ vectors

    def vec(self, values: Mapping[str, int]) -> np.ndarray:
        """ResourceVectorizer.ToFactorVec (names outside the vectorizer are dropped)."""
        out = np.zeros(len(self.resources), dtype=np.int64)
        for r, v in values.items():
            i = self.index.get(r)
            if i is not None:
                out[i] = v
        return out

    def allocatable(self, node: Node) -> np.ndarray:
        """EstimateNode as a vector, memoised per node object (a changed node is a new object)."""
        cached = self._alloc.get(node.name)
        if cached is None or cached[0] is not node:
            cached = (node, self.vec(koord.estimate_node_allocatable(node)))
            self._alloc[node.name] = cached
        return cached[1]

    # ------------------------------------------------------------ estimation

    def estimate_pod(self, pod: Pod) -> dict[str, int]:
        """DefaultEstimator.EstimatePod."""
        factors: dict[str, int] | None = None
        if self.args.allow_customize_estimation:
            factors = koord.custom_scaling_factors(pod)
        if not factors:
            factors = dict(self.args.estimated_scaling_factors)
        else:
            factors = {**self.args.estimated_scaling_factors, **factors}
        requests, limits = pod_requests(pod), pod_limits(pod)
        priority = koord.priority_class(pod)
        out = {}
        for resource, factor in factors.items():
            real = koord.translate_resource_name(priority, resource)
            out[resource] = self._estimate(requests, limits, real, factor)
        return out

    @staticmethod
    def _estimate(requests: dict[str, Fraction], limits: dict[str, Fraction], resource: str, factor: int) -> int:
        limit = limits.get(resource, Fraction(0))
        request = requests.get(resource, Fraction(0))
        quantity = limit if limit > request else request
        if quantity == 0:
            if resource in ("cpu", koord.BATCH_CPU):
                return DEFAULT_MILLI_CPU_REQUEST
            if resource in ("memory", koord.BATCH_MEMORY):
                return DEFAULT_MEMORY_REQUEST
            return 0
        value = koord.units(resource, quantity)
        limit_value = koord.units(resource, limit)
        estimated = go_round(float(value) * float(factor) / 100)
        if limit_value > 0 and estimated > limit_value:
            estimated = limit_value
        return estimated

    def _estimated_vec(self, pod: Pod) -> np.ndarray | None:
        v = self.vec(self.estimate_pod(pod))
        return v if v.any() else None

    def _deadline(self, pod: Pod, timestamp: float) -> float | None:
        """shouldEstimatePodDeadline."""
        after_scheduled = after_initialized = -1
        if self.args.allow_customize_estimation:
            after_scheduled = koord.custom_seconds(pod, koord.ANNOTATION_SECONDS_AFTER_SCHEDULED)
            after_initialized = koord.custom_seconds(pod, koord.ANNOTATION_SECONDS_AFTER_INITIALIZED)
        if self.args.estimated_seconds_after_pod_scheduled is not None and after_scheduled < 0:
            after_scheduled = self.args.estimated_seconds_after_pod_scheduled
        if self.args.estimated_seconds_after_initialized is not None and after_initialized < 0:
            after_initialized = self.args.estimated_seconds_after_initialized
        if after_initialized > 0:
            t = _condition_time(pod, "Initialized")
            if t is not None:
                return t + after_initialized
        if after_scheduled > 0:
            return timestamp + after_scheduled
        return None

    # ------------------------------------------------------------ the assign cache

    def assign(self, node: str, pod: Pod) -> None:
        if not node or pod.is_terminal:
            return
        t = _condition_time(pod, "PodScheduled")
        if t is None:
            t = self.handle.now()
        self.unassign(pod)
        self.assigned.setdefault(node, {})[pod.key] = AssignInfo(t, pod, self._estimated_vec(pod), self._deadline(pod, t))
        self._where[pod.key] = node
        self._touch(node)

    def unassign(self, pod: Pod) -> None:
        node = self._where.pop(pod.key, None)
        if node is None:
            return
        infos = self.assigned.get(node)
        if infos is not None:
            infos.pop(pod.key, None)
            if not infos:
                del self.assigned[node]
        self._touch(node)

    def _touch(self, node: str) -> None:
        self._states.pop(node, None)
        self._version += 1
        for tables in self._tables.values():
            tables.dirty.add(node)

    def _on_event(self, ev: Event) -> None:
        """koord-scheduler's podAssignCache: pods seen bound (through the API), and their removal."""
        if ev.kind != "Pod":
            return
        obj = ev.obj
        t = ev.type
        if t is EventType.DELETED or t is EventType.UNBOUND:
            self.unassign(obj)
        elif t is EventType.BOUND:
            if self._where.get(obj.key) != ev.node:
                self.assign(ev.node, obj)
        elif (t is EventType.ADDED or t is EventType.UPDATED) and obj.node_name:
            if obj.is_terminal:
                self.unassign(obj)
            elif t is EventType.ADDED or ev.old is None or ev.old.node_name != obj.node_name:
                # A status update of a pod already cached on its node keeps its stamp.
                self.assign(obj.node_name, obj)

    # ------------------------------------------------------------ metrics

    def metrics(self) -> Metrics | None:
        """The NodeMetric reading to judge by: a MetricsFeed's latest (asked every time), else the fixed
        reading of `--metrics` or the snapshot (read once)."""
        given = self.handle.services.metrics
        if isinstance(given, MetricsFeed):
            latest = given.latest()
            if latest is not self._reading:
                self._use(latest)
            return latest
        if not self._read_fixed:
            self._read_fixed = True
            if isinstance(given, Metrics):
                self._use(given)
            else:
                self._use(snapshot_metrics(self.handle.services.snapshot))
        return self._reading

    def _use(self, m: Metrics | None) -> None:
        if m is not None:
            attach_nodes(m, {p.key: p.node_name for p in self.handle.cluster.pods.values() if p.node_name})
        self._reading = m
        self._reading_version += 1

    def _now(self) -> float:
        """The moment metric freshness is judged at (a capture replayed without --now: its own moment)."""
        return reference_time(clock_datetime(self.handle.now(), self.handle.services.start), self.metrics())

    def node_state(self, node: Node) -> NodeState:
        """The node's metric and the sums over its assigned pods (podAssignCache's nodeInfo)."""
        metrics = self.metrics()
        key = (self._reading_version, node.name)
        cached = self._states.get(node.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        st = NodeState()
        usage = metrics.node(node.name) if metrics is not None else None
        if usage is None and metrics is not None and node.name in metrics.without_usage:
            st.found, st.has_usage = True, False
            st.update_time = metrics.without_usage[node.name]
        if usage is not None:
            st.found = True
            st.update_time = metrics.node_timestamp(node.name) if metrics is not None else None
            capacity = {k: koord.units(k, v) for k, v in node.capacity.items()}
            absolute = dict(usage.usage)
            for r in ("cpu", "memory"):
                if r not in absolute:
                    v = absolute_usage(usage, r, capacity.get(r, 0))
                    if v is not None:
                        absolute[r] = v
            st.node_usage = self.vec(absolute)
            agg = {k: self.vec(v) for k, v in usage.aggregated.items() if v}
            longest: dict[str, float] = {}
            for (t, d) in agg:
                longest[t] = max(longest.get(t, 0.0), d)
            for t, d in longest.items():
                agg[(t, 0.0)] = agg[(t, d)]
            st.aggregated = agg
            reported = metrics.pods_on(node.name) if metrics is not None else []
            pod_usages = {p.key: self.vec(p.usage) for p in reported if p.usage}
            prod_keys = set()
            for p in reported:
                if not p.usage:
                    continue
                cls = p.priority_class
                if cls is None:
                    pod = self.handle.cluster.pods.get(p.key)
                    cls = koord.priority_class(pod) if pod is not None else ""
                if cls == koord.PRIORITY_PROD:
                    prod_keys.add(p.key)
            st.prod_usage = np.zeros(len(self.resources), dtype=np.int64)
            if self.args.prod_usage_include_sys:
                if usage.system_usage is not None:
                    system = usage.system_usage
                else:
                    pods_total: dict[str, int] = {}
                    for p in reported:
                        for r, v in p.usage.items():
                            pods_total[r] = pods_total.get(r, 0) + v
                    system = {r: max(0, v - pods_total.get(r, 0)) for r, v in usage.usage.items()}
                st.prod_usage = st.prod_usage + self.vec(system)
            report_interval = usage.report_interval or DEFAULT_REPORT_INTERVAL
            update = st.update_time or 0.0
            st.node_delta = np.zeros(len(self.resources), dtype=np.int64)
            st.prod_delta = np.zeros(len(self.resources), dtype=np.int64)
            st.node_estimated = np.zeros(len(self.resources), dtype=np.int64)
            for info in self.assigned.get(node.name, {}).values():
                self._add_pod(st, info, pod_usages.get(info.pod.key), info.pod.key in prod_keys, update,
                              report_interval)
        self._states[node.name] = (key, st)
        return st

    @staticmethod
    def _add_delta(acc: np.ndarray, est: np.ndarray, used: np.ndarray | None) -> None:
        """v += max(0, x - y)."""
        d = est - used if used is not None else est
        acc += np.maximum(d, 0)

    def _add_pod(self, st: NodeState, info: AssignInfo, used: np.ndarray | None, reported_prod: bool,
                 update: float, report_interval: float) -> None:
        """nodeInfo.addPod."""
        assert st.prod_usage is not None and st.node_delta is not None and st.prod_delta is not None
        assert st.node_estimated is not None
        prod = koord.priority_class(info.pod) == koord.PRIORITY_PROD
        active_prod = prod and reported_prod
        if active_prod and used is not None:
            st.prod_usage += used
        est = info.estimated
        if est is None:
            return
        should = (used is None or update - report_interval < info.timestamp
                  or (info.deadline is not None and info.deadline > update))
        if should:
            self._add_delta(st.node_delta, est, used)
        st.node_estimated += est
        if not prod:
            return
        if not active_prod and used is not None:
            used, should = None, True
        if should:
            self._add_delta(st.prod_delta, est, used)

    def _expired(self, st: NodeState) -> bool:
        if st.update_time is None:
            return True
        exp = self.args.node_metric_expiration_seconds or 0
        return exp > 0 and self._now() - st.update_time >= exp

    def estimated_existing(self, st: NodeState, prod: bool, agg_type: str, agg_duration: float) -> np.ndarray:
        """GetNodeMetricAndEstimatedOfExisting (for a node whose metric was found)."""
        out = np.zeros(len(self.resources), dtype=np.int64)
        if prod:
            assert st.prod_usage is not None and st.prod_delta is not None
            return out + st.prod_usage + st.prod_delta
        usage = st.node_usage
        if agg_type:
            usage = st.aggregated.get((agg_type, agg_duration))
            if usage is None and agg_duration == 0:
                usage = st.node_usage
        if usage is not None:
            assert st.node_delta is not None
            return out + usage + st.node_delta
        assert st.node_estimated is not None
        return out + st.node_estimated

    # ------------------------------------------------------------ PreFilter / Filter

    def pre_filter(self, state: CycleState, pod: Pod, cluster: ClusterState) -> tuple[PreFilterResult | None, Status]:
        self._incoming(state, pod)
        return None, SUCCESS

    def _incoming(self, state: CycleState, pod: Pod) -> np.ndarray:
        v = state.read(INCOMING_KEY)
        if v is None:
            v = self.vec(self.estimate_pod(pod))
            state.write(INCOMING_KEY, v)
        return v  # type: ignore[no-any-return]

    def _filter_profile(self, node: Node) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, Any] | None]:
        """(usage thresholds, prod thresholds, aggregated profile) for the node: args, or its annotation."""
        cached = self._profiles.get(node.name)
        if cached is None or cached[0] is not node:
            cached = (node, self._make_filter_profile(node))
            self._profiles[node.name] = cached
        return cached[1]  # type: ignore[no-any-return]

    def _make_filter_profile(self, node: Node) -> tuple[np.ndarray | None, np.ndarray | None, dict[str, Any] | None]:
        base_usage = self.vec(self.args.usage_thresholds) if self.args.usage_thresholds else None
        base_prod = self.vec(self.args.prod_usage_thresholds) if self.args.prod_usage_thresholds else None
        base_agg = None
        aggregated = self.args.aggregated
        if aggregated is not None and aggregated.usage_thresholds and aggregated.usage_aggregation_type:
            base_agg = {"thresholds": self.vec(aggregated.usage_thresholds), "type": aggregated.usage_aggregation_type,
                        "duration": aggregated.usage_aggregated_duration}
        custom = koord.custom_usage_thresholds(node)
        if custom is None:
            return base_usage, base_prod, base_agg
        agg = custom.aggregated
        if agg is not None and not (agg.get("usageThresholds") and agg.get("usageAggregationType")):
            agg = None
        if not custom.usage_thresholds and not custom.prod_usage_thresholds and agg is None:
            return base_usage, base_prod, base_agg
        usage = self.vec(custom.usage_thresholds) if custom.usage_thresholds else base_usage
        prod = self.vec(custom.prod_usage_thresholds) if custom.prod_usage_thresholds else base_prod
        if agg is None:
            out_agg = base_agg
        else:
            try:
                duration = read_duration_seconds(agg.get("usageAggregatedDuration") or 0, "usageAggregatedDuration",
                                                 numbers=True)
                thresholds = {str(k): int(v) for k, v in agg["usageThresholds"].items()}
            except (InputError, TypeError, ValueError):
                return base_usage, base_prod, base_agg
            out_agg = {"thresholds": self.vec(thresholds), "type": str(agg["usageAggregationType"]),
                       "duration": duration}
        return usage, prod, out_agg

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status:
        node = node_info.node
        if any(o.kind == "DaemonSet" for o in pod.meta.owner_references):
            return SUCCESS
        usage_t, prod_t, agg = self._filter_profile(node)
        prod_pod = prod_t is not None and bool(prod_t.any()) and koord.priority_class(pod) == koord.PRIORITY_PROD
        is_agg = False
        if prod_pod:
            thresholds = prod_t
        elif agg is not None:
            thresholds = agg["thresholds"]
            is_agg = True
        else:
            thresholds = usage_t
        if thresholds is None or not thresholds.any():
            return SUCCESS
        st = self.node_state(node)
        if not st.found:
            return SUCCESS
        if self.args.filter_expired_node_metrics and self.args.node_metric_expiration_seconds and self._expired(st):
            if not self.args.enable_schedule_when_node_metrics_expired:
                return unschedulable(REASON_EXPIRED)
            return SUCCESS
        if not st.has_usage:
            return SUCCESS
        agg_type, agg_duration = ("", 0.0)
        if not prod_pod and is_agg and agg is not None:
            agg_type, agg_duration = agg["type"], agg["duration"]
        estimated = self.estimated_existing(st, prod_pod, agg_type, agg_duration) + self._incoming(state, pod)
        allocatable = self.allocatable(node)
        for i, limit in enumerate(thresholds):
            if limit == 0 or allocatable[i] == 0:
                continue
            usage = go_round(float(estimated[i]) / float(allocatable[i]) * 100)
            if usage <= limit:
                continue
            return unschedulable((REASON_AGGREGATED if is_agg else REASON_USAGE).format(self.resources[i]))
        return SUCCESS

    # ------------------------------------------------------------ the vectorised forms

    def _table(self, cluster: ClusterState, prod: bool, agg_type: str, agg_duration: float) -> _Table:
        """The existing-estimate table of one variant, rebuilt when nodes change, rows refreshed when dirty."""
        variant = (prod, agg_type, agg_duration)
        self.metrics()
        key = (self._reading_version, cluster.node_generation, cluster.num_nodes)
        t = self._tables.get(variant)
        infos = cluster.node_infos
        if t is None or t.key != key:
            n = cluster.num_nodes
            t = _Table(key, np.zeros((n, len(self.resources)), dtype=np.int64), np.zeros(n, dtype=bool),
                       np.zeros(n, dtype=bool), np.full(n, np.nan), {i.name for i in infos})
            self._tables[variant] = t
        if t.dirty:
            for name in t.dirty:
                info = cluster.node_info_by_name.get(name)
                if info is None:
                    continue
                st = self.node_state(info.node)
                r = info.index
                t.found[r] = st.found
                t.has_usage[r] = st.has_usage
                t.update[r] = st.update_time if st.update_time is not None else np.nan
                t.estimated[r] = (self.estimated_existing(st, prod, agg_type, agg_duration)
                                  if st.found and st.has_usage else 0)
            t.dirty = set()
        return t

    def _static_rows(self, cluster: ClusterState) -> tuple[np.ndarray, np.ndarray]:
        """(allocatable matrix, whether the node has its own usage-thresholds annotation) per row."""
        key = (cluster.node_generation, cluster.num_nodes)
        if self._static is None or self._static[0] != key:
            alloc = np.zeros((cluster.num_nodes, len(self.resources)), dtype=np.int64)
            custom = np.zeros(cluster.num_nodes, dtype=bool)
            for info in cluster.node_infos:
                alloc[info.index] = self.allocatable(info.node)
                custom[info.index] = koord.ANNOTATION_USAGE_THRESHOLDS in info.node.meta.annotations
            self._static = (key, alloc, custom)
        return self._static[1], self._static[2]

    def _expired_rows(self, update: np.ndarray) -> np.ndarray:
        exp = self.args.node_metric_expiration_seconds or 0
        unknown = np.isnan(update)
        if exp <= 0:
            return unknown
        return unknown | (self._now() - np.where(unknown, 0.0, update) >= exp)

    def filter_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        ok = np.ones(len(rows), dtype=bool)
        if any(o.kind == "DaemonSet" for o in pod.meta.owner_references):
            return ok
        alloc, custom = self._static_rows(cluster)
        infos = cluster.node_infos
        # Nodes with their own thresholds go through the per-node form.
        for i in np.flatnonzero(custom[rows]):
            ok[i] = self.filter(state, pod, infos[rows[i]]).is_success
        plain = ~custom[rows]
        if not plain.any():
            return ok
        usage_t = self.vec(self.args.usage_thresholds) if self.args.usage_thresholds else None
        prod_t = self.vec(self.args.prod_usage_thresholds) if self.args.prod_usage_thresholds else None
        agg = self.args.aggregated
        prod_pod = prod_t is not None and bool(prod_t.any()) and koord.priority_class(pod) == koord.PRIORITY_PROD
        variant: tuple[bool, str, float] = (prod_pod, "", 0.0)
        if prod_pod:
            thresholds = prod_t
        elif agg is not None and agg.usage_thresholds and agg.usage_aggregation_type:
            thresholds = self.vec(agg.usage_thresholds)
            variant = (False, agg.usage_aggregation_type, agg.usage_aggregated_duration)
        else:
            thresholds = usage_t
        if thresholds is None or not thresholds.any():
            return ok
        t = self._table(cluster, *variant)
        sel = rows[plain]
        found = t.found[sel]
        verdict = np.ones(len(sel), dtype=bool)
        if self.args.filter_expired_node_metrics and self.args.node_metric_expiration_seconds:
            expired = found & self._expired_rows(t.update[sel])
        else:
            expired = np.zeros(len(sel), dtype=bool)
        if not self.args.enable_schedule_when_node_metrics_expired:
            verdict &= ~expired
        check = found & ~expired & t.has_usage[sel]
        a = alloc[sel]
        est = t.estimated[sel] + self._incoming(state, pod)
        with np.errstate(divide="ignore", invalid="ignore"):
            usage = np.where(a > 0, est / np.where(a > 0, a, 1) * 100, 0.0)
        over = (thresholds > 0) & (a > 0) & (go_round_array(usage) > thresholds)
        verdict &= ~(check & over.any(axis=1))
        ok[plain] = verdict
        return ok

    # ------------------------------------------------------------ Score

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status]:
        if self.score_weights is None:
            return 0, SUCCESS
        node = node_info.node
        prod_pod = self.args.score_according_prod_usage and koord.priority_class(pod) == koord.PRIORITY_PROD
        agg_type, agg_duration = "", 0.0
        aggregated = self.args.aggregated
        if aggregated is not None and not prod_pod and aggregated.score_aggregation_type:
            agg_type, agg_duration = aggregated.score_aggregation_type, aggregated.score_aggregated_duration
        st = self.node_state(node)
        if not st.found:
            return 0, SUCCESS
        if self.args.node_metric_expiration_seconds and self._expired(st):
            return 0, SUCCESS
        if not st.has_usage:
            return 0, SUCCESS
        estimated = self.estimated_existing(st, prod_pod, agg_type, agg_duration) + self._incoming(state, pod)
        return self.scorer(estimated[None, :], self.allocatable(node)[None, :])[0], Status()

    def scorer(self, used: np.ndarray, allocatable: np.ndarray) -> np.ndarray:
        """loadAwareSchedulingScorer over rows: weighted least-used scores plus the dominant resource's."""
        assert self.score_weights is not None
        cap = allocatable
        safe = np.where(cap == 0, 1, cap)
        least = np.where((cap == 0) | (used > cap), 0, go_div_array((cap - used) * MAX_NODE_SCORE, safe))
        weights = self.score_weights
        node_score = (least * weights).sum(axis=1)
        weight_sum = int(weights.sum())
        if self.args.dominant_resource_weight:
            dominant = np.minimum(least.min(axis=1, initial=MAX_NODE_SCORE), MAX_NODE_SCORE)
            node_score = node_score + dominant * self.args.dominant_resource_weight
            weight_sum += self.args.dominant_resource_weight
        if weight_sum <= 0:
            return np.zeros(len(used), dtype=np.int64)
        return go_div_array(node_score, weight_sum).astype(np.int64)

    def score_nodes(self, state: CycleState, pod: Pod, cluster: ClusterState, rows: np.ndarray) -> np.ndarray:
        if self.score_weights is None:
            return np.zeros(len(rows), dtype=np.int64)
        prod_pod = self.args.score_according_prod_usage and koord.priority_class(pod) == koord.PRIORITY_PROD
        agg_type, agg_duration = "", 0.0
        aggregated = self.args.aggregated
        if aggregated is not None and not prod_pod and aggregated.score_aggregation_type:
            agg_type, agg_duration = aggregated.score_aggregation_type, aggregated.score_aggregated_duration
        t = self._table(cluster, prod_pod, agg_type, agg_duration)
        alloc, _custom = self._static_rows(cluster)
        ok = t.found[rows] & t.has_usage[rows]
        if self.args.node_metric_expiration_seconds:
            ok = ok & ~self._expired_rows(t.update[rows])
        used = t.estimated[rows] + self._incoming(state, pod)
        return np.where(ok, self.scorer(used, alloc[rows]), 0).astype(np.int64)

    # ------------------------------------------------------------ Reserve

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if self._where.get(pod.key) != node_name:
            self.assign(node_name, pod)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.unassign(pod)


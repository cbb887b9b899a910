"""LowNodeLoad: koordinator's load-aware rebalancing — evict from nodes whose *actual usage* is high.

Mirrors koordinator's `descheduler/framework/plugins/loadaware` (low_node_load.go, utilization_util.go).
For each node pool (the v1alpha2 top-level thresholds become the first pool, `__default_node_pool__`):

1. Usage per node: system usage plus the usage of the pods reported on it (koordinator NodeMetric), or
   metrics.k8s.io NodeMetrics/PodMetrics (system usage = node usage minus its pods'); `pods` is the pod
   count. Nodes whose metrics are missing or older than `nodeMetricExpirationSeconds` are left out.
   Prod usage counts the koord-prod pods only.
2. Thresholds: percentages of allocatable (raw-allocatable annotation first), `int(pct·0.01·alloc)`; with
   `useDeviationThresholds` the mean usage over the pool's nodes minus/plus the given percentages.
   A resource named in no threshold gets 100% (0 in deviation mode); memory is always a resource.
3. Classify: a schedulable node at or under every low threshold is a destination (node-low, or prod-low,
   or both-low); a node over any high threshold is a source; a node-low or in-between node over a prod
   high threshold is a prod source.
4. Anomaly detection: a source must be abnormal more than `consecutiveAbnormalities` rounds in a row
   (1 means at once); state is kept across cycles, per node, for `detectorCacheTimeout`.
5. Evict, hottest source first (resource-weighted usage), pods in koordinator's order (priority class,
   priority, QoS, deletion and eviction cost, then the highest usage of the over-threshold resources,
   newest first), while the source is over its high threshold and the destinations keep headroom.
   With `nodeFit`, a pod must fit a destination (node selector and affinity, taints, requests) without
   pushing that destination over its high threshold; each fit is booked on the destination.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from kubesched.api import fields
from kubesched.api import koordinator as koord
from kubesched.api.fields import Fields, join
from kubesched.api.objects import Node, Pod
from kubesched.api.qos import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.selectors import LabelSelector, parse_label_selector
from kubesched.cluster.state import ClusterState
from kubesched.cluster.state import NodeInfo as ClusterNodeInfo
from kubesched.config.plugin_args import PluginArgs
from kubesched.descheduler import nodeutil
from kubesched.descheduler.framework import BalancePlugin, EvictionLimitError, EvictOptions, Handle, Status
from kubesched.descheduler.plugins._common import IncludeExclude
from kubesched.descheduler.plugins._gosort import go_sort_slice
from kubesched.errors import InputError
from kubesched.metrics.base import Metrics, PodUsage, absolute_usage, merge, reference_time
from kubesched.metrics.kubernetes_metrics import attach_nodes, metrics_from_objects, snapshot_metrics
from kubesched.scheduler.plugins.gomath import go_div

NAME = "LowNodeLoad"
DEFAULT_NODE_POOL = "__default_node_pool__"
MIN_PERCENTAGE, MAX_PERCENTAGE = 0.0, 100.0
DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180
DEFAULT_DETECTOR_CACHE_TIMEOUT = 5 * 60.0
DEFAULT_DETECTOR_TIMEOUT = 60.0
DEFAULT_CONSECUTIVE_ABNORMALITIES = 5
DEFAULT_CONSECUTIVE_NORMALITIES = 3
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"
_ARGS = ("paused", "dryRun", "numberOfNodes", "nodeMetricExpirationSeconds", "evictableNamespaces", "nodeSelector",
         "podSelectors", "nodeFit", "useDeviationThresholds", "highThresholds", "lowThresholds",
         "prodHighThresholds", "prodLowThresholds", "resourceWeights", "anomalyCondition", "detectorCacheTimeout",
         "nodePools")
_POOL_ARGS = ("name", "nodeSelector", "useDeviationThresholds", "highThresholds", "lowThresholds",
              "prodHighThresholds", "prodLowThresholds", "resourceWeights", "anomalyCondition")
# Unknown fields are reported with the known ones in alphabetical order.
_ARGS_SORTED = tuple(sorted(_ARGS))
_POOL_ARGS_SORTED = tuple(sorted(_POOL_ARGS))

Usage = dict[str, Fraction]


# ---------------------------------------------------------------- args: v1alpha2 defaulting, conversion, validation


@dataclass(frozen=True, slots=True)
class LoadAnomalyCondition:
    """LoadAnomalyCondition: a node is abnormal after more than `consecutive_abnormalities` rounds over its
    threshold; `timeout` (seconds) bounds how long a detector keeps its state."""

    timeout: float = DEFAULT_DETECTOR_TIMEOUT
    consecutive_abnormalities: int = DEFAULT_CONSECUTIVE_ABNORMALITIES
    consecutive_normalities: int = DEFAULT_CONSECUTIVE_NORMALITIES


@dataclass(frozen=True, slots=True)
class LowNodeLoadNodePool:
    """LowNodeLoadNodePool (the internal config's): its nodes, thresholds (percentages; None when unset),
    resource weights and anomaly condition."""

    name: str = ""
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool = False
    low_thresholds: Mapping[str, float] | None = None
    high_thresholds: Mapping[str, float] | None = None
    prod_low_thresholds: Mapping[str, float] | None = None
    prod_high_thresholds: Mapping[str, float] | None = None
    resource_weights: Mapping[str, int] = field(default_factory=dict)
    anomaly_condition: LoadAnomalyCondition = LoadAnomalyCondition()


@dataclass(frozen=True, slots=True)
class LowNodeLoadPodSelector:
    name: str = ""
    selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class LowNodeLoadArgs(PluginArgs):
    """koordinator's LowNodeLoadArgs in its internal form: v1alpha2 defaulted (SetDefaults_LowNodeLoadArgs),
    converted (the top-level thresholds become the first pool, `__default_node_pool__`) and validated
    (ValidateLowLoadUtilizationArgs). Durations are in seconds."""

    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    evictable_namespaces: IncludeExclude = IncludeExclude()
    pod_selectors: tuple[LowNodeLoadPodSelector, ...] = ()
    node_fit: bool = True
    detector_cache_timeout: float = DEFAULT_DETECTOR_CACHE_TIMEOUT
    node_pools: tuple[LowNodeLoadNodePool, ...] = ()

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any] | None, field: str = "") -> LowNodeLoadArgs:
        a = Fields(raw, field, allowed=_ARGS_SORTED)
        top_low = _thresholds(a, "lowThresholds")
        top_high = _thresholds(a, "highThresholds")
        top_prod_low = _thresholds(a, "prodLowThresholds")
        top_prod_high = _thresholds(a, "prodHighThresholds")
        # SetDefaults_LowNodeLoadArgs (its else-if chain fills at most one zero count, as upstream).
        anomaly = _anomaly(a)
        if anomaly is None:
            anomaly = LoadAnomalyCondition()
        elif anomaly.consecutive_abnormalities == 0:
            anomaly = replace(anomaly, consecutive_abnormalities=DEFAULT_CONSECUTIVE_ABNORMALITIES)
        elif anomaly.consecutive_normalities == 0:
            anomaly = replace(anomaly, consecutive_normalities=DEFAULT_CONSECUTIVE_NORMALITIES)
        defaults = {"cpu": 1, "memory": 1}
        for names in (top_low or {}, top_high or {}):
            for k in names:
                defaults[k] = 1
        weights = _weights(a, "resourceWeights")
        if weights is None:
            weights = defaults
        else:
            for k, w in defaults.items():
                if weights.get(k, 0) <= 0:
                    weights[k] = w
        pools = []
        raw_pools = a.get("nodePools")
        if raw_pools is not None and not isinstance(raw_pools, list):
            raise a.error("nodePools", "expected a list of node pools")
        for i, rp in enumerate(raw_pools or []):
            p = Fields(rp, a.path(f"nodePools[{i}]"), allowed=_POOL_ARGS_SORTED)
            pool_anomaly = _anomaly(p)
            if pool_anomaly is None:
                pool_anomaly = anomaly
            else:
                if pool_anomaly.consecutive_abnormalities == 0:
                    pool_anomaly = replace(pool_anomaly, consecutive_abnormalities=anomaly.consecutive_abnormalities)
                if pool_anomaly.consecutive_normalities == 0:
                    pool_anomaly = replace(pool_anomaly, consecutive_normalities=anomaly.consecutive_normalities)
            pw = _weights(p, "resourceWeights")
            pools.append(LowNodeLoadNodePool(
                name=str(p.get("name") or ""),
                node_selector=_selector(p, "nodeSelector"),
                use_deviation_thresholds=p.boolean("useDeviationThresholds"),
                low_thresholds=_or(_thresholds(p, "lowThresholds"), top_low),
                high_thresholds=_or(_thresholds(p, "highThresholds"), top_high),
                prod_low_thresholds=_or(_thresholds(p, "prodLowThresholds"), top_prod_low),
                prod_high_thresholds=_or(_thresholds(p, "prodHighThresholds"), top_prod_high),
                resource_weights=pw if pw is not None else dict(weights),
                anomaly_condition=pool_anomaly,
            ))
        # Convert_v1alpha2_LowNodeLoadArgs_To_config_LowNodeLoadArgs: the top level is the first pool.
        pools.insert(0, LowNodeLoadNodePool(
            name=DEFAULT_NODE_POOL, node_selector=_selector(a, "nodeSelector"),
            use_deviation_thresholds=a.boolean("useDeviationThresholds"),
            low_thresholds=top_low, high_thresholds=top_high, prod_low_thresholds=top_prod_low,
            prod_high_thresholds=top_prod_high, resource_weights=dict(weights), anomaly_condition=anomaly))
        ns = a.object("evictableNamespaces", ("exclude", "include"))
        selectors = []
        raw_selectors = a.get("podSelectors") or []
        if not isinstance(raw_selectors, list):
            raise a.error("podSelectors", "expected a list of {name, selector}")
        for i, rs in enumerate(raw_selectors):
            sd = Fields(rs, a.path(f"podSelectors[{i}]"), allowed=("name", "selector"))
            selectors.append(LowNodeLoadPodSelector(str(sd.get("name") or ""), _selector(sd, "selector")))
        args = cls(
            paused=a.boolean("paused"),
            dry_run=a.boolean("dryRun"),
            number_of_nodes=_int(a, "numberOfNodes", 0),
            node_metric_expiration_seconds=_int(a, "nodeMetricExpirationSeconds", DEFAULT_NODE_METRIC_EXPIRATION_SECONDS),
            evictable_namespaces=IncludeExclude(tuple(str(x) for x in ns.get("include") or []),
                                                tuple(str(x) for x in ns.get("exclude") or [])),
            pod_selectors=tuple(selectors),
            node_fit=a.boolean("nodeFit", True),
            detector_cache_timeout=_duration(a, "detectorCacheTimeout") or DEFAULT_DETECTOR_CACHE_TIMEOUT,
            node_pools=tuple(pools),
        )
        args.validate(field)
        return args

    def validate(self, field: str) -> None:
        """ValidateLowLoadUtilizationArgs."""
        if self.number_of_nodes < 0:
            raise InputError("must be greater than or equal to 0", field=join(field, "numberOfNodes"))
        if self.node_metric_expiration_seconds <= 0:
            raise InputError("nodeMetricExpiredSeconds should be a positive value",
                             field=join(field, "nodeMetricExpirationSeconds"))
        if self.evictable_namespaces.include and self.evictable_namespaces.exclude:
            raise InputError("only one of Include/Exclude namespaces can be set", field=join(field, "evictableNamespaces"))
        for i, pool in enumerate(self.node_pools):
            f = join(field, f"nodePools[{i}]") if i else field
            high = pool.high_thresholds or {}
            prod_high = pool.prod_high_thresholds or {}
            for key, values in (("highThresholds", pool.high_thresholds), ("lowThresholds", pool.low_thresholds),
                                ("prodHighThresholds", pool.prod_high_thresholds),
                                ("prodLowThresholds", pool.prod_low_thresholds)):
                for r, pct in (values or {}).items():
                    if pct < 0:
                        raise InputError("percentage must be greater than or equal to 0", field=f"{join(f, key)}.{r}")
            for r, pct in (pool.low_thresholds or {}).items():
                if r in high and pct > high[r]:
                    raise InputError("low percentage must be less than or equal to highThresholds",
                                     field=f"{join(f, 'lowThresholds')}.{r}")
            for r, pct in prod_high.items():
                if r in high and pct > high[r]:
                    raise InputError("node percentage must be greater than or equal to prodHighThresholds",
                                     field=f"{join(f, 'prodHighThresholds')}.{r}")
            for r, pct in (pool.prod_low_thresholds or {}).items():
                if r in prod_high and pct > prod_high[r]:
                    raise InputError("low percentage must be less than or equal to prodHighThresholds",
                                     field=f"{join(f, 'prodLowThresholds')}.{r}")
            cond = pool.anomaly_condition
            for key, n in (("consecutiveAbnormalities", cond.consecutive_abnormalities),
                           ("consecutiveNormalities", cond.consecutive_normalities)):
                if n <= 0:
                    raise InputError(f"{key} must be greater than 0", field=f"{join(f, 'anomalyCondition')}.{key}")


def _int(a: Fields, key: str, default: int) -> int:
    return a.integer(key, default, whole_floats=True)  # type: ignore[no-any-return]


def _thresholds(a: Fields, key: str) -> dict[str, float] | None:
    if not a.has(key):
        return None
    d = a.object(key)
    return {str(k): fields.number(v, d.path(str(k)), what="a percentage") for k, v in d.raw.items()}


def _weights(a: Fields, key: str) -> dict[str, int] | None:
    if not a.has(key):
        return None
    d = a.object(key)
    return {str(k): 0 if v is None else fields.integer(v, d.path(str(k)), whole_floats=True) for k, v in d.raw.items()}


def _duration(a: Fields, key: str) -> float | None:
    return a.duration_seconds(key, example="5m or 90s", numbers=True)  # type: ignore[no-any-return]


def _anomaly(a: Fields) -> LoadAnomalyCondition | None:
    if not a.has("anomalyCondition"):
        return None
    d = a.object("anomalyCondition", ("consecutiveAbnormalities", "consecutiveNormalities", "timeout"))
    counts = []
    for k in ("consecutiveAbnormalities", "consecutiveNormalities"):
        n = _int(d, k, 0)
        if n < 0:
            raise d.error(k, f"expected a non-negative integer, got {n}")
        counts.append(n)
    # A timeout left unset (or 0) falls back to the detector's default when the detector is made.
    return LoadAnomalyCondition(_duration(d, "timeout") or 0.0, counts[0], counts[1])


def _selector(a: Fields, key: str) -> LabelSelector | None:
    if not a.has(key):
        return None
    return parse_label_selector(a.raw[key], a.path(key))


def _or(a: dict[str, float] | None, b: dict[str, float] | None) -> dict[str, float] | None:
    return dict(a) if a is not None else (dict(b) if b is not None else None)


# ---------------------------------------------------------------- anomaly detection


@dataclass(slots=True)
class Detector:
    """koordinator's BasicDetector: OK ↔ Anomaly on consecutive abnormal/normal marks, with a timeout."""

    timeout: float
    anomaly_after: int  # anomaly when consecutive abnormalities exceed this
    normal_after: int
    anomaly: bool = False
    abnormalities: int = 0
    normalities: int = 0
    expiration: float | None = None

    def _clear(self, now: float) -> None:
        self.abnormalities = self.normalities = 0
        self.expiration = now + self.timeout if self.anomaly else None

    def _set(self, anomaly: bool, now: float) -> None:
        if self.anomaly != anomaly:
            self.anomaly = anomaly
            self._clear(now)

    def state(self, now: float) -> bool:
        if not self.anomaly:
            if self.expiration is not None and self.expiration < now:
                self._clear(now)
        elif (self.expiration is not None and self.expiration < now) or self.normalities > self.normal_after:
            self._set(False, now)
        return self.anomaly

    def mark(self, normal: bool, now: float) -> bool:
        state = self.state(now)
        if normal:
            self.normalities += 1
            self.abnormalities = 0
            if state and self.normalities > self.normal_after:
                self._set(False, now)
        else:
            self.abnormalities += 1
            self.normalities = 0
            if not state and self.abnormalities > self.anomaly_after:
                self._set(True, now)
            elif state:
                self._set(True, now)
        return self.state(now)

    def reset(self, now: float) -> None:
        self._set(False, now)


class DetectorCache:
    """go-cache of detectors by node name: an entry lives `ttl` seconds after it was last set."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self.items: dict[str, tuple[Detector, float]] = {}

    def get(self, name: str, now: float) -> Detector | None:
        item = self.items.get(name)
        if item is None or (self.ttl > 0 and now > item[1]):
            return None
        return item[0]

    def set(self, name: str, detector: Detector, now: float) -> None:
        self.items[name] = (detector, now + self.ttl)


# ---------------------------------------------------------------- usage and thresholds


_ZERO = Fraction(0)
_ONE = Fraction(1)


def _exact_sum(values: Iterable[Fraction | None]) -> Fraction:
    """The exact sum of the quantities (None counts as 0): whole ones are added as ints, which gives the
    same number much faster than Fraction arithmetic."""
    whole = 0
    rest = _ZERO
    for v in values:
        if v is None:
            continue
        if v.denominator == 1:
            whole += v.numerator
        else:
            rest += v
    return rest + whole


def _exact_sums(maps: Iterable[Usage], resources: list[str]) -> list[Fraction]:
    """For each resource, the exact sum of the maps' quantities (`_exact_sum` over all of them in one pass)."""
    n = len(resources)
    whole = [0] * n
    rest = [_ZERO] * n
    idx = list(enumerate(resources))
    for u in maps:
        for j, r in idx:
            v = u.get(r)
            if v is None:
                continue
            if v.denominator == 1:
                whole[j] += v.numerator
            else:
                rest[j] += v
    return [rest[j] + whole[j] for j in range(n)]


def _units_value(resource: str, q: Fraction) -> int:
    """getResourceValue on a quantity in units (cpu already millicores): rounded up."""
    return q.numerator if q.denominator == 1 else value_of(q)


def _exact_usage(p: PodUsage) -> Usage:
    """A reported pod's usage as exact quantities. Read-only: the reading's own map when it has one (the
    plugin never changes a pod's usage)."""
    if p.exact:
        return p.exact
    return {k: Fraction(v) for k, v in p.usage.items()}


def _reported_sums(reported: Iterable[PodUsage], resources: list[str]) -> tuple[list[Fraction], bool]:
    """`_exact_sums` over the reported pods' usage, and whether none of the summed values is negative
    (then any subset of the pods sums to between 0 and these sums)."""
    n = len(resources)
    whole = [0] * n
    rest = [_ZERO] * n
    idx = list(enumerate(resources))
    negative = False
    for p in reported:
        u = p.exact or _exact_usage(p)
        for j, r in idx:
            v = u.get(r)
            if v is None:
                continue
            num, den = v.as_integer_ratio()  # one call instead of two property reads
            if num < 0:
                negative = True
            if den == 1:
                whole[j] += num
            else:
                rest[j] += v
    # A whole sum is made from its int (Fraction + int arithmetic costs more than building the Fraction).
    return [rest[j] + whole[j] if rest[j] else Fraction(whole[j]) for j in range(n)], not negative


def _add_exact(a: Fraction, b: Fraction) -> Fraction:
    """a + b, without Fraction arithmetic when both are whole."""
    na, da = a.as_integer_ratio()
    nb, db = b.as_integer_ratio()
    return Fraction(na + nb) if da == 1 and db == 1 else a + b


class NodeUsage:
    """koordinator's NodeUsage of one node: its pods (as they were when the usage was read), its prod pods,
    its usage and prod usage (the pods' reported usage, plus the system usage for `usage`; `pods` counts
    the pods), every reported pod's usage, its raw allocatable.

    Built from a reading (`from_reading`), only `usage` is computed at once: the pod list, the prod pods,
    the prod usage and the per-pod map are made on first use, which for most nodes of a cycle is never
    (they are neither a source nor, without prod sources, a prod destination). Until then, when no
    reported value is negative, the prod usage of each resource lies between 0 and the sum over all
    reported pods (the pod count between 0 and the pods listed): `prod_over` and `prod_under` decide from
    those bounds when they can, and from the exact prod usage otherwise, so they answer what
    `is_overutilized` and `is_underutilized` on the prod usage answer. The pods are listed from the node's
    NodeInfo as long as it is unchanged since the reading (`LowNodeLoad.evict_from_sources` lists every
    node it will need before it evicts); a list asked for later is an error.
    """

    __slots__ = ("node", "usage", "allocatable", "_all_pods", "_prod_pods", "_prod_usage", "_pod_metrics",
                 "_reported", "_resources", "_pod_sums", "_listing", "_count")

    def __init__(self, node: Node, all_pods: list[Pod], prod_pods: list[Pod], usage: Usage, prod_usage: Usage,
                 pod_metrics: dict[str, Usage], allocatable: dict[str, Fraction]) -> None:
        self.node = node
        self.usage = usage
        self.allocatable = allocatable
        self._all_pods: list[Pod] | None = all_pods
        # The node's NodeInfo and its generation when the usage was read (while the list is not made).
        self._listing: tuple[ClusterNodeInfo, int] | None = None
        self._count = len(all_pods)
        self._prod_pods: list[Pod] | None = prod_pods
        self._prod_usage: Usage | None = prod_usage
        self._pod_metrics: dict[str, Usage] | None = pod_metrics
        self._reported: list[PodUsage] = []
        self._resources: list[str] = []
        # Per resource the sum over every reported pod when none is negative (bounds of the prod usage).
        self._pod_sums: dict[str, Fraction] | None = None

    @classmethod
    def from_reading(cls, node: Node, info: ClusterNodeInfo | None, reported: list[PodUsage], usage: Usage,
                     pod_sums: dict[str, Fraction] | None, allocatable: dict[str, Fraction],
                     resources: list[str]) -> NodeUsage:
        """The node's usage from one reading: `info` holds its pods now (None: it has none), `reported` are
        the pods the reading has on the node (each key once), `pod_sums` their summed usage when no value is
        negative (None otherwise)."""
        out = cls(node, [], [], usage, {}, {}, allocatable)
        if info is not None and info.pods:
            out._all_pods = None
            out._listing = (info, info.generation)
            out._count = len(info.pods)
        out._prod_pods = out._prod_usage = out._pod_metrics = None
        out._reported = reported
        out._resources = resources
        out._pod_sums = pod_sums
        return out

    @property
    def all_pods(self) -> list[Pod]:
        """podutil.ListPodsOnANode as of the reading."""
        return self._all_pods if self._all_pods is not None else self._list()

    def _list(self) -> list[Pod]:
        assert self._listing is not None
        info, generation = self._listing
        if info.generation != generation:
            raise RuntimeError(f"LowNodeLoad: the pods of node {self.node.name} were asked for after they changed "
                               "(list them before evicting)")
        pods = self._all_pods = list(info.pods.values())
        self._listing = None
        return pods

    def list_pods(self, prod: bool) -> None:
        """Make the pod list now (and the prod pods and prod usage, with `prod`): what a pass reads later."""
        if self._all_pods is None:
            self._list()
        if prod and self._prod_usage is None:
            self._make_prod_usage()

    @property
    def pod_metrics(self) -> dict[str, Usage]:
        if self._pod_metrics is None:
            self._pod_metrics = {p.key: p.exact or _exact_usage(p) for p in self._reported}
        return self._pod_metrics

    @property
    def prod_pods(self) -> list[Pod]:
        if self._prod_pods is None:
            self._prod_pods = [p for p in self.all_pods if koord.priority_class(p) == koord.PRIORITY_PROD]
        return self._prod_pods

    @property
    def prod_usage(self) -> Usage:
        """The prod pods' reported usage per resource, and `pods`: how many prod pods there are."""
        return self._prod_usage if self._prod_usage is not None else self._make_prod_usage()

    def _make_prod_usage(self) -> Usage:
        prod_pods = self.prod_pods
        pod_metrics = self.pod_metrics
        resources = self._resources
        prod_keys = {p.key for p in prod_pods}
        if self._pod_sums is not None and all(k in prod_keys for k in pod_metrics):
            sums = [self._pod_sums[r] for r in resources]  # every reported pod is prod
        else:
            sums = _exact_sums((u for k, u in pod_metrics.items() if k in prod_keys), resources)
        prod_usage = self._prod_usage = dict(zip(resources, sums, strict=True))
        prod_usage["pods"] = Fraction(len(prod_pods))
        return prod_usage

    def _prod_upper(self, limits: Usage) -> bool | None:
        """Whether the upper bound of the prod usage is within `limits` for every resource the prod usage
        has (None: no bound known, or the exact prod usage is already made)."""
        sums = self._pod_sums
        if self._prod_usage is not None or sums is None:
            return None
        for r, limit in limits.items():
            if r == "pods":
                if self._count > limit:
                    return False
            elif r in sums:
                if _above(sums[r], limit):
                    return False
        return True

    def prod_over(self, limits: Usage) -> bool:
        """`is_overutilized(prod_usage, limits)` is not empty."""
        if self._prod_upper(limits):
            return False
        return bool(is_overutilized(self.prod_usage, limits))

    def prod_under(self, limits: Usage) -> bool:
        """`is_underutilized(prod_usage, limits)`."""
        if self._prod_upper(limits):
            return True
        return is_underutilized(self.prod_usage, limits)

    def _fields(self) -> tuple[Any, ...]:
        return (self.node, self.all_pods, self.prod_pods, self.usage, self.prod_usage, self.pod_metrics,
                self.allocatable)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeUsage) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodeUsage({self.node.name!r}, usage={self.usage!r})"


@dataclass
class NodeThresholds:
    low: Usage = field(default_factory=dict)
    high: Usage = field(default_factory=dict)
    prod_low: Usage = field(default_factory=dict)
    prod_high: Usage = field(default_factory=dict)


@dataclass
class NodeInfo:
    usage: NodeUsage
    thresholds: NodeThresholds

    @property
    def name(self) -> str:
        return self.usage.node.name


def raw_allocatable_units(node: Node) -> dict[str, Fraction]:
    """GetNodeRawAllocatableFromNode in units (cpu millicores)."""
    raw = koord.raw_allocatable(node)
    alloc = node.allocatable if raw is None else raw
    return {k: Fraction(_whole_units(k, v)) for k, v in alloc.items()}


def _whole_units(resource: str, q: Fraction) -> int:
    """MilliValue for cpu, Value otherwise (whole quantities without Fraction arithmetic)."""
    if q.denominator == 1:
        return q.numerator * 1000 if resource == "cpu" else q.numerator
    return milli_value_of(q) if resource == "cpu" else value_of(q)


def resource_threshold(alloc: dict[str, Fraction], resource: str, pct: float) -> Fraction:
    """int64(float64(pct) * 0.01 * float64(capacity)) in units."""
    cap = alloc.get(resource, _ZERO)
    return Fraction(int(float(pct) * 0.01 * float(int(cap))))


def new_thresholds(use_deviation: bool, low: Mapping[str, float] | None, high: Mapping[str, float] | None,
                   prod_low: Mapping[str, float] | None, prod_high: Mapping[str, float] | None
                   ) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    """newThresholds: every resource named anywhere (and memory) gets low/high (100%, or 0 with deviation)."""
    lo, hi, plo, phi = dict(low or {}), dict(high or {}), dict(prod_low or {}), dict(prod_high or {})
    names = [*lo, *hi, *plo, *phi, "memory"]
    fill = MIN_PERCENTAGE if use_deviation else MAX_PERCENTAGE
    for r in names:
        if r not in lo:
            lo[r] = fill
            hi[r] = fill
        if r not in plo:
            plo[r] = fill
            phi[r] = fill
    return lo, hi, plo, phi


def _above(a: Fraction, b: Fraction) -> bool:
    """a > b, compared as ints when both are whole (Fraction's comparison costs several times more)."""
    na, da = a.as_integer_ratio()
    nb, db = b.as_integer_ratio()
    return na > nb if da == 1 and db == 1 else a > b


def is_overutilized(usage: Usage, thresholds: Usage) -> dict[str, Fraction]:
    """isNodeOverutilized: the resources whose usage is above their threshold."""
    return {r: usage[r] for r, t in thresholds.items() if r in usage and _above(usage[r], t)}


def is_underutilized(usage: Usage, thresholds: Usage) -> bool:
    for r, t in thresholds.items():
        if r in usage and _above(usage[r], t):
            return False
    return True


def usage_score(usage: Usage, alloc: dict[str, Fraction], weights: dict[str, int]) -> int:
    """ResourceUsageScorer: weighted mean of used·1000/allocatable (integer arithmetic)."""
    score = weight_sum = 0
    for r, q in usage.items():
        w = weights.get(r, 0)
        used, cap = _units_value(r, q), _units_value(r, alloc.get(r, _ZERO))
        s = 0 if cap == 0 else go_div(min(used, cap) * 1000, cap)
        score += s * w
        weight_sum += w
    return 0 if weight_sum == 0 else go_div(score, weight_sum)


def pod_usage_score(usage: Usage, exceeded: Usage, weights: dict[str, int]) -> float:
    """ResourceUsageScorerPod over the resources above threshold."""
    score = 0.0
    weight_sum = 0
    for r in sorted(usage):
        w = weights.get(r, 0)
        req, cap = _units_value(r, usage[r]), _units_value(r, exceeded.get(r, _ZERO))
        if cap == 0:
            s = 0.0
        else:
            ratio = float(req) / float(cap)
            s = 1 / ratio + 1 if ratio >= 1 else ratio
        score += s * float(w)
        weight_sum += w
    return 0.0 if weight_sum == 0 else score / float(weight_sum)


def pod_usage_scorer(exceeded: Usage, weights: dict[str, int]) -> Callable[[Usage], float]:
    """`pod_usage_score(usage, exceeded, weights)` as a function of `usage`, with what depends on the
    node alone worked out once: a resource of weight 0 adds `s * 0.0` (a zero) to the score and 0 to the
    weight sum, so only the weighted ones are visited, in the same (sorted) order."""
    plan = []
    for r in sorted(weights):
        w = weights[r]
        if w:
            plan.append((r, w, float(w), _units_value(r, exceeded.get(r, _ZERO))))

    def score(usage: Usage) -> float:
        total = 0.0
        weight_sum = 0
        for r, w, fw, cap in plan:
            q = usage.get(r)
            if q is None:
                continue
            if cap == 0:
                s = 0.0
            else:
                ratio = float(q.numerator if q.denominator == 1 else value_of(q)) / float(cap)
                s = 1 / ratio + 1 if ratio >= 1 else ratio
            total += s * fw
            weight_sum += w
        return 0.0 if weight_sum == 0 else total / float(weight_sum)

    return score


_KOORD_PRIORITY_ORDER = {koord.PRIORITY_NONE: 5, koord.PRIORITY_PROD: 4, koord.PRIORITY_MID: 3,
                         koord.PRIORITY_BATCH: 2, koord.PRIORITY_FREE: 1}
_KOORD_QOS_ORDER = {koord.QOS_NONE: 5, koord.QOS_SYSTEM: 4, koord.QOS_LSE: 4, koord.QOS_LSR: 3, koord.QOS_LS: 2,
                    koord.QOS_BE: 1}
_K8S_QOS_ORDER = {GUARANTEED: 3, BURSTABLE: 2, BEST_EFFORT: 1}


def _int32_annotation(pod: Pod, key: str) -> int:
    v = pod.meta.annotations.get(key)
    if v is None:
        return 0
    try:
        n = int(v, 10)
    except ValueError:
        return 0
    return n if -(2**31) <= n < 2**31 else 0


def _cmp(a: Any, b: Any) -> int:
    return 0 if a == b else (1 if a > b else -1)


def pod_sort_less(pod_metrics: dict[str, Usage], exceeded: Usage, weights: dict[str, int]) -> Callable[[Pod, Pod], bool]:
    """koordinator's PodSorter(Reverse(PodUsage(...))) as a Less function (ascending = evicted first)."""

    def usage_cmp(p1: Pod, p2: Pod) -> int:
        m1, m2 = pod_metrics.get(p1.key), pod_metrics.get(p2.key)
        if m1 is None or m2 is None:
            a, b = m1 is None, m2 is None  # cmpBool(!found1, !found2)
            return 0 if a == b else (-1 if not b else 1)
        return _cmp(pod_usage_score(m1, exceeded, weights), pod_usage_score(m2, exceeded, weights))

    def created(p: Pod) -> float:
        t = p.meta.creation_timestamp
        return t.timestamp() if t is not None else float("-inf")

    comparators: list[Callable[[Pod, Pod], int]] = [
        lambda a, b: _cmp(_KOORD_PRIORITY_ORDER.get(koord.priority_class(a), 5),
                          _KOORD_PRIORITY_ORDER.get(koord.priority_class(b), 5)),
        lambda a, b: _cmp(a.effective_priority, b.effective_priority),
        lambda a, b: _cmp(_K8S_QOS_ORDER.get(qos_class(a), 0), _K8S_QOS_ORDER.get(qos_class(b), 0)),
        lambda a, b: _cmp(_KOORD_QOS_ORDER.get(koord.koord_qos_class(a), 5),
                          _KOORD_QOS_ORDER.get(koord.koord_qos_class(b), 5)),
        lambda a, b: _cmp(_int32_annotation(a, ANNOTATION_DELETION_COST), _int32_annotation(b, ANNOTATION_DELETION_COST)),
        lambda a, b: _cmp(_int32_annotation(a, ANNOTATION_EVICTION_COST), _int32_annotation(b, ANNOTATION_EVICTION_COST)),
        lambda a, b: -usage_cmp(a, b),
        lambda a, b: -_cmp(created(a), created(b)),  # newer first
    ]

    def less(p1: Pod, p2: Pod) -> bool:
        for c in comparators[:-1]:
            r = c(p1, p2)
            if r < 0:
                return True
            if r > 0:
                return False
        return comparators[-1](p1, p2) < 0

    return less


def pod_sort_key(pod_metrics: dict[str, Usage], exceeded: Usage, weights: dict[str, int]) -> Callable[[Pod], Any]:
    """`pod_sort_less` as a key: `less(a, b)` is exactly `key(a) < key(b)` (each comparator compares one
    value; a pod without metrics sorts after those with, higher usage score first, newer first)."""
    usage_score_of = pod_usage_scorer(exceeded, weights)

    def key(p: Pod) -> Any:
        m = pod_metrics.get(p.key)
        t = p.meta.creation_timestamp
        return (_KOORD_PRIORITY_ORDER.get(koord.priority_class(p), 5), p.effective_priority,
                _K8S_QOS_ORDER.get(qos_class(p), 0), _KOORD_QOS_ORDER.get(koord.koord_qos_class(p), 5),
                _int32_annotation(p, ANNOTATION_DELETION_COST), _int32_annotation(p, ANNOTATION_EVICTION_COST),
                (1, 0.0) if m is None else (0, -usage_score_of(m)),
                -(t.timestamp() if t is not None else float("-inf")))

    return key


def sort_like_go(pods: list[Pod], key: Callable[[Pod], Any]) -> None:
    """Go's `sort.Slice` with `less(a, b) = key(a) < key(b)`, in place. With no two keys equal the order is
    the one sorted order, which Python's sort gives; otherwise Go's algorithm is replayed on the keys
    (which pods tie, and where they end up, depends on it)."""
    keyed = [(key(p), p) for p in pods]
    keys = {k for k, _ in keyed}
    if len(keys) == len(keyed):
        keyed.sort(key=lambda e: e[0])
    else:
        go_sort_slice(keyed, lambda a, b: a[0] < b[0])
    pods[:] = [p for _, p in keyed]


# ---------------------------------------------------------------- the plugin


class LowNodeLoad(BalancePlugin):
    name = NAME
    Args = LowNodeLoadArgs
    args: LowNodeLoadArgs

    def __init__(self, args: LowNodeLoadArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.pools = args.node_pools
        self.include_ns = set(args.evictable_namespaces.include)
        self.exclude_ns = set(args.evictable_namespaces.exclude)
        self.pod_selectors: list[LabelSelector] = [s.selector for s in args.pod_selectors if s.selector is not None]
        ttl = float(args.detector_cache_timeout)
        self.node_detectors = DetectorCache(ttl)
        self.prod_detectors = DetectorCache(ttl)
        self._now = 0.0

    # ------------------------------------------------------------ inputs

    def pod_filter(self, pod: Pod) -> bool:
        """The evictor's Filter, the pod selectors, then the namespaces."""
        if self.include_ns and pod.namespace not in self.include_ns:
            return False
        if self.exclude_ns and pod.namespace in self.exclude_ns:
            return False
        if self.pod_selectors and not any(s.matches(pod.labels) for s in self.pod_selectors):
            return False
        return self.handle.evictor.filter(pod)

    def metrics(self) -> Metrics | None:
        """--metrics (another format), else the usage objects of the snapshot and of --metrics."""
        given = self.handle.services.usage
        if isinstance(given, Metrics):
            m = given
        else:
            parts = []
            snap = snapshot_metrics(self.handle.services.snapshot)
            if snap is not None:
                parts.append(snap)
            objects = self.handle.services.metric_objects
            if objects:
                parts.append(metrics_from_objects(objects, source="--metrics"))
            if not parts:
                return None
            m = merge(parts) if len(parts) > 1 else parts[0]
        return m

    def _reported_by_node(self, metrics: Metrics) -> tuple[dict[str, list[PodUsage]], bool]:
        """The reported pods by node, in the reading's order (one pass, not one per node), and whether the
        reading is keyed by pod (each pod at most once). Pods reported without their node (metrics.k8s.io
        PodMetrics) are first placed on the node the cluster has them on."""
        grouped, keyed, complete = self._group(metrics)
        if not complete:
            attach_nodes(metrics, {p.key: p.node_name for p in self.handle.cluster.pods.values() if p.node_name})
            grouped, keyed, complete = self._group(metrics)
        return grouped, keyed

    @staticmethod
    def _group(metrics: Metrics) -> tuple[dict[str, list[PodUsage]], bool, bool]:
        grouped: dict[str, list[PodUsage]] = {}
        keyed = complete = True
        for key, pu in metrics.pods.items():
            node = pu.node
            lst = grouped.get(node)
            if lst is None:
                grouped[node] = lst = []
                if not node:
                    complete = False
            lst.append(pu)
            if key != pu.key:
                keyed = False
        return grouped, keyed, complete

    def node_usages(self, nodes: list[Node], resources: list[str], metrics: Metrics | None) -> dict[str, NodeUsage]:
        """getNodeUsage: nodes with fresh metrics, in the given order.

        Each node's usage is its system usage plus its reported pods' (one pass over the reading); its prod
        pods and prod usage are made when first asked for (`NodeUsage`)."""
        out: dict[str, NodeUsage] = {}
        if metrics is None:
            return out
        ref = reference_time(self.handle.now, metrics)
        expiration = self.args.node_metric_expiration_seconds
        reported_on, keyed = self._reported_by_node(metrics)
        infos = self.handle.cluster.node_info_by_name
        for node in nodes:
            nm = metrics.node(node.name)
            if nm is None:
                continue
            ts = metrics.node_timestamp(node.name)
            if ts is None or (expiration > 0 and ref - ts >= expiration):
                continue
            # podutil.ListPodsOnANode: the node's pods now (listed when needed, see NodeUsage).
            info = infos.get(node.name)
            reported = reported_on.get(node.name, [])
            if not keyed:
                # A reading keyed otherwise than by pod may repeat a pod: each pod once, its last usage.
                reported = list({pu.key: pu for pu in reported}.values())
            sums, whole_bound = _reported_sums(reported, resources)
            system = self._system_usage(nm, reported, node)
            usage: Usage = {r: _add_exact(system.get(r, _ZERO), s) for r, s in zip(resources, sums, strict=True)}
            usage["pods"] = Fraction(len(info.pods) if info is not None else 0)
            out[node.name] = NodeUsage.from_reading(
                node, info, reported, usage, dict(zip(resources, sums, strict=True)) if whole_bound else None,
                raw_allocatable_units(node), resources)
        return out

    @staticmethod
    def _system_usage(nm: Any, reported: list[PodUsage], node: Node) -> Usage:
        """koordlet's SystemUsage, or what the node uses beyond its pods (metrics.k8s.io, or load-watcher
        percentages of the node's capacity)."""
        if nm.system_exact is not None:
            return dict(nm.system_exact)
        if nm.system_usage is not None:
            return {k: Fraction(v) for k, v in nm.system_usage.items()}
        total: Usage = dict(nm.exact) if nm.exact else {k: Fraction(v) for k, v in nm.usage.items()}
        if not total and nm.metrics:
            for r in ("cpu", "memory"):
                cap = node.capacity.get(r, _ZERO)
                absolute = absolute_usage(nm, r, milli_value_of(cap) if r == "cpu" else value_of(cap))
                if absolute is not None:
                    total[r] = Fraction(absolute)
        out: Usage = {}
        if total:
            pod_sums, _ = _reported_sums(reported, list(total))
            for (r, used), pods in zip(total.items(), pod_sums, strict=True):
                out[r] = max(_ZERO, used - pods)
        return out

    def node_thresholds(self, usages: dict[str, NodeUsage], low: dict[str, float], high: dict[str, float],
                        prod_low: dict[str, float], prod_high: dict[str, float], resources: list[str],
                        use_deviation: bool) -> dict[str, NodeThresholds]:
        """getNodeThresholds."""
        avg: dict[str, float] = {}
        prod_avg: dict[str, float] = {}
        if use_deviation:
            avg = self._average_percent(usages, False)
            # The prod average is read only for resources with a prod low threshold (reading it makes every
            # node's prod usage).
            if any(prod_low[r] != MIN_PERCENTAGE for r in resources):
                prod_avg = self._average_percent(usages, True)
        out = {}
        # A node's thresholds depend on its allocatable alone: nodes of one size share them (read-only).
        shared: dict[tuple[tuple[int, int] | None, ...], NodeThresholds] = {}
        for name, nu in usages.items():
            alloc = nu.allocatable
            key = tuple(None if (q := alloc.get(r)) is None else (q.numerator, q.denominator) for r in resources)
            hit = shared.get(key)
            if hit is not None:
                out[name] = hit
                continue
            t = shared[key] = NodeThresholds()
            for r in resources:
                if use_deviation:
                    cap = alloc.get(r, _ZERO)
                    if low[r] == MIN_PERCENTAGE:
                        t.low[r] = t.high[r] = cap
                    else:
                        t.low[r] = resource_threshold(alloc, r, _normalize(avg.get(r, 0.0) - low[r]))
                        t.high[r] = resource_threshold(alloc, r, _normalize(avg.get(r, 0.0) + high[r]))
                    if prod_low[r] == MIN_PERCENTAGE:
                        t.prod_low[r] = t.prod_high[r] = cap
                    else:
                        t.prod_low[r] = resource_threshold(alloc, r, _normalize(prod_avg.get(r, 0.0) - prod_low[r]))
                        t.prod_high[r] = resource_threshold(alloc, r, _normalize(prod_avg.get(r, 0.0) + prod_high[r]))
                else:
                    t.low[r] = resource_threshold(alloc, r, low[r])
                    t.high[r] = resource_threshold(alloc, r, high[r])
                    t.prod_low[r] = resource_threshold(alloc, r, prod_low[r])
                    t.prod_high[r] = resource_threshold(alloc, r, prod_high[r])
            out[name] = t
        return out

    @staticmethod
    def _average_percent(usages: dict[str, NodeUsage], prod: bool) -> dict[str, float]:
        """calcAverageResourceUsagePercent over every node with usage: of the node usage, or of the prod
        usage (each resource's sum runs over the nodes in the same order either way)."""
        total: dict[str, float] = {}
        for nu in usages.values():
            for r, used in (nu.prod_usage if prod else nu.usage).items():
                cap = _units_value(r, nu.allocatable.get(r, _ZERO))
                if cap == 0:
                    continue
                total[r] = total.get(r, 0.0) + float(_units_value(r, used)) / float(cap) * 100.0
        n = len(usages)
        return {r: v / n for r, v in total.items()}

    # ------------------------------------------------------------ balance

    def balance(self, nodes: list[Node]) -> Status:
        if self.args.paused:
            return Status()
        self._now = self.handle.now.timestamp()
        metrics = self.metrics()
        processed: set[str] = set()
        for pool in self.pools:
            self.process_pool(pool, nodes, processed, metrics)
        return Status()

    def process_pool(self, pool: LowNodeLoadNodePool, nodes: list[Node], processed: set[str],
                     metrics: Metrics | None) -> None:
        if pool.node_selector is not None:
            sel = pool.node_selector
            nodes = [n for n in nodes if n.name not in processed and sel.matches(n.labels)]
        if not nodes:
            return
        use_dev = pool.use_deviation_thresholds
        low, high, prod_low, prod_high = new_thresholds(use_dev, pool.low_thresholds, pool.high_thresholds,
                                                        pool.prod_low_thresholds, pool.prod_high_thresholds)
        resources = list(low)
        usages = self.node_usages(nodes, resources, metrics)
        thresholds = self.node_thresholds(usages, low, high, prod_low, prod_high, resources, use_dev)
        low_nodes, sources, prod_low_nodes, prod_sources, both_low = self.classify(usages, thresholds)
        if not sources and not prod_sources:
            return
        cond = pool.anomaly_condition
        abnormal = self.real_abnormal(sources, self.node_detectors, cond)
        abnormal_prod = self.real_abnormal(prod_sources, self.prod_detectors, cond)
        if not abnormal and not abnormal_prod:
            return
        if not low_nodes and not prod_low_nodes and not both_low:
            return
        self._reset(low_nodes, self.node_detectors)
        self._reset(prod_low_nodes, self.prod_detectors)
        self._reset(both_low, self.node_detectors)
        all_low = len(low_nodes) + len(prod_low_nodes) + len(both_low)
        if all_low <= self.args.number_of_nodes or all_low == len(nodes):
            return
        weights = dict(pool.resource_weights)

        def by_usage(prod: bool) -> Callable[[NodeInfo, NodeInfo], bool]:
            def score(n: NodeInfo) -> int:
                return usage_score(n.usage.prod_usage if prod else n.usage.usage, n.usage.allocatable, weights)
            return lambda i, j: score(i) > score(j)

        go_sort_slice(abnormal, by_usage(False))
        go_sort_slice(abnormal_prod, by_usage(True))
        reason = self._reason_fn(high, prod_high)
        self.evict_from_sources(abnormal, low_nodes, abnormal_prod, prod_low_nodes, both_low, usages, thresholds,
                                weights, resources, reason)
        self._mark_normal(abnormal, self.node_detectors)
        self._mark_normal(abnormal_prod, self.prod_detectors)
        processed.update(n.name for n in sources)

    def classify(self, usages: dict[str, NodeUsage], thresholds: dict[str, NodeThresholds]
                 ) -> tuple[list[NodeInfo], list[NodeInfo], list[NodeInfo], list[NodeInfo], list[NodeInfo]]:
        low, high, prod_low, prod_high, both = [], [], [], [], []
        for name, nu in usages.items():
            t = thresholds[name]
            info = NodeInfo(nu, t)
            schedulable = not nodeutil.is_node_unschedulable(nu.node)
            is_low = schedulable and is_underutilized(nu.usage, t.low)
            if is_low:
                if nu.prod_over(t.prod_high):
                    prod_high.append(info)
                elif nu.prod_under(t.prod_low):
                    both.append(info)
                else:
                    low.append(info)
            elif is_overutilized(nu.usage, t.high):
                high.append(info)
            elif nu.prod_over(t.prod_high):
                prod_high.append(info)
            elif schedulable and nu.prod_under(t.prod_low):
                prod_low.append(info)
        return low, high, prod_low, prod_high, both

    def real_abnormal(self, sources: list[NodeInfo], cache: DetectorCache,
                      cond: LoadAnomalyCondition | None) -> list[NodeInfo]:
        """filterRealAbnormalNodes."""
        if cond is None or cond.consecutive_abnormalities == 1:
            return list(sources)
        out = []
        for info in sources:
            d = cache.get(info.name, self._now)
            if d is None:
                timeout = cond.timeout
                d = Detector(timeout if timeout > 0 else DEFAULT_DETECTOR_TIMEOUT, cond.consecutive_abnormalities,
                             cond.consecutive_normalities)
            if d.mark(False, self._now):
                out.append(info)
            cache.set(info.name, d, self._now)
        return out

    def _reset(self, nodes: Iterable[NodeInfo], cache: DetectorCache) -> None:
        for n in nodes:
            d = cache.get(n.name, self._now)
            if d is not None:
                d.reset(self._now)

    def _mark_normal(self, nodes: Iterable[NodeInfo], cache: DetectorCache) -> None:
        for n in nodes:
            d = cache.get(n.name, self._now)
            if d is not None:
                d.mark(True, self._now)

    @staticmethod
    def _reason_fn(high: dict[str, float], prod_high: dict[str, float]) -> Callable[[NodeInfo, bool], str]:
        names = sorted(high)

        def reason(info: NodeInfo, prod: bool) -> str:
            usage = info.usage.prod_usage if prod else info.usage.usage
            thresholds = info.thresholds.prod_high if prod else info.thresholds.high
            pcts = prod_high if prod else high
            over = is_overutilized(usage, thresholds)
            parts = []
            for r in names:
                if r in over:
                    cap = _milli(r, info.usage.allocatable.get(r, _ZERO))
                    pct = 100 * float(_milli(r, usage[r])) / float(cap) if cap else 0.0
                    parts.append(f"{'prod' if prod else 'node'} {r} usage({pct:.2f}%)>threshold({pcts[r]:.2f}%)")
            return "node is overutilized, " + ", ".join(parts)

        return reason

    # ------------------------------------------------------------ eviction

    @staticmethod
    def _available(destinations: list[NodeInfo], resources: list[str], prod: bool) -> tuple[Usage, list[Node]]:
        """targetAvailableUsage: Σ (high threshold - usage) over the destinations."""
        nodes = [d.usage.node for d in destinations]
        if prod:
            highs = _exact_sums((d.thresholds.prod_high for d in destinations), resources)
            used = _exact_sums((d.usage.prod_usage for d in destinations), resources)
        else:
            highs = _exact_sums((d.thresholds.high for d in destinations), resources)
            used = _exact_sums((d.usage.usage for d in destinations), resources)
        # Σ (high - usage) = Σ high - Σ usage, exactly.
        return {r: h - u for r, h, u in zip(resources, highs, used, strict=True)}, nodes

    def evict_from_sources(self, sources: list[NodeInfo], destinations: list[NodeInfo], prod_sources: list[NodeInfo],
                           prod_destinations: list[NodeInfo], both: list[NodeInfo], usages: dict[str, NodeUsage],
                           thresholds: dict[str, NodeThresholds], weights: dict[str, int], resources: list[str],
                           reason: Callable[[NodeInfo, bool], str]) -> None:
        """evictPodsFromSourceNodes: the node pass, then the prod pass on what is left.

        The prod pass's budget is worked out only when it has sources (it evicts nothing otherwise). It may be
        worked out after the node pass: that pass changes the usage of its sources and destinations, never a
        prod usage."""
        # Everything the passes read of the nodes' pods, listed before the first eviction changes them.
        for info in sources:
            info.usage.list_pods(prod=False)
        if prod_sources:
            for info in (*prod_sources, *prod_destinations, *both):
                info.usage.list_pods(prod=True)
        total, targets = self._available(destinations, resources, False)
        both_total, both_nodes = self._available(both, resources, False)
        node_total = {r: total[r] + both_total[r] for r in resources}
        self.balance_pods(sources, targets + both_nodes, usages, thresholds, node_total, False, weights, resources,
                          reason)
        if not prod_sources:
            return
        prod_avail, prod_targets = self._available(prod_destinations, resources, True)
        prod_both, prod_both_nodes = self._available(both, resources, True)
        # Both-low destinations serve both passes: the prod pass gets what the node pass left of them.
        for r in resources:
            if both_total[r] > node_total[r]:
                both_total[r] = node_total[r]
        prod_total = {r: prod_avail[r] + (both_total[r] if prod_both[r] > both_total[r] else prod_both[r])
                      for r in resources}
        self.balance_pods(prod_sources, prod_targets + prod_both_nodes, usages, thresholds, prod_total, True, weights,
                          resources, reason)

    def balance_pods(self, sources: list[NodeInfo], targets: list[Node], usages: dict[str, NodeUsage],
                     thresholds: dict[str, NodeThresholds], available: Usage, prod: bool, weights: dict[str, int],
                     resources: list[str], reason: Callable[[NodeInfo, bool], str]) -> None:
        if not targets or not sources:
            return
        destinations = _Destinations(self.handle.cluster, targets, usages, thresholds, prod) \
            if self.args.node_fit else None
        for src in sources:
            pods = src.usage.prod_pods if prod else src.usage.all_pods
            removable = []
            for pod in pods:
                if not self.pod_filter(pod):
                    continue
                if destinations is not None:
                    metric = src.usage.pod_metrics.get(pod.key)
                    if metric is None or not destinations.book(pod, metric):
                        continue
                removable.append(pod)
            if not removable:
                continue
            self.sort_pods(src, removable, weights, prod)
            self.evict_pods(removable, src, available, prod, resources, reason)
        if destinations is not None:
            destinations.flush()

    def fits_any_with_threshold(self, pod: Pod, targets: list[Node], usages: dict[str, NodeUsage],
                                thresholds: dict[str, NodeThresholds], prod: bool, metric: Usage) -> bool:
        """podFitsAnyNodeWithThreshold, one destination at a time: fits a destination and keeps it under its
        high threshold (booked). `balance_pods` asks `_Destinations`, which gives the same answers at once."""
        for node in targets:
            if not self._node_fit(pod, node):
                continue
            if _book(usages.get(node.name), thresholds.get(node.name), prod, metric):
                return True
        return False

    def _node_fit(self, pod: Pod, node: Node) -> bool:
        """koordinator's NodeFit: node selector and required affinity, NoSchedule/NoExecute taints, requests,
        schedulable."""
        cluster = self.handle.cluster
        if not nodeutil.pod_match_node_selector(pod, node):
            return False
        if not nodeutil.pod_tolerates_node_taints(pod, node):
            return False
        if not nodeutil.fits_request(cluster, pod, node)[0]:
            return False
        return not nodeutil.is_node_unschedulable(node)

    def sort_pods(self, src: NodeInfo, pods: list[Pod], weights: dict[str, int], prod: bool) -> None:
        """sortPodsOnOneOverloadedNode."""
        usage = src.usage.prod_usage if prod else src.usage.usage
        limits = src.thresholds.prod_high if prod else src.thresholds.high
        over = is_overutilized(usage, limits)
        exceeded = {r: used - limits[r] for r, used in over.items()}
        w = {r: weights.get(r, 0) for r in over}
        sort_like_go(pods, pod_sort_key(src.usage.pod_metrics, exceeded, w))

    def _continue(self, info: NodeInfo, available: Usage, prod: bool, resources: list[str]) -> bool:
        usage = info.usage.prod_usage if prod else info.usage.usage
        limits = info.thresholds.prod_high if prod else info.thresholds.high
        if not is_overutilized(usage, limits):
            self._reset([info], self.prod_detectors if prod else self.node_detectors)
            return False
        return all(not (r in available and available[r] <= 0) for r in resources)

    def evict_pods(self, pods: list[Pod], info: NodeInfo, available: Usage, prod: bool, resources: list[str],
                   reason: Callable[[NodeInfo, bool], str]) -> None:
        for pod in pods:
            if not self._continue(info, available, prod, resources):
                return
            if not self.pod_filter(pod):
                continue
            if not self.args.dry_run:
                try:
                    ok = self.handle.evictor.evict(pod, EvictOptions(reason=reason(info, prod), plugin=NAME))
                except EvictionLimitError:
                    ok = False
                if not ok:
                    continue
            metric = info.usage.pod_metrics.get(pod.key)
            if metric is None:
                continue
            for r in list(available):
                q = _ONE if r == "pods" else metric.get(r, _ZERO)
                available[r] -= q
                if r in info.usage.usage:
                    info.usage.usage[r] -= q
                if prod and r in info.usage.prod_usage:
                    info.usage.prod_usage[r] -= q


# ---------------------------------------------------------------- destinations of a pass


def _book(nu: NodeUsage | None, t: NodeThresholds | None, prod: bool, metric: Usage) -> bool:
    """The threshold half of podFitsAnyNodeWithThreshold on one destination that passed NodeFit: add the
    pod's usage to the destination's and keep it when no resource goes over its high threshold (else take
    it back). A destination without usage or thresholds takes any pod."""
    if nu is None or t is None:
        return True
    usage = nu.prod_usage if prod else nu.usage
    limits = t.prod_high if prod else t.high
    added = []
    exceeded = False
    for r, limit in limits.items():
        if r in usage:
            usage[r] += metric.get(r, _ZERO)
            added.append(r)
            if usage[r] > limit:
                exceeded = True
                break
    if exceeded:
        for r in added:
            usage[r] -= metric.get(r, _ZERO)
        return False
    return True


class _Destinations:
    """podFitsAnyNodeWithThreshold over one pass's destinations, all of them at once.

    The first destination (in order) that passes NodeFit and stays under its high threshold with the pod's
    usage added gets the pod booked. NodeFit is a mask per pod shape (`nodeutil.NodeFitColumns`, whose
    request check is worked out for the destinations the walks reach, not for all of them); each
    destination's headroom (high threshold - usage) is kept per resource as a column, updated as pods are
    booked.

    While every threshold, usage and booked pod usage is a whole number (the usual case) the columns are
    exact integers: the first destination whose NodeFit passes and whose headroom holds the pod is the
    answer, and the bookings are added to the destinations' usage maps when the pass ends (`flush`), as
    `_book` would have added them one by one. Otherwise (from the first fractional number on) the columns
    are floats: rounding to float is monotone, so `usage <= headroom` in floats holds wherever it holds
    exactly; the columns pick the candidates in order and the exact check (`_book`) decides. Either way the
    answer and the booking are the ones the one-destination-at-a-time walk gives.
    """

    # Headroom of a resource a destination does not constrain (every pod's usage is checked to be smaller).
    _FREE = np.iinfo(np.int64).max
    _LIMIT = 1 << 62
    CHUNK = 512

    def __init__(self, cluster: ClusterState, targets: list[Node], usages: dict[str, NodeUsage],
                 thresholds: dict[str, NodeThresholds], prod: bool) -> None:
        self.prod = prod
        self.fit = nodeutil.NodeFitColumns(cluster, targets)
        self.entries = [(usages.get(n.name), thresholds.get(n.name)) for n in targets]
        names: list[str] = []
        for nu, t in self.entries:
            if nu is None or t is None:
                continue
            usage, limits = self._maps(nu, t)
            for r in limits:
                if r in usage and r not in names:
                    names.append(r)
        self.names = names
        n = len(targets)
        self._ok = np.zeros(n, dtype=bool)
        self._scratch = np.zeros(n, dtype=bool)
        # Whole mode: exact headroom and whether the destination constrains the resource; bookings not yet
        # added to the usage maps, by destination.
        self.rooms: dict[str, np.ndarray] | None = None
        self._constrained: dict[str, np.ndarray] = {}
        self._pending: dict[int, dict[str, int]] = {}
        self.headroom: dict[str, np.ndarray] = {}
        if not self._whole_columns():
            self._float_columns()

    def _maps(self, nu: NodeUsage, t: NodeThresholds) -> tuple[Usage, Usage]:
        return (nu.prod_usage, t.prod_high) if self.prod else (nu.usage, t.high)

    def _whole_columns(self) -> bool:
        """Exact integer headroom columns, when every threshold and usage they need is whole and small."""
        n = len(self.entries)
        rooms = {r: [self._FREE] * n for r in self.names}
        constrained = {r: [False] * n for r in self.names}
        limit = self._LIMIT
        for i, (nu, t) in enumerate(self.entries):
            if nu is None or t is None:
                continue
            usage, limits = self._maps(nu, t)
            for r in self.names:
                if r in limits and r in usage:
                    lim, used = limits[r], usage[r]
                    if lim.denominator != 1 or used.denominator != 1:
                        return False
                    room = lim.numerator - used.numerator
                    if not -limit < room < limit:
                        return False
                    rooms[r][i] = room
                    constrained[r][i] = True
        self.rooms = {r: np.array(v, dtype=np.int64) for r, v in rooms.items()}
        self._constrained = {r: np.array(v, dtype=bool) for r, v in constrained.items()}
        return True

    def _float_columns(self) -> None:
        self.rooms = None
        self.headroom = {r: np.full(len(self.entries), np.inf) for r in self.names}
        for i in range(len(self.entries)):
            self._refresh(i)

    def _refresh(self, i: int) -> None:
        nu, t = self.entries[i]
        if nu is None or t is None:
            return
        usage, limits = self._maps(nu, t)
        for r in self.names:
            if r in limits and r in usage:
                lim, used = limits[r], usage[r]
                if lim.denominator == 1 and used.denominator == 1:
                    self.headroom[r][i] = float(lim.numerator - used.numerator)
                else:
                    self.headroom[r][i] = float(lim - used)

    def flush(self) -> None:
        """Add the bookings made in whole mode to the destinations' usage maps."""
        for i, deltas in self._pending.items():
            nu, t = self.entries[i]
            assert nu is not None and t is not None
            usage, _ = self._maps(nu, t)
            for r, d in deltas.items():
                usage[r] += d
        self._pending.clear()

    def book(self, pod: Pod, metric: Usage) -> bool:
        if self.rooms is not None:
            wanted = []
            for r in self.names:
                m = metric.get(r, _ZERO)
                if m.denominator != 1 or not -self._LIMIT < m.numerator < self._LIMIT:
                    # A fractional (or huge) usage: the exact walk from here on.
                    self.flush()
                    self._float_columns()
                    return self._book_walk(pod, metric)
                wanted.append((r, m.numerator))
            return self._book_whole(pod, wanted)
        return self._book_walk(pod, metric)

    def _book_whole(self, pod: Pod, wanted: list[tuple[str, int]]) -> bool:
        rooms = self.rooms
        assert rooms is not None
        fit = self.fit
        candidates = fit.candidates(pod)
        n = len(self.entries)
        # The first destination that fits, looked for a chunk at a time: bookings fill the destinations in
        # order, so the answer is usually in the first chunk.
        start = 0
        while start < n:
            end = min(start + self.CHUNK, n)
            ok = candidates[start:end].copy()
            for r, m in wanted:
                ok &= rooms[r][start:end] >= m
            j = int(ok.argmax())
            if not ok[j]:
                start = end
                continue
            i = start + j
            if not fit.known(i):
                # The walk reached destinations whose requests are not worked out yet: work them out, and
                # look again from there.
                fit.learn(i)
                candidates = fit.candidates(pod)
                start = i
                continue
            nu, t = self.entries[i]
            if nu is None or t is None:
                return True  # a destination without usage or thresholds takes any pod, books nothing
            pending = self._pending.get(i)
            if pending is None:
                pending = self._pending[i] = {}
            for r, m in wanted:
                if self._constrained[r][i]:
                    rooms[r][i] -= m
                    pending[r] = pending.get(r, 0) + m
            return True
        return False

    def _book_walk(self, pod: Pod, metric: Usage) -> bool:
        ok = self._ok
        fit = self.fit
        np.logical_and(fit.candidates(pod), True, out=ok)
        scratch = self._scratch
        for r, column in self.headroom.items():
            np.greater_equal(column, float(metric.get(r, _ZERO)), out=scratch)
            ok &= scratch
        while True:
            i = int(ok.argmax())
            if not ok[i]:
                return False
            if not fit.known(i):
                fit.learn(i)
                ok &= fit.candidates(pod)
                continue
            nu, t = self.entries[i]
            if _book(nu, t, self.prod, metric):
                self._refresh(i)
                return True
            ok[i] = False


def _milli(resource: str, q: Fraction) -> int:
    """Quantity.MilliValue of a value in units (cpu already in millicores)."""
    return milli_value_of(q / 1000 if resource == "cpu" else q)


def _normalize(pct: float) -> float:
    return MAX_PERCENTAGE if pct > MAX_PERCENTAGE else (MIN_PERCENTAGE if pct < MIN_PERCENTAGE else pct)


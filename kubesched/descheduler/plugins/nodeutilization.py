"""What LowNodeUtilization and HighNodeUtilization share: usage clients, classification, the eviction loop.

Mirrors kubernetes-sigs/descheduler's `framework/plugins/nodeutilization`. Per-node numbers are NumPy
columns over the nodes of the cycle: usage (requests from the NodeTable, or actual usage from the
MetricsCollector, or a Prometheus query), capacity (allocatable, or capacity when a node lists no
allocatable), percentages `float(used)/float(capacity)*100` as upstream computes them, thresholds
(static, or deviation from the average), and each node's budget `int(threshold*0.01*capacity)`.
Only the eviction loop over the chosen source nodes walks pods one by one.

Units: cpu in millicores, every other resource in whole units (upstream's MilliValue/Value). Requested
usage sums each pod's request rounded up to those units (the NodeTable's numbers); upstream rounds the
exact sum instead, which differs only for requests finer than a millicore or a byte.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from kubesched.api import fields
from kubesched.api.fields import Fields
from kubesched.api.objects import Node, Pod, Taint
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.resources import scheduler_request
from kubesched.cluster.state import ClusterState
from kubesched.config.plugin_args import OMITEMPTY
from kubesched.descheduler import nodeutil, podutil
from kubesched.descheduler.framework import EvictionLimitError, EvictOptions, Handle
from kubesched.descheduler.metricscollector import NodeUsageColumns
from kubesched.descheduler.plugins._common import IncludeExclude
from kubesched.diagnostics import warn
from kubesched.errors import InputError
from kubesched.metrics.prometheus import descheduler_client

CPU, MEMORY, PODS = "cpu", "memory", "pods"
METRIC_RESOURCE = "MetricResource"
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS_METRICS = "Prometheus"


class UsageError(Exception):
    """A usage client cannot give a number (the plugin skips the pod, or the whole run, as upstream)."""


class NotSupportedError(UsageError):
    """The client has no per-pod usage (Prometheus): evictions are not constrained by resources."""


Number = int | Fraction


def to_units(name: str, q: Fraction) -> Number:
    """A quantity in the unit upstream compares it in: millicores for cpu, base units otherwise (exact; a
    plain int when whole, which keeps the eviction loop's arithmetic fast)."""
    v = q * 1000 if name == CPU else q
    return v.numerator if v.denominator == 1 else v


def unique_resource_names(names: Iterable[str]) -> list[str]:
    """uniquifyResourceNames: the names plus cpu, memory and pods, each once (thresholds' order first)."""
    out: list[str] = []
    for n in list(names) + [CPU, MEMORY, PODS]:
        if n not in out:
            out.append(n)
    return out


# ---------------------------------------------------------------- args both plugins share (types.go, validation.go)


@dataclass(frozen=True, slots=True)
class PrometheusQuery:
    """MetricsUtilization.prometheus: the query giving each node's usage (0..1)."""

    query: str = ""


@dataclass(frozen=True, slots=True)
class MetricsUtilization:
    """MetricsUtilization: where actual usage comes from (metricsServer, source KubernetesMetrics or Prometheus)."""

    metrics_server: bool = field(default=False, metadata=OMITEMPTY)
    source: str = field(default="", metadata=OMITEMPTY)
    prometheus: PrometheusQuery | None = None

    @property
    def unset(self) -> bool:
        """`metricsUtilization: {}`: nothing chosen (the plugin fails its cycle with "metrics source is empty")."""
        return self == MetricsUtilization()


def read_thresholds(a: Fields, key: str) -> dict[str, float]:
    """api.ResourceThresholds: resource name → percentage in [0, 100]; at least one."""
    d = a.object(key)
    if not d.raw:
        raise a.error(key, "no resource threshold is configured")
    out: dict[str, float] = {}
    for name, v in d.raw.items():
        pct = fields.number(v, d.path(str(name)))
        if pct < 0 or pct > 100:
            raise d.error(str(name), f"{name} threshold not in [0, 100] range")
        out[str(name)] = pct
    return out


def read_evictable_namespaces(a: Fields) -> IncludeExclude | None:
    """evictableNamespaces: only `exclude` is supported."""
    if not a.has("evictableNamespaces"):
        return None
    ns = a.object("evictableNamespaces", ("include", "exclude"), meta=False)
    include = ns.strings("include")
    exclude = ns.strings("exclude")
    if include:
        raise ns.error("include", "only Exclude namespaces can be set, inclusion is not supported")
    return IncludeExclude(tuple(include), tuple(exclude))


def read_metrics_utilization(a: Fields) -> MetricsUtilization | None:
    if not a.has("metricsUtilization"):
        return None
    m = a.object("metricsUtilization", ("metricsServer", "source", "prometheus"), meta=False)
    metrics_server = m.boolean("metricsServer")
    source = m.string("source")
    if source is not None and source not in ("", KUBERNETES_METRICS, PROMETHEUS_METRICS):
        raise m.error("source", f"unrecognized metrics source {source!r}; expected {KUBERNETES_METRICS} or "
                      f"{PROMETHEUS_METRICS}")
    prometheus = None
    if m.has("prometheus"):
        prom = m.object("prometheus", ("query",), meta=False)
        prometheus = PrometheusQuery(fields.string(prom.raw.get("query", ""), prom.path("query")))
    out = MetricsUtilization(metrics_server, source or "", prometheus)
    if out.source == KUBERNETES_METRICS and out.metrics_server:
        raise InputError(f"it is not allowed to set both {KUBERNETES_METRICS!r} source and metricsServer",
                         field=m.field)
    if out.source == KUBERNETES_METRICS and prometheus is not None:
        raise m.error("prometheus", f"prometheus configuration is not allowed to set when source is set to "
                      f"{KUBERNETES_METRICS!r}")
    if out.source == PROMETHEUS_METRICS and not (prometheus.query if prometheus else ""):
        raise InputError(f"prometheus query is required when metrics source is set to {PROMETHEUS_METRICS!r}",
                         field=fields.join(m.path("prometheus"), "query"))
    return out


# ---------------------------------------------------------------- usage clients


class UsageClient(Protocol):
    names: list[str]

    def sync(self, nodes: list[Node]) -> None: ...

    def node_usage(self) -> np.ndarray:
        """(nodes × names) usage in units, after sync."""
        ...

    def pods(self, i: int) -> list[Pod]: ...

    def pod_usage(self, pod: Pod) -> dict[str, Number]: ...


class _PodsWhenAsked:
    """A node's pods, listed when first asked after `sync` (only the nodes the eviction loop reaches are).

    Upstream's clients list every node's pods at sync; the lists are the same: during a cycle only the
    descheduler's own evictions change pods, and those only on the node it is draining."""

    cluster: ClusterState
    _nodes: list[Node]
    _listed: dict[int, list[Pod]]

    def _forget_pods(self, nodes: list[Node]) -> None:
        self._nodes = nodes
        self._listed = {}

    def pods(self, i: int) -> list[Pod]:
        pods = self._listed.get(i)
        if pods is None:
            pods = self._listed[i] = list(self.cluster.pods_on(self._nodes[i].name))
        return pods


def _collected_usage(table: Any) -> Callable[[str], tuple[int, int] | None]:
    """A node's (cpu, memory) in a collector's node table, None when it has none: read from the columns of a
    NodeUsageColumns (without the dict per node its mapping form makes), else from the per-node dicts."""
    if isinstance(table, NodeUsageColumns):
        position, cpu, memory = table.position, table.cpu, table.memory

        def from_columns(name: str) -> tuple[int, int] | None:
            i = position(name)
            return None if i is None else (cpu[i], memory[i])

        return from_columns

    def from_dicts(name: str) -> tuple[int, int] | None:
        c = table.get(name)
        return None if c is None else (c["cpu"], c["memory"])

    return from_dicts


class RequestedUsageClient(_PodsWhenAsked):
    """Usage = the requests of the pods on each node (upstream's requestedUsageClient)."""

    def __init__(self, cluster: ClusterState, names: list[str]) -> None:
        self.cluster = cluster
        self.names = names
        self._usage = np.zeros((0, len(names)), dtype=np.int64)
        self._forget_pods([])
        self._usage_key = ("desched_usage", tuple(names))

    def sync(self, nodes: list[Node]) -> None:
        cluster = self.cluster
        table = cluster.table
        rows = np.fromiter((cluster.node_info_by_name[n.name].index for n in nodes), dtype=np.int64, count=len(nodes))
        usage = np.zeros((len(nodes), len(self.names)), dtype=np.int64)
        for j, name in enumerate(self.names):
            if name == PODS:
                usage[:, j] = table.pod_count[rows]
            elif name in table.column and name != METRIC_RESOURCE:
                usage[:, j] = table.requested[rows, table.column[name]]
            else:
                # A resource the scheduler does not track: sum the exact requests.
                for i, n in enumerate(nodes):
                    total = Fraction(0)
                    for p in cluster.pods_on(n.name):
                        total += podutil.pod_request_quantities(p).get(name, Fraction(0))
                    usage[i, j] = milli_value_of(total) if name == CPU else value_of(total)
        self._usage = usage
        self._forget_pods(nodes)

    def node_usage(self) -> np.ndarray:
        return self._usage

    def pod_usage(self, pod: Pod) -> dict[str, Number]:
        key = self._usage_key
        cached = pod.cache.get(key)
        if cached is None:
            # The same per-pod numbers the NodeTable sums (so a node's usage minus its pods' usage is exact);
            # resources the scheduler does not track come from the exact requests.
            units = scheduler_request(pod)
            column = self.cluster.table.column
            cached = {}
            for n in self.names:
                if n == PODS:
                    cached[n] = 0
                elif n in column:
                    cached[n] = units.get(n, 0)
                else:
                    cached[n] = to_units(n, podutil.pod_request_quantities(pod).get(n, Fraction(0)))
            pod.cache[key] = cached
        return dict(cached)


class ActualUsageClient(_PodsWhenAsked):
    """Usage = the MetricsCollector's node usage (cpu, memory) and the pod count (upstream's actualUsageClient)."""

    def __init__(self, cluster: ClusterState, names: list[str], collector: Any) -> None:
        self.cluster = cluster
        self.names = names
        self.collector = collector
        self._usage = np.zeros((0, len(names)), dtype=np.int64)
        self._forget_pods([])

    def sync(self, nodes: list[Node]) -> None:
        infos = self.cluster.node_info_by_name
        collected_nodes = self.collector.nodes
        names = self.names
        if set(names) <= {CPU, MEMORY, PODS}:
            # Every name is one the collector or the cluster has: no per-node check can fail, so the columns
            # are gathered as lists and converted one by one (the same int64 values).
            cpu, memory, pods = [], [], []
            usage_of = _collected_usage(collected_nodes)
            for n in nodes:
                name = n.name
                collected = usage_of(name)
                if collected is None:
                    raise UsageError(f"unable to find node {name!r} in the collected metrics")
                cpu.append(collected[0])
                memory.append(collected[1])
                info = infos.get(name)
                pods.append(len(info.pods) if info is not None else 0)
            usage = np.empty((len(nodes), len(names)), dtype=np.int64)
            for j, name in enumerate(names):
                usage[:, j] = cpu if name == CPU else memory if name == MEMORY else pods
            self._usage = usage
            self._forget_pods(nodes)
            return
        rows = []
        for n in nodes:
            collected = collected_nodes.get(n.name)
            if collected is None:
                raise UsageError(f"unable to find node {n.name!r} in the collected metrics")
            info = infos.get(n.name)
            values = {CPU: collected["cpu"], MEMORY: collected["memory"],
                      PODS: len(info.pods) if info is not None else 0}
            for name in names:
                if name not in values:
                    raise UsageError(f"unable to find {name!r} resource for collected {n.name!r} node metric")
            rows.append([values[name] for name in names])
        # One conversion of the whole matrix (the same int64 values as element by element).
        self._usage = np.array(rows, dtype=np.int64).reshape(len(nodes), len(names))
        self._forget_pods(nodes)

    def node_usage(self) -> np.ndarray:
        return self._usage

    def pod_usage(self, pod: Pod) -> dict[str, Number]:
        try:
            used = self.collector.pod_usage(pod.namespace, pod.name, self.names)
        except KeyError as e:
            raise UsageError(str(e)) from None
        return {n: to_units(n, v) for n, v in used.items()}


class PrometheusClient(Protocol):
    """What the Prometheus usage source needs: the query's per-node result, each value in [0, 1].

    The load-aware helper provides one as `handle.services.prometheus_client` (a live client, or a
    recorded result); without it the source fails as upstream's does without a client.
    """

    def query(self, query: str) -> dict[str, float]: ...


class PrometheusUsageClient(_PodsWhenAsked):
    """Usage = one Prometheus query per cycle, `MetricResource` = int(value*100) per node."""

    def __init__(self, cluster: ClusterState, client: PrometheusClient, query: str) -> None:
        self.cluster = cluster
        self.client = client
        self.query = query
        self.names = [METRIC_RESOURCE]
        self._usage = np.zeros((0, 1), dtype=np.int64)
        self._forget_pods([])

    def sync(self, nodes: list[Node]) -> None:
        try:
            result = self.client.query(self.query)
        except Exception as e:  # a client's failure is the plugin's error, as upstream logs it
            raise UsageError(f"unable to capture prometheus metrics: {e}") from None
        usage = np.zeros((len(nodes), 1), dtype=np.int64)
        for node_name, value in result.items():
            if value < 0 or value > 1:
                raise UsageError(f"the collected metrics sample for {node_name!r} has value {value} outside of "
                                 "<0; 1> interval")
        for i, n in enumerate(nodes):
            if n.name not in result:
                raise UsageError(f"unable to find metric entry for {n.name}")
            usage[i, 0] = int(result[n.name] * 100)
        self._usage = usage
        self._forget_pods(nodes)

    def node_usage(self) -> np.ndarray:
        return self._usage

    def pod_usage(self, pod: Pod) -> dict[str, Number]:
        raise NotSupportedError("prometheus usage client has no per-pod usage")


# ---------------------------------------------------------------- capacities and percentages


def capacity_matrix(nodes: list[Node], names: list[str],
                    cluster: ClusterState | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(capacity in units, whether the node lists the resource): allocatable, or capacity when the node
    lists no allocatable (referencedResourceListForNodeCapacity); MetricResource is 100 everywhere.

    With the cluster, nodes that are the cluster's own node objects and list allocatable take it from the
    NodeTable's columns (the same units: MilliValue for cpu, Value otherwise) for the resources the table
    tracks; the other nodes and resources are read node by node."""
    n = len(nodes)
    cap = np.zeros((n, len(names)), dtype=np.int64)
    has = np.zeros((n, len(names)), dtype=bool)
    by_table = np.zeros(n, dtype=bool)
    table_cols: set[int] = set()
    if cluster is not None and n:
        table = cluster.table
        infos = cluster.node_info_by_name
        rows = np.zeros(n, dtype=np.int64)
        for i, node in enumerate(nodes):
            info = infos.get(node.name)
            if info is not None and info.node is node and node.allocatable:
                by_table[i] = True
                rows[i] = info.index
        at = np.flatnonzero(by_table)
        rows = rows[at]
        for j, name in enumerate(names):
            if name == METRIC_RESOURCE:
                cap[at, j] = 100
                has[at, j] = True
            elif name == PODS:
                cap[at, j] = table.allowed_pods[rows]
                has[at, j] = [PODS in nodes[i].allocatable for i in at]
            elif name in table.column:
                col = table.column[name]
                cap[at, j] = table.alloc[:, col][rows]
                has[at, j] = table.has[:, col][rows]
            else:
                continue
            table_cols.add(j)
    every_column = len(table_cols) == len(names)
    if every_column and by_table.all():
        return cap, has
    cache: dict[int, tuple[list[int], list[bool]]] = {}
    for i, node in enumerate(nodes):
        if every_column and by_table[i]:
            continue
        source = node.allocatable if node.allocatable else node.capacity
        key = id(source)
        hit = cache.get(key)
        if hit is None:
            vals, flags = [], []
            for name in names:
                if name == METRIC_RESOURCE:
                    vals.append(100)
                    flags.append(True)
                elif name in source:
                    q = source[name]
                    vals.append(milli_value_of(q) if name == CPU else value_of(q))
                    flags.append(True)
                else:
                    vals.append(0)
                    flags.append(False)
            hit = (vals, flags)
            cache[key] = hit
        if by_table[i]:
            for j in range(len(names)):
                if j not in table_cols:
                    cap[i, j] = hit[0][j]
                    has[i, j] = hit[1][j]
        else:
            cap[i] = hit[0]
            has[i] = hit[1]
    return cap, has


def usage_percentages(usage: np.ndarray, cap: np.ndarray, has: np.ndarray) -> np.ndarray:
    """ResourceUsageToResourceThreshold: float(used)/float(capacity)*100, 0 for no capacity; NaN where the
    node does not list the resource (upstream leaves it out of the map, which reads as 0 when compared)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(cap > 0, usage.astype(np.float64) / cap.astype(np.float64) * 100.0, 0.0)
    return np.where(has, pct, np.nan)


def below(pct: np.ndarray, thr: np.ndarray, cols: list[int]) -> np.ndarray:
    """isNodeBelowThreshold: usage <= threshold for every thresholded resource (rows of pct, thr)."""
    if not cols:
        return np.ones(pct.shape[0], dtype=bool)
    p = np.nan_to_num(pct[:, cols], nan=0.0)
    return np.all(p <= thr[:, cols], axis=1)


def above(pct: np.ndarray, thr: np.ndarray, cols: list[int]) -> np.ndarray:
    """isNodeAboveThreshold: usage > threshold for some thresholded resource."""
    if not cols:
        return np.zeros(pct.shape[0], dtype=bool)
    p = np.nan_to_num(pct[:, cols], nan=0.0)
    return np.any(p > thr[:, cols], axis=1)


def deviation_thresholds(pct: np.ndarray, names: list[str], low: dict[str, float],
                         high: dict[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """assessNodesUsagesAndRelativeThresholds: the average usage of each thresholded resource (over the
    nodes listing it) minus `low` and plus `high`, clamped to [0, 100]."""
    lower: dict[str, float] = {}
    higher: dict[str, float] = {}
    for name in low:
        if name not in names:
            continue
        col = pct[:, names.index(name)]
        values = [float(v) for v in col if not math.isnan(v)]
        if not values:
            continue
        total = 0.0
        for v in values:
            total += v
        avg = total / len(values)
        lower[name] = min(max(avg + -low[name], 0.0), 100.0)
        higher[name] = min(max(avg + high.get(name, 0.0), 0.0), 100.0)
    return lower, higher


def threshold_rows(n: int, names: list[str], thresholds: dict[str, float]) -> tuple[np.ndarray, list[int]]:
    """The thresholds as an (n × names) matrix (NaN where not thresholded) and the thresholded columns."""
    row = np.full(len(names), np.nan)
    cols = []
    for name, v in thresholds.items():
        if name in names:
            j = names.index(name)
            row[j] = v
            cols.append(j)
    return np.tile(row, (n, 1)), cols


def capped_capacity(cap: np.ndarray, has: np.ndarray, names: list[str], thresholds: dict[str, float]) -> np.ndarray:
    """capNodeCapacitiesToThreshold: int64(threshold*0.01*capacity) for thresholded resources, the full
    capacity for the others, 0 where the node does not list the resource."""
    out = np.where(has, cap, 0).astype(np.int64)
    for name, thr in thresholds.items():
        if name not in names:
            continue
        j = names.index(name)
        col = cap[:, j]
        # Go: int64(float64(threshold) * 0.01 * float64(capacity)), truncating toward zero.
        vals = np.trunc(float(thr) * 0.01 * col.astype(np.float64)).astype(np.int64)
        out[:, j] = np.where(has[:, j], vals, 0)
    return out


# ---------------------------------------------------------------- node infos and the eviction loop


class NodeUsageInfo:
    """One classified node: its usage (units, updated as pods leave), its budget cap, its pods (listed by the
    usage client when first read: the eviction loop stops before most source nodes)."""

    __slots__ = ("node", "usage", "available", "percent", "_pods", "_list")

    def __init__(self, node: Node, usage: dict[str, Number], available: dict[str, Number],
                 pods: Callable[[], list[Pod]], percent: dict[str, float]) -> None:
        self.node = node
        self.usage = usage
        self.available = available
        self.percent = percent
        self._pods: list[Pod] | None = None
        self._list = pods

    @property
    def pods(self) -> list[Pod]:
        if self._pods is None:
            self._pods = self._list()
        return self._pods


def usage_sum(info: NodeUsageInfo) -> int:
    """sortNodesByUsage's key: cpu in millicores plus every other resource's Value."""
    return _usage_sum_of(info.usage.values())


def sort_nodes_by_usage(nodes: list[NodeUsageInfo], ascending: bool) -> list[NodeUsageInfo]:
    return sorted(nodes, key=usage_sum, reverse=not ascending)


class SortedNodeInfos:
    """sortNodesByUsage over `build_infos` of the rows `idx`, each NodeUsageInfo made only when iteration
    reaches it: the eviction loop stops once the destinations' budget is spent, usually after a few of
    thousands of source nodes. The order is the one sorting the built infos gives (the same keys from the
    same numbers, and Python's sort is stable in both directions)."""

    def __init__(self, nodes: list[Node], idx: np.ndarray, usage: np.ndarray, names: list[str], pct: np.ndarray,
                 caps: np.ndarray, client: UsageClient, ascending: bool) -> None:
        self._nodes, self._names, self._pct, self._caps, self._client = nodes, names, pct, caps, client
        self._ids: list[int] = idx.tolist()
        self._usage: list[list[Number]] = usage[idx].tolist()
        keys = [_usage_sum_of(u) for u in self._usage]
        self._order = sorted(range(len(keys)), key=keys.__getitem__, reverse=not ascending)

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[NodeUsageInfo]:
        names, client = self._names, self._client
        for k in self._order:
            i = self._ids[k]
            yield NodeUsageInfo(node=self._nodes[i], usage=dict(zip(names, self._usage[k], strict=True)),
                                available=dict(zip(names, self._caps[i].tolist(), strict=True)),
                                pods=functools.partial(client.pods, i),
                                percent=dict(zip(names, self._pct[i].tolist(), strict=True)))


def _usage_sum_of(values: Iterable[Number]) -> int:
    """`usage_sum` of a row of usage values (in the order of the info's dictionary)."""
    total = 0
    for v in values:
        total += math.ceil(v) if v >= 0 else -math.ceil(-v)
    return total


@dataclass(frozen=True, slots=True)
class Destinations:
    """What the eviction loop reads of the destination nodes: how many, their budget summed
    (assessAvailableResourceInNodes), and the distinct taint sets among them (the first node of each)."""

    count: int
    available: dict[str, Number]
    taints: dict[str, tuple[Taint, ...]]


def destinations_of(nodes: list[Node], indices: np.ndarray, usage: np.ndarray, names: list[str],
                    caps: np.ndarray) -> Destinations:
    """assessAvailableResourceInNodes over the rows of `indices`: the sum of (capped capacity - usage) per
    resource, in Python integers (exact, as the per-node dictionaries summed it), without a per-node object."""
    idx = np.asarray(indices, dtype=np.int64)
    available: dict[str, Number] = {}
    for j, name in enumerate(names):
        available[name] = sum(caps[idx, j].tolist()) - sum(usage[idx, j].tolist())
    taints: dict[str, tuple[Taint, ...]] = {}
    seen: set[tuple[Taint, ...]] = set()
    for i in idx.tolist():
        t = nodes[i].taints
        if t not in seen:
            seen.add(t)
            taints[nodes[i].name] = t
    return Destinations(len(idx), available, taints)


def is_node_above_target_utilization(info: NodeUsageInfo) -> bool:
    return any(info.available.get(n, 0) < v for n, v in info.usage.items())


ContinueCondition = Callable[[NodeUsageInfo, dict[str, Number]], bool]


def evict_pods_from_source_nodes(handle: Handle, plugin: str, excluded_namespaces: Iterable[str],
                                 sources: Iterable[NodeUsageInfo], destinations: Destinations,
                                 pod_filter: Callable[[Pod], bool], names: list[str],
                                 continue_eviction: ContinueCondition, usage_client: UsageClient,
                                 node_limit: int | None, reason: Callable[[NodeUsageInfo], str],
                                 budget: Callable[[dict[str, Number]], bool] | None = None,
                                 filter_reads_only_the_pod: bool = False) -> None:
    """evictPodsFromSourceNodes: source node by source node, evictable pods in priority/QoS order, until the
    node is back under target, the destinations' budget is spent, or a limit stops it.

    `budget` is the part of `continue_eviction` that reads only the destinations' budget (both upstream
    strategies' conditions require `budget_left`). Evictions only ever spend the budget, so once it fails,
    `continue_eviction` fails for every later source node and upstream's loop merely lists, filters and sorts
    their pods: here the loop stops instead (the same evictions, in the same order).

    With `filter_reads_only_the_pod` (the filter's verdict on a pod does not change as other pods are evicted)
    and no profile sorters, a node's pods are sorted first and filtered as the eviction loop reaches them: a
    stable sort keeps the filtered pods' order, so the same pods are evicted in the same order, and the pods
    after the node's last eviction (usually most of them) are never filtered.
    """
    available = dict(destinations.available)
    # PodToleratesTaints only asks whether some destination's taints are all tolerated: destinations with
    # the same taints answer alike, so each distinct taint set is asked once.
    destination_taints = destinations.taints
    # A destination without taints is tolerated by every pod: then no pod needs asking (with no destination at
    # all, none is tolerated).
    tolerated: dict[str, tuple[Taint, ...]] | None = \
        None if any(not taints for taints in destination_taints.values()) else destination_taints
    excluded = set(excluded_namespaces)
    evictor = handle.evictor
    lazy = filter_reads_only_the_pod and not evictor.has_sorters
    for src in sources:
        if budget is not None and not budget(available):
            return
        removable: Iterable[Pod]
        if lazy:
            ordered = podutil.sort_pods_based_on_priority_low_to_high(list(src.pods))
            removable = (p for p in ordered if pod_filter(p))
        else:
            listed = [p for p in src.pods if pod_filter(p)]
            if not listed:
                continue
            podutil.sort_pods_based_on_priority_low_to_high(listed)
            removable = evictor.sort(listed)
        stop = _evict_pods(evictor, plugin, excluded, removable, src, available, tolerated,
                           continue_eviction, usage_client, node_limit, reason(src))
        if stop == "total":
            return


def _evict_pods(evictor: Any, plugin: str, excluded: set[str], pods: Iterable[Pod], src: NodeUsageInfo,
                available: dict[str, Number], destination_taints: dict[str, tuple[Taint, ...]] | None,
                continue_eviction: ContinueCondition, usage_client: UsageClient, node_limit: int | None,
                reason: str) -> str | None:
    if not continue_eviction(src, available):
        return None
    counter = 0
    for pod in pods:
        if node_limit is not None and counter >= node_limit:
            break
        # None: some destination has no taints, which every pod tolerates.
        if destination_taints is not None and not nodeutil.pod_tolerates_taints(pod, destination_taints):
            continue
        if pod.namespace in excluded or not evictor.pre_eviction_filter(pod):
            continue
        unconstrained = False
        pod_usage: dict[str, Number] = {}
        try:
            pod_usage = usage_client.pod_usage(pod)
        except NotSupportedError:
            unconstrained = True
        except UsageError as e:
            # Upstream logs "unable to get pod usage" and moves on to the next pod; here it is said.
            warn(f"{plugin}: pod {pod.key} on node {src.node.name} not considered for eviction: {e} (usage-based "
                 "balancing needs each candidate pod's PodMetrics)")
            continue
        try:
            ok = evictor.evict(pod, EvictOptions(reason=reason, plugin=plugin))
        except EvictionLimitError as e:
            if e.limit in ("node", "total"):
                return e.limit
            continue
        if not ok:
            continue
        if node_limit is None and unconstrained:
            break
        counter += 1
        if unconstrained:
            continue
        for name in available:
            delta = 1 if name == PODS else pod_usage.get(name, 0)
            src.usage[name] = src.usage.get(name, 0) - delta
            available[name] -= delta
        if not continue_eviction(src, available):
            break
    return None


def budget_left(available: dict[str, Number]) -> bool:
    """Every destination resource still has room (> 0)."""
    return all(v > 0 for v in available.values())


def describe_usage(info: NodeUsageInfo, names: Iterable[str]) -> str:
    parts = []
    for n in names:
        if n in info.percent and not math.isnan(info.percent[n]):
            parts.append(f"{n} {info.percent[n]:.1f}%")
    return ", ".join(parts)


def make_usage_client(plugin: str, handle: Handle, metrics_utilization: MetricsUtilization | None,
                      names: list[str]) -> UsageClient:
    """usageClientForMetrics: the client the plugin's args ask for (UsageError when it cannot be built)."""
    cluster = handle.cluster
    if metrics_utilization is None:
        return RequestedUsageClient(cluster, names)
    source = metrics_utilization.source
    if metrics_utilization.metrics_server or source == KUBERNETES_METRICS:
        if handle.metrics is None:
            raise UsageError("metrics client not initialized (enable metricsProviders: [{source: KubernetesMetrics}] "
                             "in the policy)")
        return ActualUsageClient(cluster, names, handle.metrics)
    if source == PROMETHEUS_METRICS:
        client = handle.services.prometheus_client
        if client is None:
            # The policy's Prometheus metrics provider, queried at the cycle's time (kubesched.metrics.prometheus).
            client = descheduler_client(handle.services.policy, handle.services.snapshot, handle.now)
        if client is None:
            raise UsageError("prometheus client not initialized")
        query = metrics_utilization.prometheus.query if metrics_utilization.prometheus is not None else ""
        return PrometheusUsageClient(cluster, client, query)
    if source:
        raise UsageError("unrecognized metrics source")
    raise UsageError("metrics source is empty")


def build_infos(nodes: list[Node], idx: np.ndarray, usage: np.ndarray, names: list[str], pct: np.ndarray,
                caps: np.ndarray, client: UsageClient) -> list[NodeUsageInfo]:
    # Whole rows to Python numbers at once (the same ints and floats as element by element).
    rows_usage = usage[idx].tolist()
    rows_caps = caps[idx].tolist()
    rows_pct = pct[idx].tolist()
    return [NodeUsageInfo(node=nodes[i], usage=dict(zip(names, u, strict=True)),
                          available=dict(zip(names, c, strict=True)), pods=functools.partial(client.pods, i),
                          percent=dict(zip(names, p, strict=True)))
            for i, u, c, p in zip(idx.tolist(), rows_usage, rows_caps, rows_pct, strict=True)]

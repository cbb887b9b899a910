"""Actual usage for the descheduler: upstream's MetricsCollector over metrics.k8s.io objects.

Samples come from `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics objects in the snapshot and in
`--metrics` files (a List, multi-document YAML or JSON). Upstream polls NodeMetrics every 5 seconds and
keeps, per node, the first sample as is and then `round(0.9·previous + 0.1·sample)` (cpu in millicores,
memory in bytes); several samples of one node are applied in timestamp order the same way. Pod usage
is the latest PodMetrics of the pod, summed over its containers.

A caller that collects on its own (the simulator smooths node usage over its metrics pipeline) builds a
collector with `MetricsCollector.from_usage(nodes, pods)`: node usage as already collected, and pod usage
read from any mapping — a lazily computed one is asked only about the pods a strategy looks at.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from kubesched.api.objects import parse_resource_list, parse_time
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.selectors import LabelSelector
from kubesched.api.snapshot import read_documents
from kubesched.cluster.state import ClusterState
from kubesched.errors import InputError

BETA = 0.9
METRICS_KINDS = ("NodeMetrics", "PodMetrics")

# "ns/name" → [(container name, usage)]
PodMetricsTable = Mapping[str, list[tuple[str, dict[str, Fraction]]]]


def weighted_average(prev: int, value: int) -> int:
    """int64(math.Round(beta*prev + (1-beta)*value)): Go rounds halves away from zero."""
    x = BETA * float(prev) + (1 - BETA) * float(value)
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


@dataclass(slots=True)
class _NodeSample:
    name: str
    timestamp: datetime | None
    cpu: Fraction
    memory: Fraction


def _usage(raw: Any, fld: str) -> dict[str, Fraction]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError("expected a map of resource to quantity", field=fld)
    return parse_resource_list(raw, fld)


class NodeUsageColumns(Mapping[str, dict[str, int]]):
    """A collected node table in columns, read-only: node name → position, and per position the CPU
    (millicores) and memory (bytes) as Python ints; a position whose `ok` is false, or past its end, has no
    usage. A caller that keeps usage per node id hands it over without a dict per node."""

    __slots__ = ("positions", "cpu", "memory", "ok")

    def __init__(self, positions: Mapping[str, int], cpu: list[int], memory: list[int], ok: list[bool]) -> None:
        self.positions, self.cpu, self.memory, self.ok = positions, cpu, memory, ok

    def position(self, name: str) -> int | None:
        """The node's position when it has usage."""
        i = self.positions.get(name)
        if i is None or i >= len(self.ok) or not self.ok[i]:
            return None
        return i

    def __getitem__(self, name: str) -> dict[str, int]:
        i = self.position(name)
        if i is None:
            raise KeyError(name)
        return {"cpu": self.cpu[i], "memory": self.memory[i]}

    def __iter__(self) -> Iterator[str]:
        ok, m = self.ok, len(self.ok)
        return (name for name, i in self.positions.items() if i < m and ok[i])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class MetricsCollector:
    """Node usage (smoothed) and pod usage from metrics.k8s.io objects."""

    def __init__(self, node_selector: LabelSelector | None = None, *, pods: PodMetricsTable | None = None) -> None:
        self.node_selector = node_selector
        # node → {"cpu": millicores, "memory": bytes}
        self.nodes: dict[str, dict[str, int]] = {}
        # "ns/name" → [(container name, usage)]: filled by add_objects, or a table the caller gives.
        self.pods: PodMetricsTable = {} if pods is None else pods
        self._pod_time: dict[str, datetime | None] = {}
        self.has_synced = False

    # ------------------------------------------------------------ feeding

    def add_objects(self, objects: Iterable[dict[str, Any]], node_names: Iterable[str] | None = None,
                    source: str = "") -> None:
        """Feed NodeMetrics and PodMetrics objects (others are ignored)."""
        allowed = set(node_names) if node_names is not None else None
        samples: list[_NodeSample] = []
        for raw in objects:
            kind = raw.get("kind")
            meta_raw = raw.get("metadata")
            meta: dict[str, Any] = meta_raw if isinstance(meta_raw, dict) else {}
            name = str(meta.get("name") or "")
            where = f"{kind} {name}"
            try:
                if kind == "NodeMetrics":
                    if not name:
                        raise InputError("expected a name", field="metadata.name")
                    usage = _usage(raw.get("usage"), "usage")
                    samples.append(_NodeSample(name, parse_time(raw.get("timestamp"), "timestamp"),
                                               usage.get("cpu", Fraction(0)), usage.get("memory", Fraction(0))))
                elif kind == "PodMetrics":
                    ns = str(meta.get("namespace") or "default")
                    key = f"{ns}/{name}"
                    ts = parse_time(raw.get("timestamp"), "timestamp")
                    prev = self._pod_time.get(key)
                    if key in self.pods and prev is not None and ts is not None and ts < prev:
                        continue
                    containers = []
                    for i, c in enumerate(raw.get("containers") or []):
                        if not isinstance(c, dict):
                            raise InputError("expected a container object", field=f"containers[{i}]")
                        containers.append((str(c.get("name") or ""), _usage(c.get("usage"), f"containers[{i}].usage")))
                    if not isinstance(self.pods, MutableMapping):
                        raise TypeError("this collector reads pod usage from the table it was given; "
                                        "it cannot be fed PodMetrics objects")
                    self.pods[key] = containers
                    self._pod_time[key] = ts
            except InputError as e:
                raise e.located(file=source or None, obj=where) from None
        samples.sort(key=lambda s: s.timestamp.timestamp() if s.timestamp else float("-inf"))
        for s in samples:
            if allowed is not None and s.name not in allowed:
                continue
            self.collect_node(s.name, milli_value_of(s.cpu), value_of(s.memory))
        self.has_synced = True

    def collect_node(self, name: str, cpu_milli: int, memory: int) -> None:
        """One Collect of one node: the first sample as is, later ones smoothed."""
        cur = self.nodes.get(name)
        if cur is None:
            self.nodes[name] = {"cpu": cpu_milli, "memory": memory}
        else:
            cur["cpu"] = weighted_average(cur["cpu"], cpu_milli)
            cur["memory"] = weighted_average(cur["memory"], memory)

    @classmethod
    def from_usage(cls, nodes: Mapping[str, Mapping[str, int]], pods: PodMetricsTable,
                   node_selector: LabelSelector | None = None, *, adopt: bool = False) -> MetricsCollector:
        """A collector that has collected already: per node {"cpu": millicores, "memory": bytes} as the
        smoothing left them, and pod usage from `pods`, kept as given (it may be computed on demand).
        It has synced when some node has usage.

        With `adopt`, `nodes` (a dict of such dicts holding Python ints, or NodeUsageColumns) is one the
        caller gives up: the collector keeps it as its own table instead of copying it."""
        mc = cls(node_selector, pods=pods)
        if adopt and isinstance(nodes, (dict, NodeUsageColumns)):
            mc.nodes = nodes  # type: ignore[assignment]
        else:
            for name, usage in nodes.items():
                mc.nodes[name] = {"cpu": int(usage["cpu"]), "memory": int(usage["memory"])}
        mc.has_synced = bool(mc.nodes)
        return mc

    @classmethod
    def from_cluster(cls, cluster: ClusterState, extra_objects: Iterable[dict[str, Any]] = (),
                     node_selector: LabelSelector | None = None, source: str = "") -> MetricsCollector:
        """Metrics objects stored in the cluster state (snapshot) first, then those of `--metrics`."""
        mc = cls(node_selector)
        names = [n.name for n in cluster.nodes.values() if node_selector is None or node_selector.matches(n.labels)]
        objs = [o.raw for o in cluster.others.values() if getattr(o, "kind", None) in METRICS_KINDS]
        mc.add_objects(objs, names)
        extra = list(extra_objects)
        if extra:
            mc.add_objects(extra, names, source)
        return mc

    # ------------------------------------------------------------ reading

    def all_nodes_usage(self) -> dict[str, dict[str, Fraction]]:
        """AllNodesUsage: cpu and memory of every collected node (as quantities)."""
        return {n: self.node_usage_of(n) for n in self.nodes}

    def node_usage_of(self, name: str) -> dict[str, Fraction]:
        u = self.nodes[name]
        return {"cpu": Fraction(u["cpu"], 1000), "memory": Fraction(u["memory"])}

    def node_usage(self, name: str) -> dict[str, Fraction] | None:
        return self.node_usage_of(name) if name in self.nodes else None

    def pod_usage(self, namespace: str, name: str, resource_names: Iterable[str]) -> dict[str, Fraction]:
        """actualUsageClient.podUsage: the sum over containers; raises KeyError naming what is missing."""
        key = f"{namespace}/{name}"
        containers = self.pods.get(key)
        if containers is None:
            raise KeyError(f"unable to get podmetrics for {key!r}")
        names = [r for r in resource_names if r != "pods"]
        total: dict[str, Fraction] = {}
        for cname, usage in containers:
            for r in names:
                if r not in usage:
                    raise KeyError(f"pod {key}: container {cname!r} is missing {r!r} resource")
                total[r] = total.get(r, Fraction(0)) + usage[r]
        return total

    def pod_usage_total(self, namespace: str, name: str, resource: str) -> Fraction | None:
        """One resource of a pod's usage, None when the pod has no metrics (for sorters and reports)."""
        containers = self.pods.get(f"{namespace}/{name}")
        if containers is None:
            return None
        return sum((u.get(resource, Fraction(0)) for _, u in containers), Fraction(0))


def read_metrics_objects(path: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """A `--metrics` file split into metrics.k8s.io objects and every other document (load-watcher, ...)."""
    docs = read_documents(path)
    objects: list[dict[str, Any]] = []
    others: list[Any] = []

    def walk(doc: Any) -> None:
        if isinstance(doc, list):
            for d in doc:
                walk(d)
            return
        if isinstance(doc, dict):
            kind = doc.get("kind")
            if kind in METRICS_KINDS:
                objects.append(doc)
                return
            if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
                items = doc["items"]
                if all(isinstance(i, dict) and i.get("kind") in METRICS_KINDS for i in items) or kind in (
                        "NodeMetricsList", "PodMetricsList"):
                    for i in items:
                        if isinstance(i, dict):
                            i = dict(i)
                            i.setdefault("kind", "NodeMetrics" if kind == "NodeMetricsList" else "PodMetrics")
                            walk(i)
                    return
        others.append(doc)

    for d in docs:
        walk(d)
    return objects, others

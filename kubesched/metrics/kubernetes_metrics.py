"""Usage as Kubernetes objects: metrics.k8s.io NodeMetrics/PodMetrics, and koordinator's NodeMetric.

From a snapshot (`kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes` output, or objects listed
beside the nodes and pods), from a file, or live from a cluster's metrics-server through the API server
(`MetricsServerSource`). Koordinator's `slo.koordinator.sh/v1alpha1` NodeMetric — what koordlet reports
and koordinator's LoadAwareScheduling and LowNodeLoad read — carries node usage, system usage, per-pod
usage with the pod's priority class, percentile aggregates and the report interval; it is read too.

Units: cpu in millicores (`MilliValue`), everything else `Value()`, both rounded up as apimachinery does.
A PodMetrics object does not say where the pod runs; `attach_nodes` fills that in from the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from fractions import Fraction
from typing import Any

from kubesched.api import fields
from kubesched.api.objects import parse_resource_list, parse_time
from kubesched.api.quantity import milli_value_of, value_of
from kubesched.api.snapshot import iter_objects, read_documents
from kubesched.errors import InputError
from kubesched.metrics.base import Metrics, MetricsSource, NodeUsage, PodUsage, Window, parse_window
from kubesched.metrics.http import get_json

METRICS_GROUP = "metrics.k8s.io"
KOORDINATOR_SLO_GROUP = "slo.koordinator.sh"
KINDS = ("NodeMetrics", "PodMetrics", "NodeMetric")


def to_units(resources: dict[str, Fraction]) -> dict[str, int]:
    return {k: milli_value_of(v) if k == "cpu" else value_of(v) for k, v in resources.items()}


def exact_units(resources: dict[str, Fraction]) -> dict[str, Fraction]:
    """The same units without rounding: cpu in millicores, the rest as is."""
    return {k: v * 1000 if k == "cpu" else v for k, v in resources.items()}


def is_metrics_object(obj: dict[str, Any]) -> bool:
    kind = obj.get("kind")
    api = str(obj.get("apiVersion", ""))
    if kind in ("NodeMetrics", "PodMetrics"):
        return api == "" or api.startswith(METRICS_GROUP + "/")
    if kind == "NodeMetric":
        return api == "" or api.startswith(KOORDINATOR_SLO_GROUP + "/")
    return False


def _name(obj: dict[str, Any], namespaced: bool) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise InputError("expected a non-empty name", field="metadata.name")
    if namespaced:
        return f"{meta.get('namespace') or 'default'}/{meta['name']}"
    return str(meta["name"])


def _stamp(obj: dict[str, Any], field: str) -> float | None:
    t = parse_time(obj.get(field), field)
    return t.timestamp() if t is not None else None


def _window(raw: Any, end: float | None, field: str) -> Window | None:
    if raw is None or raw == "":
        return None
    seconds = parse_window(raw, field)
    duration = raw if isinstance(raw, str) else f"{seconds:g}s"
    if end is None:
        return Window(duration)
    return Window(duration, end - seconds, end)


def _resource_map(raw: Any, field: str) -> dict[str, Fraction]:
    """koordinator's ResourceMap: {resources: ResourceList}, as quantities."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError("expected an object with resources", field=field)
    return parse_resource_list(raw.get("resources"), f"{field}.resources")


def parse_node_metrics(obj: dict[str, Any]) -> NodeUsage:
    name = _name(obj, namespaced=False)
    try:
        ts = _stamp(obj, "timestamp")
        usage = parse_resource_list(obj.get("usage"), "usage")
        return NodeUsage(name=name, usage=to_units(usage), exact=exact_units(usage), timestamp=ts,
                         window=_window(obj.get("window"), ts, "window"))
    except InputError as e:
        raise e.located(obj=f"NodeMetrics {name}") from None


def parse_pod_metrics(obj: dict[str, Any]) -> PodUsage:
    key = _name(obj, namespaced=True)
    try:
        ts = _stamp(obj, "timestamp")
        total: dict[str, Fraction] = {}
        containers = obj.get("containers") or []
        if not isinstance(containers, list):
            raise InputError("expected a list", field="containers")
        for i, c in enumerate(containers):
            if not isinstance(c, dict):
                raise InputError("expected a container object with usage", field=f"containers[{i}]")
            for k, v in parse_resource_list(c.get("usage"), f"containers[{i}].usage").items():
                total[k] = total.get(k, Fraction(0)) + v
        return PodUsage(key=key, usage=to_units(total), exact=exact_units(total), timestamp=ts,
                        window=_window(obj.get("window"), ts, "window"))
    except InputError as e:
        raise e.located(obj=f"PodMetrics {key}") from None


def parse_koordinator_node_metric(obj: dict[str, Any]) -> tuple[NodeUsage | None, list[PodUsage]]:
    """A koordinator NodeMetric: the node's usage (None when status.nodeMetric is absent) and its pods'."""
    name = _name(obj, namespaced=False)
    try:
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        if not isinstance(spec, dict) or not isinstance(status, dict):
            raise InputError("expected objects", field="spec/status")
        updated = parse_time(status.get("updateTime"), "status.updateTime")
        ts = updated.timestamp() if updated is not None else None
        policy = spec.get("metricCollectPolicy") or {}
        interval = fields.optional_integer(policy.get("reportIntervalSeconds") if isinstance(policy, dict) else None,
                                           "spec.metricCollectPolicy.reportIntervalSeconds")
        node: NodeUsage | None = None
        info = status.get("nodeMetric")
        if isinstance(info, dict):
            aggregated: dict[tuple[str, float], dict[str, int]] = {}
            for i, agg in enumerate(info.get("aggregatedNodeUsages") or []):
                f = f"status.nodeMetric.aggregatedNodeUsages[{i}]"
                if not isinstance(agg, dict):
                    raise InputError("expected an object with usage and duration", field=f)
                seconds = parse_window(agg.get("duration", 0), f"{f}.duration")
                for agg_type, rm in (agg.get("usage") or {}).items():
                    aggregated[(str(agg_type), seconds)] = to_units(_resource_map(rm, f"{f}.usage.{agg_type}"))
            usage = _resource_map(info.get("nodeUsage"), "status.nodeMetric.nodeUsage")
            system = _resource_map(info.get("systemUsage"), "status.nodeMetric.systemUsage")
            node = NodeUsage(name=name, usage=to_units(usage), exact=exact_units(usage), system_usage=to_units(system),
                             system_exact=exact_units(system), aggregated=aggregated,
                             report_interval=float(interval) if interval else None, timestamp=ts)
        pods = []
        for i, pm in enumerate(status.get("podsMetric") or []):
            f = f"status.podsMetric[{i}]"
            if pm is None:
                continue
            if not isinstance(pm, dict):
                raise InputError("expected an object with namespace, name and podUsage", field=f)
            key = f"{pm.get('namespace') or ''}/{pm.get('name') or ''}"
            used = _resource_map(pm.get("podUsage"), f"{f}.podUsage")
            pods.append(PodUsage(key=key, usage=to_units(used), exact=exact_units(used), node=name,
                                 priority_class=str(pm.get("priority") or ""), timestamp=ts))
        return node, pods
    except InputError as e:
        raise e.located(obj=f"NodeMetric {name}") from None


def metrics_from_objects(objects: Iterable[dict[str, Any]], source: str = "metrics.k8s.io",
                         captured: bool = True) -> Metrics:
    """Metrics from NodeMetrics, PodMetrics and koordinator NodeMetric objects (other kinds ignored).

    A node that has both a koordinator NodeMetric and a NodeMetrics keeps the NodeMetric (it says more).
    """
    nodes: dict[str, NodeUsage] = {}
    without_usage: dict[str, float | None] = {}
    koord_nodes: set[str] = set()
    pods: dict[str, PodUsage] = {}
    koord_pods: set[str] = set()
    for obj in objects:
        if not is_metrics_object(obj):
            continue
        kind = obj["kind"]
        if kind == "NodeMetrics":
            n = parse_node_metrics(obj)
            if n.name not in koord_nodes:
                nodes[n.name] = n
        elif kind == "PodMetrics":
            p = parse_pod_metrics(obj)
            if p.key not in koord_pods:
                pods[p.key] = p
        else:
            node, pod_usages = parse_koordinator_node_metric(obj)
            name = _name(obj, namespaced=False)
            koord_nodes.add(name)
            if node is not None:
                nodes[name] = node
                without_usage.pop(name, None)
            else:
                nodes.pop(name, None)
                without_usage[name] = _update_time(obj)
            for p in pod_usages:
                pods[p.key] = p
                koord_pods.add(p.key)
    return Metrics(source=source, nodes=nodes, pods=pods, captured=captured, without_usage=without_usage)


def _update_time(obj: dict[str, Any]) -> float | None:
    """A NodeMetric's status.updateTime as unix seconds (already validated by the parser)."""
    status = obj.get("status") or {}
    t = parse_time(status.get("updateTime"), "status.updateTime") if isinstance(status, dict) else None
    return t.timestamp() if t is not None else None


def attach_nodes(metrics: Metrics, pod_nodes: dict[str, str]) -> Metrics:
    """Say where each pod runs (PodMetrics do not); pods the cluster does not know keep no node."""
    for key, p in metrics.pods.items():
        if not p.node:
            p.node = pod_nodes.get(key, "")
    return metrics


def snapshot_metrics(snapshot: Any) -> Metrics | None:
    """The usage objects a loaded Snapshot carries (in `others`), or None when it has none."""
    raws = [o.raw for o in getattr(snapshot, "others", []) if is_metrics_object(o.raw)]
    if not raws:
        return None
    m = metrics_from_objects(raws, source="snapshot")
    pod_nodes = {p.key: p.node_name for p in getattr(snapshot, "pods", []) if p.node_name}
    return attach_nodes(m, pod_nodes)


class ObjectsFileSource(MetricsSource):
    """A file of NodeMetrics/PodMetrics/NodeMetric objects (a List or multi-document YAML)."""

    kind = "metrics objects file"

    def __init__(self, path: str) -> None:
        self.path = path

    def fetch(self, now: datetime) -> Metrics:
        try:
            return metrics_from_objects(iter_objects(read_documents(self.path), self.path), source=self.path)
        except InputError as e:
            raise e.located(file=self.path) from None


class MetricsServerSource(MetricsSource):
    """A cluster's metrics-server through the API server: /apis/metrics.k8s.io/v1beta1/{nodes,pods}."""

    kind = "metrics-server"

    def __init__(self, server: str, token: str | None = None, insecure: bool = False,
                 ca_file: str | None = None, pods: bool = True) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.insecure = insecure
        self.ca_file = ca_file
        self.pods = pods

    def _list(self, resource: str) -> list[dict[str, Any]]:
        url = f"{self.server}/apis/{METRICS_GROUP}/v1beta1/{resource}"
        doc = get_json(url, token=self.token, insecure=self.insecure, ca_file=self.ca_file, what="metrics-server")
        items = doc.get("items") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise InputError(f"metrics-server: GET {url} did not return a list with items")
        kind = "NodeMetrics" if resource == "nodes" else "PodMetrics"
        return [dict(i, kind=i.get("kind") or kind) for i in items if isinstance(i, dict)]

    def fetch(self, now: datetime) -> Metrics:
        objects = self._list("nodes") + (self._list("pods") if self.pods else [])
        return metrics_from_objects(objects, source=f"metrics-server at {self.server}", captured=False)

    def describe(self) -> str:
        return f"metrics-server at {self.server}"

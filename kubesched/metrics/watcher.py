"""load-watcher's WatcherMetrics: the document Trimaran consumes, from a file or from its HTTP API.

    {"timestamp": 1556987522, "window": {"duration": "15m", "start": ..., "end": ...}, "source": "Prometheus",
     "data": {"NodeMetricsMap": {"node-1": {"metrics": [{"name": "...", "type": "CPU", "operator": "AVG",
                                                         "rollup": "15m", "value": 30}], "tags": {}, "metadata": {}}}}}

`value` is a percentage of the node's capacity; `type` is CPU, Memory, Bandwidth, Storage, Energy;
`operator` is AVG, STD or Latest. The HTTP API is load-watcher's `GET <address>/watcher` (what
Trimaran's service client calls). Unknown keys are ignored, as load-watcher's decoder ignores them.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from kubesched.api import fields
from kubesched.api.documents import loads_json, read_text
from kubesched.diagnostics import warn
from kubesched.errors import InputError
from kubesched.metrics.base import Metric, Metrics, MetricsSource, NodeUsage, Window, watcher_metrics
from kubesched.metrics.http import get_json

BASE_URL = "/watcher"


def _number(raw: Any, field: str, integer: bool = False) -> float:
    """A JSON number (a float64 field, or with `integer` an int64 one)."""
    value = fields.number(raw, field)
    if integer and not value.is_integer():
        raise InputError(f"expected an integer, got {raw!r}", field=field)
    return value


def _string(raw: Any, field: str) -> str:
    return "" if raw is None else fields.string(raw, field)


def is_watcher_metrics(doc: Any) -> bool:
    """Whether a decoded document looks like WatcherMetrics (rather than Kubernetes objects)."""
    return isinstance(doc, dict) and "kind" not in doc and ("data" in doc or "window" in doc)


def parse_watcher_metrics(doc: Any, source: str = "load-watcher", captured: bool = True,
                          file: str | None = None) -> Metrics:
    """A decoded WatcherMetrics document as Metrics (InputErrors name the field)."""
    if not isinstance(doc, dict):
        raise InputError(f"expected a WatcherMetrics object, got {type(doc).__name__}")
    ts = _number(doc.get("timestamp", 0), "timestamp", integer=True)
    wraw = doc.get("window") or {}
    if not isinstance(wraw, dict):
        raise InputError("expected an object with duration, start and end", field="window")
    window = Window(_string(wraw.get("duration"), "window.duration"),
                    _number(wraw.get("start", 0), "window.start", integer=True),
                    _number(wraw.get("end", 0), "window.end", integer=True))
    data = doc.get("data") or {}
    if not isinstance(data, dict):
        raise InputError("expected an object with NodeMetricsMap", field="data")
    nmap = data.get("NodeMetricsMap")
    if nmap is None:
        # load-watcher's Go type reads only this key: a document without it gives no node a metric.
        others = ", ".join(map(str, list(data)[:5])) + (", ..." if len(data) > 5 else "")
        warn("no data.NodeMetricsMap, so no node has load metrics"
             + (f" (data holds {others}; load-watcher keeps nodes under data.NodeMetricsMap)" if data else ""),
             file=file, obj="WatcherMetrics", field="data.NodeMetricsMap")
        nmap = {}
    if not isinstance(nmap, dict):
        raise InputError("expected a map of node name to NodeMetrics", field="data.NodeMetricsMap")
    nodes: dict[str, NodeUsage] = {}
    for name, nm in nmap.items():
        f = f"data.NodeMetricsMap.{name}"
        if nm is None:
            nm = {}
        if not isinstance(nm, dict):
            raise InputError("expected an object with metrics", field=f)
        raw_metrics = nm.get("metrics") or []
        if not isinstance(raw_metrics, list):
            raise InputError("expected a list", field=f"{f}.metrics")
        metrics = []
        for i, m in enumerate(raw_metrics):
            mf = f"{f}.metrics[{i}]"
            if not isinstance(m, dict):
                raise InputError("expected a metric object with type, operator and value", field=mf)
            metrics.append(Metric(type=_string(m.get("type"), f"{mf}.type"),
                                  operator=_string(m.get("operator"), f"{mf}.operator"),
                                  value=_number(m.get("value", 0), f"{mf}.value"),
                                  name=_string(m.get("name"), f"{mf}.name"),
                                  rollup=_string(m.get("rollup"), f"{mf}.rollup")))
        nodes[str(name)] = NodeUsage(name=str(name), metrics=metrics)
    return Metrics(source=_string(doc.get("source"), "source") or source, nodes=nodes,
                   timestamp=ts or None, window=window, captured=captured)


def to_watcher_metrics(metrics: Metrics, capacities: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Metrics as a WatcherMetrics document (absolute usage converted with `capacities` per node)."""
    window = metrics.window or Window()
    nmap: dict[str, Any] = {}
    for name, node in (metrics.nodes or {}).items():
        ms = watcher_metrics(node, (capacities or {}).get(name, {}))
        nmap[name] = {"metrics": [{"name": m.name, "type": m.type, "operator": m.operator,
                                   **({"rollup": m.rollup} if m.rollup else {}), "value": m.value} for m in ms],
                      "tags": {}, "metadata": {}}
    return {"timestamp": int(metrics.timestamp or 0),
            "window": {"duration": window.duration, "start": int(window.start), "end": int(window.end)},
            "source": metrics.source, "data": {"NodeMetricsMap": nmap}}


class WatcherFileSource(MetricsSource):
    """A WatcherMetrics document saved to a file (a capture: judged at its own timestamp without --now)."""

    kind = "load-watcher file"

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)

    def fetch(self, now: datetime) -> Metrics:
        doc = loads_json(read_text(self.path), self.path)
        try:
            return parse_watcher_metrics(doc, file=self.path)
        except InputError as e:
            raise e.located(file=self.path, obj="WatcherMetrics") from None

    def describe(self) -> str:
        return f"load-watcher file {self.path}"


class WatcherHTTPSource(MetricsSource):
    """A running load-watcher: `GET <address>/watcher` (Trimaran's `watcherAddress`)."""

    kind = "load-watcher"

    def __init__(self, address: str, timeout: float = 55.0) -> None:
        self.address = address.rstrip("/")
        self.timeout = timeout

    def fetch(self, now: datetime) -> Metrics:
        url = self.address if self.address.endswith(BASE_URL) else self.address + BASE_URL
        doc = get_json(url, timeout=self.timeout, what="load-watcher")
        try:
            return parse_watcher_metrics(doc, captured=False)
        except InputError as e:
            raise e.located(file=url, obj="WatcherMetrics") from None

    def describe(self) -> str:
        return f"load-watcher at {self.address}"

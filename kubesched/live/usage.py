"""Actual usage for the live processes: metrics.k8s.io through the API server, or any `--metrics` source,
refreshed on an interval.

`--metrics metrics.k8s.io` reads NodeMetrics and PodMetrics through the process's own API connection (its
kubeconfig or service account: metrics-server behind the aggregated API); any other value is what the
one-shot commands' `--metrics` takes (a load-watcher, `prometheus+URL`, `metrics-server+URL`, a
MetricsSource file, or a file of metrics objects read once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubesched.errors import InputError, RemoteError
from kubesched.live.client import KubeClient, ResourceType
from kubesched.live.logs import Log
from kubesched.metrics.base import Metrics, MetricsFeed, MetricsSource, wall_clock_now
from kubesched.metrics.kubernetes_metrics import metrics_from_objects
from kubesched.metrics.loader import load_metrics, source_from_address

METRICS_API = "metrics.k8s.io"
NODE_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "nodes", "NodeMetrics", False)
POD_METRICS = ResourceType("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", True)


class ApiServerMetrics(MetricsSource):
    """NodeMetrics and PodMetrics listed through the API server the process talks to."""

    kind = "metrics.k8s.io"

    def __init__(self, kube: KubeClient, pods: bool = True) -> None:
        self.kube = kube
        self.pods = pods

    def objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for rt in (NODE_METRICS, POD_METRICS) if self.pods else (NODE_METRICS,):
            items, _ = self.kube.list(rt)
            out.extend({"apiVersion": rt.api_version, "kind": rt.kind, **o} for o in items)
        return out

    def fetch(self, now: datetime) -> Metrics:
        return metrics_from_objects(self.objects(), source=f"{self.kube.server} (metrics.k8s.io)", captured=False)


class FixedSource(MetricsSource):
    """A file read once: the same reading every time."""

    kind = "file"

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def fetch(self, now: datetime) -> Metrics:
        return self.metrics


def usage_source(spec: str, kube: KubeClient) -> MetricsSource:
    if spec == METRICS_API:
        return ApiServerMetrics(kube)
    source = source_from_address(spec)
    if source is not None:
        return source
    return FixedSource(load_metrics(spec, wall_clock_now()))


class UsageRefresher:
    """Keeps a MetricsFeed current: one reading now, then one every `interval` seconds in the background.

    A failed reading is logged and counted (`failures`), and the last good reading stays."""

    def __init__(self, source: MetricsSource, interval: float, log: Log, lock: Any,
                 on_failure: Callable[[], None] | None = None) -> None:
        self.source = source
        self.interval = interval
        self.log = log
        self.lock = lock
        self.feed = MetricsFeed()
        self.on_failure = on_failure
        self.stop = threading.Event()

    def refresh(self) -> bool:
        try:
            reading = self.source.fetch(wall_clock_now())
        except (RemoteError, InputError, OSError, ValueError) as e:
            self.log.error("Failed to read usage", err=e, source=self.source.describe())
            if self.on_failure is not None:
                self.on_failure()
            return False
        with self.lock:
            self.feed.set_metrics(reading)
        self.log.info("Read usage", v=3, source=self.source.describe())
        return True

    def start(self) -> None:
        self.refresh()
        threading.Thread(target=self._loop, name="usage", daemon=True).start()

    def _loop(self) -> None:
        while not self.stop.wait(self.interval):
            self.refresh()

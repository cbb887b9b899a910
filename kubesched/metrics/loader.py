"""`--metrics`: a file or an address, read into Metrics.

What `--metrics` may name:

- a load-watcher WatcherMetrics JSON file;
- a file of metrics.k8s.io NodeMetrics/PodMetrics (or koordinator NodeMetric) objects — a List,
  multi-document YAML, or `kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes` output;
- a kubesched `MetricsSource` document naming a live source (below);
- an address: `http(s)://host:port` is a load-watcher (like Trimaran's watcherAddress);
  `prometheus+http(s)://host:port` a Prometheus server; `metrics-server+https://apiserver` a cluster's
  metrics-server through its API server.

    apiVersion: kubesched.io/v1alpha1
    kind: MetricsSource
    prometheus:                    # or loadWatcher: {address}, or metricsServer: {server, ...}
      address: http://127.0.0.1:9090
      window: 15m                  # load-watcher's window
      cpuMetric: instance:node_cpu:ratio
      memoryMetric: instance:node_memory_utilisation:ratio
      nodeLabel: instance
      tokenFile: /var/run/secrets/token   # or token; insecureSkipVerify; caFile
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubesched.api import fields
from kubesched.api.documents import TOKEN_BYTES, read_text
from kubesched.api.snapshot import iter_objects, read_documents
from kubesched.errors import InputError
from kubesched.metrics.base import Metrics, MetricsSource
from kubesched.metrics.kubernetes_metrics import MetricsServerSource, is_metrics_object, metrics_from_objects
from kubesched.metrics.prometheus import PrometheusSource
from kubesched.metrics.watcher import WatcherHTTPSource, is_watcher_metrics, parse_watcher_metrics

SOURCE_KIND = "MetricsSource"
_SOURCE_KEYS = {"prometheus", "loadWatcher", "metricsServer"}


def _token(spec: fields.Fields) -> str | None:
    token = spec.string("token")
    path = spec.string("tokenFile")
    if token and path:
        raise InputError("set token or tokenFile, not both", field=spec.field)
    if path:
        try:
            return read_text(path, TOKEN_BYTES).strip()
        except InputError as e:
            raise spec.error("tokenFile", f"cannot read token file {path}: {e.message}") from None
    return token  # type: ignore[no-any-return]


def source_from_config(doc: dict[str, Any]) -> MetricsSource:
    """A kubesched MetricsSource document as a source."""
    fields.check_known(doc, "", sorted(_SOURCE_KEYS | fields.META_KEYS))
    chosen = [k for k in _SOURCE_KEYS if doc.get(k) is not None]
    if len(chosen) != 1:
        raise InputError(f"expected exactly one of {', '.join(sorted(_SOURCE_KEYS))}", obj=SOURCE_KIND)
    key = chosen[0]
    if not isinstance(doc[key], dict):
        raise InputError("expected an object", field=key)
    if key == "prometheus":
        spec = fields.Fields(doc[key], key, allowed={"address", "window", "cpuMetric", "memoryMetric", "nodeLabel",
                                                     "token", "tokenFile", "insecureSkipVerify", "caFile",
                                                     "includeLatest"}, meta=False)
        address = spec.string("address")
        if not address:
            raise spec.error("address", "expected the Prometheus server's address")
        return PrometheusSource(address, window=spec.string("window") or "15m",
                                cpu_metric=spec.string("cpuMetric", "instance:node_cpu:ratio"),
                                memory_metric=spec.string("memoryMetric", "instance:node_memory_utilisation:ratio"),
                                node_label=spec.string("nodeLabel") or "instance",
                                token=_token(spec), insecure=spec.boolean("insecureSkipVerify"),
                                ca_file=spec.string("caFile"), include_latest=spec.boolean("includeLatest"))
    if key == "loadWatcher":
        spec = fields.Fields(doc[key], key, allowed={"address"}, meta=False)
        address = spec.string("address")
        if not address:
            raise spec.error("address", "expected load-watcher's address")
        return WatcherHTTPSource(address)
    spec = fields.Fields(doc[key], key, allowed={"server", "token", "tokenFile", "insecureSkipVerify", "caFile", "pods"},
                         meta=False)
    server = spec.string("server")
    if not server:
        raise spec.error("server", "expected the API server's address")
    return MetricsServerSource(server, token=_token(spec), insecure=spec.boolean("insecureSkipVerify"),
                               ca_file=spec.string("caFile"), pods=spec.boolean("pods", True))


def source_from_address(address: str) -> MetricsSource | None:
    """An address given on the command line as a source, or None when it is not an address."""
    for prefix, build in (("prometheus+", PrometheusSource), ("metrics-server+", MetricsServerSource),
                          ("watcher+", WatcherHTTPSource)):
        if address.startswith(prefix):
            return build(address[len(prefix):])
    if address.startswith(("http://", "https://")):
        return WatcherHTTPSource(address)
    return None


def metrics_from_documents(docs: list[Any], path: str, now: datetime) -> Metrics:
    """Metrics from the decoded documents of one file."""
    if len(docs) == 1 and is_watcher_metrics(docs[0]):
        try:
            return parse_watcher_metrics(docs[0], file=path)
        except InputError as e:
            raise e.located(file=path, obj="WatcherMetrics") from None
    if len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("kind") == SOURCE_KIND:
        try:
            source = source_from_config(docs[0])
        except InputError as e:
            raise e.located(file=path, obj=SOURCE_KIND) from None
        return source.fetch(now)
    objects = list(iter_objects(docs, path))
    usable = [o for o in objects if is_metrics_object(o)]
    if not usable:
        kinds = sorted({str(o.get("kind")) for o in objects})
        raise InputError("expected a load-watcher WatcherMetrics document, metrics.k8s.io NodeMetrics/PodMetrics "
                         f"objects or a {SOURCE_KIND}; found {', '.join(kinds) or 'nothing'}", file=path)
    try:
        return metrics_from_objects(usable, source=path)
    except InputError as e:
        raise e.located(file=path) from None


def load_metrics(path: str, now: datetime) -> Metrics:
    """What `--metrics PATH` names, read once as of `now`."""
    source = source_from_address(path)
    if source is not None:
        return source.fetch(now)
    return metrics_from_documents(read_documents(path), path, now)

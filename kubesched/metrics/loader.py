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
from pathlib import Path
from typing import Any

from kubesched.errors import InputError
from kubesched.metrics.base import Metrics, MetricsSource
from kubesched.metrics.kubernetes_metrics import MetricsServerSource, is_metrics_object, metrics_from_objects
from kubesched.metrics.prometheus import PrometheusSource
from kubesched.metrics.watcher import WatcherHTTPSource, is_watcher_metrics, parse_watcher_metrics

SOURCE_KIND = "MetricsSource"
_SOURCE_KEYS = {"prometheus", "loadWatcher", "metricsServer"}


def _str(d: dict[str, Any], key: str, field: str, default: str | None = None) -> str | None:
    v = d.get(key, default)
    if v is not None and not isinstance(v, str):
        raise InputError(f"expected a string, got {v!r}", field=f"{field}.{key}")
    return v


def _bool(d: dict[str, Any], key: str, field: str) -> bool:
    v = d.get(key, False)
    if not isinstance(v, bool):
        raise InputError(f"expected true or false, got {v!r}", field=f"{field}.{key}")
    return v


def _token(d: dict[str, Any], field: str) -> str | None:
    token = _str(d, "token", field)
    path = _str(d, "tokenFile", field)
    if token and path:
        raise InputError("set token or tokenFile, not both", field=field)
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            raise InputError(f"cannot read token file {path}: {e.strerror or e}", field=f"{field}.tokenFile") from None
    return token


def _check_keys(d: dict[str, Any], allowed: set[str], field: str) -> None:
    for k in d:
        if k not in allowed:
            raise InputError(f"unknown field {k!r}; expected one of {', '.join(sorted(allowed))}", field=f"{field}.{k}")


def source_from_config(doc: dict[str, Any]) -> MetricsSource:
    """A kubesched MetricsSource document as a source."""
    _check_keys(doc, {"apiVersion", "kind"} | _SOURCE_KEYS, "")
    chosen = [k for k in _SOURCE_KEYS if doc.get(k) is not None]
    if len(chosen) != 1:
        raise InputError(f"expected exactly one of {', '.join(sorted(_SOURCE_KEYS))}", obj=SOURCE_KIND)
    key = chosen[0]
    spec = doc[key]
    if not isinstance(spec, dict):
        raise InputError("expected an object", field=key)
    if key == "prometheus":
        _check_keys(spec, {"address", "window", "cpuMetric", "memoryMetric", "nodeLabel", "token", "tokenFile",
                           "insecureSkipVerify", "caFile", "includeLatest"}, key)
        address = _str(spec, "address", key)
        if not address:
            raise InputError("expected the Prometheus server's address", field=f"{key}.address")
        return PrometheusSource(address, window=_str(spec, "window", key, "15m") or "15m",
                                cpu_metric=_str(spec, "cpuMetric", key, "instance:node_cpu:ratio") or "",
                                memory_metric=_str(spec, "memoryMetric", key,
                                                   "instance:node_memory_utilisation:ratio") or "",
                                node_label=_str(spec, "nodeLabel", key, "instance") or "instance",
                                token=_token(spec, key), insecure=_bool(spec, "insecureSkipVerify", key),
                                ca_file=_str(spec, "caFile", key), include_latest=_bool(spec, "includeLatest", key))
    if key == "loadWatcher":
        _check_keys(spec, {"address"}, key)
        address = _str(spec, "address", key)
        if not address:
            raise InputError("expected load-watcher's address", field=f"{key}.address")
        return WatcherHTTPSource(address)
    _check_keys(spec, {"server", "token", "tokenFile", "insecureSkipVerify", "caFile", "pods"}, key)
    server = _str(spec, "server", key)
    if not server:
        raise InputError("expected the API server's address", field=f"{key}.server")
    pods = spec.get("pods", True)
    if not isinstance(pods, bool):
        raise InputError(f"expected true or false, got {pods!r}", field=f"{key}.pods")
    return MetricsServerSource(server, token=_token(spec, key), insecure=_bool(spec, "insecureSkipVerify", key),
                               ca_file=_str(spec, "caFile", key), pods=pods)


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
    from kubesched.api.snapshot import iter_objects

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
    from kubesched.api.snapshot import read_documents

    return metrics_from_documents(read_documents(path), path, now)

"""Tables from CSV or Parquet: per-pod usage time series, pods arriving and leaving, nodes.

Parquet needs pyarrow (`pip install kubesched[parquet]`); CSV needs nothing. Numbers in a column are
multiplied by the column's unit (see `UNIT_FACTORS`): cpu ends in millicores, memory in bytes.
"""

from __future__ import annotations

import copy
import csv
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from kubesched.api.objects import parse_time
from kubesched.cluster.gpu import GPU_COUNT, GPU_MILLI, GPU_MODEL
from kubesched.errors import InputError
from kubesched.sim.scenario import GpuColumnsSpec, NodeTableSpec, PodTraceSpec, UsageTraceSpec
from kubesched.sim.units import UNIT_FACTORS
from kubesched.sim.usage import TraceGrid


def read_rows(path: str, where: str) -> list[dict[str, Any]]:
    """Every row of a CSV (header line first) or Parquet file as a dict."""
    p = Path(path)
    if p.suffix.lower() in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise InputError("reading Parquet needs pyarrow (pip install 'kubesched[parquet]'); or give a CSV file",
                             file=path, field=where) from None
        try:
            rows: list[dict[str, Any]] = pq.read_table(p).to_pylist()
        except Exception as e:  # pyarrow raises several types for a bad file
            raise InputError(f"cannot read Parquet: {e}", file=path, field=where) from None
        return rows
    try:
        with p.open(newline="") as fh:
            return list(csv.DictReader(fh))
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror or e}", file=path, field=where) from None
    except csv.Error as e:
        raise InputError(f"invalid CSV: {e}", file=path, field=where) from None


def _need_columns(rows: list[dict[str, Any]], columns: list[str], path: str, where: str) -> None:
    if not rows:
        raise InputError("the table has no rows", file=path, field=where)
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise InputError(f"no column {missing[0]!r}; the table has: {', '.join(map(str, rows[0]))}", file=path,
                         field=where)


def _number(value: Any, column: str, line: int, path: str) -> float:
    if value is None or value == "":
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"row {line}: expected a number in column {column!r}, got {value!r}", file=path) from None


def _seconds(value: Any, unit: float, start_epoch: float, column: str, line: int, path: str) -> float:
    """A time: a number (times `unit` seconds since the scenario start) or an RFC 3339 timestamp."""
    if isinstance(value, str) and ("T" in value or "-" in value[1:]):
        t = parse_time(value, f"{column} (row {line})")
        assert t is not None
        return t.timestamp() - start_epoch
    if hasattr(value, "timestamp"):
        return float(value.timestamp()) - start_epoch
    return _number(value, column, line, path) * unit


def load_usage_trace(spec: UsageTraceSpec, start_epoch: float, step: float, duration: float) -> TraceGrid:
    """Resample every series on the usage-step grid, holding the last value (and the first before it)."""
    rows = read_rows(spec.file, spec.where)
    cols = spec.columns
    need = [cols.series, cols.time] + [c for c in (cols.cpu, cols.memory) if c]
    _need_columns(rows, need, spec.file, spec.where)
    has_cpu = bool(cols.cpu) and cols.cpu in rows[0]
    has_mem = bool(cols.memory) and cols.memory in rows[0]
    cpu_factor = float(UNIT_FACTORS[spec.cpu_unit] * 1000)
    mem_factor = float(UNIT_FACTORS[spec.memory_unit])
    series: dict[str, list[tuple[float, float, float]]] = {}
    for line, row in enumerate(rows, start=2):
        name = str(row[cols.series])
        t = _seconds(row[cols.time], spec.time_unit, start_epoch, cols.time, line, spec.file)
        c = _number(row[cols.cpu], cols.cpu, line, spec.file) * cpu_factor if has_cpu and cols.cpu else math.nan
        m = _number(row[cols.memory], cols.memory, line, spec.file) * mem_factor if has_mem and cols.memory else math.nan
        series.setdefault(name, []).append((t, c, m))
    names = sorted(series)
    steps = int(duration // step) + 1 if step > 0 else 1
    grid_t = np.arange(steps) * step
    cpu = np.full((len(names), steps), np.nan) if has_cpu else None
    mem = np.full((len(names), steps), np.nan) if has_mem else None
    for i, name in enumerate(names):
        pts = sorted(series[name])
        ts = np.array([p[0] for p in pts])
        pos = np.clip(np.searchsorted(ts, grid_t, side="right") - 1, 0, len(ts) - 1)
        if cpu is not None:
            cpu[i] = np.array([p[1] for p in pts])[pos]
        if mem is not None:
            mem[i] = np.array([p[2] for p in pts])[pos]
    return TraceGrid(names, cpu, mem)


@dataclass(slots=True)
class TracePod:
    name: str
    arrival: float
    departure: float | None
    requests: dict[str, Fraction]
    affinity_values: list[str]
    annotations: dict[str, str] = field(default_factory=dict)
    # (milli-CPU, per-GPU milli, GPU count, models) of a trace with a gpu block (the FGD target's unit).
    gpu_shape: tuple[int, int, int, str] | None = None

    @property
    def gpu_demand(self) -> int:
        return self.gpu_shape[1] * self.gpu_shape[2] if self.gpu_shape else 0


def _gpu_fields(gpu: GpuColumnsSpec, row: dict[str, Any], cpu_milli: int, where: str) -> tuple[dict[str, str],
                                                                                                 tuple[int, int, int, str]]:
    """The GPU-share annotations of one row, as the published simulator writes its pods
    (hkust-adsl/kubernetes-scheduler-simulator `data/pod_csv_to_yaml.py`): none for a pod without GPUs;
    else the count, the per-GPU milli clamped to 0..1000, and the accepted models when there are any."""
    count = math.ceil(gpu.count.value(row, f"{where}.gpu.count"))
    milli = math.ceil(gpu.milli.value(row, f"{where}.gpu.milli"))
    models = ""
    if gpu.model:
        raw = row.get(gpu.model)
        models = "|".join(m for m in str(raw or "").split("|") if m)
    if count == 0:
        return {}, (cpu_milli, 0, 0, "")
    milli = milli if 0 < milli <= 1000 else (1000 if milli > 1000 else 0)
    ann = {GPU_MILLI: str(milli), GPU_COUNT: str(count)}
    if models:
        ann[GPU_MODEL] = models
    return ann, (cpu_milli, milli, count, models)


def load_pod_trace(spec: PodTraceSpec, rng: np.random.Generator | None = None) -> list[TracePod]:
    """The pods of a pod trace, in arrival order (ties in file order), by name, or shuffled with `rng`
    after sorting by name (the published simulator's shufflePod)."""
    rows = read_rows(spec.file, spec.where)
    need = [spec.name_column] + ([spec.arrival] if spec.arrival else []) + ([spec.departure] if spec.departure else [])
    for expr in spec.requests.values():
        need.extend(expr.columns)
    if spec.node_affinity:
        need.append(spec.node_affinity[0])
    if spec.gpu:
        need.extend(spec.gpu.count.columns + spec.gpu.milli.columns + ((spec.gpu.model,) if spec.gpu.model else ()))
    _need_columns(rows, need, spec.file, spec.where)
    pods = []
    for line, row in enumerate(rows, start=2):
        arrival = 0.0
        if spec.arrival:
            arrival = _number(row[spec.arrival], spec.arrival, line, spec.file) * spec.time_unit
            if arrival != arrival:
                raise InputError(f"row {line}: no arrival time in column {spec.arrival!r}", file=spec.file)
        departure = None
        if spec.departure:
            d = _number(row[spec.departure], spec.departure, line, spec.file)
            departure = None if d != d else d * spec.time_unit
        req = {}
        for res, expr in spec.requests.items():
            v = expr.value(row, f"{spec.where}.requests.{res} (row {line})")
            if v:
                req[res] = v
        values: list[str] = []
        if spec.node_affinity:
            raw = row.get(spec.node_affinity[0])
            if raw not in (None, ""):
                values = [v for v in str(raw).split(spec.node_affinity[2]) if v]
        tp = TracePod(str(row[spec.name_column]), arrival, departure, req, values)
        if spec.gpu:
            cpu = req.get("cpu")
            tp.annotations, tp.gpu_shape = _gpu_fields(spec.gpu, row, math.ceil(cpu * 1000) if cpu else 100,
                                                       f"{spec.where} (row {line})")
        pods.append(tp)
    if spec.order == "arrival":
        order = sorted(range(len(pods)), key=lambda i: (pods[i].arrival, i))
    else:
        order = sorted(range(len(pods)), key=lambda i: (pods[i].name, i))
        if spec.order == "shuffle":
            gen = rng if rng is not None else np.random.default_rng(0)
            order = [order[i] for i in gen.permutation(len(order))]
    pods = [pods[i] for i in order]
    if spec.limit:
        pods = pods[: spec.limit]
    if spec.timing == "sequential":
        for i, p in enumerate(pods):
            p.arrival = i * spec.interval
            p.departure = None
    return pods


def format_quantity(resource: str, value: Fraction) -> str:
    """A quantity string for a node or pod manifest: millicores for cpu, whole units otherwise."""
    if resource == "cpu":
        milli = math.ceil(value * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    return str(math.ceil(value))


def pod_trace_manifest(spec: PodTraceSpec, pod: TracePod, namespace: str) -> dict[str, Any]:
    """A Pod manifest for one trace row: the template with the row's name, requests and node affinity."""
    raw = copy.deepcopy(spec.template)
    raw["apiVersion"] = "v1"
    raw["kind"] = "Pod"
    meta = raw.setdefault("metadata", {})
    meta["name"] = pod.name
    meta.setdefault("namespace", namespace)
    pspec = raw.setdefault("spec", {})
    containers = pspec.get("containers") or [{"name": "main", "image": "trace"}]
    pspec["containers"] = containers
    c0 = containers[0]
    res = c0.setdefault("resources", {})
    requests = res.setdefault("requests", {})
    for k, v in pod.requests.items():
        requests[k] = format_quantity(k, v)
    # Extended resources cannot be overcommitted: their limits must equal the requests.
    limits = res.get("limits") or {}
    for k, v in pod.requests.items():
        if "/" in k and "kubernetes.io/" not in k:
            limits[k] = format_quantity(k, v)
    if limits:
        res["limits"] = limits
    if pod.annotations:
        meta.setdefault("annotations", {}).update(pod.annotations)
    if spec.node_affinity and pod.affinity_values:
        label = spec.node_affinity[1]
        aff = pspec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": label, "operator": "In",
                                                         "values": list(pod.affinity_values)}]}]}
    return raw


def load_node_table(spec: NodeTableSpec) -> list[dict[str, Any]]:
    """Node manifests, one per table row: the template with the row's name, capacity, allocatable, labels."""
    rows = read_rows(spec.file, spec.where)
    need = [spec.name] + list(spec.labels.values())
    for expr in list(spec.capacity.values()) + list(spec.allocatable.values()):
        need.extend(expr.columns)
    _need_columns(rows, need, spec.file, spec.where)
    out = []
    seen: set[str] = set()
    for line, row in enumerate(rows, start=2):
        name = str(row[spec.name])
        if not name or name in seen:
            raise InputError(f"row {line}: {'duplicate' if name else 'empty'} node name {name!r}", file=spec.file)
        seen.add(name)
        node = copy.deepcopy(spec.node)
        node["apiVersion"] = "v1"
        node["kind"] = "Node"
        meta = node.setdefault("metadata", {})
        meta["name"] = name
        labels = meta.setdefault("labels", {})
        labels.setdefault("kubernetes.io/hostname", name)
        for label, col in spec.labels.items():
            v = row.get(col)
            if v not in (None, ""):
                labels[label] = str(v)
        status = node.setdefault("status", {})
        cap = status.setdefault("capacity", {})
        alloc = status.setdefault("allocatable", {})
        for target, exprs in ((cap, spec.capacity), (alloc, spec.allocatable)):
            for res, expr in exprs.items():
                v = expr.value(row, f"{spec.where} (row {line})")
                if v:
                    target[res] = format_quantity(res, v)
        cap.setdefault("pods", "110")
        alloc.setdefault("pods", cap["pods"])
        status.setdefault("conditions", [{"type": "Ready", "status": "True"}])
        out.append(node)
    return out

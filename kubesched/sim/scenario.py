"""The scenario document (kubesched.io/v1alpha1 Scenario): what to simulate, validated with clear errors.

A scenario names the starting cluster (a snapshot and/or node templates with counts, or a node table),
the workloads as real manifests (and traces of pods that arrive and leave), the actual usage of every
pod (models or traces), the scheduler configuration, the descheduler policy and its interval, the
kubelet configuration, the metrics pipeline, timed events, the duration and the seed, plus the variants
to compare. Every error names the file, the field and what was expected (InputError → exit code 2).
Relative paths are relative to the scenario file.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from kubesched.api import fields
from kubesched.api.defaulting import SYSTEM_PRIORITY_CLASSES, default_workload
from kubesched.api.documents import describe
from kubesched.api.objects import parse_node, parse_time
from kubesched.api.selectors import LabelSelector, parse_label_selector
from kubesched.api.snapshot import iter_objects, read_documents
from kubesched.errors import InputError
from kubesched.sim.units import UNIT_FACTORS, parse_duration, quantity_in

API_VERSION = "kubesched.io/v1alpha1"
KIND = "Scenario"
VARIANT_KIND = "Variant"

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Pod")
# Other objects a workload file may carry; they are added to the cluster at the start.
CLUSTER_KINDS = ("Namespace", "PriorityClass", "PodDisruptionBudget", "Service", "PersistentVolumeClaim",
                 "ConfigMap", "Secret", "ServiceAccount", "PodGroup", "ElasticQuota", "NodeResourceTopology")
MODELS = ("constant", "diurnal", "randomWalk", "spikes")
# Bounds that keep a scenario within what one machine simulates (and refuse a typo such as count: 1000000000000
# at once): nodes at any time, and the simulated time.
MAX_NODES = 100_000
MAX_PODS = 1_500_000
MAX_DURATION_SECONDS = 366 * 24 * 3600.0

EVENT_ACTIONS = ("scale", "addNodes", "removeNodes", "cordon", "uncordon", "drain", "setUsage")
USAGE_RESOURCES = ("cpu", "memory")

DEFAULT_START = "2025-01-06T00:00:00Z"


# ---------------------------------------------------------------- reading helpers


class Obj:
    """A mapping of the scenario read field by field: unknown keys and wrong types are InputErrors naming the
    field (kubesched.api.fields reads the values; strings must not be empty, numbers have a minimum)."""

    def __init__(self, raw: Any, where: str, allowed: tuple[str, ...], file: str | None = None) -> None:
        try:
            if raw is None:
                raise InputError(f"expected an object, got {_type(raw)}", field=where or None)
            self.raw = fields.mapping(raw, where, show=_type)
            fields.check_known(self.raw, where, allowed, message="unknown field {key!r}; expected one of: {allowed}",
                               meta=False)
        except InputError as e:
            raise e.located(file=file) from None
        self.where = where
        self.file = file

    def f(self, key: str) -> str:
        return fields.join(self.where, key)

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, key: str, default: Any = None) -> Any:
        v = self.raw.get(key)
        return default if v is None else v

    def err(self, key: str, message: str) -> InputError:
        return InputError(message, file=self.file, field=self.f(key))

    def required(self, key: str) -> Any:
        v = self.raw.get(key)
        if v is None:
            raise self.err(key, "required field is missing")
        return v

    def string(self, key: str, default: str | None = None, required: bool = False) -> str:
        v = self.raw.get(key)
        if v is None:
            if required:
                raise self.err(key, "required field is missing")
            return default or ""
        if not isinstance(v, str) or not v:
            raise self.err(key, f"expected a non-empty string, got {v!r}")
        return v

    def integer(self, key: str, default: int = 0, minimum: int | None = 0, maximum: int = 2**63 - 1) -> int:
        v = self.raw.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(key, f"expected an integer, got {v!r}")
        if minimum is not None and v < minimum:
            raise self.err(key, f"expected an integer of at least {minimum}, got {v}")
        if v > maximum:
            raise self.err(key, f"expected an integer of at most {maximum}, got {v}")
        return v

    def number(self, key: str, default: float = 0.0, minimum: float | None = 0.0, maximum: float | None = None) -> float:
        v = self.raw.get(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.err(key, f"expected a number, got {v!r}")
        if minimum is not None and v < minimum:
            raise self.err(key, f"expected a number of at least {minimum:g}, got {v!r}")
        if maximum is not None and v > maximum:
            raise self.err(key, f"expected a number of at most {maximum:g}, got {v!r}")
        return float(v)

    def duration(self, key: str, default: float | None = None, allow_zero: bool = True) -> float:
        v = self.raw.get(key)
        if v is None:
            if default is None:
                raise self.err(key, "required field is missing")
            return default
        try:
            return parse_duration(v, self.f(key), allow_zero=allow_zero)
        except InputError as e:
            raise e.located(file=self.file) from None

    def boolean(self, key: str, default: bool = False) -> bool:
        v = self.raw.get(key)
        try:
            return default if v is None else fields.boolean(v, self.f(key))
        except InputError as e:
            raise e.located(file=self.file) from None

    def seq(self, key: str) -> list[Any]:
        try:
            return fields.sequence(self.raw.get(key), self.f(key), show=_type)
        except InputError as e:
            raise e.located(file=self.file) from None

    def obj(self, key: str, allowed: tuple[str, ...]) -> Obj:
        return Obj(self.raw.get(key) or {}, self.f(key), allowed, self.file)


def _type(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "nothing"}.get(
        type(v), type(v).__name__)


# ---------------------------------------------------------------- usage models


@dataclass(frozen=True, slots=True)
class Level:
    """A usage level: a fraction of the pod's request (`relative`) or an absolute amount in base units
    (millicores for cpu, bytes for memory)."""

    value: float
    relative: bool

    def resolve(self, request: float) -> float:
        return self.value * request if self.relative else self.value


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One resource's usage model; see docs/simulator.md for the formulas."""

    model: str
    levels: dict[str, Level] = field(default_factory=dict)
    period: float = 86400.0
    peak_at: float = 14 * 3600.0
    rate_per_hour: float = 0.0
    spike_duration: float = 300.0
    noise: float = 0.0
    spread: float = 0.0
    source: str = ""  # where it was written, for messages


@dataclass(frozen=True, slots=True)
class TraceColumns:
    series: str
    time: str
    cpu: str | None
    memory: str | None


@dataclass(frozen=True, slots=True)
class UsageTraceSpec:
    """Per-pod usage time series from a CSV or Parquet file (long form: one row per series and time)."""

    file: str
    columns: TraceColumns
    workload: str | None  # pods of this workload take the series by replica; else series match pod names
    cpu_unit: str
    memory_unit: str
    time_unit: float  # seconds per unit of a numeric time column
    where: str


@dataclass(frozen=True, slots=True)
class Match:
    """Which pods a usage rule covers: one workload, or pods matching a selector (in a namespace)."""

    workload: str | None = None
    selector: LabelSelector | None = None
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class UsageRule:
    match: Match
    cpu: ModelSpec | None
    memory: ModelSpec | None
    where: str


# ---------------------------------------------------------------- cluster


@dataclass(frozen=True, slots=True)
class ColumnExpr:
    """A number from a table row: a column (or the product of several) times `scale`, in `unit`."""

    columns: tuple[str, ...]
    scale: Fraction
    unit: Fraction

    def value(self, row: dict[str, Any], where: str) -> Fraction:
        factor = self.scale * self.unit
        prod: int | Fraction = 1
        for c in self.columns:
            raw = row.get(c)
            if raw is None or raw == "":
                return Fraction(0)
            text = str(raw).strip()
            try:
                prod *= int(text)
            except ValueError:
                try:
                    prod *= Fraction(text)
                except (ValueError, ZeroDivisionError):
                    raise InputError(f"expected a number in column {c!r}, got {raw!r}", field=where) from None
        if isinstance(prod, int):
            return Fraction(prod * factor.numerator, factor.denominator)
        return prod * factor


@dataclass(slots=True)
class NodeTemplate:
    name: str
    count: int
    node: dict[str, Any]  # a Node object; metadata.name is replaced by <template>-<i>
    where: str


@dataclass(slots=True)
class NodeTableSpec:
    file: str
    name: str
    capacity: dict[str, ColumnExpr]
    allocatable: dict[str, ColumnExpr]
    labels: dict[str, str]  # label key -> column
    node: dict[str, Any]
    where: str


@dataclass(slots=True)
class ClusterSpec:
    snapshot: str | None
    templates: list[NodeTemplate]
    node_table: NodeTableSpec | None
    objects: list[dict[str, Any]]


# ---------------------------------------------------------------- workloads


@dataclass(slots=True)
class WorkloadSpec:
    """A workload manifest (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, Pod) and its usage."""

    manifest: dict[str, Any]
    key: str  # Kind/namespace/name
    usage: UsageRule | None
    where: str
    # Seconds a Job's pod runs before it succeeds (Jobs only).
    job_duration: float = 0.0


@dataclass(frozen=True, slots=True)
class GpuColumnsSpec:
    """How a trace row asks for GPUs, written on the pod as the GPU-share annotations
    (kubesched.cluster.gpu), and the target workload FGD measures fragmentation against."""

    count: ColumnExpr
    milli: ColumnExpr
    model: str | None  # column of accepted models, '|'-separated
    popularity_threshold: int = 95
    increase_step: int = 1
    include_cpu_pods: bool = True
    gpu_res_weight: float = 0.0


@dataclass(slots=True)
class PodTraceSpec:
    """Pods that arrive and leave by a table's recorded times (e.g. a cluster trace)."""

    name: str
    file: str
    name_column: str
    arrival: str | None
    departure: str | None
    time_unit: float
    timing: str  # recorded | sequential
    order: str  # arrival | name | shuffle (sequential timing: the order pods arrive in)
    interval: float  # sequential: seconds between arrivals
    limit: int
    inflate: tuple[str, float] | None  # (resource, factor): sample more pods until demand reaches factor × capacity
    requests: dict[str, ColumnExpr]
    node_affinity: tuple[str, str, str] | None  # (column, node label, separator)
    gpu: GpuColumnsSpec | None
    drop_unschedulable: bool  # a pod that fails its first scheduling attempt leaves (FGD's methodology)
    template: dict[str, Any]
    usage: UsageRule | None
    where: str


# ---------------------------------------------------------------- components


@dataclass(slots=True)
class ComponentConfig:
    """A configuration document (inline or a file), kept raw; parsed when the run starts."""

    raw: dict[str, Any]
    source: str


@dataclass(slots=True)
class DeschedulerSpec:
    policy: ComponentConfig
    interval: float


@dataclass(slots=True)
class KubeletSpec:
    config: ComponentConfig | None
    housekeeping_interval: float
    system_reserved_memory: int  # bytes the node's system uses besides pods (in the working set)


@dataclass(slots=True)
class MetricsView:
    """What one consumer of the metrics pipeline sees: an average over `window`, `delay` behind."""

    window: float
    delay: float


@dataclass(slots=True)
class MetricsSpec:
    sampling_interval: float
    default: MetricsView
    metrics_server: MetricsView
    load_watcher: MetricsView
    koordlet: MetricsView
    watcher_refresh: float  # how often the load-watcher cache the scheduler plugins read is refreshed
    descheduler_poll: float  # the descheduler's MetricsCollector poll interval


@dataclass(slots=True)
class EventSpec:
    at: float
    action: str
    params: dict[str, Any]
    where: str


@dataclass(frozen=True, slots=True)
class GpuReferenceSpec:
    """Published allocation curves (the FGD paper's analysis_allo_discrete.csv layout) to compare with."""

    file: str
    workload: str | None  # the `workload` rows to use (None: the GPU trace's file name without extension)
    policies: dict[str, str]  # variant name → the published sc_policy it reproduces


@dataclass(slots=True)
class ReportSpec:
    hot_threshold: float
    loop_window: float
    record_interval: float
    gpu_allocation: bool = False  # GPU allocation against arrived GPU demand, at every pod arrival
    gpu_fragmentation: bool = False  # and the cluster's GPU fragmentation alongside
    gpu_reference: GpuReferenceSpec | None = None  # published curves to draw the runs over


@dataclass(slots=True)
class VariantSpec:
    """One way to run the scenario: components replaced (None: the scenario's own)."""

    name: str
    scheduler: ComponentConfig | None = None
    descheduler: DeschedulerSpec | None = None
    descheduler_set: bool = False  # whether the variant says anything about the descheduler
    kubelet: ComponentConfig | None = None
    description: str = ""


@dataclass(frozen=True, slots=True)
class ReplaySpec:
    """Pods as a recording saw them (`kubesched capture`): which node each ran on, and when it was first and
    last seen. See kubesched/sim/replay.py."""

    file: str
    namespace: str  # column names
    name: str
    node: str
    start: str
    end: str
    owner: str  # optional column: Kind/name of the pod's controller
    time_unit: float
    placement: str  # recorded | scheduler
    where: str


@dataclass(slots=True)
class Scenario:
    name: str
    path: str
    base_dir: Path
    duration: float
    seed: int
    start: datetime
    usage_step: float
    startup_delay: float
    cluster: ClusterSpec
    workloads: list[WorkloadSpec]
    pod_traces: list[PodTraceSpec]
    usage_rules: list[UsageRule]
    usage_traces: list[UsageTraceSpec]
    scheduler: ComponentConfig | None
    descheduler: DeschedulerSpec | None
    kubelet: KubeletSpec
    metrics: MetricsSpec
    events: list[EventSpec]
    report: ReportSpec
    variants: list[VariantSpec]
    description: str = ""
    replay: ReplaySpec | None = None
    seeds: tuple[int, ...] = ()  # several runs per variant, one per seed (empty: just `seed`)
    tie_break: str = "random"  # how the scheduler picks among equally scored nodes

    def workload_keys(self) -> list[str]:
        return [w.key for w in self.workloads]


# ---------------------------------------------------------------- parsing


def _resolve(base: Path, value: str) -> Path:
    p = Path(value)
    return p if p.is_absolute() else base / p


def _load_objects(path: Path, where: str, file: str) -> list[dict[str, Any]]:
    if not path.exists():
        raise InputError(f"file {str(path)!r} does not exist", file=file, field=where)
    return list(iter_objects(read_documents(path), str(path)))


def parse_level(raw: Any, field: str, resource: str, file: str | None) -> Level:
    """A number is a fraction of the request; a string is a quantity (250m, 1.5, 512Mi)."""
    if isinstance(raw, bool) or raw is None:
        raise InputError(f"expected a fraction of the request (a number) or a quantity (a string such as "
                         f"{'250m' if resource == 'cpu' else '512Mi'}), got {raw!r}", file=file, field=field)
    if isinstance(raw, (int, float)):
        if raw < 0:
            raise InputError(f"expected a non-negative fraction, got {raw!r}", file=file, field=field)
        return Level(float(raw), True)
    if not isinstance(raw, str):
        raise InputError(f"expected a number or a quantity, got {_type(raw)}", file=file, field=field)
    q = quantity_in(raw, field) if raw else None
    if q is None or q < 0:
        raise InputError(f"expected a non-negative quantity, got {raw!r}", file=file, field=field)
    base = q * 1000 if resource == "cpu" else q
    return Level(float(base), False)


def parse_model(raw: Any, field: str, resource: str, file: str | None) -> ModelSpec:
    """A usage model for one resource: a level alone (constant), or an object naming the model."""
    if not isinstance(raw, dict):
        return ModelSpec("constant", {"value": parse_level(raw, field, resource, file)}, source=field)
    model = raw.get("model")
    if model not in MODELS:
        raise InputError(f"expected one of {', '.join(MODELS)}, got {model!r}", file=file, field=f"{field}.model")
    allowed: dict[str, tuple[str, ...]] = {
        "constant": ("value",),
        "diurnal": ("mean", "amplitude", "period", "peakAt"),
        "randomWalk": ("start", "step", "min", "max"),
        "spikes": ("base", "peak", "ratePerHour", "duration"),
    }
    o = Obj(raw, field, ("model", "noise", "spread") + allowed[model], file)
    levels: dict[str, Level] = {}
    required = {"constant": ("value",), "diurnal": ("mean",), "randomWalk": ("start", "step"),
                "spikes": ("base", "peak")}[model]
    for key in allowed[model]:
        if key in ("period", "peakAt", "ratePerHour", "duration"):
            continue
        if o.has(key):
            levels[key] = parse_level(o.raw[key], o.f(key), resource, file)
        elif key in required:
            raise o.err(key, f"required field is missing for model {model}")
    spec = ModelSpec(
        model=model, levels=levels,
        period=o.duration("period", 86400.0, allow_zero=False),
        peak_at=o.duration("peakAt", 14 * 3600.0),
        rate_per_hour=o.number("ratePerHour", 1.0) if model == "spikes" else 0.0,
        spike_duration=o.duration("duration", 300.0, allow_zero=False),
        noise=o.number("noise", 0.0, 0.0, 10.0),
        spread=o.number("spread", 0.0, 0.0, 1.0),
        source=field,
    )
    if model == "randomWalk" and "min" in levels and "max" in levels:
        lo, hi = levels["min"], levels["max"]
        if lo.relative == hi.relative and lo.value > hi.value:
            raise o.err("min", f"min ({lo.value:g}) is greater than max ({hi.value:g})")
    return spec


def parse_usage(raw: Any, where: str, file: str | None, match: Match) -> UsageRule:
    o = Obj(raw, where, ("cpu", "memory"), file)
    return UsageRule(match, parse_model(o.raw["cpu"], o.f("cpu"), "cpu", file) if o.has("cpu") else None,
                     parse_model(o.raw["memory"], o.f("memory"), "memory", file) if o.has("memory") else None, where)


def workload_key(obj: dict[str, Any]) -> str:
    raw_meta = obj.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    return f"{obj.get('kind')}/{meta.get('namespace') or 'default'}/{meta.get('name')}"


def _column_expr(raw: Any, field: str, file: str | None) -> ColumnExpr:
    if isinstance(raw, str) and raw:
        return ColumnExpr((raw,), Fraction(1), Fraction(1))
    o = Obj(raw, field, ("column", "product", "scale", "unit"), file)
    if o.has("column") == o.has("product"):
        raise InputError("expected exactly one of column or product", file=file, field=field)
    cols: tuple[str, ...]
    if o.has("column"):
        cols = (o.string("column"),)
    else:
        prod = o.seq("product")
        if not prod or not all(isinstance(c, str) and c for c in prod):
            raise o.err("product", "expected a non-empty list of column names")
        cols = tuple(prod)
    unit = o.get("unit", "")
    if unit not in UNIT_FACTORS:
        raise o.err("unit", f"expected one of {', '.join(repr(u) for u in UNIT_FACTORS)}, got {unit!r}")
    scale = o.get("scale", 1)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
        raise o.err("scale", f"expected a positive number, got {scale!r}")
    return ColumnExpr(cols, Fraction(str(scale)), UNIT_FACTORS[unit])


def _column_map(raw: Any, field: str, file: str | None) -> dict[str, ColumnExpr]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"expected a map of resource name to column, got {_type(raw)}", file=file, field=field)
    return {str(k): _column_expr(v, f"{field}.{k}", file) for k, v in raw.items()}


def _config(raw: Any, field: str, base: Path, file: str, kinds: tuple[str, ...]) -> ComponentConfig:
    """A configuration: a path to a file holding one document of the kinds, or the document inline."""
    if isinstance(raw, str):
        path = _resolve(base, raw)
        if not path.exists():
            raise InputError(f"file {raw!r} does not exist", file=file, field=field)
        docs = read_documents(path)
        found = [d for d in docs if isinstance(d, dict) and d.get("kind") in kinds]
        if len(found) != 1:
            raise InputError(f"expected one {' or '.join(kinds)} document in {raw!r}, found {len(found)}", file=file,
                             field=field)
        return ComponentConfig(found[0], str(path))
    if isinstance(raw, dict):
        if raw.get("kind") not in kinds:
            raise InputError(f"expected kind {' or '.join(kinds)}, got {raw.get('kind')!r}", file=file,
                             field=f"{field}.kind")
        return ComponentConfig(copy.deepcopy(raw), f"{file}#{field}")
    raise InputError(f"expected a file name or an inline {kinds[0]}, got {_type(raw)}", file=file, field=field)


SCHEDULER_KINDS = ("KubeSchedulerConfiguration",)
DESCHEDULER_KINDS = ("DeschedulerPolicy", "DeschedulerConfiguration")
KUBELET_KINDS = ("KubeletConfiguration",)


def _descheduler(raw: Any, field: str, base: Path, file: str) -> DeschedulerSpec | None:
    if raw is None:
        return None
    o = Obj(raw, field, ("policy", "interval"), file)
    return DeschedulerSpec(_config(o.required("policy"), o.f("policy"), base, file, DESCHEDULER_KINDS),
                           o.duration("interval", 300.0, allow_zero=False))


def _metrics(raw: Any, field: str, file: str) -> MetricsSpec:
    o = Obj(raw or {}, field, ("samplingInterval", "window", "delay", "metricsServer", "loadWatcher", "koordlet",
                               "watcherRefreshInterval", "deschedulerPollInterval"), file)
    sampling = o.duration("samplingInterval", 15.0)
    default = MetricsView(o.duration("window", 60.0), o.duration("delay", 30.0))

    def view(key: str, window: float | None = None) -> MetricsView:
        if not o.has(key):
            return MetricsView(window if window is not None else default.window, default.delay)
        v = o.obj(key, ("window", "delay"))
        return MetricsView(v.duration("window", window if window is not None else default.window),
                           v.duration("delay", default.delay))

    return MetricsSpec(sampling, default, view("metricsServer"), view("loadWatcher"), view("koordlet"),
                       o.duration("watcherRefreshInterval", 60.0, allow_zero=False),
                       o.duration("deschedulerPollInterval", 5.0, allow_zero=False))


def _node_template(raw: Any, where: str, base: Path, file: str) -> NodeTemplate:
    o = Obj(raw, where, ("name", "count", "node", "nodeFile"), file)
    name = o.string("name", required=True)
    if o.has("node") == o.has("nodeFile"):
        raise InputError("expected exactly one of node or nodeFile", file=file, field=where)
    if o.has("node"):
        node = copy.deepcopy(o.raw["node"])
        if not isinstance(node, dict):
            raise o.err("node", f"expected a Node object, got {_type(node)}")
    else:
        objs = [d for d in _load_objects(_resolve(base, o.string("nodeFile")), o.f("nodeFile"), file)
                if d.get("kind") == "Node"]
        if len(objs) != 1:
            raise o.err("nodeFile", f"expected one Node in the file, found {len(objs)}")
        node = objs[0]
    node.setdefault("kind", "Node")
    node.setdefault("apiVersion", "v1")
    node.setdefault("metadata", {})
    if not isinstance(node["metadata"], dict):
        raise o.err("node", "expected metadata to be an object")
    node["metadata"]["name"] = f"{name}-0"
    try:
        parsed = parse_node(node)
    except InputError as e:
        raise e.located(file=file, field_prefix=o.f("node")) from None
    if not parsed.allocatable and not parsed.capacity:
        raise o.err("node", "the node template has no status.capacity or status.allocatable")
    return NodeTemplate(name, o.integer("count", 1, maximum=MAX_NODES), node, where)


def _node_table(raw: Any, where: str, base: Path, file: str) -> NodeTableSpec:
    o = Obj(raw, where, ("file", "name", "capacity", "allocatable", "labels", "node"), file)
    path = _resolve(base, o.string("file", required=True))
    if not path.exists():
        raise o.err("file", f"file {o.string('file')!r} does not exist")
    capacity = _column_map(o.required("capacity"), o.f("capacity"), file)
    labels = o.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise o.err("labels", "expected a map of label key to column name")
    node = copy.deepcopy(o.get("node", {}))
    if not isinstance(node, dict):
        raise o.err("node", f"expected a Node object, got {_type(node)}")
    return NodeTableSpec(str(path), o.string("name", "name"), capacity,
                         _column_map(o.get("allocatable"), o.f("allocatable"), file) or dict(capacity),
                         {str(k): v for k, v in labels.items()}, node, where)


def _workloads(items: list[Any], where: str, base: Path, file: str) -> tuple[list[WorkloadSpec], list[PodTraceSpec],
                                                                              list[dict[str, Any]]]:
    workloads: list[WorkloadSpec] = []
    traces: list[PodTraceSpec] = []
    extra: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        o = Obj(item, w, ("file", "object", "usage", "podTrace", "jobDuration"), file)
        sources = [k for k in ("file", "object", "podTrace") if o.has(k)]
        if len(sources) != 1:
            raise InputError("expected exactly one of file, object or podTrace", file=file, field=w)
        if o.has("podTrace"):
            traces.append(_pod_trace(o.raw["podTrace"], o.f("podTrace"), base, file, o))
            continue
        if o.has("file"):
            objs = _load_objects(_resolve(base, o.string("file")), o.f("file"), file)
        else:
            if not isinstance(o.raw["object"], dict):
                raise o.err("object", f"expected a manifest object, got {_type(o.raw['object'])}")
            objs = [copy.deepcopy(o.raw["object"])]
        found = 0
        for obj in objs:
            kind = obj.get("kind")
            if kind in WORKLOAD_KINDS:
                meta = obj.get("metadata")
                if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
                    raise InputError("expected metadata.name", file=file, field=f"{w} ({kind})")
                key = workload_key(obj)
                usage = parse_usage(o.raw["usage"], o.f("usage"), file, Match(workload=key)) if o.has("usage") else None
                workloads.append(WorkloadSpec(obj, key, usage, w, o.duration("jobDuration", 600.0, allow_zero=False)))
                found += 1
            elif kind in CLUSTER_KINDS:
                extra.append(obj)
            else:
                raise InputError(f"unsupported kind {kind!r}; expected a workload ({', '.join(WORKLOAD_KINDS)}) or "
                                 f"one of {', '.join(CLUSTER_KINDS)}", file=file, field=w)
        if not found and o.has("usage"):
            raise o.err("usage", "usage given but the entry holds no workload")
    seen: set[str] = set()
    for wl in workloads:
        if wl.key in seen:
            raise InputError(f"duplicate workload {wl.key}", file=file, field=wl.where)
        seen.add(wl.key)
    return workloads, traces, extra


def _pod_trace(raw: Any, where: str, base: Path, file: str, parent: Obj) -> PodTraceSpec:
    o = Obj(raw, where, ("name", "file", "columns", "timeUnit", "timing", "order", "interval", "limit", "inflate",
                         "requests", "gpu", "nodeAffinity", "template", "onUnschedulable"), file)
    path = _resolve(base, o.string("file", required=True))
    if not path.exists():
        raise o.err("file", f"file {o.string('file')!r} does not exist")
    cols = o.obj("columns", ("name", "arrival", "departure"))
    timing = o.string("timing", "recorded")
    if timing not in ("recorded", "sequential"):
        raise o.err("timing", f"expected recorded or sequential, got {timing!r}")
    order = o.string("order", "arrival")
    if order not in ("arrival", "name", "shuffle"):
        raise o.err("order", f"expected arrival, name or shuffle, got {order!r}")
    if order != "arrival" and timing != "sequential":
        raise o.err("order", f"order {order} needs timing: sequential (pods arrive one by one in that order)")
    arrival = cols.string("arrival") or None
    if arrival is None and (timing == "recorded" or order == "arrival"):
        raise cols.err("arrival", "required unless timing is sequential and order is name or shuffle")
    gpu = _gpu_columns(o.raw["gpu"], o.f("gpu"), file) if o.has("gpu") else None
    inflate = None
    if o.has("inflate"):
        io = o.obj("inflate", ("resource", "factor"))
        inflate = (io.string("resource", required=True), io.number("factor", 1.0, 0.0))
    na = None
    if o.has("nodeAffinity"):
        ao = o.obj("nodeAffinity", ("column", "label", "separator"))
        na = (ao.string("column", required=True), ao.string("label", required=True), ao.string("separator", "|"))
    template = copy.deepcopy(o.get("template", {}))
    if not isinstance(template, dict):
        raise o.err("template", f"expected a Pod object, got {_type(template)}")
    name = o.string("name", path.stem)
    on_unsched = o.string("onUnschedulable", "wait")
    if on_unsched not in ("wait", "drop"):
        raise o.err("onUnschedulable", f"expected wait or drop, got {on_unsched!r}")
    usage = parse_usage(parent.raw["usage"], parent.f("usage"), file, Match(workload=f"PodTrace/{name}")) \
        if parent.has("usage") else None
    return PodTraceSpec(
        name=name, file=str(path), name_column=cols.string("name", "name"),
        arrival=arrival, departure=cols.string("departure") or None,
        time_unit=o.number("timeUnit", 1.0, 0.0), timing=timing, order=order, interval=o.duration("interval", 1.0),
        limit=o.integer("limit", 0), inflate=inflate, requests=_column_map(o.required("requests"), o.f("requests"), file),
        node_affinity=na, gpu=gpu, drop_unschedulable=on_unsched == "drop", template=template, usage=usage,
        where=where)


def _gpu_allocation(report: ReportSpec, raw: Any, where: str, base: Path, file: str) -> None:
    if isinstance(raw, bool):
        report.gpu_allocation = raw
        return
    o = Obj(raw, where, ("fragmentation", "reference"), file)
    report.gpu_allocation = True
    report.gpu_fragmentation = o.boolean("fragmentation", False)
    if o.has("reference"):
        r = o.obj("reference", ("file", "workload", "policies"))
        path = _resolve(base, r.string("file", required=True))
        if not path.exists():
            raise r.err("file", f"file {r.string('file')!r} does not exist")
        pol = r.get("policies", {})
        if not isinstance(pol, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in pol.items()):
            raise r.err("policies", "expected a map of variant name to the published sc_policy")
        report.gpu_reference = GpuReferenceSpec(str(path), r.string("workload") or None, dict(pol))


def _gpu_columns(raw: Any, where: str, file: str) -> GpuColumnsSpec:
    o = Obj(raw, where, ("count", "milli", "model", "target"), file)
    model = o.string("model") or None
    t = o.obj("target", ("popularityThreshold", "increaseStep", "includeCpuPods", "gpuResWeight"))
    threshold = t.integer("popularityThreshold", 95, 1)
    if threshold > 100:
        raise t.err("popularityThreshold", f"expected a percentage from 1 to 100, got {threshold}")
    return GpuColumnsSpec(_column_expr(o.required("count"), o.f("count"), file),
                          _column_expr(o.required("milli"), o.f("milli"), file), model,
                          threshold, t.integer("increaseStep", 1, 1), t.boolean("includeCpuPods", True),
                          t.number("gpuResWeight", 0.0, 0.0))


def _usage_rules(items: list[Any], where: str, file: str) -> list[UsageRule]:
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        o = Obj(item, w, ("workload", "selector", "namespace", "cpu", "memory"), file)
        if o.has("workload") == o.has("selector"):
            raise InputError("expected exactly one of workload or selector", file=file, field=w)
        selector = None
        if o.has("selector"):
            try:
                selector = parse_label_selector(o.raw["selector"], o.f("selector"))
            except InputError as e:
                raise e.located(file=file) from None
        match = Match(o.string("workload") or None, selector, o.string("namespace") or None)
        rest = {k: v for k, v in item.items() if k in ("cpu", "memory")}
        if not rest:
            raise InputError("expected cpu and/or memory", file=file, field=w)
        out.append(parse_usage(rest, w, file, match))
    return out


def _usage_traces(items: list[Any], where: str, base: Path, file: str) -> list[UsageTraceSpec]:
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        o = Obj(item, w, ("file", "workload", "columns", "cpuUnit", "memoryUnit", "timeUnit"), file)
        path = _resolve(base, o.string("file", required=True))
        if not path.exists():
            raise o.err("file", f"file {o.string('file')!r} does not exist")
        if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
            raise o.err("file", f"expected a .csv or .parquet file, got {path.name!r}")
        c = o.obj("columns", ("series", "time", "cpu", "memory"))
        cols = TraceColumns(c.string("series", "pod"), c.string("time", "time"), c.string("cpu", "cpu"),
                            c.string("memory", "memory"))
        for key in ("cpuUnit", "memoryUnit"):
            u = o.get(key, "m" if key == "cpuUnit" else "")
            if u not in UNIT_FACTORS:
                raise o.err(key, f"expected one of {', '.join(repr(x) for x in UNIT_FACTORS)}, got {u!r}")
        out.append(UsageTraceSpec(str(path), cols, o.string("workload") or None, o.get("cpuUnit", "m"),
                                  o.get("memoryUnit", ""), o.number("timeUnit", 1.0, 0.0), w))
    return out


def _events(items: list[Any], where: str, file: str) -> list[EventSpec]:
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        o = Obj(item, w, ("at",) + EVENT_ACTIONS, file)
        at = o.duration("at")
        actions = [a for a in EVENT_ACTIONS if a in item]
        if len(actions) != 1:
            raise InputError(f"expected exactly one action of {', '.join(EVENT_ACTIONS)}", file=file, field=w)
        action = actions[0]
        a = f"{w}.{action}"
        p = item[action]
        params: dict[str, Any]
        if action == "scale":
            po = Obj(p, a, ("workload", "replicas"), file)
            params = {"workload": po.string("workload", required=True), "replicas": po.integer("replicas", 0, maximum=MAX_PODS)}
            if not po.has("replicas"):
                raise po.err("replicas", "required field is missing")
        elif action == "addNodes":
            po = Obj(p, a, ("template", "count"), file)
            params = {"template": po.string("template", required=True),
                      "count": po.integer("count", 1, 1, maximum=MAX_NODES)}
        elif action in ("removeNodes", "cordon", "uncordon", "drain"):
            po = Obj(p, a, ("nodes", "template", "count"), file)
            names = po.seq("nodes")
            if not all(isinstance(n, str) and n for n in names):
                raise po.err("nodes", "expected a list of node names")
            if bool(names) == po.has("template"):
                raise InputError("expected exactly one of nodes or template", file=file, field=a)
            params = {"nodes": list(names), "template": po.string("template") or None,
                      "count": po.integer("count", 1, 1, maximum=MAX_NODES)}
        else:  # setUsage
            po = Obj(p, a, ("workload", "selector", "namespace", "cpu", "memory"), file)
            params = {"rule": _usage_rules([p], a, file)[0]}
            params["rule"] = UsageRule(params["rule"].match, params["rule"].cpu, params["rule"].memory, a)
        out.append(EventSpec(at, action, params, w))
    return out


def _variant_body(o: Obj, base: Path, file: str, name: str) -> VariantSpec:
    v = VariantSpec(name=name, description=o.string("description"))
    if o.has("scheduler"):
        so = o.obj("scheduler", ("config",))
        v.scheduler = _config(so.required("config"), so.f("config"), base, file, SCHEDULER_KINDS)
    if "descheduler" in o.raw:
        v.descheduler_set = True
        v.descheduler = _descheduler(o.raw["descheduler"], o.f("descheduler"), base, file)
    if o.has("kubelet"):
        ko = o.obj("kubelet", ("config",))
        v.kubelet = _config(ko.required("config"), ko.f("config"), base, file, KUBELET_KINDS)
    return v


def load_variant_file(name: str, path: str, *, where: str = "--variant", interval: float = 300.0) -> VariantSpec:
    """A variant from a file: a kubesched.io Variant document, or bare configuration documents
    (KubeSchedulerConfiguration, DeschedulerPolicy / DeschedulerConfiguration, KubeletConfiguration)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"file {path!r} does not exist", field=where)
    docs = [d for d in read_documents(p) if d is not None]
    v = VariantSpec(name=name)
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise InputError(f"document {i + 1}: expected a KubeSchedulerConfiguration, DeschedulerPolicy, "
                             f"KubeletConfiguration or {VARIANT_KIND} object, got {describe(d)}", file=path)
        kind = d.get("kind")
        if kind == VARIANT_KIND:
            if d.get("apiVersion") != API_VERSION:
                raise InputError(f"expected apiVersion {API_VERSION}, got {d.get('apiVersion')!r}", file=path,
                                 field="apiVersion")
            Obj(d, "", ("apiVersion", "kind", "metadata", "spec"), path)
            body = _variant_body(Obj(d.get("spec") or {}, "spec", ("description", "scheduler", "descheduler", "kubelet"),
                                     path), p.parent, path, name)
            for attr in ("scheduler", "kubelet"):
                if getattr(body, attr) is not None:
                    setattr(v, attr, getattr(body, attr))
            if body.descheduler_set:
                v.descheduler_set, v.descheduler = True, body.descheduler
            v.description = body.description or v.description
        elif kind in SCHEDULER_KINDS:
            v.scheduler = ComponentConfig(d, path)
        elif kind in DESCHEDULER_KINDS:
            v.descheduler_set = True
            v.descheduler = DeschedulerSpec(ComponentConfig(d, path), interval)
        elif kind in KUBELET_KINDS:
            v.kubelet = ComponentConfig(d, path)
        else:
            raise InputError(f"document {i + 1}: expected a Variant, KubeSchedulerConfiguration, DeschedulerPolicy, "
                             f"DeschedulerConfiguration or KubeletConfiguration, got kind {kind!r}", file=path)
    return v


def _variants(items: list[Any], where: str, base: Path, file: str, interval: float) -> list[VariantSpec]:
    out: list[VariantSpec] = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        o = Obj(item, w, ("name", "file", "description", "scheduler", "descheduler", "kubelet"), file)
        name = o.string("name", required=True)
        if not all(c.isalnum() or c in "-_." for c in name):
            raise o.err("name", f"expected letters, digits, '-', '_' or '.', got {name!r}")
        if any(v.name == name for v in out):
            raise o.err("name", f"duplicate variant name {name!r}")
        if o.has("file"):
            v = load_variant_file(name, str(_resolve(base, o.string("file"))), where=o.f("file"), interval=interval)
            extra = _variant_body(o, base, file, name)
            v.scheduler = extra.scheduler or v.scheduler
            v.kubelet = extra.kubelet or v.kubelet
            if extra.descheduler_set:
                v.descheduler_set, v.descheduler = True, extra.descheduler
            v.description = extra.description or v.description
        else:
            v = _variant_body(o, base, file, name)
        out.append(v)
    return out


SPEC_FIELDS = ("description", "duration", "seed", "seeds", "start", "usageStep", "startupDelay", "cluster", "workloads",
               "usage", "usageTraces", "scheduler", "descheduler", "kubelet", "metrics", "events", "report", "variants",
               "replay")
REPLAY_PLACEMENTS = ("recorded", "scheduler")


def _replay(raw: Any, where: str, base: Path, file: str, has_snapshot: bool) -> ReplaySpec | None:
    if raw is None:
        return None
    o = Obj(raw, where, ("pods", "columns", "timeUnit", "placement"), file)
    path = _resolve(base, o.string("pods", required=True))
    if not path.exists():
        raise o.err("pods", f"file {o.string('pods')!r} does not exist")
    if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise o.err("pods", f"expected a .csv or .parquet file, got {path.name!r}")
    if not has_snapshot:
        raise o.err("pods", "a replay needs spec.cluster.snapshot (the captured objects the pods come from)")
    c = o.obj("columns", ("namespace", "name", "node", "start", "end", "owner"))
    placement = o.string("placement", "recorded")
    if placement not in REPLAY_PLACEMENTS:
        raise o.err("placement", f"expected one of {', '.join(REPLAY_PLACEMENTS)}, got {placement!r}")
    return ReplaySpec(str(path), c.string("namespace", "namespace"), c.string("name", "pod"), c.string("node", "node"),
                      c.string("start", "start"), c.string("end", "end"), c.string("owner", "owner"),
                      o.number("timeUnit", 1.0, 0.0), placement, where)


def parse_scenario(doc: Any, path: str) -> Scenario:
    file = path
    base = Path(path).resolve().parent
    top = Obj(doc, "", ("apiVersion", "kind", "metadata", "spec"), file)
    if doc.get("apiVersion") != API_VERSION:
        raise top.err("apiVersion", f"expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise top.err("kind", f"expected {KIND}, got {doc.get('kind')!r}")
    meta = top.obj("metadata", ("name", "labels", "annotations"))
    name = meta.string("name", Path(path).stem)
    spec = Obj(top.required("spec"), "spec", SPEC_FIELDS, file)

    duration = spec.duration("duration", allow_zero=False)
    check_duration(duration, spec.f("duration"), file)
    seed = spec.integer("seed", 0)
    start_raw = spec.get("start", DEFAULT_START)
    try:
        start = parse_time(start_raw, "spec.start")
    except InputError as e:
        raise e.located(file=file) from None
    assert start is not None

    co = spec.obj("cluster", ("snapshot", "nodeTemplates", "nodeTable", "objects"))
    snapshot = None
    if co.has("snapshot"):
        sp = _resolve(base, co.string("snapshot"))
        if not sp.exists():
            raise co.err("snapshot", f"file {co.string('snapshot')!r} does not exist")
        snapshot = str(sp)
    templates = [_node_template(t, f"{co.f('nodeTemplates')}[{i}]", base, file) for i, t in
                 enumerate(co.seq("nodeTemplates"))]
    names = [t.name for t in templates]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise InputError(f"duplicate node template {n!r}", file=file, field=f"{co.f('nodeTemplates')}[{i}].name")
    node_table = _node_table(co.raw["nodeTable"], co.f("nodeTable"), base, file) if co.has("nodeTable") else None
    objects = []
    for i, ob in enumerate(co.seq("objects")):
        if not isinstance(ob, dict) or not ob.get("kind"):
            raise InputError("expected a Kubernetes object with a kind", file=file, field=f"{co.f('objects')}[{i}]")
        objects.append(copy.deepcopy(ob))
    if snapshot is None and not templates and node_table is None:
        raise co.err("nodeTemplates", "the cluster has no nodes: give a snapshot, nodeTemplates or a nodeTable")
    cluster = ClusterSpec(snapshot, templates, node_table, objects)

    workloads, pod_traces, extra = _workloads(spec.seq("workloads"), spec.f("workloads"), base, file)
    cluster.objects.extend(extra)
    _check_workloads(workloads, cluster, file)
    usage_rules = _usage_rules(spec.seq("usage"), spec.f("usage"), file)
    usage_traces = _usage_traces(spec.seq("usageTraces"), spec.f("usageTraces"), base, file)
    keys = {w.key for w in workloads}
    for r in usage_rules:
        if r.match.workload and r.match.workload not in keys:
            raise InputError(f"no workload {r.match.workload!r} in spec.workloads (workloads are named "
                             f"Kind/namespace/name)", file=file, field=f"{r.where}.workload")
    for t in usage_traces:
        if t.workload and t.workload not in keys:
            raise InputError(f"no workload {t.workload!r} in spec.workloads", file=file, field=f"{t.where}.workload")

    scheduler = None
    tie_break = "random"
    if spec.has("scheduler"):
        so = spec.obj("scheduler", ("config", "tieBreak"))
        if so.has("config"):
            scheduler = _config(so.raw["config"], so.f("config"), base, file, SCHEDULER_KINDS)
        tie_break = so.string("tieBreak", "random")
        if tie_break not in ("random", "seededNodeOrder"):
            raise so.err("tieBreak", f"expected random or seededNodeOrder, got {tie_break!r}")
    descheduler = _descheduler(spec.raw.get("descheduler"), spec.f("descheduler"), base, file)
    ko = spec.obj("kubelet", ("config", "housekeepingInterval", "systemReservedMemory"))
    kubelet_cfg = _config(ko.raw["config"], ko.f("config"), base, file, KUBELET_KINDS) if ko.has("config") else None
    sys_mem = 0
    if ko.has("systemReservedMemory"):
        q = quantity_in(ko.raw["systemReservedMemory"], ko.f("systemReservedMemory"))
        sys_mem = int(q)
    kubelet = KubeletSpec(kubelet_cfg, ko.duration("housekeepingInterval", 10.0), sys_mem)
    metrics = _metrics(spec.raw.get("metrics"), spec.f("metrics"), file)

    events = _events(spec.seq("events"), spec.f("events"), file)
    ro = spec.obj("report", ("hotThreshold", "loopWindow", "recordInterval", "gpuAllocation"))
    usage_step = spec.duration("usageStep", 60.0)
    # A fraction of a node's CPU: usage never exceeds capacity, so a threshold above 1 would mark no node hot.
    report = ReportSpec(ro.number("hotThreshold", 0.8, 0.0, 1.0), ro.duration("loopWindow", 1800.0, allow_zero=False),
                        ro.duration("recordInterval", usage_step or 60.0, allow_zero=False))
    ga = ro.get("gpuAllocation")
    if ga is not None:
        _gpu_allocation(report, ga, ro.f("gpuAllocation"), base, file)
    seeds = []
    for i, v in enumerate(spec.seq("seeds")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InputError(f"expected a non-negative integer, got {v!r}", file=file, field=f"{spec.f('seeds')}[{i}]")
        if v in seeds:
            raise InputError(f"duplicate seed {v}", file=file, field=f"{spec.f('seeds')}[{i}]")
        seeds.append(v)
    interval = descheduler.interval if descheduler else 300.0
    variants = _variants(spec.seq("variants"), spec.f("variants"), base, file, interval)

    scenario = Scenario(
        name=name, path=str(path), base_dir=base, duration=duration, seed=seed, start=start.astimezone(UTC),
        usage_step=usage_step, startup_delay=spec.duration("startupDelay", 5.0), cluster=cluster,
        workloads=workloads, pod_traces=pod_traces, usage_rules=usage_rules, usage_traces=usage_traces,
        scheduler=scheduler, descheduler=descheduler, kubelet=kubelet, metrics=metrics, events=events,
        report=report, variants=variants, description=spec.string("description"),
        replay=_replay(spec.raw.get("replay"), spec.f("replay"), base, file, snapshot is not None),
        seeds=tuple(seeds), tie_break=tie_break)
    _check_events(scenario)
    return scenario


def _check_workloads(workloads: list[WorkloadSpec], cluster: ClusterSpec, file: str) -> None:
    """Workload defaults and validation up front, and PriorityClass names that exist."""
    classes = set(SYSTEM_PRIORITY_CLASSES)
    classes.update(str((o.get("metadata") or {}).get("name")) for o in cluster.objects if o.get("kind") == "PriorityClass")
    if cluster.snapshot:
        for d in iter_objects(read_documents(cluster.snapshot), cluster.snapshot):
            if d.get("kind") == "PriorityClass":
                classes.add(str((d.get("metadata") or {}).get("name")))
    total = 0
    for w in workloads:
        try:
            obj = default_workload(w.manifest, w.where)
        except InputError as e:
            raise e.located(file=file) from None
        spec = obj.get("spec") or {}
        total += int(spec.get("replicas") or spec.get("parallelism") or 1) if obj.get("kind") != "DaemonSet" else 0
        if total > MAX_PODS:
            raise InputError(f"the workloads ask for more than {MAX_PODS} pods; kubesched simulates at most that many",
                             file=file, field=w.where)
        pspec = spec if obj.get("kind") == "Pod" else (spec.get("template") or {}).get("spec") or {}
        name = pspec.get("priorityClassName")
        if name and name not in classes:
            f = f"{w.where}.spec" + ("" if obj.get("kind") == "Pod" else ".template.spec") + ".priorityClassName"
            raise InputError(f"no PriorityClass with name {name!r} was found (give it in spec.cluster.objects, a "
                             f"workload file or the snapshot)", file=file, field=f)


def check_duration(seconds: float, field: str, file: str | None) -> None:
    if seconds > MAX_DURATION_SECONDS:
        raise InputError(f"expected at most 366 days of simulated time, got {seconds / 86400:.0f} days", file=file,
                         field=field)


def _check_events(s: Scenario) -> None:
    """References in events: workloads that exist, node templates that exist, nodes that will exist."""
    total = sum(t.count for t in s.cluster.templates) + sum(
        ev.params.get("count", 0) for ev in s.events if ev.action == "addNodes")
    if total > MAX_NODES:
        raise InputError(f"the node templates and addNodes events make {total} nodes; kubesched simulates at most "
                         f"{MAX_NODES}", file=s.path, field="spec.cluster.nodeTemplates")
    keys = set(s.workload_keys())
    templates = {t.name: t.count for t in s.cluster.templates}
    known_nodes = {f"{t.name}-{i}" for t in s.cluster.templates for i in range(t.count)}
    open_ended = s.cluster.snapshot is not None or s.cluster.node_table is not None
    next_index = dict(templates)
    for ev in sorted(s.events, key=lambda e: e.at):
        where = f"{ev.where}.{ev.action}"
        if ev.at > s.duration:
            raise InputError(f"the event is at {ev.at:g}s, after the end of the scenario ({s.duration:g}s)",
                             file=s.path, field=f"{ev.where}.at")
        if ev.action == "scale":
            if ev.params["workload"] not in keys:
                raise InputError(f"no workload {ev.params['workload']!r} in spec.workloads (workloads are named "
                                 f"Kind/namespace/name)", file=s.path, field=f"{where}.workload")
            kind = ev.params["workload"].split("/", 1)[0]
            if kind not in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
                raise InputError(f"a {kind} cannot be scaled", file=s.path, field=f"{where}.workload")
        elif ev.action == "setUsage":
            wl = ev.params["rule"].match.workload
            if wl and wl not in keys:
                raise InputError(f"no workload {wl!r} in spec.workloads", file=s.path, field=f"{where}.workload")
        else:
            tmpl = ev.params.get("template")
            if tmpl is not None and tmpl not in templates:
                raise InputError(f"no node template {tmpl!r} in spec.cluster.nodeTemplates", file=s.path,
                                 field=f"{where}.template")
            if ev.action == "addNodes":
                assert tmpl is not None
                for _ in range(ev.params["count"]):
                    known_nodes.add(f"{tmpl}-{next_index[tmpl]}")
                    next_index[tmpl] += 1
            elif not open_ended:
                for n in ev.params["nodes"]:
                    if n not in known_nodes:
                        raise InputError(f"no node {n!r} exists at that time (template nodes are named "
                                         f"<template>-<index>)", file=s.path, field=f"{where}.nodes")


def load_scenario(path: str) -> Scenario:
    docs = read_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        held = describe(docs[0]) if len(docs) == 1 else f"{len(docs)} documents"
        raise InputError(f"expected one {KIND} document (apiVersion {API_VERSION}, kind {KIND}, spec), got {held}",
                         file=path)
    return parse_scenario(docs[0], path)


def start_time(s: Scenario) -> datetime:
    return s.start

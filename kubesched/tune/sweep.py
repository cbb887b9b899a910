"""`kubesched sweep`: a grid of scenarios × variants × parameter values × seeds, each run once, into Parquet.

A kubesched.io/v1alpha1 Sweep document:

```yaml
apiVersion: kubesched.io/v1alpha1
kind: Sweep
metadata: {name: openb-allocation}
spec:
  scenarios: [scenario-allocation.yaml]          # paths relative to this file, or {name: N, file: F}
  variants:                                      # scenario variant names, or {name: N, file: F}; default: each
  - least-allocated                              #   scenario's own variants
  - {name: most-allocated, file: variants/most-allocated.yaml}
  seeds: {from: 42, count: 10}                   # or a list
  parameters:                                    # a grid of values written into every variant's documents
  - {name: interval, path: descheduler.interval, values: [1m, 5m]}
  metrics:                                       # numbers from series, besides every summary metric
  - {name: gpuAllocatedAt100, series: allocated_alibabacloud.com/gpu-milli,
     at: {series: allocated_alibabacloud.com/gpu-milli_arrived, value: 1.0}}
  report:
    metrics: [gpuAllocatedAt100]                 # what the summary table and plots show
    reference: {...}                             # published numbers to set beside ours (see docs/tune.md)
```

Every run appends one row to the Parquet dataset `<out>/runs/` (one part file per flush, written to a
temporary name and renamed, so a part is whole or absent): the factors, every summary metric, the series
metrics, the run's inputs hash (scenario content, the variant's documents, the seed) and the digest of the
metric definitions. A run whose (inputs hash, metrics digest) is already in the dataset is skipped, so an
interrupted sweep resumes where it stopped, and re-running a finished one only rebuilds the summary.
Rows are the same whatever the engine and worker count; their order in the part files follows completion
(the summary sorts them), and `wallSeconds` is the one column that is not reproducible.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.api.snapshot import read_documents
from kubesched.errors import InputError
from kubesched.report.tune import render_sweep_report
from kubesched.sim.runner import check_variant, resolve_variants
from kubesched.sim.scenario import API_VERSION, Obj, Scenario, load_scenario, load_variant_file
from kubesched.tune.documents import Step, from_variant, parse_path, set_path, to_variant
from kubesched.tune.engines import check_options, make_engine
from kubesched.tune.inputs import prepare
from kubesched.tune.objectives import SUMMARY_METRICS
from kubesched.tune.runs import REDUCERS, RunTask, SeriesMetric

KIND = "Sweep"
RUNS_DIR = "runs"
DEFAULT_REPORT_METRICS = ("hotNodeMinutes", "evictions", "loopEpisodes", "cpuSpreadStdMean", "pendingLongest")
FLUSH_EVERY = 10

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class GridParameter:
    name: str
    path: tuple[Step, ...]
    values: tuple[Any, ...]
    where: str


@dataclass(frozen=True, slots=True)
class Reference:
    """Published numbers for some levels of one factor, read from a CSV file (one row per observation)."""

    file: str
    label: str
    factor: str
    column: str
    levels: dict[str, str]  # our level → the value in `column`
    metrics: dict[str, tuple[str, float]]  # our metric → (CSV column, scale)


@dataclass(slots=True)
class SweepSpec:
    name: str
    path: str
    scenarios: list[tuple[str, str]]  # (name, path)
    variants: list[tuple[str, str | None]]  # (name, file or None: the scenario's own)
    seeds: tuple[int, ...]
    parameters: list[GridParameter]
    metrics: list[SeriesMetric]
    report_metrics: list[str]
    reference: Reference | None
    raw: dict[str, Any] = field(default_factory=dict)

    def metrics_digest(self) -> str:
        text = json.dumps([[m.name, m.series, m.reduce, m.at_series, m.at_value] for m in self.metrics])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class GridPoint:
    index: int
    scenario: str
    variant: str
    params: tuple[tuple[str, Any], ...]
    seed: int
    tree: dict[str, Any]
    inputs_hash: str


# ---------------------------------------------------------------- the sweep document


def _rel(base: Path, value: str) -> Path:
    p = Path(value)
    return p if p.is_absolute() else base / p


def _named_files(items: list[Any], where: str, base: Path, file: str, what: str,
                 allow_bare_names: bool) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        if isinstance(item, str):
            if allow_bare_names:
                name, path = item, None
            else:
                # A scenario given by path alone is named by its metadata.name once loaded.
                name, path = "", str(_rel(base, item))
        else:
            o = Obj(item, w, ("name", "file"), file)
            name = o.string("name", required=True)
            path = str(_rel(base, o.string("file", required=True)))
        if path is not None and not Path(path).exists():
            raise InputError(f"file {path!r} does not exist", file=file, field=w)
        if (name or not path) and not all(c.isalnum() or c in "-_." for c in name or "?"):
            raise InputError(f"expected a {what} name of letters, digits, '-', '_' or '.', got {name!r}", file=file, field=w)
        if name and any(n == name for n, _ in out):
            raise InputError(f"duplicate {what} name {name!r}", file=file, field=w)
        out.append((name, path))
    return out


def _seeds(raw: Any, where: str, file: str) -> tuple[int, ...]:
    if isinstance(raw, list) and raw and all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
        if len(set(raw)) != len(raw):
            raise InputError("duplicate seeds", file=file, field=where)
        return tuple(raw)
    if isinstance(raw, dict):
        o = Obj(raw, where, ("from", "count"), file)
        return tuple(range(o.integer("from", 0, minimum=None), o.integer("from", 0, minimum=None)
                           + o.integer("count", 1, minimum=1)))
    raise InputError(f"expected a list of integers or {{from: N, count: K}}, got {raw!r}", file=file, field=where)


def _metric(raw: Any, where: str, file: str) -> SeriesMetric:
    o = Obj(raw, where, ("name", "series", "reduce", "at"), file)
    name = o.string("name", required=True)
    if name in SUMMARY_METRICS:
        raise o.err("name", f"{name!r} is a summary metric already")
    series = o.string("series", required=True)
    if o.has("at"):
        a = o.obj("at", ("series", "value"))
        if o.has("reduce") and o.raw["reduce"] != "at":
            raise o.err("reduce", "reduce and at do not go together")
        return SeriesMetric(name, series, "at", a.string("series", required=True), a.number("value", minimum=None))
    reduce = o.string("reduce", "last")
    if reduce not in REDUCERS or reduce == "at":
        raise o.err("reduce", f"expected one of last, mean, max, min (or at: {{series, value}}), got {reduce!r}")
    return SeriesMetric(name, series, reduce)


def _reference(raw: Any, where: str, base: Path, file: str, metrics: set[str]) -> Reference:
    o = Obj(raw, where, ("file", "label", "factor", "column", "levels", "metrics"), file)
    path = _rel(base, o.string("file", required=True))
    if not path.exists():
        raise o.err("file", f"file {o.string('file')!r} does not exist")
    factor = o.string("factor", "variant")
    levels = o.raw.get("levels") or {}
    if not isinstance(levels, dict) or not levels:
        raise o.err("levels", "expected a map of our level to the reference's")
    ms = o.raw.get("metrics") or {}
    if not isinstance(ms, dict) or not ms:
        raise o.err("metrics", "expected a map of metric to {column, scale}")
    out: dict[str, tuple[str, float]] = {}
    for k, v in ms.items():
        if k not in metrics:
            raise o.err(f"metrics.{k}", f"unknown metric {k!r}")
        mo = Obj(v, o.f(f"metrics.{k}"), ("column", "scale"), file)
        out[str(k)] = (str(mo.required("column")), mo.number("scale", 1.0, minimum=None))
    return Reference(str(path), o.string("label", "reference"), factor, o.string("column", required=True),
                     {str(k): str(v) for k, v in levels.items()}, out)


def parse_sweep(doc: Any, path: str) -> SweepSpec:
    file = path
    base = Path(path).resolve().parent
    top = Obj(doc, "", ("apiVersion", "kind", "metadata", "spec"), file)
    if doc.get("apiVersion") != API_VERSION:
        raise top.err("apiVersion", f"expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        raise top.err("kind", f"expected {KIND}, got {doc.get('kind')!r}")
    name = top.obj("metadata", ("name", "labels", "annotations")).string("name", Path(path).stem)
    spec = Obj(top.required("spec"), "spec", ("scenarios", "variants", "seeds", "parameters", "metrics", "report"), file)
    scenarios = [(n, str(f)) for n, f in _named_files(spec.seq("scenarios"), spec.f("scenarios"), base, file,
                                                      "scenario", False)]
    if not scenarios:
        raise spec.err("scenarios", "expected at least one scenario")
    variants = _named_files(spec.seq("variants"), spec.f("variants"), base, file, "variant", True)
    seeds = _seeds(spec.required("seeds"), spec.f("seeds"), file)
    params: list[GridParameter] = []
    for i, item in enumerate(spec.seq("parameters")):
        o = Obj(item, f"{spec.f('parameters')}[{i}]", ("name", "path", "values"), file)
        pname = o.string("name", required=True)
        if any(p.name == pname for p in params) or pname in ("scenario", "variant", "seed"):
            raise o.err("name", f"duplicate or reserved parameter name {pname!r}")
        values = o.seq("values")
        if not values:
            raise o.err("values", "expected a non-empty list")
        params.append(GridParameter(pname, parse_path(o.required("path"), o.f("path"), file), tuple(values), o.f("path")))
    metrics = [_metric(m, f"{spec.f('metrics')}[{i}]", file) for i, m in enumerate(spec.seq("metrics"))]
    names = set(SUMMARY_METRICS) | {m.name for m in metrics}
    if len({m.name for m in metrics}) != len(metrics):
        raise spec.err("metrics", "duplicate metric names")
    ro = spec.obj("report", ("metrics", "reference"))
    shown = [str(m) for m in ro.seq("metrics")] or [m.name for m in metrics] + list(DEFAULT_REPORT_METRICS)
    for i, m in enumerate(shown):
        if m not in names:
            raise InputError(f"unknown metric {m!r}; expected a summary metric or one of spec.metrics", file=file,
                             field=f"{ro.f('metrics')}[{i}]")
    reference = _reference(ro.raw["reference"], ro.f("reference"), base, file, names) if ro.has("reference") else None
    if reference is not None and reference.factor not in ("scenario", "variant", *[p.name for p in params]):
        raise InputError(f"unknown factor {reference.factor!r}", file=file, field=f"{ro.f('reference')}.factor")
    return SweepSpec(name, path, scenarios, variants, seeds, params, metrics, shown, reference, raw=copy.deepcopy(doc))


def load_sweep(path: str) -> SweepSpec:
    if not Path(path).exists():
        raise InputError(f"file {path!r} does not exist", field="SWEEP")
    docs = read_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError(f"expected one {KIND} document, found {len(docs)} document(s)", file=path)
    return parse_sweep(docs[0], path)


# ---------------------------------------------------------------- the grid


def inputs_hash(scenario_digest: str, tree: dict[str, Any], seed: int) -> str:
    text = json.dumps({"scenario": scenario_digest, "documents": tree, "seed": seed}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def build_grid(spec: SweepSpec, scenarios: dict[str, Scenario], digests: dict[str, str]) -> list[GridPoint]:
    """Every run of the sweep, in a fixed order; each variant's documents checked before anything runs."""
    points: list[GridPoint] = []
    combos = list(itertools.product(*[p.values for p in spec.parameters]))
    for sname, _ in spec.scenarios:
        s = scenarios[sname]
        own = {v.name: v for v in resolve_variants(s, [])}
        chosen = spec.variants or [(n, None) for n in own]
        for vname, vfile in chosen:
            if vfile is None:
                if vname not in own:
                    raise InputError(f"scenario {sname!r} has no variant {vname!r} (it has: {', '.join(own)})",
                                     file=spec.path, field="spec.variants")
                v = own[vname]
            else:
                interval = s.descheduler.interval if s.descheduler else 300.0
                v = load_variant_file(vname, vfile, where="spec.variants", interval=interval)
            base = from_variant(v, s)
            for combo in combos:
                tree = copy.deepcopy(base)
                try:
                    for p, value in zip(spec.parameters, combo, strict=True):
                        set_path(tree, p.path, value, p.where, spec.path)
                    check_variant(s, to_variant(vname, tree, spec.path))
                except InputError as e:
                    label = ", ".join(f"{p.name}={c}" for p, c in zip(spec.parameters, combo, strict=True))
                    raise InputError(f"{e.message} (scenario {sname}, variant {vname}{', ' + label if label else ''})",
                                     file=e.file, obj=e.obj, field=e.field) from None
                params = tuple((p.name, c) for p, c in zip(spec.parameters, combo, strict=True))
                for seed in spec.seeds:
                    points.append(GridPoint(len(points), sname, vname, params, seed, tree,
                                            inputs_hash(digests[sname], tree, seed)))
    return points


# ---------------------------------------------------------------- the Parquet dataset


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("kubesched sweep writes Parquet: pip install 'kubesched[tune]'") from None
    return pa, pq


def _schema(spec: SweepSpec) -> Any:
    pa, _ = _pyarrow()
    cols = [("sweep", pa.string()), ("scenario", pa.string()), ("variant", pa.string()), ("seed", pa.int64())]
    cols += [(f"param.{p.name}", pa.string()) for p in spec.parameters]
    cols += [("inputsHash", pa.string()), ("metricsDigest", pa.string())]
    cols += [(m, pa.float64()) for m in SUMMARY_METRICS]
    cols += [(m.name, pa.float64()) for m in spec.metrics]
    cols += [("evictionsByComponent", pa.string()), ("error", pa.string()), ("wallSeconds", pa.float64())]
    return pa.schema(cols)


def _label(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def _row(spec: SweepSpec, p: GridPoint, result: dict[str, Any]) -> dict[str, Any]:
    summary = result["summaries"][0] if result["summaries"] else {}
    row: dict[str, Any] = {"sweep": spec.name, "scenario": p.scenario, "variant": p.variant, "seed": p.seed}
    row.update({f"param.{k}": _label(v) for k, v in p.params})
    row.update({"inputsHash": p.inputs_hash, "metricsDigest": spec.metrics_digest()})
    for m in [*SUMMARY_METRICS, *[x.name for x in spec.metrics]]:
        v = summary.get(m)
        row[m] = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
    row["evictionsByComponent"] = json.dumps(summary.get("evictionsByComponent") or {}, sort_keys=True)
    row["error"] = result["error"]
    row["wallSeconds"] = round(float(result["seconds"]), 3)
    return row


def read_runs(folder: Path) -> list[dict[str, Any]]:
    """Every row of the dataset (empty when there is none)."""
    _, pq = _pyarrow()
    parts = sorted(folder.glob("part-*.parquet"))
    rows: list[dict[str, Any]] = []
    for part in parts:
        rows += pq.read_table(part).to_pylist()
    return rows


def _flush(folder: Path, rows: list[dict[str, Any]], schema: Any) -> None:
    if not rows:
        return
    pa, pq = _pyarrow()
    folder.mkdir(parents=True, exist_ok=True)
    n = len(list(folder.glob("part-*.parquet")))
    final = folder / f"part-{n:05d}.parquet"
    while final.exists():
        n += 1
        final = folder / f"part-{n:05d}.parquet"
    tmp = folder / f".{final.name}.tmp"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp, compression="zstd")
    tmp.replace(final)
    rows.clear()


# ---------------------------------------------------------------- the command's work


def sweep(sweep_path: str, out_dir: str, engine_kind: str = "local", address: str | None = None,
          workers: int | None = None, on_progress: Progress | None = None) -> dict[str, Any]:
    check_options(engine_kind, address)
    spec = load_sweep(sweep_path)
    scenarios: dict[str, Scenario] = {}
    named: list[tuple[str, str]] = []
    for i, (name, path) in enumerate(spec.scenarios):
        s = load_scenario(path)
        name = name or s.name
        if name in scenarios:
            raise InputError(f"two scenarios are named {name!r}; name them ({{name: N, file: F}})", file=spec.path,
                             field=f"spec.scenarios[{i}]")
        scenarios[name] = s
        named.append((name, path))
    spec.scenarios = named
    inputs = {name: prepare(s, ship=engine_kind == "ray") for name, s in scenarios.items()}
    points = build_grid(spec, scenarios, {n: i.digest for n, i in inputs.items()})
    out = Path(out_dir)
    folder = out / RUNS_DIR
    schema = _schema(spec)
    digest = spec.metrics_digest()
    have = read_runs(folder)
    for r in have[:1]:
        if set(r) != set(schema.names):
            raise InputError(f"{folder} holds runs of a sweep with other columns (other parameters or metrics); "
                             f"give another --out", field="--out")
    done = {(r["inputsHash"], r["metricsDigest"]) for r in have if r.get("error") is None}
    todo = [p for p in points if (p.inputs_hash, digest) not in done]
    skipped = len(points) - len(todo)
    by_key = {str(p.index): p for p in todo}
    tasks = [RunTask(str(p.index), p.scenario, p.variant, p.tree, (p.seed,), (), tuple(spec.metrics)) for p in todo]
    pending: list[dict[str, Any]] = []
    finished = skipped
    if on_progress is not None:
        on_progress(finished, len(points), "runs")
    if tasks:
        engine = make_engine(engine_kind, inputs, workers, address)
        out.mkdir(parents=True, exist_ok=True)
        try:
            for result in engine.run(tasks):
                pending.append(_row(spec, by_key[result["key"]], result))
                finished += 1
                if on_progress is not None:
                    on_progress(finished, len(points), "runs")
                if len(pending) >= FLUSH_EVERY:
                    _flush(folder, pending, schema)
        finally:
            _flush(folder, pending, schema)
            engine.close()
        engine_name, engine_workers = engine.name, engine.workers
    else:
        engine_name, engine_workers = engine_kind, 0
    return summarize(spec, points, folder, out, {"engine": engine_name, "workers": engine_workers, "ran": len(tasks),
                                                 "skipped": skipped})


def summarize(spec: SweepSpec, points: Sequence[GridPoint], folder: Path, out: Path,
              run_info: dict[str, Any]) -> dict[str, Any]:
    """The summary per factor (mean, std, n over the other factors), summary.csv and report.html."""
    wanted = {p.inputs_hash for p in points}
    digest = spec.metrics_digest()
    rows = [r for r in read_runs(folder) if r["inputsHash"] in wanted and r["metricsDigest"] == digest]
    order = {p.inputs_hash: p.index for p in points}
    rows.sort(key=lambda r: (order[r["inputsHash"]], r["error"] is not None))
    seen: set[str] = set()
    unique = []
    for r in rows:
        if r["inputsHash"] not in seen:
            seen.add(r["inputsHash"])
            unique.append(r)
    rows = unique
    factors = ["scenario", "variant", *[f"param.{p.name}" for p in spec.parameters], "seed"]
    table = []
    for f in factors[:-1]:
        levels = sorted({r[f] for r in rows}, key=lambda x: str(x))
        if len(levels) < 2 and f != "variant":
            continue
        for level in levels:
            sel = [r for r in rows if r[f] == level and r["error"] is None]
            entry: dict[str, Any] = {"factor": f.removeprefix("param."), "level": level, "runs": len(sel)}
            for m in spec.report_metrics:
                vals = [float(r[m]) for r in sel if r.get(m) is not None]
                mean = sum(vals) / len(vals) if vals else None
                std = (math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 and mean is not None
                       else 0.0 if vals else None)
                entry[m] = {"mean": mean, "std": std}
            table.append(entry)
    reference = _reference_rows(spec.reference) if spec.reference else []
    doc: dict[str, Any] = {
        "sweep": spec.name, "runs": len(points), "done": len(rows), "errors": sum(1 for r in rows if r["error"]),
        "metrics": spec.report_metrics, "factors": [f.removeprefix("param.") for f in factors], "summary": table,
        "reference": reference, "referenceLabel": spec.reference.label if spec.reference else None,
        "referenceFactor": spec.reference.factor if spec.reference else None, **run_info,
        "files": {"runs": str(folder), "summary": str(out / "summary.csv"), "report": str(out / "report.html")},
    }
    with (out / "summary.csv").open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["factor", "level", "runs", *[f"{m}.{k}" for m in spec.report_metrics for k in ("mean", "std")]])
        for e in table:
            w.writerow([e["factor"], e["level"], e["runs"],
                        *[_fmt(e[m][k]) for m in spec.report_metrics for k in ("mean", "std")]])
    (out / "report.html").write_text(render_sweep_report(doc, rows))
    return doc


def _reference_rows(ref: Reference) -> list[dict[str, Any]]:
    """Per level of our factor, the reference's mean (and count) of each metric."""
    back = {v: k for k, v in ref.levels.items()}
    acc: dict[str, dict[str, list[float]]] = {}
    with open(ref.file, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in [ref.column, *[c for c, _ in ref.metrics.values()]] if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"no column(s) {', '.join(missing)}", file=ref.file)
        for line, r in enumerate(reader, start=2):
            level = back.get(r[ref.column])
            if level is None:
                continue
            for m, (col, scale) in ref.metrics.items():
                try:
                    acc.setdefault(level, {}).setdefault(m, []).append(float(r[col]) * scale)
                except ValueError:
                    raise InputError(f"row {line}: expected a number in column {col!r}, got {r[col]!r}",
                                     file=ref.file) from None
    out = []
    for level in ref.levels:
        vals = acc.get(level, {})
        out.append({"level": level, "source": ref.levels[level],
                    **{m: {"mean": sum(v) / len(v), "n": len(v)} for m, v in vals.items() if v}})
    return out


def _fmt(v: Any) -> str:
    return "" if v is None else f"{v:.6g}"

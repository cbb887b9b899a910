"""`kubesched simulate`: one scenario under several variants, in parallel processes, compared.

Every variant runs in its own process from the scenario file (the same seed, the same usage for the same
replicas), writes its results under `<out>/variants/<name>/`, and returns its summary and series; the
parent writes `summary.json` and `comparison.csv`. `run_simulation` returns everything a report needs
(`SimulationRun`); the HTML report is drawn from it by the report layer (`kubesched.report.simulation`),
which this module does not import.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.api.snapshot import iter_objects, read_documents
from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.config.scheduler_config import default_config, parse_scheduler_config
from kubesched.descheduler.registry import default_registry
from kubesched.diagnostics import silence, warn
from kubesched.errors import InputError
from kubesched.kubelet.kubelet_config import parse_kubelet_config
from kubesched.output import atomic_directory, check_output_dir
from kubesched.scheduler.framework import SchedulerServices
from kubesched.scheduler.scheduler import Scheduler
from kubesched.sim.engine import Engine
from kubesched.sim.output import have_pyarrow, json_dump, write_csv, write_gpu_allocation, write_variant
from kubesched.sim.scenario import Scenario, VariantSpec, load_scenario, load_variant_file

# What the comparison table shows, in order: (summary key, label, format).
TABLE_ROWS: list[tuple[str, str, str]] = [
    ("cpuUtilisationMean", "mean CPU utilisation", "pct"),
    ("cpuSpreadStdMean", "CPU spread: std (mean over time)", "pct"),
    ("cpuRangeMean", "CPU spread: max − min (mean)", "pct"),
    ("cpuSpreadStdFinal", "CPU spread: std at the end", "pct"),
    ("cpuMaxPeak", "hottest node, peak", "pct"),
    ("hotNodeMinutes", "hot-node minutes", "minutes"),
    ("memSpreadStdMean", "memory spread: std (mean)", "pct"),
    ("pendingMax", "pending pods, max", "int"),
    ("podsWaited", "pods that waited to be scheduled", "int"),
    ("schedulingLatencyP95", "scheduling wait, p95", "duration"),
    ("schedulingLatencyMax", "scheduling wait, max", "duration"),
    ("podsScheduled", "pods scheduled", "int"),
    ("evictions", "evictions", "int"),
    ("deschedulerEvictions", "  by the descheduler", "int"),
    ("kubeletEvictions", "  by kubelets (node pressure)", "int"),
    ("oomKills", "OOM kills", "int"),
    ("loopEpisodes", "eviction-loop episodes", "int"),
    ("loopWorkloads", "workloads in loops", "int"),
]
# Shown when a run had PodGroups (kubesched/sim/gangs.py).
GANG_ROWS: list[tuple[str, str, str]] = [
    ("gangsStarted", "gangs started", "int"),
    ("gangsFinished", "gangs finished", "int"),
    ("gangWaitMean", "gang wait, mean", "duration"),
    ("gangWaitMax", "gang wait, max", "duration"),
    ("permitTimeouts", "Permit timeouts", "int"),
    ("partialGangGpuHours", "GPU-hours held by gangs below quorum", "num"),
    ("partialGangGpusAtEnd", "GPUs held by gangs below quorum at the end", "int"),
]


def table_rows(summaries: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The comparison's rows: the gang rows too when a variant had PodGroups."""
    return TABLE_ROWS + (GANG_ROWS if any("gangs" in s for s in summaries) else [])


def resolve_variants(s: Scenario, cli: list[str]) -> list[VariantSpec]:
    """The scenario's variants, then each `--variant NAME=FILE` (replacing one of the same name)."""
    out = list(s.variants)
    interval = s.descheduler.interval if s.descheduler else 300.0
    given: set[str] = set()
    for item in cli:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"expected NAME=FILE, got {item!r}", field="--variant")
        if not all(c.isalnum() or c in "-_." for c in name) or name in (".", ".."):
            raise InputError(f"expected a variant name of letters, digits, '-', '_' or '.', got {name!r}",
                             field="--variant")
        if name in given:
            raise InputError(f"variant {name!r} is given twice; give each --variant a name of its own",
                             field="--variant")
        given.add(name)
        v = load_variant_file(name, path, where=f"--variant {name}", interval=interval)
        out = [x for x in out if x.name != name] + [v]
    if not out:
        out = [VariantSpec(name="default")]
    return out


def check_variant(s: Scenario, v: VariantSpec) -> None:
    """Parse every configuration a variant uses (plugins, args) so that errors show before any run."""
    src = v.scheduler or s.scheduler
    cfg = parse_scheduler_config(src.raw, src.source) if src else default_config()
    Scheduler(ClusterState(), cfg, seed=s.seed, services=SchedulerServices(start=s.start))
    served = {p.scheduler_name for p in cfg.profiles}
    for who, name in _scheduler_names(s):
        if name not in served:
            suffix = f" in variant {v.name}" if v.name != "default" else ""
            warn(f"{who} asks for schedulerName {name!r}, which no profile{suffix} serves "
                 f"(profiles: {', '.join(sorted(served))}): its pods stay pending", file=s.path)
    desched = v.descheduler if v.descheduler_set else s.descheduler
    if desched is not None:
        parse_descheduler_policy(desched.policy.raw, desched.policy.source, default_registry())
    k = v.kubelet or s.kubelet.config
    if k is not None:
        parse_kubelet_config(k.raw, k.source)


def _scheduler_names(s: Scenario) -> list[tuple[str, str]]:
    """(who, spec.schedulerName) of every workload, cluster object and pending snapshot pod of the scenario."""
    out: list[tuple[str, str]] = []

    def name_of(pod_spec: Any) -> str:
        name = pod_spec.get("schedulerName") if isinstance(pod_spec, dict) else None
        return name if isinstance(name, str) and name else "default-scheduler"

    def obj(v: Any) -> dict[str, Any]:
        return v if isinstance(v, dict) else {}

    for w in s.workloads:
        spec = obj(w.manifest.get("spec"))
        pod_spec = spec if w.manifest.get("kind") == "Pod" else obj(spec.get("template")).get("spec")
        out.append((w.key, name_of(pod_spec)))
    pods = [o for o in s.cluster.objects if o.get("kind") == "Pod"]
    if s.cluster.snapshot:
        for o in iter_objects(read_documents(s.cluster.snapshot), s.cluster.snapshot):
            if o.get("kind") == "Pod":
                pods.append(o)
            elif o.get("kind") in ("Deployment", "ReplicationController", "CronJob"):
                meta = obj(o.get("metadata"))
                warn(f"{o['kind']} {meta.get('namespace') or 'default'}/{meta.get('name')} in the cluster snapshot: "
                     "simulate runs no controller for this kind from a snapshot (its pods and ReplicaSets in the "
                     "snapshot are kept; give the workload under spec.workloads to have it managed)",
                     file=s.cluster.snapshot)
    for o in pods:
        spec = obj(o.get("spec"))
        if spec.get("nodeName"):
            continue
        meta = obj(o.get("metadata"))
        out.append((f"Pod {meta.get('namespace') or 'default'}/{meta.get('name')}", name_of(spec)))
    return out


# ---------------------------------------------------------------- one variant (in a worker process)

_QUEUE: Any = None


def _init_worker(queue: Any) -> None:
    global _QUEUE
    _QUEUE = queue
    # The parent has already said what the inputs warrant; the workers read the same inputs again.
    silence()


def run_variant(scenario_path: str, variant: VariantSpec, out_dir: str | None, parquet: bool,
                overrides: dict[str, Any], label: str | None = None) -> dict[str, Any]:
    """Run one variant (one seed); write its files under `variants/<label>`; return what the comparison and
    the report need."""
    s = load_scenario(scenario_path)
    s = apply_overrides(s, overrides)
    name = label or variant.name
    last = [-1.0]

    def progress(frac: float) -> None:
        if _QUEUE is not None and frac - last[0] >= 0.01:
            last[0] = frac
            _QUEUE.put((name, frac))

    data = run_scenario(s, variant, progress)
    data["run"] = name
    if out_dir is not None:
        folder = Path(out_dir) / "variants" / name
        write_variant(folder, data, parquet)
        if data["gpu"] is not None:
            write_gpu_allocation(folder, data["gpu"])
    if _QUEUE is not None:
        _QUEUE.put((name, 1.0))
    return data


def run_seeds(s: Scenario, overrides: dict[str, Any]) -> tuple[int, ...]:
    """The seeds to run each variant with: `--seed`, else the scenario's seeds, else its seed."""
    if overrides.get("seed") is not None:
        return (int(overrides["seed"]),)
    return s.seeds or (s.seed,)


def run_scenario(s: Scenario, variant: VariantSpec, progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Run a loaded scenario under one variant in this process and return what `collect` returns.

    The public entry point for programs that run many simulations (`kubesched tune`, `kubesched sweep`).
    The summary also gets `pendingLongest`: the longest a pod waited to be bound, in seconds, counting the
    pods still pending at the end up to the end.
    """

    engine = Engine(s, variant, progress)
    result = engine.run()
    data = collect(result, s)
    waits = [b.t - b.created for b in result.recorder.bindings]
    waits += [result.end - sp.created for sp in engine.pods.values() if not sp.node and not sp.gone]
    data["summary"]["pendingLongest"] = round(max(waits, default=0.0), 3)
    return data


def apply_overrides(s: Scenario, overrides: dict[str, Any]) -> Scenario:
    if not overrides:
        return s
    changes: dict[str, Any] = {}
    if overrides.get("seed") is not None:
        changes["seed"] = int(overrides["seed"])
    if overrides.get("duration") is not None:
        changes["duration"] = float(overrides["duration"])
    return dataclasses.replace(s, **changes)


def collect(result: Any, s: Scenario) -> dict[str, Any]:
    rec = result.recorder
    loops = rec.loops(s.report.loop_window)
    summary = rec.summary(loops)
    summary["deschedulerEvictions"] = sum(1 for e in rec.evictions if e.component == "descheduler")
    summary["deschedulerCycles"] = result.descheduler_cycles
    gangs = getattr(result, "gangs", None) or {}
    summary.update(gangs.get("summary", {}))
    # GPU allocation (share of the GPUs) where arrived GPU demand is 100 % and 130 % of them, read from the
    # allocation curve the published way; None unless the scenario measures it (report.gpuAllocation).
    for k in (100, 130):
        v = result.gpu["allocation_curve"][k] if result.gpu is not None else None
        summary[f"gpuAllocatedAt{k}"] = None if v is None else round(v / 100, 6)
    gpu_traces = [pt for pt in s.pod_traces if pt.gpu is not None]
    return {
        "gangs": gangs,
        "variant": result.variant,
        "seed": s.seed,
        "workload": Path(gpu_traces[0].file).stem if gpu_traces else s.name,
        "tune": next((pt.inflate[1] for pt in gpu_traces if pt.inflate is not None), 1.0),
        "gpu": result.gpu,
        "summary": summary,
        "loops": [f.to_json() for f in loops],
        "series": rec.series(),
        "node_names": list(result.node_names),
        "node_cpu": rec.matrix(rec.node_cpu),
        "node_mem": rec.matrix(rec.node_mem),
        "node_cpu_req": rec.matrix(rec.node_cpu_req),
        "node_requested": {res: rec.matrix(rows) for res, rows in rec.node_requested.items()},
        "evictions": [dataclasses.asdict(e) for e in rec.evictions],
        "bindings": [dataclasses.asdict(b) for b in rec.bindings],
        "oom_kills": list(rec.oom_kills),
        "events": list(rec.events),
        "notes": list(result.notes),
        "hot_threshold": s.report.hot_threshold,
    }


# ---------------------------------------------------------------- all variants


@dataclass(slots=True)
class SimulationRun:
    """One `kubesched simulate`: the scenario, its variants, each variant's results (summary, series,
    per-node matrices, events: what `collect` returns; with several seeds, the first seed's), and `doc`,
    the JSON document the CLI prints."""

    scenario: Scenario
    variants: list[VariantSpec]
    results: list[dict[str, Any]]
    doc: dict[str, Any]
    out: Path | None
    # Every run that measured GPU allocation (report.gpuAllocation): each variant once per seed.
    gpu_runs: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def run_simulation(scenario_path: str, cli_variants: list[str], out_dir: str | None, jobs: int | None = None,
                   overrides: dict[str, Any] | None = None,
                   on_progress: Callable[[str, float], None] | None = None,
                   finish: Callable[[SimulationRun], None] | None = None) -> SimulationRun:
    """Run every variant (once per seed); with `out_dir`, write the per-run files, summary.json and
    comparison.csv (and allocation.csv / fragmentation.csv when the scenario measures GPU allocation).

    The folder is checked before any work and written whole or not at all: everything goes into a
    temporary folder that replaces `out_dir` only when the run has finished. `finish` (the report, for
    instance) is called with the run while its folder (`run.out`) is still that temporary one; the paths
    it records in `run.doc["files"]` are moved to `out_dir` with the folder.
    """
    if out_dir is not None:
        check_output_dir(out_dir)
    s = apply_overrides(load_scenario(scenario_path), overrides or {})
    variants = resolve_variants(s, cli_variants)
    seeds = run_seeds(s, overrides or {})
    for v in variants:
        try:
            check_variant(s, v)
        except InputError as e:
            suffix = f" (variant {v.name})" if len(variants) > 1 or v.name != "default" else ""
            raise InputError(e.message + suffix, file=e.file, obj=e.obj, field=e.field) from None
    parquet = have_pyarrow()
    runs = [(v, {**(overrides or {}), "seed": seed}, v.name if len(seeds) == 1 else f"{v.name}/seed-{seed}")
            for v in variants for seed in seeds]
    if out_dir is None:
        every = _run_all(scenario_path, runs, None, parquet, jobs, on_progress)
        results, gpu_runs = _first_seed(every, seeds), _gpu_runs(every)
        return SimulationRun(s, variants, results, _document(s, variants, results, seeds, gpu_runs), None, gpu_runs)
    out = check_output_dir(out_dir)
    with atomic_directory(out) as tmp:
        every = _run_all(scenario_path, runs, str(tmp), parquet, jobs, on_progress)
        results, gpu_runs = _first_seed(every, seeds), _gpu_runs(every)
        doc = _document(s, variants, results, seeds, gpu_runs)
        json_dump(tmp / "summary.json", doc)
        header = ["metric"] + [r["variant"] for r in results]
        rows = [[key] + [r["summary"].get(key) for r in results]
                for key, _, _ in table_rows([r["summary"] for r in results])]
        write_csv(tmp / "comparison.csv", header, rows)
        files: dict[str, Any] = {"summary": str(tmp / "summary.json"), "comparison": str(tmp / "comparison.csv"),
                                 "report": None,
                                 "variants": {r["run"]: str(tmp / "variants" / r["run"]) for r in every},
                                 "parquet": parquet}
        if gpu_runs:
            write_allocation_tables(tmp, gpu_runs)
            files["allocation"] = str(tmp / "allocation.csv")
        doc["files"] = files
        run = SimulationRun(s, variants, results, doc, tmp, gpu_runs)
        if finish is not None:
            finish(run)
    run.out = out
    doc["files"] = _moved(doc["files"], str(tmp), str(out))
    return run


def _first_seed(every: list[dict[str, Any]], seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    """With several seeds the comparison and the report's per-variant sections show the first seed's runs."""
    return [r for r in every if r["seed"] == seeds[0]]


def _gpu_runs(every: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in every if r["gpu"] is not None]


def _moved(value: Any, old: str, new: str) -> Any:
    """`value` (a path, or lists and maps of them) with the folder `old` renamed `new`."""
    if isinstance(value, str):
        return new + value[len(old):] if value == old or value.startswith(old + os.sep) else value
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    return value


def _document(s: Scenario, variants: list[VariantSpec], results: list[dict[str, Any]], seeds: tuple[int, ...],
              gpu_runs: list[dict[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "scenario": s.name,
        "seed": seeds[0],
        "seeds": list(seeds),
        "duration": s.duration,
        "variants": [{"name": r["variant"], "description": _description(v), "summary": r["summary"],
                      "loops": r["loops"], "notes": r["notes"]} for v, r in zip(variants, results, strict=True)],
    }
    if gpu_runs:
        doc["gpuAllocation"] = [{"variant": r["variant"], "seed": r["seed"], "workload": r["workload"],
                                 "totalGpus": r["gpu"]["total_gpus"], "curve": r["gpu"]["allocation_curve"]}
                                for r in gpu_runs]
    return doc


def simulate(scenario_path: str, cli_variants: list[str], out_dir: str | None, jobs: int | None = None,
             overrides: dict[str, Any] | None = None,
             on_progress: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    """Run every variant and write the comparison (no HTML report); returns the JSON document the CLI prints."""
    return run_simulation(scenario_path, cli_variants, out_dir, jobs, overrides, on_progress).doc


def _description(v: VariantSpec) -> str:
    return v.description


def write_allocation_tables(out: Path, runs: list[dict[str, Any]]) -> None:
    """allocation.csv (and fragmentation.csv when measured) in the published layout, one row per run."""
    points = [str(k) for k in range(131)]
    write_csv(out / "allocation.csv", ["workload", "sc_policy", "tune", "seed", "total_gpus"] + points,
              [[r["workload"], r["variant"], r["tune"], r["seed"], r["gpu"]["total_gpus"]] + r["gpu"]["allocation_curve"]
               for r in runs])
    frag = [r for r in runs if r["gpu"].get("fragmentation_curve") is not None]
    if frag:
        write_csv(out / "fragmentation.csv", ["workload", "sc_policy", "tune", "seed"] + points,
                  [[r["workload"], r["variant"], r["tune"], r["seed"]] + r["gpu"]["fragmentation_curve"] for r in frag])


Run = tuple[VariantSpec, dict[str, Any], str]


def _run_all(path: str, runs: list[Run], out: str | None, parquet: bool, jobs: int | None,
             on_progress: Callable[[str, float], None] | None) -> list[dict[str, Any]]:
    workers = jobs or min(len(runs), os.cpu_count() or 1)
    if workers <= 1 or len(runs) == 1:
        global _QUEUE
        results = []
        for v, overrides, label in runs:
            q = _ListQueue(on_progress)
            _QUEUE = q
            try:
                results.append(run_variant(path, v, out, parquet, overrides, label))
            finally:
                _QUEUE = None
        return results
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(queue,)) as pool:
        futures = [pool.submit(run_variant, path, v, out, parquet, overrides, label) for v, overrides, label in runs]
        pending = set(range(len(futures)))
        while pending:
            try:
                name, frac = queue.get(timeout=0.2)
                if on_progress is not None:
                    on_progress(name, frac)
            except Exception:  # queue.Empty
                pass
            for i in list(pending):
                if futures[i].done():
                    pending.discard(i)
        results = [f.result() for f in futures]
    while True:
        try:
            name, frac = queue.get_nowait()
        except Exception:
            break
        if on_progress is not None:
            on_progress(name, frac)
    return results


class _ListQueue:
    """The progress channel when a variant runs in this process."""

    def __init__(self, cb: Callable[[str, float], None] | None) -> None:
        self.cb = cb

    def put(self, item: tuple[str, float]) -> None:
        if self.cb is not None:
            self.cb(*item)

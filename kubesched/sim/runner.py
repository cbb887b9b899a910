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

from kubesched.cluster.state import ClusterState
from kubesched.config.descheduler_policy import parse_descheduler_policy
from kubesched.config.scheduler_config import default_config, parse_scheduler_config
from kubesched.descheduler.registry import default_registry
from kubesched.errors import InputError
from kubesched.kubelet.kubelet_config import parse_kubelet_config
from kubesched.scheduler.framework import SchedulerServices
from kubesched.scheduler.scheduler import Scheduler
from kubesched.sim.engine import Engine
from kubesched.sim.output import have_pyarrow, json_dump, write_csv, write_variant
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
    for item in cli:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"expected NAME=FILE, got {item!r}", field="--variant")
        if not all(c.isalnum() or c in "-_." for c in name):
            raise InputError(f"expected a variant name of letters, digits, '-', '_' or '.', got {name!r}",
                             field="--variant")
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
    desched = v.descheduler if v.descheduler_set else s.descheduler
    if desched is not None:
        parse_descheduler_policy(desched.policy.raw, desched.policy.source, default_registry())
    k = v.kubelet or s.kubelet.config
    if k is not None:
        parse_kubelet_config(k.raw, k.source)


# ---------------------------------------------------------------- one variant (in a worker process)

_QUEUE: Any = None


def _init_worker(queue: Any) -> None:
    global _QUEUE
    _QUEUE = queue


def run_variant(scenario_path: str, variant: VariantSpec, out_dir: str | None, parquet: bool,
                overrides: dict[str, Any]) -> dict[str, Any]:
    """Run one variant; write its files; return what the comparison and the report need."""
    s = load_scenario(scenario_path)
    s = apply_overrides(s, overrides)
    last = [-1.0]

    def progress(frac: float) -> None:
        if _QUEUE is not None and frac - last[0] >= 0.01:
            last[0] = frac
            _QUEUE.put((variant.name, frac))

    data = run_scenario(s, variant, progress)
    if out_dir is not None:
        write_variant(Path(out_dir) / "variants" / variant.name, data, parquet)
    if _QUEUE is not None:
        _QUEUE.put((variant.name, 1.0))
    return data


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
    return {
        "gangs": gangs,
        "variant": result.variant,
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
    per-node matrices, events: what `collect` returns), and `doc`, the JSON document the CLI prints."""

    scenario: Scenario
    variants: list[VariantSpec]
    results: list[dict[str, Any]]
    doc: dict[str, Any]
    out: Path | None


def run_simulation(scenario_path: str, cli_variants: list[str], out_dir: str | None, jobs: int | None = None,
                   overrides: dict[str, Any] | None = None,
                   on_progress: Callable[[str, float], None] | None = None) -> SimulationRun:
    """Run every variant; with `out_dir`, write the per-variant files, summary.json and comparison.csv."""
    s = apply_overrides(load_scenario(scenario_path), overrides or {})
    variants = resolve_variants(s, cli_variants)
    for v in variants:
        try:
            check_variant(s, v)
        except InputError as e:
            suffix = f" (variant {v.name})" if len(variants) > 1 or v.name != "default" else ""
            raise InputError(e.message + suffix, file=e.file, obj=e.obj, field=e.field) from None
    parquet = have_pyarrow()
    out = Path(out_dir) if out_dir else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    results = _run_all(scenario_path, variants, str(out) if out else None, parquet, overrides or {}, jobs, on_progress)
    doc: dict[str, Any] = {
        "scenario": s.name,
        "seed": s.seed,
        "duration": s.duration,
        "variants": [{"name": r["variant"], "description": _description(v), "summary": r["summary"],
                      "loops": r["loops"], "notes": r["notes"]} for v, r in zip(variants, results, strict=True)],
    }
    if out is not None:
        json_dump(out / "summary.json", doc)
        header = ["metric"] + [r["variant"] for r in results]
        rows = [[key] + [r["summary"].get(key) for r in results]
                for key, _, _ in table_rows([r["summary"] for r in results])]
        write_csv(out / "comparison.csv", header, rows)
        doc["files"] = {"summary": str(out / "summary.json"), "comparison": str(out / "comparison.csv"),
                        "report": None,
                        "variants": {r["variant"]: str(out / "variants" / r["variant"]) for r in results},
                        "parquet": parquet}
    return SimulationRun(s, variants, results, doc, out)


def simulate(scenario_path: str, cli_variants: list[str], out_dir: str | None, jobs: int | None = None,
             overrides: dict[str, Any] | None = None,
             on_progress: Callable[[str, float], None] | None = None) -> dict[str, Any]:
    """Run every variant and write the comparison (no HTML report); returns the JSON document the CLI prints."""
    return run_simulation(scenario_path, cli_variants, out_dir, jobs, overrides, on_progress).doc


def _description(v: VariantSpec) -> str:
    return v.description


def _run_all(path: str, variants: list[VariantSpec], out: str | None, parquet: bool, overrides: dict[str, Any],
             jobs: int | None, on_progress: Callable[[str, float], None] | None) -> list[dict[str, Any]]:
    workers = jobs or min(len(variants), os.cpu_count() or 1)
    if workers <= 1 or len(variants) == 1:
        global _QUEUE
        results = []
        for v in variants:
            q = _ListQueue(on_progress)
            _QUEUE = q
            try:
                results.append(run_variant(path, v, out, parquet, overrides))
            finally:
                _QUEUE = None
        return results
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                             initargs=(queue,)) as pool:
        futures = [pool.submit(run_variant, path, v, out, parquet, overrides) for v in variants]
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

"""Reproduce the FGD paper's openb allocation curves and compare them with the published ones, point by point.

For every openb trace in a data directory (default `../shared/data/openb`, beside the repository) and every
trace given with `--trace`, runs `scenario-allocation.yaml` — the six policies × the seeds (42 … 51) — on a
pool of processes, then prints per trace and policy: the largest gap between our mean curve and the
published mean over arrived demand 0 … 130 % (percentage points), the share of points inside the published
seeds' min–max band, our and the published allocation at 100 % and 130 %, and the ranking of the policies at
100 % arrived demand. Published curves come from `analysis_allo_discrete.csv` in the data directory; a trace
without published rows is run and ranked only. Each trace's results (allocation.csv, fragmentation.csv,
report.html) go to `<out>/<trace>/` (the scenario run, `<out>/<trace>.scenario.yaml`), the comparison to
`<out>/compare.json`.

    .venv/bin/python examples/openb/compare.py [--data DIR] [--trace FILE ...] [--only-trace] [--seeds 42,43]
                                               [--policies fgd,random] [--jobs N] [--out out/openb-compare] [--reuse]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kubesched.errors import InputError
from kubesched.report.simulation import write_report
from kubesched.sim.gpu_allocation import POINTS, compare_curves, read_published
from kubesched.sim.runner import run_simulation
from kubesched.sim.traces import read_rows

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenario-allocation.yaml"
DEFAULT_DATA = HERE.parents[1].parent / "shared" / "data" / "openb"
PUBLISHED = "analysis_allo_discrete.csv"


def scenario_for(trace: Path, out: Path, seeds: list[int] | None, policies: list[str] | None,
                 published: Path | None) -> tuple[Path, dict[str, str]]:
    """scenario-allocation.yaml with this trace (absolute paths, enough time for every pod)."""
    doc = yaml.safe_load(SCENARIO.read_text())
    spec = doc["spec"]
    spec["cluster"]["nodeTable"]["file"] = str(HERE / spec["cluster"]["nodeTable"]["file"])
    pt = spec["workloads"][0]["podTrace"]
    pt["file"] = str(trace)
    rows = read_rows(str(trace), str(trace))
    if rows and pt["gpu"].get("model") not in rows[0]:
        pt["gpu"].pop("model", None)  # traces without gpu_spec (as upstream's pod_csv_to_yaml allows)
    # Pods arrive one a second: room for the trace inflated to 130 % of the GPUs, and more.
    spec["duration"] = f"{int(len(rows) * 2 + 3600)}s"
    ref = spec["report"]["gpuAllocation"]["reference"]
    if published is not None:
        ref["file"] = str(published)  # the report draws this trace's published band (workload: the trace's name)
    else:
        del spec["report"]["gpuAllocation"]["reference"]
    if seeds:
        spec["seeds"] = seeds
        spec["seed"] = seeds[0]
    for v in spec["variants"]:
        v["file"] = str(HERE / v["file"])
    if policies:
        spec["variants"] = [v for v in spec["variants"] if v["name"] in policies]
    # Beside the trace's results folder, which the simulation writes whole (a run replaces it).
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{trace.stem}.scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, dict(ref["policies"])


class Progress:
    """One status line on stderr: runs finished, the run fractions in flight, elapsed time."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.start = label, total, time.monotonic()
        self.frac: dict[str, float] = {}
        self.last = 0.0

    def __call__(self, run: str, frac: float) -> None:
        self.frac[run] = frac
        now = time.monotonic()
        if now - self.last < 1.0 and frac < 1.0:
            return
        self.last = now
        done = sum(1 for f in self.frac.values() if f >= 1.0)
        going = sum(f for f in self.frac.values() if f < 1.0)
        elapsed = now - self.start
        eta = ""
        if done + going > 0.05:
            left = elapsed / (done + going) * (self.total - done - going)
            eta = f", about {left / 60:.0f} min left"
        sys.stderr.write(f"\r{self.label}: {done}/{self.total} runs done, {elapsed / 60:.1f} min{eta}   ")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write(f"\r{self.label}: {self.total}/{self.total} runs done in "
                         f"{(time.monotonic() - self.start) / 60:.1f} min{' ' * 24}\n")


def _se(curves: np.ndarray, k: int) -> float:
    """The standard error of the mean over seeds at point k."""
    v = curves[:, k][~np.isnan(curves[:, k])]
    return float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan


def compare_trace(trace: Path, published: dict[str, dict[str, np.ndarray]], pub_file: Path | None, out: Path,
                  jobs: int | None, seeds: list[int] | None, policies: list[str] | None, label: str,
                  reuse: bool = False) -> dict[str, Any]:
    path, mapping = scenario_for(trace, out, seeds, policies, pub_file)
    ours: dict[str, list[list[float]]] = {}
    if reuse:
        # The curves a previous run of this script wrote (--reuse): nothing is simulated again.
        table = read_published(str(out / trace.stem / "allocation.csv"))
        for variant, written in next(iter(table.values()), {}).items():
            ours[variant] = written.tolist()
    else:
        n_variants = len(yaml.safe_load(path.read_text())["spec"]["variants"])
        n_seeds = len(yaml.safe_load(path.read_text())["spec"]["seeds"])
        progress = Progress(label, n_variants * n_seeds)
        # The report is written into the results folder before it replaces `<out>/<trace>/` whole.
        run = run_simulation(str(path), [], str(out / trace.stem), jobs, {}, progress, finish=write_report)
        progress.close()
        for r in run.doc["gpuAllocation"]:
            ours.setdefault(r["variant"], []).append([math.nan if v is None else v for v in r["curve"]])
    pub = published.get(trace.stem, {})
    result: dict[str, Any] = {"trace": trace.stem, "policies": {}}
    for variant, curves in ours.items():
        arr = np.array(curves)
        mine = np.nanmean(arr, axis=0)
        item: dict[str, Any] = {"seeds": len(curves), "at100": float(mine[100]), "at130": float(mine[130]),
                                "se100": _se(arr, 100), "published": mapping.get(variant)}
        ref = pub.get(mapping.get(variant, ""))
        if ref is not None:
            c = compare_curves(arr, ref)
            item.update({"maxGap": c.max_gap, "maxGapAt": c.max_gap_at, "insideBand": c.inside_band,
                         "published100": c.published_mean[100], "published130": c.published_mean[130],
                         "publishedSe100": _se(ref, 100)})
        result["policies"][variant] = item
    order = sorted(result["policies"], key=lambda v: -result["policies"][v]["at100"])
    result["ranking"] = order
    with_pub = [v for v in order if "published100" in result["policies"][v]]
    result["publishedRanking"] = sorted(with_pub, key=lambda v: -result["policies"][v]["published100"])
    return result


def print_trace(res: dict[str, Any]) -> None:
    print(f"\n{res['trace']}")
    print(f"  {'policy':<16}{'max gap':>9}{'at':>6}{'in band':>9}{'100% ours':>11}{'published':>11}"
          f"{'130% ours':>11}{'published':>11}")
    for v, it in res["policies"].items():
        if "maxGap" in it:
            print(f"  {v:<16}{it['maxGap']:>8.2f}p{it['maxGapAt']:>5}%{100 * it['insideBand']:>8.0f}%"
                  f"{it['at100']:>10.2f}%{it['published100']:>10.2f}%{it['at130']:>10.2f}%{it['published130']:>10.2f}%")
        else:
            print(f"  {v:<16}{'-':>9}{'':>6}{'-':>9}{it['at100']:>10.2f}%{'-':>11}{it['at130']:>10.2f}%{'-':>11}")
    print(f"  ranking at 100 %: {' > '.join(res['ranking'])}")
    if res["publishedRanking"]:
        pub = res["publishedRanking"]
        ours = [v for v in res["ranking"] if v in pub]
        print(f"  published:        {' > '.join(pub)}  ({'same' if pub == ours else 'different'})")
        pol = res["policies"]
        for a, b in zip(pub, pub[1:], strict=False):
            if ours.index(a) > ours.index(b):
                d = pol[a]["published100"] - pol[b]["published100"]
                se = math.hypot(pol[a]["publishedSe100"], pol[b]["publishedSe100"])
                print(f"    {a} above {b} in the published means by {d:.2f} points, "
                      f"{d / se:.1f} standard errors of their difference ({se:.2f}); ours: "
                      f"{pol[a]['at100']:.2f} ± {pol[a]['se100']:.2f} vs {pol[b]['at100']:.2f} ± {pol[b]['se100']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="directory with openb_pod_list_*.csv and "
                    f"{PUBLISHED} (default: {DEFAULT_DATA})")
    ap.add_argument("--trace", action="append", default=[], help="another trace in the openb pod list format")
    ap.add_argument("--only-trace", action="store_true", help="run only the --trace files, not the data directory's")
    ap.add_argument("--seeds", help="comma-separated seeds (default: the scenario's, 42 … 51)")
    ap.add_argument("--policies", help="comma-separated variants (default: all six)")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per core)")
    ap.add_argument("--out", default="out/openb-compare")
    ap.add_argument("--reuse", action="store_true", help="compare the allocation.csv files a previous run wrote "
                    "under --out instead of simulating again")
    args = ap.parse_args()
    data = Path(args.data)
    traces: list[Path] = []
    if not args.only_trace:
        if not data.is_dir():
            sys.stderr.write(f"compare.py: --data {data}: not a directory (expected the openb traces and {PUBLISHED})\n")
            return 2
        traces += sorted(data.glob("openb_pod_list_*.csv"))
    for t in args.trace:
        p = Path(t)
        if not p.is_file():
            sys.stderr.write(f"compare.py: --trace {t}: no such file\n")
            return 2
        traces.append(p)
    if not traces:
        sys.stderr.write(f"compare.py: no openb_pod_list_*.csv in {data} and no --trace\n")
        return 2
    try:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    except ValueError:
        sys.stderr.write(f"compare.py: --seeds: expected integers separated by commas, got {args.seeds!r}\n")
        return 2
    policies = args.policies.split(",") if args.policies else None
    pub_file = data / PUBLISHED
    out = Path(args.out)
    try:
        published = read_published(str(pub_file)) if pub_file.is_file() else {}
        results = []
        for i, trace in enumerate(traces):
            res = compare_trace(trace, published, pub_file if pub_file.is_file() else None, out, args.jobs, seeds,
                                policies, f"[{i + 1}/{len(traces)}] {trace.stem}", args.reuse)
            print_trace(res)
            results.append(res)
    except InputError as e:
        sys.stderr.write(f"\ncompare.py: {e}\n")
        return 2
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps({"points": POINTS, "traces": results}, indent=2) + "\n")
    worst = max((it["maxGap"] for r in results for it in r["policies"].values() if "maxGap" in it), default=None)
    if worst is not None:
        print(f"\nlargest gap over every trace and policy: {worst:.2f} percentage points")
    print(f"results: {out}/<trace>/allocation.csv, report.html; summary: {out / 'compare.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

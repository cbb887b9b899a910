"""Benchmark: `kubesched tune` trials per minute, local process pool vs a local Ray instance.

Runs the hotspots study (examples/hotspots/tune.yaml) from scratch for N trials on each engine with the
same number of workers, checks that both found the same trials, and prints trials per minute (the
scenario's variants, run once for comparison, are counted apart). With --sweep it also times an openb
allocation sweep (examples/openb/sweep.yaml; expect minutes per run).

    .venv/bin/python bench/tune_engines.py [--trials 24] [--seeds 3] [--workers 2] [--sweep]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(engine: str, trials: int, seeds: int, workers: int, out: Path) -> tuple[float, float, list[dict]]:
    from kubesched.tune.study import TuneOptions, tune

    marks: dict[str, float] = {}

    def progress(done: int, total: int, label: str) -> None:
        if label == "variants":
            marks["trials"] = time.perf_counter()  # the last one is when the variants are done

    t0 = time.perf_counter()
    doc = tune(str(ROOT / "examples/hotspots/scenario.yaml"), str(ROOT / "examples/hotspots/tune.yaml"), str(out),
               TuneOptions(trials=trials, seeds=seeds, engine=engine, workers=workers), progress)
    t1 = time.perf_counter()
    return t1 - t0, t1 - marks.get("trials", t0), doc["trials"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=24)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sweep", action="store_true", help="also time the openb allocation sweep (slow)")
    args = ap.parse_args()
    print(f"hotspots study: {args.trials} trials × {args.seeds} seeds (8 h simulated each), {args.workers} workers, "
          f"{os.cpu_count()} cores")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for engine in ("local", "ray"):
            total, trials_wall, rows = run(engine, args.trials, args.seeds, args.workers, Path(tmp) / engine)
            results[engine] = rows
            print(f"  {engine:>5}: {total:6.1f} s in all (start-up and the 6 variants included); trials "
                  f"{trials_wall:6.1f} s → {60 * args.trials / trials_wall:6.1f} trials/min, "
                  f"{60 * args.trials * args.seeds / trials_wall:6.1f} simulations/min")
    same = [r["params"] for r in results["local"]] == [r["params"] for r in results["ray"]] and \
        [r["scores"] for r in results["local"]] == [r["scores"] for r in results["ray"]]
    print(f"  same trials on both engines: {same}")
    if args.sweep:
        from kubesched.tune.sweep import sweep

        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            doc = sweep(str(ROOT / "examples/openb/sweep.yaml"), tmp, workers=args.workers)
            wall = time.perf_counter() - t0
        print(f"openb allocation sweep: {doc['ran']} runs in {wall:.0f} s ({wall / max(doc['ran'], 1):.0f} s per run "
              f"on {args.workers} workers)")


if __name__ == "__main__":
    main()

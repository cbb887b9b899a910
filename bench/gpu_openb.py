"""Benchmark: the FGD paper's openb allocation experiment (1,213 GPU nodes, ~10,700 pods with GPU sharing).

Times one run (one trace, one policy, one seed), then all policies × seeds of one trace on a process pool
(default: 6 × 10 on 2 processes). Prints wall and CPU time and peak memory, beside the published cost:
the authors report 10 minutes for one run on 2 vCPUs and 10 hours on 256 vCPUs for 1,020 runs.

    .venv/bin/python bench/gpu_openb.py [--policy fgd] [--seed 42] [--trace FILE] [--jobs 2] [--one-only]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kubesched.sim.engine import Engine
from kubesched.sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "openb" / "scenario-allocation.yaml"


def one_run(policy: str, seed: int, trace: str | None) -> tuple[float, float, int, int, float | None]:
    """(wall s, cpu s, pods, failed, allocation at 100 %) of one run."""
    t0, c0 = time.perf_counter(), time.process_time()
    s = load_scenario(str(SCENARIO))
    if trace:
        s = dataclasses.replace(s, pod_traces=[dataclasses.replace(s.pod_traces[0], file=trace)])
    s = dataclasses.replace(s, seed=seed)
    variant = {v.name: v for v in s.variants}[policy]
    r = Engine(s, variant).run()
    assert r.gpu is not None
    return (time.perf_counter() - t0, time.process_time() - c0, r.recorder.created_pods, r.recorder.failed_attempts,
            r.gpu["allocation_curve"][100])


def _one(args: tuple[str, int, str | None]) -> tuple[float, float, int, int, float | None]:
    return one_run(*args)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="fgd")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--trace", default=None, help="an openb pod list (default: the scenario's, openb_pod_list_default)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--one-only", action="store_true", help="time only the single run")
    args = ap.parse_args()

    wall, cpu, pods, failed, at100 = one_run(args.policy, args.seed, args.trace)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"one run ({args.policy}, seed {args.seed}): {pods} pods, {failed} dropped, allocation at 100 % "
          f"{at100}%: wall {wall:.1f} s, cpu {cpu:.1f} s, peak memory {peak:.0f} MiB "
          f"(published: about 10 min on 2 vCPUs)")
    if args.one_only:
        return
    s = load_scenario(str(SCENARIO))
    runs = [(v.name, seed, args.trace) for v in s.variants for seed in s.seeds]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(_one, runs))
    total = time.perf_counter() - t0
    cpu_sum = sum(r[1] for r in results)
    print(f"all {len(runs)} runs ({len(s.variants)} policies x {len(s.seeds)} seeds) on {args.jobs} processes "
          f"({os.cpu_count()} cores): wall {total / 60:.1f} min, cpu {cpu_sum / 60:.1f} min, "
          f"per run {cpu_sum / len(runs):.1f} s cpu (published: 1,020 runs in 10 h on 256 vCPUs)")


if __name__ == "__main__":
    main()

"""Benchmark: the openb trace replay (scheduler only) — 1,523 nodes, 8,152 pods arriving and leaving
over 149 days by their recorded times (aim: at most 5 s). Prints wall time and peak memory.

    .venv/bin/python bench/sim_openb.py [--variant least-allocated|most-allocated]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="least-allocated")
    args = ap.parse_args()
    from kubesched.sim.engine import Engine
    from kubesched.sim.runner import resolve_variants
    from kubesched.sim.scenario import load_scenario

    t0 = time.perf_counter()
    c0 = time.process_time()
    s = load_scenario(str(ROOT / "examples" / "openb" / "scenario.yaml"))
    variant = {v.name: v for v in resolve_variants(s, [])}[args.variant]
    engine = Engine(s, variant)
    t1 = time.perf_counter()
    result = engine.run()
    t2 = time.perf_counter()
    c2 = time.process_time()
    rec = result.recorder
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"openb replay ({args.variant}): {len(result.node_names)} nodes, {rec.created_pods} pods, "
          f"{len(rec.bindings)} bound, {rec.failed_attempts} failed attempts")
    print(f"  setup {t1 - t0:.1f} s, run {t2 - t1:.1f} s, total wall {t2 - t0:.1f} s, cpu {c2 - c0:.1f} s")
    print(f"  peak memory {peak_mb:.0f} MiB")


if __name__ == "__main__":
    main()

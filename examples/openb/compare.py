"""GPU allocation on the openb cluster against the published curves, in shape and bounds.

Runs scenario-allocation.yaml (both variants), then for each arrived GPU demand k% of capacity reads the
allocated GPU share, and sets it beside the curves of data/analysis_allo_discrete_default.csv (six
GPU-sharing-aware policies × ten seeds, from the FGD paper). Prints a table and checks, and writes
compare.html (one chart, self-contained).

    .venv/bin/python examples/openb/compare.py [--out out/openb-allocation] [--results DIR]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESOURCE = "alibabacloud.com/gpu-milli"
XS = [10, 25, 50, 75, 90, 100, 110, 120, 130]


def published() -> dict[str, np.ndarray]:
    """Per policy, the mean over seeds of allocation % at arrived demand 0..130 %."""
    rows: dict[str, list[list[float]]] = {}
    with (HERE / "data" / "analysis_allo_discrete_default.csv").open() as fh:
        for r in csv.DictReader(fh):
            rows.setdefault(r["sc_policy"], []).append([float(r[str(k)]) for k in range(131)])
    return {p: np.mean(np.array(v), axis=0) for p, v in sorted(rows.items())}


def ours(results: Path) -> dict[str, np.ndarray]:
    """Per variant, allocation % interpolated at arrived demand 0..130 % (NaN past what arrived)."""
    out = {}
    for folder in sorted((results / "variants").iterdir()):
        with (folder / "series.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        x = np.array([float(r[f"allocated_{RESOURCE}_arrived"] or 0) for r in rows]) * 100
        y = np.array([float(r[f"allocated_{RESOURCE}"] or 0) for r in rows]) * 100
        grid = np.arange(131, dtype=float)
        curve = np.interp(grid, x, y)
        curve[grid > x.max() + 1e-9] = np.nan
        out[folder.name] = curve
    return out


def knee(curve: np.ndarray, gap: float = 2.0) -> float:
    """The arrived demand where allocation first falls `gap` points below the diagonal."""
    for k, v in enumerate(curve):
        if not np.isnan(v) and v < k - gap:
            return float(k)
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/openb-allocation")
    ap.add_argument("--results", default=None, help="use results already written by kubesched simulate")
    args = ap.parse_args()
    results = Path(args.results or args.out)
    if args.results is None:
        from kubesched.sim.runner import simulate

        simulate(str(HERE / "scenario-allocation.yaml"), [], str(results))
    pub = published()
    mine = ours(results)
    lo = np.min(np.array(list(pub.values())), axis=0)
    hi = np.max(np.array(list(pub.values())), axis=0)
    cols = list(mine) + ["published min", "published max"]
    print("GPU allocation (% of the cluster's GPUs) when the arrived GPU demand is k % of capacity")
    print(f"{'k':>5} " + " ".join(f"{c:>16}" for c in cols))
    for k in XS:
        vals = [mine[c][k] for c in mine] + [lo[k], hi[k]]
        print(f"{k:>4}% " + " ".join(f"{v:>15.1f}%" if not np.isnan(v) else f"{'-':>16}" for v in vals))
    print()
    ok = True
    for name, curve in mine.items():
        valid = ~np.isnan(curve)
        never_above = bool(np.all(curve[valid] <= np.arange(131)[valid] + 0.5))
        final = curve[valid][-1]
        print(f"{name}: knee at {knee(curve):.0f}% arrived (published {knee(lo):.0f}–{knee(hi):.0f}%), final "
              f"{final:.1f}% (published {lo[130]:.1f}–{hi[130]:.1f}%); never allocates more than arrived: {never_above}")
        ok = ok and never_above
    write_html(results / "compare.html", pub, mine)
    print(f"\nchart: {results / 'compare.html'}")
    return 0 if ok else 1


def write_html(path: Path, pub: dict[str, np.ndarray], mine: dict[str, np.ndarray]) -> None:
    from kubesched.report.html import CSS, PALETTE, line_chart

    grid = list(range(131))
    lines = [("arrived (y = x)", [0, 130], [0, 1.3], "#bbbbbb")]
    for i, (p, curve) in enumerate(pub.items()):
        lines.append((f"published {p}", grid, list(curve / 100), PALETTE[(i + 2) % len(PALETTE)]))
    dashed = list(range(1, len(lines)))
    for i, (name, curve) in enumerate(mine.items()):
        lines.append((f"kubesched {name}", grid, list(curve / 100), PALETTE[i % 2]))
    chart = line_chart("openb-allocation", "GPU allocation vs arrived GPU demand (openb default trace)", lines, "pct",
                       x_kind="num", y_max=1.3, width=900, height=460, x_label="arrived GPU demand, % of capacity",
                       y_label="allocated GPUs", dashed=dashed)
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>openb allocation</title>"
                    f"<style>{CSS}</style></head><body><h1>openb: GPU allocation</h1><p>Dashed: the published curves "
                    f"(GPU-sharing-aware policies, mean of 10 seeds). Solid: plain kube-scheduler in kubesched, where a "
                    f"pod holds whole GPUs.</p>{chart}</body></html>\n")


if __name__ == "__main__":
    sys.exit(main())

"""GPU allocation on the openb cluster against the published curves, in shape and bounds.

Runs scenario-allocation.yaml (both variants), then for each arrived GPU demand k% of capacity reads the
allocated GPU share, and sets it beside the curves of data/analysis_allo_discrete_default.csv (six
GPU-sharing-aware policies × ten seeds, from the FGD paper). Prints a table and checks, and writes
compare.html (one interactive chart, self-contained, built with kubesched.report's shared blocks).

    .venv/bin/python examples/openb/compare.py [--out out/openb-allocation] [--results DIR]

The simulation takes a minute or two (both policies in parallel); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from kubesched.report.figures import DASHES, PERCENT, SYMBOLS, Format, Line, Style, line_chart
from kubesched.report.html import Page
from kubesched.sim.runner import simulate

HERE = Path(__file__).resolve().parent
RESOURCE = "alibabacloud.com/gpu-milli"
PERCENT_POINTS = Format(",.0f", ",.0f", "%")  # x in percent points (0…130), not a fraction
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
        print(f"simulating {HERE / 'scenario-allocation.yaml'} (both policies; about a minute or two)", file=sys.stderr)
        simulate(str(HERE / "scenario-allocation.yaml"), [], str(results), on_progress=Progress())
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


class Progress:
    """Prints each variant's progress to stderr every 10%."""

    def __init__(self) -> None:
        self.shown: dict[str, int] = {}

    def __call__(self, name: str, frac: float) -> None:
        step = int(frac * 10)
        if step > self.shown.get(name, -1):
            self.shown[name] = step
            print(f"  {name}: {10 * step}%", file=sys.stderr, flush=True)


def write_html(path: Path, pub: dict[str, np.ndarray], mine: dict[str, np.ndarray]) -> None:
    grid = np.arange(131, dtype=float)
    lines = [Line("arrived (y = x)", [0, 130], [0, 1.3])]
    lines += [Line(f"published {p}", grid, curve / 100) for p, curve in pub.items()]
    lines += [Line(f"kubesched {name}", grid, curve / 100) for name, curve in mine.items()]
    # kubesched's curves solid and strong; the published ones dashed in muted colours; the diagonal dotted grey.
    muted = ["#9ecae1", "#a1d99b", "#fdae6b", "#bcbddc", "#fcbba1", "#c7e9c0"]
    style = {"arrived (y = x)": Style("#888888", "dot", "circle")}
    style.update({f"published {p}": Style(muted[i % len(muted)], DASHES[1 + i % (len(DASHES) - 1)], SYMBOLS[i])
                  for i, p in enumerate(pub)})
    style.update({f"kubesched {n}": Style(c, "solid", "circle") for n, c in zip(mine, ("#1f4e9c", "#c0392b"), strict=False)})
    chart = line_chart("openb-allocation", "GPU allocation vs arrived GPU demand (openb default trace)", lines,
                       style=style,
                       x_title="arrived GPU demand, % of the cluster's GPU capacity", x_format=PERCENT_POINTS,
                       y_title="allocated GPUs, share of the cluster", y_format=PERCENT, markers=False,
                       caption="Published: GPU-sharing-aware policies of the FGD paper, mean of 10 seeds. kubesched: "
                               "plain kube-scheduler, where a pod holds whole GPUs.")
    if chart.figure is not None:
        chart.figure.update_layout(height=520)
        chart.height = 520
    page = Page("openb: GPU allocation", "kubesched's LeastAllocated and MostAllocated beside the published curves")
    page.chart(chart)
    path.write_text(page.render())


if __name__ == "__main__":
    sys.exit(main())

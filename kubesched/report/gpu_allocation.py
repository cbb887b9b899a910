"""The GPU allocation section of the simulation report: each variant's curve over its seeds (mean, and
the min–max band), drawn over the published curves it reproduces (the FGD paper's
analysis_allo_discrete.csv: mean and min–max over its seeds).

`allocation_data` is the figure-independent part (what a chart library needs); `allocation_section`
draws it with the report's SVG line charts.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from kubesched.report.html import PALETTE, esc, line_chart
from kubesched.sim.gpu_allocation import POINTS, read_published


def _stats(curves: np.ndarray) -> dict[str, list[float | None]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # points no run reached are NaN, not an error
        mean = np.nanmean(curves, axis=0) if curves.size else np.full(POINTS, np.nan)
        lo = np.nanmin(curves, axis=0) if curves.size else np.full(POINTS, np.nan)
        hi = np.nanmax(curves, axis=0) if curves.size else np.full(POINTS, np.nan)

    def listed(a: np.ndarray) -> list[float | None]:
        return [None if not np.isfinite(v) else float(v) for v in a]

    return {"mean": listed(mean), "min": listed(lo), "max": listed(hi)}


def allocation_data(scenario: Any, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant (in run order): its seeds' curves summarised, and the published ones it reproduces."""
    ref = scenario.report.gpu_reference
    published: dict[str, dict[str, np.ndarray]] = {}
    if ref is not None:
        published = read_published(ref.file)
    out: list[dict[str, Any]] = []
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        curves = np.array([[np.nan if v is None else v for v in r["gpu"]["allocation_curve"]] for r in mine],
                          dtype=np.float64)
        item: dict[str, Any] = {"variant": variant, "seeds": [r["seed"] for r in mine], "ours": _stats(curves),
                                "published": None, "policy": None}
        if ref is not None and variant in ref.policies:
            workload = ref.workload or mine[0]["workload"]
            pol = ref.policies[variant]
            pub = published.get(workload, {}).get(pol)
            if pub is not None:
                item["published"] = _stats(pub)
                item["policy"] = f"{workload} {pol}"
        out.append(item)
    return out


def allocation_section(scenario: Any, runs: list[dict[str, Any]]) -> str:
    data = allocation_data(scenario, runs)
    xs = list(range(POINTS))
    parts = ['<h2>GPU allocation against arrived GPU demand</h2><p class="note">Allocated GPUs (% of the '
             "cluster's) when the GPU demand that has arrived is x % of the cluster's GPUs. Solid: this run's "
             "mean over its seeds, thin: its min and max; dashed grey: the published curves' min and max over "
             'their seeds (the band), dashed black: their mean.</p><div class="grid-2">']
    for i, item in enumerate(data):
        colour = PALETTE[i % len(PALETTE)]

        def frac(values: list[float | None]) -> list[float | None]:
            return [None if v is None else v / 100 for v in values]

        lines: list[Any] = [("arrived (y = x)", [0, 130], [0, 1.3], "#dddddd")]
        dashed = []
        pub = item["published"]
        if pub is not None:
            dashed = [1, 2, 3]
            lines += [("published min", xs, frac(pub["min"]), "#999999"),
                      ("published max", xs, frac(pub["max"]), "#999999"),
                      ("published mean", xs, frac(pub["mean"]), "#222222")]
        ours = item["ours"]
        if len(item["seeds"]) > 1:
            lines += [("min", xs, frac(ours["min"]), colour), ("max", xs, frac(ours["max"]), colour)]
        lines.append((f"{item['variant']} (mean of {len(item['seeds'])} seed(s))", xs, frac(ours["mean"]), colour))
        title = item["variant"] + (f" vs published {item['policy']}" if item["policy"] else "")
        parts.append(line_chart(f"gpu-allocation-{item['variant']}", title, lines, "pct", x_kind="num", y_max=1.3,
                                x_label="arrived GPU demand, % of capacity", y_label="allocated GPUs",
                                dashed=dashed))
    parts.append("</div>")
    rows = "".join(f"<tr><td>{esc(d['variant'])}</td><td>{_cell(d['ours']['mean'][100])}</td>"
                   f"<td>{_cell(d['ours']['mean'][130])}</td>"
                   f"<td>{_cell(d['published']['mean'][100] if d['published'] else None)}</td>"
                   f"<td>{_cell(d['published']['mean'][130] if d['published'] else None)}</td></tr>" for d in data)
    parts.append('<table id="gpu-allocation"><tr><th>variant</th><th>allocated at 100 %</th><th>at 130 %</th>'
                 f"<th>published at 100 %</th><th>published at 130 %</th></tr>{rows}</table>")
    return "".join(parts)


def _cell(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}%"

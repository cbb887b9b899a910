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

ZOOM_FROM = 70  # the per-variant charts start here: below, every policy allocates what arrives


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
    zoom = list(range(ZOOM_FROM, POINTS))

    def frac(values: list[float | None], at: list[int]) -> list[float | None]:
        return [None if values[k] is None else values[k] / 100 for k in at]  # type: ignore[operator]

    parts = ['<h2>GPU allocation against arrived GPU demand</h2><p class="note">Allocated GPUs (% of the '
             "cluster's) when the GPU demand that has arrived is x % of the cluster's GPUs. First every variant's "
             "mean over its seeds (dashed: the published means); then each variant from "
             f"{ZOOM_FROM} % on — solid: its mean, thin: its seeds' min and max; dashed grey: the published "
             "seeds' min and max (the band), dashed black: their mean.</p>"]
    overview: list[Any] = [("arrived (y = x)", [0, 130], [0, 1.3], "#dddddd")]
    dashed_all: list[int] = []
    for i, item in enumerate(data):
        colour = PALETTE[i % len(PALETTE)]
        overview.append((item["variant"], xs, frac(item["ours"]["mean"], xs), colour))
        if item["published"] is not None:
            dashed_all.append(len(overview))
            overview.append((f"published {item['policy']}", xs, frac(item["published"]["mean"], xs), colour))
    parts.append(line_chart("gpu-allocation", "GPU allocation, every variant (mean over seeds)", overview, "pct",
                            x_kind="num", y_max=1.3, width=1120, height=380,
                            x_label="arrived GPU demand, % of capacity", y_label="allocated GPUs",
                            dashed=dashed_all))
    parts.append('<div class="grid-2">')
    for i, item in enumerate(data):
        colour = PALETTE[i % len(PALETTE)]
        lines: list[Any] = []
        dashed = []
        pub = item["published"]
        if pub is not None:
            dashed = [0, 1, 2]
            lines += [("published min", zoom, frac(pub["min"], zoom), "#999999"),
                      ("published max", zoom, frac(pub["max"], zoom), "#999999"),
                      ("published mean", zoom, frac(pub["mean"], zoom), "#222222")]
        ours = item["ours"]
        if len(item["seeds"]) > 1:
            lines += [("min", zoom, frac(ours["min"], zoom), colour), ("max", zoom, frac(ours["max"], zoom), colour)]
        lines.append((f"{item['variant']} (mean of {len(item['seeds'])} seed(s))", zoom, frac(ours["mean"], zoom),
                      colour))
        values = [v for _, _, ys, _ in lines for v in ys if v is not None]
        title = item["variant"] + (f" vs published {item['policy']}" if item["policy"] else "")
        parts.append(line_chart(f"gpu-allocation-{item['variant']}", title, lines, "pct", x_kind="num",
                                y_min=min(values) - 0.01 if values else 0.0,
                                y_max=max(values) + 0.005 if values else 1.0,
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

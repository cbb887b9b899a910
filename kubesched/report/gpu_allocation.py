"""The GPU allocation section of the simulation report: each variant's curve over its seeds (mean, and
the min–max band), drawn over the published curves it reproduces (the FGD paper's
analysis_allo_discrete.csv: mean and min–max over its seeds).

`allocation_data` is the figure-independent part; `allocation_charts` draws it with Plotly in the
report's house style (`kubesched.report.figures`); `allocation_section` adds the charts and a table of
the gaps to a `Page`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import plotly.graph_objects as go

from kubesched.report.figures import PERCENT, Chart, Format, house_style, styles
from kubesched.report.html import Page
from kubesched.sim.gpu_allocation import POINTS, CurveComparison, compare_curves, read_published

ZOOM_FROM = 70  # the per-variant charts start here: below, every policy allocates what arrives
ARRIVED = Format(",.0f", ",.0f", "%")  # x: arrived demand in percent points (0 … 130)
BAND = "rgba(120,120,120,0.22)"


def _stats(curves: np.ndarray) -> dict[str, list[float]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # points no run reached are NaN, not an error
        mean = np.nanmean(curves, axis=0) if curves.size else np.full(POINTS, np.nan)
        lo = np.nanmin(curves, axis=0) if curves.size else np.full(POINTS, np.nan)
        hi = np.nanmax(curves, axis=0) if curves.size else np.full(POINTS, np.nan)
    return {"mean": [float(v) for v in mean], "min": [float(v) for v in lo], "max": [float(v) for v in hi]}


def allocation_data(scenario: Any, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant (in run order): its seeds' curves summarised, and the published ones it reproduces
    (with the comparison: largest gap, share inside the published band)."""
    ref = scenario.report.gpu_reference
    published: dict[str, dict[str, np.ndarray]] = {}
    if ref is not None:
        published = read_published(ref.file)
    out: list[dict[str, Any]] = []
    for variant in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == variant]
        curves = np.array([[math.nan if v is None else v for v in r["gpu"]["allocation_curve"]] for r in mine],
                          dtype=np.float64)
        item: dict[str, Any] = {"variant": variant, "seeds": [r["seed"] for r in mine], "ours": _stats(curves),
                                "published": None, "policy": None, "comparison": None}
        if ref is not None and variant in ref.policies:
            workload = ref.workload or mine[0]["workload"]
            pol = ref.policies[variant]
            pub = published.get(workload, {}).get(pol)
            if pub is not None:
                item["published"] = _stats(pub)
                item["policy"] = f"{workload} {pol}"
                item["comparison"] = compare_curves(curves, pub)
        out.append(item)
    return out


def _fraction(values: list[float], at: range) -> np.ndarray:
    return np.array([values[k] / 100 for k in at], dtype=np.float64)


def _band(fig: go.Figure, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, name: str, colour: str) -> None:
    """A filled min–max band: the upper edge, then the lower edge filled up to it."""
    fig.add_trace(go.Scatter(x=x, y=hi, mode="lines", line={"width": 0}, hoverinfo="skip", showlegend=False,
                             legendgroup=name))
    fig.add_trace(go.Scatter(x=x, y=lo, mode="lines", line={"width": 0}, fill="tonexty", fillcolor=colour, name=name,
                             legendgroup=name, hovertemplate=f"{name}<br>%{{x}}%<extra></extra>"))


def _layout(fig: go.Figure, title: str, height: int) -> None:
    house_style(fig, title=title, x_title="arrived GPU demand, % of the cluster's GPUs",
                y_title="allocated GPUs, share of the cluster", height=height)
    fig.update_xaxes(tickformat=ARRIVED.tick, ticksuffix=ARRIVED.suffix)
    fig.update_yaxes(tickformat=PERCENT.tick)


def allocation_charts(data: list[dict[str, Any]]) -> list[Chart]:
    """One chart with every variant's mean (and the published means, dashed), then one per variant from
    ZOOM_FROM % on over the published band."""
    style = styles([d["variant"] for d in data])
    xs = range(POINTS)
    x_all = np.arange(POINTS, dtype=np.float64)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 130], y=[0, 1.3], mode="lines", name="arrived (y = x)",
                             line={"color": "#aaaaaa", "dash": "dot", "width": 1.5}, hoverinfo="skip"))
    for d in data:
        st = style[d["variant"]]
        fig.add_trace(go.Scatter(x=x_all, y=_fraction(d["ours"]["mean"], xs), mode="lines", name=d["variant"],
                                 line={"color": st.colour, "width": 2.2}, legendgroup=d["variant"],
                                 hovertemplate=f"<b>{d['variant']}</b><br>arrived %{{x}}%<br>allocated %{{y:.2%}}"
                                               "<extra></extra>"))
        if d["published"] is not None:
            fig.add_trace(go.Scatter(x=x_all, y=_fraction(d["published"]["mean"], xs), mode="lines",
                                     name=f"published {d['policy']}", legendgroup=d["variant"],
                                     line={"color": st.colour, "width": 1.5, "dash": "dash"},
                                     hovertemplate=f"<b>published {d['policy']}</b><br>arrived %{{x}}%<br>"
                                                   "allocated %{y:.2%}<extra></extra>"))
    _layout(fig, "GPU allocation, every variant (mean over seeds)", 460)
    fig.update_yaxes(range=[0, 1.05])
    charts = [Chart("gpu-allocation", "GPU allocation, every variant", fig, height=460, width=1100,
                    caption="Solid: kubesched's mean over its seeds; dashed: the published mean of the same policy; "
                            "dotted: everything that arrived placed.")]
    zoom = range(ZOOM_FROM, POINTS)
    xz = np.arange(ZOOM_FROM, POINTS, dtype=np.float64)
    for d in data:
        st = style[d["variant"]]
        f = go.Figure()
        pub = d["published"]
        if pub is not None:
            _band(f, xz, _fraction(pub["min"], zoom), _fraction(pub["max"], zoom), "published seeds' min–max", BAND)
            f.add_trace(go.Scatter(x=xz, y=_fraction(pub["mean"], zoom), mode="lines", name="published mean",
                                   line={"color": "#222222", "dash": "dash", "width": 1.5},
                                   hovertemplate="published mean<br>arrived %{x}%<br>%{y:.2%}<extra></extra>"))
        ours = d["ours"]
        n = len(d["seeds"])
        if n > 1:
            r, g, b = (int(st.colour[i:i + 2], 16) for i in (1, 3, 5))
            _band(f, xz, _fraction(ours["min"], zoom), _fraction(ours["max"], zoom), "kubesched seeds' min–max",
                  f"rgba({r},{g},{b},0.25)")
        f.add_trace(go.Scatter(x=xz, y=_fraction(ours["mean"], zoom), mode="lines",
                               name=f"kubesched mean of {n} seed(s)", line={"color": st.colour, "width": 2.2},
                               hovertemplate="kubesched mean<br>arrived %{x}%<br>%{y:.2%}<extra></extra>"))
        # The published policy in the title, its workload (the trace) in the caption: titles stay short.
        title = d["variant"] + (f" vs published {d['policy'].split()[-1]}" if d["policy"] else "")
        _layout(f, title, 360)
        c: CurveComparison | None = d["comparison"]
        caption = ""
        if c is not None:
            caption = (f"Published: {d['policy']}. Largest gap to the published mean: {c.max_gap:.2f} percentage "
                       f"points (at {c.max_gap_at} % "
                       f"arrived); {100 * c.inside_band:.0f} % of the points inside the published band.")
        charts.append(Chart(f"gpu-allocation-{d['variant']}", title, f, caption=caption))
    return charts


def allocation_section(page: Page, scenario: Any, runs: list[dict[str, Any]]) -> None:
    """The heading, the charts and the table of the GPU allocation measure (report.gpuAllocation)."""
    data = allocation_data(scenario, runs)
    page.heading("GPU allocation against arrived GPU demand", anchor="gpu-allocation-section")
    page.paragraph("Allocated GPUs (share of the cluster's) when the GPU demand that has arrived is x % of the "
                   "cluster's GPUs, as the FGD paper measures it. First every variant's mean over its seeds beside "
                   f"the published means; then each variant from {ZOOM_FROM} % on over the published seeds' "
                   "min–max band.", cls="note")
    charts = allocation_charts(data)
    page.chart(charts[0])
    page.grid(charts[1:])

    def cell(v: float | None) -> str:
        return "-" if v is None or math.isnan(v) else f"{v:.2f}%"

    rows = []
    for d in data:
        c = d["comparison"]
        pub = d["published"]
        rows.append([d["variant"], str(len(d["seeds"])), cell(d["ours"]["mean"][100]), cell(d["ours"]["mean"][130]),
                     cell(pub["mean"][100] if pub else None), cell(pub["mean"][130] if pub else None),
                     f"{c.max_gap:.2f}" if c is not None else "-",
                     f"{100 * c.inside_band:.0f}%" if c is not None else "-"])
    page.table(["variant", "seeds", "allocated at 100 %", "at 130 %", "published at 100 %", "published at 130 %",
                "largest gap (points)", "inside the band"], rows, table_id="gpu-allocation")

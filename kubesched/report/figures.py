"""Building blocks for every kubesched report: Plotly figures in one house style.

A report is a list of `Chart`s (a Plotly figure, or a sentence when there is nothing to draw) laid out
by `kubesched.report.html.Page` into one self-contained HTML file, or saved as PNG/SVG by
`export_charts` for papers. The simulation report (`kubesched.report.simulation`) is built from these
helpers; the tune/sweep reports and the capture overview use the same ones, so every kubesched chart
looks and behaves alike:

- every series has a `Style` (colour, dash, marker) from `styles(names)`, so lines that coincide stay
  distinguishable, and `identical_groups` names them in the chart's caption;
- axes always carry a title with the unit (`TimeScale` picks minutes, hours or days for simulated time;
  `Format` says how values print: percent, count, seconds…);
- legends sit outside the plot area; hover shows the series, the time (or node) and the value; a legend
  click hides a series; every chart zooms;
- a chart whose every value is zero or missing becomes a sentence (`Chart.note`), never an empty frame.

    lines = [Line("baseline", t, spread_a), Line("tuned", t, spread_b)]
    chart = line_chart("spread", "CPU spread across nodes", lines, time=TimeScale.for_span(t[-1]),
                       y_title="std of node CPU utilisation", y_format=PERCENT)
    page.chart(chart)                       # kubesched.report.html.Page
    export_charts([chart], out / "figures", ("png", "svg"))   # needs the `export` extra
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from kubesched.errors import RuntimeFailure

# Tableau 10: distinct in colour and in lightness, so most pairs survive greyscale printing.
PALETTE = ["#4E79A7", "#F28E2B", "#E15759", "#59A14F", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7", "#9C755F",
           "#BAB0AC"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "triangle-down", "star", "cross", "pentagon",
           "hexagon"]
# Utilisation heat: cool blues below the threshold, orange at it, dark red far above (value / threshold).
HEAT_STOPS = [(0.0, "#313695"), (0.4, "#4575b4"), (0.7, "#abd9e9"), (0.85, "#ffffbf"), (1.0, "#fdae61"),
              (1.15, "#d73027"), (1.5, "#a50026")]
FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"
HEIGHT = 360
MAX_HEATMAP_COLUMNS = 300
MAX_HEATMAP_ROWS = 60


# ---------------------------------------------------------------- styles, units, formats


@dataclass(frozen=True, slots=True)
class Style:
    """How one series is drawn, the same in every chart of a report."""

    colour: str
    dash: str
    symbol: str


def styles(names: Sequence[str]) -> dict[str, Style]:
    """A distinct colour, dash pattern and marker per name, in order (stable across a report's charts)."""
    return {n: Style(PALETTE[i % len(PALETTE)], DASHES[i % len(DASHES)], SYMBOLS[i % len(SYMBOLS)])
            for i, n in enumerate(names)}


@dataclass(frozen=True, slots=True)
class TimeScale:
    """Simulated time on an axis: seconds shown in the unit that suits the span."""

    unit: str
    seconds: float

    @classmethod
    def for_span(cls, seconds: float) -> TimeScale:
        if seconds <= 3 * 3600:
            return cls("min", 60.0)
        if seconds <= 4 * 86400:
            return cls("h", 3600.0)
        return cls("d", 86400.0)

    @property
    def title(self) -> str:
        return f"simulated time ({self.unit})"

    def convert(self, t: Sequence[float] | np.ndarray) -> np.ndarray:
        return np.asarray(t, dtype=np.float64) / self.seconds


@dataclass(frozen=True, slots=True)
class Format:
    """How values of one kind print on an axis (d3 format) and in hover labels."""

    tick: str
    hover: str
    suffix: str = ""


PERCENT = Format(".2~%", ".1%")
COUNT = Format(",d", ",.0f")
NUMBER = Format(",.3~g", ",.4~g")
SECONDS = Format(",.3~g", ",.3~g", " s")
MINUTES = Format(",.0f", ",.0f", " min")


# ---------------------------------------------------------------- data helpers


@dataclass(frozen=True, slots=True)
class Line:
    """One series of a line chart: x in the chart's unit (or seconds with `line_chart(time=...)`)."""

    name: str
    x: Sequence[float] | np.ndarray
    y: Sequence[float] | np.ndarray


def is_empty(values: Iterable[Sequence[float] | np.ndarray]) -> bool:
    """True when every value is zero or missing: nothing worth a chart."""
    for v in values:
        a = np.asarray(v, dtype=np.float64)
        if a.size and np.any(np.nan_to_num(a, nan=0.0) != 0):
            return False
    return True


def identical_groups(lines: Sequence[Line]) -> list[list[str]]:
    """Names of series whose values coincide (groups of two or more), in order."""
    groups: list[list[str]] = []
    keys: list[tuple[bytes, bytes]] = []
    for ln in lines:
        x = np.asarray(ln.x, dtype=np.float64)
        y = np.round(np.asarray(ln.y, dtype=np.float64), 9)
        key = (x.tobytes(), np.nan_to_num(y, nan=-1e300).tobytes())
        for i, k in enumerate(keys):
            if k == key:
                groups[i].append(ln.name)
                break
        else:
            keys.append(key)
            groups.append([ln.name])
    return [g for g in groups if len(g) > 1]


def rolling_mean(y: Sequence[float] | np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over `window` points (fewer at the start), NaN-aware."""
    a = np.asarray(y, dtype=np.float64)
    if window <= 1 or a.size == 0:
        return a.copy()
    ok = ~np.isnan(a)
    csum = np.concatenate([[0.0], np.cumsum(np.where(ok, a, 0.0))])
    ccount = np.concatenate([[0], np.cumsum(ok)])
    idx = np.arange(1, a.size + 1)
    lo = np.maximum(0, idx - window)
    n = ccount[idx] - ccount[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (csum[idx] - csum[lo]) / np.maximum(n, 1), np.nan)


def block_mean_columns(m: np.ndarray, max_cols: int) -> tuple[np.ndarray, int]:
    """Average runs of columns so that at most `max_cols` remain (NaN-aware); returns (matrix, run length)."""
    rows, cols = m.shape
    f = max(1, math.ceil(cols / max(1, max_cols)))
    if f == 1:
        return m, 1
    pad = (-cols) % f
    if pad:
        m = np.pad(m, ((0, 0), (0, pad)), constant_values=np.nan)
    m = m.reshape(rows, -1, f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)  # all-NaN blocks stay NaN
        return np.nanmean(m, axis=2), f


def pick_rows(m: np.ndarray, names: Sequence[str], max_rows: int,
              unit: str = "nodes") -> tuple[np.ndarray, list[str], str]:
    """At most `max_rows` rows of a (rows × time) matrix, with a sentence saying which when not all.

    Rows that are zero or missing throughout are left out first (said in the sentence). With more rows
    left than `max_rows`, they are ordered by their mean and `max_rows` are taken evenly across that
    order, so the picture keeps the spread from the emptiest to the fullest (a top-N would show one end).
    """
    names = list(names)
    if len(names) <= max_rows:
        return m, names, ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        means = np.nan_to_num(np.nanmean(m, axis=1), nan=0.0)
        peaks = np.nan_to_num(np.nanmax(np.abs(m), axis=1), nan=0.0) if m.size else np.zeros(len(names))
    live = np.flatnonzero(peaks > 0)
    unused = len(names) - len(live)
    if len(live) == 0:
        live = np.arange(len(names))
        unused = 0
    parts = []
    if unused:
        parts.append(f"{unused:,} of {len(names):,} {unit} stay at zero throughout and are left out")
    if len(live) <= max_rows:
        picks = live
    else:
        order = live[np.argsort(-means[live], kind="stable")]
        picks = order[np.unique(np.linspace(0, len(order) - 1, max_rows).round().astype(int))]
        parts.append(f"{len(picks)} of the {len(live):,} others are shown, taken evenly from the fullest to the "
                     "emptiest by their mean over the run")
    note = "; ".join(parts)
    return m[picks], [names[i] for i in picks], (note[0].upper() + note[1:]) if note else ""


# ---------------------------------------------------------------- charts


@dataclass(slots=True)
class Chart:
    """A figure with a stable id (its HTML element id and its file name when exported), or, when there is
    nothing to draw, a sentence saying so."""

    id: str
    title: str
    figure: go.Figure | None
    caption: str = ""
    note: str = ""  # shown instead of the figure when `figure` is None
    width: int = 640  # export size in CSS pixels
    height: int = HEIGHT
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def empty(cls, chart_id: str, title: str, note: str) -> Chart:
        return cls(chart_id, title, None, note=note)

    @property
    def is_empty(self) -> bool:
        return self.figure is None


def house_style(fig: go.Figure, *, title: str, x_title: str = "", y_title: str = "", height: int = HEIGHT,
                legend: bool = True, legend_title: str = "") -> go.Figure:
    """The layout every kubesched chart shares: white background, the title left, axis titles, the legend
    outside the plot area on the right, hover labels, no Plotly logo. Usable on any Plotly figure."""
    fig.update_layout(
        title={"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 15}},
        template="plotly_white",
        font={"family": FONT, "size": 12, "color": "#222"},
        height=height,
        margin={"l": 70, "r": 20, "t": 56, "b": 56},
        showlegend=legend,
        legend={"x": 1.02, "xanchor": "left", "y": 1.0, "yanchor": "top", "title": {"text": legend_title},
                "bgcolor": "rgba(255,255,255,0)", "itemclick": "toggle", "itemdoubleclick": "toggleothers"},
        hoverlabel={"namelength": -1},
    )
    if x_title:
        fig.update_xaxes(title_text=x_title)
    if y_title:
        fig.update_yaxes(title_text=y_title)
    fig.update_xaxes(showline=True, linecolor="#bbb", mirror=False, zeroline=False)
    fig.update_yaxes(showline=True, linecolor="#bbb", zeroline=False)
    return fig


def line_chart(chart_id: str, title: str, lines: Sequence[Line], *, y_title: str, y_format: Format = NUMBER,
               time: TimeScale | None = None, x_title: str = "", x_format: Format | None = None,
               style: Mapping[str, Style] | None = None, step: bool = False, hline: float | None = None,
               hline_label: str = "", y_range: tuple[float | None, float | None] | None = (0, None),
               empty: str | None = None, caption: str = "", markers: bool = True,
               extra: Sequence[go.Scatter] = ()) -> Chart:
    """Lines of a quantity over time (with `time`, x in seconds) or over any x (`x_title`, `x_format`).

    `empty`: the sentence shown instead of the chart when every value is zero or missing (None: always
    draw). Coinciding series are named in the caption; each series has its own dash and markers.
    """
    if empty is not None and is_empty(ln.y for ln in lines):
        return Chart.empty(chart_id, title, empty)
    style = style or styles([ln.name for ln in lines])
    fig = go.Figure()
    xf = x_format or NUMBER
    if time is not None:
        x_hover = f"%{{x:.2f}} {time.unit}"
        x_title = x_title or time.title
    else:
        x_hover = f"%{{x:{xf.hover}}}{xf.suffix}"
    y_hover = f"%{{y:{y_format.hover}}}{y_format.suffix}"
    for i, ln in enumerate(lines):
        st = style.get(ln.name) or Style(PALETTE[i % len(PALETTE)], DASHES[i % len(DASHES)], SYMBOLS[i % len(SYMBOLS)])
        x = time.convert(ln.x) if time is not None else np.asarray(ln.x, dtype=np.float64)
        fig.add_trace(go.Scatter(
            x=x, y=np.asarray(ln.y, dtype=np.float64), name=ln.name,
            mode="lines+markers" if markers else "lines",
            line={"color": st.colour, "dash": st.dash, "width": 2, "shape": "hv" if step else "linear"},
            # Markers at a few evenly spaced points, a different count per series so that coinciding
            # lines show each other's symbols.
            marker={"symbol": st.symbol, "size": 7, "color": st.colour, "maxdisplayed": 9 + 2 * i},
            hovertemplate=f"<b>{_esc(ln.name)}</b><br>{x_hover}<br>{y_hover}<extra></extra>",
        ))
    for tr in extra:
        fig.add_trace(tr)
    if hline is not None:
        fig.add_hline(y=hline, line={"color": "#d62728", "dash": "dot", "width": 1.5},
                      annotation_text=hline_label, annotation_position="top left",
                      annotation_font={"color": "#d62728", "size": 11})
    house_style(fig, title=title, x_title=x_title, y_title=y_title)
    fig.update_yaxes(tickformat=y_format.tick, ticksuffix=y_format.suffix, rangemode="tozero")
    if x_format is not None and time is None:
        fig.update_xaxes(tickformat=x_format.tick, ticksuffix=x_format.suffix)
    if y_range is not None and y_range != (0, None):
        fig.update_yaxes(range=list(y_range))
    same = identical_groups(lines)
    notes = [caption] if caption else []
    if same:
        notes.append("Identical: " + "; ".join(" = ".join(g) for g in same) + " (drawn on top of each other: tell "
                     "them apart by dash and marker, or click a legend entry to hide one).")
    return Chart(chart_id, title, fig, caption=" ".join(notes), meta={"identical": same})


def bar_chart(chart_id: str, title: str, categories: Sequence[str], stacks: Mapping[str, Sequence[float]], *,
              value_title: str, value_format: Format = COUNT, colours: Mapping[str, str] | None = None,
              category_colours: Mapping[str, str] | None = None, empty: str | None = None, caption: str = "",
              category_title: str = "variant") -> Chart:
    """Horizontal bars, one per category (e.g. a variant), stacked by the keys of `stacks` (e.g. the
    evicting component). With a single stack, `category_colours` colours each bar by its category."""
    if empty is not None and is_empty(stacks.values()):
        return Chart.empty(chart_id, title, empty)
    fig = go.Figure()
    cats = list(categories)
    colours = colours or {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(stacks)}
    single = len(stacks) == 1
    for key, values in stacks.items():
        vals = np.asarray(values, dtype=np.float64)
        marker: dict[str, Any] = {"color": colours.get(key, PALETTE[0])}
        if single and category_colours:
            marker = {"color": [category_colours.get(c, PALETTE[0]) for c in cats]}
        fig.add_trace(go.Bar(
            y=cats, x=vals, name=key, orientation="h", marker=marker,
            text=[_fmt_value(v, value_format) for v in vals], textposition="auto", cliponaxis=False,
            hovertemplate=(f"<b>%{{y}}</b><br>{_esc(key)}: %{{x:{value_format.hover}}}{value_format.suffix}"
                           "<extra></extra>"),
        ))
    house_style(fig, title=title, x_title=value_title, y_title=category_title,
                legend=not (single and category_colours),
                height=max(220, 90 + 34 * len(cats)))
    fig.update_layout(barmode="stack", bargap=0.3, legend={"traceorder": "normal"})
    fig.update_xaxes(tickformat=value_format.tick, ticksuffix=value_format.suffix, rangemode="tozero")
    # The first category on top, as in the comparison table.
    fig.update_yaxes(autorange="reversed", showline=False)
    return Chart(chart_id, title, fig, caption=caption, height=int(fig.layout.height))


def heatmap_chart(chart_id: str, title: str, panels: Sequence[tuple[str, np.ndarray]], t: Sequence[float] | np.ndarray,
                  names: Sequence[str], *, time: TimeScale, z_title: str, z_format: Format = PERCENT,
                  threshold: float | None = None, zmax: float | None = None, series_name: str = "",
                  caption: str = "") -> Chart:
    """Side-by-side heatmaps of nodes (rows, named) × time (columns) sharing one colour scale.

    `panels`: (subtitle, matrix of shape time × nodes) pairs. With `threshold` the colour scale is centred
    on it (orange at the threshold, red above); otherwise a sequential scale from 0 to `zmax`. Large
    matrices are averaged over runs of time steps and limited to `MAX_HEATMAP_ROWS` nodes (said in the
    caption). Hover shows the series name, the node, the time and the value.
    """
    mats = [np.asarray(m, dtype=np.float64).T for _, m in panels]  # nodes × time
    if not mats or mats[0].size == 0:
        return Chart.empty(chart_id, title, "Nothing was recorded.")
    names = list(names)[: mats[0].shape[0]]
    stacked = np.concatenate(mats, axis=1)
    _, kept_names, row_note = pick_rows(stacked, names, MAX_HEATMAP_ROWS)
    keep = [names.index(n) for n in kept_names]
    x = time.convert(t)
    cols = mats[0].shape[1]
    notes = []
    if caption:
        notes.append(caption)
    if row_note:
        notes.append(row_note + ".")
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[s for s, _ in panels])
    if threshold is not None:
        top = zmax if zmax is not None else 1.5 * threshold
        scale: list[list[Any]] = [[min(1.0, f * threshold / top), c] for f, c in HEAT_STOPS if f * threshold <= top]
        if float(scale[-1][0]) < 1.0:
            scale.append([1.0, HEAT_STOPS[-1][1]])
        cmin, cmax = 0.0, top
    else:
        scale = [[0.0, "#f7fbff"], [0.5, "#6baed6"], [1.0, "#08306b"]]
        cmin, cmax = 0.0, zmax if zmax is not None else float(np.nanmax(stacked)) if np.isfinite(stacked).any() else 1.0
    averaged = 1
    for i, m in enumerate(mats):
        small, averaged = block_mean_columns(m[keep], MAX_HEATMAP_COLUMNS)
        xs = x[:cols:averaged][: small.shape[1]]
        fig.add_trace(go.Heatmap(
            z=small.astype(np.float32), x=xs, y=kept_names, coloraxis="coloraxis", name=panels[i][0],
            hovertemplate=(f"<b>{_esc(series_name)}</b> · {_esc(panels[i][0])}<br>node %{{y}}<br>"
                           f"%{{x:.2f}} {time.unit}<br>{_esc(z_title)}: %{{z:{z_format.hover}}}<extra></extra>"),
        ), row=1, col=i + 1)
    if averaged > 1:
        notes.append(f"Each column averages {averaged} records.")
    house_style(fig, title=title, height=max(HEIGHT, 120 + 14 * len(kept_names)), legend=False)
    fig.update_layout(coloraxis={"colorscale": scale, "cmin": cmin, "cmax": cmax,
                                 "colorbar": {"title": {"text": z_title, "side": "right"},
                                              "tickformat": z_format.tick, "thickness": 14}})
    fig.update_xaxes(title_text=time.title)
    fig.update_yaxes(title_text="node", col=1)
    fig.update_yaxes(autorange="reversed", type="category", showline=False)
    return Chart(chart_id, title, fig, caption=" ".join(notes), width=max(640, 420 * len(panels)),
                 height=int(fig.layout.height))


def stacked_area_chart(chart_id: str, title: str, panels: Sequence[tuple[str, Sequence[Line]]], *, time: TimeScale,
                       y_title: str, colours: Mapping[str, str], empty: str | None = None,
                       caption: str = "", hidden: Sequence[str] = ()) -> Chart:
    """Small multiples: one panel per series name (e.g. a variant), each a stack of areas over time (e.g.
    how many nodes are empty, partly or fully allocated). Legend entries are shared across panels; the
    layers named in `hidden` start hidden (a legend click shows them)."""
    if empty is not None and is_empty(ln.y for _, lines in panels for ln in lines):
        return Chart.empty(chart_id, title, empty)
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=[p for p, _ in panels])
    for i, (panel, lines) in enumerate(panels):
        for ln in lines:
            fig.add_trace(go.Scatter(
                x=time.convert(ln.x), y=np.asarray(ln.y, dtype=np.float64), name=ln.name, legendgroup=ln.name,
                showlegend=i == 0, stackgroup="s", mode="lines", line={"width": 0.5, "color": colours.get(ln.name)},
                visible="legendonly" if ln.name in hidden else True,
                fillcolor=colours.get(ln.name),
                hovertemplate=(f"<b>{_esc(panel)}</b><br>%{{x:.2f}} {time.unit}<br>{_esc(ln.name)}: "
                               "%{y:,.0f}<extra></extra>"),
            ), row=1, col=i + 1)
    house_style(fig, title=title)
    fig.update_xaxes(title_text=time.title)
    fig.update_yaxes(title_text=y_title, col=1)
    fig.update_yaxes(rangemode="tozero")
    return Chart(chart_id, title, fig, caption=caption, width=max(640, 380 * len(panels)))


# ---------------------------------------------------------------- export


def export_charts(charts: Iterable[Chart], folder: str | Path, formats: Sequence[str] = ("png", "svg"),
                  scale: float = 2.0) -> list[Path]:
    """Save each drawn chart as `<folder>/<chart id>.<format>` (png, svg, pdf) for papers; returns the files.

    Uses Kaleido (`pip install 'kubesched[export]'`), which drives a Chrome or Chromium it finds on the
    machine (set BROWSER_PATH to choose one). Raises RuntimeFailure when either is missing.
    """
    for f in formats:
        if f not in ("png", "svg", "pdf"):
            raise ValueError(f"unknown figure format {f!r}")
    try:
        import kaleido  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        raise RuntimeFailure("saving figures as PNG/SVG needs Kaleido: pip install 'kubesched[export]'") from None
    if "BROWSER_PATH" not in os.environ:
        found = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
        if found:
            os.environ["BROWSER_PATH"] = found
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(chart, out / f"{chart.id}.{f}", f) for chart in charts if chart.figure is not None for f in formats]
    if not jobs:
        return []
    try:
        # One browser session for every file (a session per file costs seconds each).
        pio.write_images([c.figure for c, _, _ in jobs], [str(p) for _, p, _ in jobs], format=[f for _, _, f in jobs],
                         width=[c.width for c, _, _ in jobs], height=[c.height for c, _, _ in jobs], scale=scale)
    except Exception as e:  # Kaleido's errors for a missing or failing browser have no common base
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise RuntimeFailure(f"cannot save figures in {out}: {type(e).__name__}: {first} (Kaleido needs Chrome or "
                             "Chromium; set BROWSER_PATH)") from None
    return [p for _, p, _ in jobs]


# ---------------------------------------------------------------- small helpers


def _esc(text: str) -> str:
    """Text for a hover template: HTML-escaped, and Plotly's %{...} placeholders neutralised."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("%{", "%&#123;"))


def _fmt_value(v: float, f: Format) -> str:
    if not math.isfinite(v):
        return ""
    if f is PERCENT:
        return f"{100 * v:.1f}%"
    if f in (COUNT, MINUTES):
        return f"{v:,.0f}"
    return f"{v:,.3g}"

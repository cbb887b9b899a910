"""One self-contained HTML report of a simulation: inline SVG plots, heatmaps as embedded PNG, no scripts
from anywhere, no fonts to fetch — it opens from disk.

Plots: CPU spread over time, hot nodes, pending pods, evictions, memory spread, allocation; per variant,
heatmaps of actual and requested CPU utilisation (nodes × time); the summary table with the best value
of each row marked; the eviction loops found, with the chain of events that formed each.
"""

from __future__ import annotations

import base64
import html
import math
import struct
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from kubesched.report.gangs import gang_section

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22"]
HEAT_MAX_COLS = 480
HEAT_MAX_ROWS = 360

# (value as a fraction of the hot threshold, colour)
HEAT_STOPS = [(0.0, (49, 54, 149)), (0.4, (69, 117, 180)), (0.7, (171, 217, 233)), (0.85, (255, 255, 191)),
              (1.0, (253, 174, 97)), (1.15, (215, 48, 39)), (1.5, (165, 0, 38))]


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


# ---------------------------------------------------------------- PNG


def png_bytes(rgb: np.ndarray) -> bytes:
    """A truecolour PNG of an (h, w, 3) uint8 array."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def heat_colours(values: np.ndarray, threshold: float) -> np.ndarray:
    """Colours for utilisation values (NaN: light grey), scaled so the hot threshold is orange."""
    x = values / max(threshold, 1e-9)
    xs = np.array([s[0] for s in HEAT_STOPS])
    out = np.zeros(values.shape + (3,), dtype=np.uint8)
    for c in range(3):
        cs = np.array([s[1][c] for s in HEAT_STOPS], dtype=np.float64)
        out[..., c] = np.interp(np.nan_to_num(x, nan=0.0), xs, cs).astype(np.uint8)
    out[np.isnan(values)] = (235, 235, 235)
    return out


def _block_mean(m: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Average blocks so the matrix has at most rows × cols cells (NaN-aware)."""
    r, c = m.shape
    fr = max(1, math.ceil(r / rows))
    fc = max(1, math.ceil(c / cols))
    pr, pc = (-r) % fr, (-c) % fc
    if pr or pc:
        m = np.pad(m, ((0, pr), (0, pc)), constant_values=np.nan)
    m = m.reshape(m.shape[0] // fr, fr, m.shape[1] // fc, fc)
    with np.errstate(invalid="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            return np.nanmean(m, axis=(1, 3))


# ---------------------------------------------------------------- axes


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo] if math.isfinite(lo) else [0.0]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=raw)
    start = math.ceil(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 10))
        v += step
    return ticks


def fmt_time(seconds: float) -> str:
    if seconds >= 86400 * 2:
        return f"{seconds / 86400:g}d"
    if seconds >= 3600:
        h = seconds / 3600
        return f"{h:.1f}h".replace(".0h", "h")
    if seconds >= 60:
        return f"{seconds / 60:.0f}m"
    return f"{seconds:.0f}s"


def _time_ticks(t0: float, t1: float) -> list[float]:
    span = t1 - t0
    for step in (60, 300, 600, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 7 * 86400, 30 * 86400):
        if span / step <= 8:
            break
    first = math.ceil(t0 / step) * step
    return [first + i * step for i in range(int((t1 - first) // step) + 1)]


def fmt_value(v: float, kind: str, step: float = 1.0) -> str:
    if kind == "pct":
        return f"{100 * v:.1f}%" if step < 0.01 else f"{100 * v:.0f}%"
    if abs(v) >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:g}"


Line = tuple[str, Sequence[float], Sequence[float], str]


def line_chart(plot_id: str, title: str, lines: list[Line], y_kind: str = "num", x_kind: str = "time",
               y_min: float | None = 0.0, y_max: float | None = None, width: int = 560, height: int = 260,
               x_label: str = "", y_label: str = "", dashed: Sequence[int] = (), hline: float | None = None,
               step: bool = False) -> str:
    """An SVG line chart (class `plot`, data-plot = plot_id) with a legend."""
    ml, mr, mt, mb = 56, 12, 28, 40
    pw, ph = width - ml - mr, height - mt - mb
    xs_all = [float(x) for _, xs, _, _ in lines for x in xs]
    ys_all = [float(y) for _, _, ys, _ in lines for y in ys if y is not None and math.isfinite(float(y))]
    if hline is not None:
        ys_all.append(hline)
    x0, x1 = (min(xs_all), max(xs_all)) if xs_all else (0.0, 1.0)
    if x1 <= x0:
        x1 = x0 + 1
    lo = y_min if y_min is not None else (min(ys_all) if ys_all else 0.0)
    hi = y_max if y_max is not None else (max(ys_all) if ys_all else 1.0)
    if hi <= lo:
        hi = lo + (1.0 if y_kind != "pct" else 0.1)
    hi += (hi - lo) * 0.05

    def sx(x: float) -> float:
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return mt + ph - (y - lo) / (hi - lo) * ph

    parts = [f'<svg class="plot" data-plot="{esc(plot_id)}" viewBox="0 0 {width} {height}" width="{width}" '
             f'height="{height}" role="img" aria-label="{esc(title)}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{ml}" y="16" class="title">{esc(title)}</text>',
             f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" class="frame"/>']
    yticks = _nice_ticks(lo, hi)
    ystep = yticks[1] - yticks[0] if len(yticks) > 1 else 1.0
    for v in yticks:
        y = sy(v)
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{ml - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
                     f'{esc(fmt_value(v, y_kind, ystep))}</text>')
    xticks = _time_ticks(x0, x1) if x_kind == "time" else _nice_ticks(x0, x1)
    for v in xticks:
        x = sx(v)
        label = fmt_time(v) if x_kind == "time" else fmt_value(v, x_kind)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mt}" y2="{mt + ph}" class="grid"/>'
                     f'<text x="{x:.1f}" y="{mt + ph + 14}" class="tick" text-anchor="middle">{esc(label)}</text>')
    if x_label:
        parts.append(f'<text x="{ml + pw / 2:.0f}" y="{height - 6}" class="axis" text-anchor="middle">'
                     f'{esc(x_label)}</text>')
    if y_label:
        parts.append(f'<text x="12" y="{mt + ph / 2:.0f}" class="axis" text-anchor="middle" '
                     f'transform="rotate(-90 12 {mt + ph / 2:.0f})">{esc(y_label)}</text>')
    if hline is not None:
        parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{sy(hline):.1f}" y2="{sy(hline):.1f}" class="hline"/>')
    for i, (label, xs, ys, colour) in enumerate(lines):
        pts: list[tuple[float, float] | None] = []
        prev_y: float | None = None
        for x, y in zip(xs, ys, strict=False):
            if y is None or not math.isfinite(float(y)):
                prev_y = None
                if pts:
                    pts.append(None)
                continue
            X, Y = sx(float(x)), sy(float(y))
            if step and prev_y is not None:
                pts.append((X, prev_y))
            pts.append((X, Y))
            prev_y = Y
        segs: list[list[tuple[float, float]]] = [[]]
        for p in pts:
            if p is None:
                segs.append([])
            else:
                segs[-1].append(p)
        dash = ' stroke-dasharray="5 3"' if i in dashed else ""
        for seg in segs:
            if len(seg) == 1:
                parts.append(f'<circle cx="{seg[0][0]:.1f}" cy="{seg[0][1]:.1f}" r="2" fill="{colour}"/>')
            elif seg:
                d = " ".join(f"{x:.1f},{y:.1f}" for x, y in _thin(seg))
                parts.append(f'<polyline class="series" data-series="{esc(label)}" points="{d}" stroke="{colour}"'
                             f'{dash}/>')
    # Legend
    lx, ly = ml + 6, mt + 12
    for i, (label, _, _, colour) in enumerate(lines):
        y = ly + 13 * i
        parts.append(f'<rect x="{lx}" y="{y - 8}" width="10" height="3" fill="{colour}"/>'
                     f'<text x="{lx + 14}" y="{y - 4}" class="legend">{esc(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _thin(points: list[tuple[float, float]], limit: int = 1500) -> list[tuple[float, float]]:
    """Drop points that are closer than a pixel horizontally when a line has thousands of them."""
    if len(points) <= limit:
        return points
    out = [points[0]]
    for p in points[1:]:
        if abs(p[0] - out[-1][0]) >= 0.5 or abs(p[1] - out[-1][1]) >= 2:
            out.append(p)
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def heatmap(plot_id: str, title: str, matrix: np.ndarray, times: Sequence[float], names: Sequence[str],
            threshold: float, variant: str, width: int = 560, height: int = 300) -> str:
    """Nodes (rows) × time (columns) as an embedded PNG inside an SVG with axes and a colour scale."""
    ml, mr, mt, mb = 56, 70, 28, 34
    pw, ph = width - ml - mr, height - mt - mb
    m = np.asarray(matrix, dtype=np.float64).T if matrix.size else np.zeros((1, 1))
    small = _block_mean(m, HEAT_MAX_ROWS, HEAT_MAX_COLS)
    rgb = heat_colours(small, threshold)
    data = base64.b64encode(png_bytes(rgb)).decode()
    t0 = float(times[0]) if len(times) else 0.0
    t1 = float(times[-1]) if len(times) else 1.0
    if t1 <= t0:
        t1 = t0 + 1
    parts = [f'<svg class="plot heatmap" data-plot="{esc(plot_id)}" data-variant="{esc(variant)}" '
             f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{esc(title)}" '
             f'xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{ml}" y="16" class="title">{esc(title)}</text>',
             f'<image x="{ml}" y="{mt}" width="{pw}" height="{ph}" preserveAspectRatio="none" '
             f'style="image-rendering:pixelated" href="data:image/png;base64,{data}"/>',
             f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" class="frame"/>']
    for v in _time_ticks(t0, t1):
        x = ml + (v - t0) / (t1 - t0) * pw
        parts.append(f'<text x="{x:.1f}" y="{mt + ph + 14}" class="tick" text-anchor="middle">{esc(fmt_time(v))}</text>')
    n = len(names)
    parts.append(f'<text x="{ml - 4}" y="{mt + 10}" class="tick" text-anchor="end">{esc(_short(names[0]) if n else "")}'
                 f'</text><text x="{ml - 4}" y="{mt + ph}" class="tick" text-anchor="end">'
                 f'{esc(_short(names[-1]) if n else "")}</text>'
                 f'<text x="12" y="{mt + ph / 2:.0f}" class="axis" text-anchor="middle" '
                 f'transform="rotate(-90 12 {mt + ph / 2:.0f})">{n} nodes</text>')
    # Colour scale
    sx0 = ml + pw + 14
    steps = 40
    top = 1.5 * threshold
    for i in range(steps):
        v0 = top * (1 - i / steps)
        c = heat_colours(np.array([v0]), threshold)[0]
        parts.append(f'<rect x="{sx0}" y="{mt + i * ph / steps:.1f}" width="12" height="{ph / steps + 0.5:.1f}" '
                     f'fill="rgb({c[0]},{c[1]},{c[2]})"/>')
    for v in (0.0, threshold / 2, threshold, top):
        y = mt + ph * (1 - v / top)
        parts.append(f'<text x="{sx0 + 16}" y="{y + 4:.1f}" class="tick">{100 * v:.0f}%</text>')
    parts.append("</svg>")
    return "".join(parts)


def _short(name: str) -> str:
    return name if len(name) <= 10 else name[:9] + "…"


# ---------------------------------------------------------------- the report


CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px;color:#222;
max-width:1200px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:14px;margin:16px 0 6px}
.sub{color:#666;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}th:first-child,td:first-child{text-align:left}
th{background:#f4f4f4}
td.best{background:#e3f4e3;font-weight:600}td.worst{background:#fbe4e4}
.grid-2{display:flex;flex-wrap:wrap;gap:12px}
svg.plot{background:#fff;border:1px solid #eee}
svg .title{font-size:13px;font-weight:600}svg .tick{font-size:10px;fill:#555}svg .axis{font-size:11px;fill:#333}
svg .legend{font-size:11px;fill:#222}svg .frame{fill:none;stroke:#bbb}svg .grid{stroke:#eee}
svg .series{fill:none;stroke-width:1.6}svg .hline{stroke:#d62728;stroke-dasharray:4 3}
.verdict{margin:4px 0;font-size:13px}.loop{background:#fff7e6;border-left:3px solid #ff7f0e;padding:6px 10px;
margin:6px 0;font-size:13px}
.chain td{font-size:12px}.note{font-size:12px;color:#666}
"""

# Rows where lower is better (the others are neutral); the best variant's cell is marked.
LOWER_BETTER = {"cpuSpreadStdMean", "cpuRangeMean", "cpuSpreadStdFinal", "cpuMaxPeak", "hotNodeMinutes",
                "memSpreadStdMean", "pendingMax", "schedulingLatencyP95", "kubeletEvictions", "oomKills",
                "loopEpisodes", "loopWorkloads"}


def render_report(scenario: Any, variants: list[Any], results: list[dict[str, Any]]) -> str:
    from kubesched.sim.runner import TABLE_ROWS, format_cell

    names = [r["variant"] for r in results]
    colours = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    out: list[str] = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
                      f"<title>kubesched simulation: {esc(scenario.name)}</title><style>{CSS}</style></head><body>"]
    hours = scenario.duration / 3600
    out.append(f"<h1>Simulation: {esc(scenario.name)}</h1><div class=\"sub\">{hours:g} h simulated from "
               f"{esc(scenario.start.strftime('%Y-%m-%d %H:%M UTC'))}, seed {scenario.seed}, {len(results)} variant(s); "
               f"hot node: CPU above {100 * scenario.report.hot_threshold:.0f}% of allocatable</div>")
    if scenario.description:
        out.append(f"<p>{esc(scenario.description)}</p>")

    # Variants and verdicts
    out.append("<h2>Variants</h2><ul>")
    for v, r in zip(variants, results, strict=True):
        out.append(f'<li><b style="color:{colours[r["variant"]]}">{esc(r["variant"])}</b>'
                   f'{": " + esc(v.description) if v.description else ""}</li>')
    out.append("</ul>")
    out.append('<div id="verdicts">')
    base = results[0]["summary"]
    for r in results:
        out.append(f'<p class="verdict">{_verdict(r, base, names[0])}</p>')
    out.append("</div>")

    # Summary table
    out.append('<h2>Comparison</h2><table id="comparison"><tr><th>metric</th>'
               + "".join(f'<th style="color:{colours[n]}">{esc(n)}</th>' for n in names) + "</tr>")
    for key, label, kind in TABLE_ROWS:
        vals = [r["summary"].get(key) for r in results]
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))]
        best = worst = None
        if key in LOWER_BETTER and len(nums) > 1 and max(nums) != min(nums):
            best, worst = min(nums), max(nums)
        cells = []
        for v in vals:
            cls = ""
            if best is not None and isinstance(v, (int, float)):
                cls = ' class="best"' if float(v) == best else (' class="worst"' if float(v) == worst else "")
            cells.append(f"<td{cls}>{esc(format_cell(v, kind))}</td>")
        out.append(f"<tr><td>{esc(label)}</td>{''.join(cells)}</tr>")
    out.append("</table>")
    out.append(gang_section(results, colours, scenario.duration))  # empty unless the run had PodGroups

    # Time series
    out.append('<h2>Over time</h2><div class="grid-2">')
    series = [(r["variant"], r["series"]) for r in results]

    def lines(key: str) -> list[Line]:
        return [(n, s["t"], s[key], colours[n]) for n, s in series if key in s]

    out.append(line_chart("spread", "CPU spread across nodes (std of utilisation)", lines("cpu_std"), "pct"))
    out.append(line_chart("hot-nodes", f"Hot nodes (CPU > {100 * scenario.report.hot_threshold:.0f}%)",
                          lines("hot_nodes"), step=True))
    out.append(line_chart("max-util", "Hottest node's CPU utilisation", lines("cpu_max"), "pct",
                          hline=scenario.report.hot_threshold))
    out.append(line_chart("pending", "Pending pods", lines("pending"), step=True))
    ev_lines: list[Line] = []
    for n, s in series:
        total = np.zeros(len(s["t"]))
        for k, v in s.items():
            if k.startswith("evictions_"):
                total = total + np.asarray(v)
        ev_lines.append((n, s["t"], list(np.cumsum(total)), colours[n]))
    out.append(line_chart("evictions", "Evictions (cumulative, every component)", ev_lines))
    out.append(line_chart("mem-spread", "Memory spread across nodes (std of utilisation)", lines("mem_std"), "pct"))
    alloc_keys = sorted({k for _, s in series for k in s if k.startswith("allocated_") and not k.endswith("_arrived")})
    for k in alloc_keys:
        res = k[len("allocated_"):]
        out.append(line_chart(f"allocation-{res}", f"Allocated {res} (requests / allocatable, cluster)",
                              lines(k), "pct"))
    out.append("</div>")

    # Evictions by component and reason
    out.append("<h2>Evictions by component and reason</h2><table id=\"evictions\"><tr><th>variant</th>"
               "<th>component</th><th>reason</th><th>count</th></tr>")
    for r in results:
        by = r["summary"].get("evictionsByComponent") or {}
        if not by:
            out.append(f"<tr><td>{esc(r['variant'])}</td><td>-</td><td>-</td><td>0</td></tr>")
        for comp, reasons in by.items():
            for reason, count in reasons.items():
                out.append(f"<tr><td>{esc(r['variant'])}</td><td>{esc(comp)}</td><td>{esc(reason)}</td>"
                           f"<td>{count}</td></tr>")
    out.append("</table>")
    if any(r["summary"].get("oomKills") for r in results):
        out.append("<p class=\"note\">OOM kills: " + ", ".join(f"{esc(r['variant'])} {r['summary']['oomKills']}"
                                                            for r in results) + "</p>")

    # Loops
    out.append('<h2>Eviction loops</h2><div id="loops">')
    out.append(f'<p class="note">A loop: a workload\'s pod evicted and, within {fmt_time(scenario.report.loop_window)}, '
               "its replacement placed back on the same node or evicted again.</p>")
    for r in results:
        if not r["loops"]:
            out.append(f'<p class="verdict"><b>{esc(r["variant"])}</b>: no eviction loop.</p>')
            continue
        for f in r["loops"]:
            out.append(f'<div class="loop" data-variant="{esc(r["variant"])}" data-workload="{esc(f["workload"])}">'
                       f'<b>{esc(r["variant"])}</b>: <b>{esc(f["workload"])}</b> — {f["episodes"]} episode(s), '
                       f'{f["loopingEvictions"]} looping eviction(s); placed back on the same node {f["placedBack"]}×, '
                       f'evicted again {f["evictedAgain"]}×; by {esc(", ".join(f"{k} {v}" for k, v in f["components"].items()))}'
                       f'; nodes {esc(", ".join(f"{k} ({v})" for k, v in list(f["nodes"].items())[:6]))}'
                       '<table class="chain"><tr><th>time</th><th>event</th><th>pod</th><th>node</th><th>by</th>'
                       "<th>reason</th></tr>")
            for e in f["chain"]:
                out.append(f"<tr><td>{esc(fmt_time(e['t']))}</td><td>{esc(e['event'])}</td><td>{esc(e['pod'])}</td>"
                           f"<td>{esc(e['node'])}</td><td>{esc(e.get('by', ''))}</td><td>{esc(e.get('reason', ''))}"
                           "</td></tr>")
            out.append("</table></div>")
    out.append("</div>")

    # Heatmaps
    out.append("<h2>CPU utilisation per node (actual, and requested)</h2>")
    for r in results:
        t = r["series"]["t"]
        out.append(f'<h3 style="color:{colours[r["variant"]]}">{esc(r["variant"])}</h3><div class="grid-2">')
        out.append(heatmap("heatmap-cpu", "actual CPU / allocatable", r["node_cpu"], t, r["node_names"],
                           r["hot_threshold"], r["variant"]))
        out.append(heatmap("heatmap-requested", "requested CPU / allocatable", r["node_cpu_req"], t, r["node_names"],
                           r["hot_threshold"], r["variant"]))
        out.append("</div>")
    notes = [f"{r['variant']}: {n}" for r in results for n in r["notes"]]
    if notes:
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes[:50]) + "</ul>")
    out.append('<p class="note">Written by kubesched simulate. Utilisation is actual usage over allocatable; the '
               "descheduler and load-aware plugins saw the metrics pipeline's averaged, delayed view, not this truth."
               "</p></body></html>\n")
    return "".join(out)


def _verdict(r: dict[str, Any], base: dict[str, Any], base_name: str) -> str:
    s = r["summary"]
    bits = [f"<b>{esc(r['variant'])}</b>:"]
    hot = s.get("hotNodeMinutes") or 0.0
    bhot = base.get("hotNodeMinutes") or 0.0
    if r["variant"] != base_name and bhot > 0:
        change = (hot - bhot) / bhot * 100
        bits.append(f"hot-node minutes {hot:.0f} ({change:+.0f}% vs {esc(base_name)});")
    else:
        bits.append(f"hot-node minutes {hot:.0f};")
    std = s.get("cpuSpreadStdMean")
    if std is not None:
        bits.append(f"CPU spread {100 * std:.1f}%;")
    ev = s.get("evictions") or 0
    bits.append(f"{ev} eviction(s)" + (f" ({s.get('kubeletEvictions')} by kubelets)" if s.get("kubeletEvictions") else "")
                + ";")
    if s.get("loopEpisodes"):
        bits.append(f'<span style="color:#d62728">eviction loops: {s["loopEpisodes"]} episode(s) in '
                    f'{s["loopWorkloads"]} workload(s)</span>')
    else:
        bits.append("no eviction loop")
    return " ".join(bits)

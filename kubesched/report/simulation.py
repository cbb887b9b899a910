"""The simulation report: one self-contained HTML file comparing a scenario's variants.

From top to bottom: what was simulated and the findings in sentences; the summary charts that make the
comparison (hot-node minutes, evictions by component, CPU spread, eviction loops per variant); the
comparison table with the best and worst value of each row marked; the time series (CPU spread, hot nodes
smoothed, hottest node against the threshold, pending pods, evictions, memory spread, allocation of CPU
and memory); one section per extended resource (e.g. GPUs: allocation, nodes by how full they are, a
per-node heatmap); the gangs, when a run had PodGroups (`kubesched.report.gangs`); evictions by component
and reason; the eviction loops with their chains of events; per variant, heatmaps of actual and requested
CPU per node.

Built from a `kubesched.sim.runner.SimulationRun` with the shared blocks of `kubesched.report.figures`
and `kubesched.report.html`; `write_report` also saves every chart as PNG/SVG when asked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kubesched.report.comparison import format_cell
from kubesched.report.figures import (
    COUNT,
    MINUTES,
    PERCENT,
    Chart,
    Format,
    Line,
    TimeScale,
    bar_chart,
    export_charts,
    heatmap_chart,
    line_chart,
    rolling_mean,
    stacked_area_chart,
    styles,
)
from kubesched.report.gangs import gang_findings, gang_section
from kubesched.report.html import Page, esc
from kubesched.sim.runner import SimulationRun, table_rows
from kubesched.sim.units import format_duration

# Rows where lower is better (the others are neutral); the best and worst variants' cells are marked.
LOWER_BETTER = {"cpuSpreadStdMean", "cpuRangeMean", "cpuSpreadStdFinal", "cpuMaxPeak", "hotNodeMinutes",
                "memSpreadStdMean", "pendingMax", "podsWaited", "schedulingLatencyP95", "schedulingLatencyMax",
                "kubeletEvictions", "oomKills", "loopEpisodes", "loopWorkloads", "gangWaitMean", "gangWaitMax",
                "permitTimeouts", "partialGangGpuHours", "partialGangGpusAtEnd"}
COMPONENT_COLOURS = {"descheduler": "#4E79A7", "kubelet": "#E15759", "scheduler": "#F28E2B", "drain": "#76B7B2"}
# Nodes by how much of a resource is requested: (label, lower bound inclusive, upper bound exclusive, colour).
BANDS = [("idle (0%)", -1.0, 1e-9, "#d9d9d9"), ("under half", 1e-9, 0.5, "#9ecae1"),
         ("half or more", 0.5, 1.0 - 1e-9, "#3182bd"), ("full (100%)", 1.0 - 1e-9, math.inf, "#e6550d")]


def write_report(run: SimulationRun, out_dir: str | Path | None = None,
                 figure_formats: Sequence[str] = ()) -> dict[str, Any]:
    """Write `report.html` (and `figures/<chart>.<fmt>` for each format) into the run's folder; record the
    files in `run.doc["files"]` and return that mapping."""
    out = Path(out_dir) if out_dir is not None else run.out
    if out is None:
        raise ValueError("write_report needs a folder: the run was not written anywhere")
    page = build_report(run)
    path = out / "report.html"
    path.write_text(page.render())
    files = run.doc.setdefault("files", {})
    files["report"] = str(path)
    if figure_formats:
        written = export_charts(page.charts, out / "figures", figure_formats)
        files["figuresDir"] = str(out / "figures")
        files["figures"] = [str(p) for p in written]
    return files


def render_report(run: SimulationRun) -> str:
    """The report as one HTML document."""
    return build_report(run).render()


def build_report(run: SimulationRun) -> Page:
    s = run.scenario
    results = run.results
    names = [r["variant"] for r in results]
    style = styles(names)
    colours = {n: st.colour for n, st in style.items()}
    threshold = s.report.hot_threshold
    t = np.asarray(results[0]["series"]["t"], dtype=np.float64) if results else np.zeros(0)
    scale = TimeScale.for_span(float(t[-1]) if t.size else s.duration)

    page = Page(f"Simulation: {s.name}",
                f"{human_span(s.duration)} simulated from {s.start.strftime('%Y-%m-%d %H:%M UTC')} · seed {s.seed} · "
                f"{len(results)} variant(s) · a node is hot while its CPU is above {100 * threshold:.0f}% of "
                "allocatable")
    if s.description:
        page.paragraph(s.description)
    page.raw('<div class="findings" id="findings">' + "".join(f"<p>{line}</p>" for line in findings(results))
             + "</div>")

    page.heading("Variants", anchor="variants")
    page.raw("<ul>" + "".join(
        f'<li><span class="swatch" style="background:{colours[r["variant"]]}"></span><b>{esc(r["variant"])}</b>'
        f'{": " + esc(v.description) if v.description else ""}</li>'
        for v, r in zip(run.variants, results, strict=True)) + "</ul>")

    page.heading("At a glance", anchor="glance")
    glance = summary_charts(results, colours)
    for res in extended_resources(results):
        chart = resource_summary_chart(res, results)
        if chart is not None:
            glance.append(chart)
    page.grid(glance)

    page.heading("Comparison", anchor="comparison-table")
    _comparison_table(page, results, colours)

    page.heading("Over time", anchor="over-time")
    page.grid(time_charts(results, style, scale, threshold, s.report.record_interval))

    for res in extended_resources(results):
        page.heading(f"Extended resource {res}", anchor=f"resource-{_slug(res)}")
        charts = resource_charts(res, results, style, scale)
        page.grid(charts[:2])
        for c in charts[2:]:
            page.chart(c)

    gang_section(page, results, style, scale, s.duration)

    page.heading("Evictions by component and reason", anchor="evictions-table")
    _evictions_table(page, results)

    page.heading("Eviction loops", anchor="loops")
    _loops(page, results, s.report.loop_window)

    page.heading("CPU utilisation per node: actual and requested", anchor="heatmaps")
    page.paragraph("Each row is a node, each column a record; colour is the share of the node's allocatable CPU, "
                   f"orange at the hot threshold ({100 * threshold:.0f}%), red above it. The left panel is what "
                   "pods used, the right what they requested: where they differ, request-based tools are blind.",
                   cls="note")
    for r in results:
        page.chart(heatmap_chart(
            f"heatmap-cpu-{_slug(r['variant'])}", f"{r['variant']}: CPU per node",
            [("actual CPU / allocatable", r["node_cpu"]), ("requested CPU / allocatable", r["node_cpu_req"])],
            r["series"]["t"], r["node_names"], time=scale, z_title="CPU / allocatable", threshold=threshold,
            series_name=r["variant"]))

    notes = [f"{r['variant']}: {n}" for r in results for n in r["notes"]]
    if notes:
        page.heading("Notes", anchor="notes")
        page.raw("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes[:50]) + "</ul>")
    page.paragraph("Utilisation is actual usage over allocatable. The descheduler and the load-aware plugins saw the "
                   "metrics pipeline's averaged, delayed view, not this truth. Every series is also in "
                   "variants/<name>/series.csv and node_cpu.csv beside this file.", cls="note")
    return page


# ---------------------------------------------------------------- findings


def findings(results: list[dict[str, Any]]) -> list[str]:
    """Sentences (escaped HTML) that say what the comparison shows, the first variant as the baseline."""
    if not results:
        return ["No variant ran."]
    base = results[0]
    out: list[str] = []
    hot = {r["variant"]: float(r["summary"].get("hotNodeMinutes") or 0.0) for r in results}
    if len(results) > 1 and any(hot.values()):
        best = min(hot, key=lambda n: hot[n])
        b = hot[base["variant"]]
        change = f" ({(hot[best] - b) / b * 100:+.0f}% vs {esc(base['variant'])})" if b > 0 and best != base["variant"] else ""
        out.append(f"<b>Fewest hot-node minutes:</b> {esc(best)}, {hot[best]:,.0f}{change}.")
    looping = [r for r in results if r["summary"].get("loopEpisodes")]
    if looping:
        out.append("<b>Eviction loops:</b> " + "; ".join(
            f"{esc(r['variant'])} ({r['summary']['loopEpisodes']} episode(s) in {r['summary']['loopWorkloads']} "
            "workload(s))" for r in looping) + ".")
    elif any(r["summary"].get("evictions") for r in results):
        out.append("<b>No eviction loop</b> in any variant.")
    for res in extended_resources(results):
        have = [r for r in results if res in r.get("node_requested", {})]
        if len(have) < 2:
            continue
        parts = []
        for r in have:
            counts = band_counts(np.asarray(r["node_requested"][res], dtype=np.float64))
            used = float(sum(np.mean(c) for c in counts[1:])) if counts[0].size else 0.0
            full = float(np.mean(counts[-1])) if counts[-1].size else 0.0
            parts.append(f"{esc(r['variant'])} {used:,.1f} nodes in use, {full:,.1f} full")
        out.append(f"<b>{esc(res)}</b> (mean over the run): " + "; ".join(parts) + ".")
    out.extend(gang_findings(results))
    for r in results:
        out.append(_verdict(r, base["summary"], base["variant"]))
    return out


def _verdict(r: dict[str, Any], base: dict[str, Any], base_name: str) -> str:
    s = r["summary"]
    bits = [f"<b>{esc(r['variant'])}</b>:"]
    hot = float(s.get("hotNodeMinutes") or 0.0)
    bhot = float(base.get("hotNodeMinutes") or 0.0)
    if r["variant"] != base_name and bhot > 0:
        bits.append(f"hot-node minutes {hot:,.0f} ({(hot - bhot) / bhot * 100:+.0f}% vs {esc(base_name)});")
    else:
        bits.append(f"hot-node minutes {hot:,.0f};")
    std = s.get("cpuSpreadStdMean")
    if std is not None:
        bits.append(f"CPU spread {100 * std:.1f}%;")
    ev = s.get("evictions") or 0
    bits.append(f"{ev:,} eviction(s)" + (f" ({s.get('kubeletEvictions')} by kubelets)" if s.get("kubeletEvictions")
                                         else "") + ";")
    if s.get("loopEpisodes"):
        bits.append(f'<span style="color:#c0392b">eviction loops: {s["loopEpisodes"]} episode(s) in '
                    f'{s["loopWorkloads"]} workload(s)</span>')
    else:
        bits.append("no eviction loop")
    return " ".join(bits)


# ---------------------------------------------------------------- charts


def summary_charts(results: list[dict[str, Any]], colours: dict[str, str]) -> list[Chart]:
    names = [r["variant"] for r in results]
    summ = [r["summary"] for r in results]
    charts = [bar_chart("summary-hot-node-minutes", "Hot-node minutes per variant", names,
                        {"hot-node minutes": [float(x.get("hotNodeMinutes") or 0) for x in summ]},
                        value_title="node × minutes above the hot threshold (lower is better)", value_format=MINUTES,
                        category_colours=colours, empty="No node was hot in any variant.")]
    components = sorted({c for x in summ for c in (x.get("evictionsByComponent") or {})})
    stacks = {c: [float(sum((x.get("evictionsByComponent") or {}).get(c, {}).values())) for x in summ]
              for c in components}
    charts.append(bar_chart("summary-evictions", "Evictions per variant, by component", names, stacks or {"evictions": [0.0]},
                            value_title="pods evicted", value_format=COUNT, colours=COMPONENT_COLOURS,
                            empty="No variant evicted a pod."))
    charts.append(bar_chart("summary-cpu-spread", "CPU spread per variant (mean over time)", names,
                            {"CPU spread": [float(x.get("cpuSpreadStdMean") or 0) for x in summ]},
                            value_title="std of node CPU utilisation (lower is more even)", value_format=PERCENT,
                            category_colours=colours, empty="CPU utilisation was the same on every node."))
    charts.append(bar_chart("summary-loops", "Eviction-loop episodes per variant", names,
                            {"episodes": [float(x.get("loopEpisodes") or 0) for x in summ]},
                            value_title="episodes (a pod placed back or evicted again)", value_format=COUNT,
                            category_colours=colours, empty="No variant had an eviction loop."))
    return charts


def time_charts(results: list[dict[str, Any]], style: Any, scale: TimeScale, threshold: float,
                interval: float) -> list[Chart]:
    series = [(r["variant"], r["series"]) for r in results]

    def lines(key: str) -> list[Line]:
        return [Line(n, s["t"], s[key]) for n, s in series if key in s]

    charts = [line_chart("cpu-spread", "CPU spread across nodes", lines("cpu_std"), time=scale, style=style,
                         y_title="std of node CPU utilisation", y_format=PERCENT,
                         caption="How unevenly actual CPU is spread: 0% means every node equally busy.")]
    n = len(results[0]["series"]["t"]) if results else 0
    window = max(1, round(n / 40))
    smoothed = [Line(n_, s["t"], rolling_mean(s["hot_nodes"], window)) for n_, s in series]
    span = format_duration(window * interval)
    charts.append(line_chart("hot-nodes", f"Hot nodes (mean over {span})", smoothed, time=scale, style=style,
                             y_title="nodes above the hot threshold", y_format=Format(",.2~f", ",.1f"),
                             empty=f"No node was ever above {100 * threshold:.0f}% CPU.",
                             caption=f"A rolling mean over the last {span}; the raw count per record is "
                                     "hot_nodes in series.csv."))
    charts.append(line_chart("hottest-node", "Hottest node's CPU utilisation", lines("cpu_max"), time=scale,
                             style=style, y_title="CPU / allocatable", y_format=PERCENT, hline=threshold,
                             hline_label=f"hot threshold {100 * threshold:.0f}%"))
    charts.append(line_chart("pending", "Pending pods", lines("pending"), time=scale, style=style, step=True,
                             y_title="pods waiting to be scheduled", y_format=COUNT,
                             empty="No pod was pending at any record: every pod was placed when it arrived."))
    ev_lines = []
    for n_, s in series:
        total = np.zeros(len(s["t"]))
        for k, v in s.items():
            if k.startswith("evictions_"):
                total = total + np.asarray(v, dtype=np.float64)
        ev_lines.append(Line(n_, s["t"], np.cumsum(total)))
    charts.append(line_chart("evictions", "Evictions so far (every component)", ev_lines, time=scale, style=style,
                             step=True, y_title="pods evicted (cumulative)", y_format=COUNT,
                             empty="No variant evicted a pod."))
    charts.append(line_chart("oom-kills", "OOM kills so far", [Line(n_, s["t"], np.cumsum(s["oom_kills"]))
                                                              for n_, s in series if "oom_kills" in s],
                             time=scale, style=style, step=True, y_title="containers OOM-killed (cumulative)",
                             y_format=COUNT, empty="No container was OOM-killed."))
    charts.append(line_chart("memory-spread", "Memory spread across nodes", lines("mem_std"), time=scale,
                             style=style, y_title="std of node memory utilisation", y_format=PERCENT,
                             empty="Memory use is not modelled in this scenario."))
    for res, label in (("cpu", "CPU"), ("memory", "memory")):
        key = f"allocated_{res}"
        if any(key in s for _, s in series):
            charts.append(line_chart(f"allocated-{res}", f"Requested {label}, share of the cluster", lines(key),
                                     time=scale, style=style, y_title=f"requested / allocatable {label}",
                                     y_format=PERCENT, empty=f"No pod requested {label}."))
    return charts


def band_counts(m: np.ndarray) -> list[np.ndarray]:
    """Per record, how many nodes fall in each of BANDS (nodes without the resource, NaN, in none)."""
    out = []
    with np.errstate(invalid="ignore"):
        for _, lo, hi, _ in BANDS:
            out.append(((m >= lo) & (m < hi)).sum(axis=1).astype(np.float64))
    return out


def resource_summary_chart(res: str, results: list[dict[str, Any]]) -> Chart | None:
    """Nodes in use per variant, by how full they are (mean over the run): packing versus spreading."""
    have = [r for r in results if res in r.get("node_requested", {})]
    if not have:
        return None
    bands = [band_counts(np.asarray(r["node_requested"][res], dtype=np.float64)) for r in have]
    stacks = {label: [float(np.mean(b[i])) if b[i].size else 0.0 for b in bands]
              for i, (label, _, _, _) in enumerate(BANDS) if i > 0}
    return bar_chart(f"summary-nodes-by-{_slug(res)}", f"Nodes using {res}, by how full (mean over time)",
                     [r["variant"] for r in have], stacks, value_title="nodes (mean over the run)",
                     value_format=Format(",.1f", ",.1f"), colours={label: c for label, _, _, c in BANDS},
                     empty=f"No pod requested {res}.",
                     caption="Packing uses fewer nodes and fills them; spreading uses many nodes a little.")


def extended_resources(results: list[dict[str, Any]]) -> list[str]:
    """Extended resources (GPUs…) the run recorded, in name order."""
    found = set()
    for r in results:
        for k in r["series"]:
            if k.startswith("allocated_") and not k.endswith("_arrived") and k[len("allocated_"):] not in ("cpu", "memory"):
                found.add(k[len("allocated_"):])
        found.update(r.get("node_requested", {}))
    return sorted(found)


def resource_charts(res: str, results: list[dict[str, Any]], style: Any, scale: TimeScale) -> list[Chart]:
    slug = _slug(res)
    key = f"allocated_{res}"
    charts = [line_chart(f"allocated-{slug}", f"Requested {res}, share of the cluster",
                         [Line(r["variant"], r["series"]["t"], r["series"][key]) for r in results if key in r["series"]],
                         time=scale, style=style, y_title="requested / allocatable", y_format=PERCENT,
                         empty=f"No pod requested {res}.")]
    per_node = [(r["variant"], r["series"]["t"], np.asarray(r["node_requested"][res], dtype=np.float64))
                for r in results if res in r.get("node_requested", {})]
    if not per_node:
        return charts
    panels = [(name, [Line(label, t, counts) for (label, _, _, _), counts in zip(BANDS, band_counts(m), strict=True)])
              for name, t, m in per_node]
    charts.append(stacked_area_chart(
        f"nodes-by-{slug}", f"Nodes by how much of their {res} is requested", panels, time=scale,
        y_title="nodes", colours={label: c for label, _, _, c in BANDS}, hidden=[BANDS[0][0]],
        empty=f"No pod requested {res}.",
        caption=f"Only nodes with {res} to offer; idle nodes are hidden (click “{BANDS[0][0]}” to show them). "
                "Packing fills few nodes; spreading leaves many partly used — fragments a large pod cannot use."))
    t0 = per_node[0][1]
    # One heatmap with a panel per variant needs the same records and nodes in each.
    if all(m.shape == per_node[0][2].shape for _, _, m in per_node):
        names = results[0]["node_names"]
        has = np.asarray(np.isfinite(np.stack([m for _, _, m in per_node])).any(axis=(0, 1)))
        cols = [i for i in range(min(len(names), per_node[0][2].shape[1])) if has[i]]
        charts.append(heatmap_chart(
            f"heatmap-{slug}", f"{res} requested per node", [(name, m[:, cols]) for name, _, m in per_node], t0,
            [names[i] for i in cols], time=scale, z_title="requested / allocatable", zmax=1.0,
            caption=f"Nodes without {res} are left out."))
    return charts


# ---------------------------------------------------------------- tables and loops


def _comparison_table(page: Page, results: list[dict[str, Any]], colours: dict[str, str]) -> None:
    names = [r["variant"] for r in results]
    rows: list[list[str]] = []
    classes: list[list[str]] = []
    for key, label, kind in table_rows([r["summary"] for r in results]):
        vals = [r["summary"].get(key) for r in results]
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))]
        best = worst = None
        if key in LOWER_BETTER and len(nums) > 1 and max(nums) != min(nums):
            best, worst = min(nums), max(nums)
        cls = [""]
        for v in vals:
            c = ""
            if best is not None and isinstance(v, (int, float)):
                c = "best" if float(v) == best else ("worst" if float(v) == worst else "")
            cls.append(c)
        rows.append([label] + [format_cell(v, kind) for v in vals])
        classes.append(cls)
    page.table(["metric"] + names, rows, table_id="comparison", cell_classes=classes,
               header_colours=[""] + [colours[n] for n in names])
    page.paragraph("Green: the best value of a row where lower is better; red: the worst. The simulated scheduler "
                   "takes no virtual time, so a pod waits to be scheduled only while it cannot be placed (no room, a "
                   "taint, backoff).", cls="note")


def _evictions_table(page: Page, results: list[dict[str, Any]]) -> None:
    rows: list[list[Any]] = []
    for r in results:
        by = r["summary"].get("evictionsByComponent") or {}
        for comp, reasons in by.items():
            for reason, count in reasons.items():
                rows.append([r["variant"], comp, reason, f"{count:,}"])
    if not rows:
        page.raw('<div class="chart empty" data-chart="evictions-table"><b>Evictions</b>: no variant evicted a pod.'
                 "</div>")
        return
    page.table(["variant", "component", "reason", "evictions"], rows, table_id="evictions")
    if any(r["summary"].get("oomKills") for r in results):
        page.paragraph("OOM kills: " + ", ".join(f"{r['variant']} {r['summary']['oomKills']}" for r in results) + ".",
                       cls="note")


def _loops(page: Page, results: list[dict[str, Any]], window: float) -> None:
    page.paragraph(f"A loop: a workload's pod evicted and, within {format_duration(window)}, its replacement placed "
                   "back on the same node or evicted again.", cls="note")
    out = ['<div id="loops">']
    quiet = [r["variant"] for r in results if not r["loops"]]
    if quiet:
        out.append(f'<p class="verdict">No eviction loop in {esc(", ".join(quiet))}.</p>')
    for r in results:
        for f in r["loops"]:
            comps = ", ".join(f"{k} {v}" for k, v in f["components"].items())
            nodes = ", ".join(f"{k} ({v})" for k, v in list(f["nodes"].items())[:6])
            out.append(f'<div class="loop" data-variant="{esc(r["variant"])}" data-workload="{esc(f["workload"])}">'
                       f'<b>{esc(r["variant"])}</b>: <b>{esc(f["workload"])}</b> — {f["episodes"]} episode(s), '
                       f'{f["loopingEvictions"]} looping eviction(s); placed back on the same node {f["placedBack"]}×, '
                       f'evicted again {f["evictedAgain"]}×; by {esc(comps)}; nodes {esc(nodes)}'
                       '<table class="chain"><tr><th>time</th><th>event</th><th>pod</th><th>node</th><th>by</th>'
                       "<th>reason</th></tr>")
            for e in f["chain"]:
                out.append(f"<tr><td>{esc(format_duration(e['t']))}</td><td>{esc(e['event'])}</td><td>{esc(e['pod'])}</td>"
                           f"<td>{esc(e['node'])}</td><td>{esc(e.get('by', ''))}</td><td>{esc(e.get('reason', ''))}"
                           "</td></tr>")
            out.append("</table></div>")
    out.append("</div>")
    page.raw("".join(out))


def human_span(seconds: float) -> str:
    """A run's length: 90m, 8h, or 149.4 days."""
    return f"{seconds / 86400:,.1f} days" if seconds > 2 * 86400 else format_duration(seconds)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()

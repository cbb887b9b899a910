"""The simulation report's gang section: how long gangs waited, Permit timeouts, and what partial placement held.

Reads each variant's `gangs` result (kubesched/sim/gangs.py: `summary`; `gangs`, one row per PodGroup; and
`series`, the GPUs and CPU cores held by gangs below quorum, as steps at each change). Drawn only when a
run had PodGroups, with the report's shared blocks: a findings sentence, a bar chart of the gangs' outcome
per variant, step charts of what gangs below quorum held, a summary table and one row per PodGroup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.report.figures import COUNT, Chart, Format, Line, Style, TimeScale, bar_chart, line_chart
from kubesched.report.html import Page, esc
from kubesched.sim.units import format_duration

OUTCOME_COLOURS = {"finished": "#59A14F", "started, not finished": "#4E79A7", "never started": "#E15759"}
CORES = Format(",.3~g", ",.2f")


def with_gangs(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The variants whose run had PodGroups."""
    return [r for r in results if r.get("gangs")]


def gang_findings(results: Sequence[dict[str, Any]]) -> list[str]:
    """One sentence (escaped HTML) on the gangs of every variant: started, finished, what was left held."""
    parts = []
    for r in with_gangs(results):
        s = r["gangs"]["summary"]
        bits = [f"{s['gangsStarted']} of {s['gangs']} started, {s['gangsFinished']} finished"]
        if s["gangsStarted"]:
            bits.append(f"longest wait {format_duration(s['gangWaitMax'])}")
        if s["partialGangGpusAtEnd"]:
            bits.append(f'<span style="color:#c0392b">{s["partialGangGpusAtEnd"]} of {s["clusterGpus"]} GPUs held '
                        "idle by gangs below quorum at the end</span>")
        if s["permitTimeouts"]:
            bits.append(f"{s['permitTimeouts']} Permit timeout(s)")
        parts.append(f"{esc(r['variant'])}: " + ", ".join(bits))
    return ["<b>Gangs:</b> " + "; ".join(parts) + "."] if parts else []


def _steps(series: Mapping[str, Sequence[float]], key: str, end: float) -> tuple[list[float], list[float]]:
    """A step series from the start of the run to its end (the recorded points are the changes)."""
    t, v = list(series["t"]), [float(x) for x in series[key]]
    if not t or t[0] > 0:
        t, v = [0.0, *t], [0.0, *v]
    if t[-1] < end:
        t, v = [*t, end], [*v, v[-1]]
    return t, v


def gang_charts(results: Sequence[dict[str, Any]], style: Mapping[str, Style], scale: TimeScale,
                end: float) -> list[Chart]:
    rs = with_gangs(results)
    names = [r["variant"] for r in rs]
    summ = [r["gangs"]["summary"] for r in rs]
    charts = [bar_chart(
        "summary-gangs", "Gangs per variant, by outcome", names,
        {"finished": [float(s["gangsFinished"]) for s in summ],
         "started, not finished": [float(s["gangsStarted"] - s["gangsFinished"]) for s in summ],
         "never started": [float(s["gangs"] - s["gangsStarted"]) for s in summ]},
        value_title="PodGroups", value_format=COUNT, colours=OUTCOME_COLOURS,
        caption="Started: minMember of the group's pods ran. A gang that never started did no work.")]
    if charts[0].figure is not None:
        charts[0].figure.update_xaxes(dtick=1)  # whole PodGroups: no repeated tick labels on a short axis
    if any(s["clusterGpus"] for s in summ):
        gpus = [Line(r["variant"], *_steps(r["gangs"]["series"], "gpus", end)) for r in rs]
        charts.append(line_chart(
            "gang-held-gpus", "GPUs held by gangs below quorum", gpus, time=scale, style=style, step=True,
            y_title="GPUs held", y_format=COUNT,
            empty="No gang held a GPU while below quorum.",
            caption="GPUs requested by pods of gangs below quorum — assumed while waiting at Permit, or bound "
                    "and idle until minMember run: GPUs no other job can use, the fragmentation partial "
                    "placement causes."))
    cores = [Line(r["variant"], *_steps(r["gangs"]["series"], "cores", end)) for r in rs]
    charts.append(line_chart(
        "gang-held-cores", "CPU cores held by gangs below quorum", cores, time=scale, style=style, step=True,
        y_title="CPU cores held", y_format=CORES,
        empty="No gang held CPU while below quorum.",
        caption="CPU cores requested by pods of gangs below quorum."))
    return charts


def gang_section(page: Page, results: Sequence[dict[str, Any]], style: Mapping[str, Style], scale: TimeScale,
                 end: float) -> None:
    """The section (nothing when no variant had PodGroups)."""
    rs = with_gangs(results)
    if not rs:
        return
    page.heading("Gangs (PodGroups)", anchor="gangs")
    page.paragraph("A gang works only once minMember of its pods run. Held: the GPUs and CPU requested by pods of "
                   "gangs below quorum (assumed while they wait at Permit, or bound and idle).", cls="note")
    page.grid(gang_charts(results, style, scale, end))
    rows = []
    for r in rs:
        s = r["gangs"]["summary"]
        rows.append([r["variant"], f"{s['gangsStarted']} of {s['gangs']}", s["gangsFinished"],
                     format_duration(s["gangWaitMean"]), format_duration(s["gangWaitMax"]), s["permitTimeouts"],
                     f"{s['partialGangGpuHours']:,.2f}", f"{s['partialGangGpusPeak']} of {s['clusterGpus']}",
                     s["partialGangGpusAtEnd"], f"{s['partialGangCpuCoreHours']:,.2f}"])
    page.table(["variant", "gangs started", "finished", "wait, mean", "wait, max", "Permit timeouts",
                "held GPU-hours", "held GPUs, peak", "held GPUs at the end", "held CPU core-hours"], rows,
               table_id="gang-summary")
    page.paragraph("A gang's wait runs from its PodGroup's creation until minMember of its pods run (to the end of "
                   "the run for a gang that never started).", cls="note")
    detail = []
    for r in rs:
        for g in r["gangs"]["gangs"]:
            waited = format_duration(g["waitSeconds"]) + ("" if g["startedInRun"] else " (never started)")
            detail.append([r["variant"], g["podGroup"], g["minMember"], waited,
                           format_duration(g["started"]) if g["started"] is not None else "-",
                           format_duration(g["finished"]) if g["finished"] is not None else "-",
                           g["phase"] or "-", g["permitTimeouts"]])
    page.table(["variant", "PodGroup", "minMember", "waited", "started at", "finished at", "phase",
                "Permit timeouts"], detail, table_id="gang-detail")

"""The report's gang section: how long gangs waited, Permit timeouts, and what partial placement held.

Reads each variant's `gangs` result (kubesched/sim/gangs.py: `summary`, `gangs` — one row per PodGroup —
and `series` — GPUs and CPU cores held by gangs below quorum, as steps). Rendered only when a run had
PodGroups. Self-contained HTML and inline SVG, like the rest of the report.
"""

from __future__ import annotations

import html
from typing import Any

_W, _H, _PAD = 640, 220, 40


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:g} s"


def _step_chart(title: str, lines: list[tuple[str, list[float], list[float], str]], end: float, unit: str) -> str:
    """Step lines (value holds until the next point), one per variant."""
    top = max([max(v) for _, _, v, _ in lines if v] + [1.0])
    span = max(end, 1.0)

    def x(t: float) -> float:
        return _PAD + (_W - 2 * _PAD) * min(t, span) / span

    def y(v: float) -> float:
        return _H - _PAD - (_H - 2 * _PAD) * v / top

    parts = [f'<svg class="gang-chart" viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img">',
             f'<text x="{_PAD}" y="16" font-size="13" font-weight="bold">{_esc(title)}</text>',
             f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - _PAD}" y2="{_H - _PAD}" stroke="#999"/>',
             f'<text x="4" y="{y(top) + 4:.1f}" font-size="11">{top:g} {unit}</text>',
             f'<text x="4" y="{_H - _PAD + 4}" font-size="11">0</text>',
             f'<text x="{_W - _PAD - 60}" y="{_H - 8}" font-size="11">{_esc(_fmt_seconds(span))}</text>']
    for i, (name, ts, vs, colour) in enumerate(lines):
        pts: list[str] = []
        last = 0.0
        for t, v in zip(ts, vs, strict=True):
            pts.append(f"{x(t):.1f},{y(last):.1f}")
            pts.append(f"{x(t):.1f},{y(v):.1f}")
            last = v
        pts.append(f"{x(span):.1f},{y(last):.1f}")
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(pts)}"/>')
        parts.append(f'<text x="{_W - _PAD - 150}" y="{30 + 14 * i}" font-size="11" fill="{colour}">{_esc(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def gang_section(results: list[dict[str, Any]], colours: dict[str, str], duration: float) -> str:
    with_gangs = [r for r in results if r.get("gangs")]
    if not with_gangs:
        return ""
    out = ['<h2 id="gangs">Gangs (PodGroups)</h2>',
           '<p class="note">A gang works only once minMember of its pods run. Held: GPUs and CPU requested by pods of '
           "gangs below quorum (assumed while they wait at Permit, or bound and idle) — the fragmentation partial "
           "placement causes.</p>",
           '<table id="gang-summary"><tr><th>variant</th><th>gangs started / total</th><th>finished</th>'
           "<th>wait mean</th><th>wait max</th><th>Permit timeouts</th><th>held GPU-hours</th><th>held GPUs, peak</th>"
           "<th>held GPUs at the end</th><th>held CPU core-hours</th></tr>"]
    for r in with_gangs:
        s = r["gangs"]["summary"]
        out.append(f'<tr><td style="color:{colours.get(r["variant"], "#000")}">{_esc(r["variant"])}</td>'
                   f'<td>{s["gangsStarted"]} / {s["gangs"]}</td><td>{s["gangsFinished"]}</td>'
                   f'<td>{_esc(_fmt_seconds(s["gangWaitMean"]))}</td><td>{_esc(_fmt_seconds(s["gangWaitMax"]))}</td>'
                   f'<td>{s["permitTimeouts"]}</td><td>{s["partialGangGpuHours"]:g}</td>'
                   f'<td>{s["partialGangGpusPeak"]} of {s["clusterGpus"]}</td><td>{s["partialGangGpusAtEnd"]}</td>'
                   f'<td>{s["partialGangCpuCoreHours"]:g}</td></tr>')
    out.append("</table>")
    gpu_lines = [(r["variant"], r["gangs"]["series"]["t"], [float(v) for v in r["gangs"]["series"]["gpus"]],
                  colours.get(r["variant"], "#000")) for r in with_gangs]
    if any(v for _, _, vs, _ in gpu_lines for v in vs):
        out.append(_step_chart("GPUs held by gangs below quorum", gpu_lines, duration, "GPUs"))
    else:
        cpu_lines = [(r["variant"], r["gangs"]["series"]["t"], r["gangs"]["series"]["cores"],
                      colours.get(r["variant"], "#000")) for r in with_gangs]
        out.append(_step_chart("CPU cores held by gangs below quorum", cpu_lines, duration, "cores"))
    out.append('<table id="gang-detail"><tr><th>variant</th><th>PodGroup</th><th>minMember</th><th>waited</th>'
               "<th>started</th><th>finished</th><th>phase</th><th>Permit timeouts</th></tr>")
    for r in with_gangs:
        for g in r["gangs"]["gangs"]:
            out.append(f'<tr><td>{_esc(r["variant"])}</td><td>{_esc(g["podGroup"])}</td><td>{g["minMember"]}</td>'
                       f'<td>{_esc(_fmt_seconds(g["waitSeconds"]))}{"" if g["startedInRun"] else " (never started)"}</td>'
                       f'<td>{_esc(_fmt_seconds(g["started"]))}</td><td>{_esc(_fmt_seconds(g["finished"]))}</td>'
                       f'<td>{_esc(g["phase"] or "-")}</td><td>{g["permitTimeouts"]}</td></tr>')
    out.append("</table>")
    return "".join(out)

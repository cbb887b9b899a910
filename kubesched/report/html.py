"""One self-contained HTML page from headings, text, tables and `Chart`s (kubesched.report.figures).

The page opens from disk with no network: plotly.js is inlined once in the head (only when the page has
a chart), there are no fonts or images to fetch, and every chart is a `<figure class="chart"
data-chart="ID">` holding the Plotly div `ID` (or, for a chart with nothing to draw, its sentence in a
`<div class="chart empty">`). The same page builder serves every report:

    page = Page("Simulation: hotspots", subtitle="8 h simulated, seed 42")
    page.heading("Over time")
    page.grid([chart_a, chart_b])
    page.table(["metric", "a", "b"], rows, table_id="comparison")
    Path("report.html").write_text(page.render())

Content is escaped unless passed through `raw`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import plotly.offline

from kubesched.report.figures import Chart

CSS = """
:root{--ink:#222;--muted:#666;--line:#ddd}
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;margin:24px auto;color:var(--ink);
max-width:1400px;padding:0 24px;line-height:1.45}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.sub{color:var(--muted);font-size:13px}
p{max-width:110ch}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left}td.num,th.num{text-align:right}
td.indent{padding-left:22px}
th{background:#f4f4f4}
td.best{background:#e3f4e3;font-weight:600;text-align:right}td.worst{background:#fbe4e4;text-align:right}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:16px;align-items:start}
@media (max-width:1100px){.grid{grid-template-columns:minmax(0,1fr)}}
figure.chart{margin:0;border:1px solid #eee;border-radius:4px;padding:4px;background:#fff;min-width:0}
figure.chart figcaption{font-size:12px;color:var(--muted);padding:2px 8px 6px}
div.chart.empty{border:1px dashed var(--line);border-radius:4px;padding:8px 14px;margin:8px 0;font-size:13px;
color:var(--muted)}
div.chart.empty b{color:var(--ink)}
.findings{background:#f6f8fa;border-left:4px solid #4E79A7;padding:8px 14px;margin:12px 0}
.findings p{margin:4px 0;font-size:14px}
.loop{background:#fff7e6;border-left:3px solid #F28E2B;padding:6px 10px;margin:6px 0;font-size:13px}
.chain td{font-size:12px}.note{font-size:12px;color:var(--muted)}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:baseline}
"""

# Plotly's per-chart options: fits its container, no logo, the camera button saves SVG at the shown size.
PLOT_CONFIG: dict[str, Any] = {
    "responsive": True,
    "displaylogo": False,
    "toImageButtonOptions": {"format": "svg"},
    "modeBarButtonsToRemove": ["select2d", "lasso2d"],
}


_NUMERIC = re.compile(r"^\s*[-+−]?[\d,.]+\s*(%|s|m|h|d|min|×)?\s*$|^\s*-\s*$|^(\d+[hms])+$")


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


class Page:
    """A report page, built top to bottom; `render()` returns the whole document."""

    def __init__(self, title: str, subtitle: str = "") -> None:
        self.title = title
        self._parts: list[str] = [f"<h1>{esc(title)}</h1>"]
        if subtitle:
            self._parts.append(f'<div class="sub">{esc(subtitle)}</div>')
        self._charts: list[Chart] = []

    @property
    def charts(self) -> list[Chart]:
        """Every chart added, in order (drawn and empty): what `export_charts` saves."""
        return list(self._charts)

    def heading(self, text: str, level: int = 2, anchor: str = "") -> None:
        ident = f' id="{esc(anchor)}"' if anchor else ""
        self._parts.append(f"<h{level}{ident}>{esc(text)}</h{level}>")

    def paragraph(self, text: str, cls: str = "") -> None:
        c = f' class="{esc(cls)}"' if cls else ""
        self._parts.append(f"<p{c}>{esc(text)}</p>")

    def raw(self, markup: str) -> None:
        """Markup the caller has escaped."""
        self._parts.append(markup)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], table_id: str = "",
              cell_classes: Sequence[Sequence[str]] | None = None, header_colours: Sequence[str] | None = None) -> None:
        ident = f' id="{esc(table_id)}"' if table_id else ""
        out = [f"<table{ident}><tr>"]
        numeric = [bool(rows) and all(_NUMERIC.match(str(row[i])) for row in rows if i < len(row))
                   for i in range(len(header))]
        for i, h in enumerate(header):
            colour = header_colours[i] if header_colours and i < len(header_colours) and header_colours[i] else ""
            swatch = f'<span class="swatch" style="background:{esc(colour)}"></span>' if colour else ""
            th = '<th class="num">' if numeric[i] else "<th>"
            out.append(f"{th}{swatch}{esc(h)}</th>")
        out.append("</tr>")
        for r, row in enumerate(rows):
            out.append("<tr>")
            for c, cell in enumerate(row):
                classes = [cell_classes[r][c]] if cell_classes and cell_classes[r][c] else []
                text = str(cell)
                if _NUMERIC.match(text):
                    classes.append("num")
                if c == 0 and text.startswith("  "):
                    classes.append("indent")
                cls = f' class="{" ".join(classes)}"' if classes else ""
                out.append(f"<td{cls}>{esc(text.strip())}</td>")
            out.append("</tr>")
        out.append("</table>")
        self._parts.append("".join(out))

    def chart(self, chart: Chart) -> None:
        self._charts.append(chart)
        self._parts.append(_chart_html(chart))

    def grid(self, charts: Sequence[Chart]) -> None:
        """Charts two by row when the window is wide enough; the sentences of empty charts after them."""
        self._charts.extend(charts)
        drawn = [c for c in charts if c.figure is not None]
        empty = [c for c in charts if c.figure is None]
        if drawn:
            self._parts.append('<div class="grid">' + "".join(_chart_html(c) for c in drawn) + "</div>")
        self._parts.extend(_chart_html(c) for c in empty)

    def render(self) -> str:
        drawn = any(c.figure is not None for c in self._charts)
        script = f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>' if drawn else ""
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{esc(self.title)}</title><style>{CSS}</style>{script}</head><body>"
                + "".join(self._parts)
                + '<p class="note">Written by kubesched. Charts: hover for values, drag to zoom (double-click resets), '
                  "click a legend entry to hide a series (double-click to show it alone); the camera button saves "
                  "a chart as SVG.</p></body></html>\n")


def _chart_html(chart: Chart) -> str:
    if chart.figure is None:
        return (f'<div class="chart empty" data-chart="{esc(chart.id)}" id="{esc(chart.id)}"><b>{esc(chart.title)}</b>: '
                f"{esc(chart.note)}</div>")
    div = chart.figure.to_html(full_html=False, include_plotlyjs=False, div_id=chart.id, config=PLOT_CONFIG,
                               default_height=f"{chart.height}px", default_width="100%")
    cap = f"<figcaption>{esc(chart.caption)}</figcaption>" if chart.caption else ""
    return f'<figure class="chart" data-chart="{esc(chart.id)}">{div}{cap}</figure>'

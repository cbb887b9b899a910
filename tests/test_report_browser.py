"""A real browser opens every example's report: no console error, nothing fetched, every chart drawn with
axis titles and its legend outside the plot area, hover/legend/zoom working; screenshots are kept in
out/screenshots/ (with the help pages of `kubesched` and `kubesched simulate` rendered as a terminal shows them).
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubesched.cli import main
from tests.browser import ROOT, SCREENSHOTS, browser

EXAMPLES = {"hotspots": ROOT / "examples" / "hotspots" / "scenario.yaml",
            "memory-pressure": ROOT / "examples" / "memory-pressure" / "scenario.yaml",
            "openb": ROOT / "examples" / "openb" / "scenario.yaml",
            "gang": ROOT / "examples" / "gang" / "scenario.yaml"}

# What a drawn chart looks like in the DOM Plotly builds: its traces, axis titles, legend and plot areas.
CHARTS_JS = """() => Array.from(document.querySelectorAll('figure.chart')).map(f => {
  const div = f.querySelector('.js-plotly-plot');
  const box = el => { if (!el) return null; const r = el.getBoundingClientRect();
                      return {l: r.left, r: r.right, t: r.top, b: r.bottom, w: r.width, h: r.height}; };
  const titles = (d, re) => d ? Array.from(d.querySelectorAll('[class$="title"]'))
      .filter(e => re.test(e.getAttribute('class'))).map(e => e.textContent) : [];
  return {
    id: f.dataset.chart,
    plotly: !!div,
    data: div && div.data ? div.data.length : 0,
    drawn: div ? div.querySelectorAll('.cartesianlayer .trace, .cartesianlayer .hm').length : 0,
    box: box(div),
    xtitles: titles(div, /^x\\d*title$/),
    ytitles: titles(div, /^y\\d*title$/),
    colorbar: div ? Array.from(div.querySelectorAll('.colorbar .cbtitle')).map(e => e.textContent) : [],
    showlegend: div ? !!div._fullLayout.showlegend : false,
    legend: box(div && div.querySelector('.legend')),
    areas: div ? Array.from(div.querySelectorAll('.draglayer .nsewdrag')).map(box) : [],
  };
})"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("reports")
    paths = {}
    for name, scenario in EXAMPLES.items():
        assert main(["simulate", str(scenario), "--out", str(out / name), "--no-progress", "-o", "json"]) == 0
        paths[name] = out / name / "report.html"
    return paths


def _open(context: Any, report: Path) -> tuple[Any, list[str], list[str]]:
    errors: list[str] = []
    fetched: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(("file:", "data:", "blob:", "about:")):
            r.continue_()
        else:
            fetched.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.goto(report.as_uri(), wait_until="load")
    page.wait_for_function("() => Array.from(document.querySelectorAll('figure.chart .js-plotly-plot'))"
                           ".every(d => d._fullLayout && d.querySelector('.main-svg'))", timeout=60_000)
    return page, errors, fetched


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_report_renders_in_chromium(example: str, reports: dict[str, Path], tmp_path: Path) -> None:
    report = reports[example]
    with browser(tmp_path / "profile") as context:
        page, errors, fetched = _open(context, report)
        charts = page.evaluate(CHARTS_JS)
        empty = page.evaluate("() => Array.from(document.querySelectorAll('div.chart.empty'))"
                              ".map(e => [e.dataset.chart, e.textContent])")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{example}-report-top.png"))
        page.screenshot(path=str(SCREENSHOTS / f"{example}-report.png"), full_page=True)
    assert errors == []
    assert fetched == [], "the report must open with no network"
    assert len(charts) >= 10, [c["id"] for c in charts]
    for c in charts:
        assert c["plotly"] and c["data"] > 0, c
        # Every trace Plotly was given is drawn (heatmaps, lines, bars, areas), at a visible size.
        assert c["drawn"] >= 1 and c["box"]["w"] > 300 and c["box"]["h"] > 150, c
        assert c["xtitles"] and all(t.strip() for t in c["xtitles"]), c
        assert c["ytitles"] and all(t.strip() for t in c["ytitles"]), c
        if c["showlegend"]:
            # Legends sit outside every plot area.
            for a in c["areas"]:
                assert c["legend"]["l"] >= a["r"] - 1 or c["legend"]["b"] <= a["t"] + 1, c
    ids = {c["id"] for c in charts}
    # Empty charts are sentences, never empty frames.
    for chart_id, text in empty:
        assert chart_id not in ids and ":" in text and len(text) > 20
    heatmaps = [c for c in charts if c["id"].startswith("heatmap-cpu-")]
    doc = json.loads((report.parent / "summary.json").read_text())
    assert len(heatmaps) == len(doc["variants"])
    assert all(c["colorbar"] == ["CPU / allocatable"] for c in heatmaps)
    if example == "openb":
        # GPUs are what the trace is about: a section per extended resource with its charts.
        assert {"allocated-alibabacloud-com-gpu-count", "nodes-by-alibabacloud-com-gpu-count",
                "heatmap-alibabacloud-com-gpu-count", "summary-nodes-by-alibabacloud-com-gpu-milli"} <= ids
    if example == "gang":
        # The gang section: outcome bars and what gangs below quorum held (the default variant: 8 GPUs).
        assert {"summary-gangs", "gang-held-gpus", "gang-held-cores"} <= ids
    if example == "hotspots":
        assert {"summary-hot-node-minutes", "summary-evictions", "cpu-spread", "hot-nodes", "evictions"} <= ids
        assert "pending" in dict(empty)


def test_report_is_interactive(reports: dict[str, Path], tmp_path: Path) -> None:
    """Hover names the variant, the time and the value; a legend click hides a variant; a drag zooms."""
    with browser(tmp_path / "profile") as context:
        page, errors, _ = _open(context, reports["hotspots"])
        chart = page.locator("#cpu-spread")
        chart.scroll_into_view_if_needed()
        area = page.locator("#cpu-spread .draglayer .nsewdrag").first
        box = area.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
        page.wait_for_selector("#cpu-spread .hoverlayer .hovertext", timeout=10_000)
        hover = page.locator("#cpu-spread .hoverlayer").text_content() or ""
        assert any(v in hover for v in ("baseline", "lnu-requests", "lnu-usage", "lownodeload", "trimaran", "mistuned"))
        assert " h" in hover and "%" in hover
        # Heatmap hover names the node.
        heat = page.locator("#heatmap-cpu-baseline .draglayer .nsewdrag").first
        heat.scroll_into_view_if_needed()
        hb = heat.bounding_box()
        assert hb is not None
        page.mouse.move(hb["x"] + hb["width"] * 0.5, hb["y"] + hb["height"] * 0.3)
        page.wait_for_selector("#heatmap-cpu-baseline .hoverlayer .hovertext", timeout=10_000)
        assert "node node-" in (page.locator("#heatmap-cpu-baseline .hoverlayer").text_content() or "")
        # Legend click hides the first variant.
        chart.scroll_into_view_if_needed()
        page.locator("#cpu-spread .legend .traces").first.click()
        page.wait_for_function("() => document.getElementById('cpu-spread')._fullData[0].visible === 'legendonly'")
        # Drag to zoom.
        before = page.evaluate("() => document.getElementById('cpu-spread')._fullLayout.xaxis.range.slice()")
        box = area.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] * 0.5, steps=8)
        page.mouse.up()
        page.wait_for_function(f"() => document.getElementById('cpu-spread')._fullLayout.xaxis.range[0] > {before[0]}")
        after = page.evaluate("() => document.getElementById('cpu-spread')._fullLayout.xaxis.range.slice()")
        assert after[1] - after[0] < (before[1] - before[0]) * 0.5
    assert errors == []


def _terminal_page(text: str) -> str:
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><style>body{margin:0;background:#1e1e1e}"
            "pre{font:14px/1.35 'DejaVu Sans Mono',monospace;color:#ddd;padding:14px;margin:0;width:82ch}"
            f"</style></head><body><pre>{html.escape(text)}</pre></body></html>")


@pytest.mark.parametrize("args", [["--help"], ["simulate", "--help"]], ids=["kubesched-help", "simulate-help"])
def test_help_in_an_80_column_terminal(args: list[str], tmp_path: Path) -> None:
    """The help as an 80-column terminal shows it: no line longer, an example, the doc, the exit codes."""
    env = dict(os.environ, COLUMNS="80", TERM="xterm")
    proc = subprocess.run([sys.executable, "-m", "kubesched", *args], capture_output=True, text=True, env=env,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "Example" in text and "Docs: " in text and "Exit codes: 0 success; 1 runtime failure" in text
    if args[0] == "simulate":
        assert "SCENARIO is a kubesched.io/v1alpha1 Scenario file" in text
        assert "Nothing" in text and "is written unless --out" in text
    else:
        assert "…" not in text and "..." not in text.split("Commands:")[1]
    page_file = tmp_path / "help.html"
    page_file.write_text(_terminal_page(f"$ kubesched {' '.join(args)}\n{text}"))
    with browser(tmp_path / "profile", width=760, height=400) as context:
        page = context.new_page()
        page.goto(page_file.as_uri())
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = "kubesched-help" if args == ["--help"] else "simulate-help"
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000

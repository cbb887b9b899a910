"""The report's building blocks (kubesched.report.figures, .html) and the simulation report's content."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from kubesched.errors import RuntimeFailure
from kubesched.report import figures
from kubesched.report.figures import (
    COUNT,
    PERCENT,
    Chart,
    Line,
    TimeScale,
    bar_chart,
    export_charts,
    heatmap_chart,
    identical_groups,
    is_empty,
    line_chart,
    pick_rows,
    rolling_mean,
    styles,
)
from kubesched.report.html import Page
from kubesched.report.simulation import build_report, write_report
from kubesched.sim.runner import run_simulation
from tests.browser import chromium
from tests.test_sim_run import short_hotspots


def test_styles_tell_series_apart_without_colour() -> None:
    st = styles([f"v{i}" for i in range(6)])
    assert len({s.colour for s in st.values()}) == 6
    assert len({s.dash for s in st.values()}) == 6 and len({s.symbol for s in st.values()}) == 6


def test_time_scale_follows_the_span() -> None:
    assert TimeScale.for_span(90 * 60).unit == "min"
    assert TimeScale.for_span(8 * 3600).unit == "h" and TimeScale.for_span(8 * 3600).title == "simulated time (h)"
    assert TimeScale.for_span(149 * 86400).unit == "d"
    assert list(TimeScale.for_span(8 * 3600).convert([0, 1800, 7200])) == [0.0, 0.5, 2.0]


def test_empty_and_identical_series() -> None:
    t = [0, 60, 120]
    assert is_empty([[0, 0, 0], [np.nan, 0, 0]]) and not is_empty([[0, 0, 1e-6]])
    lines = [Line("a", t, [1, 2, 3]), Line("b", t, [0, 0, 0]), Line("c", t, [1, 2, 3]), Line("d", t, [0, 0, 0]),
             Line("e", t, [3, 2, 1])]
    assert identical_groups(lines) == [["a", "c"], ["b", "d"]]
    # An all-zero chart is a sentence, not a frame.
    chart = line_chart("p", "Pending pods", [Line("a", t, [0, 0, 0])], time=TimeScale.for_span(120), y_title="pods",
                       y_format=COUNT, empty="No pod was pending.")
    assert chart.is_empty and chart.note == "No pod was pending."
    drawn = line_chart("x", "X", lines, time=TimeScale.for_span(120), y_title="y", y_format=PERCENT)
    assert not drawn.is_empty and "a = c; b = d" in drawn.caption


def test_line_chart_layout() -> None:
    t = np.arange(0, 7200 + 1, 60.0)
    chart = line_chart("spread", "CPU spread", [Line("a", t, np.sin(t)), Line("b", t, np.cos(t))],
                       time=TimeScale.for_span(t[-1]), y_title="std of node CPU utilisation", y_format=PERCENT,
                       hline=0.5, hline_label="threshold")
    fig = chart.figure
    assert fig is not None
    assert fig.layout.xaxis.title.text == "simulated time (min)"
    assert fig.layout.yaxis.title.text == "std of node CPU utilisation"
    assert fig.layout.legend.x > 1  # right of the plot area
    assert [tr.line.dash for tr in fig.data] == ["solid", "dash"]
    assert fig.data[0].x[-1] == pytest.approx(120.0)
    assert "<b>a</b>" in fig.data[0].hovertemplate and "min" in fig.data[0].hovertemplate


def test_rolling_mean_is_trailing() -> None:
    assert list(rolling_mean([0, 2, 4, 6], 2)) == [0, 1, 3, 5]
    assert list(rolling_mean([1, np.nan, 3], 3)) == [1, 1, 2]


def test_pick_rows_keeps_the_spread_and_says_so() -> None:
    m = np.vstack([np.full(5, (i + 1) / 100) for i in range(100)] + [np.zeros(5)] * 20)
    names = [f"n{i}" for i in range(120)]
    kept, kept_names, note = pick_rows(m, names, 10)
    assert len(kept_names) == 10 and kept.shape == (10, 5)
    assert kept_names[0] == "n99" and kept_names[-1] == "n0"  # the fullest and the emptiest non-zero node
    assert "20 of 120 nodes stay at zero" in note and "10 of the 100 others" in note
    small, small_names, small_note = pick_rows(m[:5], names[:5], 10)
    assert small_names == names[:5] and small_note == ""


def test_heatmap_names_every_node_and_centres_on_the_threshold() -> None:
    t = np.arange(10) * 60.0
    m = np.linspace(0, 1.2, 40).reshape(10, 4)
    chart = heatmap_chart("h", "CPU", [("actual", m), ("requested", m / 2)], t, ["a", "b", "c", "d"],
                          time=TimeScale.for_span(600), z_title="CPU / allocatable", threshold=0.75,
                          series_name="v")
    fig = chart.figure
    assert fig is not None
    assert list(fig.data[0].y) == ["a", "b", "c", "d"] and len(fig.data) == 2
    assert fig.layout.coloraxis.cmax == pytest.approx(1.125)
    orange = [pos for pos, colour in fig.layout.coloraxis.colorscale if colour == "#fdae61"]
    assert orange == [pytest.approx(0.75 / 1.125)]
    assert "node %{y}" in fig.data[0].hovertemplate


def test_bar_chart_stacks_and_empties() -> None:
    chart = bar_chart("e", "Evictions", ["a", "b"], {"descheduler": [3, 0], "kubelet": [1, 0]},
                      value_title="pods evicted")
    assert chart.figure is not None and [tr.name for tr in chart.figure.data] == ["descheduler", "kubelet"]
    assert chart.figure.layout.barmode == "stack"
    assert bar_chart("e", "Evictions", ["a"], {"x": [0]}, value_title="n", empty="None.").is_empty


def test_page_inlines_plotly_once_and_fetches_nothing() -> None:
    t = [0.0, 60.0]
    page = Page("T<1>", "sub")
    page.grid([line_chart("one", "One", [Line("a", t, [1, 2])], time=TimeScale.for_span(60), y_title="y"),
               line_chart("two", "Two", [Line("a", t, [0, 0])], time=TimeScale.for_span(60), y_title="y",
                          empty="Nothing here.")])
    page.chart(Chart.empty("three", "Three", "Nothing either."))
    page.table(["metric", "a"], [["x", "1,234"], ["  sub", "5%"]])
    doc = page.render()
    assert doc.count("Plotly.newPlot") == 1
    assert len(re.findall(r"<script type=\"text/javascript\">", doc)) == 1  # plotly.js, inlined once
    # No element loads anything (plotly.js itself mentions URLs in strings; the browser test checks requests).
    markup = re.sub(r'<script type="text/javascript">.*?</script>', "", doc, count=1, flags=re.S)
    assert not re.search(r'(src|href)="https?://', markup) and "<link" not in markup
    assert "T&lt;1&gt;" in doc and 'data-chart="two"' in doc and "Nothing here." in doc
    assert '<td class="num">1,234</td>' in doc and '<td class="indent">sub</td>' in doc
    assert [c.id for c in page.charts] == ["one", "two", "three"]
    assert "plotly" not in Page("no charts").render().lower().split("<body>")[0]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("short")
    return run_simulation(str(short_hotspots(tmp, duration="40m")), [], str(tmp / "out"), jobs=1)


def test_simulation_report_sections(short_run) -> None:  # type: ignore[no-untyped-def]
    page = build_report(short_run)
    ids = [c.id for c in page.charts]
    assert ids[:4] == ["summary-hot-node-minutes", "summary-evictions", "summary-cpu-spread", "summary-loops"]
    assert {"cpu-spread", "hot-nodes", "hottest-node", "pending", "evictions", "memory-spread", "allocated-cpu",
            "allocated-memory", "heatmap-cpu-baseline", "heatmap-cpu-mistuned"} <= set(ids)
    by = {c.id: c for c in page.charts}
    assert by["pending"].is_empty and "No pod was pending" in by["pending"].note
    assert by["hot-nodes"].title.startswith("Hot nodes (mean over")
    hot = by["hottest-node"].figure
    assert hot is not None and any(s.y0 == short_run.scenario.report.hot_threshold for s in hot.layout.shapes)
    doc = page.render()
    assert "Fewest hot-node minutes:" in doc and "Eviction loops:" in doc
    assert 'data-workload="Deployment/default/api"' in doc


def test_export_figures_for_papers(short_run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """PNG and SVG files of the report's charts through Kaleido and the system's Chromium."""
    chromium()
    files = write_report(short_run, tmp_path, ("png", "svg"))
    written = [Path(f) for f in files["figures"]]
    drawn = [c for c in build_report(short_run).charts if not c.is_empty]
    assert len(written) == 2 * len(drawn)
    png = tmp_path / "figures" / "cpu-spread.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    svg = (tmp_path / "figures" / "cpu-spread.svg").read_text()
    assert svg.startswith("<svg") and "simulated time (min)" in svg and "baseline" in svg
    assert (tmp_path / "report.html").exists()


def test_export_without_kaleido_is_a_runtime_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real = builtins.__import__

    def fake(name: str, *a, **k):  # type: ignore[no-untyped-def]
        if name == "kaleido":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    chart = line_chart("a", "A", [Line("x", [0, 1], [1, 2])], time=TimeScale.for_span(1), y_title="y")
    with pytest.raises(RuntimeFailure, match=r"pip install 'kubesched\[export\]'"):
        export_charts([chart], tmp_path)
    assert figures.MAX_HEATMAP_ROWS > 0

"""End-to-end runs of the bundled hotspots scenario, shortened: determinism, loops, outputs, --json.

The scenario is the README's example cut to 90 minutes and three variants (baseline, lnu-usage and the
mis-tuned pair), which is enough for the hot nodes to appear, the usage-based descheduler to act and
the planted loop to form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli import main
from kubesched.report.html import render_report
from kubesched.sim.runner import simulate

ROOT = Path(__file__).resolve().parent.parent
HOTSPOTS = ROOT / "examples" / "hotspots" / "scenario.yaml"
KEEP = ("baseline", "lnu-usage", "mistuned")


def short_hotspots(tmp: Path, variants: tuple[str, ...] = KEEP, duration: str = "90m") -> Path:
    doc = yaml.safe_load(HOTSPOTS.read_text())
    spec = doc["spec"]
    spec["duration"] = duration
    spec["events"] = [e for e in spec["events"] if e.get("at") != "4h"]
    spec["variants"] = [dict(v, file=str(HOTSPOTS.parent / v["file"])) for v in spec["variants"]
                        if v["name"] in variants]
    p = tmp / "hotspots.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("hotspots")
    scenario = short_hotspots(tmp)
    a = simulate(str(scenario), [], str(tmp / "a"), jobs=1, html=render_report)
    b = simulate(str(scenario), [], str(tmp / "b"), jobs=3, html=render_report)
    return {"tmp": tmp, "scenario": scenario, "a": a, "b": b}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_scenario_same_seed_same_bytes(runs: dict[str, Any]) -> None:
    """Two runs — one in this process, one in parallel worker processes — write identical files."""
    a, b = _files(runs["tmp"] / "a"), _files(runs["tmp"] / "b")
    assert sorted(a) == sorted(b)
    assert "report.html" in a and "variants/mistuned/series.csv" in a and "variants/mistuned/evictions.csv" in a
    different = [name for name in a if a[name] != b[name]]
    assert different == []
    strip = {k: v for k, v in runs["a"].items() if k != "files"}
    assert strip == {k: v for k, v in runs["b"].items() if k != "files"}


def test_another_seed_changes_the_run(runs: dict[str, Any], tmp_path: Path) -> None:
    other = simulate(str(runs["scenario"]), [], None, jobs=1, overrides={"seed": 7, "duration": 1800.0})
    same = simulate(str(runs["scenario"]), [], None, jobs=1, overrides={"duration": 1800.0})
    again = simulate(str(runs["scenario"]), [], None, jobs=1, overrides={"duration": 1800.0})
    assert same == again
    assert other != same


def test_planted_loop_is_found_in_the_mistuned_variant(runs: dict[str, Any]) -> None:
    by = {v["name"]: v for v in runs["a"]["variants"]}
    assert by["baseline"]["loops"] == [] and by["baseline"]["summary"]["evictions"] == 0
    assert by["lnu-usage"]["loops"] == [], by["lnu-usage"]["loops"]
    loops = {f["workload"]: f for f in by["mistuned"]["loops"]}
    assert "Deployment/default/api" in loops
    api = loops["Deployment/default/api"]
    assert api["episodes"] >= 3 and api["placedBack"] >= 3
    assert by["mistuned"]["summary"]["loopEpisodes"] >= api["episodes"]
    # The chain shows an eviction from a node and a pod of the workload placed back on that node.
    chain = api["chain"]
    evicted = [(e["node"], e["t"]) for e in chain if e["event"] == "evicted"]
    back = [(e["node"], e["t"]) for e in chain if e["event"] == "placed back"]
    assert evicted and back
    assert any(n == bn and bt >= t for n, t in evicted for bn, bt in back)
    assert all(e["by"] == "descheduler" for e in chain if e["event"] == "evicted")


def test_usage_based_descheduling_fixes_hot_nodes(runs: dict[str, Any]) -> None:
    by = {v["name"]: v["summary"] for v in runs["a"]["variants"]}
    assert by["baseline"]["hotNodeMinutes"] > 100
    assert by["lnu-usage"]["hotNodeMinutes"] < by["baseline"]["hotNodeMinutes"] / 2
    assert by["lnu-usage"]["cpuSpreadStdMean"] < by["baseline"]["cpuSpreadStdMean"]
    assert 0 < by["lnu-usage"]["evictions"] < by["mistuned"]["evictions"]
    assert by["lnu-usage"]["evictionsByComponent"] == {"descheduler": {"LowNodeUtilization": by["lnu-usage"]["evictions"]}}


def test_outputs_for_notebooks(runs: dict[str, Any]) -> None:
    out = runs["tmp"] / "a"
    doc = json.loads((out / "summary.json").read_text())
    assert [v["name"] for v in doc["variants"]] == list(KEEP)
    comparison = (out / "comparison.csv").read_text().splitlines()
    assert comparison[0] == "metric," + ",".join(KEEP)
    series = (out / "variants" / "baseline" / "series.csv").read_text().splitlines()
    assert series[0].startswith("t,cpu_mean,cpu_std,cpu_max,cpu_range")
    assert len(series) == 1 + 91  # one record a minute, 0..90
    nodes = (out / "variants" / "baseline" / "node_cpu.csv").read_text().splitlines()
    assert nodes[0].split(",")[:3] == ["t", "node-0", "node-1"] and len(nodes[0].split(",")) == 11
    evictions = (out / "variants" / "mistuned" / "evictions.csv").read_text().splitlines()
    assert evictions[0] == "t,pod,workload,node,component,reason" and len(evictions) > 5
    pa = pytest.importorskip("pyarrow.parquet")
    table = pa.read_table(out / "variants" / "mistuned" / "nodes.parquet")
    assert table.column_names == ["t", "node", "cpu", "memory"] and table.num_rows == 91 * 10


def test_cli_json(runs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = short_hotspots(tmp_path, ("baseline",), "20m")
    assert main(["simulate", str(scenario), "--json", "--no-progress", "--no-html", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert doc["scenario"] == "hotspots" and doc["variants"][0]["name"] == "baseline"
    assert doc["variants"][0]["summary"]["podsScheduled"] == 96
    assert not (tmp_path / "o" / "report.html").exists()


def test_cli_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = short_hotspots(tmp_path, ("baseline",), "15m")
    extra = tmp_path / "packing.yaml"
    extra.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                                     "profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {
                                         "scoringStrategy": {"type": "MostAllocated"}}}]}]}))
    assert main(["simulate", str(scenario), "--variant", f"packing={extra}", "--no-progress",
                 "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "hot-node minutes" in out and "baseline" in out and "packing" in out
    assert (tmp_path / "o" / "report.html").exists()


# ---------------------------------------------------------------- the report in a real browser


def _chromium() -> str | None:
    import shutil
    import subprocess

    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    script = ROOT / "scripts" / "install-system-deps.sh"
    if script.exists():
        subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_report_opens_in_headless_chromium(runs: dict[str, Any], tmp_path: Path) -> None:
    """Debian's chromium renders report.html from disk; the DOM it builds has every plot."""
    import re
    import subprocess

    browser = _chromium()
    if browser is None:
        pytest.skip("chromium is not installed and could not be installed (scripts/install-system-deps.sh needs root "
                    "and apt-get)")
    report = runs["tmp"] / "a" / "report.html"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", report.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0 and "<svg" in dom, proc.stderr[-2000:]
    plots = re.findall(r'<svg class="plot[^"]*" data-plot="([^"]+)"', dom)
    for name in ("spread", "hot-nodes", "max-util", "pending", "evictions", "mem-spread"):
        assert name in plots, (name, plots)
    assert plots.count("heatmap-cpu") == len(KEEP) and plots.count("heatmap-requested") == len(KEEP)
    # Every line chart has one line per variant; every heatmap embeds its image.
    assert dom.count('data-series="mistuned"') >= 6
    images = re.findall(r'href="data:image/png;base64,([A-Za-z0-9+/=]+)"', dom)
    assert len(images) == 2 * len(KEEP) and all(len(i) > 100 for i in images)
    assert 'id="comparison"' in dom and "hot-node minutes" in dom
    assert re.search(r'class="loop" data-variant="mistuned" data-workload="Deployment/default/api"', dom)
    # Self-contained: nothing is fetched from the network.
    assert not re.search(r'(src|href)="https?://', dom)
    shot = tmp_path / "report.png"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p2'}",
                           "--window-size=1200,2000", f"--screenshot={shot}", report.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, proc.stderr[-2000:]

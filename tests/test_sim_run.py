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
from kubesched.report.simulation import write_report
from kubesched.sim.engine import Engine
from kubesched.sim.runner import run_simulation, simulate

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
    runs = {}
    for name, jobs in (("a", 1), ("b", 3)):
        run = run_simulation(str(scenario), [], str(tmp / name), jobs=jobs)
        write_report(run)
        runs[name] = run.doc
    return {"tmp": tmp, "scenario": scenario, **runs}


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


@pytest.mark.parametrize("flags", [["-o", "json"], ["--json"], ["-o", "yaml"]])
def test_cli_document(flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-o json and -o yaml print one document (--json is kept for scripts); --no-html writes no report."""
    scenario = short_hotspots(tmp_path, ("baseline",), "20m")
    assert main(["simulate", str(scenario), *flags, "--no-progress", "--no-html", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    doc = yaml.safe_load(out) if "yaml" in flags else json.loads(out)
    assert doc["scenario"] == "hotspots" and doc["variants"][0]["name"] == "baseline"
    assert doc["variants"][0]["summary"]["podsScheduled"] == 96
    assert doc["files"]["report"] is None
    assert not (tmp_path / "o" / "report.html").exists()


def test_cli_without_out_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = short_hotspots(tmp_path, ("baseline",), "15m")
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["simulate", str(scenario), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Nothing was written: add --out DIR" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_cli_figures_need_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = short_hotspots(tmp_path, ("baseline",), "15m")
    assert main(["simulate", str(scenario), "--figures", "png", "--no-progress"]) == 2
    assert "field --figures: saving figures needs a folder: add --out DIR" in capsys.readouterr().err
    assert main(["simulate", str(scenario), "--figures", "gif", "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert "expected a comma-separated list of png, svg, pdf, got 'gif'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


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
    # Counts print as integers, durations as durations (not 2819.0, not 0.0).
    row = next(line for line in out.splitlines() if "hot-node minutes" in line)
    assert ".0" not in row
    wait = next(line for line in out.splitlines() if "scheduling wait, p95" in line)
    assert "0s" in wait and "0.0" not in wait


def test_table_fits_an_80_column_terminal(runs: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Too many variants for 80 columns: several tables, no line longer, labels and numbers whole."""
    from kubesched.report.comparison import simulation_table

    monkeypatch.setenv("COLUMNS", "80")
    doc = dict(runs["a"], variants=runs["a"]["variants"] * 2)  # six columns of numbers
    doc.pop("files")  # file paths are as long as they are
    simulation_table(doc)
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "variants 4–6 of 6" in out
    assert out.count("│ CPU spread: std (mean over time) │") == 2
    assert out.count("eviction loop in mistuned: Deployment/default/api") == 2


def test_a_run_collects_cycles_only_once_the_heap_has_grown() -> None:
    """gc_frozen(collect_after=N): the automatic cyclic GC is off inside; maybe_collect frees reference cycles
    once N more objects exist than after the last collection, not before; a nested block leaves it to the
    outer one; GC state and thresholds come back afterwards."""
    import gc
    import weakref

    from kubesched.api.snapshot import gc_frozen

    class Node:
        def __init__(self) -> None:
            self.me = self

    before = (gc.isenabled(), gc.get_threshold())
    with gc_frozen(collect_after=50_000) as heap:
        assert not gc.isenabled()
        cyc = Node()
        ref = weakref.ref(cyc)
        del cyc
        heap.maybe_collect()
        assert ref() is not None  # too little growth: no collection yet
        with gc_frozen(collect_after=1) as inner:
            keep = [[] for _ in range(60_000)]
            inner.maybe_collect()  # nested: the outer block decides
            assert ref() is not None
        heap.maybe_collect()
        assert ref() is None
        del keep
    assert (gc.isenabled(), gc.get_threshold()) == before
    # Leaving the block scans nothing (what the run made joins the old generation: no young collection of up
    # to N objects as the collector comes back), and freezes nothing for good (a full collection frees it).
    with gc_frozen(collect_after=10**9):
        late = Node()
        late_ref = weakref.ref(late)
        del late
        made = [[] for _ in range(5_000)]
    more = [[] for _ in range(5_000)]
    assert late_ref() is not None and len(made) == len(more)
    gc.collect()
    assert late_ref() is None


def test_a_simulation_leaves_almost_no_reference_cycles(tmp_path: Path) -> None:
    """Why the simulator collects only on growth: a run replaces its objects all the time (a pod object per
    status change) yet makes almost no reference cycles, so memory does not wait on the cyclic GC. The few
    there are belong to the run's set-up: a longer run, with many more pods placed and evicted, leaves
    about as many (a cycle per pod or per event would show as hundreds more)."""
    import gc

    from kubesched.sim.scenario import load_scenario

    def cycles_left(duration: str) -> tuple[int, int]:
        s = load_scenario(str(short_hotspots(tmp_path, ("mistuned",), duration=duration)))
        engine = Engine(s, next(v for v in s.variants if v.name == "mistuned"))
        gc.collect()
        gc.disable()
        try:
            result = engine.run()
            left = gc.collect()
        finally:
            gc.enable()
        return left, len(result.recorder.bindings) + len(result.recorder.evictions)

    short_left, short_changes = cycles_left("10m")
    long_left, long_changes = cycles_left("3h")
    assert long_changes - short_changes > 200
    assert long_left - short_left < 0.1 * (long_changes - short_changes), (short_left, long_left)

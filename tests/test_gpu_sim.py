"""The GPU allocation experiment in the simulator: trace order and tuning, the recorder and its published
layout, determinism per seed, scenario errors."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from kubesched.errors import InputError
from kubesched.report.simulation import write_report
from kubesched.sim.gpu_allocation import allocation_curve, read_published
from kubesched.sim.inflation import tune_pods
from kubesched.sim.runner import run_simulation, simulate
from kubesched.sim.scenario import load_scenario
from kubesched.sim.traces import TracePod

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ROOT / "examples" / "openb" / "variants"


def _write(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def _scenario(tmp: Path, seeds: list[int], variants: list[str], extra: dict[str, Any] | None = None) -> Path:
    _write(tmp / "nodes.csv", ["sn", "cpu_milli", "memory_mib", "gpu", "model"],
           [[f"n{i}", 32000, 131072, g, m] for i, (g, m) in enumerate([(8, "A"), (4, "A"), (2, "B"), (2, "B"),
                                                                         (1, "B"), (8, "A")])])
    rng = np.random.default_rng(5)
    rows = []
    for i in range(40):
        kind = rng.integers(4)
        if kind == 0:
            rows.append([f"pod-{i:03d}", int(rng.choice([2000, 4000])), 4096, 0, 0, ""])
        elif kind == 1:
            rows.append([f"pod-{i:03d}", 2000, 4096, 1, int(rng.choice([250, 500, 700])), ""])
        elif kind == 2:
            rows.append([f"pod-{i:03d}", 4000, 8192, int(rng.choice([1, 2, 4])), 1000, ""])
        else:
            rows.append([f"pod-{i:03d}", 2000, 4096, 1, 1000, "B"])
    _write(tmp / "pods.csv", ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"], rows)
    pub = [["openb_like", "06-FGD", 1.3, s, 25] + [min(k, 90.0) for k in range(131)] for s in (1, 2)]
    _write(tmp / "published.csv", ["workload", "sc_policy", "tune", "seed", "total_gpus"] + [str(k) for k in range(131)],
           pub)
    (tmp / "pods.csv").rename(tmp / "openb_like.csv")
    doc: dict[str, Any] = {
        "apiVersion": "kubesched.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "gpu"},
        "spec": {
            "duration": "2h", "seed": seeds[0], "seeds": seeds, "usageStep": "0s",
            "kubelet": {"housekeepingInterval": "0s"}, "metrics": {"samplingInterval": "0s"},
            "scheduler": {"tieBreak": "seededNodeOrder"},
            "cluster": {"nodeTable": {"file": "nodes.csv", "name": "sn",
                                      "capacity": {"cpu": {"column": "cpu_milli", "unit": "m"},
                                                   "memory": {"column": "memory_mib", "unit": "Mi"},
                                                   "alibabacloud.com/gpu-count": {"column": "gpu"},
                                                   "alibabacloud.com/gpu-milli": {"column": "gpu", "scale": 1000}},
                                      "labels": {"alibabacloud.com/gpu-card-model": "model"}}},
            "workloads": [{"podTrace": {
                "name": "t", "file": "openb_like.csv", "columns": {"name": "name"}, "timing": "sequential",
                "order": "shuffle", "interval": "1s", "onUnschedulable": "drop",
                "inflate": {"resource": "alibabacloud.com/gpu-milli", "factor": 1.3},
                "requests": {"cpu": {"column": "cpu_milli", "unit": "m"},
                             "memory": {"column": "memory_mib", "unit": "Mi"}},
                "gpu": {"count": {"column": "num_gpu"}, "milli": {"column": "gpu_milli"}, "model": "gpu_spec"},
                "template": {"spec": {"schedulerName": "simon-scheduler"}}}}],
            "report": {"recordInterval": "1h", "gpuAllocation": {
                "fragmentation": True, "reference": {"file": "published.csv", "policies": {"fgd": "06-FGD"}}}},
            "variants": [{"name": v, "file": str(VARIANTS / f"{v}.yaml")} for v in variants],
        }}
    for k, v in (extra or {}).items():
        doc["spec"][k] = v
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_allocation_csv_in_the_published_layout(tmp_path: Path) -> None:
    path = _scenario(tmp_path, [1, 2], ["fgd", "gpu-packing"])
    run = run_simulation(str(path), [], str(tmp_path / "out"), jobs=1, finish=write_report)
    doc = run.doc
    rows = _read(tmp_path / "out" / "allocation.csv")
    assert list(rows[0])[:6] == ["workload", "sc_policy", "tune", "seed", "total_gpus", "0"] and "130" in rows[0]
    assert [(r["workload"], r["sc_policy"], r["tune"], r["seed"], r["total_gpus"]) for r in rows] == [
        ("openb_like", "fgd", "1.3", "1", "25"), ("openb_like", "fgd", "1.3", "2", "25"),
        ("openb_like", "gpu-packing", "1.3", "1", "25"), ("openb_like", "gpu-packing", "1.3", "2", "25")]
    for r in rows:
        curve = [float(r[str(k)]) if r[str(k)] else None for k in range(131)]
        present = [k for k, v in enumerate(curve) if v is not None]
        assert present[0] <= 8 and present[-1] >= 100 and len(present) > 30
        # never more allocated than arrived (bins are rounded to whole percents)
        assert all(v <= k + 1.0 for k, v in enumerate(curve) if v is not None)
        assert max(v for v in curve if v is not None) > 50
    frag = _read(tmp_path / "out" / "fragmentation.csv")
    assert len(frag) == 4 and "total_gpus" not in frag[0]
    samples = _read(tmp_path / "out" / "variants" / "fgd" / "seed-1" / "gpu_allocation.csv")
    arrived = [int(s["arrived_milli_gpu"]) for s in samples]
    used = [int(s["used_milli_gpu"]) for s in samples]
    assert arrived == sorted(arrived) and all(u <= a for u, a in zip(used, arrived, strict=True))
    # one sample after each pod, none before the first (upstream logs none then: its cluster has no nodes yet)
    fgd = next(v for v in doc["variants"] if v["name"] == "fgd")
    assert len(samples) == fgd["summary"]["podsCreated"] and arrived[0] <= 8000
    # inflated: the last draw that fits is within a GPU count's milli of 130 % of 25 GPUs
    assert 1.3 * 25000 - 8000 <= arrived[-1] <= 1.3 * 25000 + 7000
    html = (tmp_path / "out" / "report.html").read_text()
    assert "GPU allocation against arrived GPU demand" in html and 'data-chart="gpu-allocation-fgd"' in html
    assert "vs published 06-FGD" in html and "Published: openb_like 06-FGD" in html and 'id="gpu-allocation"' in html
    assert [v["name"] for v in doc["variants"]] == ["fgd", "gpu-packing"] and doc["seeds"] == [1, 2]
    # The summary's GPU metrics (what sweep and tune read) are the first seed's curve at 100 % and 130 %.
    for v in doc["variants"]:
        row = next(r for r in rows if r["sc_policy"] == v["name"] and r["seed"] == "1")
        assert v["summary"]["gpuAllocatedAt100"] == pytest.approx(float(row["100"]) / 100)
        # no sample near 130 % in this small run: no number, as the curve has none
        assert (v["summary"]["gpuAllocatedAt130"] is None) == (row["130"] == "")


def test_same_seed_same_run_and_seeds_differ(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        simulate(str(_scenario(d, [3, 4], ["fgd"])), [], str(d / "out"), jobs=1)
    rows_a = (a / "out" / "allocation.csv").read_text()
    assert rows_a == (b / "out" / "allocation.csv").read_text()
    for seed in (3, 4):
        assert (a / "out" / "variants" / "fgd" / f"seed-{seed}" / "bindings.csv").read_text() == \
            (b / "out" / "variants" / "fgd" / f"seed-{seed}" / "bindings.csv").read_text()
    assert (a / "out" / "variants" / "fgd" / "seed-3" / "bindings.csv").read_text() != \
        (a / "out" / "variants" / "fgd" / "seed-4" / "bindings.csv").read_text()


def test_tuning_follows_the_published_rule() -> None:
    def p(name: str, milli: int, count: int) -> TracePod:
        return TracePod(name, 0.0, None, {}, [], {}, (1000, milli, count, ""))

    pods = [p("b", 1000, 1), p("a", 500, 1), p("c", 1000, 8)]
    demand = lambda t: float(t.gpu_demand)  # noqa: E731
    step = lambda t: float(t.gpu_shape[1]) if t.gpu_shape else 0.0  # noqa: E731
    out = tune_pods(pods, demand, step, 20000.0, np.random.default_rng(1), 1.0)
    total = sum(demand(t) for t in out)
    assert out[:3] == pods and all("-tuned-" in t.name for t in out[3:])
    assert [t.name.split("-tuned-")[1] for t in out[3:]] == [str(i) for i in range(len(out) - 3)]
    # stops at the first draw whose per-GPU milli would pass the target; an 8-GPU clone may overshoot
    assert total <= 20000.0 + 7000 and total > 20000.0 - 1000
    down = tune_pods(pods * 3, demand, step, 5000.0, np.random.default_rng(1), 1.0)
    assert sum(demand(t) for t in down) <= 5000.0 and len(down) < 9


def test_curve_binning_is_merge_alloc_discrete() -> None:
    # 10 GPUs: arrived 0, 1000 (10 %), 1040 (10.4 % → 10), 3000 (30 %); used 0, 1000, 1000, 2500
    curve = allocation_curve([0, 1000, 1040, 3000], [0, 1000, 1000, 2500], 10)
    assert curve[0] == 0.0 and curve[10] == 10.0 and curve[30] == 25.0
    assert curve[11] == 10.0  # no sample at 11: the samples at 10 … 12
    assert curve[20] is None and curve[131 - 1] is None


def test_read_published_rejects_other_layouts(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="published layout"):
        read_published(str(f))


@pytest.mark.parametrize("change,message", [
    ({"workloads": [{"podTrace": {"name": "t", "file": "openb_like.csv", "columns": {"name": "name"},
                                  "order": "shuffle", "requests": {}}}]}, "order shuffle needs timing: sequential"),
    ({"workloads": [{"podTrace": {"name": "t", "file": "openb_like.csv", "columns": {"name": "name"},
                                  "timing": "sequential", "order": "shuffle", "requests": {},
                                  "gpu": {"count": "num_gpu"}}}]}, "spec.workloads[0].podTrace.gpu.milli"),
    ({"seeds": [1, 1]}, "duplicate seed 1"),
    ({"scheduler": {"tieBreak": "alphabetical"}}, "expected random or seededNodeOrder"),
    ({"report": {"gpuAllocation": {"reference": {"file": "nope.csv"}}}}, "file 'nope.csv' does not exist"),
])
def test_scenario_errors(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = _scenario(tmp_path, [1], ["fgd"], change)
    with pytest.raises(InputError, match=re.escape(message)):
        load_scenario(str(path))


def test_cli_bad_gpu_field_is_one_line_exit_2(tmp_path: Path) -> None:
    path = _scenario(tmp_path, [1], ["fgd"], {"scheduler": {"tieBreak": "alphabetical"}})
    r = subprocess.run([sys.executable, "-m", "kubesched", "simulate", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "spec.scheduler.tieBreak" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("argv,message", [
    (["--data", "/nonexistent"], "--data /nonexistent: not a directory"),
    (["--only-trace", "--trace", "/nonexistent.csv"], "--trace /nonexistent.csv: no such file"),
    (["--only-trace", "--trace", "examples/openb/data/openb_pod_list_default.csv", "--seeds", "x"], "--seeds"),
])
def test_compare_script_bad_input(argv: list[str], message: str) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "openb" / "compare.py"), *argv], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2 and message in r.stderr and r.stderr.count("\n") == 1


def test_compare_script_bad_trace(tmp_path: Path) -> None:
    bad = tmp_path / "openb_pod_list_bad.csv"
    bad.write_text("name,cpu_milli\npod-1,1000\n")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "openb" / "compare.py"), "--only-trace", "--trace",
                        str(bad), "--seeds", "1", "--policies", "fgd", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "no column 'memory_mib'" in r.stderr and "Traceback" not in r.stderr

"""`kubesched tune` and `kubesched sweep` through the command line, on the local engine and on Ray.

Tiny inputs: the hotspots example cut to 50 minutes, a space of three LowNodeUtilization / TargetLoadPacking
parameters, six trials of two seeds; a sweep of two variants × two intervals × two seeds. One Ray instance
(2 CPUs) serves every Ray test of the module.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli import main
from kubesched.errors import InputError
from kubesched.sim.runner import run_scenario, simulate
from kubesched.sim.scenario import VariantSpec, load_scenario, load_variant_file
from kubesched.tune import engines, study, sweep
from kubesched.tune.documents import get_path, parse_path, set_path
from kubesched.tune.objectives import (
    SUMMARY_METRICS,
    Choice,
    Objective,
    choose,
    pareto_front,
    parse_constraints,
    violations,
)
from kubesched.tune.runs import SeriesMetric

ROOT = Path(__file__).resolve().parent.parent
HOTSPOTS = ROOT / "examples" / "hotspots" / "scenario.yaml"
LNU = "descheduler.policy.profiles[name=balance].pluginConfig[name=LowNodeUtilization].args"
TLP = "scheduler.config.profiles[schedulerName=default-scheduler].pluginConfig[name=TargetLoadPacking].args"


def _scenario(tmp: Path) -> Path:
    doc = yaml.safe_load(HOTSPOTS.read_text())
    spec = doc["spec"]
    spec["duration"] = "50m"
    spec["events"] = [e for e in spec["events"] if e.get("at") != "4h"]
    spec["variants"] = [dict(v, file=str(HOTSPOTS.parent / v["file"])) for v in spec["variants"]
                        if v["name"] in ("lnu-usage", "mistuned")]
    p = tmp / "hotspots.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _space(tmp: Path, **changes: Any) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "kubesched.io/v1alpha1", "kind": "TuneSpace", "metadata": {"name": "tiny"},
        "spec": {
            "base": str(HOTSPOTS.parent / "variants" / "lnu-usage.yaml"),
            "parameters": [
                {"name": "low", "path": f"{LNU}.thresholds.cpu", "int": {"low": 20, "high": 50, "step": 10}},
                {"name": "gap", "path": f"{LNU}.targetThresholds.cpu", "int": {"low": 10, "high": 40, "step": 10},
                 "plus": "low"},
                {"name": "target", "path": f"{TLP}.targetUtilization", "int": {"low": 40, "high": 90, "step": 10}},
            ],
            "sampler": {"name": "tpe", "seed": 7, "batch": 3, "startupTrials": 3},
            "trials": 6,
            "seeds": 2,
        },
    }
    doc["spec"].update(changes)
    p = tmp / "space.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _sweep(tmp: Path, scenario: Path) -> Path:
    doc = {
        "apiVersion": "kubesched.io/v1alpha1", "kind": "Sweep", "metadata": {"name": "tiny"},
        "spec": {
            "scenarios": [str(scenario)],
            "variants": ["lnu-usage", "mistuned"],
            "seeds": [1, 2],
            "parameters": [{"name": "interval", "path": "descheduler.interval", "values": ["2m", "5m"]}],
            "metrics": [{"name": "hotNodesLast", "series": "hot_nodes", "reduce": "last"},
                        {"name": "cpuMeanAtHalf", "series": "cpu_mean", "at": {"series": "t", "value": 1500}}],
            "report": {"metrics": ["hotNodeMinutes", "evictions", "hotNodesLast"]},
        },
    }
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("tune")
    scenario = _scenario(tmp)
    return {"tmp": tmp, "scenario": scenario, "space": _space(tmp), "sweep": _sweep(tmp, scenario)}


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    """One local Ray instance with 2 CPUs for every Ray test here (the engine uses it and leaves it running)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _tune(inputs: dict[str, Path], out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code, stdout, err = _cli(["tune", str(inputs["scenario"]), "--space", str(inputs["space"]), "--out", str(out),
                              "--no-progress", "--json", *extra], capsys)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(stdout)
    return doc


def _trials_table(out: Path) -> list[dict[str, str]]:
    with (out / "trials.csv").open() as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def local_study(inputs: dict[str, Path]) -> dict[str, Any]:
    """The tiny study on the local engine with one worker (runs in this process) and with two."""
    out1, out2 = inputs["tmp"] / "study-1", inputs["tmp"] / "study-2"
    doc1 = study.tune(str(inputs["scenario"]), str(inputs["space"]), str(out1), study.TuneOptions(workers=1))
    doc2 = study.tune(str(inputs["scenario"]), str(inputs["space"]), str(out2), study.TuneOptions(workers=2))
    return {"one": (out1, doc1), "two": (out2, doc2)}


# ---------------------------------------------------------------- tune


def test_tune_cli_local_finds_a_feasible_front_and_writes_documents(inputs: dict[str, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tune"
    doc = _tune(inputs, out, capsys, "--workers", "2")
    assert len(doc["trials"]) == 6 and doc["engine"] == "local" and doc["seeds"] == [42, 43]
    states = {t["state"] for t in doc["trials"]}
    assert states <= {"COMPLETE", "PRUNED", "FAIL"}
    chosen = [t for t in doc["trials"] if t["chosen"]]
    assert len(chosen) == 1 and chosen[0]["feasible"] and chosen[0]["pareto"]
    # The front: feasible trials no other feasible trial dominates.
    feasible = [t for t in doc["trials"] if t["feasible"]]
    for t in feasible:
        dominated = any(all(a <= b for a, b in zip(u["values"], t["values"], strict=True)) and u["values"] != t["values"]
                        for u in feasible)
        assert t["pareto"] == (not dominated)
    # Constraints are judged on the worst seed: a feasible trial has no loop on any seed.
    assert all(t["scores"]["loopEpisodes.worst"] == 0 for t in feasible)
    # Pruned trials broke a worst-seed constraint on their first seed and ran no more.
    for t in doc["trials"]:
        if t["state"] == "PRUNED":
            assert t["seedsRun"] == 1 and t["pruned"]
    # The scenario's variants were run on the same seeds: the planted loop breaks the constraint.
    variants = {v["name"]: v for v in doc["variants"]}
    assert set(variants) == {"lnu-usage", "mistuned"}
    assert variants["mistuned"]["scores"]["loopEpisodes.worst"] > 0 and variants["mistuned"]["violations"][0] > 0
    # Ready-to-apply documents with the chosen values written in.
    policy = yaml.safe_load((out / "policy.yaml").read_text())
    args = policy["profiles"][0]["pluginConfig"][1]["args"]
    p = chosen[0]["params"]
    assert args["thresholds"]["cpu"] == p["low"] and args["targetThresholds"]["cpu"] == p["low"] + p["gap"]
    sched = yaml.safe_load((out / "scheduler-config.yaml").read_text())
    assert sched["kind"] == "KubeSchedulerConfiguration"
    assert sched["profiles"][0]["pluginConfig"][0]["args"]["targetUtilization"] == p["target"]
    assert (out / "report.html").exists() and (out / "study.journal").exists()
    table = _trials_table(out)
    assert [int(r["number"]) for r in table] == list(range(6))


def test_chosen_documents_are_accepted_and_reproduce_the_trial(inputs: dict[str, Path], local_study: dict[str, Any],
                                                               tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, doc = local_study["one"]
    chosen = next(t for t in doc["trials"] if t["chosen"])
    # kubesched simulate --variant reads the Variant and gives the trial's numbers seed by seed.
    per_seed = []
    for seed in doc["seeds"]:
        r = simulate(str(inputs["scenario"]), [f"tuned={out / 'variant.yaml'}"], None, jobs=1, overrides={"seed": seed})
        per_seed.append(next(v for v in r["variants"] if v["name"] == "tuned")["summary"])
    mean = sum(s["hotNodeMinutes"] for s in per_seed) / len(per_seed)
    assert mean == pytest.approx(chosen["scores"]["hotNodeMinutes.mean"])
    assert max(s["evictions"] for s in per_seed) == chosen["scores"]["evictions.worst"]
    # kubesched deschedule and schedule take the documents as they are.
    snapshot = ROOT / "examples" / "hotspot-descheduling" / "snapshot.yaml"
    code, _, err = _cli(["deschedule", "--snapshot", str(snapshot), "--policy", str(out / "policy.yaml"), "-o", "json",
                         "--now", "2025-01-06T12:00:00Z"], capsys)
    assert code == 0, err
    code, _, err = _cli(["schedule", "--snapshot", str(ROOT / "examples" / "cluster" / "snapshot.yaml"), "--config",
                         str(out / "scheduler-config.yaml"), "-o", "json", "--now", "2025-01-06T12:00:00Z"], capsys)
    assert code == 0, err


def test_same_study_with_one_or_two_workers(local_study: dict[str, Any]) -> None:
    (out1, doc1), (out2, doc2) = local_study["one"], local_study["two"]
    assert (out1 / "trials.csv").read_bytes() == (out2 / "trials.csv").read_bytes()
    assert [t["params"] for t in doc1["trials"]] == [t["params"] for t in doc2["trials"]]
    assert (out1 / "policy.yaml").read_bytes() == (out2 / "policy.yaml").read_bytes()


def test_another_sampler_seed_gives_another_study(inputs: dict[str, Path], local_study: dict[str, Any],
                                                  tmp_path: Path) -> None:
    doc = study.tune(str(inputs["scenario"]), str(inputs["space"]), str(tmp_path / "s"),
                     study.TuneOptions(workers=1, sampler_seed=8))
    assert [t["params"] for t in doc["trials"]] != [t["params"] for t in local_study["one"][1]["trials"]]


def test_nsga2_study_is_the_same_with_one_or_two_workers(inputs: dict[str, Path], tmp_path: Path) -> None:
    space = _space(tmp_path, trials=8, seeds=1, sampler={"name": "nsga2", "seed": 3, "batch": 4, "populationSize": 4})
    docs = [study.tune(str(inputs["scenario"]), str(space), str(tmp_path / f"w{w}"), study.TuneOptions(workers=w))
            for w in (1, 2)]
    assert len(docs[0]["trials"]) == 8
    assert (tmp_path / "w1" / "trials.csv").read_bytes() == (tmp_path / "w2" / "trials.csv").read_bytes()


class _Interrupting:
    """Wraps an engine: after `after` results, the run is interrupted as by Ctrl-C."""

    def __init__(self, inner: engines.Engine, after: int) -> None:
        self.inner, self.after, self.seen = inner, after, 0
        self.name, self.workers = inner.name, inner.workers

    def run(self, tasks: Any) -> Iterator[dict[str, Any]]:
        for r in self.inner.run(tasks):
            if self.seen >= self.after:
                raise KeyboardInterrupt
            self.seen += 1
            yield r

    def close(self) -> None:
        self.inner.close()


def test_tune_resumes_after_interruption(inputs: dict[str, Path], local_study: dict[str, Any], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "resume"
    real = study.make_engine
    # 2 variant runs, then 2 of the first batch's 3 trials: trial results are lost mid-batch.
    monkeypatch.setattr(study, "make_engine", lambda *a, **k: _Interrupting(real(*a, **k), 4))
    code, _, err = _cli(["tune", str(inputs["scenario"]), "--space", str(inputs["space"]), "--out", str(out),
                         "--workers", "1", "--no-progress"], capsys)
    assert code == 130 and "interrupted" in err  # Ctrl-C: exit 130, one line (kubesched.cli._run)
    monkeypatch.setattr(study, "make_engine", real)
    optuna = study._optuna()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    left = optuna.load_study(study_name=study.STUDY_NAME,
                             storage=JournalStorage(JournalFileBackend(str(out / study.STUDY_FILE))))
    states = sorted(t.state.name for t in left.get_trials())
    assert states.count("RUNNING") == 1 and len(states) == 3
    doc = _tune(inputs, out, capsys, "--workers", "1")
    assert len(doc["trials"]) == 6
    assert (out / "trials.csv").read_bytes() == (local_study["one"][0] / "trials.csv").read_bytes()


def test_trial_with_invalid_documents_fails_and_nothing_is_chosen(inputs: dict[str, Path], tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    space = _space(tmp_path, trials=2, seeds=1, parameters=[
        {"name": "low", "path": f"{LNU}.thresholds.cpu", "int": {"low": 90, "high": 90}},
        {"name": "gap", "path": f"{LNU}.targetThresholds.cpu", "int": {"low": 20, "high": 30, "step": 10}, "plus": "low"},
    ])
    out = tmp_path / "o"
    code, stdout, err = _cli(["tune", str(inputs["scenario"]), "--space", str(space), "--out", str(out), "--workers", "1",
                              "--no-progress"], capsys)
    assert code == 0, err
    rows = _trials_table(out)
    assert [r["state"] for r in rows] == ["FAIL", "FAIL"]
    assert all("targetThresholds.cpu" in r["note"] and "not in [0, 100] range" in r["note"] for r in rows)
    assert "no trial met every constraint" in stdout and not (out / "policy.yaml").exists()
    assert "No trial met every constraint" in (out / "report.html").read_text()


def test_study_of_other_inputs_is_refused(inputs: dict[str, Path], local_study: dict[str, Any],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = local_study["one"]
    code, stdout, err = _cli(["tune", str(inputs["scenario"]), "--space", str(inputs["space"]), "--out", str(out),
                              "--seeds", "3", "--no-progress"], capsys)
    assert code == 2 and stdout == ""
    assert err.count("\n") == 1 and "study.journal holds a study of other inputs (different seeds)" in err


def test_tune_on_ray_gives_the_local_study(inputs: dict[str, Path], local_study: dict[str, Any], ray_instance: None,
                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ray"
    doc = _tune(inputs, out, capsys, "--engine", "ray")
    assert doc["engine"] == "ray" and doc["workers"] == 2
    assert (out / "trials.csv").read_bytes() == (local_study["one"][0] / "trials.csv").read_bytes()
    assert (out / "policy.yaml").read_bytes() == (local_study["one"][0] / "policy.yaml").read_bytes()


# ---------------------------------------------------------------- sweep


def _rows(out: Path) -> list[dict[str, Any]]:
    rows = sweep.read_runs(out / sweep.RUNS_DIR)
    for r in rows:
        r.pop("wallSeconds")
    return sorted(rows, key=lambda r: r["inputsHash"])


@pytest.fixture(scope="module")
def local_sweep(inputs: dict[str, Path]) -> Path:
    out = inputs["tmp"] / "sweep-local"
    code = main(["sweep", str(inputs["sweep"]), "--out", str(out), "--workers", "2", "--no-progress"])
    assert code == 0
    return out


def test_sweep_cli_local_writes_one_row_per_run(local_sweep: Path, inputs: dict[str, Path]) -> None:
    rows = _rows(local_sweep)
    assert len(rows) == 2 * 2 * 2 and len({r["inputsHash"] for r in rows}) == 8
    assert {(r["variant"], r["param.interval"], r["seed"]) for r in rows} == {
        (v, i, s) for v in ("lnu-usage", "mistuned") for i in ("2m", "5m") for s in (1, 2)}
    assert all(r["error"] is None and r["scenario"] == "hotspots" for r in rows)
    for m in SUMMARY_METRICS:
        assert m in rows[0]
    # A row is the run: the same scenario, variant documents and seed through simulate give the same summary.
    r = next(r for r in rows if r["variant"] == "mistuned" and r["param.interval"] == "2m" and r["seed"] == 2)
    s = load_scenario(str(inputs["scenario"]))
    doc = yaml.safe_load((HOTSPOTS.parent / "variants" / "mistuned.yaml").read_text())
    doc["spec"]["descheduler"]["interval"] = "2m"
    vfile = inputs["tmp"] / "mistuned-2m.yaml"
    vfile.write_text(yaml.safe_dump(doc))
    data = run_scenario(dataclasses.replace(s, seed=2), load_variant_file("mistuned", str(vfile)))
    for m in ("hotNodeMinutes", "evictions", "loopEpisodes", "pendingLongest"):
        assert r[m] == pytest.approx(float(data["summary"][m]))
    assert r["hotNodesLast"] == data["series"]["hot_nodes"][-1]
    summary = list(csv.DictReader((local_sweep / "summary.csv").open()))
    assert {(e["factor"], e["level"]) for e in summary} == {("variant", "lnu-usage"), ("variant", "mistuned"),
                                                           ("interval", "2m"), ("interval", "5m")}
    assert all(e["runs"] == "4" for e in summary)


def test_sweep_resumes_and_skips_runs_already_done(inputs: dict[str, Path], local_sweep: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    real = sweep.make_engine
    monkeypatch.setattr(sweep, "make_engine", lambda *a, **k: _Interrupting(real(*a, **k), 3))
    code, _, err = _cli(["sweep", str(inputs["sweep"]), "--out", str(out), "--workers", "1", "--no-progress"], capsys)
    assert code == 130 and "interrupted" in err  # Ctrl-C: exit 130, one line (kubesched.cli._run)
    assert len(_rows(out)) == 3  # what was done is on disk, whole
    monkeypatch.setattr(sweep, "make_engine", real)
    code, stdout, err = _cli(["sweep", str(inputs["sweep"]), "--out", str(out), "--workers", "1", "--no-progress",
                              "--json"], capsys)
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["skipped"] == 3 and doc["ran"] == 5 and doc["done"] == 8
    assert _rows(out) == _rows(local_sweep)
    doc = sweep.sweep(str(inputs["sweep"]), str(out))
    assert doc["ran"] == 0 and doc["skipped"] == 8 and len(_rows(out)) == 8


def test_sweep_on_ray_gives_the_local_rows(inputs: dict[str, Path], local_sweep: Path, ray_instance: None,
                                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ray"
    code, stdout, err = _cli(["sweep", str(inputs["sweep"]), "--out", str(out), "--engine", "ray", "--no-progress",
                              "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)["engine"] == "ray"
    assert _rows(out) == _rows(local_sweep)
    assert (out / "summary.csv").read_bytes() == (local_sweep / "summary.csv").read_bytes()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(("changes", "message"), [
    ({"parameters": [{"name": "x", "path": f"{LNU}.thresholds.cpu", "int": {"low": 5, "high": 1}}]},
     "field spec.parameters[0].int.high: expected high ≥ low"),
    ({"parameters": [{"name": "x", "path": "descheduler.policy.profiles[name=nope].pluginConfig", "choices": [[]]}]},
     "field spec.parameters[0].choices: descheduler.policy.profiles has 0 element(s) with name=nope, expected one"),
    ({"parameters": [{"name": "x", "path": "kubelet.config.evictionHard", "choices": [{}]}]},
     "the base variant has no kubelet to change"),
    ({"parameters": [{"name": "x", "path": "scheduler.profiles", "choices": [1]}]},
     "field spec.parameters[0].path: expected scheduler.config..."),
    ({"parameters": [{"name": "a", "path": f"{LNU}.thresholds.cpu", "choices": [10, 20]},
                     {"name": "b", "path": f"{LNU}.targetThresholds.cpu", "int": {"low": 1, "high": 5}, "plus": "a"}]},
     "field spec.parameters[1].plus: expected the name of an int, float or duration parameter listed before"),
    ({"objectives": [{"metric": "hotMinutes"}]}, "field spec.objectives[0].metric: unknown metric 'hotMinutes'"),
    ({"constraints": [{"metric": "pendingLongest", "max": "soon"}]},
     "field spec.constraints[0].max: expected a duration"),
    ({"sampler": {"name": "cmaes"}}, "field spec.sampler.name: expected one of tpe, nsga2, random"),
    ({"constraints": [{"metric": "evictions", "max": {"variant": "lnu-requests"}}]},
     "field spec.constraints[0].max.variant: the scenario has no variant 'lnu-requests' (it has: lnu-usage, mistuned)"),
])
def test_bad_space_exits_2_with_one_line(inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         changes: dict[str, Any], message: str) -> None:
    space = _space(tmp_path, **changes)
    code, stdout, err = _cli(["tune", str(inputs["scenario"]), "--space", str(space), "--out", str(tmp_path / "o"),
                              "--no-progress"], capsys)
    assert code == 2 and stdout == "" and err.count("\n") == 1 and "Traceback" not in err
    assert str(space) in err and message in err, err
    assert not (tmp_path / "o").exists()


def test_bad_sweep_and_options_exit_2(inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = yaml.safe_load(inputs["sweep"].read_text())
    doc["spec"]["variants"] = ["lnu-usage", "nope"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    code, _, err = _cli(["sweep", str(bad), "--out", str(tmp_path / "o"), "--no-progress"], capsys)
    assert code == 2 and "scenario 'hotspots' has no variant 'nope'" in err and err.count("\n") == 1
    code, _, err = _cli(["sweep", str(inputs["sweep"]), "--out", str(tmp_path / "o"), "--address", "127.0.0.1:1",
                         "--no-progress"], capsys)
    assert code == 2 and "--address is for --engine ray" in err
    assert not (tmp_path / "o").exists()
    code, _, err = _cli(["tune", str(inputs["scenario"]), "--space", str(tmp_path / "missing.yaml"), "--no-progress"],
                        capsys)
    assert code == 2 and "field --space: file" in err


def test_unreachable_ray_cluster_exits_1_with_one_line(inputs: dict[str, Path], tmp_path: Path) -> None:
    # In a process of its own: a Ray instance this module started would be used whatever --address says.
    import socket
    import sys

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "kubesched", "sweep", str(inputs["sweep"]), "--out", str(tmp_path / "o"),
                           "--engine", "ray", "--address", f"127.0.0.1:{port}", "--no-progress"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused"]
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- pieces


def test_paths_set_and_get() -> None:
    tree: dict[str, Any] = {"descheduler": {"policy": {"profiles": [{"name": "a", "pluginConfig": [
        {"name": "X", "args": {"thresholds": {"cpu": 10}}}]}]}, "interval": "5m"}}
    steps = parse_path("descheduler.policy.profiles[name=a].pluginConfig[0].args.thresholds.memory", "p")
    set_path(tree, steps, 30, "p")
    assert get_path(tree, steps) == 30
    assert tree["descheduler"]["policy"]["profiles"][0]["pluginConfig"][0]["args"]["thresholds"] == {"cpu": 10,
                                                                                                      "memory": 30}
    for bad in ("descheduler..policy", "descheduler.policy[", "nodes.x", "descheduler.other"):
        with pytest.raises(InputError) as e:
            parse_path(bad, "p")
        assert repr(bad) in e.value.message


def test_summary_metrics_are_what_a_run_reports(inputs: dict[str, Path]) -> None:
    data = run_scenario(load_scenario(str(inputs["scenario"])), VariantSpec(name="default"))
    numeric = {k for k, v in data["summary"].items() if v is None or isinstance(v, (int, float))}
    assert numeric == set(SUMMARY_METRICS)


def test_series_metric_at_interpolates() -> None:
    import numpy as np

    series = {"x": np.array([0.0, 0.5, 1.0, 1.5]), "y": np.array([0.0, 0.4, 0.8, 0.9])}
    assert SeriesMetric("m", "y", "at", "x", 0.75).value(series) == pytest.approx(0.6)
    assert np.isnan(SeriesMetric("m", "y", "at", "x", 2.0).value(series))
    assert SeriesMetric("m", "y", "last").value(series) == pytest.approx(0.9)
    assert SeriesMetric("m", "y", "max").value(series) == pytest.approx(0.9)


def test_constraint_bound_by_a_variant() -> None:
    (c,) = parse_constraints([{"metric": "evictions", "max": {"variant": "lnu-usage"}, "score": "mean"}], "c", "f")
    r = c.resolved({"lnu-usage": {"evictions.mean": 15.5, "evictions.worst": 17.0}})
    assert r.bound == 15.5 and r.upper and "(variant lnu-usage)" in r.text()
    assert violations({"evictions.mean": 12.0}, [r]) == [-3.5]
    assert violations({"evictions.mean": 16.0}, [r]) == [0.5]
    (n,) = parse_constraints([{"metric": "pendingLongest", "max": "10m"}], "c", "f")
    assert n.resolved({}) is n and n.bound == 600 and n.score == "worst"


def test_front_and_choice() -> None:
    objs = [Objective("hotNodeMinutes"), Objective("evictions")]
    pts = [(0, [100.0, 50.0]), (1, [200.0, 10.0]), (2, [150.0, 20.0]), (3, [300.0, 60.0]), (4, [110.0, 45.0])]
    assert sorted(pareto_front(pts, objs)) == [0, 1, 2, 4]
    # Normalised over the front: 2 is nearest the ideal (100, 10).
    assert choose(pts, objs, Choice("closestToIdeal")) == 2
    assert choose(pts, objs, Choice("weights", (("hotNodeMinutes", 1.0), ("evictions", 10.0)))) == 1
    assert choose(pts, objs, Choice("weights", (("hotNodeMinutes", 1.0), ("evictions", 2.0)))) == 2
    assert choose(pts, objs, Choice("weights", (("hotNodeMinutes", 1.0),))) == 0
    assert choose([], objs, Choice("closestToIdeal")) is None


def test_tune_report_is_self_contained_and_renders(local_study: dict[str, Any], tmp_path: Path) -> None:
    import os
    import shutil

    out, doc = local_study["one"]
    html = (out / "report.html").read_text()
    # Nothing is fetched: no external script, stylesheet or image (plotly.js itself is inlined).
    outside_scripts = re.sub(r"<script>.*?</script>", "", html, flags=re.S)
    assert not re.search(r'(src|href)="https?://', outside_scripts)
    assert not re.search(r"<script[^>]+src=", html)
    assert html.count("Plotly.newPlot") >= 3 and 'id="tune-objectives"' in html
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is required in CI (scripts/install-system-deps.sh)")
        pytest.skip("chromium is not installed")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                           (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # plotly.js ran from the inlined copy: each chart became an SVG plot.
    assert proc.stdout.count('class="main-svg"') >= 3
    chosen = next(t for t in doc["trials"] if t["chosen"])
    assert f"chosen (trial {chosen['number']})" in proc.stdout


def test_a_warning_of_every_run_is_reported_once(inputs: dict[str, Path], tmp_path: Path,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    """Workers send their warnings back with their results; the driver says each once (not once a run, and
    not on the workers' own stderr)."""
    doc = {"apiVersion": "kubesched.io/v1alpha1", "kind": "Sweep", "metadata": {"name": "old-config"},
           "spec": {"scenarios": [str(inputs["scenario"])], "variants": ["lnu-usage"], "seeds": [1, 2, 3],
                    "parameters": [{"name": "version", "path": "scheduler.config.apiVersion",
                                    "values": ["kubescheduler.config.k8s.io/v1beta3"]}]}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    code = main(["sweep", str(path), "--out", str(tmp_path / "out"), "--workers", "2", "--no-progress"])
    err = capfd.readouterr().err
    assert code == 0, err
    converted = [line for line in err.splitlines() if line.startswith("warning: variant lnu-usage#scheduler.config")
                 and "converted to v1" in line]
    assert len(converted) == 1, err
    assert len(_rows(tmp_path / "out")) == 3

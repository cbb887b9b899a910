"""Gangs in the simulator: the bundled examples/gang scenario (the default profile deadlocks two jobs that
each hold half the GPUs; Coscheduling runs one after the other), byte-for-byte determinism, PodGroups made
for labelled Jobs, the PodGroup controller's phases, and the report's gang section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.api.scheduling import PodGroup
from kubesched.report.simulation import write_report
from kubesched.sim.engine import Engine
from kubesched.sim.runner import run_simulation
from kubesched.sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
GANG = ROOT / "examples" / "gang" / "scenario.yaml"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("gang")
    docs = {}
    for name, jobs in (("a", 1), ("b", 2)):
        run = run_simulation(str(GANG), [], str(tmp / name), jobs=jobs)
        write_report(run)
        docs[name] = run.doc
    return {"tmp": tmp, **docs}


def _summary(doc: dict[str, Any], variant: str) -> dict[str, Any]:
    return next(v["summary"] for v in doc["variants"] if v["name"] == variant)


def test_default_profile_deadlocks_both_jobs(runs: dict[str, Any]) -> None:
    s = _summary(runs["a"], "default")
    assert s["gangs"] == 2 and s["gangsStarted"] == 0 and s["gangsFinished"] == 0
    # Each job holds half the GPUs, idle, for the whole hour.
    assert s["partialGangGpusAtEnd"] == s["clusterGpus"] == 8
    assert s["partialGangGpuHours"] == pytest.approx(8.0, abs=0.01)
    assert s["podsScheduled"] == 8 and s["pendingMax"] == 8


def test_coscheduling_runs_one_job_then_the_other(runs: dict[str, Any]) -> None:
    s = _summary(runs["a"], "coscheduling")
    assert s["gangsStarted"] == 2 and s["gangsFinished"] == 2
    assert s["partialGangGpusAtEnd"] == 0
    # Held only while a gang's pods are assumed or starting (seconds, not hours).
    assert s["partialGangGpuHours"] < 0.05
    # The second gang waits for the first one's 10 minutes of work.
    assert 600 <= s["gangWaitMax"] <= 660


def test_same_scenario_same_bytes(runs: dict[str, Any]) -> None:
    a, b = _files(runs["tmp"] / "a"), _files(runs["tmp"] / "b")
    assert sorted(a) == sorted(b) and "report.html" in a
    assert [name for name in a if a[name] != b[name]] == []


def test_report_has_the_gang_section(runs: dict[str, Any]) -> None:
    html = (runs["tmp"] / "a" / "report.html").read_text()
    assert 'id="gangs"' in html and 'id="gang-summary"' in html and 'id="gang-detail"' in html
    # The held-GPU chart is drawn (not the sentence of an empty chart): the default variant holds 8 GPUs.
    assert 'data-chart="gang-held-gpus"' in html and '<div class="chart empty" data-chart="gang-held-gpus"' not in html
    assert "(never started)" in html  # the default variant's gangs
    assert "8 of 8 GPUs held idle by gangs below quorum at the end" in html  # the findings' sentence
    csv = (runs["tmp"] / "a" / "comparison.csv").read_text()
    assert "partialGangGpuHours" in csv and "gangsFinished" in csv


def _scenario_with_jobs(tmp: Path, job_objects: list[dict[str, Any]], variant: str | None) -> Path:
    doc = yaml.safe_load(GANG.read_text())
    spec = doc["spec"]
    spec["workloads"] = [{"object": o, "jobDuration": "5m"} for o in job_objects]
    spec["events"] = []
    spec["duration"] = "30m"
    spec["variants"] = [] if variant is None else [
        {"name": "cosched", "file": str(GANG.parent / "variants" / "coscheduling.yaml")}]
    p = tmp / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _job(name: str, parallelism: int, group: str | None) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "w", "image": "x", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                                             "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def test_a_labelled_job_without_a_pod_group_gets_one(tmp_path: Path) -> None:
    scenario = load_scenario(str(_scenario_with_jobs(tmp_path, [_job("solo", 3, "solo-group")], None)))
    engine = Engine(scenario)
    pg = engine.cluster.others.get("PodGroup/ml/solo-group")
    assert isinstance(pg, PodGroup) and pg.min_member == 3
    result = engine.run()
    gangs = {g["podGroup"]: g for g in result.gangs["gangs"]}
    assert gangs["ml/solo-group"]["startedInRun"] and gangs["ml/solo-group"]["phase"] == "Finished"
    assert any(e["event"] == "podGroupCreated" for e in result.recorder.events)
    phases = [e["phase"] for e in result.recorder.events if e["event"] == "podGroupPhase"]
    # The controller's path: Pending, Scheduling once its pods exist, Running, then Finished.
    assert phases[:2] == ["Pending", "Scheduling"] and "Running" in phases and phases[-1] == "Finished"


def test_runs_without_pod_groups_report_no_gangs(tmp_path: Path) -> None:
    scenario = load_scenario(str(_scenario_with_jobs(tmp_path, [_job("plain", 2, None)], None)))
    result = Engine(scenario).run()
    assert result.gangs == {}

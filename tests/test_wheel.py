"""The package as a library user gets it: a wheel that builds, installs into a fresh environment and runs
outside the repository (the examples are not in the wheel: a user copies a folder and points at it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.test_readme_commands import fresh_env

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=fresh_env(), capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_repository(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)], tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    wheels = list(dist.glob("kubesched-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "kubesched/py.typed" in names and "kubesched/report/figures.py" in names and "kubesched/cli.py" in names
    assert not [n for n in names if n.startswith(("tests/", "examples/", "bench/"))]
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "kubesched = kubesched.cli:main" in zipfile.ZipFile(wheels[0]).read(entry).decode()

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)], tmp_path).returncode == 0
    installed = _run([str(venv / "bin" / "pip"), "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheels[0])],
                     tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]

    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(ROOT / "examples" / "hotspots", elsewhere / "hotspots")
    version = _run([str(venv / "bin" / "kubesched"), "--version"], elsewhere)
    assert version.returncode == 0 and version.stdout.strip() == "kubesched 0.1.0"
    where = _run([str(venv / "bin" / "python"), "-c", "import kubesched.report.figures as f; print(f.__file__)"],
                 elsewhere)
    assert where.returncode == 0 and where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    sim = _run([str(venv / "bin" / "kubesched"), "simulate", "hotspots/scenario.yaml", "--duration", "30m",
                "--out", "out"], elsewhere)
    assert sim.returncode == 0, sim.stderr[-3000:]
    assert "hot-node minutes" in sim.stdout
    report = (elsewhere / "out" / "report.html").read_text()
    assert report.count("Plotly.newPlot") > 10 and "Simulation: hotspots" in report
    bad = _run([str(venv / "bin" / "kubesched"), "simulate", "missing.yaml"], elsewhere)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "missing.yaml" in bad.stderr

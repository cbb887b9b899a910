"""More upstream test cases as data (tests/golden_extra/<area>/), run through the CLI by check.py.

These are cases we translated ourselves from the same upstream test tables as tests/golden (the gaps in
its numbering and neighbouring table entries); each fixture's `source` and `notes` say where it comes
from. One test per folder, found when the tests are collected, so a folder added later runs without
touching this file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXTRA = HERE / "golden_extra"
CHECK = HERE / "golden" / "check.py"
FOLDERS = sorted(p for p in EXTRA.iterdir() if p.is_dir()) if EXTRA.is_dir() else []


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_golden_extra_folder(folder: Path) -> None:
    if not any(folder.rglob("*.json")):
        pytest.skip(f"{folder.name}: no fixtures yet")
    cmd = [sys.executable, str(CHECK), "--kubesched", f"{sys.executable} -m kubesched", str(folder)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, f"{folder.name}: {last}\n{proc.stdout}{proc.stderr}"
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), last

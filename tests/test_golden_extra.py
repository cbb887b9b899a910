"""More upstream test cases as data (tests/golden_extra/<area>/), run through the CLI by check.py.

These are cases we translated ourselves from the same upstream test tables as tests/golden (the gaps in
its numbering and neighbouring table entries); each fixture's `source` and `notes` say where it comes
from. One test per folder, found when the tests are collected, so a folder added later runs without
touching this file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden_runner import run_fixtures

HERE = Path(__file__).parent
EXTRA = HERE / "golden_extra"
FOLDERS = sorted(p for p in EXTRA.iterdir() if p.is_dir()) if EXTRA.is_dir() else []


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_golden_extra_folder(folder: Path) -> None:
    files = sorted(folder.rglob("*.json"))
    if not files:
        pytest.skip(f"{folder.name}: no fixtures yet")
    res = run_fixtures(files)
    assert res.failed == 0 and res.passed == len(files), \
        f"{folder.name}: {res.passed} passed, {res.failed} failed\n{res.output}"

"""Upstream test cases translated to data (tests/golden, a copy of shared/golden), run through the CLI.

Each area runs every fixture with check.py (in parallel chunks); the test fails if any case fails and
prints the failures. When the shared folder beside the repository has cases not copied here, they run too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.golden_runner import run_fixtures

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
SHARED = HERE.parent.parent / "shared" / "golden"
AREAS = ["scheduler", "descheduler", "kubelet", "loadaware"]


@pytest.mark.parametrize("area", AREAS)
def test_golden_area(area: str) -> None:
    files = sorted((GOLDEN / area).rglob("*.json"))
    assert files, f"no fixtures in {GOLDEN / area}"
    res = run_fixtures(files)
    assert res.failed == 0 and res.passed == len(files), f"{area}: {res.passed} passed, {res.failed} failed\n{res.output}"


def test_golden_shared_cases_not_copied_yet() -> None:
    """Cases in shared/golden that this copy lacks (none when the copy is current)."""
    if not SHARED.is_dir():
        pytest.skip("no shared/golden beside the repository (only present in the team's workspace)")
    ours = {p.relative_to(GOLDEN) for p in GOLDEN.rglob("*.json")}
    extra = [p for p in SHARED.rglob("*.json") if p.relative_to(SHARED) not in ours]
    if extra:
        res = run_fixtures(extra)
        assert res.failed == 0, res.output

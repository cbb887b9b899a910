"""Fuzzing every command with mutated real-shaped inputs (tests/fuzz_support.py): exit 0 or 2, never a traceback,
one error line, nothing half-written.

The normal suite runs a fixed sample; the `slow` job (`pytest -m slow`, run by CI after the suite) runs 10,000
cases and prints how they ended. Both are derandomized, so a failure reproduces; KUBESCHED_FUZZ_SEED changes the
cases of the slow run.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz_support import BASES, NOW, USES, Case, Tally, base_files, cases, render, run_case

FAST_EXAMPLES = 150
SLOW_EXAMPLES = int(os.environ.get("KUBESCHED_FUZZ_EXAMPLES", "10000"))
_SETTINGS = dict(deadline=None, database=None, print_blob=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


@settings(max_examples=FAST_EXAMPLES, derandomize=True, **_SETTINGS)  # type: ignore[arg-type]
@given(case=cases())
def test_fuzz_sample(case: Case) -> None:
    run_case(case)


TALLY = Tally()


@pytest.mark.slow
@seed(int(os.environ.get("KUBESCHED_FUZZ_SEED", "13")))
@settings(max_examples=SLOW_EXAMPLES, **_SETTINGS)  # type: ignore[arg-type]
@given(case=cases())
def test_fuzz_every_command(case: Case) -> None:
    run_case(case, TALLY)


@pytest.mark.slow
def test_fuzz_report() -> None:
    """How the slow run's cases ended (after test_fuzz_every_command, in file order)."""
    by_command: dict[str, dict[int, int]] = {}
    for (command, code), n in sorted(TALLY.exits.items()):
        by_command.setdefault(command, {})[code] = n
    print(f"\nfuzz: {TALLY.cases} cases, internal errors (tracebacks): {TALLY.internal_errors}")
    for command, codes in by_command.items():
        print(f"  {command:13} " + ", ".join(f"exit {c}: {n}" for c, n in sorted(codes.items())))
    assert TALLY.cases >= SLOW_EXAMPLES or TALLY.cases == 0
    assert TALLY.internal_errors == 0


@pytest.mark.parametrize("target", sorted(USES))
def test_fuzz_starts_from_documents_every_command_accepts(target: str) -> None:
    """The unmutated inputs run cleanly (exit 0) through every command that takes them, so the mutations probe
    inputs one step away from valid ones."""
    tally = Tally()
    key = "config" if target.startswith("config") else "policy" if target.startswith("policy") else target
    for argv in USES[target]:
        files = dict(base_files())
        files[key] = render(BASES[target](), "yaml")
        extra = [] if argv[0] in ("simulate", "convert") else ["--now", NOW]
        run_case(Case(argv[0], list(argv) + extra, files, None, key), tally)
    assert set(code for _, code in tally.exits) == {0}, tally.exits

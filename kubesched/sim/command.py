"""`kubesched simulate`: the overrides and the progress bars around `run_simulation`.

The CLI prints the table and writes the HTML report (kubesched.report) from the `SimulationRun`, through
`finish` so that the report lands in the output folder before it is moved into place.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from kubesched.output import check_output_dir
from kubesched.sim.runner import SimulationRun, run_simulation
from kubesched.sim.scenario import check_duration
from kubesched.sim.units import parse_duration


def simulate_command(scenario: str, variants: tuple[str, ...], out: str | None, jobs: int | None,
                     seed: int | None, duration: str | None, progress: bool | None,
                     finish: Callable[[SimulationRun], None] | None = None) -> SimulationRun:
    """Run the scenario's variants; progress bars on stderr when asked (default: when stderr is a terminal)."""
    if out is not None:
        check_output_dir(out)
    overrides: dict[str, Any] = {}
    if seed is not None:
        overrides["seed"] = seed
    if duration is not None:
        overrides["duration"] = parse_duration(duration, "--duration", allow_zero=False)
        check_duration(overrides["duration"], "--duration", None)
    show = sys.stderr.isatty() if progress is None else progress
    if not show:
        return run_simulation(scenario, list(variants), out, jobs, overrides, finish=finish)
    console = Console(stderr=True)
    with Progress(TextColumn("{task.description:<24}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        tasks: dict[str, Any] = {}

        def on_progress(name: str, frac: float) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=1.0)
            bar.update(tasks[name], completed=frac)

        return run_simulation(scenario, list(variants), out, jobs, overrides, on_progress, finish)

"""`kubesched tune`: the Pareto front of a scenario's objectives over scheduler/descheduler settings
(kubesched.tune; Optuna and Ray are imported there, when used)."""

from __future__ import annotations

import sys

import click

from kubesched.commands.common import ADDRESS, ENGINE, WORKERS, command, output_option, run_command
from kubesched.tune.command import tune_command
from kubesched.tune.engines import EngineError
from kubesched.tune.study import TuneOptions


@command("tune",
         examples=["kubesched tune examples/hotspots/scenario.yaml --space examples/hotspots/tune.yaml "
                   "--out out/tune"], doc="docs/tune.md")
@click.argument("scenario", type=click.Path())
@click.option("--space", required=True, type=click.Path(), help="TuneSpace: the parameters, objectives and constraints")
@click.option("--out", default="out/tune", show_default=True, type=click.Path(),
              help="folder for the study (resumable), the chosen documents and report.html")
@click.option("--trials", type=click.IntRange(min=1), default=None, help="trials in the study (default: the space's)")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="seeds per trial (default: the space's)")
@click.option("--seed", "sampler_seed", type=int, default=None, help="the sampler's seed (default: the space's)")
@ENGINE
@ADDRESS
@WORKERS
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
@click.option("--progress/--no-progress", default=None, help="progress bar on stderr (default: when a terminal)")
@output_option
def cli(scenario: str, space: str, out: str, trials: int | None, seeds: int | None, sampler_seed: int | None,
        engine: str, address: str | None, workers: int | None, as_json: bool, progress: bool | None,
        output: str) -> None:
    """Search scheduler/descheduler settings for the Pareto front of the scenario's objectives (Optuna)."""

    def run() -> None:
        try:
            tune_command(scenario, space, out, TuneOptions(trials, seeds, engine, address, workers, sampler_seed),
                         as_json or output == "json", progress)
        except EngineError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    run_command(run)

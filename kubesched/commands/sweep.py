"""`kubesched sweep`: a grid of runs into one Parquet dataset (kubesched.tune.sweep; pyarrow and Ray are
imported there, when used)."""

from __future__ import annotations

import sys

import click

from kubesched.commands.common import ADDRESS, ENGINE, WORKERS, command, output_option, run_command
from kubesched.tune.command import sweep_command
from kubesched.tune.engines import EngineError


@command("sweep",
         examples=["kubesched sweep examples/openb/sweep.yaml --out out/openb-sweep"], doc="docs/tune.md")
@click.argument("sweep_file", metavar="SWEEP", type=click.Path())
@click.option("--out", default="out/sweep", show_default=True, type=click.Path(),
              help="folder for the Parquet dataset (runs/), summary.csv and report.html")
@ENGINE
@ADDRESS
@WORKERS
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
@click.option("--progress/--no-progress", default=None, help="progress bar on stderr (default: when a terminal)")
@output_option
def cli(sweep_file: str, out: str, engine: str, address: str | None, workers: int | None, as_json: bool,
        progress: bool | None, output: str) -> None:
    """Run a grid of scenarios × variants × parameter values × seeds, each once, into one Parquet dataset."""

    def run() -> None:
        try:
            sweep_command(sweep_file, out, engine, address, workers, as_json or output == "json", progress)
        except EngineError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    run_command(run)

"""`kubesched simulate`: the closed loop on a virtual clock (kubesched.sim), its report (kubesched.report)."""

from __future__ import annotations

from typing import Any

import click

from kubesched.commands.common import command, emit, output_option, run_command
from kubesched.errors import InputError
from kubesched.report.comparison import simulation_table
from kubesched.report.simulation import write_report
from kubesched.sim.command import simulate_command


@command("simulate",
         examples=["kubesched simulate examples/hotspots/scenario.yaml --out out/hotspots",
                   "kubesched simulate examples/hotspots/scenario.yaml --duration 2h -o json",
                   "kubesched simulate examples/hotspots/scenario.yaml --variant packing=examples/cluster/bin-packing.yaml "
                   "--out out/packing"],
         doc="docs/simulator.md")
@click.argument("scenario", type=click.Path())
@click.option("--variant", "variants", multiple=True, metavar="NAME=FILE",
              help="run the scenario also under this scheduler config / descheduler policy / kubelet config "
                   "(a file of those documents or a kubesched.io Variant; repeatable)")
@click.option("--out", type=click.Path(), default=None, metavar="DIR",
              help="write report.html, summary.json, comparison.csv and per-variant CSV here (without it nothing "
                   "is written)")
@click.option("--figures", default=None, metavar="FORMATS",
              help="also save every chart of the report under DIR/figures, e.g. png,svg (needs --out and the "
                   "'export' extra)")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="parallel processes (default: one per variant)")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="override the scenario's seed")
@click.option("--duration", default=None, metavar="DURATION", help="override the scenario's duration (e.g. 2h)")
@click.option("--no-html", "no_html", is_flag=True, help="do not write report.html")
@click.option("--progress/--no-progress", default=None, help="progress bars on stderr (default: when a terminal)")
@output_option
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
def cli(scenario: str, variants: tuple[str, ...], out: str | None, figures: str | None, jobs: int | None,
        seed: int | None, duration: str | None, no_html: bool, progress: bool | None, output: str,
        as_json: bool) -> None:
    """Simulate the closed loop — scheduler, kubelets, metrics pipeline, descheduler, workload controllers —
    on a virtual clock and compare variants.

    SCENARIO is a kubesched.io/v1alpha1 Scenario file (YAML): the cluster (node templates, a snapshot or a
    node table), the workloads and how much CPU and memory their pods use over time, timed events (nodes
    added, scale-ups, drains), the scheduler configuration, descheduler policy and kubelet configuration,
    and the variants to compare (each replaces some of those). Every variant runs from the same seed, in
    parallel processes; the same scenario and seed give the same results byte for byte.

    The comparison table is printed (or one document with -o json|yaml). Nothing is written unless --out
    DIR is given: then DIR/report.html (a self-contained interactive report to open from disk),
    summary.json, comparison.csv and variants/NAME/*.csv (and Parquet with pyarrow).
    """

    def run() -> None:
        formats = _figure_formats(figures)
        if formats and out is None:
            raise InputError("saving figures needs a folder: add --out DIR", field="--figures")
        if formats and no_html:
            raise InputError("the figures are the report's charts: drop --no-html", field="--figures")
        def finish(run: Any) -> None:
            # Into the run's folder before it is moved into place: the report is part of the whole.
            if not no_html:
                write_report(run, run.out, formats)

        result = simulate_command(scenario, variants, out, jobs, seed, duration, progress, finish)
        emit("json" if as_json else output, result.doc, simulation_table)

    run_command(run)


def _figure_formats(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    formats = tuple(f.strip().lower() for f in value.split(",") if f.strip())
    for f in formats:
        if f not in ("png", "svg", "pdf"):
            raise InputError(f"expected a comma-separated list of png, svg, pdf, got {f!r}", field="--figures")
    return formats

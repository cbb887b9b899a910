"""`kubesched schedule`: every pending pod through the scheduling queue (kubesched.scheduler.oneshot)."""

from __future__ import annotations

import click

from kubesched.commands.common import NOW, SEED, command, emit, output_option, plugins_option, run_command
from kubesched.commands.inputs import parse_now
from kubesched.commands.scheduling import scheduler_inputs
from kubesched.report.text import schedule_table
from kubesched.scheduler.oneshot import schedule_all


@command("schedule",
         examples=["kubesched schedule --snapshot examples/cluster/snapshot.yaml",
                   "kubesched schedule --snapshot examples/cluster/snapshot.yaml --config examples/cluster/bin-packing.yaml"],
         doc="docs/scheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--metrics", type=click.Path(), default=None, help="load-watcher WatcherMetrics for load-aware plugins")
@plugins_option
@NOW
@SEED
@output_option
def cli(snapshot: str, config: str | None, metrics: str | None, plugins: tuple[str, ...],
        now: str | None, seed: int, output: str) -> None:
    """Place every pending pod through the scheduling queue (priority order, backoff, preemption), binding
    each before the next; unplaced pods show upstream's FitError message."""

    def run() -> None:
        sched, clock = scheduler_inputs(snapshot, config, metrics, parse_now(now), seed, plugins)
        emit(output, schedule_all(sched, clock), schedule_table)

    run_command(run)

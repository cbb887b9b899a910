"""`kubesched explain`: one pod, every node, every plugin (kubesched.scheduler.explain)."""

from __future__ import annotations

import click

from kubesched.commands.common import NOW, SEED, command, emit, output_option, plugins_option, run_command
from kubesched.commands.inputs import parse_now
from kubesched.commands.scheduling import find_pod, scheduler_inputs
from kubesched.report.text import explain_table
from kubesched.scheduler.explain import explain


@command("explain",
         examples=["kubesched explain --snapshot examples/cluster/snapshot.yaml --pod shop/web-7d9f-new"],
         doc="docs/scheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--pod", "pod_key", required=True, metavar="NS/NAME", help="the pod to explain")
@click.option("--metrics", type=click.Path(), default=None, help="load-watcher WatcherMetrics for load-aware plugins")
@plugins_option
@NOW
@SEED
@output_option
def cli(snapshot: str, config: str | None, pod_key: str, metrics: str | None, plugins: tuple[str, ...],
        now: str | None, seed: int, output: str) -> None:
    """One pod, every node, every plugin: Filter verdicts with upstream's reasons, then the raw, normalized
    and weighted score of every feasible node (nodes that fail Filter are not scored, as upstream)."""

    def run() -> None:
        sched, _ = scheduler_inputs(snapshot, config, metrics, parse_now(now), seed, plugins)
        pod = find_pod(sched, pod_key)
        emit(output, explain(sched, pod), explain_table)

    run_command(run)

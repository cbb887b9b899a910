"""`kubesched capacity`: how many more copies of a pod fit (kubesched.scheduler.oneshot.capacity)."""

from __future__ import annotations

import click

from kubesched.commands.common import NOW, SEED, command, emit, output_option, plugins_option, run_command
from kubesched.commands.inputs import parse_now
from kubesched.commands.scheduling import scheduler_inputs
from kubesched.errors import InputError
from kubesched.report.text import capacity_table
from kubesched.scheduler.oneshot import capacity
from kubesched.sim.expand import pod_template


@command("capacity",
         examples=["kubesched capacity --snapshot examples/cluster/snapshot.yaml --pod-template examples/cluster/web-pod.yaml"],
         doc="docs/scheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--pod-template", "template", required=True, type=click.Path(),
              help="a Pod to copy, or a workload (Deployment, StatefulSet, ...) whose pod to copy")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--max", "max_limit", type=int, default=0, help="stop after this many copies (0: no limit)")
@plugins_option
@NOW
@SEED
@output_option
def cli(snapshot: str, template: str, config: str | None, max_limit: int, plugins: tuple[str, ...],
        now: str | None, seed: int, output: str) -> None:
    """How many more copies of a pod fit, and on which nodes (the job of cluster-capacity): copies are
    scheduled one by one until one does not fit."""

    def run() -> None:
        if max_limit < 0:
            raise InputError(f"expected 0 (no limit) or a positive number of copies, got {max_limit}", field="--max")
        when = parse_now(now)
        sched, _ = scheduler_inputs(snapshot, config, None, when, seed, plugins)
        pod = pod_template(template, dict(sched.cluster.priority_classes), when)
        emit(output, capacity(sched, pod, max_limit), capacity_table)

    run_command(run)

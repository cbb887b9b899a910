"""`kubesched deschedule`: one descheduling cycle on a snapshot (kubesched.descheduler.command)."""

from __future__ import annotations

import click

from kubesched.commands.common import NOW, SEED, command, emit, output_option, run_command
from kubesched.commands.inputs import load_cluster, parse_now
from kubesched.descheduler.command import deschedule_command, deschedule_table


@command("deschedule",
         examples=["kubesched deschedule --snapshot examples/hotspot-descheduling/snapshot.yaml "
                   "--policy examples/hotspot-descheduling/lownodeload.yaml --now 2024-06-01T12:00:30Z"],
         doc="docs/descheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--policy", required=True, type=click.Path(),
              help="DeschedulerPolicy (descheduler/v1alpha2) or koordinator DeschedulerConfiguration")
@click.option("--metrics", type=click.Path(), default=None, help="actual usage (metrics.k8s.io objects, load-watcher)")
@click.option("--min-ready-nodes", type=int, default=2, show_default=True,
              help="skip the cycle when fewer nodes are ready (upstream: 2)")
@click.option("--scheduler-config", type=click.Path(), default=None,
              help="KubeSchedulerConfiguration for node fit by the scheduler's own filters")
@click.option("--enforce-pdbs", is_flag=True, default=False,
              help="answer evictions as the API server does: 429 when a PodDisruptionBudget allows no disruption "
                   "(default off, as upstream's tests and dry-run mode see the cluster)")
@NOW
@SEED
@output_option
def cli(snapshot: str, policy: str, metrics: str | None, min_ready_nodes: int,
        scheduler_config: str | None, enforce_pdbs: bool, now: str | None, seed: int, output: str) -> None:
    """One descheduling cycle of a DeschedulerPolicy (or koordinator DeschedulerConfiguration) on a
    snapshot: the evictions it would make, computed and not made, with each node's utilisation."""

    def run() -> None:
        when = parse_now(now)
        emit(output, deschedule_command(snapshot=load_cluster(snapshot, when, seed), policy=policy, metrics=metrics,
                                        min_ready_nodes=min_ready_nodes, scheduler_config=scheduler_config,
                                        now=when, seed=seed, enforce_pdbs=enforce_pdbs), deschedule_table)

    run_command(run)

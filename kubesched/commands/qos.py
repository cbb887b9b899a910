"""`kubesched qos`: the QoS class and oom_score_adj of every pod (kubesched.kubelet.command)."""

from __future__ import annotations

import click

from kubesched.commands.common import NOW, command, emit, output_option, run_command
from kubesched.commands.inputs import load_cluster, parse_now
from kubesched.kubelet.command import qos_command, qos_table


@command("qos",
         examples=["kubesched qos --snapshot examples/kubelet/snapshot.yaml"], doc="docs/kubelet.md")
@click.option("--snapshot", required=True, type=click.Path(), help="pods (and their nodes)")
@NOW
@output_option
def cli(snapshot: str, now: str | None, output: str) -> None:
    """QoS class and oom_score_adj of every pod."""

    def run() -> None:
        when = parse_now(now)
        emit(output, qos_command(snapshot=load_cluster(snapshot, when, 0), now=when), qos_table)

    run_command(run)

"""`kubesched node-pressure`: the kubelet's eviction manager on one node (kubesched.kubelet.command)."""

from __future__ import annotations

import click

from kubesched.commands.common import NOW, command, emit, output_option, run_command
from kubesched.commands.inputs import load_cluster, parse_now
from kubesched.kubelet.command import node_pressure_command, node_pressure_table


@command("node-pressure",
         examples=["kubesched node-pressure --kubelet-config examples/kubelet/kubelet-config.yaml "
                   "--snapshot examples/kubelet/snapshot.yaml --timeline examples/kubelet/timeline.json "
                   "--now 2025-06-01T12:00:00Z"],
         doc="docs/kubelet.md")
@click.option("--kubelet-config", required=True, type=click.Path(), help="KubeletConfiguration")
@click.option("--snapshot", type=click.Path(), default=None, help="the node and its pods")
@click.option("--timeline", type=click.Path(), default=None, help="JSON list of {at, stats} steps (Summary API)")
@NOW
@output_option
def cli(kubelet_config: str, snapshot: str | None, timeline: str | None, now: str | None,
        output: str) -> None:
    """The kubelet's node-pressure eviction manager on one node, one synchronize per timeline step
    (Summary API stats): thresholds met, node conditions, evictions, admission."""

    def run() -> None:
        when = parse_now(now)
        snap = load_cluster(snapshot, when, 0) if snapshot else None
        emit(output, node_pressure_command(kubelet_config=kubelet_config, snapshot=snap, timeline=timeline,
                                           now=when), node_pressure_table)

    run_command(run)

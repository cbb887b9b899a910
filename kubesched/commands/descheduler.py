"""`kubesched descheduler`: the descheduler against a live cluster (kubesched.live.descheduler_process, which
needs the 'live' extra: it is imported when the command runs)."""

from __future__ import annotations

import sys
from typing import Any

import click

from kubesched.commands.common import OUTPUT, SEED, command, run_command
from kubesched.commands.live_flags import flag_duration, live_options, missing_live_extra, process_flags


@command("descheduler",
         examples=["kubesched descheduler --kubeconfig ~/.kube/config --policy policy.yaml --dry-run"],
         doc="docs/live.md")
@click.option("--policy", required=True, type=click.Path(), help="DeschedulerPolicy (descheduler/v1alpha2)")
@click.option("--descheduling-interval", "interval", default="0", show_default=True, metavar="DURATION",
              help="time between cycles; 0: one cycle, then exit")
@click.option("--dry-run", is_flag=True, help="send no eviction: report what would be evicted")
@click.option("--metrics", default=None, metavar="SOURCE",
              help="usage for load-aware strategies: metrics.k8s.io, a load-watcher URL, prometheus+URL, or a file")
@click.option("--min-ready-nodes", type=int, default=2, show_default=True, help="skip a cycle with fewer ready nodes")
@click.option("--scheduler-config", type=click.Path(), default=None,
              help="KubeSchedulerConfiguration for node fit by the scheduler's own filters")
@click.option("--sync-timeout", default="2m", show_default=True, metavar="DURATION",
              help="one cycle only: give up (exit 1) when the cluster cannot be read in this time")
@SEED
@OUTPUT
@live_options(10258, "descheduler")
def cli(policy: str, interval: str, dry_run: bool, metrics: str | None, min_ready_nodes: int,
        scheduler_config: str | None, sync_timeout: str, seed: int, output: str, **kw: Any) -> None:
    """Run the descheduler against a live cluster: one cycle, or a cycle every --descheduling-interval."""

    def run() -> None:
        try:
            from kubesched.live.descheduler_process import DeschedulerOptions, run_descheduler
            from kubesched.live.process import ProcessOptions
        except ImportError as e:  # the official client and prometheus-client are optional dependencies
            raise missing_live_extra("descheduler", e, "the kubernetes client and prometheus-client") from None
        opts = DeschedulerOptions(policy=policy, interval=flag_duration(interval, "--descheduling-interval"),
                                  dry_run=dry_run, metrics=metrics, min_ready_nodes=min_ready_nodes,
                                  scheduler_config=scheduler_config, seed=seed, output=output,
                                  sync_timeout=flag_duration(sync_timeout, "--sync-timeout"))
        sys.exit(run_descheduler(ProcessOptions(**process_flags(kw)), opts))

    run_command(run)

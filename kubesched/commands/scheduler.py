"""`kubesched scheduler`: a second scheduler of a live cluster (kubesched.live.scheduler_process, which needs
the 'live' extra: it is imported when the command runs)."""

from __future__ import annotations

import sys
from typing import Any

import click

from kubesched.commands.common import SEED, command, plugins_option, run_command
from kubesched.commands.live_flags import flag_duration, live_options, missing_live_extra, process_flags


@command("scheduler",
         examples=["kubesched scheduler --kubeconfig ~/.kube/config --config scheduler-config.yaml"],
         doc="docs/live.md")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (its profiles' schedulerNames)")
@click.option("--metrics", default=None, metavar="SOURCE",
              help="usage for load-aware plugins: metrics.k8s.io, a load-watcher URL, prometheus+URL, or a file")
@click.option("--metrics-interval", default="30s", show_default=True, metavar="DURATION", help="how often to read it")
@plugins_option
@SEED
@live_options(10259, "kubesched-scheduler")
def cli(config: str | None, metrics: str | None, metrics_interval: str, plugins: tuple[str, ...], seed: int,
        **kw: Any) -> None:
    """Run as a second scheduler of a live cluster: bind the pods whose schedulerName a profile serves."""

    def run() -> None:
        try:
            from kubesched.live.process import ProcessOptions
            from kubesched.live.scheduler_process import SchedulerOptions, run_scheduler
        except ImportError as e:  # the official client and prometheus-client are optional dependencies
            raise missing_live_extra("scheduler", e, "the kubernetes client and prometheus-client") from None
        opts = SchedulerOptions(config=config, seed=seed, metrics=metrics, plugins=plugins,
                                metrics_interval=flag_duration(metrics_interval, "--metrics-interval"))
        sys.exit(run_scheduler(ProcessOptions(**process_flags(kw)), opts))

    run_command(run)

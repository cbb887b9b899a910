"""`kubesched capture`: a live cluster and its usage history into a scenario (kubesched.live.command, which
needs the 'live' extra: it is imported when the command runs)."""

from __future__ import annotations

import click

from kubesched.commands.common import command, emit, output_option, run_command
from kubesched.commands.live_flags import missing_live_extra


@command("capture",
         examples=["kubesched capture --kubeconfig ~/.kube/config --context prod "
                   "--prometheus http://localhost:9090 --since 24h --out prod"],
         doc="docs/capture.md")
@click.option("--kubeconfig", type=click.Path(), default=None,
              help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)")
@click.option("--context", default=None, help="the kubeconfig context to use (default: its current-context)")
@click.option("--out", required=True, type=click.Path(), help="folder for snapshot, traces and scenario.yaml")
@click.option("--format", "fmt", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="snapshot.yaml or snapshot.json")
@click.option("--prometheus", default=None, metavar="URL", help="Prometheus to read each pod's usage history from")
@click.option("--prometheus-token-file", type=click.Path(), default=None, help="bearer token for Prometheus")
@click.option("--since", default="24h", show_default=True, metavar="DURATION", help="how much history to read")
@click.option("--step", default="1m", show_default=True, metavar="DURATION", help="resolution of the history")
@click.option("--cpu-query", "cpu", default=None, metavar="PROMQL", help="pod CPU in cores by namespace, pod, node")
@click.option("--memory-query", "memory", default=None, metavar="PROMQL", help="pod memory in bytes by namespace, pod, node")
@click.option("--node-cpu-query", "node_cpu", default=None, metavar="PROMQL", help="node CPU in cores by node")
@click.option("--node-memory-query", "node_memory", default=None, metavar="PROMQL", help="node memory in bytes by node")
@click.option("--max-points", type=int, default=11000, show_default=True,
              help="points per series in one range query (Prometheus refuses more than 11,000)")
@click.option("--tables", type=click.Choice(["auto", "parquet", "csv"]), default="auto", show_default=True,
              help="trace files: Parquet when pyarrow is installed (auto), or CSV")
@click.option("--page-size", type=int, default=500, show_default=True, help="objects per LIST page")
@click.option("--request-timeout", default="30s", show_default=True, metavar="DURATION", help="timeout of one request")
@click.option("--max-retries", type=int, default=4, show_default=True, help="retries of a failed read (429, 5xx, connection)")
@click.option("--duration", default="1h", show_default=True, metavar="DURATION",
              help="the scenario's duration when there is no usage history")
@click.option("--now", "now", default=None, metavar="RFC3339", help="the end of the history window (default: now)")
@click.option("--progress/--no-progress", default=None, help="progress bars on stderr (default: when a terminal)")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
@output_option
def cli(kubeconfig: str | None, context: str | None, out: str, fmt: str, prometheus: str | None,
        prometheus_token_file: str | None, since: str, step: str, cpu: str | None, memory: str | None,
        node_cpu: str | None, node_memory: str | None, max_points: int, tables: str, page_size: int,
        request_timeout: str,
        max_retries: int, duration: str, now: str | None, progress: bool | None, as_json: bool,
        output: str) -> None:
    """Read a live cluster (and its usage history from Prometheus) into a scenario `simulate` runs as is."""

    def run() -> None:
        try:
            from kubesched.live.command import capture_command, capture_table
        except ImportError as e:  # the official client is an optional dependency
            raise missing_live_extra("capture", e) from None
        data = capture_command(kubeconfig=kubeconfig, context=context, out=out, fmt=fmt, prometheus=prometheus,
                               prometheus_token_file=prometheus_token_file, since=since, step=step,
                               queries={"cpu": cpu, "memory": memory, "node_cpu": node_cpu, "node_memory": node_memory},
                               max_points=max_points, page_size=page_size, request_timeout=request_timeout,
                               max_retries=max_retries, duration=duration, now=now, tables=tables, progress=progress)
        emit("json" if as_json else output, data, capture_table)

    run_command(run)

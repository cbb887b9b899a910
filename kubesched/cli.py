"""The command line. Every command reads real documents and prints a table, or one JSON document with `-o json`.

Bad input exits with code 2 and one line on stderr naming the file, the object and the field; nothing is
written on stdout unless the command succeeded.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from kubesched.diagnostics import collecting, current
from kubesched.errors import InputError, RemoteError

OUTPUT = click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
                      help="table for people, json for machines")
NOW = click.option("--now", "now", default=None, metavar="RFC3339",
                   help="the clock for everything time-dependent (default: the wall clock)")
SEED = click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="seed of the tie-breaking RNG")


def parse_now(value: str | None) -> datetime:
    if value is None:
        # Marked as "nobody chose this moment": a replayed capture's metrics are then judged at their own time.
        from kubesched.metrics.base import wall_clock_now

        return wall_clock_now()
    from kubesched.api.objects import parse_time

    t = parse_time(value, "--now")
    assert t is not None
    return t


def emit(output: str, data: Any, table: Callable[[Any], None]) -> None:
    if output == "json":
        collector = current()
        if isinstance(data, dict) and collector is not None and collector.messages:
            # What kubesched skipped or ignored goes with the result (it was also printed on stderr).
            earlier = [w for w in data.get("warnings") or [] if w not in collector.seen]
            data = {**data, "warnings": earlier + collector.messages}
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        table(data)


def _run(fn: Callable[[], None]) -> None:
    """Run a command: bad input is one line and exit 2, Ctrl-C exit 130, anything unforeseen exit 1 with one
    line (KUBESCHED_DEBUG=1 shows the traceback); never a traceback for input."""
    with collecting():
        try:
            fn()
        except InputError as e:
            click.echo(f"error: {e.render()}", err=True)
            sys.exit(2)
        except RemoteError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted: nothing was written", err=True)
            sys.exit(130)
        except (click.exceptions.Exit, click.exceptions.ClickException):
            raise
        except Exception as e:
            if os.environ.get("KUBESCHED_DEBUG"):
                raise
            click.echo(f"error: internal error ({type(e).__name__}: {str(e)[:200]}); this is a bug in kubesched, "
                       "please report it with the command and its inputs (KUBESCHED_DEBUG=1 shows the traceback)",
                       err=True)
            sys.exit(1)


class _BadUsage(click.ClickException):
    """A bad option or argument, said in one line like every other bad input (exit 2)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            command = f"{ctx.info_name} {ctx.invoked_subcommand}" if ctx.invoked_subcommand else ctx.info_name
            raise _BadUsage(f"{e.format_message()} (see: {command} --help)") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kubesched")
def main_group() -> None:
    """kubesched: where pods run and when they move — scheduler, descheduler, kubelet eviction, load awareness."""


def _plugins_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--plugin", "plugins", multiple=True, metavar="MODULE:CLASS",
                        help="load a scheduler plugin from a Python module for this run (repeatable)")(f)


def load_cluster(path: str, now: datetime, seed: int) -> Any:
    """A snapshot as the one-shot commands see it: its workloads' missing pods created (sim/expand.py)."""
    from kubesched.api.snapshot import load_snapshot
    from kubesched.sim.expand import expand_workloads

    return expand_workloads(load_snapshot(path), path, now, seed)


def _scheduler_inputs(snapshot: str, config: str | None, metrics: str | None, now: datetime, seed: int,
                      plugins: tuple[str, ...]) -> Any:
    from kubesched.scheduler.oneshot import build_scheduler

    return build_scheduler(load_cluster(snapshot, now, seed), config, metrics, now, seed, plugins)


def _find_pod(sched: Any, key: str) -> Any:
    ns, _, name = key.rpartition("/")
    ns = ns or "default"
    pod = sched.cluster.pods.get(f"{ns}/{name}")
    if pod is None:
        raise InputError(f"pod {ns}/{name} is not in the snapshot", field="--pod")
    return pod


# ---------------------------------------------------------------- explain


@main_group.command("explain")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--pod", "pod_key", required=True, metavar="NS/NAME", help="the pod to explain")
@click.option("--metrics", type=click.Path(), default=None, help="load-watcher WatcherMetrics for load-aware plugins")
@_plugins_option
@NOW
@SEED
@OUTPUT
def explain_cmd(snapshot: str, config: str | None, pod_key: str, metrics: str | None, plugins: tuple[str, ...],
                now: str | None, seed: int, output: str) -> None:
    """One pod, every node, every plugin: filter verdicts with reasons, raw/normalized/weighted scores."""

    def run() -> None:
        from kubesched.report.text import explain_table
        from kubesched.scheduler.explain import explain

        sched, _ = _scheduler_inputs(snapshot, config, metrics, parse_now(now), seed, plugins)
        pod = _find_pod(sched, pod_key)
        emit(output, explain(sched, pod), explain_table)

    _run(run)


# ---------------------------------------------------------------- schedule


@main_group.command("schedule")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--metrics", type=click.Path(), default=None, help="load-watcher WatcherMetrics for load-aware plugins")
@_plugins_option
@NOW
@SEED
@OUTPUT
def schedule_cmd(snapshot: str, config: str | None, metrics: str | None, plugins: tuple[str, ...],
                 now: str | None, seed: int, output: str) -> None:
    """Place every pending pod through the scheduling queue, binding each before the next."""

    def run() -> None:
        from kubesched.report.text import schedule_table
        from kubesched.scheduler.oneshot import schedule_all

        sched, clock = _scheduler_inputs(snapshot, config, metrics, parse_now(now), seed, plugins)
        emit(output, schedule_all(sched, clock), schedule_table)

    _run(run)


# ---------------------------------------------------------------- capacity


@main_group.command("capacity")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--pod-template", "template", required=True, type=click.Path(),
              help="a Pod to copy, or a workload (Deployment, StatefulSet, ...) whose pod to copy")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--max", "max_limit", type=int, default=0, help="stop after this many copies (0: no limit)")
@_plugins_option
@NOW
@SEED
@OUTPUT
def capacity_cmd(snapshot: str, template: str, config: str | None, max_limit: int, plugins: tuple[str, ...],
                 now: str | None, seed: int, output: str) -> None:
    """How many more copies of a pod fit (the job of cluster-capacity)."""

    def run() -> None:
        from kubesched.report.text import capacity_table
        from kubesched.scheduler.oneshot import capacity
        from kubesched.sim.expand import pod_template

        if max_limit < 0:
            raise InputError(f"expected 0 (no limit) or a positive number of copies, got {max_limit}", field="--max")
        when = parse_now(now)
        sched, _ = _scheduler_inputs(snapshot, config, None, when, seed, plugins)
        pod = pod_template(template, dict(sched.cluster.priority_classes), when)
        emit(output, capacity(sched, pod, max_limit), capacity_table)

    _run(run)


# ---------------------------------------------------------------- descheduler


@main_group.command("deschedule")
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
@OUTPUT
def deschedule_cmd(snapshot: str, policy: str, metrics: str | None, min_ready_nodes: int,
                   scheduler_config: str | None, enforce_pdbs: bool, now: str | None, seed: int, output: str) -> None:
    """One descheduling cycle: the evictions it would make (computed, not made)."""

    def run() -> None:
        from kubesched.descheduler.command import deschedule_command, deschedule_table

        when = parse_now(now)
        emit(output, deschedule_command(snapshot=load_cluster(snapshot, when, seed), policy=policy, metrics=metrics,
                                        min_ready_nodes=min_ready_nodes, scheduler_config=scheduler_config,
                                        now=when, seed=seed, enforce_pdbs=enforce_pdbs), deschedule_table)

    _run(run)


# ---------------------------------------------------------------- kubelet


@main_group.command("node-pressure")
@click.option("--kubelet-config", required=True, type=click.Path(), help="KubeletConfiguration")
@click.option("--snapshot", type=click.Path(), default=None, help="the node and its pods")
@click.option("--timeline", type=click.Path(), default=None, help="JSON list of {at, stats} steps (Summary API)")
@NOW
@OUTPUT
def node_pressure_cmd(kubelet_config: str, snapshot: str | None, timeline: str | None, now: str | None,
                      output: str) -> None:
    """The kubelet's node-pressure eviction manager on one node, step by step."""

    def run() -> None:
        from kubesched.kubelet.command import node_pressure_command, node_pressure_table

        when = parse_now(now)
        snap = load_cluster(snapshot, when, 0) if snapshot else None
        emit(output, node_pressure_command(kubelet_config=kubelet_config, snapshot=snap, timeline=timeline,
                                           now=when), node_pressure_table)

    _run(run)


@main_group.command("qos")
@click.option("--snapshot", required=True, type=click.Path(), help="pods (and their nodes)")
@NOW
@OUTPUT
def qos_cmd(snapshot: str, now: str | None, output: str) -> None:
    """QoS class and oom_score_adj of every pod."""

    def run() -> None:
        from kubesched.kubelet.command import qos_command, qos_table

        when = parse_now(now)
        emit(output, qos_command(snapshot=load_cluster(snapshot, when, 0), now=when), qos_table)

    _run(run)


# ---------------------------------------------------------------- convert


@main_group.command("convert")
@click.argument("file", type=click.Path())
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="format of the converted document")
@click.option("--out", "out_file", type=click.Path(), default=None, help="write to this file instead of stdout")
def convert_cmd(file: str, output: str, out_file: str | None) -> None:
    """Convert KubeSchedulerConfiguration v1beta1/v1beta2/v1beta3 to v1, or DeschedulerPolicy v1alpha1 to
    v1alpha2, as the components converted them (docs/convert.md)."""

    def run() -> None:
        from kubesched.config.convert_command import convert_file

        if out_file is not None:
            from kubesched.output import check_output_file

            check_output_file(out_file)
        text = convert_file(file, output)
        if out_file is None:
            sys.stdout.write(text)
        else:
            from kubesched.output import atomic_write_text

            atomic_write_text(out_file, text)

    _run(run)


# ---------------------------------------------------------------- simulate


@main_group.command("simulate")
@click.argument("scenario", type=click.Path())
@click.option("--variant", "variants", multiple=True, metavar="NAME=FILE",
              help="run the scenario also under this scheduler config / descheduler policy / kubelet config "
                   "(a file of those documents or a kubesched.io Variant; repeatable)")
@click.option("--out", type=click.Path(), default=None, help="folder for the results and report.html")
@click.option("--json", "as_json", is_flag=True, help="print the results as one JSON document")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="parallel processes (default: one per variant)")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="override the scenario's seed")
@click.option("--duration", default=None, metavar="DURATION", help="override the scenario's duration (e.g. 2h)")
@click.option("--no-html", "no_html", is_flag=True, help="do not write report.html")
@click.option("--progress/--no-progress", default=None, help="progress bars on stderr (default: when a terminal)")
def simulate_cmd(scenario: str, variants: tuple[str, ...], out: str | None, as_json: bool, jobs: int | None,
                 seed: int | None, duration: str | None, no_html: bool, progress: bool | None) -> None:
    """Simulate the closed loop (scheduler, kubelets, descheduler, usage) and compare variants."""

    def run() -> None:
        from kubesched.sim.command import simulate_command

        simulate_command(scenario, variants, out, as_json, jobs, seed, duration, not no_html, progress)

    _run(run)


# ---------------------------------------------------------------- capture (a live cluster → a scenario)


@main_group.command("capture")
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
@click.option("--json", "as_json", is_flag=True, help="print the summary as one JSON document (same as -o json)")
@OUTPUT
def capture_cmd(kubeconfig: str | None, context: str | None, out: str, fmt: str, prometheus: str | None,
                prometheus_token_file: str | None, since: str, step: str, cpu: str | None, memory: str | None,
                node_cpu: str | None, node_memory: str | None, max_points: int, tables: str, page_size: int,
                request_timeout: str,
                max_retries: int, duration: str, now: str | None, progress: bool | None, as_json: bool,
                output: str) -> None:
    """Read a live cluster (and its usage history from Prometheus) into a scenario `simulate` runs as is."""

    def run() -> None:
        try:
            from kubesched.live.command import capture_command
        except ImportError as e:  # the official client is an optional dependency
            raise InputError(f"capture needs the kubernetes client ({e.name} is missing): "
                             f"pip install 'kubesched[live]'") from None
        capture_command(kubeconfig=kubeconfig, context=context, out=out, fmt=fmt, prometheus=prometheus,
                        prometheus_token_file=prometheus_token_file, since=since, step=step,
                        queries={"cpu": cpu, "memory": memory, "node_cpu": node_cpu, "node_memory": node_memory},
                        max_points=max_points, page_size=page_size, request_timeout=request_timeout,
                        max_retries=max_retries,
                        duration=duration, now=now, tables=tables, progress=progress,
                        as_json=as_json or output == "json")

    _run(run)


def _terminate(signum: int, frame: Any) -> None:
    # SIGTERM unwinds like Ctrl-C, so temporary outputs are removed.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (an embedding application): leave its handlers alone
        pass
    try:
        main_group.main(args=argv, prog_name="kubesched", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.exceptions.ClickException as e:
        e.show()
        return 2
    except InputError as e:
        click.echo(f"error: {e.render()}", err=True)
        return 2
    except RemoteError as e:
        click.echo(f"error: {e}", err=True)
        return 1
    except SystemExit as e:
        return int(e.code or 0) if isinstance(e.code, int) else 1
    return 0

"""The command line: every command reads real documents and prints a table, or one JSON or YAML document.

Conventions every command follows (new commands get them from the helpers here):

- `@command(group, name, short=..., examples=[...], doc="docs/x.md")` registers a click command whose
  help ends with runnable examples, its doc and the exit codes; `short` is what `kubesched --help` lists
  (at most 60 characters, so the list is never truncated in an 80-column terminal).
- `@output_option` adds `-o/--output table|json|yaml`; `emit(output, data, table)` prints `data` as one
  JSON or YAML document on stdout, or calls `table(data)` for people.
- `run_command(fn)` (`_run` here) turns `InputError` into one line on stderr and exit 2, `RuntimeFailure`
  into one line and exit 1, Ctrl-C (and SIGTERM) into exit 130, anything unforeseen into one line and exit 1
  (`KUBESCHED_DEBUG=1` shows the traceback); nothing is written on stdout unless the command succeeded. It
  collects the warnings (`kubesched.diagnostics`) the command raises: each is printed on stderr, and `emit`
  adds them to the JSON or YAML document under `warnings`.
- A bad option or argument is one line and exit 2 like any other bad input.
- `@NOW` (`--now RFC3339`, the clock) and `@SEED` (`--seed`, the tie-breaking RNG) where time or ties matter.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import click
import yaml

from kubesched.api.duration import read_duration_seconds
from kubesched.diagnostics import collecting, current
from kubesched.errors import InputError, RuntimeFailure

OUTPUT_FORMATS = ("table", "json", "yaml")
EXIT_CODES = "Exit codes: 0 success; 1 runtime failure (a server unreachable, a program missing); 2 bad input."
SHORT_HELP_LIMIT = 60


def output_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`-o/--output table|json|yaml` (the parameter `output`)."""
    return click.option("-o", "--output", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True,
                        help="table for people; json or yaml: one document on stdout for machines")(f)


OUTPUT = output_option
NOW = click.option("--now", "now", default=None, metavar="RFC3339",
                   help="the clock for everything time-dependent (default: the wall clock)")
SEED = click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="seed of the tie-breaking RNG")


def help_epilog(examples: Sequence[str], doc: str) -> str:
    """The end of a command's help: examples (kept verbatim), the doc to read, the exit codes."""
    lines = ["\b", "Examples:" if len(examples) > 1 else "Example:"]
    for e in examples:
        lines += _wrap_command(e)
    return "\n".join(lines) + f"\n\nDocs: {doc}\n\n{EXIT_CODES}"


def _wrap_command(cmd: str, width: int = 74) -> list[str]:
    """A shell command as lines of at most `width` columns, broken before an option with a backslash."""
    units: list[str] = []
    for w in cmd.split(" "):
        if units and not w.startswith("-") and units[-1].startswith("-") and " " not in units[-1]:
            units[-1] += " " + w  # an option and its value stay together
        else:
            units.append(w)
    lines: list[str] = []
    cur = "  " + units[0]
    for u in units[1:]:
        if len(cur) + 1 + len(u) + 2 > width:
            lines.append(cur + " \\")
            cur = "      " + u
        else:
            cur += " " + u
    lines.append(cur)
    return lines


def command(group: click.Group, name: str, *, short: str, examples: Sequence[str], doc: str,
            **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """Register a command on `group` with kubesched's help conventions (see the module docstring)."""
    if len(short) > SHORT_HELP_LIMIT:
        raise ValueError(f"short help of {name!r} is longer than {SHORT_HELP_LIMIT} characters")
    return group.command(name, short_help=short, epilog=help_epilog(examples, doc), **kwargs)


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
    """Print `data` as -o asks: one JSON or YAML document (with the run's warnings), or the table."""
    collector = current()
    if output != "table" and isinstance(data, dict) and collector is not None and collector.messages:
        # What kubesched skipped or ignored goes with the result (it was also printed on stderr).
        earlier = [w for w in data.get("warnings") or [] if w not in collector.seen]
        data = {**data, "warnings": earlier + collector.messages}
    if output == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    elif output == "yaml":
        # Through JSON so that tuples and other JSON-able values become plain YAML.
        sys.stdout.write(yaml.safe_dump(json.loads(json.dumps(data)), sort_keys=False, allow_unicode=True,
                                        width=100))
    else:
        table(data)


def _run(fn: Callable[[], None]) -> None:
    """Run a command: bad input is one line and exit 2, a runtime failure one line and exit 1, Ctrl-C exit
    130, anything unforeseen exit 1 with one line (KUBESCHED_DEBUG=1 shows the traceback)."""
    with collecting():
        try:
            fn()
        except InputError as e:
            click.echo(f"error: {e.render()}", err=True)
            sys.exit(2)
        except RuntimeFailure as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
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


# The public name for commands defined outside this module.
run_command = _run


class _BadUsage(click.ClickException):
    """A bad option or argument, said in one line like every other bad input (exit 2)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class _Group(click.Group):
    """Lists commands in the order they were added (the order of the README's table); usage errors in one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            command = f"{ctx.info_name} {ctx.invoked_subcommand}" if ctx.invoked_subcommand else ctx.info_name
            raise _BadUsage(f"{e.format_message()} (see: {command} --help)") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="\b\nExamples:\n  kubesched simulate examples/hotspots/scenario.yaml --out out/hotspots\n"
                    "  kubesched explain --snapshot examples/cluster/snapshot.yaml \\\n      --pod shop/web-7d9f-new\n"
                    "  kubesched COMMAND --help\n\n"
                    "Every command takes -o table|json|yaml. Docs: README.md, docs/cli.md\n\n" + EXIT_CODES)
@click.version_option(package_name="kubesched", message="%(prog)s %(version)s")
def main_group() -> None:
    """kubesched: where pods run and when they move — the Kubernetes scheduler, descheduler, kubelet
    node-pressure eviction and load awareness, one-shot on a snapshot or simulated together over time."""


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


# ---------------------------------------------------------------- simulate


@command(main_group, "simulate", short="scheduler, descheduler, kubelets over time; compare variants",
         examples=["kubesched simulate examples/hotspots/scenario.yaml --out out/hotspots",
                   "kubesched simulate examples/hotspots/scenario.yaml --duration 2h -o json",
                   "kubesched simulate examples/hotspots/scenario.yaml --variant packing=examples/cluster/bin-packing.yaml "
                   "--out out/packing"],
         doc="docs/simulator.md")
@click.argument("scenario", type=click.Path())
@click.option("--variant", "variants", multiple=True, metavar="NAME=FILE",
              help="run the scenario also under this scheduler config / descheduler policy / kubelet config "
                   "(a file of those documents or a kubesched.io Variant; repeatable)")
@click.option("--out", type=click.Path(), default=None, metavar="DIR",
              help="write report.html, summary.json, comparison.csv and per-variant CSV here (without it nothing "
                   "is written)")
@click.option("--figures", default=None, metavar="FORMATS",
              help="also save every chart of the report under DIR/figures, e.g. png,svg (needs --out and the "
                   "'export' extra)")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="parallel processes (default: one per variant)")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="override the scenario's seed")
@click.option("--duration", default=None, metavar="DURATION", help="override the scenario's duration (e.g. 2h)")
@click.option("--no-html", "no_html", is_flag=True, help="do not write report.html")
@click.option("--progress/--no-progress", default=None, help="progress bars on stderr (default: when a terminal)")
@output_option
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
def simulate_cmd(scenario: str, variants: tuple[str, ...], out: str | None, figures: str | None, jobs: int | None,
                 seed: int | None, duration: str | None, no_html: bool, progress: bool | None, output: str,
                 as_json: bool) -> None:
    """Simulate the closed loop — scheduler, kubelets, metrics pipeline, descheduler, workload controllers —
    on a virtual clock and compare variants.

    SCENARIO is a kubesched.io/v1alpha1 Scenario file (YAML): the cluster (node templates, a snapshot or a
    node table), the workloads and how much CPU and memory their pods use over time, timed events (nodes
    added, scale-ups, drains), the scheduler configuration, descheduler policy and kubelet configuration,
    and the variants to compare (each replaces some of those). Every variant runs from the same seed, in
    parallel processes; the same scenario and seed give the same results byte for byte.

    The comparison table is printed (or one document with -o json|yaml). Nothing is written unless --out
    DIR is given: then DIR/report.html (a self-contained interactive report to open from disk),
    summary.json, comparison.csv and variants/NAME/*.csv (and Parquet with pyarrow).
    """

    def run() -> None:
        from kubesched.report.comparison import simulation_table
        from kubesched.report.simulation import write_report
        from kubesched.sim.command import simulate_command

        formats = _figure_formats(figures)
        if formats and out is None:
            raise InputError("saving figures needs a folder: add --out DIR", field="--figures")
        if formats and no_html:
            raise InputError("the figures are the report's charts: drop --no-html", field="--figures")
        def finish(run: Any) -> None:
            # Into the run's folder before it is moved into place: the report is part of the whole.
            if not no_html:
                write_report(run, run.out, formats)

        result = simulate_command(scenario, variants, out, jobs, seed, duration, progress, finish)
        emit("json" if as_json else output, result.doc, simulation_table)

    _run(run)


def _figure_formats(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    formats = tuple(f.strip().lower() for f in value.split(",") if f.strip())
    for f in formats:
        if f not in ("png", "svg", "pdf"):
            raise InputError(f"expected a comma-separated list of png, svg, pdf, got {f!r}", field="--figures")
    return formats


# ---------------------------------------------------------------- explain


@command(main_group, "explain", short="one pod, every node, every plugin: verdicts and scores",
         examples=["kubesched explain --snapshot examples/cluster/snapshot.yaml --pod shop/web-7d9f-new"],
         doc="docs/scheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--pod", "pod_key", required=True, metavar="NS/NAME", help="the pod to explain")
@click.option("--metrics", type=click.Path(), default=None, help="load-watcher WatcherMetrics for load-aware plugins")
@_plugins_option
@NOW
@SEED
@output_option
def explain_cmd(snapshot: str, config: str | None, pod_key: str, metrics: str | None, plugins: tuple[str, ...],
                now: str | None, seed: int, output: str) -> None:
    """One pod, every node, every plugin: Filter verdicts with upstream's reasons, then the raw, normalized
    and weighted score of every feasible node (nodes that fail Filter are not scored, as upstream)."""

    def run() -> None:
        from kubesched.report.text import explain_table
        from kubesched.scheduler.explain import explain

        sched, _ = _scheduler_inputs(snapshot, config, metrics, parse_now(now), seed, plugins)
        pod = _find_pod(sched, pod_key)
        emit(output, explain(sched, pod), explain_table)

    _run(run)


# ---------------------------------------------------------------- schedule


@command(main_group, "schedule", short="place every pending pod through the scheduling queue",
         examples=["kubesched schedule --snapshot examples/cluster/snapshot.yaml",
                   "kubesched schedule --snapshot examples/cluster/snapshot.yaml --config examples/cluster/bin-packing.yaml"],
         doc="docs/scheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--metrics", type=click.Path(), default=None, help="load-watcher WatcherMetrics for load-aware plugins")
@_plugins_option
@NOW
@SEED
@output_option
def schedule_cmd(snapshot: str, config: str | None, metrics: str | None, plugins: tuple[str, ...],
                 now: str | None, seed: int, output: str) -> None:
    """Place every pending pod through the scheduling queue (priority order, backoff, preemption), binding
    each before the next; unplaced pods show upstream's FitError message."""

    def run() -> None:
        from kubesched.report.text import schedule_table
        from kubesched.scheduler.oneshot import schedule_all

        sched, clock = _scheduler_inputs(snapshot, config, metrics, parse_now(now), seed, plugins)
        emit(output, schedule_all(sched, clock), schedule_table)

    _run(run)


# ---------------------------------------------------------------- capacity


@command(main_group, "capacity", short="how many more copies of a pod fit (cluster-capacity)",
         examples=["kubesched capacity --snapshot examples/cluster/snapshot.yaml --pod-template examples/cluster/web-pod.yaml"],
         doc="docs/scheduler.md")
@click.option("--snapshot", required=True, type=click.Path(), help="cluster objects (kubectl get -o yaml)")
@click.option("--pod-template", "template", required=True, type=click.Path(),
              help="a Pod to copy, or a workload (Deployment, StatefulSet, ...) whose pod to copy")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (default profile if absent)")
@click.option("--max", "max_limit", type=int, default=0, help="stop after this many copies (0: no limit)")
@_plugins_option
@NOW
@SEED
@output_option
def capacity_cmd(snapshot: str, template: str, config: str | None, max_limit: int, plugins: tuple[str, ...],
                 now: str | None, seed: int, output: str) -> None:
    """How many more copies of a pod fit, and on which nodes (the job of cluster-capacity): copies are
    scheduled one by one until one does not fit."""

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


@command(main_group, "deschedule", short="one descheduling cycle: the evictions it would make",
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
def deschedule_cmd(snapshot: str, policy: str, metrics: str | None, min_ready_nodes: int,
                   scheduler_config: str | None, enforce_pdbs: bool, now: str | None, seed: int, output: str) -> None:
    """One descheduling cycle of a DeschedulerPolicy (or koordinator DeschedulerConfiguration) on a
    snapshot: the evictions it would make, computed and not made, with each node's utilisation."""

    def run() -> None:
        from kubesched.descheduler.command import deschedule_command, deschedule_table

        when = parse_now(now)
        emit(output, deschedule_command(snapshot=load_cluster(snapshot, when, seed), policy=policy, metrics=metrics,
                                        min_ready_nodes=min_ready_nodes, scheduler_config=scheduler_config,
                                        now=when, seed=seed, enforce_pdbs=enforce_pdbs), deschedule_table)

    _run(run)


# ---------------------------------------------------------------- kubelet


@command(main_group, "node-pressure", short="the kubelet's node-pressure evictions, step by step",
         examples=["kubesched node-pressure --kubelet-config examples/kubelet/kubelet-config.yaml "
                   "--snapshot examples/kubelet/snapshot.yaml --timeline examples/kubelet/timeline.json "
                   "--now 2025-06-01T12:00:00Z"],
         doc="docs/kubelet.md")
@click.option("--kubelet-config", required=True, type=click.Path(), help="KubeletConfiguration")
@click.option("--snapshot", type=click.Path(), default=None, help="the node and its pods")
@click.option("--timeline", type=click.Path(), default=None, help="JSON list of {at, stats} steps (Summary API)")
@NOW
@output_option
def node_pressure_cmd(kubelet_config: str, snapshot: str | None, timeline: str | None, now: str | None,
                      output: str) -> None:
    """The kubelet's node-pressure eviction manager on one node, one synchronize per timeline step
    (Summary API stats): thresholds met, node conditions, evictions, admission."""

    def run() -> None:
        from kubesched.kubelet.command import node_pressure_command, node_pressure_table

        when = parse_now(now)
        snap = load_cluster(snapshot, when, 0) if snapshot else None
        emit(output, node_pressure_command(kubelet_config=kubelet_config, snapshot=snap, timeline=timeline,
                                           now=when), node_pressure_table)

    _run(run)


@command(main_group, "qos", short="QoS class and oom_score_adj of every pod",
         examples=["kubesched qos --snapshot examples/kubelet/snapshot.yaml"], doc="docs/kubelet.md")
@click.option("--snapshot", required=True, type=click.Path(), help="pods (and their nodes)")
@NOW
@output_option
def qos_cmd(snapshot: str, now: str | None, output: str) -> None:
    """QoS class and oom_score_adj of every pod."""

    def run() -> None:
        from kubesched.kubelet.command import qos_command, qos_table

        when = parse_now(now)
        emit(output, qos_command(snapshot=load_cluster(snapshot, when, 0), now=when), qos_table)

    _run(run)


# ---------------------------------------------------------------- convert


@command(main_group, "convert", short="an old scheduler config or policy in the current version",
         examples=["kubesched convert examples/cluster/scheduler-config-v1beta3.yaml"], doc="docs/convert.md")
@click.argument("file", type=click.Path())
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="the converted document as YAML (the notes as comments at the top) or JSON")
@click.option("--out", "out_file", type=click.Path(), default=None, help="write to this file instead of stdout")
def convert_cmd(file: str, output: str, out_file: str | None) -> None:
    """Convert KubeSchedulerConfiguration v1beta1/v1beta2/v1beta3 to v1, or DeschedulerPolicy v1alpha1 to
    v1alpha2, as the components converted them. The output is the converted document itself (-o yaml|json),
    not a table."""

    def run() -> None:
        from kubesched.config.convert_command import convert_file
        from kubesched.descheduler.registry import default_registry
        from kubesched.output import atomic_write_text, check_output_file

        if out_file is not None:
            check_output_file(out_file)
        text = convert_file(file, default_registry(), output)
        if out_file is None:
            sys.stdout.write(text)
        else:
            atomic_write_text(out_file, text)

    _run(run)


# ---------------------------------------------------------------- tune and sweep (kubesched.tune)

ENGINE = click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                      help="local process pool, or Ray tasks (pip install 'kubesched[ray]')")
ADDRESS = click.option("--address", default=None, metavar="ADDRESS",
                       help="an existing Ray cluster (as ray.init takes it); without it --engine ray starts a local one")
WORKERS = click.option("--workers", type=click.IntRange(min=1), default=None,
                       help="local processes, or CPUs of a Ray instance started here (default: one per core)")


@command(main_group, "tune", short="search descheduler/scheduler settings (Pareto front)",
         examples=["kubesched tune examples/hotspots/scenario.yaml --space examples/hotspots/tune.yaml "
                   "--out out/tune"], doc="docs/tune.md")
@click.argument("scenario", type=click.Path())
@click.option("--space", required=True, type=click.Path(), help="TuneSpace: the parameters, objectives and constraints")
@click.option("--out", default="out/tune", show_default=True, type=click.Path(),
              help="folder for the study (resumable), the chosen documents and report.html")
@click.option("--trials", type=click.IntRange(min=1), default=None, help="trials in the study (default: the space's)")
@click.option("--seeds", type=click.IntRange(min=1), default=None, help="seeds per trial (default: the space's)")
@click.option("--seed", "sampler_seed", type=int, default=None, help="the sampler's seed (default: the space's)")
@ENGINE
@ADDRESS
@WORKERS
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
@click.option("--progress/--no-progress", default=None, help="progress bar on stderr (default: when a terminal)")
@output_option
def tune_cmd(scenario: str, space: str, out: str, trials: int | None, seeds: int | None, sampler_seed: int | None,
             engine: str, address: str | None, workers: int | None, as_json: bool, progress: bool | None,
             output: str) -> None:
    """Search scheduler/descheduler settings for the Pareto front of the scenario's objectives (Optuna)."""

    def run() -> None:
        from kubesched.tune.command import tune_command
        from kubesched.tune.engines import EngineError
        from kubesched.tune.study import TuneOptions

        try:
            tune_command(scenario, space, out, TuneOptions(trials, seeds, engine, address, workers, sampler_seed),
                         as_json or output == "json", progress)
        except EngineError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    _run(run)


@command(main_group, "sweep", short="a grid of runs into one Parquet dataset",
         examples=["kubesched sweep examples/openb/sweep.yaml --out out/openb-sweep"], doc="docs/tune.md")
@click.argument("sweep_file", metavar="SWEEP", type=click.Path())
@click.option("--out", default="out/sweep", show_default=True, type=click.Path(),
              help="folder for the Parquet dataset (runs/), summary.csv and report.html")
@ENGINE
@ADDRESS
@WORKERS
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as -o json (kept for scripts)")
@click.option("--progress/--no-progress", default=None, help="progress bar on stderr (default: when a terminal)")
@output_option
def sweep_cmd(sweep_file: str, out: str, engine: str, address: str | None, workers: int | None, as_json: bool,
              progress: bool | None, output: str) -> None:
    """Run a grid of scenarios × variants × parameter values × seeds, each once, into one Parquet dataset."""

    def run() -> None:
        from kubesched.tune.command import sweep_command
        from kubesched.tune.engines import EngineError

        try:
            sweep_command(sweep_file, out, engine, address, workers, as_json or output == "json", progress)
        except EngineError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)

    _run(run)


# ---------------------------------------------------------------- capture (a live cluster → a scenario)


@command(main_group, "capture", short="a live cluster and its usage history into a scenario",
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
def capture_cmd(kubeconfig: str | None, context: str | None, out: str, fmt: str, prometheus: str | None,
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
            raise InputError(f"capture needs the kubernetes client ({e.name} is missing): "
                             f"pip install 'kubesched[live]'") from None
        data = capture_command(kubeconfig=kubeconfig, context=context, out=out, fmt=fmt, prometheus=prometheus,
                               prometheus_token_file=prometheus_token_file, since=since, step=step,
                               queries={"cpu": cpu, "memory": memory, "node_cpu": node_cpu, "node_memory": node_memory},
                               max_points=max_points, page_size=page_size, request_timeout=request_timeout,
                               max_retries=max_retries, duration=duration, now=now, tables=tables, progress=progress)
        emit("json" if as_json else output, data, capture_table)

    _run(run)


# ---------------------------------------------------------------- live: scheduler and descheduler processes


def _live_options(port: int, lease: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The flags both live processes take, named as kube-scheduler's and the descheduler's."""
    opts = [
        click.option("--kubeconfig", type=click.Path(), default=None,
                     help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the pod's service account)"),
        click.option("--context", default=None, help="the kubeconfig context to use"),
        click.option("--leader-elect/--no-leader-elect", default=False, show_default=True,
                     help="run only while holding a coordination.k8s.io/v1 Lease"),
        click.option("--leader-elect-lease-duration", "lease_duration", default="15s", show_default=True),
        click.option("--leader-elect-renew-deadline", "renew_deadline", default="10s", show_default=True),
        click.option("--leader-elect-retry-period", "retry_period", default="2s", show_default=True),
        click.option("--leader-elect-resource-name", "lease_name", default=lease, show_default=True),
        click.option("--leader-elect-resource-namespace", "lease_namespace", default="kube-system", show_default=True),
        click.option("--bind-address", default="0.0.0.0", show_default=True, help="address of /healthz /readyz /metrics"),
        click.option("--port", type=click.IntRange(0, 65535), default=port, show_default=True,
                     help="port of /healthz /readyz /metrics (plain HTTP; 0: off)"),
        click.option("-v", "--v", "verbosity", type=click.IntRange(0, 10), default=0, show_default=True,
                     help="log verbosity"),
        click.option("--logging-format", type=click.Choice(["text", "json"]), default="text", show_default=True),
        click.option("--request-timeout", default="30s", show_default=True, metavar="DURATION"),
    ]

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        for o in reversed(opts):
            f = o(f)
        return f

    return wrap


def _flag_duration(value: str, flag: str) -> float:
    """A duration flag in seconds: a Go duration ("30s", "2m", "0"), never negative."""
    return read_duration_seconds(value, flag, example="30s or 2m", negative=False)


def _process_options(kw: dict[str, Any]) -> Any:
    from kubesched.live.process import ProcessOptions

    for k, flag in (("lease_duration", "leader-elect-lease-duration"), ("renew_deadline", "leader-elect-renew-deadline"),
                    ("retry_period", "leader-elect-retry-period"), ("request_timeout", "request-timeout")):
        kw[k] = _flag_duration(kw[k], f"--{flag}")
    return ProcessOptions(**kw)


@command(main_group, "scheduler", short="a second scheduler for a live cluster",
         examples=["kubesched scheduler --kubeconfig ~/.kube/config --config scheduler-config.yaml"],
         doc="docs/live.md")
@click.option("--config", type=click.Path(), default=None, help="KubeSchedulerConfiguration (its profiles' schedulerNames)")
@click.option("--metrics", default=None, metavar="SOURCE",
              help="usage for load-aware plugins: metrics.k8s.io, a load-watcher URL, prometheus+URL, or a file")
@click.option("--metrics-interval", default="30s", show_default=True, metavar="DURATION", help="how often to read it")
@_plugins_option
@SEED
@_live_options(10259, "kubesched-scheduler")
def scheduler_cmd(config: str | None, metrics: str | None, metrics_interval: str, plugins: tuple[str, ...], seed: int,
                  **kw: Any) -> None:
    """Run as a second scheduler of a live cluster: bind the pods whose schedulerName a profile serves."""

    def run() -> None:
        from kubesched.live.scheduler_process import SchedulerOptions, run_scheduler

        opts = SchedulerOptions(config=config, seed=seed, metrics=metrics, plugins=plugins,
                                metrics_interval=_flag_duration(metrics_interval, "--metrics-interval"))
        sys.exit(run_scheduler(_process_options(kw), opts))

    _run(run)


@command(main_group, "descheduler", short="the descheduler against a live cluster",
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
@_live_options(10258, "descheduler")
def descheduler_cmd(policy: str, interval: str, dry_run: bool, metrics: str | None, min_ready_nodes: int,
                    scheduler_config: str | None, sync_timeout: str, seed: int, output: str, **kw: Any) -> None:
    """Run the descheduler against a live cluster: one cycle, or a cycle every --descheduling-interval."""

    def run() -> None:
        from kubesched.live.descheduler_process import DeschedulerOptions, run_descheduler

        opts = DeschedulerOptions(policy=policy, interval=_flag_duration(interval, "--descheduling-interval"),
                                  dry_run=dry_run, metrics=metrics, min_ready_nodes=min_ready_nodes,
                                  scheduler_config=scheduler_config, seed=seed, output=output,
                                  sync_timeout=_flag_duration(sync_timeout, "--sync-timeout"))
        sys.exit(run_descheduler(_process_options(kw), opts))

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
    except RuntimeFailure as e:
        click.echo(f"error: {e}", err=True)
        return 1
    except SystemExit as e:
        return int(e.code or 0) if isinstance(e.code, int) else 1
    return 0

"""The command line: every command reads real documents and prints a table, or one JSON or YAML document.

Each command is a module of `kubesched.commands` (`kubesched.commands.simulate` defines `kubesched
simulate`, as `cli`), imported only when it runs: `COMMANDS` names each one's module and the one line
`kubesched --help` lists for it, so the list and a bad command name need none of them (click's "lazily
loading subcommands"). A new command is a module there, built with the conventions of
`kubesched.commands.common` (help with examples, -o table|json|yaml, exit codes), and a line in `COMMANDS`.
"""

from __future__ import annotations

import importlib
import signal
from typing import Any

import click

from kubesched.commands.common import EXIT_CODES
from kubesched.errors import InputError, RuntimeFailure

SHORT_HELP_LIMIT = 60  # the list of commands is never truncated in an 80-column terminal

# name → (the module defining it as `cli`, the line `kubesched --help` lists: at most SHORT_HELP_LIMIT
# characters), in the order of the list (the order of the README's table).
COMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("kubesched.commands.simulate", "scheduler, descheduler, kubelets over time; compare variants"),
    "explain": ("kubesched.commands.explain", "one pod, every node, every plugin: verdicts and scores"),
    "schedule": ("kubesched.commands.schedule", "place every pending pod through the scheduling queue"),
    "capacity": ("kubesched.commands.capacity", "how many more copies of a pod fit (cluster-capacity)"),
    "deschedule": ("kubesched.commands.deschedule", "one descheduling cycle: the evictions it would make"),
    "node-pressure": ("kubesched.commands.node_pressure", "the kubelet's node-pressure evictions, step by step"),
    "qos": ("kubesched.commands.qos", "QoS class and oom_score_adj of every pod"),
    "convert": ("kubesched.commands.convert", "an old scheduler config or policy in the current version"),
    "tune": ("kubesched.commands.tune", "search descheduler/scheduler settings (Pareto front)"),
    "sweep": ("kubesched.commands.sweep", "a grid of runs into one Parquet dataset"),
    "capture": ("kubesched.commands.capture", "a live cluster and its usage history into a scenario"),
    "scheduler": ("kubesched.commands.scheduler", "a second scheduler for a live cluster"),
    "descheduler": ("kubesched.commands.descheduler", "the descheduler against a live cluster"),
}


class _BadUsage(click.ClickException):
    """A bad option or argument, said in one line like every other bad input (exit 2)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class _Group(click.Group):
    """The commands of `COMMANDS`, each imported when it runs; usage errors in one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        cmd = importlib.import_module(COMMANDS[cmd_name][0]).cli
        assert isinstance(cmd, click.Command) and cmd.name == cmd_name, COMMANDS[cmd_name][0]
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The list from the table: `kubesched --help` imports no command (click's would import them all).
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in COMMANDS.items()])

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

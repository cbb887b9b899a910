"""The conventions every command follows; new commands get them from the helpers here.

- `@command(name, examples=[...], doc="docs/x.md")` makes a click command whose help ends with runnable
  examples, its doc and the exit codes. The one line `kubesched --help` lists for it is in `kubesched.cli`'s
  table, so that the list is printed without importing any command.
- `@output_option` adds `-o/--output table|json|yaml`; `emit(output, data, table)` prints `data` as one
  JSON or YAML document on stdout, or calls `table(data)` for people.
- `run_command(fn)` turns `InputError` into one line on stderr and exit 2, `RuntimeFailure` into one line
  and exit 1, Ctrl-C (and SIGTERM) into exit 130, anything unforeseen into one line and exit 1
  (`KUBESCHED_DEBUG=1` shows the traceback); nothing is written on stdout unless the command succeeded. It
  collects the warnings (`kubesched.diagnostics`) the command raises: each is printed on stderr, and `emit`
  adds them to the JSON or YAML document under `warnings`.
- A bad option or argument is one line and exit 2 like any other bad input (`kubesched.cli`).
- `@NOW` (`--now RFC3339`, the clock; `commands.inputs.parse_now` reads it) and `@SEED` (`--seed`, the
  tie-breaking RNG) where time or ties matter.

This module stays light (click, PyYAML): `kubesched --help` imports it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click
import yaml

from kubesched.diagnostics import collecting, current
from kubesched.errors import InputError, RuntimeFailure

OUTPUT_FORMATS = ("table", "json", "yaml")
EXIT_CODES = "Exit codes: 0 success; 1 runtime failure (a server unreachable, a program missing); 2 bad input."


def output_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`-o/--output table|json|yaml` (the parameter `output`)."""
    return click.option("-o", "--output", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True,
                        help="table for people; json or yaml: one document on stdout for machines")(f)


OUTPUT = output_option
NOW = click.option("--now", "now", default=None, metavar="RFC3339",
                   help="the clock for everything time-dependent (default: the wall clock)")
SEED = click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="seed of the tie-breaking RNG")


def plugins_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--plugin MODULE:CLASS` (repeatable; the parameter `plugins`)."""
    return click.option("--plugin", "plugins", multiple=True, metavar="MODULE:CLASS",
                        help="load a scheduler plugin from a Python module for this run (repeatable)")(f)


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


def command(name: str, *, examples: Sequence[str], doc: str,
            **kwargs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """A click command with kubesched's help conventions (see the module docstring)."""
    return click.command(name, epilog=help_epilog(examples, doc), **kwargs)


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


def run_command(fn: Callable[[], None]) -> None:
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


# The run engines of `tune` and `sweep` (kubesched.tune.engines).
ENGINE = click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                      help="local process pool, or Ray tasks (pip install 'kubesched[ray]')")
ADDRESS = click.option("--address", default=None, metavar="ADDRESS",
                       help="an existing Ray cluster (as ray.init takes it); without it --engine ray starts a local one")
WORKERS = click.option("--workers", type=click.IntRange(min=1), default=None,
                       help="local processes, or CPUs of a Ray instance started here (default: one per core)")

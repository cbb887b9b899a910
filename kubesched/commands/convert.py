"""`kubesched convert`: an old scheduler configuration or descheduler policy in the current version
(kubesched.config.convert_command)."""

from __future__ import annotations

import sys

import click

from kubesched.commands.common import command, run_command
from kubesched.config.convert_command import convert_file
from kubesched.descheduler.registry import default_registry
from kubesched.output import atomic_write_text, check_output_file


@command("convert",
         examples=["kubesched convert examples/cluster/scheduler-config-v1beta3.yaml"], doc="docs/convert.md")
@click.argument("file", type=click.Path())
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default="yaml", show_default=True,
              help="the converted document as YAML (the notes as comments at the top) or JSON")
@click.option("--out", "out_file", type=click.Path(), default=None, help="write to this file instead of stdout")
def cli(file: str, output: str, out_file: str | None) -> None:
    """Convert KubeSchedulerConfiguration v1beta1/v1beta2/v1beta3 to v1, or DeschedulerPolicy v1alpha1 to
    v1alpha2, as the components converted them. The output is the converted document itself (-o yaml|json),
    not a table."""

    def run() -> None:
        if out_file is not None:
            check_output_file(out_file)
        text = convert_file(file, default_registry(), output)
        if out_file is None:
            sys.stdout.write(text)
        else:
            atomic_write_text(out_file, text)

    run_command(run)
